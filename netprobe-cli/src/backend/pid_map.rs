//! Thread ids of another pid namespace: inside a container, hits carry the kernel's global ids
//! while netprobe shows its own namespace's (`pid_namespaces(7)`). A backend that can tell the
//! two apart (tracefs: `backend/tracefs/pidns.rs`) hands the sinks this map.

use std::collections::HashMap;

/// Global thread id → (process id, thread id) in our namespace, for the target threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PidMap {
    local: HashMap<u32, (u32, u32)>,
}

impl PidMap {
    /// Records that the kernel's `global_tid` is thread `local.1` of process `local.0` here.
    pub fn insert(&mut self, global_tid: u32, local: (u32, u32)) {
        self.local.insert(global_tid, local);
    }

    /// The global thread ids of the mapped threads.
    pub fn globals(&self) -> Vec<u32> {
        let mut g: Vec<u32> = self.local.keys().copied().collect();
        g.sort_unstable();
        g
    }

    /// Our (pid, tid) of the thread the kernel calls `global_tid`; `None` for threads not mapped
    /// (created after the calibration: their events carry global ids only).
    pub fn local(&self, global_tid: u32) -> Option<(u32, u32)> {
        self.local.get(&global_tid).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.local.is_empty()
    }
}
