//! Removing what netprobe placed: one session's group and instance, and stale ones of netprobe
//! processes that no longer run.
//!
//! Naming: a live session uses the group and instance `netprobe_<PID>` (PID of the netprobe
//! process), so leftovers can be attributed. Persistent probes (`netprobe probe add`) live in
//! other groups and are never touched here. Groups of other tools are never touched at all.
//!
//! Removal order (the kernel refuses to delete an enabled event with EBUSY): disable the group in
//! the instance, delete each event with `-:GROUP/EVENT`, then `rmdir` the instance.

use crate::error::{Error, Result};
use crate::tracefs::instance::{remove_dir, Instance};
use crate::tracefs::probe::{self, GroupName, ProbeLine};
use crate::tracefs::Tracefs;
use std::time::{Duration, Instant};

/// Prefix of session group/instance names.
pub const SESSION_PREFIX: &str = "netprobe_";

/// The session name for process `pid`: `netprobe_<pid>`.
pub fn session_name(pid: u32) -> GroupName {
    GroupName::new(&format!("{SESSION_PREFIX}{pid}")).expect("netprobe_<digits> is a valid name")
}

/// The pid in a session name `netprobe_<digits>`; `None` for any other name (persistent groups,
/// other tools' groups, test groups).
pub fn session_pid(name: &str) -> Option<u32> {
    let digits = name.strip_prefix(SESSION_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What [`remove_session`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub events: Vec<String>,
    pub instance: bool,
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

/// Whether the netprobe session of `pid` is still running: the process exists and is a netprobe
/// (its command name or executable starts with `netprobe`), or some process still has a file of
/// the session's instance open (a netprobe known under another name, or in another pid namespace).
pub fn session_alive(tracefs: &Tracefs, pid: u32) -> bool {
    let is_netprobe = |pid: u32| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        comm.starts_with("netprobe") || exe.starts_with("netprobe")
    };
    if std::path::Path::new(&format!("/proc/{pid}")).exists() && is_netprobe(pid) {
        return true;
    }
    instance_in_use(tracefs, &session_name(pid))
}

/// Whether any process has a file open inside `instances/NAME/`.
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
    let me = std::process::id();
    Ok(names
        .into_iter()
        .filter_map(|n| {
            let pid = session_pid(&n)?;
            (pid != me && !session_alive(tracefs, pid))
                .then(|| GroupName::new(&n).ok())
                .flatten()
        })
        .collect())
}

/// Removes every stale session; returns what went, per session name. A session that cannot be
/// removed is reported in the error after trying all the others.
pub fn clean_stale(tracefs: &Tracefs) -> Result<Vec<(GroupName, Removed)>> {
    let mut out = Vec::new();
    let mut first_err = None;
    for name in stale_sessions(tracefs)? {
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
    fn session_names() {
        assert_eq!(session_name(42).as_str(), "netprobe_42");
        assert_eq!(session_pid("netprobe_42"), Some(42));
        for other in [
            "netprobe_persist",
            "netprobe_",
            "netprobe_4x",
            "nptest_tracefs_1",
            "uprobes",
        ] {
            assert_eq!(session_pid(other), None, "{other}");
        }
    }
}
