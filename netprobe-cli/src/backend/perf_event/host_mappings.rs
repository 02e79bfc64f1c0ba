//! The mappings of every process on the host, for host-wide sessions (the tracefs backend has no
//! per-task perf events to carry them): one system-wide software event per CPU that records
//! nothing but the side-band records of [`super::sideband`] (what `perf record -a` opens beside
//! its samplers), drained into a [`RecordedMaps`] before the hits are read, so a process that
//! exits before its hits are read has its frames named from what it had mapped.
//!
//! A record's path is in the mapping process's mount namespace: it is opened under that
//! process's root directory (`/proc/PID/root`, opened `O_PATH`): its parent's, taken when its
//! fork is read (the parent usually outlives it), then its own, taken when its exec or first
//! mapping is read if it still runs. Each record wakes the reader, so that is mostly while the
//! process starts up. A process that changed its root between fork and exec and is gone before
//! its exec is read (a container's init, forked from the host, that lives for milliseconds) has
//! its paths looked up under its parent's root; only a file with the recorded device and inode is
//! read there (`netprobe_core::symbolize`), so no other file is ever named from.

use super::ring::Ring;
use super::sideband::{self, Sideband};
use super::{online_cpus, open_event};
use netprobe_core::maps::RecordedMaps;
use perf_event_open_sys as sys;
use std::os::fd::OwnedFd;

/// Data pages of each CPU's buffer: a process start writes a few dozen records of ~100 bytes.
const DATA_PAGES: usize = 64;

/// The per-CPU tracking events and the mappings read from them so far.
pub struct HostMappings {
    rings: Vec<Ring>,
    recorded: RecordedMaps,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for HostMappings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMappings")
            .field("rings", &self.rings.len())
            .finish_non_exhaustive()
    }
}

impl HostMappings {
    /// Opens and enables a tracking event on every online CPU. Errors: the kernel's (a
    /// system-wide event needs CAP_PERFMON or `kernel.perf_event_paranoid` <= 0).
    pub fn open() -> std::io::Result<HostMappings> {
        let mut rings = Vec::new();
        for cpu in online_cpus().map_err(|e| std::io::Error::other(e.to_string()))? {
            let mut a = sys::bindings::perf_event_attr {
                type_: sys::bindings::PERF_TYPE_SOFTWARE,
                size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
                config: sys::bindings::PERF_COUNT_SW_DUMMY as u64,
                sample_type: (sys::bindings::PERF_SAMPLE_TID | sys::bindings::PERF_SAMPLE_TIME)
                    as u64,
                ..Default::default()
            };
            a.set_exclude_kernel(1);
            a.set_use_clockid(1);
            a.clockid = libc::CLOCK_MONOTONIC;
            a.__bindgen_anon_2.wakeup_events = 1;
            sideband::track(&mut a);
            let fd = open_event(&mut a, -1, cpu)?;
            rings.push(Ring::map(fd, DATA_PAGES)?);
        }
        Ok(HostMappings {
            rings,
            recorded: RecordedMaps::new(),
            scratch: Vec::new(),
        })
    }

    /// The descriptors that become readable when records wait.
    pub fn fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(Ring::fd)
    }

    /// The mappings read so far (shared: later reads add to it).
    pub fn recorded(&self) -> RecordedMaps {
        self.recorded.clone()
    }

    /// Reads every waiting record into the mappings.
    pub fn drain(&mut self) {
        for ring in &mut self.rings {
            self.scratch.clear();
            ring.drain(&mut self.scratch);
            let mut at = 0usize;
            while let Some(header) = self.scratch.get(at..at + 8) {
                let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
                let size = u16::from_ne_bytes([header[6], header[7]]) as usize;
                let Some(rec) = (size >= 8)
                    .then(|| self.scratch.get(at..at + size))
                    .flatten()
                else {
                    break;
                };
                if let Some(s) = sideband::decode(kind, rec) {
                    apply(&self.recorded, &s);
                }
                at += size;
            }
        }
    }
}

/// Applies a record, opening the process's root where it has none of its own yet.
fn apply(recorded: &RecordedMaps, s: &Sideband) {
    // Processes outside netprobe's pid namespace come with pid 0.
    let pid = match *s {
        Sideband::Mmap { pid, .. } | Sideband::Exec { pid, .. } => pid,
        Sideband::Fork { child, .. } => child,
    };
    if pid == 0 {
        return;
    }
    match *s {
        // The child starts in its parent's root (the parent usually outlives it): taken now,
        // so a child gone before its own records are read still has one.
        Sideband::Fork { parent, .. } if !recorded.has_root(parent) => {
            recorded.root_from_proc(parent);
        }
        _ => {}
    }
    s.apply(recorded);
    match s {
        // Its own root, where it still runs: a process may change its root between fork and
        // exec (a container's init does).
        Sideband::Exec { .. } => {
            recorded.root_from_proc(pid);
        }
        Sideband::Mmap { .. } if !recorded.has_root(pid) => {
            recorded.root_from_proc(pid);
        }
        _ => {}
    }
}
