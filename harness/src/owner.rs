//! Names of everything a harness run creates, and who owns it.
//!
//! Every container is named `nptest_harness_<owner>_<role>` and every image
//! `netprobe-harness/<role>:<owner>`, where `<owner>` is `<pid>-<start>`: the creating process's
//! pid and its start time in clock ticks since boot (`/proc/PID/stat` field 22, proc(5)). A pid alone
//! can be reused; the pair cannot while the machine is up. So a later run can tell a leftover of a
//! dead run (remove it) from the resources of a run that is still going (leave it alone), and two
//! runs at once never touch each other's containers.

use std::fmt;

/// Prefix of every container name the harness creates.
pub const CONTAINER_PREFIX: &str = "nptest_harness_";
/// Prefix of every image repository the harness creates (Docker wants lowercase repositories).
pub const IMAGE_REPO_PREFIX: &str = "netprobe-harness/";

/// The process that owns a set of containers and images.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pid: u32,
    start_ticks: u64,
}

impl Owner {
    /// The current process, read once per process. Panics only if `/proc/self/stat` is
    /// unreadable, which means no procfs: nothing in the harness can work then.
    pub fn current() -> Owner {
        static CURRENT: std::sync::OnceLock<Owner> = std::sync::OnceLock::new();
        *CURRENT.get_or_init(|| {
            let pid = std::process::id();
            let start_ticks = start_ticks(pid)
                .ok()
                .flatten()
                .expect("read /proc/self/stat (is /proc mounted?)");
            Owner { pid, start_ticks }
        })
    }

    /// `<pid>-<start>`, the form used in names and tags.
    pub fn token(&self) -> String {
        format!("{}-{}", self.pid, self.start_ticks)
    }

    /// Parses a token made by [`Owner::token`]; `None` for anything else.
    pub fn parse(token: &str) -> Option<Owner> {
        let (pid, start) = token.split_once('-')?;
        Some(Owner {
            pid: pid.parse().ok()?,
            start_ticks: start.parse().ok()?,
        })
    }

    /// True while the owning process runs (same pid AND same start time); also true for the
    /// current process without asking procfs, and when procfs cannot tell (a read error other
    /// than "no such process", e.g. out of file descriptors during a busy test run): a sweep
    /// must only ever remove what is known to be dead.
    pub fn is_alive(&self) -> bool {
        if *self == Owner::current() {
            return true;
        }
        match start_ticks(self.pid) {
            Ok(now) => now == Some(self.start_ticks),
            Err(_) => true,
        }
    }

    /// The container name for `role` (letters, digits, `_`, `.`, `-`).
    pub fn container_name(&self, role: &str) -> String {
        format!("{CONTAINER_PREFIX}{}_{role}", self.token())
    }

    /// The image reference `netprobe-harness/<role>:<owner>`; `role` must be lowercase.
    pub fn image_ref(&self, role: &str) -> String {
        format!("{IMAGE_REPO_PREFIX}{role}:{}", self.token())
    }

    /// The owner encoded in a container name made by [`Owner::container_name`], if any.
    pub fn of_container(name: &str) -> Option<Owner> {
        let rest = name
            .trim_start_matches('/')
            .strip_prefix(CONTAINER_PREFIX)?;
        Owner::parse(rest.split('_').next()?)
    }

    /// The owner encoded in an image reference made by [`Owner::image_ref`], if any.
    pub fn of_image(reference: &str) -> Option<Owner> {
        let rest = reference.strip_prefix(IMAGE_REPO_PREFIX)?;
        let (_, tag) = rest.rsplit_once(':')?;
        Owner::parse(tag)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.token())
    }
}

/// Field 22 (`starttime`) of `/proc/PID/stat`: `Ok(None)` when the process does not exist (or
/// the file does not parse), an error when procfs could not be read for another reason.
/// The comm field (2) may hold spaces and parentheses, so fields are counted after the last `)`.
fn start_ticks(pid: u32) -> std::io::Result<Option<u64>> {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        // ESRCH: the process exited between the open and the read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(3) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let Some(close) = stat.rfind(')') else {
        return Ok(None);
    };
    // After the comm: field 3 (state) is index 0, so field 22 is index 19.
    Ok(stat[close + 1..]
        .split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_to_their_owner() {
        let me = Owner::current();
        assert!(me.is_alive());
        assert_eq!(
            Owner::of_container(&me.container_name("dotnet8_app")),
            Some(me)
        );
        assert_eq!(
            Owner::of_container(&format!("/{}", me.container_name("x"))),
            Some(me)
        );
        assert_eq!(Owner::of_image(&me.image_ref("sidecar")), Some(me));
        assert_eq!(Owner::of_container("nptest_tracefs_1-2_x"), None);
        assert_eq!(Owner::of_image("debian:bookworm"), None);
        assert_eq!(Owner::of_image("netprobe-harness/x:latest"), None);
    }

    #[test]
    fn a_dead_or_reused_pid_is_not_alive() {
        let me = Owner::current();
        let reused = Owner {
            pid: me.pid,
            start_ticks: me.start_ticks + 1,
        };
        assert!(!reused.is_alive());
        // pid_max is at most 2^22 on Linux, so this pid never exists.
        assert!(!Owner {
            pid: u32::MAX,
            start_ticks: 0
        }
        .is_alive());
    }
}
