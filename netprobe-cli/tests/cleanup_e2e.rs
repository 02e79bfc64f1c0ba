//! Nothing left behind (root, tracefs, a C compiler; `unshare` for the pid-namespace trial):
//! after SIGINT, SIGTERM and SIGHUP; after SIGKILL, by the watchdog, `netprobe clean` and the
//! next start; with a tracefs instance held open at exit; and a session of another pid namespace
//! left alone while its namespace lives.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]); sessions are read in tracefs
//! ([`fixtures::session`]).

use fixtures::e2e::{self, err, Need};
use fixtures::session::TRACEFS;
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_gone(pid: u32, within: Duration) -> Result<(), String> {
    let end = Instant::now() + within;
    loop {
        let (p, i) = session::left_behind(pid);
        if !p && !i {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!(
                "session {} left behind: probes={p} instance={i}",
                session::name(pid)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: i32) {
    unsafe { libc::kill(pid as i32, sig) };
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
    let bin = tracee::bin();
    let bin = bin.to_str().unwrap();
    let mut unshare = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            netprobe::bin(),
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
        let out = netprobe::command().arg("clean").output().map_err(err)?;
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
        let out = netprobe::command().arg("clean").output().map_err(err)?;
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

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![
        e2e::trial("cleanup_after_sigint_sigterm_sighup", NEEDS, move || {
            let _g = session::shared();
            let bin = t();
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                let w = tracee::Waiting::start(1);
                let (np, errs) = netprobe::start_until_live(&[
                    "trace",
                    "-p",
                    &w.pid().to_string(),
                    &format!("{bin}:np_add s32"),
                ]);
                let pid = np.id();
                // Scoped to a process: probe definitions opened as perf events, no instance.
                if session::left_behind(pid) != (true, false) {
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
                let _g = session::shared();
                let mut w = tracee::Waiting::start(3);
                let (np, errs) = netprobe::start_until_live(&[
                    "count",
                    "--tid",
                    &w.pid().to_string(),
                    &format!("{}:np_add", t()),
                ]);
                let pid = np.id();
                let held = std::fs::File::open(format!(
                    "{TRACEFS}/instances/{}/trace",
                    session::name(pid)
                ))
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
                if !counted || session::left_behind(pid) != (false, true) {
                    return Err(format!(
                        "leftovers {:?} (want probes gone, instance held), exit {:?}\n{stdout}\n{stderr}",
                        session::left_behind(pid),
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
                let clean = netprobe::command().arg("clean").output().map_err(err)?;
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
                let _g = session::exclusive();
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
                let _g = session::exclusive();
                let bin = tracee::bin();
                let (mut np, _e) = netprobe::start_until_live(&[
                    "count",
                    "-c",
                    &format!("{} spin 60", bin.display()),
                    &format!("{}:np_tick", bin.display()),
                ]);
                let pid = np.id();
                // A `-c` session: definitions opened as perf events, no instance.
                if session::left_behind(pid) != (true, false) {
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
                let out = netprobe::command().arg("clean").output().map_err(err)?;
                let left = session::left_behind(pid);
                let _ = np.wait();
                let text = String::from_utf8_lossy(&out.stdout);
                if !was_zombie {
                    return Err("the killed netprobe never showed as a zombie: test is void".into());
                }
                if !out.status.success()
                    || left != (false, false)
                    || !text.contains(&session::name(pid))
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
                let _g = session::exclusive();
                let bin = t();
                for command in ["count", "trace"] {
                    let mut w = tracee::Waiting::start(3);
                    let target = w.pid();
                    let (np, _e) = netprobe::start_until_live(&[
                        command,
                        "-p",
                        &target.to_string(),
                        &format!("{bin}:np_add"),
                    ]);
                    let pid = np.id();
                    kill_watchdog(pid)?;
                    signal(pid, libc::SIGKILL);
                    let _ = np.wait_with_output();
                    if !session::left_behind(pid).0 {
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
                    let out = netprobe::command().arg("clean").output().map_err(err)?;
                    if !out.status.success() {
                        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
                    }
                    wait_gone(pid, Duration::from_secs(5))?;

                    let w = tracee::Waiting::start(1);
                    let (np, _e) = netprobe::start_until_live(&[
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
                let _g = session::exclusive();
                let many = fixtures::CProgram::new("many").flags(&["-O1"]).build();
                let spec = format!("{}:f*0", many.display());
                let (np, _e) = netprobe::start_until_live(&["count", &spec]);
                let pid = np.id();
                if session::left_behind(pid) != (true, true) {
                    return Err("session not placed".into());
                }
                signal(pid, libc::SIGKILL);
                let _ = np.wait_with_output();
                wait_gone(pid, Duration::from_secs(6))?;
                let (np, _e) = netprobe::start_until_live(&["count", &spec]);
                let pid = np.id();
                kill_watchdog(pid)?;
                signal(pid, libc::SIGKILL);
                let _ = np.wait_with_output();
                std::thread::sleep(Duration::from_millis(300));
                let out = netprobe::command().arg("clean").output().map_err(err)?;
                let text = String::from_utf8_lossy(&out.stdout);
                if !text.contains(&format!(
                    "removed {}: 1 event(s), instance",
                    session::name(pid)
                )) {
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
                let _g = session::exclusive();
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
                    let w = tracee::Waiting::start(1);
                    let (np, _e) = netprobe::start_until_live(&[
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
                    let (np, _e) = netprobe::start_until_live(&[
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
                    if session::left_behind(pid) == (false, false) {
                        return Err(
                            "nothing left after killing netprobe and its watchdog: test is void"
                                .into(),
                        );
                    }
                    let out = netprobe::command().arg("clean").output().map_err(err)?;
                    let text = String::from_utf8_lossy(&out.stdout);
                    if !text.contains(&format!("removed {}", session::name(pid))) {
                        return Err(format!("clean: {text}"));
                    }
                    wait_gone(pid, Duration::from_millis(1))?;
                    // 3. Same, and the next netprobe start removes it.
                    let (np, _e) = netprobe::start_until_live(&[
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
                    let out = netprobe::command()
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
                    if !stderr.contains(&format!("dead session {}", session::name(pid))) {
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
    ]);
}
