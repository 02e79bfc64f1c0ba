//! Tracing one process costs the others nothing: a probe on a shared library's function, scoped to
//! one process (`-p`, or `--container`), leaves another process that calls the same function of
//! the same file at its own speed, and none of its calls is counted. Measured in one run: the
//! other process's time for its calls alone, with the session, and alone again; and, as the
//! control that shows the test would see a slowdown, with a host-wide session on the same
//! function (whose breakpoint the kernel installs in every process mapping the file).
//!
//! Targets: `fixtures/c/hostile_host.c` mapping `fixtures/c/np_lib.c` (each line on its stdin
//! makes 1,000 calls of `np_add`) is the traced process; `fixtures/c/lib_loop.c` maps the same
//! library file and calls `np_add` [`OTHER_CALLS`] times, timing them.

use fixtures::e2e::{self, err, Need};
use fixtures::live::{spawn_until_live, Waiting};
use fixtures::netprobe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

const TRACEFS: &str = "/sys/kernel/tracing";
/// Calls the other process makes per run: about a millisecond alone; at least a second when each
/// traps (a hit costs 1.5-20 µs here, BENCHMARKS.md "Cheaper entry hits").
const OTHER_CALLS: u64 = 200_000;

type R = Result<(), String>;

fn library() -> PathBuf {
    fixtures::mapped_library::np_lib()
}

fn host() -> PathBuf {
    fixtures::mapped_library::library_host()
}

fn lib_loop() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::CProgram::new("lib_loop").flags(&["-O1"]).build())
        .clone()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One run of the other process: `np_add` called [`OTHER_CALLS`] times through `lib`; the
/// seconds its calls took.
fn other_run(lib: &Path) -> Result<f64, String> {
    let out = Command::new(lib_loop())
        .arg(lib)
        .arg(OTHER_CALLS.to_string())
        .output()
        .map_err(err)?;
    let said = text(&out.stdout);
    if !out.status.success() || !said.contains(&format!("calls={OTHER_CALLS} ")) {
        return Err(format!("lib_loop: {said} {}", text(&out.stderr)));
    }
    said.split_whitespace()
        .find_map(|w| w.strip_prefix("seconds="))
        .and_then(|s| s.parse().ok())
        .ok_or(format!("no time in {said:?}"))
}

/// The fastest of three runs (the least disturbed by the machine's other work).
fn other_best(lib: &Path) -> Result<f64, String> {
    let mut best = f64::MAX;
    for _ in 0..3 {
        best = best.min(other_run(lib)?);
    }
    Ok(best)
}

/// The calls of `function` in `count` text output.
fn counted(out: &str, function: &str) -> Option<u64> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(function))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}

/// Starts `netprobe ARGS` and waits until its probes are live.
fn session(args: &[&str]) -> Result<(Child, std::thread::JoinHandle<String>), String> {
    spawn_until_live(netprobe::command().args(args), Duration::from_secs(60))
}

/// One trial at a time: the control of [`scoped_to_one_process`] places a host-wide probe on the
/// library's function, which traps in every process that maps it, the other trial's included.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether the other process ran at its own speed under a session: within 3x of its best time
/// alone plus 20 ms of scheduling noise, where a breakpoint in it costs OTHER_CALLS traps (at
/// least 0.3 s here).
fn at_own_speed(alone: f64, with: f64) -> bool {
    with <= alone * 3.0 + 0.02
}

/// `count` and `trace` scoped with `-p` to the host process: the other process keeps its speed
/// and its calls are not counted; a host-wide `count` on the same function slows it (the
/// control).
fn scoped_to_one_process() -> R {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let lib = library();
    let spec = format!("{}:np_add", lib.display());
    for command in ["count", "trace"] {
        let mut target = Waiting::start(Command::new(host()).arg(&lib))?;
        let pid = target.pid().to_string();
        let before = other_best(&lib)?;
        let (np, stderr) = session(&[command, "-p", &pid, &spec])?;
        let with = other_run(&lib)?;
        let said = target.go()?;
        if !said.starts_with("done calls=1000") {
            return Err(format!("target: {said}"));
        }
        let np_pid = np.id();
        target.finish();
        let out = np.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        let after = other_best(&lib)?;
        if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
            return Err(l);
        }
        let stdout = text(&out.stdout);
        let seen = match command {
            "count" => counted(&stdout, "np_add"),
            _ => Some(stdout.lines().filter(|l| l.contains("-> np_add")).count() as u64),
        };
        if !out.status.success() || seen != Some(1000) {
            return Err(format!(
                "{command} -p: want the target's 1000 calls, saw {seen:?}: {stdout} {stderr}"
            ));
        }
        let alone = before.min(after);
        eprintln!(
            "{command} -p: the other process's {OTHER_CALLS} calls took {:.1} ms alone, {:.1} ms beside the session",
            alone * 1e3,
            with * 1e3
        );
        if !at_own_speed(alone, with) {
            return Err(format!(
                "{command} -p slowed another process: {with:.4} s beside the session, {alone:.4} s alone"
            ));
        }
    }
    // The control: a host-wide session on the same function traps in the other process too.
    let (np, stderr) = session(&["count", &spec])?;
    let with = other_run(&lib)?;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(np.id() as libc::pid_t, libc::SIGINT) };
    let out = np.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    let alone = other_best(&lib)?;
    let stdout = text(&out.stdout);
    if counted(&stdout, "np_add").unwrap_or(0) < OTHER_CALLS || at_own_speed(alone, with) {
        return Err(format!(
            "control: a host-wide session should count and slow the other process ({with:.4} s vs {alone:.4} s alone): {stdout} {stderr}"
        ));
    }
    Ok(())
}

/// `count --container` on a process in a container that maps the library from a host folder
/// (a read-only bind mount: the same file): a host process outside the container that calls the
/// same function keeps its speed and is not counted.
fn scoped_to_a_container() -> R {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    h(harness::docker::ensure_engine())?;
    let lib = library();
    let dir = lib.parent().ok_or("no folder")?;
    let name = lib
        .file_name()
        .ok_or("no name")?
        .to_string_lossy()
        .into_owned();
    let owner = harness::owner::Owner::current();
    let rootfs = h(harness::images::program_rootfs(&host(), "host"))?;
    let image = h(harness::docker::import(
        &rootfs,
        &owner.image_ref("scoping"),
        &[],
    ))?;
    let container = harness::docker::ContainerGuard::new(owner.container_name("scoping"));
    let mut target = Waiting::start(Command::new("/usr/bin/docker").args([
        "run",
        "-i",
        "--name",
        container.name(),
        "-v",
        &format!("{}:/np:ro", dir.display()),
        image.reference(),
        "/app/host",
        &format!("/np/{name}"),
    ]))?;
    let before = other_best(&lib)?;
    let (np, stderr) = session(&[
        "count",
        "--container",
        container.name(),
        &format!("{name}:np_add"),
        "--duration",
        "120s",
    ])?;
    let with = other_run(&lib)?;
    let said = target.go()?;
    if !said.starts_with("done calls=1000") {
        return Err(format!("target: {said}"));
    }
    let np_pid = np.id();
    target.finish();
    let out = np.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    let after = other_best(&lib)?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    let stdout = text(&out.stdout);
    if !out.status.success() || counted(&stdout, "np_add") != Some(1000) {
        return Err(format!(
            "--container: want the container's 1000 calls: {stdout} {stderr}"
        ));
    }
    let alone = before.min(after);
    eprintln!(
        "--container: the host process's {OTHER_CALLS} calls took {:.1} ms alone, {:.1} ms beside the session",
        alone * 1e3,
        with * 1e3
    );
    if !at_own_speed(alone, with) {
        return Err(format!(
            "--container slowed a host process: {with:.4} s beside the session, {alone:.4} s alone"
        ));
    }
    Ok(())
}

fn h<T>(r: anyhow::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{e:#}"))
}

fn main() {
    let needs = [Need::Root, Need::Tracefs, Need::CCompiler];
    let docker = [Need::Root, Need::Tracefs, Need::CCompiler, Need::Docker];
    e2e::run(vec![
        e2e::trial("scoped_to_one_process", &needs, scoped_to_one_process),
        e2e::trial("scoped_to_a_container", &docker, scoped_to_a_container),
    ]);
}
