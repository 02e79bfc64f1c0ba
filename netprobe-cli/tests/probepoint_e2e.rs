//! End-to-end tests of the cheapest equivalent entry probe point on real uprobe hits: an entry
//! probe moved from a single-stepped first instruction to an emulated one still counts every call
//! once and reads the arguments the caller passed, exactly as the probe at the first byte does
//! (`--exact-entry`); a function whose entry run holds a loop head keeps its first byte.
//!
//! Targets: `fixtures/c/probepoint.c` (hand-assembled `pp_sum`, `pp_endbr`, `pp_loop`,
//! `pp_argwrite`; `run N` calls each N times with known arguments) and `fixtures/go/probepoint`
//! (`run N`: `Fib(i % 10)` and `Scale(i, 3)`, which calls `Fib(3)`). Where each probe sits is read
//! from `--dry-run` and the instruction there is checked in `objdump -d` / `go tool objdump`.

use fixtures::e2e::{self, err, text, Need};
use fixtures::netprobe;
use fixtures::objdump::CodeAt;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Calls per function in one run of a target.
const N: i64 = 60;

type R = Result<(), String>;
/// A function, the names of the arguments to compare, and their values in each call.
type Expected = (&'static str, &'static [&'static str], Vec<Vec<i64>>);

fn c_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        fixtures::CProgram::new("probepoint")
            .flags(&["-O2"])
            .build()
    })
    .clone()
}

fn go_bin() -> Result<PathBuf, String> {
    static BIN: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::go::go_fixture("probepoint"))
        .clone()
}

/// `(address, file offset)` of `name` in `bin`, as `netprobe symbols --json` lists it.
fn symbol(bin: &Path, name: &str) -> Result<(u64, u64), String> {
    let out = netprobe::output_ok(&["symbols", "--json", &bin.display().to_string(), name])?;
    let hex = |v: &Json| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
    };
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find(|j| j["name"] == name)
        .and_then(|j| Some((hex(&j["address"]["value"])?, hex(&j["file_offset"])?)))
        .ok_or_else(|| format!("{name} not listed in {}", bin.display()))
}

/// The entry probe offsets of a dry run, by function, from its `uprobe_events` lines
/// (`p:GROUP/EVENT PATH:0xOFF ...`), and the perf line's comment for each.
fn dry_run_entries(args: &[&str]) -> Result<BTreeMap<String, (u64, String)>, String> {
    let mut full = vec![args[0], "--dry-run"];
    full.extend(&args[1..]);
    let out = netprobe::output_ok(&full)?;
    let s = text(&out.stdout);
    let mut offsets = Vec::new();
    // `echo 'LINE' >> ...`, or `printf '%s\n' 'LINE' >> ...` for a line with a backslash.
    let lines = s.lines().filter_map(|l| {
        l.strip_prefix("echo ")
            .or_else(|| l.strip_prefix("printf '%s\\n' "))
    });
    for line in lines.filter(|l| l.starts_with("'p:")) {
        let loc = line.split_whitespace().nth(1).unwrap_or_default();
        let off = loc.rsplit_once(":0x").map(|(_, h)| h).unwrap_or_default();
        offsets.push(u64::from_str_radix(off, 16).map_err(|e| format!("{line}: {e}"))?);
    }
    let mut out_map = BTreeMap::new();
    let perf: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("perf probe -x") && !l.contains("%return"))
        .collect();
    for (line, off) in perf.iter().zip(offsets) {
        // `... -a 'GROUP:EVENT=LOCATION ...'  # comment`; the event is `<function>_eN`.
        let event = line
            .split_once(':')
            .and_then(|(_, r)| r.split_once('='))
            .map(|(e, _)| e.to_string())
            .unwrap_or_default();
        let function = event
            .rsplit_once("_e")
            .map(|(f, _)| f.to_string())
            .unwrap_or(event);
        let comment = line
            .split_once("  # ")
            .map(|(_, c)| c.to_string())
            .unwrap_or_default();
        out_map.insert(function, (off, comment));
    }
    Ok(out_map)
}

/// The instruction `go tool objdump` shows at `vaddr` in function `name` (Go syntax, `JMP`).
fn go_objdump_mnemonic(bin: &Path, name: &str, vaddr: u64) -> Result<String, String> {
    let out = Command::new("go")
        .args(["tool", "objdump", "-s"])
        .arg(format!("^{}$", name.replace('.', "\\.")))
        .arg(bin)
        .output()
        .map_err(err)?;
    let want = format!("{vaddr:#x}");
    text(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(want.as_str()))
        .and_then(|l| l.split_whitespace().nth(3))
        .map(str::to_string)
        .ok_or_else(|| format!("go tool objdump shows no instruction at {want} in {name}"))
}

/// Entry hits of a `trace --json` run, by function: each hit's arguments by name.
fn traced_args(stdout: &[u8]) -> BTreeMap<String, Vec<Json>> {
    let mut by: BTreeMap<String, Vec<Json>> = BTreeMap::new();
    for j in text(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter(|j| j["event"] == "entry")
    {
        by.entry(j["function"].as_str().unwrap_or_default().into())
            .or_default()
            .push(j["args"].clone());
    }
    by
}

/// The values of the arguments `names` of each hit of `function`, in hit order.
fn values(hits: &BTreeMap<String, Vec<Json>>, function: &str, names: &[&str]) -> Vec<Vec<i64>> {
    hits.get(function)
        .map(|h| {
            h.iter()
                .map(|a| names.iter().filter_map(|n| a[*n].as_i64()).collect())
                .collect()
        })
        .unwrap_or_default()
}

/// `count --json`'s counts by function.
fn counted(stdout: &[u8]) -> Result<BTreeMap<String, u64>, String> {
    let last = text(stdout)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Json>(l).ok())
        .ok_or("count printed no JSON")?;
    if last["complete"] != true {
        return Err(format!("count lost events: {last}"));
    }
    Ok(last["counts"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default())
}

/// Checks where the dry run places each C function's entry probe: `want` is the distance from
/// the function's first byte, and objdump must show `mnemonic` there.
fn check_c_placement(
    bin: &Path,
    entries: &BTreeMap<String, (u64, String)>,
    want: &[(&str, u64, &str)],
) -> R {
    for &(name, delta, mnemonic) in want {
        let (addr, off) = symbol(bin, name)?;
        let (at, comment) = entries
            .get(name)
            .ok_or_else(|| format!("{name}: no entry probe in the dry run: {entries:?}"))?;
        if *at != off + delta {
            return Err(format!(
                "{name}: entry probe at file offset {at:#x}, want {:#x} (+{delta:#x}); {comment}",
                off + delta
            ));
        }
        let seen = fixtures::objdump::mnemonic(bin, CodeAt::Vaddr(addr + delta))?;
        if seen != mnemonic {
            return Err(format!(
                "{name}+{delta:#x}: objdump shows {seen}, want {mnemonic}"
            ));
        }
    }
    Ok(())
}

/// `trace` of the C target reading every argument: pp_sum and pp_endbr move to their push,
/// pp_loop (loop head in the run) and pp_argwrite (its first instruction writes the argument the
/// probe reads) keep the first byte; with `--exact-entry` all four stay. Every call hits once
/// with the values passed.
fn c_trace_arguments_with_and_without_the_move() -> R {
    let bin = c_bin();
    let b = bin.display().to_string();
    let cmd = format!("{b} run {N}");
    let specs = [
        format!("{b}:pp_sum a=s64 b=s64"),
        format!("{b}:pp_endbr a=s64"),
        format!("{b}:pp_loop n=s64 k=s64"),
        format!("{b}:pp_argwrite a=s64"),
    ];
    for exact in [false, true] {
        let mut args: Vec<&str> = vec!["trace", "--json", "-c", &cmd];
        if exact {
            args.push("--exact-entry");
        }
        args.extend(specs.iter().map(String::as_str));
        let entries = dry_run_entries(&args)?;
        let moved = |d: u64| if exact { 0 } else { d };
        let first_sum = if exact { "mov" } else { "push" };
        let first_endbr = if exact { "endbr64" } else { "push" };
        check_c_placement(
            &bin,
            &entries,
            &[
                ("pp_sum", moved(3), first_sum),
                ("pp_endbr", moved(4), first_endbr),
                ("pp_loop", 0, "mov"),
                ("pp_argwrite", 0, "lea"),
            ],
        )?;
        if !exact
            && !entries["pp_loop"]
                .1
                .contains("kept: +0x4 is the target of the branch")
        {
            return Err(format!("pp_loop: {}", entries["pp_loop"].1));
        }
        let out = netprobe::output_ok(&args)?;
        let hits = traced_args(&out.stdout);
        let want = |f: fn(i64) -> Vec<i64>| (1..=N).map(f).collect::<Vec<_>>();
        let expect: [Expected; 4] = [
            ("pp_sum", &["a", "b"], want(|i| vec![i, 1000 + i])),
            ("pp_endbr", &["a"], want(|i| vec![i])),
            ("pp_loop", &["n", "k"], want(|i| vec![i, 1 + i % 3])),
            ("pp_argwrite", &["a"], want(|i| vec![i])),
        ];
        for (name, names, wanted) in expect {
            let got = values(&hits, name, names);
            if got != wanted {
                return Err(format!(
                    "exact_entry={exact}: {name}: {} hits, want {N} with the values passed; first: {:?}",
                    got.len(),
                    got.first()
                ));
            }
        }
    }
    Ok(())
}

/// `count` and `latency` read no argument, so pp_argwrite moves too (its write to rdi no longer
/// matters); pp_loop keeps its first byte. Counts equal the calls, with and without the move.
fn c_count_and_latency_with_and_without_the_move() -> R {
    let bin = c_bin();
    let b = bin.display().to_string();
    let cmd = format!("{b} run {N}");
    let spec = format!("{b}:pp_*");
    for exact in [false, true] {
        let mut args: Vec<&str> = vec!["count", "--json", "-c", &cmd, &spec];
        if exact {
            args.push("--exact-entry");
        }
        let entries = dry_run_entries(&args)?;
        let d = |n: u64| if exact { 0 } else { n };
        check_c_placement(
            &bin,
            &entries,
            &[
                ("pp_sum", d(3), if exact { "mov" } else { "push" }),
                ("pp_endbr", d(4), if exact { "endbr64" } else { "push" }),
                ("pp_loop", 0, "mov"),
                ("pp_argwrite", d(4), if exact { "lea" } else { "push" }),
            ],
        )?;
        let counts = counted(&netprobe::output_ok(&args)?.stdout)?;
        for name in ["pp_sum", "pp_endbr", "pp_loop", "pp_argwrite"] {
            if counts.get(name) != Some(&(N as u64)) {
                return Err(format!(
                    "exact_entry={exact}: count {name}: {:?}, want {N}: {counts:?}",
                    counts.get(name)
                ));
            }
        }
        // latency: the moved entry pairs with the uretprobe at the first byte on every call.
        let mut lat: Vec<&str> = vec!["latency", "--json", "-c", &cmd, &spec];
        if exact {
            lat.push("--exact-entry");
        }
        let out = netprobe::output_ok(&lat)?;
        for name in ["pp_sum", "pp_endbr", "pp_loop", "pp_argwrite"] {
            let found = text(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str::<Json>(l).ok())
                .find(|j| j["function"] == name)
                .ok_or_else(|| format!("latency printed nothing for {name}"))?;
            if found["count"] != N {
                return Err(format!("exact_entry={exact}: latency {name}: {found}"));
            }
        }
    }
    Ok(())
}

/// The Go target: main.Fib (no stack check) moves from `xor` to the emulated `jmp` at +9 on Go
/// 1.19; main.Scale's probe after its stack check stays on `sub rsp` (it writes RSP). Fib is
/// called N times from main with i % 10 and N times from Scale with 3; each hit reads n in RAX.
fn go_trace_arguments_with_and_without_the_move() -> R {
    let bin = go_bin()?;
    let b = bin.display().to_string();
    let cmd = format!("{b} run {N}");
    let (fib_addr, fib_off) = symbol(&bin, "main.Fib")?;
    for exact in [false, true] {
        let mut args: Vec<&str> = vec![
            "trace",
            "--json",
            "-c",
            &cmd,
            "main.Fib n=s64",
            "main.Scale v=s64 k=s64",
        ];
        if exact {
            args.push("--exact-entry");
        }
        let entries = dry_run_entries(&args)?;
        let (at, comment) = entries
            .get("main_Fib")
            .ok_or_else(|| format!("no Fib probe: {entries:?}"))?;
        let delta = at - fib_off;
        let seen = go_objdump_mnemonic(&bin, "main.Fib", fib_addr + delta)?;
        match (exact, seen.as_str()) {
            (true, "XORL") if delta == 0 => {}
            // Emulated by the kernel: JMP or a conditional jump, a NOP or a PUSH.
            (false, m)
                if delta > 0 && (m.starts_with('J') || m.starts_with("NOP") || m == "PUSHQ") => {}
            _ => {
                return Err(format!(
                    "exact_entry={exact}: Fib probe at +{delta:#x} ({seen}); {comment}"
                ))
            }
        }
        if !exact && !entries["main_Scale"].1.contains("kept:") {
            return Err(format!("Scale: {}", entries["main_Scale"].1));
        }
        let out = netprobe::output_ok(&args)?;
        let hits = traced_args(&out.stdout);
        let mut fib: Vec<i64> = values(&hits, "main.Fib", &["n"]).concat();
        fib.sort_unstable();
        let mut want: Vec<i64> = (1..=N).map(|i| i % 10).chain((1..=N).map(|_| 3)).collect();
        want.sort_unstable();
        if fib != want {
            return Err(format!(
                "exact_entry={exact}: main.Fib: {} hits, want {} with the values passed",
                fib.len(),
                want.len()
            ));
        }
        let scale = values(&hits, "main.Scale", &["v", "k"]);
        let want: Vec<Vec<i64>> = (1..=N).map(|i| vec![i, 3]).collect();
        if scale != want {
            return Err(format!(
                "exact_entry={exact}: main.Scale: {} hits, want {N} of (i, 3)",
                scale.len()
            ));
        }
    }
    Ok(())
}

fn main() {
    let live = [
        Need::Root,
        Need::Tracefs,
        Need::CCompiler,
        Need::Program("objdump"),
    ];
    let go = [Need::Root, Need::Tracefs, Need::Go];
    e2e::run(vec![
        e2e::trial(
            "c_trace_arguments_with_and_without_the_move",
            &live,
            c_trace_arguments_with_and_without_the_move,
        ),
        e2e::trial(
            "c_count_and_latency_with_and_without_the_move",
            &live,
            c_count_and_latency_with_and_without_the_move,
        ),
        e2e::trial(
            "go_trace_arguments_with_and_without_the_move",
            &go,
            go_trace_arguments_with_and_without_the_move,
        ),
    ])
}
