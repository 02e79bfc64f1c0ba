//! The kernel's thread → process table of a tracefs mount, `saved_tgids` (kept for exited tasks
//! while `options/record-tgid` is on; Documentation/trace/ftrace.rst, "saved_tgids"): where the
//! process of a thread that has exited is still written.

use crate::backend::tracefs::Tracefs;
use crate::backend::ExitedThreads;
use std::collections::HashMap;
use std::path::PathBuf;

/// `saved_tgids` of the tracefs mounted at `root`, read once at the first lookup.
#[derive(Debug)]
pub struct SavedTgids {
    root: PathBuf,
    table: Option<HashMap<u32, u32>>,
}

impl SavedTgids {
    pub fn new(root: PathBuf) -> SavedTgids {
        SavedTgids { root, table: None }
    }

    /// The lookup a backend on `tracefs` hands its sinks.
    pub fn of(tracefs: &Tracefs) -> Option<Box<dyn ExitedThreads>> {
        Some(Box::new(SavedTgids::new(tracefs.root().to_path_buf())))
    }
}

/// `TID TGID` lines, one a task.
fn parse(text: &str) -> HashMap<u32, u32> {
    text.lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

impl ExitedThreads for SavedTgids {
    fn process_of(&mut self, tid: u32) -> Option<u32> {
        let root = &self.root;
        self.table
            .get_or_insert_with(|| {
                parse(&std::fs::read_to_string(root.join("saved_tgids")).unwrap_or_default())
            })
            .get(&tid)
            .copied()
    }

    fn forget(&mut self) {
        self.table = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tid_tgid_lines_and_skips_the_rest() {
        let t = parse("12 10\n13 10\ngarbage\n14 x\n");
        assert_eq!(t.get(&12), Some(&10));
        assert_eq!(t.get(&13), Some(&10));
        assert_eq!(t.len(), 2);
    }
}
