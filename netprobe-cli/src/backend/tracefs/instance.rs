//! A tracefs instance of netprobe's own: a separate ring buffer with its own event switches and pid
//! filter (kernel `Documentation/trace/ftrace.rst`, "Instances"). Recording into the global buffer
//! would mix our hits with everybody else's and let others clear them.

use crate::backend::tracefs::probe::{EventName, GroupName};
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// One instance directory under `instances/`.
#[derive(Debug)]
pub struct Instance {
    tracefs: Tracefs,
    name: GroupName,
    dir: PathBuf,
}

impl Instance {
    /// Creates `instances/NAME` (`mkdir`). Fails with [`Error::Busy`] when it already exists.
    pub fn create(tracefs: &Tracefs, name: &GroupName) -> Result<Instance> {
        let dir = tracefs.path("instances").join(name.as_str());
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(Instance {
                tracefs: tracefs.clone(),
                name: name.clone(),
                dir,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(Error::Busy {
                path: dir,
                why: "a tracefs instance of this name already exists".into(),
                fix: "run `netprobe clean` (or pick another name)".into(),
            }),
            Err(e) => Err(Error::io(dir, e)),
        }
    }

    /// The instance `name` if its directory exists (to clean up a stale one); `None` otherwise.
    pub fn existing(tracefs: &Tracefs, name: &GroupName) -> Option<Instance> {
        let dir = tracefs.path("instances").join(name.as_str());
        dir.is_dir().then(|| Instance {
            tracefs: tracefs.clone(),
            name: name.clone(),
            dir,
        })
    }

    pub fn name(&self) -> &GroupName {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn tracefs(&self) -> &Tracefs {
        &self.tracefs
    }

    /// Writes `value` to a file of the instance (truncating: these are settings, not event lists).
    pub fn write(&self, rel: impl AsRef<Path>, value: &str) -> Result<()> {
        let path = self.dir.join(rel);
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        f.write_all(value.as_bytes())
            .map_err(|e| Error::io(&path, e))
    }

    /// Reads a file of the instance.
    pub fn read(&self, rel: impl AsRef<Path>) -> Result<String> {
        crate::backend::tracefs::mount::read_text(&self.dir.join(rel))
    }

    /// `trace_clock`: `mono` makes timestamps CLOCK_MONOTONIC nanoseconds, comparable across CPUs
    /// and with `clock_gettime` (the default `local` clock is per-CPU).
    pub fn set_clock(&self, clock: &str) -> Result<()> {
        self.write("trace_clock", clock)
    }

    /// `buffer_size_kb`: per-CPU ring buffer size.
    pub fn set_buffer_size_kb(&self, kb: u64) -> Result<()> {
        self.write("buffer_size_kb", &kb.to_string())
    }

    /// `options/overwrite`: `false` keeps the oldest events when the buffer is full and counts the
    /// newest as "dropped events" in `per_cpu/cpuN/stats` (we report them as lost).
    pub fn set_overwrite(&self, on: bool) -> Result<()> {
        self.write("options/overwrite", if on { "1" } else { "0" })
    }

    /// `buffer_percent`: how full a CPU buffer must be before a poller of `trace_pipe_raw` wakes
    /// (0 = on any data).
    pub fn set_buffer_percent(&self, percent: u32) -> Result<()> {
        self.write("buffer_percent", &percent.to_string())
    }

    /// `options/event-fork`: tasks forked or cloned by a filtered task join the pid filter.
    /// Starts or stops recording into this instance's ring buffer (`tracing_on`). Stopping is
    /// immediate, unlike disabling uprobe events, which costs the kernel a synchronization per
    /// event (`uprobe_unregister_sync`, ~48 ms each measured here).
    pub fn set_tracing_on(&self, on: bool) -> Result<()> {
        self.write("tracing_on", if on { "1" } else { "0" })
    }

    pub fn set_event_fork(&self, on: bool) -> Result<()> {
        self.write("options/event-fork", if on { "1" } else { "0" })
    }

    /// `set_event_pid`: record events only of these tasks. The kernel matches `task->pid`, i.e.
    /// thread ids, so callers pass every thread of a process (see [`threads_of`]).
    pub fn set_event_pids(&self, tids: &[u32]) -> Result<()> {
        let list: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
        self.write("set_event_pid", &list.join(" "))
    }

    /// Adds tids to `set_event_pid` (appending keeps the present list, ftrace.rst).
    pub fn add_event_pids(&self, tids: &[u32]) -> Result<()> {
        let path = self.dir.join("set_event_pid");
        let mut f = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        let list: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
        f.write_all(list.join(" ").as_bytes())
            .map_err(|e| Error::io(&path, e))
    }

    /// The tids currently in `set_event_pid`.
    pub fn event_pids(&self) -> Result<Vec<u32>> {
        Ok(self
            .read("set_event_pid")?
            .split_whitespace()
            .filter_map(|s| s.parse().ok())
            .collect())
    }

    /// Enables or disables one event in this instance.
    pub fn enable_event(&self, group: &GroupName, event: &EventName, on: bool) -> Result<()> {
        self.write(
            Path::new("events")
                .join(group.as_str())
                .join(event.as_str())
                .join("enable"),
            if on { "1" } else { "0" },
        )
    }

    /// Enables or disables every event of a group in this instance.
    pub fn enable_group(&self, group: &GroupName, on: bool) -> Result<()> {
        self.write(
            Path::new("events").join(group.as_str()).join("enable"),
            if on { "1" } else { "0" },
        )
    }

    /// `per_cpu/cpuN` folders present, as CPU numbers in ascending order.
    pub fn cpus(&self) -> Result<Vec<u32>> {
        let dir = self.dir.join("per_cpu");
        let mut cpus: Vec<u32> = std::fs::read_dir(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        Ok(cpus)
    }

    /// Lost-event counters of one CPU's buffer (`per_cpu/cpuN/stats`).
    pub fn cpu_stats(&self, cpu: u32) -> Result<CpuStats> {
        Ok(CpuStats::parse(
            &self.read(format!("per_cpu/cpu{cpu}/stats"))?,
        ))
    }

    /// Removes the instance directory (`rmdir`). The kernel refuses (EBUSY) while any of its files
    /// is open; it disables the instance's events itself when it goes.
    pub fn remove(self) -> Result<()> {
        remove_dir(&self.dir)
    }
}

/// `rmdir` of an instance directory; ENOENT counts as success (already gone).
pub fn remove_dir(dir: &Path) -> Result<()> {
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(Error::Busy {
            path: dir.to_path_buf(),
            why: "a file of the instance is still open".into(),
            fix: "stop the process reading it, then run `netprobe clean`".into(),
        }),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// Counters from `per_cpu/cpuN/stats` (kernel `tracing_stats_read`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Events in the buffer now.
    pub entries: u64,
    /// Events overwritten before they were read (overwrite mode).
    pub overrun: u64,
    /// Events lost because a nested writer ran out of room on its page.
    pub commit_overrun: u64,
    /// Events discarded because the buffer was full (non-overwrite mode).
    pub dropped_events: u64,
    /// Events consumed by readers.
    pub read_events: u64,
}

impl CpuStats {
    /// Parses the `key: value` lines; unknown or malformed lines are ignored (0).
    pub fn parse(text: &str) -> CpuStats {
        let mut s = CpuStats::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let Ok(v) = v.trim().parse::<u64>() else {
                continue;
            };
            match k.trim() {
                "entries" => s.entries = v,
                "overrun" => s.overrun = v,
                "commit overrun" => s.commit_overrun = v,
                "dropped events" => s.dropped_events = v,
                "read events" => s.read_events = v,
                _ => {}
            }
        }
        s
    }

    /// Every event this CPU's buffer lost.
    pub fn lost(&self) -> u64 {
        self.overrun
            .saturating_add(self.commit_overrun)
            .saturating_add(self.dropped_events)
    }
}

/// Thread ids of process `pid` (`/proc/PID/task`); empty when the process is gone.
pub fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Thread ids of the processes `pids`, sorted and without repeats; a process that lists none (it
/// exited, or its task folder cannot be read) stands for itself.
pub fn threads_of_processes(pids: &[u32]) -> Vec<u32> {
    let mut tids: Vec<u32> = pids
        .iter()
        .flat_map(|&p| {
            let t = threads_of(p);
            if t.is_empty() {
                vec![p]
            } else {
                t
            }
        })
        .collect();
    tids.sort_unstable();
    tids.dedup();
    tids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stats() {
        let s = CpuStats::parse("entries: 3\noverrun: 5\ncommit overrun: 1\nbytes: 100\noldest event ts:     0.000000\nnow ts:   414.218608\ndropped events: 7\nread events: 9\n");
        assert_eq!(s.entries, 3);
        assert_eq!(s.overrun, 5);
        assert_eq!(s.commit_overrun, 1);
        assert_eq!(s.dropped_events, 7);
        assert_eq!(s.read_events, 9);
        assert_eq!(s.lost(), 13);
    }

    #[test]
    fn own_threads_are_listed() {
        let me = std::process::id();
        assert!(threads_of(me).contains(&me));
        assert!(threads_of(u32::MAX).is_empty());
    }
}
