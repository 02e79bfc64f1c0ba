//! End-to-end tests of `count --metrics` and `latency --metrics` with a real Prometheus server
//! (Debian's `prometheus` package, started by the test on loopback with its own configuration
//! and storage, scraping every second): the value Prometheus's HTTP API returns for the probed
//! function equals the calls the target made, and the latency histogram's count does too.
//!
//! Targets: `fixtures/c/tracee.c stdin N` (N calls of `np_add` after a line on stdin); the Go
//! sample app's HTTP service (`sampleapp serve`) in a Docker container made by the harness
//! (`harness::images::program_rootfs`, imported, never pulled), restarted with `docker restart`
//! while `latency --metrics --container` follows it.

use fixtures::e2e::{self, err, Need};
use fixtures::live::{free_loopback_port, Waiting};
use fixtures::netprobe;
use fixtures::prometheus::Prometheus;
use fixtures::tracee;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";
/// Calls the target makes.
const N: u64 = 137;

type R = Result<(), String>;

/// Runs `netprobe MODE --metrics 127.0.0.1:PORT` on one run of `tracee stdin N` with Prometheus
/// scraping it; after the calls, `queries` (with PID and SELF replaced by the target's pid and
/// the series' labels) must each reach N in Prometheus, then stay there for two more scrapes.
fn scraped(mode: &str, queries: &[&str]) -> R {
    let port = free_loopback_port()?;
    let prom = Prometheus::start(port)?;
    scraped_by(mode, queries, port, &prom, &[], "http", &|_| Ok(()))
}

/// [`scraped`] with netprobe's `extra` arguments, served on `scheme` (`http`, `https`) on
/// `port` and scraped by `prom` (its job `netprobe` scrapes netprobe); `also` checks more of
/// Prometheus while netprobe runs.
fn scraped_by(
    mode: &str,
    queries: &[&str],
    port: u16,
    prom: &Prometheus,
    extra: &[&str],
    scheme: &str,
    also: &dyn Fn(&Prometheus) -> R,
) -> R {
    let bin = tracee::bin();
    let mut target = Waiting::start(Command::new(&bin).args(["stdin", &N.to_string()]))?;
    let pid = target.pid().to_string();
    let spec = format!("{}:np_add", bin.display());
    let (child, stderr) = fixtures::live::spawn_until_live(
        netprobe::command()
            .args([
                mode,
                "--metrics",
                &format!("127.0.0.1:{port}"),
                "-p",
                &pid,
                &spec,
                "--duration",
                "120s",
            ])
            .args(extra),
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
            Some(n) if n >= 2.0 => {}
            n => return Err(format!("{q}: {n:?} samples, expected at least 2 scrapes")),
        }
        also(prom)
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
        "serving metrics on {scheme}://127.0.0.1:{port}/metrics"
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

/// `count --metrics --metrics-web-config`: a real Prometheus scraping over TLS (a CA and a
/// server certificate made here; `tls_config.ca_file`, `server_name`) with basic auth (a bcrypt
/// hash in the exporter toolkit's file) reads `up == 1` and exactly the calls made; the same
/// netprobe scraped over plain HTTP, over TLS without credentials, or with a wrong password is
/// down (`up == 0`).
fn tls_and_basic_auth_scrape_by_prometheus_counts_every_call() -> R {
    let dir = tempfile::tempdir().map_err(err)?;
    let certs = fixtures::tls::write_certificates(dir.path())?;
    let hash = bcrypt::hash("s3cret", bcrypt::DEFAULT_COST).map_err(err)?;
    let web = dir.path().join("web.yml");
    // Relative paths: the toolkit reads them from the file's directory.
    std::fs::write(
        &web,
        format!("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  prom: '{hash}'\n"),
    )
    .map_err(err)?;
    let port = free_loopback_port()?;
    let job = |name: &str, scheme: &str, password: Option<&str>| {
        let tls = match scheme {
            "https" => format!(
                "    tls_config:\n      ca_file: {}\n      server_name: localhost\n",
                certs.ca.display()
            ),
            _ => String::new(),
        };
        let auth = password
            .map(|p| format!("    basic_auth:\n      username: prom\n      password: {p}\n"))
            .unwrap_or_default();
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n{tls}{auth}    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
    };
    let prom = Prometheus::start_with_jobs(
        &[
            job("netprobe", "https", Some("s3cret")),
            job("plain_http", "http", None),
            job("no_credentials", "https", None),
            job("wrong_password", "https", Some("guess")),
        ]
        .concat(),
    )?;
    let refused = |prom: &Prometheus| -> R {
        let up = prom.wait_for("up{job=\"netprobe\"}", 1.0, Duration::from_secs(10))?;
        if up != Some(1.0) {
            return Err(format!(
                "up{{job=\"netprobe\"}} is {up:?} over TLS with basic auth"
            ));
        }
        for j in ["plain_http", "no_credentials", "wrong_password"] {
            let q = format!("up{{job=\"{j}\"}}");
            let up = prom.wait_for(&q, 0.0, Duration::from_secs(10))?;
            if up != Some(0.0) {
                return Err(format!("{q} is {up:?}: that scrape should be refused"));
            }
            let q = format!("count(netprobe_calls_total{{job=\"{j}\"}})");
            if let Some(n) = prom.value(&q)? {
                return Err(format!("{q} is {n}: a refused scrape got series"));
            }
        }
        Ok(())
    };
    let web = web.to_string_lossy().into_owned();
    scraped_by(
        "count",
        &["netprobe_calls_total{SELF}"],
        port,
        &prom,
        &["--metrics-web-config", &web],
        "https",
        &refused,
    )
}

/// `count --metrics` with a silent client and 200 idle connections (half stopped inside a
/// request line) open on its port: every scrape of Prometheus meanwhile succeeds in under a
/// second, and a scrape by curl gets the whole exposition within 3 s; a request with a 64 KiB
/// header is answered 431 (or closed), not served.
fn hostile_clients_do_not_delay_prometheus_scrapes() -> R {
    let port = free_loopback_port()?;
    let prom = Prometheus::start(port)?;
    let attack = |prom: &Prometheus| -> R {
        use std::io::{Read, Write};
        let connect = || std::net::TcpStream::connect(("127.0.0.1", port)).map_err(err);
        let mut big = connect()?;
        big.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(err)?;
        // The server may close before it has read everything: a failed write is a refusal too.
        let _ = write!(
            big,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        let mut answer = Vec::new();
        let _ = big.read_to_end(&mut answer);
        let answer = e2e::text(&answer);
        if !(answer.is_empty() || answer.starts_with("HTTP/1.1 431 ")) {
            return Err(format!("a 64 KiB header was answered: {answer:.300}"));
        }
        let _silent = connect()?;
        let mut idle = Vec::new();
        for i in 0..200 {
            let mut c = connect()?;
            if i % 2 == 1 {
                c.write_all(b"GET /metr").map_err(err)?;
            }
            idle.push(c);
        }
        let started = Instant::now();
        let body = fixtures::prometheus::curl(&format!("http://127.0.0.1:{port}/metrics"))?;
        let took = started.elapsed();
        eprintln!("curl scrape beside 201 hostile connections: {took:?}");
        if !body.ends_with("# EOF\n") || took > Duration::from_secs(3) {
            return Err(format!("curl's scrape took {took:?}: {body}"));
        }
        // Three scrapes of Prometheus while the connections stay open.
        std::thread::sleep(Duration::from_millis(3500));
        let window = format!("[{}ms]", started.elapsed().as_millis());
        let q = format!("min_over_time(up{{job=\"netprobe\"}}{window})");
        if prom.value(&q)? != Some(1.0) {
            return Err(format!("{q}: {:?}, a scrape failed", prom.value(&q)?));
        }
        let q = format!("max_over_time(scrape_duration_seconds{{job=\"netprobe\"}}{window})");
        match prom.value(&q)? {
            Some(s) if s < 1.0 => {
                eprintln!("slowest Prometheus scrape during the attack: {s} s");
                Ok(())
            }
            s => Err(format!("{q}: {s:?}")),
        }
    };
    scraped_by(
        "count",
        &["netprobe_calls_total{SELF}"],
        port,
        &prom,
        &[],
        "http",
        &attack,
    )
}

/// Stderr of a running netprobe, collected line by line while it runs.
struct Stderr(std::sync::Arc<std::sync::Mutex<String>>);

impl Stderr {
    fn collect(child: &mut Child) -> Result<Stderr, String> {
        use std::io::BufRead;
        let pipe = child.stderr.take().ok_or("no stderr")?;
        let all = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let into = all.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut t = into.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&line);
                t.push('\n');
            }
        });
        Ok(Stderr(all))
    }

    fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until stderr holds `want` `times` times, at most `within`.
    fn wait_for(&self, want: &str, times: usize, within: Duration) -> R {
        let started = Instant::now();
        while self.text().matches(want).count() < times {
            if started.elapsed() > within {
                return Err(format!(
                    "netprobe did not say '{want}' {times} time(s) within {} s:\n{}",
                    within.as_secs(),
                    self.text()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (a connection alone, no
/// request: no handler runs), at most 30 s.
fn wait_listening(port: u16) -> R {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            return Err(format!("nothing listens on 127.0.0.1:{port} after 30 s"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `n` GET /echo requests to the sample app (curl's URL globbing: one request per number), each
/// answered 200.
fn echo_requests(port: u16, first: u64, n: u64) -> R {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}\n"])
        .arg(format!(
            "http://127.0.0.1:{port}/echo?msg=[{first}-{}]",
            first + n - 1
        ))
        .output()
        .map_err(err)?;
    let codes = e2e::text(&out.stdout);
    let ok = codes.lines().filter(|l| *l == "200").count() as u64;
    if ok != n {
        return Err(format!("{n} requests, {ok} answered 200: {codes}"));
    }
    Ok(())
}

fn h<T>(r: anyhow::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{e:#}"))
}

/// The requests before and after the restart.
const BEFORE_RESTART: u64 = 60;
const AFTER_RESTART: u64 = 45;

/// `latency --metrics --container NAME` on the Go sample app's HTTP service in a container:
/// Prometheus's value of the handler's calls equals the requests made; then `docker restart`:
/// netprobe says it re-attached to the container's new process, and after more requests the
/// handler's calls summed over pid equal all requests made, the old process's series kept its
/// count, both pids' series carry the container's name and the same image label, and the
/// latency histogram's count equals the calls. Then `docker stop`: the probes go, netprobe
/// waits for the container, and SIGINT ends it with nothing left behind.
fn series_continue_across_a_container_restart() -> R {
    restarted("metrics-restart", End::SigintWhileStopped)
}

/// The same, then a second restart and SIGKILL of netprobe: the watchdog removes the probes of
/// the re-attached session too (they carry the session's name).
fn a_killed_follower_leaves_nothing_after_a_reattach() -> R {
    restarted("metrics-kill", End::SigkillAfterReattach)
}

/// How a [`restarted`] case ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// `docker stop`, then SIGINT while netprobe waits for the container.
    SigintWhileStopped,
    /// Another `docker restart`, then SIGKILL once netprobe has re-attached.
    SigkillAfterReattach,
}

fn restarted(role: &str, end: End) -> R {
    h(harness::docker::ensure_engine())?;
    let owner = harness::owner::Owner::current();
    let image = h(harness::images::go_sample_app_image(&owner, role))?;
    let container = harness::docker::ContainerGuard::new(owner.container_name(role));
    let app_port = free_loopback_port()?;
    h(harness::docker::docker(&[
        "run",
        "-d",
        "--name",
        container.name(),
        "--network",
        "host",
        image.reference(),
        "/app/sampleapp",
        "serve",
        "-addr",
        &format!("127.0.0.1:{app_port}"),
    ]))?;
    wait_listening(app_port)?;
    let pid_of = || -> Result<String, String> {
        h(harness::docker::docker(&[
            "inspect",
            "-f",
            "{{.State.Pid}}",
            container.name(),
        ]))
        .map(|p| p.trim().to_string())
    };
    let first_pid = pid_of()?;
    let port = free_loopback_port()?;
    let prom = Prometheus::start(port)?;
    let mut child = netprobe::command()
        .args([
            "latency",
            "--metrics",
            &format!("127.0.0.1:{port}"),
            "--container",
            container.name(),
            "main.EchoHandler",
            "--duration",
            "300s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let np_pid = child.id();
    let stderr = Stderr::collect(&mut child)?;
    let name = container.name().to_string();
    let result = (|| -> R {
        stderr.wait_for("probe(s) on", 1, Duration::from_secs(120))?;
        echo_requests(app_port, 1, BEFORE_RESTART)?;
        let function = format!("function=\"main.EchoHandler\",container=\"{name}\"");
        let calls = format!("sum(netprobe_calls_total{{{function}}})");
        let got = prom.wait_for(&calls, BEFORE_RESTART as f64, Duration::from_secs(30))?;
        if got != Some(BEFORE_RESTART as f64) {
            return Err(format!(
                "{calls}: Prometheus says {got:?} before the restart, {BEFORE_RESTART} requests were made"
            ));
        }
        h(harness::docker::docker(&["restart", "-t", "2", &name]))?;
        stderr.wait_for("re-attached to pid", 1, Duration::from_secs(60))?;
        wait_listening(app_port)?;
        let second_pid = pid_of()?;
        if second_pid == first_pid {
            return Err(format!("the restarted container kept pid {first_pid}"));
        }
        if !stderr
            .text()
            .contains(&format!("re-attached to pid {second_pid}"))
        {
            return Err(format!(
                "netprobe did not re-attach to the new pid {second_pid}:\n{}",
                stderr.text()
            ));
        }
        echo_requests(app_port, 1000, AFTER_RESTART)?;
        let total = (BEFORE_RESTART + AFTER_RESTART) as f64;
        let histogram = format!("sum(netprobe_call_duration_seconds_count{{{function}}})");
        for q in [&calls, &histogram] {
            let got = prom.wait_for(q, total, Duration::from_secs(30))?;
            if got != Some(total) {
                return Err(format!(
                    "{q}: Prometheus says {got:?} after the restart, {total} requests were made"
                ));
            }
        }
        // Each process's own series: the old one kept its count, the new one counts from 0; both
        // with the image as the container names it.
        for (pid, want) in [(&first_pid, BEFORE_RESTART), (&second_pid, AFTER_RESTART)] {
            let q = format!(
                "netprobe_calls_total{{{function},pid=\"{pid}\",image=\"/app/sampleapp\",comm=\"sampleapp\"}}"
            );
            let got = prom.wait_for(&q, want as f64, Duration::from_secs(10))?;
            if got != Some(want as f64) {
                return Err(format!("{q}: {got:?}, expected {want}"));
            }
        }
        // Counters never went down in any scrape.
        let q = format!("resets(netprobe_calls_total{{{function},pid=\"{first_pid}\"}}[5m])");
        match prom.value(&q)? {
            Some(0.0) => {}
            n => return Err(format!("{q}: {n:?}, expected 0")),
        }
        let q = "netprobe_probes_attached";
        match prom.value(q)? {
            Some(n) if n >= 1.0 => {}
            n => return Err(format!("{q}: {n:?} after the re-attach")),
        }
        if end == End::SigkillAfterReattach {
            h(harness::docker::docker(&["restart", "-t", "2", &name]))?;
            return stderr.wait_for("re-attached to pid", 2, Duration::from_secs(60));
        }
        // A stopped container: netprobe removes its probes and waits (the gauge says 0) until
        // SIGINT ends it cleanly.
        h(harness::docker::docker(&["stop", "-t", "2", &name]))?;
        stderr.wait_for("waiting for its new processes", 2, Duration::from_secs(30))?;
        let got = prom.wait_for(q, 0.0, Duration::from_secs(10))?;
        if got != Some(0.0) {
            return Err(format!("{q}: {got:?} while the container is stopped"));
        }
        Ok(())
    })();
    // SIGINT ends the session as Ctrl-C does; SIGKILL leaves the removal to the watchdog.
    let signal = match end {
        End::SigintWhileStopped => libc::SIGINT,
        End::SigkillAfterReattach => libc::SIGKILL,
    };
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(np_pid as libc::pid_t, signal) };
    let status = child.wait().map_err(err)?;
    // The collector thread ends when the pipe closes.
    std::thread::sleep(Duration::from_millis(200));
    let text = stderr.text();
    result.map_err(|e| format!("{e}\nnetprobe stderr:\n{text}"))?;
    let started = Instant::now();
    while let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        // The watchdog removes a killed session's probes within a few seconds.
        if end == End::SigintWhileStopped || started.elapsed() > Duration::from_secs(10) {
            return Err(format!("{l}\nnetprobe stderr:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if end == End::SigkillAfterReattach {
        return Ok(());
    }
    if !status.success() || !text.contains("stopped by SIGINT") {
        return Err(format!("netprobe exited with {status}: {text}"));
    }
    Ok(())
}

/// A port already in use: one line naming the cause and the fix, exit 1, nothing left behind;
/// also when a dead session is waiting to be cleaned (CI once saw its "removed ..." line added to
/// the error, when a trial running alongside had just killed a netprobe).
fn port_in_use_is_one_line_and_leaves_nothing() -> R {
    use std::os::unix::fs::MetadataExt;
    let bin = tracee::bin();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").map_err(err)?;
    let port = taken.local_addr().map_err(err)?.port();
    // A dead session's instance: named after a process that has exited.
    let mut exited = Command::new("true").spawn().map_err(err)?;
    exited.wait().map_err(err)?;
    let ns = std::fs::metadata("/proc/self/ns/pid").map_err(err)?.ino();
    let dead = format!("{TRACEFS}/instances/netprobe_{ns}_{}", exited.id());
    std::fs::create_dir(&dead).map_err(|e| format!("mkdir {dead}: {e}"))?;
    let result = port_in_use_run(&bin, port);
    // Another trial's netprobe may have cleaned it meanwhile.
    let _ = std::fs::remove_dir(&dead);
    drop(taken);
    result
}

fn port_in_use_run(bin: &std::path::Path, port: u16) -> R {
    let target = Waiting::start(Command::new(bin).args(["stdin", "1"]))?;
    let child = netprobe::command()
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
    Ok(())
}

fn main() {
    let needs = fixtures::prometheus::needs_with_tracing();
    // Build once, before the trials run in threads.
    if e2e::unmet(&needs).is_none() {
        tracee::bin();
    }
    let c = vec![Need::Root, Need::Tracefs, Need::CCompiler];
    let restart = [
        &[Need::Root, Need::Tracefs, Need::Go, Need::Docker][..],
        &fixtures::prometheus::needs(),
    ]
    .concat();
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
            "tls_and_basic_auth_scrape_by_prometheus_counts_every_call",
            &needs,
            tls_and_basic_auth_scrape_by_prometheus_counts_every_call,
        ),
        e2e::trial(
            "hostile_clients_do_not_delay_prometheus_scrapes",
            &needs,
            hostile_clients_do_not_delay_prometheus_scrapes,
        ),
        e2e::trial(
            "series_continue_across_a_container_restart",
            &restart,
            series_continue_across_a_container_restart,
        ),
        e2e::trial(
            "a_killed_follower_leaves_nothing_after_a_reattach",
            &restart,
            a_killed_follower_leaves_nothing_after_a_reattach,
        ),
        e2e::trial(
            "port_in_use_is_one_line_and_leaves_nothing",
            &c,
            port_in_use_is_one_line_and_leaves_nothing,
        ),
    ]);
}
