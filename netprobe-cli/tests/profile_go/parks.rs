//! The goroutine view of a Go program (run from `profile_go_e2e.rs`; root, Go): through the
//! library API, a
//! [`ProbeFeed`] on `runtime.gopark` of `fixtures/go/parks` (one goroutine in a `time.Sleep`
//! loop, one blocked on a channel receive fed every 100 ms), its hits paired by [`GoParks`].
//! Each park's stack is named by `go tool addr2line` (the toolchain's own symbolizer, not
//! netprobe's); the reasons are the runtime's names; each goroutine is parked nearly all the
//! time; and no probe is left in `uprobe_events` afterwards.
//!
//! Through the CLI, `profile --off-cpu --goroutines -p PID` on the same program shows the goroutine view:
//! each goroutine's own frames over nearly all of the profile, ending in the runtime's reason
//! (`[off-cpu: go sleep]`, `[off-cpu: go chan receive]`), the idle threads left out, and
//! without `--goroutines` the threads' scheduler waits show instead.
//!
//! The feed runs in a child process of this very binary (`NETPROBE_PARKS_CHILD` set): a
//! session's watchdog must be forked from a single-threaded process, and the trials run in
//! threads. The child prints one line per park: `from to goroutine reason|addr,addr,...`.

use fixtures::e2e::{self, err};
use netprobe_cli::profile::probed::{go_abi_of, gopark_spec, GoParks, WaitReasons};
use netprobe_cli::session::{FeedTarget, ProbeFeed};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type R = Result<(), String>;

/// How long the parks are recorded.
const RECORD: Duration = Duration::from_secs(3);

fn uprobe_events() -> String {
    std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default()
}

/// The parks of the goroutine whose stack names `func`, with their frame names.
fn parks_under<'a>(named: &'a [(Park, Vec<String>)], func: &str) -> Vec<&'a (Park, Vec<String>)> {
    named
        .iter()
        .filter(|(_, n)| n.iter().any(|f| f == func))
        .collect()
}

fn check_goroutine(
    named: &[(Park, Vec<String>)],
    func: &str,
    blocked_in: &[&str],
    reason: &str,
    wall_ns: u64,
) -> R {
    let parks = parks_under(named, func);
    let (_, frames) = parks.first().ok_or(format!("no park under {func}"))?;
    let at = frames.iter().position(|f| f == func).unwrap_or(0);
    if !frames[..at]
        .iter()
        .any(|f| blocked_in.contains(&f.as_str()))
    {
        return Err(format!(
            "{func} parked in none of {blocked_in:?}: {frames:?}"
        ));
    }
    for (p, _) in &parks {
        if p.reason != reason {
            return Err(format!(
                "{func} parked for {:?}, expected {reason:?}",
                p.reason
            ));
        }
    }
    let goroutines: std::collections::HashSet<u64> =
        parks.iter().map(|(p, _)| p.goroutine).collect();
    if goroutines.len() != 1 {
        return Err(format!("{func}: {} goroutines", goroutines.len()));
    }
    let parked: u64 = parks.iter().map(|(p, _)| p.to_ns - p.from_ns).sum();
    let share = parked as f64 / wall_ns as f64;
    eprintln!(
        "{func}: {} parks, parked {:.1}% of {:.2} s, stack {:?}",
        parks.len(),
        share * 100.0,
        wall_ns as f64 / 1e9,
        &frames[..=at]
    );
    if !(0.9..=1.1).contains(&share) {
        return Err(format!(
            "{func} parked {:.1}% of the wall time",
            share * 100.0
        ));
    }
    Ok(())
}

/// `fixtures/go/parks` started and past its "ready" line; its path, and `uprobe_events` before.
fn start_parks() -> Result<(std::path::PathBuf, String, std::process::Child), String> {
    let bin = fixtures::go::go_fixture("parks")?;
    let before = uprobe_events();
    let mut app = Command::new(&bin)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let mut line = String::new();
    BufReader::new(app.stdout.take().ok_or("no stdout")?)
        .read_line(&mut line)
        .map_err(err)?;
    Ok((bin, before, app))
}

fn goroutine_parks_are_named_with_their_reasons() -> R {
    let (bin, before, mut app) = start_parks()?;
    let result = (|| -> R {
        let out = Command::new(std::env::current_exe().map_err(err)?)
            .env(
                "NETPROBE_PARKS_CHILD",
                format!("{}:{}", app.id(), bin.display()),
            )
            .output()
            .map_err(err)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "the feed failed: {}{stdout}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let left = uprobe_events();
        if left != before {
            return Err(format!("uprobe_events changed after the feed: {left}"));
        }
        let mut lines = stdout.lines();
        let wall: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("wall "))
            .and_then(|w| w.parse().ok())
            .ok_or("no wall time from the feed")?;
        let mut named = Vec::new();
        for l in lines {
            let (head, addrs) = l.split_once('|').ok_or(format!("bad line {l}"))?;
            let mut w = head.splitn(4, ' ');
            let mut num = || w.next().and_then(|v| v.parse::<u64>().ok());
            let (from_ns, to_ns, goroutine) = (num(), num(), num());
            let p = Park {
                from_ns: from_ns.ok_or("from")?,
                to_ns: to_ns.ok_or("to")?,
                goroutine: goroutine.ok_or("goroutine")?,
                reason: w.next().unwrap_or("").to_string(),
            };
            let addrs: Vec<u64> = addrs.split(',').filter_map(|a| a.parse().ok()).collect();
            // The probed instruction, then return addresses looked up one byte back, in the call.
            let looked: Vec<u64> = addrs
                .iter()
                .enumerate()
                .map(|(i, &a)| if i == 0 { a } else { a - 1 })
                .collect();
            named.push((p, fixtures::go::go_addr2line(&bin, &looked)?));
        }
        check_goroutine(&named, "main.Sleeper", &["time.Sleep"], "sleep", wall)?;
        check_goroutine(
            &named,
            "main.Receiver",
            &["runtime.chanrecv1", "runtime.chanrecv"],
            "chan receive",
            wall,
        )
    })();
    let _ = app.kill();
    let _ = app.wait();
    result
}

/// One park as the child printed it.
struct Park {
    from_ns: u64,
    to_ns: u64,
    goroutine: u64,
    reason: String,
}

/// The child: the feed on `runtime.gopark` of process PID running BIN (`PID:BIN`) for
/// [`RECORD`], its parks printed, parks begun before recording cut at its start.
fn record_parks(arg: &str) -> Result<(), String> {
    let (pid, bin) = arg.split_once(':').ok_or("NETPROBE_PARKS_CHILD=PID:BIN")?;
    let pid: u32 = pid.parse().map_err(err)?;
    let bin = Path::new(bin);
    let feed = ProbeFeed::start(FeedTarget::Pids(vec![pid]), &[gopark_spec(bin)], true)
        .map_err(|e| e.to_string())?;
    let start = netprobe_cli::backend::monotonic_ns();
    let mut parks = GoParks::new(
        WaitReasons::of_file(bin),
        go_abi_of(bin).ok_or("not a Go binary")?,
    );
    let until = Instant::now() + RECORD;
    let mut hits = Vec::new();
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        feed.take(&mut hits);
        parks.absorb(hits.drain(..));
    }
    let end = netprobe_cli::backend::monotonic_ns();
    parks.absorb(feed.finish().map_err(|e| e.to_string())?);
    println!("wall {}", end - start);
    for p in parks.finish(end) {
        let addrs: Vec<String> = p.stack.addrs.iter().map(u64::to_string).collect();
        println!(
            "{} {} {} {}|{}",
            p.from_ns.max(start),
            p.to_ns,
            p.goroutine,
            p.reason,
            addrs.join(",")
        );
    }
    Ok(())
}

/// The microseconds of `--json` profile `v` under stacks holding `caller` before `callee` and
/// ending in `leaf`.
fn time_under(v: &serde_json::Value, caller: &str, callee: &str, leaf: &str) -> u64 {
    fixtures::profile::stacks(v)
        .iter()
        .filter(|(f, _)| {
            let c = f.iter().position(|x| x == caller);
            let d = f.iter().position(|x| x == callee);
            matches!((c, d), (Some(c), Some(d)) if c < d) && f.last().is_some_and(|l| l == leaf)
        })
        .map(|(_, n)| n)
        .sum()
}

fn cli_off_cpu_shows_goroutines_where_they_park() -> R {
    let (_, before, mut app) = start_parks()?;
    let run = |extra: &[&str]| {
        fixtures::netprobe::command()
            .args(["profile", "--off-cpu", "--json", "--duration", "2s", "-p"])
            .arg(app.id().to_string())
            .args(extra)
            .output()
            .map_err(err)
            .and_then(|o| e2e::succeeded(o, "profile --off-cpu -p go"))
    };
    let goroutines = run(&["--goroutines"]);
    let threads = run(&[]);
    let _ = app.kill();
    let _ = app.wait();
    let v: serde_json::Value = serde_json::from_slice(&goroutines?.stdout).map_err(err)?;
    let elapsed_us = (v["elapsed_s"].as_f64().unwrap_or(0.0) * 1e6) as u64;
    for (caller, callee, leaf) in [
        ("main.Sleeper", "time.Sleep", "[off-cpu: go sleep]"),
        (
            "main.Receiver",
            "runtime.chanrecv1",
            "[off-cpu: go chan receive]",
        ),
    ] {
        let us = time_under(&v, caller, callee, leaf);
        eprintln!("{caller} -> {callee}: {us} us of {elapsed_us}");
        if fixtures::profile::pct(us, elapsed_us) < 85.0 {
            return Err(format!(
                "{caller}: {us} us of {elapsed_us}: {}",
                v["functions"]
            ));
        }
    }
    if fixtures::profile::stacks(&v)
        .iter()
        .any(|(f, _)| f.iter().any(|x| x == "runtime.stopm"))
    {
        return Err("an idle thread's scheduler stack is in the goroutine view".into());
    }
    let t: serde_json::Value = serde_json::from_slice(&threads?.stdout).map_err(err)?;
    if time_under(&t, "main.Sleeper", "time.Sleep", "[off-cpu: go sleep]") != 0
        || !fixtures::profile::stacks(&t)
            .iter()
            .any(|(f, _)| f.iter().any(|x| x == "runtime.findRunnable"))
    {
        return Err(format!(
            "without --goroutines, goroutines are shown: {}",
            t["functions"]
        ));
    }
    let after = uprobe_events();
    if after != before {
        return Err(format!("uprobe_events changed: {after}"));
    }
    Ok(())
}

/// The child's part (`NETPROBE_PARKS_CHILD` set): runs the feed and exits.
pub fn child_if_asked() {
    if let Ok(arg) = std::env::var("NETPROBE_PARKS_CHILD") {
        if let Err(e) = record_parks(&arg) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        std::process::exit(0);
    }
}

/// The library's feed, then the CLI, in one trial: each checks that `uprobe_events` is as it
/// found it, which a concurrent run of the other would change.
pub fn goroutine_parks_by_the_feed_then_the_cli() -> R {
    goroutine_parks_are_named_with_their_reasons()?;
    cli_off_cpu_shows_goroutines_where_they_park()
}
