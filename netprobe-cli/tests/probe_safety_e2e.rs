//! The probe-safety gate on live runs (root, tracefs, a C compiler, objdump): an offset one byte
//! into an instruction is refused by every mode and by `probe add`, marked by `--dry-run`, placed
//! only with `--unsafe-offset`; an offset on an instruction boundary counts every call.
//!
//! The target is a copy of `fixtures/c/tracee.c` ([`fixtures::tracee`]).

use fixtures::e2e::{self, err, json_lines_strict, Need};
use fixtures::session::TRACEFS;
use fixtures::{netprobe, session, tracee};
use std::process::{Command, Output};

/// The file offsets where `objdump -d` starts an instruction in `path`'s function `name`
/// (non-PIE or PIE alike: the tracee's code segment maps file offset = address).
fn instruction_starts(path: &str, name: &str) -> Result<Vec<u64>, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", path])
        .output()
        .map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let body = text
        .split(&format!("<{name}>:\n"))
        .nth(1)
        .ok_or_else(|| format!("objdump shows no {name}"))?;
    Ok(body
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| u64::from_str_radix(l.trim_start().split(':').next()?, 16).ok())
        .collect())
}

/// Lines of `uprobe_events` that name `path`.
fn probes_on(path: &str) -> Vec<String> {
    std::fs::read_to_string(format!("{TRACEFS}/uprobe_events"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(path))
        .map(str::to_string)
        .collect()
}

/// The probe-safety gate on a hand-made offset one byte into an instruction of `np_add` (the
/// first instruction `objdump -d` shows longer than a byte): trace, count, latency and probe add
/// refuse it with one line naming the function, the offset and the reason, exit 1, and nothing
/// reaches `uprobe_events`; `--dry-run` marks it; `--unsafe-offset` places it (probe add, then
/// removed); a raw offset on an instruction boundary inside the function counts every call.
/// Works on a copy of the tracee: a uprobe sits on an inode, and the other trials run the
/// original.
fn gate_trial() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(err)?;
    let copy = dir.path().join("tracee-gate");
    std::fs::copy(tracee::bin(), &copy).map_err(err)?;
    let bin = copy.display().to_string();
    let starts = instruction_starts(&bin, "np_add")?;
    let inside = starts
        .windows(2)
        .find(|w| w[1] - w[0] >= 2)
        .map(|w| w[0] + 1)
        .ok_or("no instruction longer than a byte")?;
    let boundary = starts[1];
    let bad = format!("{bin}:{inside:#x}");
    let refused = |out: &Output, what: &str| -> Result<(), String> {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("netprobe: error"))
            .collect();
        let ok = out.status.code() == Some(1)
            && errors.len() == 1
            && errors[0].contains(&format!("refusing the probe on tracee-gate+{inside:#x}"))
            && errors[0].contains("not an instruction boundary")
            && errors[0].contains("np_add")
            && errors[0].contains("--unsafe-offset");
        if !ok {
            return Err(format!("{what}: {:?} {stderr}", out.status));
        }
        let left = probes_on(&bin);
        if !left.is_empty() {
            return Err(format!("{what} left probes: {left:?}"));
        }
        Ok(())
    };
    let run = |args: &[&str]| netprobe::command().args(args).output().map_err(err);
    let cmd = format!("{bin} now 3");
    for mode in ["trace", "count", "latency"] {
        refused(&run(&[mode, "-c", &cmd, &bad])?, mode)?;
    }
    refused(
        &run(&["probe", "add", "--group", "nptest_gate", &bad])?,
        "probe add",
    )?;
    // --dry-run prints the probe marked and fails like the real run.
    let out = run(&["trace", "--dry-run", &bad])?;
    refused(&out, "dry-run")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.contains(&format!(
        "# REFUSED: tracee-gate+{inside:#x} at {bad}: it is not an instruction boundary"
    )) || !(stdout.contains("# REFUSED: echo 'p:")
        || stdout.contains("# REFUSED: printf '%s\\n' 'p:"))
    {
        return Err(format!("dry-run output: {stdout}"));
    }
    // --unsafe-offset places it (persistent probe: nothing runs the copy), with a warning.
    let out = run(&[
        "probe",
        "add",
        "--group",
        "nptest_gate",
        "--unsafe-offset",
        &bad,
    ])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let placed = probes_on(&bin);
    let _ = run(&["probe", "remove", "--group", "nptest_gate"]);
    if !out.status.success()
        || !stderr.contains("warning: --unsafe-offset: placing the probe")
        || placed.len() != 1
        || !placed[0].contains(&format!("{bin}:0x{inside:016x}"))
    {
        return Err(format!(
            "--unsafe-offset: {:?} {stderr} {placed:?}",
            out.status
        ));
    }
    if !probes_on(&bin).is_empty() {
        return Err("probe remove left the probe".into());
    }
    // A raw offset on a boundary inside np_add passes and counts each call once.
    let out = run(&[
        "count",
        "--json",
        "-c",
        &cmd,
        &format!("{bin}:{boundary:#x}"),
    ])?;
    let lines = json_lines_strict(&out.stdout)?;
    let name = format!("tracee-gate+{boundary:#x}");
    match lines.last() {
        Some(last) if last["counts"][&name] == 3 => {}
        other => {
            return Err(format!(
                "boundary offset: {other:?}; stderr {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
    Ok(())
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    e2e::run(vec![e2e::trial(
        "gate_refuses_mid_instruction_offset_everywhere",
        &[
            Need::Root,
            Need::Tracefs,
            Need::CCompiler,
            Need::Program("objdump"),
        ],
        move || {
            let _g = session::shared();
            gate_trial()
        },
    )]);
}
