//! End-to-end tests of unwinding without frame pointers, on real samples and hits, against gdb:
//!
//! - `fixtures/c/unwind_qsort.c`, built `-O2 -fomit-frame-pointer -g`, calls through Debian's
//!   libc (`qsort` -> the comparator -> a chain of four functions to a spinning leaf), and
//!   `fixtures/rust/unwind_sort.rs`, a Rust release build (`rustc -O -g`, no frame pointers),
//!   does the same through `sort_by`. gdb, at a breakpoint on the leaf, prints the chain of
//!   physical frames (`bt` without the frames it makes up for inlined calls and tail calls: no
//!   return address on the stack stands for them), compared with netprobe's frames that are
//!   not inlined (its DWARF inlined frames are reported beside them, marked `inlined`).
//! - `profile`: at least 99% of the samples in the leaf carry that same chain up to `main`
//!   (frames of the program by name, each other frame as one frame), and `--json` says which
//!   method found each frame.
//! - `trace --stack` on the leaf (per-task perf events on the uprobe, copying registers and
//!   stack): every hit's stack is that chain, each caller found by CFI.

use fixtures::e2e::{self, err, succeeded, Need};
use fixtures::live::Waiting;
use fixtures::{netprobe, CProgram};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

type R = Result<(), String>;

fn c_program() -> PathBuf {
    CProgram::new("unwind_qsort")
        .flags(&["-O2", "-fomit-frame-pointer", "-g"])
        .build()
}

fn rust_program() -> PathBuf {
    fixtures::rust::build("unwind_sort", &["-O", "-g"])
}

/// The path segments of a legacy-mangled Rust name (`_ZN` then length-prefixed segments, the
/// last one a `h` + 16 hex digits hash, then `E`); `None` for any other name.
fn mangled_segments(name: &str) -> Option<Vec<&str>> {
    let mut rest = name.strip_prefix("_ZN")?;
    let mut out = Vec::new();
    while !rest.starts_with('E') {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let len: usize = rest[..digits].parse().ok()?;
        out.push(rest.get(digits..digits + len)?);
        rest = &rest[digits + len..];
    }
    if out
        .last()
        .is_some_and(|h| h.len() == 17 && h.starts_with('h'))
    {
        out.pop();
    }
    Some(out)
}

/// A frame as the comparison sees it: a function of the program (`np_*`, `main`) by its last
/// path segment, any other (libc's, the standard library's) as `*`. netprobe prints Rust symbols
/// as the binary holds them (mangled), gdb demangled: both come to the same last segment.
fn normalize(name: &str) -> String {
    let base = name.split(['@', '<', ' ', '(']).next().unwrap_or("");
    let last = match mangled_segments(base) {
        Some(segments) => segments.last().copied().unwrap_or(""),
        None => base.rsplit("::").next().unwrap_or(""),
    };
    if last.starts_with("np_") || last == "main" {
        last.to_string()
    } else {
        "*".to_string()
    }
}

/// Innermost first, up to and including the first `main`.
fn to_main(frames: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    for f in frames {
        let stop = f == "main";
        out.push(f);
        if stop {
            break;
        }
    }
    out
}

/// gdb's chain at a breakpoint on `np_leaf` of `bin` run with argument 1: its physical frames
/// (inlined and tail-call frames left out), normalized, up to `main`.
fn gdb_chain(bin: &Path) -> Result<Vec<String>, String> {
    // One script per program: the trials run at once.
    let stem = bin.file_name().unwrap_or_default().to_string_lossy();
    let script = std::env::temp_dir().join(format!("np-bt-{}-{stem}.py", std::process::id()));
    std::fs::write(
        &script,
        "import gdb\nf = gdb.newest_frame()\nwhile f is not None:\n    if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):\n        print('NPFRAME %s' % f.name())\n    f = f.older()\n",
    )
    .map_err(err)?;
    let out = Command::new("gdb")
        .args(["-batch", "-nx", "-ex", "set debuginfod enabled off"])
        .args(["-ex", "break np_leaf", "-ex", "run 1", "-ex"])
        .arg(format!("source {}", script.display()))
        .arg(bin)
        .output()
        .map_err(err)?;
    let _ = std::fs::remove_file(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    let chain = to_main(
        text.lines()
            .filter_map(|l| l.strip_prefix("NPFRAME "))
            .map(normalize),
    );
    if chain.first().map(String::as_str) != Some("np_leaf")
        || chain.last().map(String::as_str) != Some("main")
    {
        return Err(format!(
            "gdb printed no chain from np_leaf to main:\n{text}"
        ));
    }
    Ok(chain)
}

/// The program started, told to go (it spins for 3 s).
fn started(bin: &Path) -> Result<Waiting, String> {
    let mut w = Waiting::start(&mut Command::new(bin))?;
    let line = w.go()?;
    if !line.starts_with("going") {
        return Err(format!("the program said {line:?}"));
    }
    Ok(w)
}

fn profile_matches_gdb(bin: &Path) -> R {
    let expect = gdb_chain(bin)?;
    let target = started(bin)?;
    let out = netprobe::command()
        .args(["profile", "-p", &target.pid().to_string()])
        .args(["--duration", "1500ms", "-F", "499", "--json"])
        .output()
        .map_err(err)?;
    target.finish();
    let out = succeeded(out, "profile -p")?;
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let (mut leaf, mut full) = (0u64, 0u64);
    let mut methods = std::collections::BTreeSet::new();
    let mut wrong = Vec::new();
    for s in v["stacks"].as_array().into_iter().flatten() {
        // Physical frames, as gdb's chain: inlined ones (DWARF's) have no return address.
        let frames: Vec<&Json> = s["frames"]
            .as_array()
            .into_iter()
            .flatten()
            .rev()
            .filter(|f| f["inlined"] != true)
            .collect();
        let names: Vec<String> = frames
            .iter()
            .map(|f| f["function"].as_str().unwrap_or("").to_string())
            .collect();
        if names.first().map(|n| normalize(n)) != Some("np_leaf".into()) {
            continue;
        }
        let n = s["count"].as_u64().unwrap_or(0);
        leaf += n;
        for f in &frames {
            methods.insert(f["unwound_by"].as_str().unwrap_or("none").to_string());
        }
        let got = to_main(names.iter().map(|n| normalize(n)));
        if got == expect {
            full += n;
        } else {
            wrong.push(format!("{n} x {names:?}"));
        }
    }
    if leaf < 100 {
        return Err(format!("only {leaf} samples in np_leaf: {v}"));
    }
    if (full as f64) < 0.99 * leaf as f64 {
        return Err(format!(
            "{full} of {leaf} leaf samples carry gdb's chain {expect:?}; others: {wrong:#?}"
        ));
    }
    if !methods.contains("cfi") || methods.contains("none") {
        return Err(format!("frames' methods: {methods:?}"));
    }
    eprintln!("{full} of {leaf} leaf samples carry gdb's chain {expect:?}; methods {methods:?}; unwinding {}", v["unwinding"]);
    Ok(())
}

/// `trace --stack` on the leaf: every hit's stack is gdb's chain, each frame saying its method.
fn trace_matches_gdb(bin: &Path) -> R {
    let expect = gdb_chain(bin)?;
    let target = started(bin)?;
    let spec = format!("{}:np_leaf", bin.display());
    let out = netprobe::command()
        .args([
            "trace",
            "--stack",
            "--json",
            "-p",
            &target.pid().to_string(),
        ])
        .args(["--max-events", "5", &spec])
        .output()
        .map_err(err)?;
    target.finish();
    // Exit status 3 says hits were lost: the leaf runs thousands of times a second and each hit
    // copies 8 KiB of stack; the five kept are what is checked.
    if !matches!(out.status.code(), Some(0 | 3)) {
        return Err(format!(
            "trace --stack: {}: {}",
            out.status,
            e2e::text(&out.stderr)
        ));
    }
    let hits = e2e::json_lines(&out.stdout);
    if hits.len() != 5 {
        return Err(format!("{} hits: {}", hits.len(), e2e::text(&out.stdout)));
    }
    for h in &hits {
        let frames: Vec<&Json> = h["stack"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f["inlined"] != true)
            .collect();
        let got = to_main(
            frames
                .iter()
                .map(|f| normalize(f["function"].as_str().unwrap_or(""))),
        );
        if got != expect {
            return Err(format!(
                "a hit's stack {got:?} is not gdb's {expect:?}: {h}"
            ));
        }
        if frames
            .iter()
            .skip(1)
            .take(got.len() - 1)
            .any(|f| f["unwound_by"] != "cfi")
        {
            return Err(format!("frames not found by CFI: {h}"));
        }
    }
    Ok(())
}

fn main() {
    let needs = [Need::Root, Need::CCompiler, Need::Program("gdb")];
    let rust = [Need::Root, Need::Program("gdb"), Need::Program("rustc")];
    e2e::run(vec![
        e2e::trial("c_qsort_profile_matches_gdb", &needs, || {
            profile_matches_gdb(&c_program())
        }),
        e2e::trial("rust_release_profile_matches_gdb", &rust, || {
            profile_matches_gdb(&rust_program())
        }),
        e2e::trial("c_qsort_trace_stack_matches_gdb", &needs, || {
            trace_matches_gdb(&c_program())
        }),
        e2e::trial("rust_release_trace_stack_matches_gdb", &rust, || {
            trace_matches_gdb(&rust_program())
        }),
    ]);
}
