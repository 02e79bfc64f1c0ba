//! Arguments by name from DWARF on real hits: `netprobe trace -c 'PROGRAM N' 'PROGRAM:FUNC'` with
//! no ARG typed prints each parameter the debug info locates at the probe point, and every value
//! equals the one the program printed just before the call (`call FUNC NAME=VALUE ...` lines of
//! `fixtures/c/dwarf_args.c`, `fixtures/go/dwarfargs`, `fixtures/rust/dwarf_args.rs`). A value
//! a case allows to be missing (optimized code keeps no copy, or a struct field in the upper half
//! of a register) is either equal or named in the "not readable at this point" note.
//!
//! Programs: C at -O0 (parameters in the frame: the probe moves to the prologue end) and -O2
//! (registers and the entry stack); Go 1.21 and the newest fetched release (register ABI: a
//! string in two registers, a slice in three, pieces in DWARF); Rust without and with -O.

use fixtures::e2e::{self, json_lines, text, Need};
use fixtures::go::{toolchain_go, SHORT_MATRIX};
use fixtures::netprobe;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Calls per function.
const N: usize = 4;

type R = Result<(), String>;

/// `(function token, NAME=VALUE pairs)` of each `call ...` line, in order.
fn printed(stdout: &str) -> Vec<(String, Vec<(String, String)>)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("call "))
        .map(|l| {
            let mut words = l.split(' ');
            let func = words.next().unwrap_or_default().to_string();
            let pairs = words
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            (func, pairs)
        })
        .collect()
}

/// A hit's value as the program prints it: numbers in decimal, hex and strings as they are.
fn shown(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Traces `specs` (function patterns of `bin`) over a run of `bin N` and compares the hits with
/// the program's printout; `may_miss` names values optimized code may not keep; `stderr_has`
/// must be in netprobe's notes.
fn check(bin: &Path, specs: &[&str], may_miss: &[&str], stderr_has: &[&str]) -> R {
    let b = bin.display().to_string();
    let cmd = format!("{b} {N}");
    let mut args = vec!["trace", "--json", "-c", cmd.as_str()];
    let full: Vec<String> = specs.iter().map(|s| format!("{b}:{s}")).collect();
    args.extend(full.iter().map(String::as_str));
    let out = netprobe::output_ok(&args)?;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let calls = printed(&stdout);
    let hits: Vec<Json> = json_lines(&out.stdout)
        .into_iter()
        .filter(|j| j["event"] == "entry")
        .collect();
    let mut by_func: BTreeMap<&str, Vec<&Json>> = BTreeMap::new();
    for h in &hits {
        by_func
            .entry(h["function"].as_str().unwrap_or_default())
            .or_default()
            .push(h);
    }
    let tokens: Vec<&str> = {
        let mut t: Vec<&str> = calls.iter().map(|(f, _)| f.as_str()).collect();
        t.dedup();
        t.sort();
        t.dedup();
        t
    };
    if tokens.len() != specs.len() {
        return Err(format!(
            "expected {} functions in the printout:\n{stdout}",
            specs.len()
        ));
    }
    for token in tokens {
        let (func, func_hits) = by_func
            .iter()
            .find(|(f, _)| f.contains(token))
            .ok_or_else(|| format!("no hit of {token}:\n{stdout}\n{stderr}"))?;
        let lines: Vec<_> = calls.iter().filter(|(f, _)| f == token).collect();
        if lines.len() != N || func_hits.len() != N {
            return Err(format!(
                "{token}: {} calls printed, {} hits:\n{stdout}\n{stderr}",
                lines.len(),
                func_hits.len()
            ));
        }
        for ((_, pairs), hit) in lines.iter().zip(func_hits) {
            for (k, v) in pairs {
                match hit["args"].get(k) {
                    Some(got) if shown(got) == *v => {}
                    Some(got) => {
                        return Err(format!(
                            "{func}: {k}={} but the program passed {v}",
                            shown(got)
                        ))
                    }
                    None if may_miss.contains(&k.as_str()) => {
                        let param = k.split('_').next().unwrap_or(k);
                        if !stderr.contains("not readable at this point") || !stderr.contains(param)
                        {
                            return Err(format!(
                                "{func}: {k} neither read nor named in a note:\n{stderr}"
                            ));
                        }
                    }
                    None => {
                        return Err(format!(
                            "{func}: {k} (the program passed {v}) not read: {hit}\n{stderr}"
                        ))
                    }
                }
            }
        }
    }
    for s in stderr_has {
        if !stderr.contains(s) {
            return Err(format!("netprobe's notes lack {s:?}:\n{stderr}"));
        }
    }
    Ok(())
}

fn c_bin(opt: &str) -> PathBuf {
    fixtures::CProgram::new("dwarf_args")
        .flags(&["-g", opt])
        .build()
}

fn c_o0() -> R {
    // GCC -O0 stores each parameter in the frame: readable only where the prologue ends.
    check(
        &c_bin("-O0"),
        &["np_args"],
        &[],
        &["where the prologue ends"],
    )
}

fn c_o2() -> R {
    // -O2: registers, the second struct on the entry stack; pt.y shares %r9 with pt.x.
    check(&c_bin("-O2"), &["np_args"], &["pt_y"], &[])
}

/// `--filter` names DWARF parameters: only the call with i == -4 passes.
fn c_filter() -> R {
    let b = c_bin("-O2").display().to_string();
    let cmd = format!("{b} {N}");
    let spec = format!("{b}:np_args");
    let out = netprobe::output_ok(&[
        "trace",
        "--json",
        "-c",
        &cmd,
        &spec,
        "--filter",
        "i == -4 && pt_x == 11",
    ])?;
    let hits: Vec<Json> = json_lines(&out.stdout)
        .into_iter()
        .filter(|j| j["event"] == "entry")
        .collect();
    match hits.as_slice() {
        [h] if h["args"]["i"] == -4 && h["args"]["s"] == "dwarf_args" => Ok(()),
        _ => Err(format!("expected one hit with i=-4: {hits:?}")),
    }
}

fn go(version: &'static str) -> impl Fn() -> R {
    move || {
        let bin = fixtures::go::go_fixture_by("dwarfargs", version)?;
        check(&bin, &["main.ParseRequest", "main.Handle"], &[], &[])
    }
}

fn rust(flags: &'static [&'static str], may_miss: &'static [&'static str]) -> impl Fn() -> R {
    move || {
        let bin = fixtures::build::rust_program("dwarf_args", flags)?;
        check(&bin, &["*parse_line*", "np_rust_c"], may_miss, &[])
    }
}

fn main() {
    let c = e2e::live(&[Need::CCompiler]);
    let rustc = e2e::live(&[Need::Program("rustc")]);
    let mut trials = vec![
        e2e::trial("c_o0_after_prologue", &c, c_o0),
        e2e::trial("c_o2_registers_and_stack", &c, c_o2),
        e2e::trial("c_filter_by_parameter_name", &c, c_filter),
        e2e::trial("rust_debug", &rustc, rust(&["-g"], &[])),
        // rustc -O keeps no copy of some (which ones depends on the release).
        e2e::trial(
            "rust_release",
            &rustc,
            rust(&["-g", "-O"], &["text", "flag"]),
        ),
    ];
    for v in SHORT_MATRIX {
        trials.push(e2e::trial(
            &format!("go_{}", v.replace('.', "_")),
            &e2e::live(&[Need::Path(toolchain_go(v))]),
            go(v),
        ));
    }
    e2e::run(trials)
}
