//! End-to-end tests of live tracing on real uprobes (root, tracefs, a C compiler).
//!
//! Every assertion is about real kernel hits on `fixtures/c/tracee.c`, whose call i is
//! `np_add(i - 3, i * 100000000000, "lbl-<i>") = a + b + strlen(s)`.

use fixtures::e2e::{self, err, Need};
use serde_json::Value as Json;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const NP: &str = env!("CARGO_BIN_EXE_netprobe");
const TRACEFS: &str = "/sys/kernel/tracing";
const NEEDS: &[Need] = &[Need::Root, Need::Tracefs, Need::CCompiler];

/// Built once, before the trials run in parallel threads (the fixture builder names its
/// temporary file by pid, so concurrent builds in one process would collide).
fn tracee() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::CProgram::new("tracee").flags(&["-O2"]).build())
        .clone()
}

fn expected(i: i64) -> (i64, i64, String, i64) {
    let s = format!("lbl-{i}");
    let (a, b) = (i - 3, i * 100_000_000_000);
    (a, b, s.clone(), a + b + s.len() as i64)
}

/// Every netprobe start removes stale sessions; the trial that leaves one behind on purpose runs
/// alone (write lock), the others together (read lock).
static START_LOCK: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    START_LOCK.read().unwrap_or_else(|e| e.into_inner())
}

/// The JSON lines of netprobe's output; a line that does not parse fails the trial.
fn json_lines(out: &[u8]) -> Vec<Json> {
    e2e::json_lines_strict(out).expect("valid JSON lines")
}

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
    let bin = tracee().display().to_string();
    let dir = tempfile::tempdir().map_err(err)?;
    let summary = dir.path().join("calls");
    let out = Command::new(NP)
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
    Ok((out, target_calls(&summary)?))
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

/// Checks the JSON hits of `n` calls made by `pid`: entries and returns, in order, exact values.
fn check_hits(hits: &[Json], n: i64, pid: Option<u64>) -> Result<(), String> {
    let entries: Vec<&Json> = hits.iter().filter(|h| h["event"] == "entry").collect();
    let returns: Vec<&Json> = hits.iter().filter(|h| h["event"] == "return").collect();
    if entries.len() as i64 != n || returns.len() as i64 != n {
        return Err(format!(
            "expected {n} entries and returns, got {} and {}: {hits:?}",
            entries.len(),
            returns.len()
        ));
    }
    for i in 1..=n {
        let (a, b, s, r) = expected(i);
        let e = entries[(i - 1) as usize];
        let ret = returns[(i - 1) as usize];
        if e["args"]["a"] != a || e["args"]["b"] != b || e["args"]["s"] != s.as_str() {
            return Err(format!("call {i}: expected ({a}, {b}, {s}), got {e}"));
        }
        if ret["retval"] != r {
            return Err(format!("call {i}: expected return {r}, got {ret}"));
        }
        if let Some(p) = pid {
            if e["pid"] != p || ret["pid"] != p {
                return Err(format!("call {i}: expected pid {p}, got {e}"));
            }
        }
    }
    Ok(())
}

/// The session name of netprobe process `pid` (same pid namespace as this test):
/// `netprobe_<PIDNS>_<PID>`.
fn session(pid: u32) -> String {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    format!("netprobe_{ns}_{pid}")
}

/// Runs `cmd` to its end with its output captured; its pid (which names its session) and output.
fn output_with_pid(cmd: &mut Command) -> Result<(u32, Output), String> {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    Ok((pid, child.wait_with_output().map_err(err)?))
}

fn our_leftovers(pid: u32) -> (bool, bool) {
    let group = format!("{}/", session(pid));
    let events = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).unwrap_or_default();
    let probes = events.lines().any(|l| l.contains(&format!(":{group}")));
    let inst = Path::new(&format!("{TRACEFS}/instances/{}", session(pid))).exists();
    (probes, inst)
}

fn wait_gone(pid: u32, within: Duration) -> Result<(), String> {
    let end = Instant::now() + within;
    loop {
        let (p, i) = our_leftovers(pid);
        if !p && !i {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!(
                "session {} left behind: probes={p} instance={i}",
                session(pid)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The call count a tracee wrote as the first word of its summary file.
fn target_calls(summary: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(summary).map_err(err)?;
    text.split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or(format!("no call count from the target: {text:?}"))
}

/// A tracee in `stdin` mode: running, waiting for "go".
struct Waiting {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Waiting {
    fn start(n: u32) -> Waiting {
        let mut child = Command::new(tracee())
            .args(["stdin", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tracee");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "{line}");
        Waiting { child, out }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn go(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "done");
    }
    fn finish(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Starts `netprobe ARGS` and waits for its "probe(s) on" line on stderr (probes are live).
fn start_netprobe(args: &[&str]) -> (Child, std::thread::JoinHandle<String>) {
    fixtures::live::spawn_until_live(Command::new(NP).args(args), Duration::from_secs(30))
        .expect("start netprobe")
}

fn signal(pid: u32, sig: i32) {
    unsafe { libc::kill(pid as i32, sig) };
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee();
    }
    let t = || tracee().display().to_string();
    e2e::run(vec![
        e2e::trial(
            "trace_c_sees_every_call_with_exact_args_and_returns_from_the_first",
            NEEDS,
            move || {
                let _g = shared();
                let bin = t();
                let out = Command::new(NP)
                    .args([
                        "trace",
                        "--json",
                        "-c",
                        &format!("{bin} now 25"),
                        &format!("{bin}:np_add a=s32 b=s64 s=string"),
                        &format!("r:{bin}:np_add s64"),
                    ])
                    .output()
                    .map_err(err)?;
                if !out.status.success() {
                    return Err(format!(
                        "netprobe failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let hits = json_lines(&out.stdout);
                // -c: the first call (i = 1, a = -2) is there, so tracing started before the command ran.
                check_hits(&hits, 25, None)
            },
        ),
        e2e::trial(
            "raw_array_fetch_args_decode_every_element",
            NEEDS,
            move || {
                // The kernel declares array fields without a length (`u8 w[]; size:5`); each call's
                // label "lbl-<i>" must come back byte for byte, and as u16 pairs.
                let _g = shared();
                let bin = t();
                let out = Command::new(NP)
                    .args([
                        "trace",
                        "--json",
                        "-c",
                        &format!("{bin} now 9"),
                        &format!("{bin}:np_add w=+0(%dx):u8[5] u=+0(%dx):u16[2]"),
                    ])
                    .output()
                    .map_err(err)?;
                let hits = json_lines(&out.stdout);
                if hits.len() != 9 {
                    return Err(format!(
                        "{} hits for 9 calls: {}",
                        hits.len(),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                for (i, h) in hits.iter().enumerate() {
                    let label = format!("lbl-{}", i + 1);
                    let want: Vec<u64> = label.bytes().map(u64::from).collect();
                    let got: Vec<u64> =
                        serde_json::from_value(h["args"]["w"].clone()).map_err(err)?;
                    if got != want {
                        return Err(format!("call {}: w = {got:?}, want {want:?}", i + 1));
                    }
                    let b = label.as_bytes();
                    let pairs = vec![
                        u64::from(u16::from_le_bytes([b[0], b[1]])),
                        u64::from(u16::from_le_bytes([b[2], b[3]])),
                    ];
                    let got: Vec<u64> =
                        serde_json::from_value(h["args"]["u"].clone()).map_err(err)?;
                    if got != pairs {
                        return Err(format!("call {}: u = {got:?}, want {pairs:?}", i + 1));
                    }
                }
                Ok(())
            },
        ),
        e2e::trial(
            "inside_a_pid_namespace_hits_arrive_with_the_namespace_pids",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("unshare"),
            ],
            move || {
                // A sidecar's situation: netprobe and its target in a pid namespace, where
                // set_event_pid's kernel (global) pids cannot be named directly.
                let _g = shared();
                let bin = t();
                let out = Command::new("unshare")
                    .args([
                        "--pid",
                        "--fork",
                        "--mount-proc",
                        NP,
                        "trace",
                        "--json",
                        "-c",
                    ])
                    .arg(format!("{bin} now 7"))
                    .arg(format!("{bin}:np_add a=s32 b=s64 s=string"))
                    .arg(format!("r:{bin}:np_add s64"))
                    .output()
                    .map_err(err)?;
                let hits = json_lines(&out.stdout);
                check_hits(&hits, 7, None).map_err(|e| {
                    format!("{e}; stderr: {}", String::from_utf8_lossy(&out.stderr))
                })?;
                // The ids shown are the namespace's (netprobe is 1 there, its child small).
                for h in &hits {
                    let pid = h["pid"].as_u64().ok_or("no pid")?;
                    if !(2..100).contains(&pid) || h["tid"].as_u64() != Some(pid) {
                        return Err(format!("namespace ids expected, got {h}"));
                    }
                }
                Ok(())
            },
        ),
        e2e::trial(
            "a_thousand_functions_in_one_session_each_counted_exactly",
            NEEDS,
            move || {
                // 1,000 probes share a few kernel events (multi-probe events tagged with np_id); every
                // hit must still be attributed to its own function.
                let _g = shared();
                let many = fixtures::CProgram::new("many").flags(&["-O1"]).build();
                let many = many.to_str().unwrap();
                let out = Command::new(NP)
                    .args([
                        "count",
                        "--json",
                        "-c",
                        &format!("{many} 7"),
                        &format!("{many}:f*"),
                    ])
                    .output()
                    .map_err(err)?;
                let report: Json = serde_json::from_slice(
                    out.stdout
                        .split(|&b| b == b'\n')
                        .find(|l| !l.is_empty())
                        .unwrap_or_default(),
                )
                .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stderr)))?;
                let counts = report["counts"].as_object().ok_or("no counts")?;
                let probed = counts
                    .keys()
                    .filter(|k| k.starts_with('f') && k[1..].parse::<u32>().is_ok())
                    .count();
                if probed != 1000 {
                    return Err(format!("{probed} of f0..f999 probed"));
                }
                // (`f*` also matches crt's frame_dummy, which really runs once at start-up.)
                for (name, n) in counts.iter().filter(|(k, _)| k[1..].parse::<u32>().is_ok()) {
                    let want = match name.as_str() {
                        "f0" => 7,
                        "f500" => 14,
                        "f999" => 21,
                        _ => 0,
                    };
                    if n.as_u64() != Some(want) {
                        return Err(format!("{name}: {n} calls counted, {want} made"));
                    }
                }
                if report["lost"] != 0 || report["complete"] != true {
                    return Err(format!("incomplete: {report}"));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "ring_buffer_overflow_is_reported_exactly",
            NEEDS,
            move || {
                // A 16 KiB buffer and a reader that cannot write (nobody drains its stdout for a
                // while): most hits must be dropped, and netprobe must say how many, exit with 3,
                // and never present the rest as complete. The kernel's count is exact here.
                let _g = shared();
                let bin = t();
                // The target's own summary goes to a file: in the shared stdout pipe its line
                // could be spliced into one of netprobe's large (non-atomic) writes. `exec` keeps
                // the pid that `-c` traces.
                let dir = tempfile::tempdir().map_err(err)?;
                let summary = dir.path().join("calls");
                let np = Command::new(NP)
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
                let _g = shared();
                let per_thread = 1_000_000u64;
                let (out, made) = fast_tick_run("count", 65536, per_thread)?;
                if made != 2 * per_thread {
                    return Err(format!("the target made {made} calls"));
                }
                let lines = json_lines(&out.stdout);
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
                let _g = shared();
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
        e2e::trial(
            "ten_thousand_functions_in_one_session_each_counted_exactly",
            NEEDS,
            move || {
                // Every function of a 10,000-function program (fixtures/c/many10k.c), spread over
                // several multi-probe events; the program calls f_i (i % 7 + 1) times per round for
                // every i that is a multiple of 97, nothing else. Each count must be exact, and the
                // session must leave nothing registered.
                let _g = shared();
                let many = fixtures::CProgram::new("many10k").flags(&["-O1"]).build();
                let many = many.to_str().unwrap();
                let rounds = 3u64;
                let mut cmd = Command::new(NP);
                cmd.args(["count", "--json", "-c", &format!("{many} {rounds}")]);
                // f*0 .. f*9: every f_i, and not crt's frame_dummy.
                cmd.args((0..10).map(|d| format!("{many}:f*{d}")));
                let (pid, out) = output_with_pid(&mut cmd)?;
                let lines = json_lines(&out.stdout);
                let report = lines.last().ok_or(format!(
                    "no output: {}",
                    String::from_utf8_lossy(&out.stderr)
                ))?;
                let counts = report["counts"].as_object().ok_or("no counts")?;
                let mut probed = 0;
                for (name, n) in counts {
                    let Some(i) = name.strip_prefix('f').and_then(|d| d.parse::<u64>().ok()) else {
                        continue;
                    };
                    probed += 1;
                    let want = if i % 97 == 0 { rounds * (i % 7 + 1) } else { 0 };
                    if n.as_u64() != Some(want) {
                        return Err(format!("{name}: {n} calls counted, {want} made"));
                    }
                }
                if probed != 10_000 {
                    return Err(format!("{probed} of f0..f9999 counted"));
                }
                if report["lost"] != 0 || report["complete"] != true || !out.status.success() {
                    return Err(format!("incomplete: {report}"));
                }
                // Several kernel events, none of them left behind.
                let (probes, inst) = our_leftovers(pid);
                if probes || inst {
                    return Err(format!("session {} left behind", session(pid)));
                }
                Ok(())
            },
        ),
        e2e::trial("count_equals_calls_exactly", NEEDS, move || {
            let _g = shared();
            let bin = t();
            let out = Command::new(NP)
                .args([
                    "count",
                    "--json",
                    "-c",
                    &format!("{bin} now 5000"),
                    &format!("{bin}:np_add"),
                ])
                .output()
                .map_err(err)?;
            let lines = json_lines(&out.stdout);
            let last = lines.last().ok_or("no output")?;
            if last["counts"]["np_add"] != 5000 || last["complete"] != true {
                return Err(format!(
                    "{last}; stderr {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(())
        }),
        e2e::trial("latency_pairs_every_call", NEEDS, move || {
            let _g = shared();
            let bin = t();
            let out = Command::new(NP)
                .args([
                    "latency",
                    "--json",
                    "-c",
                    &format!("{bin} now 300"),
                    &format!("{bin}:np_add"),
                ])
                .output()
                .map_err(err)?;
            let lines = json_lines(&out.stdout);
            let f = lines.first().ok_or("no output")?;
            if f["count"] != 300 || f["p50_ns"].as_u64().unwrap_or(0) == 0 {
                return Err(format!("{f}"));
            }
            let bucket_sum: u64 = f["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["count"].as_u64().unwrap())
                .sum();
            if bucket_sum != 300 {
                return Err(format!("buckets sum to {bucket_sum}"));
            }
            Ok(())
        }),
        e2e::trial("pid_filter_sees_only_that_process", NEEDS, move || {
            let _g = shared();
            let bin = t();
            let mut mine = Waiting::start(40);
            let mut other = Waiting::start(40);
            let pid = mine.pid().to_string();
            let (np, errs) = start_netprobe(&[
                "trace",
                "--json",
                "-p",
                &pid,
                &format!("{bin}:np_add a=s32 b=s64 s=string"),
                &format!("r:{bin}:np_add s64"),
            ]);
            other.go();
            mine.go();
            other.finish();
            mine.finish(); // target exits: netprobe stops by itself
            let out = np.wait_with_output().map_err(err)?;
            let stderr = errs.join().unwrap();
            if !out.status.success() {
                return Err(stderr);
            }
            check_hits(&json_lines(&out.stdout), 40, Some(pid.parse().unwrap()))?;
            if !stderr.contains("target exited") {
                return Err(format!("expected a stop on target exit: {stderr}"));
            }
            Ok(())
        }),
        e2e::trial(
            "two_sessions_on_one_function_see_only_their_own_hits",
            NEEDS,
            move || {
                let _g = shared();
                let bin = t();
                let mut a = Waiting::start(30);
                let mut b = Waiting::start(17);
                let spec = [
                    format!("{bin}:np_add a=s32 b=s64 s=string"),
                    format!("r:{bin}:np_add s64"),
                ];
                let (na, ea) = start_netprobe(&[
                    "trace",
                    "--json",
                    "-p",
                    &a.pid().to_string(),
                    &spec[0],
                    &spec[1],
                ]);
                let (nb, eb) = start_netprobe(&[
                    "trace",
                    "--json",
                    "-p",
                    &b.pid().to_string(),
                    &spec[0],
                    &spec[1],
                ]);
                a.go();
                b.go();
                let (pa, pb) = (a.pid() as u64, b.pid() as u64);
                a.finish();
                b.finish();
                let oa = na.wait_with_output().map_err(err)?;
                let ob = nb.wait_with_output().map_err(err)?;
                let (ea, eb) = (ea.join().unwrap(), eb.join().unwrap());
                check_hits(&json_lines(&oa.stdout), 30, Some(pa))
                    .map_err(|e| format!("{e}; {ea}"))?;
                check_hits(&json_lines(&ob.stdout), 17, Some(pb)).map_err(|e| format!("{e}; {eb}"))
            },
        ),
        e2e::trial("text_output_and_max_events", NEEDS, move || {
            let _g = shared();
            let bin = t();
            let out = Command::new(NP)
                .args([
                    "trace",
                    "--max-events",
                    "3",
                    "-c",
                    &format!("{bin} now 10"),
                    &format!("{bin}:np_add a=s32 b=x64 s=string"),
                ])
                .output()
                .map_err(err)?;
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().skip(1).collect();
            if lines.len() != 3
                || !lines[0].contains("-> np_add(a=-2, b=0x174876e800, s=\"lbl-1\")")
            {
                return Err(text.into_owned());
            }
            Ok(())
        }),
        e2e::trial("cleanup_after_sigint_sigterm_sighup", NEEDS, move || {
            let _g = shared();
            let bin = t();
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                let w = Waiting::start(1);
                let (np, errs) = start_netprobe(&[
                    "trace",
                    "-p",
                    &w.pid().to_string(),
                    &format!("{bin}:np_add s32"),
                ]);
                let pid = np.id();
                // Scoped to a process: probe definitions opened as perf events, no instance.
                if our_leftovers(pid) != (true, false) {
                    return Err(format!("session of {pid} not visible while running"));
                }
                signal(pid, sig);
                let out = np.wait_with_output().map_err(err)?;
                let stderr = errs.join().unwrap();
                w.finish();
                if !out.status.success() || !stderr.contains("stopped by") {
                    return Err(format!("signal {sig}: {:?} {stderr}", out.status));
                }
                wait_gone(pid, Duration::from_millis(1))?;
            }
            Ok(())
        }),
        e2e::trial(
            "instance_held_open_at_exit_still_loses_its_probes",
            NEEDS,
            move || {
                // netprobe removes its instance first on exit (that disables its events with one
                // grace period); when someone else holds a file of the instance, it disables and
                // removes the probes anyway, says why the instance stays, and `clean` removes
                // the instance once the file is closed. A host-wide session has an instance;
                // `--tid` keeps the calls of this test's target alone.
                let _g = shared();
                let mut w = Waiting::start(3);
                let (np, errs) = start_netprobe(&[
                    "count",
                    "--tid",
                    &w.pid().to_string(),
                    &format!("{}:np_add", t()),
                ]);
                let pid = np.id();
                let held =
                    std::fs::File::open(format!("{TRACEFS}/instances/{}/trace", session(pid)))
                        .map_err(err)?;
                w.go();
                signal(pid, libc::SIGINT);
                let out = np.wait_with_output().map_err(err)?;
                let stderr = errs.join().unwrap();
                w.finish();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let counted = stdout
                    .lines()
                    .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["np_add", "3"]);
                if !counted || our_leftovers(pid) != (false, true) {
                    return Err(format!(
                        "leftovers {:?} (want probes gone, instance held), exit {:?}\n{stdout}\n{stderr}",
                        our_leftovers(pid),
                        out.status
                    ));
                }
                if out.status.success()
                    || !stderr.contains("still open")
                    || stderr.contains("panick")
                {
                    return Err(format!(
                        "want a failing exit naming the open file: {stderr}"
                    ));
                }
                drop(held);
                let clean = Command::new(NP).arg("clean").output().map_err(err)?;
                if !clean.status.success() {
                    return Err(format!("clean: {}", String::from_utf8_lossy(&clean.stderr)));
                }
                wait_gone(pid, Duration::from_secs(10))
            },
        ),
        e2e::trial(
            "session_in_another_pid_namespace_left_alone_until_its_namespace_is_gone",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("unshare"),
            ],
            move || {
                let _g = START_LOCK.write().unwrap_or_else(|e| e.into_inner());
                pidns_session_trial()
            },
        ),
        e2e::trial(
            "clean_right_after_sigkill_returns_only_when_clean",
            NEEDS,
            move || {
                // `netprobe clean` the moment a netprobe is SIGKILLed, while it is a zombie (its
                // parent, this test, has not reaped it) and its watchdog is removing the session:
                // when clean returns, nothing of the session is left, and it says who removed it.
                let _g = START_LOCK.write().unwrap_or_else(|e| e.into_inner());
                let bin = tracee();
                let (mut np, _e) = start_netprobe(&[
                    "count",
                    "-c",
                    &format!("{} spin 60", bin.display()),
                    &format!("{}:np_tick", bin.display()),
                ]);
                let pid = np.id();
                // A `-c` session: definitions opened as perf events, no instance.
                if our_leftovers(pid) != (true, false) {
                    return Err("session not placed".into());
                }
                signal(pid, libc::SIGKILL);
                let zombie = || {
                    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                        s.rsplit(')')
                            .next()
                            .is_some_and(|t| t.trim_start().starts_with('Z'))
                    })
                };
                let end = Instant::now() + Duration::from_secs(5);
                while !zombie() && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let was_zombie = zombie();
                let out = Command::new(NP).arg("clean").output().map_err(err)?;
                let left = our_leftovers(pid);
                let _ = np.wait();
                let text = String::from_utf8_lossy(&out.stdout);
                if !was_zombie {
                    return Err("the killed netprobe never showed as a zombie: test is void".into());
                }
                if !out.status.success() || left != (false, false) || !text.contains(&session(pid))
                {
                    return Err(format!(
                        "clean returned with probes={} instance={} left: {text} {}",
                        left.0,
                        left.1,
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "scoped_session_sigkill_leaves_no_breakpoint_and_its_watchdog_the_rest",
            NEEDS,
            move || {
                // A session scoped to a process holds its probes as perf events: SIGKILL closes
                // them, and the kernel takes the breakpoints out of the target at once, even
                // when the watchdog is killed too (the disabled definitions then wait for
                // `clean`, and trap nothing: the kernel's hit counter of the target's file does
                // not move). With the watchdog alive, nothing is left without `clean`.
                let _g = START_LOCK.write().unwrap_or_else(|e| e.into_inner());
                let bin = t();
                for command in ["count", "trace"] {
                    let mut w = Waiting::start(3);
                    let target = w.pid();
                    let (np, _e) = start_netprobe(&[
                        command,
                        "-p",
                        &target.to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    kill_watchdog(pid)?;
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    if !our_leftovers(pid).0 {
                        return Err(format!("{command}: no definition left to look at"));
                    }
                    w.go();
                    w.finish();
                    let profile = std::fs::read_to_string(format!("{TRACEFS}/uprobe_profile"))
                        .map_err(err)?;
                    let mapped = format!("/proc/{target}/map_files/");
                    let hits: u64 = profile
                        .lines()
                        .filter(|l| l.trim_start().starts_with(&mapped))
                        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
                        .sum();
                    if hits != 0 {
                        return Err(format!(
                            "{command}: {hits} hit(s) after SIGKILL: a breakpoint outlived the session"
                        ));
                    }
                    let out = Command::new(NP).arg("clean").output().map_err(err)?;
                    if !out.status.success() {
                        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
                    }
                    wait_gone(pid, Duration::from_secs(5))?;

                    let w = Waiting::start(1);
                    let (np, _e) = start_netprobe(&[
                        command,
                        "-p",
                        &w.pid().to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    wait_gone(pid, Duration::from_secs(6))?;
                    w.finish();
                }
                Ok(())
            },
        ),
        e2e::trial(
            "shared_event_session_removed_after_sigkill_by_watchdog_and_clean",
            NEEDS,
            move || {
                // 100 probes in one multi-probe event: uprobe_events lists it 100 times, yet it
                // is one event to remove.
                let _g = START_LOCK.write().unwrap_or_else(|e| e.into_inner());
                let many = fixtures::CProgram::new("many").flags(&["-O1"]).build();
                let spec = format!("{}:f*0", many.display());
                let (np, _e) = start_netprobe(&["count", &spec]);
                let pid = np.id();
                if our_leftovers(pid) != (true, true) {
                    return Err("session not placed".into());
                }
                signal(pid, libc::SIGKILL);
                let _ = np.wait_with_output();
                wait_gone(pid, Duration::from_secs(6))?;
                let (np, _e) = start_netprobe(&["count", &spec]);
                let pid = np.id();
                kill_watchdog(pid)?;
                signal(pid, libc::SIGKILL);
                let _ = np.wait_with_output();
                std::thread::sleep(Duration::from_millis(300));
                let out = Command::new(NP).arg("clean").output().map_err(err)?;
                let text = String::from_utf8_lossy(&out.stdout);
                if !text.contains(&format!("removed {}: 1 event(s), instance", session(pid))) {
                    return Err(format!(
                        "clean: {text} {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                wait_gone(pid, Duration::from_millis(1))
            },
        ),
        e2e::trial(
            "cleanup_after_sigkill_by_watchdog_clean_and_next_start",
            NEEDS,
            move || {
                let _g = START_LOCK.write().unwrap_or_else(|e| e.into_inner());
                let bin = t();
                // A probe of somebody else's group must survive all of this.
                let foreign = format!("p:nptest_tracefs_foreign/np_add {bin}:0x0");
                let off = {
                    let out = Command::new("nm").arg(&bin).output().map_err(err)?;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    let line = text
                        .lines()
                        .find(|l| l.ends_with(" np_add"))
                        .ok_or("nm: no np_add")?
                        .to_string();
                    u64::from_str_radix(line.split(' ').next().unwrap(), 16).map_err(err)?
                };
                let _ = off;
                let foreign = foreign.replace(":0x0", &format!(":{:#x}", off));
                append(&foreign)?;
                let result = (|| {
                    // 1. SIGKILL: the watchdog removes the session.
                    let w = Waiting::start(1);
                    let (np, _e) = start_netprobe(&[
                        "trace",
                        "-p",
                        &w.pid().to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    wait_gone(pid, Duration::from_secs(6))?;
                    // 2. SIGKILL of the watchdog and then netprobe: `netprobe clean` removes it.
                    let (np, _e) = start_netprobe(&[
                        "trace",
                        "-p",
                        &w.pid().to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    kill_watchdog(pid)?;
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    std::thread::sleep(Duration::from_millis(300));
                    if our_leftovers(pid) == (false, false) {
                        return Err(
                            "nothing left after killing netprobe and its watchdog: test is void"
                                .into(),
                        );
                    }
                    let out = Command::new(NP).arg("clean").output().map_err(err)?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    if !text.contains(&format!("removed {}", session(pid))) {
                        return Err(format!("clean: {text}"));
                    }
                    wait_gone(pid, Duration::from_millis(1))?;
                    // 3. Same, and the next netprobe start removes it.
                    let (np, _e) = start_netprobe(&[
                        "trace",
                        "-p",
                        &w.pid().to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    kill_watchdog(pid)?;
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    std::thread::sleep(Duration::from_millis(300));
                    let out = Command::new(NP)
                        .args([
                            "count",
                            "--duration",
                            "300ms",
                            "-c",
                            &format!("{bin} now 1"),
                            &format!("{bin}:np_add"),
                        ])
                        .output()
                        .map_err(err)?;
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    if !stderr.contains(&format!("dead session {}", session(pid))) {
                        return Err(format!(
                            "next start did not report the stale session: {stderr}"
                        ));
                    }
                    wait_gone(pid, Duration::from_millis(1))?;
                    w.finish();
                    let events =
                        std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
                    if !events.contains("nptest_tracefs_foreign/np_add") {
                        return Err("the foreign probe was removed".into());
                    }
                    Ok(())
                })();
                let _ = append("-:nptest_tracefs_foreign/np_add");
                result
            },
        ),
        e2e::trial(
            "gate_refuses_mid_instruction_offset_everywhere",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("objdump"),
            ],
            move || {
                let _g = shared();
                gate_trial()
            },
        ),
        e2e::trial("errors_are_one_line_and_leave_nothing", NEEDS, move || {
            let _g = shared();
            let bin = t();
            // A process whose main thread has exited while another runs (`pthread_exit`).
            let headless = fixtures::live::Headless::start()?;
            let headless_pid = headless.pid();
            for (args, needle) in [
                (
                    vec![
                        "trace".to_string(),
                        "-p".into(),
                        "999999999".into(),
                        "np_add".into(),
                    ],
                    "no process with pid",
                ),
                (
                    vec![
                        "trace".to_string(),
                        "-p".into(),
                        headless_pid.to_string(),
                        "sleep".into(),
                    ],
                    "its main thread has exited while 1 other thread(s) still run",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:no_such_fn")],
                    "no function matches",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:np_add bogus")],
                    "unknown argument type",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:np_add a=%zz:s32")],
                    "Invalid register name",
                ),
            ] {
                let (pid, out) = output_with_pid(Command::new(NP).args(&args))?;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let err_lines: Vec<&str> = stderr
                    .lines()
                    .filter(|l| l.starts_with("netprobe: error"))
                    .collect();
                if out.status.code() != Some(1)
                    || err_lines.len() != 1
                    || !err_lines[0].contains(needle)
                    || stderr.contains("panicked")
                {
                    return Err(format!("{args:?}: {:?} {stderr}", out.status));
                }
                // The session's instance is prepared while names resolve: a name that fails
                // removes it before the error is shown (nothing of the session once it exits).
                if our_leftovers(pid) != (false, false) {
                    return Err(format!(
                        "{args:?}: session {} left {:?} (probes, instance)",
                        session(pid),
                        our_leftovers(pid)
                    ));
                }
            }
            // Other trials run concurrently: only sessions of netprobe processes that are gone count.
            let events =
                std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
            for l in events.lines() {
                let Some(g) = l
                    .split(['/', ' '])
                    .next()
                    .and_then(|h| h.split_once(':'))
                    .map(|x| x.1)
                else {
                    continue;
                };
                if let Some(pid) = g
                    .strip_prefix("netprobe_")
                    .and_then(|p| p.split_once('_'))
                    .and_then(|(_, p)| p.parse::<u32>().ok())
                {
                    if !Path::new(&format!("/proc/{pid}")).exists() {
                        return Err(format!("probe of a dead netprobe left: {l}"));
                    }
                }
            }
            Ok(())
        }),
    ]);
}

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
    std::fs::copy(tracee(), &copy).map_err(err)?;
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
    let run = |args: &[&str]| Command::new(NP).args(args).output().map_err(err);
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
    let lines = json_lines(&out.stdout);
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

fn append(line: &str) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("{TRACEFS}/uprobe_events"))
        .map_err(err)?;
    f.write_all(format!("{line}\n").as_bytes()).map_err(err)
}

/// SIGKILLs the watchdog child of netprobe `pid` (found in /proc/PID/task/*/children).
fn kill_watchdog(pid: u32) -> Result<(), String> {
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).map_err(err)?;
    let mut found = false;
    for c in children.split_whitespace() {
        let c: u32 = c.parse().map_err(err)?;
        let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
        if comm.starts_with("netprobe") {
            signal(c, libc::SIGKILL);
            found = true;
        }
    }
    if found {
        std::thread::sleep(Duration::from_millis(100));
        Ok(())
    } else {
        Err(format!("no watchdog child of {pid}: {children}"))
    }
}

/// A netprobe session in its own pid namespace (a container sidecar's situation) is named after
/// that namespace; a host `netprobe clean` leaves it alone while it lives, and removes what it
/// left once the namespace is gone.
fn pidns_session_trial() -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let bin = tracee();
    let bin = bin.to_str().unwrap();
    let mut unshare = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            NP,
            "count",
            "--duration",
            "60s",
            "-c",
        ])
        .arg(format!("{bin} spin 60"))
        .arg(format!("{bin}:np_tick"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(err)?;
    let result = (|| {
        // The namespaced netprobe is unshare's child; it is pid 1 in its namespace.
        let deadline = Instant::now() + Duration::from_secs(20);
        let (np_host_pid, ns) = loop {
            let kids =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id()))
                    .unwrap_or_default();
            if let Some(k) = kids
                .split_whitespace()
                .next()
                .and_then(|k| k.parse::<u32>().ok())
            {
                if let Ok(m) = std::fs::metadata(format!("/proc/{k}/ns/pid")) {
                    break (k, m.ino());
                }
            }
            if Instant::now() > deadline {
                return Err("namespaced netprobe did not start".to_string());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let group = format!("netprobe_{ns}_1");
        let present = || {
            std::fs::read_to_string(format!("{TRACEFS}/uprobe_events"))
                .unwrap_or_default()
                .contains(&format!(":{group}/"))
        };
        while !present() {
            if Instant::now() > deadline {
                return Err(format!("session {group} never appeared"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Live: its `-c` command has exec'd the tracee (before that, the held child is still a
        // `netprobe`, which killing the watchdog below would take for one).
        let running = || {
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", np_host_pid))
                .unwrap_or_default()
                .split_whitespace()
                .any(|c| {
                    std::fs::read_to_string(format!("/proc/{c}/comm"))
                        .is_ok_and(|comm| comm.starts_with("tracee"))
                })
        };
        while !running() {
            if Instant::now() > deadline {
                return Err(format!("session {group}'s command never ran"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Alive: a host clean must leave it alone.
        let out = Command::new(NP).arg("clean").output().map_err(err)?;
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains(&group) || !present() {
            return Err(format!(
                "host clean removed a live namespaced session: {text}"
            ));
        }
        // Kill its watchdog, then netprobe (pid 1 there): the namespace dies with everything in it.
        kill_watchdog(np_host_pid)?;
        signal(np_host_pid, libc::SIGKILL);
        let _ = unshare.wait();
        std::thread::sleep(Duration::from_millis(300));
        if !present() {
            return Err("nothing left after killing the namespace: test is void".into());
        }
        let out = Command::new(NP).arg("clean").output().map_err(err)?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !text.contains(&format!("removed {group}")) || present() {
            return Err(format!(
                "host clean did not remove the dead namespace's session: {text}"
            ));
        }
        if Path::new(&format!("{TRACEFS}/instances/{group}")).exists() {
            return Err(format!("instance {group} left"));
        }
        Ok(())
    })();
    let _ = unshare.kill();
    let _ = unshare.wait();
    result
}
