//! Lost events (root, tracefs, a C compiler): when the ring buffer overflows, `trace` reports
//! exactly what it lost, and `count` keeps every hit of two threads calling as fast as the kernel
//! lets them.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]): its `fast` mode calls
//! `fast_tick` (its first instruction a NOP, which the kernel emulates) from two threads.

use fixtures::e2e::{self, err, json_lines_strict, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::process::Stdio;
use std::time::Duration;

/// `netprobe SUBCOMMAND --json --buffer-kb KB -c 'TRACEE fast PER_THREAD' TRACEE:fast_tick`: two
/// threads calling `fast_tick` (its first instruction a NOP, which the kernel emulates) as fast
/// as they can. Returns netprobe's output and the calls the target says it made (its summary
/// goes to a file: in the shared stdout pipe its line could be spliced into one of netprobe's
/// large writes; `exec` keeps the pid that `-c` traces).
fn fast_tick_run(
    subcommand: &str,
    buffer_kb: u32,
    per_thread: u64,
) -> Result<(std::process::Output, u64), String> {
    let bin = tracee::bin().display().to_string();
    let dir = tempfile::tempdir().map_err(err)?;
    let summary = dir.path().join("calls");
    let out = netprobe::command()
        .args([
            subcommand,
            "--json",
            "--buffer-kb",
            &buffer_kb.to_string(),
            "-c",
        ])
        .arg(format!(
            "sh -c 'exec {bin} fast {per_thread} > {}'",
            summary.display()
        ))
        .arg(format!("{bin}:fast_tick"))
        .output()
        .map_err(err)?;
    Ok((out, tracee::target_calls(&summary)?))
}

/// The count of netprobe's lost-events warning on stderr (`WARNING: N ...`); `None` without one.
fn lost_warning(stderr: &str) -> Result<Option<u64>, String> {
    match stderr.split("WARNING: ").nth(1) {
        Some(w) => w
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .map(Some)
            .ok_or(format!("unreadable lost-events warning: {stderr}")),
        None => Ok(None),
    }
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![
        e2e::trial(
            "ring_buffer_overflow_is_reported_exactly",
            NEEDS,
            move || {
                // A 16 KiB buffer and a reader that cannot write (nobody drains its stdout for a
                // while): most hits must be dropped, and netprobe must say how many, exit with 3,
                // and never present the rest as complete. The kernel's count is exact here.
                let _g = session::shared();
                let bin = t();
                // The target's own summary goes to a file: in the shared stdout pipe its line
                // could be spliced into one of netprobe's large (non-atomic) writes. `exec` keeps
                // the pid that `-c` traces.
                let dir = tempfile::tempdir().map_err(err)?;
                let summary = dir.path().join("calls");
                let np = netprobe::command()
                    .args(["trace", "--json", "--buffer-kb", "16", "-c"])
                    .arg(format!("sh -c 'exec {bin} spin 2 > {}'", summary.display()))
                    .arg(format!("{bin}:np_tick a=s32"))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(err)?;
                std::thread::sleep(Duration::from_secs(4));
                let out = np.wait_with_output().map_err(err)?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let delivered = stdout.matches("\"event\":\"entry\"").count() as u64;
                let calls: u64 = std::fs::read_to_string(&summary)
                    .map_err(err)?
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or(format!("no call count from the target: {stderr}"))?;
                let lost =
                    lost_warning(&stderr)?.ok_or(format!("no lost-events warning: {stderr}"))?;
                if out.status.code() != Some(3) {
                    return Err(format!("exit {:?}, want 3", out.status.code()));
                }
                if lost == 0 || delivered + lost != calls {
                    return Err(format!(
                        "{delivered} delivered + {lost} lost != {calls} calls"
                    ));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "count_keeps_every_hit_of_two_threads_at_the_kernels_max_rate",
            NEEDS,
            move || {
                // Two threads call fast_tick (its first instruction is a NOP, which the kernel
                // emulates: ~1-2 us a hit) as fast as they can: about as many hits a second as
                // the kernel delivers here (~1.3M/s). Every one must be counted, none lost. Not
                // timed: the counts are exact whatever the machine's load. The buffer holds every
                // hit (2M records of 24 bytes on one CPU at worst) so that a debug build's reader,
                // several times slower than the release build's, cannot lose any; the release
                // build keeps up with the default 8 MiB (BENCHMARKS.md, "Live tracing").
                let _g = session::shared();
                let per_thread = 1_000_000u64;
                let (out, made) = fast_tick_run("count", 65536, per_thread)?;
                if made != 2 * per_thread {
                    return Err(format!("the target made {made} calls"));
                }
                let lines = json_lines_strict(&out.stdout)?;
                let last = lines.last().ok_or("no output")?;
                if last["counts"]["fast_tick"] != made
                    || last["lost"] != 0
                    || last["complete"] != true
                    || !out.status.success()
                {
                    return Err(format!(
                        "{made} calls made; {last}; stderr {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "trace_reports_exactly_what_it_lost_at_the_kernels_max_rate",
            NEEDS,
            move || {
                // The same two threads under `trace --json` with a 1 MiB buffer: what is printed
                // plus what netprobe says was lost must be exactly the calls made (exit status 3
                // when anything was lost, 0 when nothing was).
                let _g = session::shared();
                let per_thread = 500_000u64;
                let (out, made) = fast_tick_run("trace", 1024, per_thread)?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let delivered = stdout.matches("\"event\":\"entry\"").count() as u64;
                let lost = lost_warning(&stderr)?.unwrap_or(0);
                let want_status = if lost > 0 { 3 } else { 0 };
                if made != 2 * per_thread
                    || delivered + lost != made
                    || out.status.code() != Some(want_status)
                {
                    return Err(format!(
                        "{delivered} delivered + {lost} lost != {made} calls (exit {:?}): {stderr}",
                        out.status.code()
                    ));
                }
                Ok(())
            },
        ),
    ]);
}
