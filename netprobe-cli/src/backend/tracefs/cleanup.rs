//! Removing what netprobe placed: one session's group and instance, and stale ones of netprobe
//! processes that no longer run.
//!
//! Naming: a live session uses the group and instance `netprobe_<PIDNS>_<PID>`: the inode of the
//! netprobe process's pid namespace (`/proc/self/ns/pid`, `namespaces(7)`) and its pid there, so
//! leftovers can be attributed. The namespace is part of the name because tracefs is one for the
//! whole machine while pids are per namespace: a netprobe in a container sidecar is pid 19 in its
//! namespace, and a host `netprobe clean` must not take host pid 19's absence for its death.
//! Persistent probes (`netprobe probe add`) live in other groups and are never touched here.
//! Groups of other tools are never touched at all.
//!
//! Removal order (the kernel refuses to delete an enabled event with EBUSY): disable the group in
//! the instance, delete each event with `-:GROUP/EVENT`, then `rmdir` the instance.

use crate::backend::tracefs::instance::{remove_dir, Instance};
use crate::backend::tracefs::probe::{self, GroupName, ProbeLine};
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use netprobe_core::pid_namespace::{own_pidns, pidns_of, INITIAL_PIDNS};
use std::time::{Duration, Instant};

/// The watchdog's command name (`/proc/PID/comm`, set with `prctl(PR_SET_NAME)`, at most 15
/// bytes): `netprobe clean` tells it from a reader of a live session by it, since the files it
/// holds open in the instance while removing it do not mean the session is in use.
pub const WATCHDOG_COMM: &str = "netprobe-watch";

/// Prefix of session group/instance names.
pub const SESSION_PREFIX: &str = "netprobe_";

/// Who owns a session: a netprobe process, by pid namespace and pid in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOwner {
    /// Inode number of the owner's pid namespace.
    pub pidns: u64,
    /// The owner's pid in that namespace.
    pub pid: u32,
}

/// The session name for process `pid` of this pid namespace: `netprobe_<PIDNS>_<PID>`.
pub fn session_name(pid: u32) -> GroupName {
    session_name_of(SessionOwner {
        pidns: own_pidns(),
        pid,
    })
}

/// The session name of `owner`.
pub fn session_name_of(owner: SessionOwner) -> GroupName {
    GroupName::new(&format!("{SESSION_PREFIX}{}_{}", owner.pidns, owner.pid))
        .expect("netprobe_<digits>_<digits> is a valid name")
}

/// The owner in a session name `netprobe_<digits>_<digits>`; `None` for any other name
/// (persistent groups, other tools' groups, test groups). The earlier form `netprobe_<digits>`
/// (before the namespace was part of the name) is read as a pid of our own namespace, so that
/// what such a version left behind can still be cleaned.
pub fn session_owner(name: &str) -> Option<SessionOwner> {
    let rest = name.strip_prefix(SESSION_PREFIX)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some((ns, pid)) = rest.split_once('_') else {
        if !digits(rest) {
            return None;
        }
        return Some(SessionOwner {
            pidns: own_pidns(),
            pid: rest.parse().ok()?,
        });
    };
    if !digits(ns) || !digits(pid) {
        return None;
    }
    Some(SessionOwner {
        pidns: ns.parse().ok()?,
        pid: pid.parse().ok()?,
    })
}

/// What [`remove_session`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub events: Vec<String>,
    pub instance: bool,
    /// The session's own watchdog removed it while [`clean_stale`] waited: nothing was left to
    /// remove here.
    pub by_watchdog: bool,
    /// Its netprobe has exited (or is dying) and is not reaped yet, and nothing of the session
    /// was left when [`clean_stale`] looked: removed by that netprobe itself or its watchdog.
    pub already_gone: bool,
}

/// Removes group `name`'s events and the instance of the same name, retrying for up to `patience`
/// while the kernel says EBUSY (a dying process's files are released asynchronously).
///
/// Returns what was removed; an error only when something stays after `patience`.
pub fn remove_session(tracefs: &Tracefs, name: &GroupName, patience: Duration) -> Result<Removed> {
    let deadline = Instant::now() + patience;
    let mut removed = Removed::default();
    loop {
        let attempt = (|| -> Result<()> {
            if let Some(inst) = Instance::existing(tracefs, name) {
                // The group dir exists in the instance only while the group has events.
                if inst.dir().join("events").join(name.as_str()).is_dir() {
                    inst.enable_group(name, false)?;
                }
            }
            let events = probe::list_events(tracefs, name)?;
            let lines: Vec<ProbeLine> = events
                .iter()
                .map(|e| ProbeLine::Remove {
                    group: name.clone(),
                    event: e.clone(),
                })
                .collect();
            probe::append_lines(tracefs, &lines)?;
            removed
                .events
                .extend(events.iter().map(|e| e.as_str().to_string()));
            let dir = tracefs.path("instances").join(name.as_str());
            if dir.is_dir() {
                remove_dir(&dir)?;
                removed.instance = true;
            }
            Ok(())
        })();
        match attempt {
            Ok(()) => return Ok(removed),
            Err(e @ Error::Busy { .. }) | Err(e @ Error::ProbeRejected { .. }) => {
                if Instant::now() >= deadline {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether process `pid` has exited and only its exit status is left for its parent to read: its
/// main thread is a zombie (state `Z`) or dead (`X`: `proc(5)`, `/proc/PID/stat` field 3), and so
/// is every other thread still listed in `/proc/PID/task`. A killed process's main thread exits at
/// once while another thread inside a long system call finishes it first (netprobe's instance
/// thread in `mkdir`, kill 4 of a CI soak run: the instance appeared after `clean` had looked), so
/// the main thread's state alone does not say the process is done. An exited netprobe runs
/// nothing: its session is no longer in use, though its watchdog may be removing it. `false` when
/// `/proc/PID` cannot be read.
fn is_exited(pid: u32) -> bool {
    if !stat_fields(pid).is_some_and(|(state, _)| state == "Z" || state == "X") {
        return false;
    }
    netprobe_core::process::Process::open(pid).is_ok_and(|p| p.threads_running() == 0)
}

/// `PF_EXITING` in the flags of `/proc/PID/stat` (include/linux/sched.h): the task has entered
/// `do_exit` and will run no more user code.
const PF_EXITING: u64 = 0x4;

/// Bit of SIGKILL (signal 9) in the pending-signal masks of `/proc/PID/status` (`SigPnd`,
/// `ShdPnd`: bit N-1 for signal N, `proc(5)`).
const SIGKILL_PENDING: u64 = 1 << (libc::SIGKILL - 1);

/// State (field 3) and flags (field 9) of `/proc/PID/stat`.
fn stat_fields(pid: u32) -> Option<(String, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may itself hold ") ".
    let mut f = s[s.rfind(')')? + 1..].split_whitespace();
    let state = f.next()?.to_string();
    let flags = f.nth(5)?.parse().ok()?;
    Some((state, flags))
}

/// Whether process `pid` is dying or dead: exited ([`is_exited`]), inside `do_exit`
/// ([`PF_EXITING`]), or with a SIGKILL pending that it has not acted on yet. A process killed a
/// moment ago passes through all three; none of them runs user code again, so its session is
/// no longer in use (though its last system call may still be finishing, see
/// [`clean_stale`]).
fn is_dying(pid: u32) -> bool {
    if stat_fields(pid)
        .is_some_and(|(state, flags)| state == "Z" || state == "X" || flags & PF_EXITING != 0)
    {
        return true;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().any(|l| {
        ["SigPnd:", "ShdPnd:"].iter().any(|k| {
            l.strip_prefix(k)
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .is_some_and(|m| m & SIGKILL_PENDING != 0)
        })
    })
}

/// Whether a process is a netprobe (its command name or executable starts with `netprobe`).
fn is_netprobe(pid: u32) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    comm.starts_with("netprobe") || exe.starts_with("netprobe")
}

/// The last `NSpid:` entry of `/proc/PID/status`: the pid in the process's own namespace.
fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// Whether the session of `owner` may still be running. `true` when:
/// - the owner is in our pid namespace and `/proc/PID` is a netprobe that has not exited (a
///   zombie, killed but not yet reaped by its parent, is gone);
/// - the owner is in another namespace that we can see into (a container's), and one of its
///   processes is a netprobe whose pid there (`NSpid`) is the owner's;
/// - we see no process of the owner's namespace but are not in the initial pid namespace: the
///   owner may live where we cannot look (we are in a container), so its session is not ours to
///   judge;
/// - some process has a file of the session's instance open (a reader of a live session).
///
/// `false` only when the owner is certainly gone.
pub fn session_alive(tracefs: &Tracefs, owner: SessionOwner) -> bool {
    let mine = own_pidns();
    if owner.pidns == mine {
        if std::path::Path::new(&format!("/proc/{}", owner.pid)).exists()
            && is_netprobe(owner.pid)
            && !is_dying(owner.pid)
        {
            return true;
        }
    } else {
        let mut seen_namespace = false;
        if let Ok(procs) = std::fs::read_dir("/proc") {
            for p in procs.filter_map(|e| e.ok()) {
                let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if pidns_of(Some(pid)) != Some(owner.pidns) {
                    continue;
                }
                seen_namespace = true;
                if innermost_pid(pid) == Some(owner.pid) && is_netprobe(pid) {
                    return true;
                }
            }
        }
        if !seen_namespace && mine != INITIAL_PIDNS {
            return true;
        }
    }
    instance_in_use(tracefs, &session_name_of(owner))
}

/// Whether any process but a watchdog has a file open inside `instances/NAME/` (a watchdog
/// holds them only while removing the instance, see [`WATCHDOG_COMM`]).
fn instance_in_use(tracefs: &Tracefs, name: &GroupName) -> bool {
    let needle = format!("/instances/{}/", name.as_str());
    let root = tracefs.root().to_string_lossy().into_owned();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() == WATCHDOG_COMM {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.filter_map(|e| e.ok()) {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                let t = target.to_string_lossy();
                if t.contains(&needle) && (t.starts_with(&root) || t.contains("tracing")) {
                    return true;
                }
            }
        }
    }
    false
}

/// Session names present now (groups in `uprobe_events` and instance dirs) whose netprobe process
/// is gone, ascending.
pub fn stale_sessions(tracefs: &Tracefs) -> Result<Vec<GroupName>> {
    let mut names: Vec<String> = probe::list_all(tracefs)?
        .into_iter()
        .map(|p| p.group)
        .collect();
    if let Ok(dir) = std::fs::read_dir(tracefs.path("instances")) {
        names.extend(
            dir.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str().map(str::to_string)),
        );
    }
    names.sort();
    names.dedup();
    let me = SessionOwner {
        pidns: own_pidns(),
        pid: std::process::id(),
    };
    Ok(names
        .into_iter()
        .filter_map(|n| {
            let owner = session_owner(&n)?;
            (owner != me && !session_alive(tracefs, owner))
                .then(|| GroupName::new(&n).ok())
                .flatten()
        })
        .collect())
}

/// How long [`clean_stale`] lets the watchdog of a session whose owner has just died finish
/// removing it before removing it itself.
const WATCHDOG_GRACE: Duration = Duration::from_secs(3);

/// Whether anything of session `name` is still registered (events in `uprobe_events`, or its
/// instance).
fn session_present(tracefs: &Tracefs, name: &GroupName) -> bool {
    tracefs.path("instances").join(name.as_str()).exists()
        || probe::list_events(tracefs, name).map_or(true, |e| !e.is_empty())
}

/// The netprobe processes of our pid namespace that are dying or exited and not yet reaped
/// ([`is_dying`]), watchdogs left out.
fn dying_netprobes() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&p| {
                    p != me
                        && is_netprobe(p)
                        && is_dying(p)
                        && std::fs::read_to_string(format!("/proc/{p}/comm"))
                            .is_ok_and(|c| c.trim_end() != WATCHDOG_COMM)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (until `deadline` at most) until each of `pids` has exited or is gone.
fn wait_for_exit(pids: &[u32], deadline: Instant) {
    for &pid in pids {
        while !is_exited(pid)
            && std::path::Path::new(&format!("/proc/{pid}")).exists()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Removes every stale session; returns what went, per session name. A session whose owner is
/// dying or a zombie (killed a moment ago, not yet reaped) is usually being removed by its
/// watchdog right then. Its owner is first given [`WATCHDOG_GRACE`] to finish exiting (a system
/// call it was in, such as a write to `uprobe_events` that adds a probe, completes before it
/// exits, and the watchdog starts only when the owner's files are closed); then the watchdog gets
/// the rest of the grace to finish (the result says `by_watchdog`); then what is left is removed
/// here. Either way a session returned here is gone when this returns. A session that cannot be
/// removed is reported in the error after trying all the others.
pub fn clean_stale(tracefs: &Tracefs) -> Result<Vec<(GroupName, Removed)>> {
    let mut out = Vec::new();
    let mut first_err = None;
    // A netprobe killed before its session showed in tracefs may still be finishing the write
    // that creates its first probe, or (on its instance thread, its main thread already a
    // zombie) the `mkdir` that creates its instance: let every dying netprobe of our namespace
    // exit first, all its threads ([`is_exited`]), so that what it placed is listed below.
    let dying = dying_netprobes();
    let present_before: Vec<GroupName> = dying
        .iter()
        .map(|&p| session_name(p))
        .filter(|n| session_present(tracefs, n))
        .collect();
    wait_for_exit(&dying, Instant::now() + WATCHDOG_GRACE);
    // Whether each is present is read before the listing: a session present then is listed below
    // if it is stale, and one absent then from an exited netprobe cannot come back.
    let absent: Vec<u32> = dying
        .iter()
        .copied()
        .filter(|&p| {
            let gone = !std::path::Path::new(&format!("/proc/{p}")).exists();
            (gone || is_exited(p)) && !session_present(tracefs, &session_name(p))
        })
        .collect();
    let stale = stale_sessions(tracefs)?;
    // Sessions of exited netprobes that were gone before we could list them: removed by their
    // watchdogs while we waited, or before `clean` started (then by whom is unknown: the netprobe
    // itself on a normal exit, or its watchdog). One still exiting when the wait ran out is not
    // reported as gone: what it leaves is listed if it was there in time.
    for pid in &absent {
        let name = session_name(*pid);
        if stale.contains(&name) {
            continue;
        }
        let removed = if present_before.contains(&name) {
            Removed {
                by_watchdog: true,
                ..Removed::default()
            }
        } else {
            Removed {
                already_gone: true,
                ..Removed::default()
            }
        };
        out.push((name, removed));
    }
    for name in stale {
        let owner = session_owner(name.as_str()).filter(|o| o.pidns == own_pidns());
        let just_died = owner.is_some_and(|o| is_dying(o.pid));
        if just_died {
            let deadline = Instant::now() + WATCHDOG_GRACE;
            let pid = owner.map_or(0, |o| o.pid);
            while !is_exited(pid)
                && std::path::Path::new(&format!("/proc/{pid}")).exists()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            while session_present(tracefs, &name) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !session_present(tracefs, &name) {
                out.push((
                    name,
                    Removed {
                        by_watchdog: true,
                        ..Removed::default()
                    },
                ));
                continue;
            }
        }
        match remove_session(tracefs, &name, Duration::from_millis(500)) {
            Ok(r) => out.push((name, r)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dying_and_exited_processes() {
        assert!(!is_dying(std::process::id()));
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(!is_dying(pid));
        child.kill().unwrap();
        // Killed and not reaped: dying at once (SIGKILL pending or exiting), then a zombie.
        assert!(is_dying(pid));
        let end = Instant::now() + Duration::from_secs(5);
        while !is_exited(pid) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(is_exited(pid) && is_dying(pid));
        child.wait().unwrap();
        assert!(!is_exited(pid));
    }

    /// A leader that exited while another thread runs (as when netprobe is killed while its
    /// instance thread is inside `mkdir`): the process has not exited until that thread has.
    #[test]
    fn a_zombie_leader_with_a_live_thread_has_not_exited() {
        let mut headless = fixtures::live::Headless::start().unwrap();
        let pid = headless.pid();
        assert!(!is_exited(pid), "the sleeping thread still runs");
        headless.kill();
        let end = Instant::now() + Duration::from_secs(5);
        while !is_exited(pid) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(is_exited(pid), "every thread has exited");
    }

    #[test]
    fn session_names() {
        let owner = SessionOwner {
            pidns: 4026531836,
            pid: 42,
        };
        assert_eq!(session_name_of(owner).as_str(), "netprobe_4026531836_42");
        assert_eq!(session_owner("netprobe_4026531836_42"), Some(owner));
        assert_eq!(
            session_name(7).as_str(),
            format!("netprobe_{}_7", own_pidns())
        );
        // The earlier form: a pid of our namespace.
        assert_eq!(
            session_owner("netprobe_42"),
            Some(SessionOwner {
                pidns: own_pidns(),
                pid: 42
            })
        );
        for other in [
            "netprobe_persist",
            "netprobe_",
            "netprobe_4x_1",
            "netprobe_1_",
            "nptest_tracefs_1",
            "uprobes",
        ] {
            assert_eq!(session_owner(other), None, "{other}");
        }
    }
}
