//! The checks an arm64 guest runs ([`ARM64_CHECKS`]): the x86-64 table's checks on the same
//! programs cross-built for aarch64 (same names, so the matrix lines them up), plus what the
//! aarch64 rules must show live: return values by RET probes (the `ret` sites netprobe finds in
//! A64 code), a stripped Go build, a raw `p` uprobe at a function's nm offset counting exact hits,
//! and a raw offset 2 bytes into an instruction refused. The agent adds `clean` (nothing left in
//! uprobe_events after the checks; crate::arm64_guest).
//!
//! Registers in raw fetch-args are the kernel's arm64 names (`%x1`: the second AAPCS64 argument;
//! kernel `arch/arm64/kernel/ptrace.c`, `regoffset_table`).

use super::table::{KernelCheck, Reading};
use super::Target;
use crate::guest_arch::GuestArch;

const ARM64: GuestArch = GuestArch::Aarch64;
const C_STATIC: Target =
    Target::harness_calls_c("harness_calls_static_arm64", &["-static", "-O2"], ARM64);
const C_STATIC_PIE: Target = Target::harness_calls_c(
    "harness_calls_static_pie_arm64",
    &["-static-pie", "-O2"],
    ARM64,
);
const GO: Target = Target::harness_calls_go("harness_calls_go_arm64", ARM64, false);
const GO_STRIPPED: Target =
    Target::harness_calls_go("harness_calls_go_arm64_stripped", ARM64, true);

/// `trace -c` of a Go target's `main.npHarnessAdd`: every one of the 4 calls with both
/// arguments (21 and 34).
const fn go_add_traced(name: &'static str, what: &'static str, target: Target) -> KernelCheck {
    KernelCheck {
        function: "npHarnessAdd",
        hits: Some(4),
        arg_values: &[("a", "21"), ("b", "34")],
        ..check(
            name,
            what,
            "trace",
            target,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 4 21 34",
                "{target}:main.npHarnessAdd a=s64 b=s64",
            ],
            Reading::JsonHits,
        )
    }
}

/// A check with the fields most rows leave at their defaults.
const fn check(
    name: &'static str,
    what: &'static str,
    subcommand: &'static str,
    target: Target,
    args: &'static [&'static str],
    reading: Reading,
) -> KernelCheck {
    KernelCheck {
        name,
        what,
        subcommand,
        target: Some(target),
        args,
        background: None,
        reading,
        function: "",
        hits: None,
        arg_values: &[],
        timeout_secs: 180,
        offsets_of: &[],
    }
}

/// Every check of an arm64 row, in table order (the counts and values are the ones the targets
/// are told to use: `harness_calls COUNT A B`).
pub const ARM64_CHECKS: &[KernelCheck] = &[
    KernelCheck {
        target: None,
        ..check(
            "demo",
            "`netprobe demo`: netprobe traces a child of its own binary end to end",
            "demo",
            C_STATIC,
            &["demo"],
            Reading::ExitStatus,
        )
    },
    KernelCheck {
        background: Some(&["--on-signal", "1", "2", "3"]),
        offsets_of: &["np_harness_add", "np_harness_other"],
        ..check(
            "c-pie offsets",
            "static-pie C running (ASLR): `offsets PID` equals nm + readelf",
            "offsets",
            C_STATIC_PIE,
            &[
                "offsets",
                "{pid}",
                "{target_name}",
                "np_harness_*",
                "--json",
            ],
            Reading::JsonOffsets,
        )
    },
    KernelCheck {
        background: Some(&["--on-signal", "1", "2", "3"]),
        offsets_of: &["main.npHarnessAdd"],
        ..check(
            "go offsets",
            "static Go running: `offsets PID` equals nm + readelf",
            "offsets",
            GO,
            &[
                "offsets",
                "{pid}",
                "{target_name}",
                "main.npHarnessAdd",
                "--json",
            ],
            Reading::JsonOffsets,
        )
    },
    KernelCheck {
        offsets_of: &["np_harness_add"],
        function: "harness_calls",
        hits: Some(7),
        ..check(
            "c raw offset",
            "a raw `IMAGE:0xOFFSET` probe at np_harness_add's nm+readelf offset counts every call",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 7 1 2",
                "{target}:{offset:np_harness_add+0}",
            ],
            Reading::JsonHits,
        )
    },
    KernelCheck {
        offsets_of: &["np_harness_add"],
        ..check(
            "c mid-insn refused",
            "a raw offset 2 bytes into an A64 instruction is refused, nothing placed",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 3 1 2",
                "{target}:{offset:np_harness_add+2}",
            ],
            Reading::Refused,
        )
    },
    KernelCheck {
        function: "np_harness_add",
        hits: Some(5),
        arg_values: &[("a", "7"), ("b", "12345")],
        ..check(
            "c-static trace",
            "static C (ET_EXEC), `trace -c`: every call with both arguments (x0, x1)",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 5 7 12345",
                "{target}:np_harness_add a=s64 b=s64",
            ],
            Reading::JsonHits,
        )
    },
    KernelCheck {
        function: "np_harness_echo",
        hits: Some(3),
        arg_values: &[("msg", "netprobe-harness")],
        ..check(
            "c-string trace",
            "static C: a `char *` argument decoded as a string (kernel `string` fetch)",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 3 0 0",
                "{target}:np_harness_echo msg=string",
            ],
            Reading::JsonHits,
        )
    },
    KernelCheck {
        function: "np_harness_echo",
        hits: Some(3),
        arg_values: &[("w", "[110,101,116,112]")],
        ..check(
            "c-array trace",
            "static C: a u16[4] array fetch through the second argument register (%x1)",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 3 0 0",
                "{target}:np_harness_echo w=+0(%x1):u16[4]",
            ],
            Reading::JsonHits,
        )
    },
    KernelCheck {
        function: "np_harness_add",
        hits: Some(6),
        arg_values: &[("a", "-3"), ("b", "99")],
        ..check(
            "c-pie trace",
            "static-pie C (ET_DYN), `trace -c`: every call with both arguments",
            "trace",
            C_STATIC_PIE,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 6 -3 99",
                "{target}:np_harness_add a=s64 b=s64",
            ],
            Reading::JsonHits,
        )
    },
    KernelCheck {
        function: "np_harness_add",
        hits: Some(4),
        arg_values: &[("retval", "42")],
        ..check(
            "c ret",
            "static C: `r:` probes at np_harness_add's `ret` sites give every return value (x0)",
            "trace",
            C_STATIC,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 4 20 22",
                "r:{target}:np_harness_add s64",
            ],
            Reading::JsonReturns,
        )
    },
    KernelCheck {
        function: "np_harness_other",
        hits: Some(9),
        ..check(
            "c-section count",
            "function in its own executable section (not .text), `count -c`",
            "count",
            C_STATIC,
            &[
                "count",
                "--json",
                "-c",
                "{target} 9 1 2",
                "{target}:np_harness_other",
            ],
            Reading::JsonCounts,
        )
    },
    KernelCheck {
        function: "np_harness_other",
        hits: Some(8),
        ..check(
            "c-shared count",
            "three functions in one kernel event (probes told apart by an immediate fetch-arg)",
            "count",
            C_STATIC,
            &[
                "count",
                "--json",
                "-c",
                "{target} 8 1 2",
                "{target}:np_harness_add",
                "{target}:np_harness_other",
                "{target}:np_harness_echo",
            ],
            Reading::JsonCounts,
        )
    },
    go_add_traced(
        "go trace",
        "static Go (arm64 register ABI: R0, R1), `trace -c`: every call with both arguments",
        GO,
    ),
    go_add_traced(
        "go-stripped trace",
        "stripped Go (pclntab only), `trace -c`: every call with both arguments",
        GO_STRIPPED,
    ),
    KernelCheck {
        function: "npHarnessAdd",
        hits: Some(4),
        arg_values: &[("retval", "55")],
        ..check(
            "go ret",
            "static Go: `r:` probes give every return value (R0)",
            "trace",
            GO,
            &[
                "trace",
                "--json",
                "-c",
                "{target} 4 21 34",
                "r:{target}:main.npHarnessAdd s64",
            ],
            Reading::JsonReturns,
        )
    },
];
