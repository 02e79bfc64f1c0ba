//! The metrics soak: `latency --metrics` on a target making a steady stream of calls
//! (`fixtures/c/paced.c`: 10,000 a second by default), scraped every second by a real Prometheus
//! (Debian's `prometheus`, on loopback). It holds when, at the end, Prometheus's count of calls
//! and the latency histogram's count both equal the calls the target made (no event lost, and
//! `netprobe_lost_events_total` is 0), the counter never went down in any scrape
//! (`resets(...) == 0`), Prometheus took a sample about every second, and netprobe's resident
//! memory (`VmRSS`, sampled every second) stays flat: after a warm-up (half the run, at most
//! 2 minutes: the allocator's arenas for the HTTP server's threads settle) it grows by at most
//! [`RSS_SLACK_KB`], where a leak of one byte per call would be 6 MB in the long run.
//!
//! `NETPROBE_METRICS_SOAK_SECS` sets the length (default 20 s, the test command's short run;
//! `scripts/soak-metrics.sh` runs 600 s), `NETPROBE_METRICS_SOAK_RATE` the calls a second (a
//! multiple of 1000). The figures go to stderr, and as JSON to the file
//! `NETPROBE_METRICS_SOAK_REPORT` names; RELIABILITY.md quotes the long run's.

use fixtures::e2e::{self, err};
use fixtures::live::{free_loopback_port, Waiting};
use fixtures::netprobe;
use fixtures::prometheus::Prometheus;
use std::process::Command;
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";
/// How much netprobe's RSS may grow after the warm-up: a leak of one byte per call is 4.8 MB
/// over the 8 minutes after the 10-minute run's warm-up; what does not leak but stays is the
/// allocator's high-water mark after a backlog (netprobe kept off the CPU by other load for
/// seconds: the reader decodes a backlog a chunk at a time, about +5 MB after a 6 s stall).
const RSS_SLACK_KB: u64 = 4096;

type R = Result<(), String>;

fn env_u64(name: &str, default: u64) -> Result<u64, String> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| format!("{name}={v}: not a whole number")),
        Err(_) => Ok(default),
    }
}

/// Resident memory of process `pid` in KiB (`VmRSS` of `/proc/PID/status`, proc(5)).
fn rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn metrics_soak_counts_every_call_in_flat_memory() -> R {
    let secs = env_u64("NETPROBE_METRICS_SOAK_SECS", 20)?;
    let rate = env_u64("NETPROBE_METRICS_SOAK_RATE", 10_000)?;
    let bin = fixtures::CProgram::new("paced").flags(&["-O2"]).build();
    let port = free_loopback_port()?;
    let prom = Prometheus::start(port)?;
    let mut target = Waiting::start(Command::new(&bin).args([rate.to_string(), secs.to_string()]))?;
    let pid = target.pid();
    let (child, stderr) = fixtures::live::spawn_until_live(
        netprobe::command().args([
            "latency",
            "--metrics",
            &format!("127.0.0.1:{port}"),
            "-p",
            &pid.to_string(),
            &format!("{}:np_paced", bin.display()),
            "--duration",
            &format!("{}s", secs + 300),
        ]),
        Duration::from_secs(60),
    )?;
    let np_pid = child.id();
    let result = (|| -> Result<String, String> {
        let started = Instant::now();
        let calls = std::thread::spawn(move || {
            let done = target.go();
            (done, target)
        });
        // (seconds since the calls started, RSS in KiB), every second.
        let mut rss: Vec<(u64, u64)> = Vec::new();
        while !calls.is_finished() {
            if let Some(kb) = rss_kb(np_pid) {
                rss.push((started.elapsed().as_secs(), kb));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let (done, target) = calls.join().map_err(|_| "the target thread panicked")?;
        let done = done?;
        let mut words = done.split_whitespace();
        let (Some("done"), Some(made), Some(took)) = (words.next(), words.next(), words.next())
        else {
            return Err(format!("target: {done}"));
        };
        let made: u64 = made.parse().map_err(err)?;
        let took: f64 = took.parse().map_err(err)?;
        if made != rate * secs {
            return Err(format!("the target made {made} calls, not {}", rate * secs));
        }
        let labels = format!("function=\"np_paced\",pid=\"{pid}\"");
        for q in [
            format!("netprobe_calls_total{{{labels}}}"),
            format!("netprobe_call_duration_seconds_count{{{labels}}}"),
        ] {
            let got = prom.wait_for(&q, made as f64, Duration::from_secs(30))?;
            if got != Some(made as f64) {
                return Err(format!(
                    "{q}: Prometheus says {got:?}, the target made {made} calls"
                ));
            }
        }
        let lost = prom.value("netprobe_lost_events_total")?;
        if lost != Some(0.0) {
            return Err(format!("netprobe_lost_events_total: {lost:?}"));
        }
        let window = format!("[{}s]", started.elapsed().as_secs() + 10);
        let q = format!("resets(netprobe_calls_total{{{labels}}}{window})");
        let resets = prom.value(&q)?;
        if resets != Some(0.0) {
            return Err(format!("{q}: {resets:?}: the counter went down"));
        }
        let q = format!("count_over_time(netprobe_calls_total{{{labels}}}{window})");
        let scrapes = prom.value(&q)?.unwrap_or(0.0);
        // Prometheus's scrape manager starts its first scrapes about 5 s after it starts
        // (its target updates are batched every 5 s); from then on, one a second.
        if scrapes < 0.9 * (took - 6.0) {
            return Err(format!(
                "{q}: {scrapes} samples in {took:.0} s: Prometheus did not scrape every second"
            ));
        }
        // Prometheus's own account of its scrapes: attempts, failures, the slowest.
        let attempts = prom
            .value(&format!("count_over_time(up{window})"))?
            .unwrap_or(0.0);
        let failed = prom
            .value(&format!("sum_over_time(up{window})"))?
            .map_or(attempts, |ok| attempts - ok);
        let slowest = prom
            .value(&format!("max_over_time(scrape_duration_seconds{window})"))?
            .unwrap_or(0.0);
        let warm_at = (secs / 2).min(120);
        // RSS at ten points of the run, to show its course.
        let step = (secs / 10).max(1);
        let course: Vec<String> = (0..=10)
            .filter_map(|k| rss.iter().find(|(t, _)| *t >= k * step))
            .map(|(t, kb)| format!("[{t},{kb}]"))
            .collect();
        let warm = rss
            .iter()
            .find(|(t, _)| *t >= warm_at)
            .map(|&(_, kb)| kb)
            .ok_or("no RSS sample after the warm-up")?;
        let first = rss.first().map_or(0, |&(_, kb)| kb);
        let last = rss.last().map_or(0, |&(_, kb)| kb);
        let max = rss
            .iter()
            .filter(|(t, _)| *t >= warm_at)
            .map(|&(_, kb)| kb)
            .max()
            .unwrap_or(warm);
        let report = format!(
            "{{\"seconds\":{took:.3},\"rate_per_s\":{rate},\"calls\":{made},\"counted_by_prometheus\":{made},\"histogram_count\":{made},\"lost_events\":0,\"counter_resets\":0,\"scrapes\":{scrapes},\"scrape_attempts\":{attempts},\"failed_scrapes\":{failed},\"slowest_scrape_s\":{slowest:.4},\"rss_kb\":{{\"first\":{first},\"after_warmup\":{warm},\"warmup_s\":{warm_at},\"max_after_warmup\":{max},\"last\":{last},\"samples\":{},\"course_s_kb\":[{}]}}}}",
            rss.len(),
            course.join(",")
        );
        if max > warm + RSS_SLACK_KB {
            return Err(format!(
                "netprobe's RSS grew from {warm} KiB (at {warm_at} s) to {max} KiB: {report}"
            ));
        }
        // At EOF the target exits, and so does netprobe.
        target.finish();
        Ok(report)
    })();
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    let report = result.map_err(|e| format!("{e}\nnetprobe stderr:\n{stderr}"))?;
    eprintln!("metrics soak: {report}");
    if let Ok(path) = std::env::var("NETPROBE_METRICS_SOAK_REPORT") {
        std::fs::write(&path, format!("{report}\n")).map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(format!(
            "{l}\nnetprobe exited with {}: {stderr}",
            out.status
        ));
    }
    if !out.status.success() {
        return Err(format!("netprobe exited with {}: {stderr}", out.status));
    }
    Ok(())
}

fn main() {
    let needs = fixtures::prometheus::needs_with_tracing();
    e2e::run(vec![e2e::trial(
        "metrics_soak_counts_every_call_in_flat_memory",
        &needs,
        metrics_soak_counts_every_call_in_flat_memory,
    )]);
}
