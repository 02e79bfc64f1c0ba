//! End-to-end test of `trace --stack` on a process that exits within milliseconds of its hits:
//! `fixtures/c/short_lived.c` run by netprobe (`-c`) calls main → np_a → np_b → np_probed and
//! exits at once, so its `/proc/PID/maps` is gone before its stacks are named. Every frame must
//! still be named, from what the process had mapped when the hit happened (the kernel's mmap
//! records), and equal what `addr2line -f` says for the same raw addresses (the program is built
//! `-no-pie`, so its runtime addresses are the ELF file's). Ten runs in a row: the race the
//! process's exit used to lose in most runs must never be lost. The same for children a shell
//! command starts (they inherit the probes and the tracking of their mappings), in a host-wide
//! session, and under `profile`.

use fixtures::e2e::{self, err, Need};
use fixtures::live::spawn_until_live;
use fixtures::{netprobe, CProgram};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

/// Runs of the program, each a session of its own.
const RUNS: usize = 10;
/// Calls each run makes.
const CALLS: usize = 3;

fn short_lived() -> PathBuf {
    CProgram::new("short_lived")
        .flags(&["-O0", "-fno-omit-frame-pointer", "-no-pie"])
        .build()
}

/// The functions `addr2line -f` names at `addrs` of `bin` (one name per address).
fn addr2line(bin: &Path, addrs: &[u64]) -> Result<Vec<String>, String> {
    let out = Command::new("addr2line")
        .arg("-f")
        .arg("-e")
        .arg(bin)
        .args(addrs.iter().map(|a| format!("{a:#x}")))
        .output()
        .map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Two lines per address: the function, then file:line.
    Ok(text.lines().step_by(2).map(str::to_string).collect())
}

/// The innermost frames of each hit's stack: (function name, address), from `trace --json`.
fn hit_stacks(out: &str) -> Result<Vec<Vec<(String, u64)>>, String> {
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Json = serde_json::from_str(l).map_err(err)?;
            let frames = v["stack"]
                .as_array()
                .ok_or_else(|| format!("hit without a stack: {l}"))?;
            frames
                .iter()
                .map(|f| {
                    let name = f["function"].as_str().unwrap_or("[unknown]").to_string();
                    let addr = f["address"]
                        .as_str()
                        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
                        .ok_or_else(|| format!("frame without an address: {f}"))?;
                    Ok((name, addr))
                })
                .collect()
        })
        .collect()
}

/// Runs `trace --stack --json -c COMMAND` on np_probed [`RUNS`] times: every run must make
/// `calls` hits whose stacks name np_probed, np_b, np_a, main, as addr2line does for the raw
/// addresses (return addresses looked up one byte back, at the call).
fn every_run_names_every_frame(bin: &Path, command: &str, calls: usize) -> R {
    let probe = format!("{}:np_probed", bin.display());
    every_trace_names_every_frame(bin, calls, || {
        netprobe::stdout_ok(&["trace", "--stack", "--json", "-c", command, &probe])
    })
}

/// [`RUNS`] runs of `trace`, each `calls` hits, as [`every_run_names_every_frame`] checks them.
fn every_trace_names_every_frame(
    bin: &Path,
    calls: usize,
    mut trace: impl FnMut() -> Result<String, String>,
) -> R {
    let want = ["np_probed", "np_b", "np_a", "main"];
    let mut failures = Vec::new();
    for run in 1..=RUNS {
        let out = trace()?;
        let stacks = hit_stacks(&out)?;
        if stacks.len() != calls {
            return Err(format!(
                "run {run}: {} hits, want {calls}:\n{out}",
                stacks.len()
            ));
        }
        for stack in &stacks {
            let names: Vec<&str> = stack.iter().map(|(n, _)| n.as_str()).collect();
            if stack.len() < want.len() {
                failures.push(format!("run {run}: stack {names:?}"));
                continue;
            }
            let lookups: Vec<u64> = stack[..want.len()]
                .iter()
                .enumerate()
                .map(|(i, (_, a))| if i == 0 { *a } else { a - 1 })
                .collect();
            let truth = addr2line(bin, &lookups)?;
            if truth != want {
                return Err(format!(
                    "addr2line names {truth:?} at {lookups:x?}, not {want:?}"
                ));
            }
            if names[..want.len()] != want {
                failures.push(format!(
                    "run {run}: stack {stack:x?}, addr2line {truth:?}\n{out}"
                ));
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} stacks misnamed:\n{}",
            failures.len(),
            RUNS * calls,
            failures.join("\n")
        ))
    }
}

/// `-c 'short_lived 3'`: the command itself exits within milliseconds of its hits.
fn short_lived_frames_are_named() -> R {
    let bin = short_lived();
    every_run_names_every_frame(&bin, &format!("{} {CALLS}", bin.display()), CALLS)
}

/// `-c "sh -c 'short_lived 1; short_lived 2'"`: the hits come from children the shell starts
/// (they inherit the probes and the tracking of their mappings), each gone within milliseconds.
fn short_lived_children_frames_are_named() -> R {
    let bin = short_lived();
    let command = format!("/bin/sh -c '{0} 1; {0} 2'", bin.display());
    every_run_names_every_frame(&bin, &command, 3)
}

/// A host-wide session (the tracefs backend: no per-task events), the program started after it
/// is live: the same frames.
fn short_lived_host_wide_frames_are_named() -> R {
    // A copy of its own: a host-wide probe on the shared binary would also trap in the other
    // trials' processes, which started before this session and are not its subject.
    let dir = tempfile::tempdir().map_err(err)?;
    let bin = dir.path().join("short_lived");
    std::fs::copy(short_lived(), &bin).map_err(err)?;
    let probe = format!("{}:np_probed", bin.display());
    let max = CALLS.to_string();
    every_trace_names_every_frame(&bin, CALLS, || {
        let mut cmd = netprobe::command();
        cmd.args([
            "trace",
            "--stack",
            "--json",
            "--max-events",
            &max,
            "--duration",
            "20s",
            &probe,
        ]);
        let (child, stderr) = spawn_until_live(&mut cmd, Duration::from_secs(30))?;
        let ran = Command::new(&bin).arg(&max).status().map_err(err)?;
        let out = child.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        if !ran.success() || !out.status.success() {
            return Err(format!("program {ran}, netprobe {}: {stderr}", out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })
}

/// `profile -c 'short_lived 3000000'` (about 25 ms of calls, exited before the sampling loop's
/// next read): every sampled instruction is named in its image, and the samples in the program (all but the few in the
/// loader and libc's start and exit code) name functions of its call chain main → np_a → np_b →
/// np_probed, in that order. Before the mmap records were kept, every frame of such a run was
/// `[unknown] (0x...)`.
fn short_lived_profile_is_named() -> R {
    let bin = short_lived();
    let chain = ["main", "np_a", "np_b", "np_probed"];
    for run in 1..=3 {
        let dir = tempfile::tempdir().map_err(err)?;
        let folded = dir.path().join("p.folded");
        let command = format!("{} 3000000", bin.display());
        netprobe::stdout_ok(&[
            "profile",
            "-F",
            "999",
            "--folded",
            &folded.to_string_lossy(),
            "-c",
            &command,
        ])?;
        let text = std::fs::read_to_string(&folded).map_err(err)?;
        let (mut total, mut in_program) = (0u64, 0u64);
        for line in text.lines() {
            let (stack, n) = line.rsplit_once(' ').ok_or("no count")?;
            let n: u64 = n.parse().map_err(err)?;
            total += n;
            let frames: Vec<&str> = stack.split(';').collect();
            // The sampled instruction is code of some image (the walk above it may read
            // garbage in the loader, which keeps no frame pointers).
            if frames
                .last()
                .is_some_and(|f| f.starts_with("[unknown] (0x"))
            {
                return Err(format!("run {run}: sampled code in no known image: {line}"));
            }
            if let Some(at) = frames.iter().position(|f| *f == "main") {
                // In order along the chain; a frame-pointer walk may miss the caller of a
                // function sampled in its first instructions (profile's own business).
                let mut along = chain.iter();
                if !frames[at..].iter().all(|f| along.any(|c| c == f)) {
                    return Err(format!("run {run}: {line}: not along {chain:?}"));
                }
                in_program += n;
            }
        }
        if total == 0 || in_program * 10 < total * 9 {
            return Err(format!(
                "run {run}: {in_program} of {total} samples in the program:\n{text}"
            ));
        }
    }
    Ok(())
}

fn main() {
    let needs = e2e::live(&[
        Need::CCompiler,
        Need::Program("addr2line"),
        Need::Path("/bin/sh".into()),
    ]);
    // Built before the trials run in parallel threads (see `fixtures::tracee::bin`).
    short_lived();
    e2e::run(vec![
        e2e::trial(
            "short_lived_frames_are_named",
            &needs,
            short_lived_frames_are_named,
        ),
        e2e::trial(
            "short_lived_children_frames_are_named",
            &needs,
            short_lived_children_frames_are_named,
        ),
        e2e::trial(
            "short_lived_host_wide_frames_are_named",
            &needs,
            short_lived_host_wide_frames_are_named,
        ),
        e2e::trial(
            "short_lived_profile_is_named",
            &needs,
            short_lived_profile_is_named,
        ),
    ])
}
