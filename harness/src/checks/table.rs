//! The table of kernel-matrix checks ([`KERNEL_CHECKS`]): what each row runs, how its output is
//! read and what it must show.

use super::Target;
use crate::guest_arch::GuestArch;

/// How a check's output is turned into hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// `--json` event lines: every stdout line that is a JSON object naming `function` is one
    /// hit; its decoded arguments are under `"args"` (object by name, or array by position).
    JsonHits,
    /// `count --json`: a JSON object per report; the hits of `function` are the number under a
    /// key containing the function's name (in `"counts"` or at the top level); the last report
    /// wins.
    JsonCounts,
    /// Only the exit status says whether it worked; no hit number.
    ExitStatus,
    /// `--json` return events (`"event":"return"`) naming `function`, each one hit; `arg_values`
    /// are read from the event's top level (`retval`).
    JsonReturns,
    /// netprobe must refuse: a non-zero exit (not the time limit) before any event is printed,
    /// and before the kernel is asked (its refusal, "the kernel refused", does not count).
    Refused,
    /// `offsets --json` lines (`{"name":..,"offset":"0x.."}`): the offset netprobe gives for
    /// every function in `offsets_of` must equal the one binutils gives ([`crate::oracle`]).
    JsonOffsets,
}

/// One end-to-end check of the kernel matrix.
#[derive(Clone, Copy, Debug)]
pub struct KernelCheck {
    /// Column name in the table.
    pub name: &'static str,
    /// One line saying what it proves.
    pub what: &'static str,
    /// The netprobe subcommand it needs.
    pub subcommand: &'static str,
    /// The traced program, if any.
    pub target: Option<Target>,
    /// netprobe's arguments; `{target}` is replaced by the target's path on the system under
    /// test, `{target_name}` by its file name, `{pid}` by the pid of the background target.
    pub args: &'static [&'static str],
    /// When set, the target is started first with these arguments and runs in the background
    /// while netprobe runs (killed afterwards); `{pid}` in `args` is its pid.
    pub background: Option<&'static [&'static str]>,
    /// How hits are read from the output.
    pub reading: Reading,
    /// The function whose hits are counted (substring of the name netprobe prints).
    pub function: &'static str,
    /// Hits expected; `None` for [`Reading::ExitStatus`].
    pub hits: Option<u64>,
    /// Decoded arguments every hit must carry: (name or 0-based position, decimal value).
    pub arg_values: &'static [(&'static str, &'static str)],
    /// Time limit for the whole netprobe run.
    pub timeout_secs: u64,
    /// Functions whose offsets [`Reading::JsonOffsets`] compares, or that `{offset:F+N}` in
    /// `args` names (the arm64 agent replaces it by F's nm+readelf offset plus N, in hex).
    pub offsets_of: &'static [&'static str],
}

const C_STATIC: Target = Target::harness_calls_c("harness_calls_static", &["-static", "-O2"], X86);
const C_STATIC_PIE: Target =
    Target::harness_calls_c("harness_calls_static_pie", &["-static-pie", "-O2"], X86);
const GO_STATIC: Target = Target::harness_calls_go("harness_calls_go", X86, false);
const X86: GuestArch = GuestArch::X86_64;

/// Every check the kernel matrix runs, in table order. The counts and values in `args` are the
/// ones the targets are told to use (`harness_calls COUNT A B`), so the expectations follow from
/// this table alone.
pub const KERNEL_CHECKS: &[KernelCheck] = &[
    KernelCheck {
        name: "demo",
        what: "`netprobe demo`: netprobe traces a child of its own binary end to end",
        subcommand: "demo",
        target: None,
        args: &["demo"],
        reading: Reading::ExitStatus,
        function: "",
        hits: None,
        arg_values: &[],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-pie offsets",
        what: "static-pie C running (ASLR): `offsets PID` equals nm + readelf",
        subcommand: "offsets",
        target: Some(C_STATIC_PIE),
        args: &[
            "offsets",
            "{pid}",
            "{target_name}",
            "np_harness_*",
            "--json",
        ],
        background: Some(&["--on-signal", "1", "2", "3"]),
        reading: Reading::JsonOffsets,
        function: "",
        hits: None,
        arg_values: &[],
        timeout_secs: 60,
        offsets_of: &["np_harness_add", "np_harness_other"],
    },
    KernelCheck {
        name: "go offsets",
        what: "static Go running: `offsets PID` equals nm + readelf",
        subcommand: "offsets",
        target: Some(GO_STATIC),
        args: &[
            "offsets",
            "{pid}",
            "{target_name}",
            "main.npHarnessAdd",
            "--json",
        ],
        background: Some(&["--on-signal", "1", "2", "3"]),
        reading: Reading::JsonOffsets,
        function: "",
        hits: None,
        arg_values: &[],
        timeout_secs: 60,
        offsets_of: &["main.npHarnessAdd"],
    },
    KernelCheck {
        name: "c-static trace",
        what: "static C (ET_EXEC), `trace -c`: every call with both arguments",
        subcommand: "trace",
        target: Some(C_STATIC),
        args: &[
            "trace",
            "--json",
            "-c",
            "{target} 5 7 12345",
            "{target}:np_harness_add a=s64 b=s64",
        ],
        reading: Reading::JsonHits,
        function: "np_harness_add",
        hits: Some(5),
        arg_values: &[("a", "7"), ("b", "12345")],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-string trace",
        what: "static C: a `char *` argument decoded as a string (kernel `string` fetch)",
        subcommand: "trace",
        target: Some(C_STATIC),
        args: &[
            "trace",
            "--json",
            "-c",
            "{target} 3 0 0",
            "{target}:np_harness_echo msg=string",
        ],
        background: None,
        reading: Reading::JsonHits,
        function: "np_harness_echo",
        hits: Some(3),
        arg_values: &[("msg", "netprobe-harness")],
        timeout_secs: 120,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-array trace",
        what:
            "static C: a u16[4] array fetch (what .NET `utf16` and Go `gostring` decoding rest on)",
        subcommand: "trace",
        target: Some(C_STATIC),
        args: &[
            "trace",
            "--json",
            "-c",
            "{target} 3 0 0",
            "{target}:np_harness_echo w=+0(%si):u16[4]",
        ],
        background: None,
        reading: Reading::JsonHits,
        function: "np_harness_echo",
        hits: Some(3),
        // u"netp": the kernel's own text output shows `w={110,101,116,112}`.
        arg_values: &[("w", "[110,101,116,112]")],
        timeout_secs: 120,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-pie trace",
        what: "static-pie C (ET_DYN), `trace -c`: every call with both arguments",
        subcommand: "trace",
        target: Some(C_STATIC_PIE),
        args: &[
            "trace",
            "--json",
            "-c",
            "{target} 6 -3 99",
            "{target}:np_harness_add a=s64 b=s64",
        ],
        reading: Reading::JsonHits,
        function: "np_harness_add",
        hits: Some(6),
        arg_values: &[("a", "-3"), ("b", "99")],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-section count",
        what: "function in its own executable section (not .text), `count -c`",
        subcommand: "count",
        target: Some(C_STATIC),
        args: &[
            "count",
            "--json",
            "-c",
            "{target} 9 1 2",
            "{target}:np_harness_other",
        ],
        reading: Reading::JsonCounts,
        function: "np_harness_other",
        hits: Some(9),
        arg_values: &[],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
    KernelCheck {
        name: "c-shared count",
        what: "three functions in one kernel event (multi-probe event, probes told apart by an immediate `np_id=\\N` fetch-arg), `count -c`",
        subcommand: "count",
        target: Some(C_STATIC),
        args: &[
            "count",
            "--json",
            "-c",
            "{target} 8 1 2",
            "{target}:np_harness_add",
            "{target}:np_harness_other",
            "{target}:np_harness_echo",
        ],
        reading: Reading::JsonCounts,
        function: "np_harness_other",
        hits: Some(8),
        arg_values: &[],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
    KernelCheck {
        name: "go trace",
        what: "static Go (register ABI), `trace -c`: every call with both arguments",
        subcommand: "trace",
        target: Some(GO_STATIC),
        args: &[
            "trace",
            "--json",
            "-c",
            "{target} 4 21 34",
            "{target}:main.npHarnessAdd a=s64 b=s64",
        ],
        reading: Reading::JsonHits,
        function: "npHarnessAdd",
        hits: Some(4),
        arg_values: &[("a", "21"), ("b", "34")],
        timeout_secs: 120,
        background: None,
        offsets_of: &[],
    },
];

/// The table a guest of `arch` runs: [`KERNEL_CHECKS`] on x86-64, [`super::ARM64_CHECKS`] on
/// aarch64.
pub fn checks_for(arch: GuestArch) -> &'static [KernelCheck] {
    match arch {
        GuestArch::X86_64 => KERNEL_CHECKS,
        GuestArch::Aarch64 => super::ARM64_CHECKS,
    }
}

/// The targets the checks of `arch` need, each once.
pub fn targets(arch: GuestArch) -> Vec<Target> {
    let mut t: Vec<Target> = Vec::new();
    for c in checks_for(arch) {
        if let Some(target) = c.target {
            if !t.contains(&target) {
                t.push(target);
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_targets_named_once() {
        for arch in [GuestArch::X86_64, GuestArch::Aarch64] {
            let table = checks_for(arch);
            let mut names: Vec<_> = table.iter().map(|c| c.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), table.len());
            let mut keys: Vec<_> = targets(arch).iter().map(|t| t.key()).collect();
            keys.sort();
            let n = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), n);
        }
        // The two tables' targets never share a file name (they share the fixtures folder).
        let x86: Vec<_> = targets(GuestArch::X86_64).iter().map(|t| t.key()).collect();
        assert!(targets(GuestArch::Aarch64)
            .iter()
            .all(|t| !x86.contains(&t.key())));
    }
}
