//! Which process a probe's records belong to, where one file is reached through two paths.
//!
//! Two containers of one image reach one executable through two overlay mounts: stat gives each
//! path its own device, so the plan holds a probe per path, but uprobes sit on the inode
//! underneath (`d_real_inode`, `kernel/events/uprobes.c` and `kernel/trace/trace_uprobe.c`), so
//! both probes fire at every call in either container, and each target task's perf events
//! record both. A record of a probe is kept only from a process that maps that probe's path
//! (its `/proc/PID/maps` shows the path's device and inode, as stat gives them): the other
//! probe's record of the same call is the one kept. Probes without such a twin are never
//! checked, and a process that cannot be read (gone) keeps its records.

use crate::plan::ProbePlan;
use netprobe_core::maps::Device;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// (process, probe) pairs remembered at most; past it the answers are looked up again.
const MAX_CACHED: usize = 65_536;

#[derive(Debug, Default)]
pub struct ProbeOwners {
    /// Per probe: the device and inode its path has, when another probe of the same function
    /// and role sits at the same offset of another path; `None` for every other probe.
    twins: Vec<Option<(Device, u64)>>,
    cache: HashMap<(u32, usize), bool>,
}

impl ProbeOwners {
    pub fn new(plan: &ProbePlan) -> ProbeOwners {
        let mut paths: HashMap<(&str, crate::plan::Role, u64), Vec<usize>> = HashMap::new();
        for (i, p) in plan.probes.iter().enumerate() {
            let key = (plan.function(p.function).name.as_str(), p.role, p.offset.0);
            paths.entry(key).or_default().push(i);
        }
        let mut twins = vec![None; plan.probes.len()];
        for probes in paths.values() {
            let first = &plan.probes[probes[0]].path;
            if probes.iter().all(|&i| plan.probes[i].path == *first) {
                continue;
            }
            for &i in probes {
                twins[i] = std::fs::metadata(&plan.probes[i].path)
                    .ok()
                    .map(|m| (Device::from_st_dev(m.dev()), m.ino()));
            }
        }
        ProbeOwners {
            twins,
            cache: HashMap::new(),
        }
    }

    /// Answers for `pids` now, while they run: a short-lived target's records are often read
    /// after it exited, when its maps are gone.
    pub fn learn(&mut self, pids: &[u32]) {
        for &pid in pids {
            for probe in 0..self.twins.len() {
                self.keeps(pid, probe);
            }
        }
    }

    /// Whether a record of `probe` made in process `pid` is that process's own.
    pub fn keeps(&mut self, pid: u32, probe: usize) -> bool {
        let Some(Some((dev, ino))) = self.twins.get(probe).copied() else {
            return true;
        };
        if let Some(&k) = self.cache.get(&(pid, probe)) {
            return k;
        }
        // A zombie's maps are empty: not knowing, the record is kept (and not remembered).
        let maps = std::fs::read(format!("/proc/{pid}/maps"))
            .ok()
            .and_then(|text| netprobe_core::maps::parse_maps(&text).ok())
            .filter(|maps| !maps.is_empty());
        let Some(maps) = maps else {
            return true;
        };
        let keeps = maps.iter().any(|m| m.dev == dev && m.inode == ino);
        if self.cache.len() >= MAX_CACHED {
            self.cache.clear();
        }
        self.cache.insert((pid, probe), keeps);
        keeps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test process maps its own executable, not a copy of it: of two probes of one
    /// function at one offset (the copy standing for the same image in another container), its
    /// records are its own probe's; a probe without a twin is always kept.
    #[test]
    fn records_are_kept_from_the_process_that_maps_the_probe_path() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy");
        std::fs::copy(&exe, &copy).unwrap();
        let mut plan = crate::sinks::test_plan(&["f", "g"], exe.to_str().unwrap());
        let other = crate::sinks::test_plan(&["f"], copy.to_str().unwrap());
        plan.probes.push(crate::plan::KernelProbe {
            function: plan.functions[0].id,
            ..other.probes[0].clone()
        });
        let mut owners = ProbeOwners::new(&plan);
        let me = std::process::id();
        assert!(owners.keeps(me, 0), "its own path");
        assert!(owners.keeps(me, 1), "no twin");
        assert!(!owners.keeps(me, 2), "the copy's path");
        // A process that cannot be read keeps its records.
        assert!(owners.keeps(u32::MAX, 2));
    }
}
