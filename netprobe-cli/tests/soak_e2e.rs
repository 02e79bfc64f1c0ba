//! The kill soak: `trace` and `count` sessions of 1 and 1,000 probes on a busy target
//! (`fixtures/c/busy.c run`, whose rounds check their own sums; `-p` on one long-running copy, and
//! `-c` starting a copy, which must never run untraced), each SIGKILLed at a random moment
//! of its life, then `netprobe clean` run at once (the killed netprobe still a zombie, its watchdog
//! possibly mid-removal). After each kill: nothing of that session is registered when `clean`
//! returns, and the target is alive, still advancing and still computing right.
//!
//! `NETPROBE_SOAK_KILLS` sets the number of kills (default 20, the test command's short run;
//! `scripts/soak.sh` runs 500), `NETPROBE_SOAK_SEED` replays a run's random delays. The summary
//! (kills per phase hit, leftovers, slowest `clean`) goes to stderr, and to the file
//! `NETPROBE_SOAK_REPORT` names, as JSON.
//!
//! The phase a kill hit is read from the kernel just before the signal: no event of the session
//! yet (resolving the specs), fewer events than planned or no instance (creating probes), all
//! events but the group not enabled in the instance (enabling), enabled (streaming), and after the
//! requested `--duration` elapsed (teardown).

use fixtures::e2e::{self, err, Need};
use fixtures::netprobe;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";

/// xorshift64*: a reproducible stream of delays from a printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The busy target, its stdout read by a thread: the last `rounds N` it printed, and whether it
/// ever printed `WRONG`.
struct Busy {
    child: Child,
    rounds: Arc<AtomicU64>,
    wrong: Arc<Mutex<Option<String>>>,
}

impl Busy {
    fn start(bin: &std::path::Path) -> Result<Busy, String> {
        let mut child = Command::new(bin)
            .arg("run")
            .stdout(Stdio::piped())
            .spawn()
            .map_err(err)?;
        let out = child.stdout.take().ok_or("no stdout")?;
        let rounds = Arc::new(AtomicU64::new(0));
        let wrong = Arc::new(Mutex::new(None));
        let (r, w) = (rounds.clone(), wrong.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("rounds ") {
                    r.store(n.trim().parse().unwrap_or(0), Ordering::SeqCst);
                } else if line.starts_with("WRONG") {
                    *w.lock().unwrap() = Some(line);
                }
            }
        });
        Ok(Busy {
            child,
            rounds,
            wrong,
        })
    }

    /// Alive, computing right, and its round counter moves past `since` within `within`.
    fn healthy(&mut self, within: Duration) -> Result<(), String> {
        let since = self.rounds.load(Ordering::SeqCst);
        let end = Instant::now() + within;
        loop {
            if let Some(w) = self.wrong.lock().unwrap().clone() {
                return Err(format!("the target computed wrong: {w}"));
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("the target died: {st}"));
            }
            if self.rounds.load(Ordering::SeqCst) > since {
                return Ok(());
            }
            if Instant::now() > end {
                return Err(format!(
                    "the target's round counter stayed at {since} for {} s",
                    within.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The session name of netprobe process `pid` (same pid namespace as this test).
fn session(pid: u32) -> String {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    format!("netprobe_{ns}_{pid}")
}

/// The phase of a session's life, read from the kernel and its stderr just before a kill.
fn phase(
    name: &str,
    planned: usize,
    live_since: Option<Instant>,
    duration: Duration,
) -> &'static str {
    if live_since.is_some_and(|t| t.elapsed() >= duration) {
        return "teardown";
    }
    let events = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).unwrap_or_default();
    let group = format!(":{name}/");
    let placed = events.lines().filter(|l| l.contains(&group)).count();
    let inst = format!("{TRACEFS}/instances/{name}");
    let enabled = std::fs::read_to_string(format!("{inst}/events/{name}/enable"))
        .is_ok_and(|e| e.trim() != "0");
    if placed == 0 && !std::path::Path::new(&inst).exists() {
        "resolve"
    } else if enabled || live_since.is_some() {
        "streaming"
    } else if placed < planned {
        "probe creation"
    } else {
        "enable"
    }
}

#[derive(Default)]
struct Tally {
    kills: u32,
    by_config: BTreeMap<String, u32>,
    by_phase: BTreeMap<String, u32>,
    exited_before_kill: u32,
    leftovers: Vec<String>,
    slowest_clean: Duration,
    by_watchdog: u32,
    by_clean: u32,
    launched_paused: u32,
    launched_running: u32,
}

/// SIGKILLs every process running `bin` except `keep` (the copies `-c` sessions started).
fn stop_launched_copies(bin: &std::path::Path, keep: u32) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if p != keep && std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin) {
            // SAFETY: a copy of this test's own fixture, started by a netprobe of this test.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }
}

fn soak(kills: u32, seed: u64) -> Result<Tally, String> {
    let busy_bin = fixtures::CProgram::new("busy").flags(&["-O1"]).build();
    let bin = busy_bin.display().to_string();
    let mut target = Busy::start(&busy_bin)?;
    target.healthy(Duration::from_secs(5))?;
    let pid = target.child.id().to_string();
    let mut rng = Rng(seed | 1);
    let mut t = Tally::default();
    for k in 0..kills {
        // Configurations in turn: trace/count x 1/1000 probes.
        // `-p` sessions on the long-running target, and `-c` sessions that start their own copy
        // of it (paused until the probes are placed, then released).
        let (mode, probes, launch) = [
            ("count", 1, false),
            ("trace", 1, false),
            ("count", 1000, false),
            ("trace", 1000, false),
            ("count", 1000, true),
            ("trace", 1, true),
        ][k as usize % 6];
        let spec = if probes == 1 {
            format!("{bin}:g500")
        } else {
            format!("{bin}:g*")
        };
        // A session of 1,000 probes takes longer to place: spread the kills over its whole life,
        // the natural end of its --duration and the teardown after it included.
        let duration = Duration::from_millis(100 + rng.below(600));
        let life = if probes == 1 { 900 } else { 1800 };
        let delay = Duration::from_millis(rng.below(life));
        let run_cmd = format!("{bin} run");
        let target_args = if launch {
            ["-c", run_cmd.as_str()]
        } else {
            ["-p", pid.as_str()]
        };
        let mut np = netprobe::command()
            .arg(mode)
            .args(target_args)
            .arg("--duration")
            .arg(format!("{}ms", duration.as_millis()))
            .arg(&spec)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(err)?;
        let started = Instant::now();
        let name = session(np.id());
        let live = Arc::new(AtomicBool::new(false));
        let live_at = Arc::new(Mutex::new(None::<Instant>));
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let (l, la, s) = (live.clone(), live_at.clone(), stderr.clone());
            let e = np.stderr.take().ok_or("no stderr")?;
            std::thread::spawn(move || {
                for line in BufReader::new(e).lines().map_while(Result::ok) {
                    if line.contains("probe(s) on") && !l.swap(true, Ordering::SeqCst) {
                        *la.lock().unwrap() = Some(Instant::now());
                    }
                    s.lock().unwrap().push_str(&line);
                    s.lock().unwrap().push('\n');
                }
            });
        }
        std::thread::sleep(delay.saturating_sub(started.elapsed()));
        let exited = matches!(np.try_wait(), Ok(Some(_)));
        let ph = if exited {
            "after exit"
        } else {
            phase(&name, probes, *live_at.lock().unwrap(), duration)
        };
        // netprobe's children at the kill: its watchdog and, with -c, the command (still paused
        // under netprobe's name, or running as busy).
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", np.id()))
            .unwrap_or_default();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(np.id() as i32, libc::SIGKILL) };
        let killed = Instant::now();
        // At once, while the killed netprobe is a zombie (not reaped yet).
        let clean = netprobe::command().arg("clean").output().map_err(err)?;
        let took = killed.elapsed();
        // The killed netprobe as clean left it (state, pending signals, and each thread's name
        // and state): evidence for a leftover.
        let mut owner_state = std::fs::read_to_string(format!("/proc/{}/status", np.id()))
            .map(|s| {
                s.lines()
                    .filter(|l| l.starts_with("State") || l.contains("Pnd:"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        for task in std::fs::read_dir(format!("/proc/{}/task", np.id()))
            .into_iter()
            .flatten()
            .flatten()
        {
            // `TID (COMM) STATE ...`: the fields up to the state.
            if let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) {
                let end = stat
                    .rfind(')')
                    .map_or(stat.len(), |i| (i + 3).min(stat.len()));
                owner_state.push_str(&format!(", thread {}", &stat[..end]));
            }
        }
        let status = np.wait().map_err(err)?;
        let text = String::from_utf8_lossy(&clean.stdout).into_owned();
        if !clean.status.success() {
            return Err(format!(
                "kill {k}: netprobe clean failed: {text} {}",
                String::from_utf8_lossy(&clean.stderr)
            ));
        }
        if let Some(left) = fixtures::live::leftovers(TRACEFS, np.id()) {
            t.leftovers.push(format!(
                "kill {k} ({mode}, {probes} probe(s), {ph}): {left} after clean said: {text} (netprobe then: {owner_state})"
            ));
        }
        if text.contains(&format!("{name}: removed by its own watchdog")) {
            t.by_watchdog += 1;
        } else if text.contains(&format!("removed {name}")) {
            t.by_clean += 1;
        }
        t.slowest_clean = t.slowest_clean.max(took);
        t.kills += 1;
        let config = format!("{mode} {probes}{}", if launch { " -c" } else { "" });
        *t.by_config.entry(config).or_default() += 1;
        *t.by_phase.entry(ph.to_string()).or_default() += 1;
        if exited {
            t.exited_before_kill += 1;
            if status.code() != Some(0) {
                return Err(format!(
                    "kill {k}: netprobe ended by itself with {status}: {}",
                    stderr.lock().unwrap()
                ));
            }
        }
        for c in children.split_whitespace() {
            let comm = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            // The command's name is its file's, cut to 15 bytes: `busy-<hash>`.
            let comm = if comm.starts_with("busy") {
                "busy"
            } else {
                comm.trim()
            };
            match comm {
                // The -c command, released: it runs on after netprobe, as a command does.
                "busy" => {
                    // SAFETY: a process this test's netprobe started.
                    unsafe { libc::kill(c.parse().unwrap_or(0), libc::SIGKILL) };
                    t.launched_running += 1;
                }
                // Still paused: it must give up, never run untraced.
                "netprobe" => {
                    t.launched_paused += 1;
                    let end = Instant::now() + Duration::from_secs(5);
                    loop {
                        let st =
                            std::fs::read_to_string(format!("/proc/{c}/stat")).unwrap_or_default();
                        let comm =
                            std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
                        if comm.starts_with("busy") {
                            return Err(format!("kill {k}: the paused command ran untraced"));
                        }
                        if st.is_empty()
                            || st
                                .rsplit(')')
                                .next()
                                .is_some_and(|r| r.trim_start().starts_with('Z'))
                        {
                            break;
                        }
                        if Instant::now() > end {
                            return Err(format!("kill {k} ({mode} -c, {ph}): the paused command {c} still waits 5 s after netprobe died"));
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
                _ => {}
            }
        }
        if launch {
            // A -c command outlives a netprobe that ended by itself too: stop every copy of
            // busy but the -p target.
            stop_launched_copies(&busy_bin, target.child.id());
        }
        target
            .healthy(Duration::from_secs(5))
            .map_err(|e| format!("after kill {k} ({mode}, {probes} probe(s), {ph}): {e}"))?;
    }
    Ok(t)
}

fn main() {
    let kills: u32 = std::env::var("NETPROBE_SOAK_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("NETPROBE_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    e2e::run(vec![e2e::trial(
        "kill_soak_leaves_nothing_and_the_target_keeps_working",
        &[Need::Root, Need::Tracefs, Need::CCompiler],
        move || {
            let t = soak(kills, seed)?;
            let summary = serde_json::json!({
                "kills": t.kills,
                "seed": seed,
                "per_configuration": t.by_config,
                "per_phase": t.by_phase,
                "netprobe_ended_before_its_kill": t.exited_before_kill,
                "removed_by_watchdog_while_clean_waited": t.by_watchdog,
                "removed_by_clean": t.by_clean,
                "leftovers_after_clean": t.leftovers.len(),
                "slowest_clean_ms": t.slowest_clean.as_millis() as u64,
                "launched_commands_paused_at_kill_gave_up": t.launched_paused,
                "launched_commands_running_at_kill": t.launched_running,
            });
            eprintln!("soak: {summary}");
            if let Ok(path) = std::env::var("NETPROBE_SOAK_REPORT") {
                std::fs::write(&path, format!("{summary:#}\n")).map_err(err)?;
            }
            if !t.leftovers.is_empty() {
                return Err(format!(
                    "{} of {} kills left something after clean (seed {seed}): {}",
                    t.leftovers.len(),
                    t.kills,
                    t.leftovers.join("; ")
                ));
            }
            if t.slowest_clean > Duration::from_secs(10) {
                return Err(format!(
                    "clean took {} ms after a kill (bound: 10 s)",
                    t.slowest_clean.as_millis()
                ));
            }
            Ok(())
        },
    )]);
}
