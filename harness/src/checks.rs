//! THE table of netprobe's own end-to-end checks that the kernel matrix runs in every kernel
//! (and on the host), and how their outputs are read. To add a check, add a row to
//! [`KERNEL_CHECKS`]; the Docker checks are in [`crate::docker_checks::DOCKER_CHECKS`].
//!
//! Every row runs the real `netprobe` binary: netprobe itself resolves the function and places the
//! probes; nothing here writes `uprobe_events`. A check whose subcommand the binary does not have
//! yet fails with that reason (it never disappears from the table and never passes).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A program a check traces. Each is built on the host (and copied into the initramfs under
/// `/fixtures/<key>`), so the guest runs the very same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `fixtures/c/<source>.c` built with `flags` by `fixtures::CProgram`.
    C {
        /// File name under `/fixtures` in the guest.
        key: &'static str,
        /// Source name (without `.c`).
        source: &'static str,
        /// Compiler flags (`-static` or `-static-pie`: the guest has no loader for others).
        flags: &'static [&'static str],
    },
    /// `fixtures/go/<dir>` built with `CGO_ENABLED=0 go build` (static).
    Go {
        /// File name under `/fixtures` in the guest.
        key: &'static str,
        /// Folder under `fixtures/go/`.
        dir: &'static str,
    },
}

impl Target {
    /// The file name of the built program under `/fixtures` in the guest.
    pub fn key(&self) -> &'static str {
        match self {
            Target::C { key, .. } | Target::Go { key, .. } => key,
        }
    }

    /// Builds the program on the host and returns its path. Errors say what is missing.
    pub fn build(&self) -> Result<PathBuf, String> {
        match self {
            Target::C { source, flags, .. } => {
                let prog = fixtures::CProgram::new(source).flags(flags);
                std::panic::catch_unwind(|| prog.build())
                    .map_err(|_| format!("building fixtures/c/{source}.c {flags:?} failed (see the compiler output above)"))
            }
            Target::Go { key, dir } => build_go(key, dir),
        }
    }
}

/// Builds `fixtures/go/<dir>` into `<target>/fixtures-bin/<key>` (static, CGO off).
fn build_go(key: &str, dir: &str) -> Result<PathBuf, String> {
    let src = fixtures::workspace_root().join("fixtures/go").join(dir);
    let out_dir = fixtures::build::target_dir().join("fixtures-bin");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let out = out_dir.join(key);
    let tmp = fixtures::build::unique_tmp(&out_dir, key);
    let res = Command::new("go")
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .args(["build", "-trimpath", "-o"])
        .arg(&tmp)
        .arg(".")
        .output()
        .map_err(|e| format!("running go build (apt-get install golang-go): {e}"))?;
    if !res.status.success() {
        return Err(format!(
            "go build in {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&res.stderr).trim()
        ));
    }
    fixtures::build::put_in_place(&tmp, &out);
    Ok(out)
}

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
    /// Functions whose offsets [`Reading::JsonOffsets`] compares.
    pub offsets_of: &'static [&'static str],
}

const C_STATIC: Target = Target::C {
    key: "harness_calls_static",
    source: "harness_calls",
    flags: &["-static", "-O2"],
};
const C_STATIC_PIE: Target = Target::C {
    key: "harness_calls_static_pie",
    source: "harness_calls",
    flags: &["-static-pie", "-O2"],
};
const GO_STATIC: Target = Target::Go {
    key: "harness_calls_go",
    dir: "harness_calls",
};

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

/// The targets the checks need, each once.
pub fn targets() -> Vec<Target> {
    let mut t: Vec<Target> = Vec::new();
    for c in KERNEL_CHECKS {
        if let Some(target) = c.target {
            if !t.contains(&target) {
                t.push(target);
            }
        }
    }
    t
}

/// The outcome of one check on one system.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckResult {
    /// The check's name.
    pub check: String,
    /// True when every expectation held.
    pub ok: bool,
    /// Hits seen (None when the output gives no number).
    pub hits: Option<u64>,
    /// Why it failed, or a short note on success.
    pub detail: String,
    /// Wall time of the netprobe run.
    pub seconds: f64,
}

impl CheckResult {
    /// A failed result with `detail` as the reason.
    pub fn failed(check: &str, detail: impl Into<String>) -> CheckResult {
        CheckResult {
            check: check.to_string(),
            ok: false,
            hits: None,
            detail: detail.into(),
            seconds: 0.0,
        }
    }
}

/// Expected values per check computed on the host with tools netprobe did not write
/// (check name → function → file offset), shipped to the guest as `/fixtures/expected.json`.
pub type Expected = std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>;

/// The [`Expected`] values of every [`Reading::JsonOffsets`] check, from binutils on the host.
/// A check whose expectation cannot be computed is left out (it then fails with that reason).
pub fn expected_values(targets: &dyn Fn(&str) -> Option<PathBuf>) -> Expected {
    let mut expected = Expected::new();
    for c in KERNEL_CHECKS {
        if c.reading != Reading::JsonOffsets {
            continue;
        }
        let Some(path) = c.target.and_then(|t| targets(t.key())) else {
            continue;
        };
        match crate::oracle::elf_offsets(&path, c.offsets_of) {
            Ok(o) => {
                expected.insert(c.name.to_string(), o);
            }
            Err(e) => eprintln!("harness: no expected offsets for {}: {e:#}", c.name),
        }
    }
    expected
}

/// Runs `check` with `netprobe` on this system; `target` is the traced program's path here.
pub fn run_check(
    netprobe: &Path,
    check: &KernelCheck,
    target: Option<&Path>,
    expected: &Expected,
) -> CheckResult {
    let subcommands = crate::binaries::subcommands(netprobe);
    if !crate::binaries::has_subcommand(netprobe, check.subcommand) {
        return CheckResult::failed(
            check.name,
            format!(
                "netprobe has no `{}` subcommand yet (it has: {})",
                check.subcommand,
                if subcommands.is_empty() {
                    "none".to_string()
                } else {
                    subcommands.join(", ")
                }
            ),
        );
    }
    // A background target runs while netprobe looks at it, and is killed afterwards.
    let mut background = None;
    if let (Some(bg_args), Some(t)) = (check.background, target) {
        match Background::start(t, bg_args) {
            Ok(b) => background = Some(b),
            Err(e) => return CheckResult::failed(check.name, e),
        }
    }
    let target_path = target.map(|t| t.to_string_lossy().into_owned());
    let target_name = target
        .and_then(|t| t.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    let pid = background.as_ref().map(|b| b.pid().to_string());
    let args: Vec<String> = check
        .args
        .iter()
        .map(|a| {
            let mut a = a.to_string();
            if let Some(p) = &target_path {
                a = a.replace("{target}", p);
            }
            if let Some(n) = &target_name {
                a = a.replace("{target_name}", n);
            }
            if let Some(p) = &pid {
                a = a.replace("{pid}", p);
            }
            a
        })
        .collect();
    let started = Instant::now();
    let out = run_with_timeout(netprobe, &args, Duration::from_secs(check.timeout_secs));
    let seconds = started.elapsed().as_secs_f64();
    drop(background);
    let out = match out {
        Ok(out) => out,
        Err(e) => return CheckResult::failed(check.name, e),
    };
    let mut result = if check.reading == Reading::JsonOffsets {
        match expected.get(check.name) {
            Some(want) => evaluate_offsets(check, &out, want),
            None => CheckResult::failed(
                check.name,
                "no expected offsets (nm/readelf on the host could not compute them)",
            ),
        }
    } else {
        evaluate(check, &out)
    };
    result.seconds = seconds;
    result
}

/// A target running in the background; killed (SIGKILL) and reaped on drop.
struct Background {
    child: std::process::Child,
}

impl Background {
    /// Starts `program args` and waits until its own code is mapped (exec done).
    fn start(program: &Path, args: &[&str]) -> Result<Background, String> {
        let child = Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", program.display()))?;
        let b = Background { child };
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let maps =
                std::fs::read_to_string(format!("/proc/{}/maps", b.pid())).unwrap_or_default();
            if maps.lines().any(|l| l.ends_with(&name)) {
                return Ok(b);
            }
            if Instant::now() >= deadline {
                return Err(format!("{} never mapped its own file", program.display()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Judges `offsets --json` output against offsets from binutils.
pub fn evaluate_offsets(
    check: &KernelCheck,
    out: &RunOutput,
    want: &std::collections::BTreeMap<String, u64>,
) -> CheckResult {
    if out.code != Some(0) {
        return CheckResult::failed(
            check.name,
            format!("exit {:?}: {}", out.code, last_line(&out.stderr)),
        );
    }
    let mut got = std::collections::BTreeMap::new();
    for v in out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
    {
        let (Some(name), Some(off)) = (
            v.get("name").and_then(|n| n.as_str()),
            v.get("offset").and_then(|o| o.as_str()),
        ) else {
            continue;
        };
        if let Ok(off) = u64::from_str_radix(off.trim_start_matches("0x"), 16) {
            got.insert(name.to_string(), off);
        }
    }
    for (name, want) in want {
        match got.get(name) {
            Some(g) if g == want => {}
            Some(g) => {
                return CheckResult::failed(
                    check.name,
                    format!("{name}: netprobe says {g:#x}, nm+readelf say {want:#x}"),
                )
            }
            None => {
                return CheckResult::failed(
                    check.name,
                    format!(
                        "{name} missing from netprobe's output: {}",
                        last_line(&out.stdout)
                    ),
                )
            }
        }
    }
    CheckResult {
        check: check.name.into(),
        ok: true,
        hits: None,
        detail: format!("{} offsets equal nm+readelf", want.len()),
        seconds: 0.0,
    }
}

/// What a finished (or killed) netprobe run left.
#[derive(Clone, Debug, Default)]
pub struct RunOutput {
    /// Exit code; None when killed by a signal (the time limit included).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// True when the time limit killed it.
    pub timed_out: bool,
}

/// Runs `prog args` and kills it (SIGINT first, so netprobe cleans up; SIGKILL 5 s later) after
/// `limit`.
pub fn run_with_timeout(
    prog: &Path,
    args: &[String],
    limit: Duration,
) -> Result<RunOutput, String> {
    use std::io::Read;
    let mut child = Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", prog.display()))?;
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = so.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = se.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let mut sent_int = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for netprobe: {e}")),
        }
        let now = Instant::now();
        if now >= deadline && sent_int.is_none() {
            timed_out = true;
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            sent_int = Some(now);
        }
        if let Some(t) = sent_int {
            if now.duration_since(t) > Duration::from_secs(5) {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(RunOutput {
        code: status.code(),
        stdout: String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned(),
        timed_out,
    })
}

/// The last non-empty line of `text`, shortened, for failure reasons.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut s: String = line.chars().take(160).collect();
    if line.chars().count() > 160 {
        s.push('…');
    }
    s
}

/// Judges a finished run against the check's expectations.
pub fn evaluate(check: &KernelCheck, out: &RunOutput) -> CheckResult {
    let fail = |detail: String| CheckResult::failed(check.name, detail);
    if out.timed_out {
        return fail(format!(
            "no end within {} s; stderr: {}",
            check.timeout_secs,
            last_line(&out.stderr)
        ));
    }
    if out.code != Some(0) {
        return fail(format!(
            "exit {:?}: {}",
            out.code,
            last_line(if out.stderr.trim().is_empty() {
                &out.stdout
            } else {
                &out.stderr
            })
        ));
    }
    match check.reading {
        Reading::JsonOffsets => fail("offsets are judged by evaluate_offsets".into()),
        Reading::ExitStatus => CheckResult {
            check: check.name.into(),
            ok: true,
            hits: None,
            detail: "exit 0".into(),
            seconds: 0.0,
        },
        Reading::JsonHits => {
            let hits = json_hits(&out.stdout, check.function);
            let n = hits.len() as u64;
            if Some(n) != check.hits {
                return CheckResult {
                    hits: Some(n),
                    ..fail(format!("{n} hits, expected {}", check.hits.unwrap_or(0)))
                };
            }
            for (i, hit) in hits.iter().enumerate() {
                for (arg, want) in check.arg_values {
                    match arg_value(hit, arg) {
                        Some(got) if &got == want => {}
                        got => {
                            return CheckResult {
                                hits: Some(n),
                                ..fail(format!(
                                    "hit {i}: argument {arg} = {}, expected {want}",
                                    got.unwrap_or_else(|| "missing".into())
                                ))
                            }
                        }
                    }
                }
            }
            CheckResult {
                check: check.name.into(),
                ok: true,
                hits: Some(n),
                detail: if check.arg_values.is_empty() {
                    "count exact".into()
                } else {
                    "count and arguments exact".into()
                },
                seconds: 0.0,
            }
        }
        Reading::JsonCounts if out.stdout.contains("\"complete\":false") => fail(format!(
            "netprobe reports the counts incomplete (hits lost): {}",
            last_line(&out.stdout)
        )),
        Reading::JsonCounts => match json_count(&out.stdout, check.function) {
            Some(n) if Some(n) == check.hits => CheckResult {
                check: check.name.into(),
                ok: true,
                hits: Some(n),
                detail: "count exact".into(),
                seconds: 0.0,
            },
            Some(n) => CheckResult {
                hits: Some(n),
                ..fail(format!("count {n}, expected {}", check.hits.unwrap_or(0)))
            },
            None => fail(format!(
                "no count for {} in the output: {}",
                check.function,
                last_line(&out.stdout)
            )),
        },
    }
}

/// The JSON objects on `stdout` that name `function` in a string field.
pub fn json_hits(stdout: &str, function: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        // Return events (`"event":"return"`) are not calls.
        .filter(|v| v.get("event").and_then(|e| e.as_str()) != Some("return"))
        .filter(|v| {
            v.as_object().is_some_and(|o| {
                o.iter().any(|(k, val)| {
                    k != "args" && val.as_str().is_some_and(|s| s.contains(function))
                })
            })
        })
        .collect()
}

/// The decoded argument `arg` (a name, or a 0-based position) of a hit, as decimal text.
pub fn arg_value(hit: &serde_json::Value, arg: &str) -> Option<String> {
    let args = hit.get("args")?;
    let v = match (args, arg.parse::<usize>()) {
        (serde_json::Value::Array(a), Ok(i)) => a.get(i)?,
        (serde_json::Value::Object(o), Ok(i)) => o.get(arg).or_else(|| o.values().nth(i))?,
        (serde_json::Value::Object(o), Err(_)) => o.get(arg)?,
        _ => return None,
    };
    let v = match v {
        // A decoded string is {"length": .., "text": .., "truncated": ..}; a named value
        // {"name": .., "value": ..}.
        serde_json::Value::Object(o) => o.get("text").or_else(|| o.get("value"))?,
        other => other,
    };
    Some(match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The hit count of `function` in the last JSON report on `stdout`.
pub fn json_count(stdout: &str, function: &str) -> Option<u64> {
    let mut found = None;
    for v in stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
    {
        let scope = v.get("counts").unwrap_or(&v);
        if let Some(o) = scope.as_object() {
            for (k, n) in o {
                if k.contains(function) {
                    if let Some(n) = n.as_u64() {
                        found = Some(n);
                    }
                }
            }
        }
        if let Some(a) = scope.as_array() {
            for item in a {
                let names = item
                    .as_object()
                    .map(|o| {
                        o.values()
                            .any(|s| s.as_str().is_some_and(|s| s.contains(function)))
                    })
                    .unwrap_or(false);
                if names {
                    if let Some(n) = item.get("count").and_then(|n| n.as_u64()) {
                        found = Some(n);
                    }
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str) -> &'static KernelCheck {
        KERNEL_CHECKS.iter().find(|c| c.name == name).unwrap()
    }

    fn ok_output(stdout: &str) -> RunOutput {
        RunOutput {
            code: Some(0),
            stdout: stdout.into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_unique_and_targets_named_once() {
        let mut names: Vec<_> = KERNEL_CHECKS.iter().map(|c| c.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KERNEL_CHECKS.len());
        let keys: Vec<_> = targets().iter().map(|t| t.key()).collect();
        let mut dedup = keys.clone();
        dedup.dedup();
        assert_eq!(keys, dedup);
    }

    #[test]
    fn every_hit_needs_the_right_count_and_arguments() {
        let c = check("c-static trace");
        let hit =
            r#"{"event":"entry","function":"np_harness_add","pid":4,"args":{"a":7,"b":12345}}"#;
        let ret = r#"{"event":"return","function":"np_harness_add","pid":4,"retval":12352}"#;
        let five = std::iter::repeat_n(hit, 5).collect::<Vec<_>>().join("\n");
        let r = evaluate(c, &ok_output(&five));
        assert!(r.ok, "{r:?}");
        // Return events between the entries are not counted as calls.
        let with_returns = std::iter::repeat_n(format!("{hit}\n{ret}"), 5)
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(evaluate(c, &ok_output(&with_returns)).hits, Some(5));
        assert_eq!(r.hits, Some(5));
        let four = std::iter::repeat_n(hit, 4).collect::<Vec<_>>().join("\n");
        let r = evaluate(c, &ok_output(&four));
        assert!(!r.ok);
        assert_eq!(r.detail, "4 hits, expected 5");
        let bad = five.replacen("12345", "12346", 1);
        let r = evaluate(c, &ok_output(&bad));
        assert_eq!(r.detail, "hit 0: argument b = 12346, expected 12345");
    }

    #[test]
    fn failures_carry_their_reason() {
        let c = check("c-static trace");
        let r = evaluate(
            c,
            &RunOutput {
                code: Some(2),
                stderr: "error: unrecognized subcommand 'trace'\n\nUsage: netprobe\n".into(),
                ..Default::default()
            },
        );
        assert!(!r.ok);
        assert_eq!(r.detail, "exit Some(2): Usage: netprobe");
        let r = evaluate(
            c,
            &RunOutput {
                timed_out: true,
                ..Default::default()
            },
        );
        assert!(r.detail.starts_with("no end within 120 s"));
    }

    #[test]
    fn counts_read_from_the_last_report() {
        let c = check("c-section count");
        let out = "{\"counts\":{\"np_harness_other\":3}}\n{\"counts\":{\"harness_calls_static:np_harness_other\":9}}\n";
        let r = evaluate(c, &ok_output(out));
        assert!(r.ok, "{r:?}");
        let out = r#"{"counts":[{"function":"np_harness_other","count":8}]}"#;
        let r = evaluate(c, &ok_output(out));
        assert_eq!(r.detail, "count 8, expected 9");
    }
}
