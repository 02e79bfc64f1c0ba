//! End-to-end tests of `count --metrics` and `latency --metrics` with a real Prometheus server
//! (Debian's `prometheus` package, started by the test on loopback with its own configuration
//! and storage, scraping every second): the value Prometheus's HTTP API returns for the probed
//! function equals the calls the target made, and the latency histogram's count does too.
//!
//! Target: `fixtures/c/tracee.c stdin N` (N calls of `np_add` after a line on stdin).

use fixtures::e2e::{self, err, Need};
use fixtures::live::{free_loopback_port, Waiting};
use serde_json::Value as Json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NP: &str = env!("CARGO_BIN_EXE_netprobe");
const TRACEFS: &str = "/sys/kernel/tracing";
/// Calls the target makes.
const N: u64 = 137;

type R = Result<(), String>;

fn tracee() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::CProgram::new("tracee").flags(&["-O2"]).build())
        .clone()
}

/// A Prometheus server on loopback scraping one netprobe every second, with its configuration
/// and storage in a temporary directory; killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Result<Prometheus, String> {
        let dir = tempfile::tempdir().map_err(err)?;
        let config = dir.path().join("prometheus.yml");
        // Configuration reference: https://prometheus.io/docs/prometheus/2.42/configuration/configuration/
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: netprobe\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .map_err(err)?;
        let port = free_loopback_port()?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting prometheus: {e}"))?;
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while curl(&format!("http://127.0.0.1:{port}/-/ready")).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err("prometheus did not become ready within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(p)
    }

    /// The value of instant query `query` (a single series), `None` when it has no result yet.
    fn value(&self, query: &str) -> Result<Option<f64>, String> {
        let out = Command::new("curl")
            .args(["-sfG", "--data-urlencode"])
            .arg(format!("query={query}"))
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .output()
            .map_err(err)?;
        let body = e2e::text(&out.stdout);
        let j: Json = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if j["status"] != "success" {
            return Err(format!("query {query}: {body}"));
        }
        match j["data"]["result"].as_array().map(Vec::as_slice) {
            Some([]) | None => Ok(None),
            Some([one]) => one["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .map(Some)
                .ok_or_else(|| format!("query {query}: {body}")),
            Some(_) => Err(format!("query {query}: more than one series: {body}")),
        }
    }

    /// Waits until `query` equals `want`, at most `within`; returns the last value seen.
    fn wait_for(&self, query: &str, want: f64, within: Duration) -> Result<Option<f64>, String> {
        let started = Instant::now();
        loop {
            let v = self.value(query)?;
            if v == Some(want) || started.elapsed() > within {
                return Ok(v);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn curl(url: &str) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sf", url])
        .output()
        .map_err(err)?;
    e2e::succeeded(out, url).map(|o| e2e::text(&o.stdout))
}

/// Runs `netprobe MODE --metrics 127.0.0.1:PORT` on one run of `tracee stdin N` with Prometheus
/// scraping it; after the calls, `queries` (with PID and SELF replaced by the target's pid and
/// the series' labels) must each reach N in Prometheus, then stay there for two more scrapes.
fn scraped(mode: &str, queries: &[&str]) -> R {
    let bin = tracee();
    let port = free_loopback_port()?;
    let prom = Prometheus::start(port)?;
    let mut target = Waiting::start(Command::new(&bin).args(["stdin", &N.to_string()]))?;
    let pid = target.pid().to_string();
    let spec = format!("{}:np_add", bin.display());
    let (child, stderr) = fixtures::live::spawn_until_live(
        Command::new(NP).args([
            mode,
            "--metrics",
            &format!("127.0.0.1:{port}"),
            "-p",
            &pid,
            &spec,
            "--duration",
            "120s",
        ]),
        Duration::from_secs(60),
    )?;
    let np_pid = child.id();
    let result = (|| -> R {
        let done = target.go()?;
        if !done.starts_with("done") {
            return Err(format!("target: {done}"));
        }
        let labels = format!("function=\"np_add\",pid=\"{pid}\",job=\"netprobe\"");
        for q in queries {
            let q = q.replace("SELF", &labels);
            let got = prom.wait_for(&q, N as f64, Duration::from_secs(30))?;
            if got != Some(N as f64) {
                return Err(format!(
                    "{q}: Prometheus says {got:?}, the target made {N} calls"
                ));
            }
        }
        // Two more scrapes: the value stays (no double counting), and Prometheus holds several
        // samples of it.
        std::thread::sleep(Duration::from_millis(2500));
        for q in queries {
            let q = q.replace("SELF", &labels);
            let got = prom.value(&q)?;
            if got != Some(N as f64) {
                return Err(format!("{q} two scrapes later: {got:?}, expected {N}"));
            }
        }
        let q = format!(
            "count_over_time({}[1m])",
            queries[0].replace("SELF", &labels)
        );
        match prom.value(&q)? {
            Some(n) if n >= 2.0 => Ok(()),
            n => Err(format!("{q}: {n:?} samples, expected at least 2 scrapes")),
        }
    })();
    // At EOF the target exits, and so does netprobe.
    target.finish();
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    result.map_err(|e| format!("{e}\nnetprobe stderr:\n{stderr}"))?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    if !out.status.success() {
        return Err(format!("netprobe exited with {}: {stderr}", out.status));
    }
    if !stderr.contains(&format!(
        "serving metrics on http://127.0.0.1:{port}/metrics"
    )) {
        return Err(format!("no serving line: {stderr}"));
    }
    // The text output keeps working beside the metrics.
    let stdout = e2e::text(&out.stdout);
    let text_count = match mode {
        "count" => format!("np_add {N}"),
        _ => format!("[{N} calls]"),
    };
    if !stdout
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .contains(&text_count)
    {
        return Err(format!("text output lacks '{text_count}': {stdout}"));
    }
    Ok(())
}

/// `count --metrics`: Prometheus's value of `netprobe_calls_total` for the function and the
/// target's pid is exactly the calls made.
fn count_metrics_scraped_by_prometheus_equal_the_calls() -> R {
    scraped("count", &["netprobe_calls_total{SELF}"])
}

/// `latency --metrics`: the duration histogram's `_count` and `+Inf` bucket equal the calls, and
/// so does the call counter.
fn latency_histogram_scraped_by_prometheus_counts_every_call() -> R {
    scraped(
        "latency",
        &[
            "netprobe_call_duration_seconds_count{SELF}",
            "netprobe_call_duration_seconds_bucket{SELF,le=\"+Inf\"}",
            "netprobe_calls_total{SELF}",
        ],
    )
}

/// A port already in use: one line naming the cause and the fix, exit 1, nothing left behind.
fn port_in_use_is_one_line_and_leaves_nothing() -> R {
    let bin = tracee();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").map_err(err)?;
    let port = taken.local_addr().map_err(err)?.port();
    let target = Waiting::start(Command::new(&bin).args(["stdin", "1"]))?;
    let child = Command::new(NP)
        .args(["count", "--metrics", &format!("127.0.0.1:{port}"), "-p"])
        .arg(target.pid().to_string())
        .arg(format!("{}:np_add", bin.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let np_pid = child.id();
    let out = child.wait_with_output().map_err(err)?;
    let stderr = e2e::text(&out.stderr);
    if out.status.code() != Some(1)
        || stderr.trim_end().lines().count() != 1
        || !stderr.contains("cannot serve metrics on")
        || !stderr.contains("free port")
    {
        return Err(format!(
            "expected a one-line error, exit 1: {:?} {stderr}",
            out.status
        ));
    }
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    drop(taken);
    Ok(())
}

fn main() {
    let needs = vec![
        Need::Root,
        Need::Tracefs,
        Need::CCompiler,
        Need::Program("prometheus"),
        Need::Program("curl"),
    ];
    // Build once, before the trials run in threads.
    if e2e::unmet(&needs).is_none() {
        tracee();
    }
    let c = vec![Need::Root, Need::Tracefs, Need::CCompiler];
    e2e::run(vec![
        e2e::trial(
            "count_metrics_scraped_by_prometheus_equal_the_calls",
            &needs,
            count_metrics_scraped_by_prometheus_equal_the_calls,
        ),
        e2e::trial(
            "latency_histogram_scraped_by_prometheus_counts_every_call",
            &needs,
            latency_histogram_scraped_by_prometheus_counts_every_call,
        ),
        e2e::trial(
            "port_in_use_is_one_line_and_leaves_nothing",
            &c,
            port_in_use_is_one_line_and_leaves_nothing,
        ),
    ]);
}
