//! What a session costs its targets: the estimate netprobe prints is checked against the
//! target's own CPU time, and `--max-overhead` takes out a probe that exceeds it within a second.
//!
//! Target: `fixtures/c/tracee.c fastspin SECS`: two threads call `fast_tick` (a NOP first, which
//! the kernel emulates) as fast as they can for SECS seconds, then print the calls made and the
//! process's user and system CPU seconds. Under a probe each call traps (about a million hits a
//! second); the extra CPU time the target spent is the probe's cost, which the kernel charges to
//! it.

use fixtures::e2e::{self, err, Need};
use fixtures::netprobe;
use fixtures::tracee;
use std::process::Command;

const TRACEFS: &str = "/sys/kernel/tracing";
const SECS: u64 = 2;

type R = Result<(), String>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The target's summary in `out`: calls made and CPU seconds (user + system).
fn summary(out: &str) -> Option<(u64, f64)> {
    out.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        match f.as_slice() {
            [calls, user, sys] => Some((
                calls.parse().ok()?,
                user.parse::<f64>().ok()? + sys.parse::<f64>().ok()?,
            )),
            _ => None,
        }
    })
}

/// The share of a CPU in netprobe's last `estimated cost ... : X% of a CPU` line.
fn estimated_share(stderr: &str) -> Option<f64> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("estimated cost to the targets over"))?;
    let pct = line.split(": ").nth(2)?.split('%').next()?;
    Some(pct.trim().parse::<f64>().ok()? / 100.0)
}

/// `count --interval 1` on fast_tick: the estimate it prints for the session is within 2x of
/// the CPU time the target spent beyond its calls' own (measured alone in the same run).
fn estimate_is_within_2x_of_the_measured_cost() -> R {
    let bin = tracee::bin().display().to_string();
    let alone = Command::new(&bin)
        .args(["fastspin", &SECS.to_string()])
        .output()
        .map_err(err)?;
    let (calls0, cpu0) = summary(&text(&alone.stdout)).ok_or("no summary alone")?;
    let per_call = cpu0 / calls0 as f64;
    let out = netprobe::command()
        .args(["count", "--interval", "1", "-c"])
        .arg(format!("{bin} fastspin {SECS}"))
        .arg(format!("{bin}:fast_tick"))
        .output()
        .map_err(err)?;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let (calls, cpu) = summary(&stdout).ok_or(format!("no summary: {stdout} {stderr}"))?;
    let measured = (cpu - calls as f64 * per_call) / SECS as f64;
    let estimated = estimated_share(&stderr).ok_or(format!("no estimate: {stderr}"))?;
    eprintln!(
        "{calls} calls under the probe: measured cost {:.1}% of a CPU, estimated {:.1}%",
        measured * 100.0,
        estimated * 100.0
    );
    if !out.status.success() || measured <= 0.0 {
        return Err(format!("{:?}: {stdout} {stderr}", out.status));
    }
    if estimated > measured * 2.0 || estimated < measured / 2.0 {
        return Err(format!(
            "estimated {:.1}% of a CPU, measured {:.1}%: not within 2x\n{stderr}",
            estimated * 100.0,
            measured * 100.0
        ));
    }
    Ok(())
}

/// `--max-overhead 1%` on fast_tick (about a million hits a second, far over 1%): its probe is
/// taken out after the first window of at most a second, said on stderr with its rate and cost;
/// the target runs on uncounted; nothing is left registered.
fn max_overhead_removes_the_probe_within_a_second() -> R {
    let bin = tracee::bin().display().to_string();
    let secs = 3;
    let np = netprobe::command()
        .args(["count", "--max-overhead", "1%", "-c"])
        .arg(format!("{bin} fastspin {secs}"))
        .arg(format!("{bin}:fast_tick"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(err)?;
    let np_pid = np.id();
    let child = np.wait_with_output().map_err(err)?;
    let (stdout, stderr) = (text(&child.stdout), text(&child.stderr));
    let (calls, _) = summary(&stdout).ok_or(format!("no summary: {stdout} {stderr}"))?;
    let said = stderr
        .lines()
        .find(|l| l.contains("--max-overhead 1.0%: removed the probes of fast_tick"))
        .ok_or(format!("no removal said: {stderr}"))?;
    // "... in the last W s)": the window that found it.
    let window: f64 = said
        .split("in the last ")
        .nth(1)
        .and_then(|w| w.split(' ').next())
        .and_then(|w| w.parse().ok())
        .ok_or(format!("no window in {said:?}"))?;
    let rate: f64 = said
        .split("fast_tick: ")
        .nth(1)
        .and_then(|w| w.split(' ').next())
        .and_then(|w| w.parse().ok())
        .ok_or(format!("no rate in {said:?}"))?;
    let counted: u64 = stdout
        .lines()
        .find(|l| l.starts_with("fast_tick"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .ok_or(format!("no count: {stdout}"))?;
    if !child.status.success() || window > 1.5 || rate < 100_000.0 {
        return Err(format!("window {window} s, rate {rate}/s: {stderr}"));
    }
    // Counted: the hits until the probe went (about a window's worth), not the calls after.
    if counted as f64 > rate * (window + 0.5) || counted * 2 > calls {
        return Err(format!(
            "{counted} counted of {calls} calls at {rate}/s: the probe stayed too long\n{stderr}"
        ));
    }
    match fixtures::live::leftovers(TRACEFS, np_pid) {
        Some(l) => Err(l),
        None => Ok(()),
    }
}

/// `--max-overhead` with a host-wide session is refused: its probes trap in every process that
/// maps the file, not only in targets a budget could speak for.
fn max_overhead_needs_targets() -> R {
    let bin = tracee::bin().display().to_string();
    let out = netprobe::command()
        .args(["count", "--max-overhead", "1%"])
        .arg(format!("{bin}:fast_tick"))
        .output()
        .map_err(err)?;
    let stderr = text(&out.stderr);
    if out.status.code() != Some(1)
        || stderr.lines().count() != 1
        || !stderr.contains("--max-overhead needs -p, -c or --container")
    {
        return Err(format!("{:?}: {stderr}", out.status));
    }
    Ok(())
}

fn main() {
    let needs = [Need::Root, Need::Tracefs, Need::CCompiler];
    e2e::run(vec![
        e2e::trial(
            "estimate_is_within_2x_of_the_measured_cost",
            &needs,
            estimate_is_within_2x_of_the_measured_cost,
        ),
        e2e::trial(
            "max_overhead_removes_the_probe_within_a_second",
            &needs,
            max_overhead_removes_the_probe_within_a_second,
        ),
        e2e::trial(
            "max_overhead_needs_targets",
            &needs,
            max_overhead_needs_targets,
        ),
    ]);
}
