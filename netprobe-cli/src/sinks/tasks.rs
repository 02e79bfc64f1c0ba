//! Which process a thread belongs to, as the sinks show it.

use crate::backend::{Backend, ExitedThreads, PidMap};
use std::collections::HashMap;

/// Maps a tid to its process id, cached: `/proc/TID/status` (Tgid), else what the backend kept
/// of exited threads ([`ExitedThreads`]).
#[derive(Default)]
pub struct TaskInfo {
    tgid: HashMap<u32, Option<u32>>,
    exited: Option<Box<dyn ExitedThreads>>,
    /// Inside a pid namespace: kernel ids → ours (hits carry the kernel's).
    translation: Option<PidMap>,
}

impl std::fmt::Debug for TaskInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskInfo")
            .field("cached", &self.tgid.len())
            .field("translation", &self.translation)
            .finish_non_exhaustive()
    }
}

impl TaskInfo {
    /// Looks exited threads up in `exited` (`None`: in `/proc` only).
    pub fn new(exited: Option<Box<dyn ExitedThreads>>) -> TaskInfo {
        TaskInfo {
            exited,
            ..TaskInfo::default()
        }
    }

    /// The thread lookups of `session`'s hits: its record of exited threads, and inside a pid
    /// namespace its translation of the kernel's ids.
    pub fn of(session: &dyn Backend) -> TaskInfo {
        let mut t = TaskInfo::new(session.exited_threads());
        t.set_translation(session.pid_map().cloned());
        t
    }

    /// Hits carry the kernel's ids; show `map`'s ids (our pid namespace's) instead.
    pub fn set_translation(&mut self, map: Option<PidMap>) {
        self.translation = map;
    }

    /// Whether hits carry ids of another pid namespace than netprobe's (see
    /// [`TaskInfo::set_translation`]).
    pub fn translates(&self) -> bool {
        self.translation.is_some()
    }

    /// The thread id to show for the kernel's `tid`: ours inside a pid namespace when known,
    /// else `tid` itself.
    pub fn display_tid(&self, tid: u32) -> u32 {
        self.translation
            .as_ref()
            .and_then(|m| m.local(tid))
            .map_or(tid, |(_, t)| t)
    }

    /// Forgets the cached thread → process ids when more than `max` are cached (a long-running
    /// session that sees threads come and go keeps bounded memory; they are looked up again).
    pub fn bound_cache(&mut self, max: usize) {
        if self.tgid.len() > max {
            self.tgid.clear();
            if let Some(e) = self.exited.as_mut() {
                e.forget();
            }
        }
    }

    /// The process id of thread `tid` (a kernel id), in the ids netprobe shows; `None` when it
    /// cannot be found out (inside a pid namespace: a thread created after tracing started).
    /// The process of `hit`'s thread: the one the backend recorded with it, else [`Self::pid_of`].
    pub fn process_of(&mut self, hit: &crate::plan::Hit) -> Option<u32> {
        hit.pid.or_else(|| self.pid_of(hit.tid))
    }

    pub fn pid_of(&mut self, tid: u32) -> Option<u32> {
        if let Some(map) = &self.translation {
            return map.local(tid).map(|(p, _)| p);
        }
        if let Some(p) = self.tgid.get(&tid) {
            return *p;
        }
        let from_proc = std::fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            });
        let p = from_proc.or_else(|| self.exited.as_mut()?.process_of(tid));
        self.tgid.insert(tid, p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_and_lookups_still_work() {
        let me = std::process::id();
        let mut t = TaskInfo::new(None);
        assert_eq!(t.pid_of(me), Some(me));
        t.bound_cache(1);
        assert_eq!(t.tgid.len(), 1);
        t.bound_cache(0);
        assert!(t.tgid.is_empty());
        assert_eq!(t.pid_of(me), Some(me));
    }
}
