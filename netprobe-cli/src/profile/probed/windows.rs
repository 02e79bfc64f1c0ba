//! [`Windows`]: the spans of time threads spend inside a probed function, from its entry and
//! return hits, for `profile --trigger`: a sample or an off-CPU interval counts only for the part
//! of it that falls inside a window of its thread.
//!
//! Calls are paired by the hit's `pair_key` (the thread, or for Go under the register ABI the
//! goroutine, `crate::lang::go`'s pairing) with a depth counter, so a recursive call is counted
//! once: the window opens at the outermost entry and closes at its matching return. A return
//! with no open call (the probes were placed mid-call) is ignored; a call still open when the
//! profile ends closes at the profile's end.
//!
//! Samples are taken per thread, so each window is kept under the thread that hit its entry
//! probe. For a native function that is the only thread it runs on. A goroutine runs on the
//! thread that hit the entry until it parks (`runtime.gopark`); if it parks inside the function
//! and resumes on another thread, the rest of its call is still counted on the first thread
//! (where another goroutine may be running meanwhile). Windows of one thread are merged, so
//! time is never counted twice.

use crate::plan::{Hit, Role};
use std::collections::HashMap;

/// Time spans inside a probed function, per thread: sorted, disjoint `[from, to)` in
/// CLOCK_MONOTONIC nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Windows {
    by_tid: HashMap<u32, Vec<(u64, u64)>>,
}

/// One probe event as [`Windows`] pairs it: (pair key, thread, time, entry or return).
pub type WindowEvent = (u64, u32, u64, Role);

impl Windows {
    /// The windows of `hits` (entries and returns of the trigger function, in any order), those
    /// still open closing at `end_ns`.
    pub fn from_hits(hits: &[Hit], end_ns: u64) -> Windows {
        Windows::from_events(
            hits.iter().map(|h| (h.pair_key, h.tid, h.ts_ns, h.role)),
            end_ns,
        )
    }

    /// The windows of `events` (see [`Windows::from_hits`]).
    pub fn from_events(events: impl IntoIterator<Item = WindowEvent>, end_ns: u64) -> Windows {
        let mut events: Vec<WindowEvent> = events.into_iter().collect();
        // By time; at one instant entries first, so a zero-length call opens before it closes.
        events.sort_by_key(|&(_, _, ts, role)| (ts, role == Role::Return));
        // Per pair key: (depth, thread of the outermost entry, its time).
        let mut open: HashMap<u64, (u32, u32, u64)> = HashMap::new();
        let mut by_tid: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
        for (key, tid, ts, role) in events {
            match role {
                Role::Entry => {
                    let e = open.entry(key).or_insert((0, tid, ts));
                    e.0 = e.0.saturating_add(1);
                }
                Role::Return => {
                    let Some(e) = open.get_mut(&key) else {
                        continue;
                    };
                    e.0 -= 1;
                    if e.0 == 0 {
                        let (_, t, from) = open.remove(&key).unwrap_or_default();
                        by_tid.entry(t).or_default().push((from, ts));
                    }
                }
            }
        }
        for (_, (_, tid, from)) in open {
            by_tid
                .entry(tid)
                .or_default()
                .push((from, end_ns.max(from)));
        }
        for spans in by_tid.values_mut() {
            *spans = merged(std::mem::take(spans));
        }
        by_tid.retain(|_, s| !s.is_empty());
        Windows { by_tid }
    }

    /// Nanoseconds of `[from_ns, to_ns)` thread `tid` spent inside the function.
    pub fn overlap_ns(&self, tid: u32, from_ns: u64, to_ns: u64) -> u64 {
        let Some(spans) = self.by_tid.get(&tid) else {
            return 0;
        };
        // The first span that ends after `from_ns`.
        let first = spans.partition_point(|&(_, end)| end <= from_ns);
        spans[first..]
            .iter()
            .take_while(|&&(start, _)| start < to_ns)
            .map(|&(start, end)| end.min(to_ns).saturating_sub(start.max(from_ns)))
            .sum()
    }

    /// Whether thread `tid` was inside the function at `t_ns` (a sample's time).
    pub fn contains(&self, tid: u32, t_ns: u64) -> bool {
        self.overlap_ns(tid, t_ns, t_ns.saturating_add(1)) > 0
    }

    /// The threads with at least one window.
    pub fn threads(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_tid.keys().copied()
    }

    /// The windows of thread `tid`: sorted, disjoint `[from, to)`.
    pub fn spans(&self, tid: u32) -> &[(u64, u64)] {
        self.by_tid.get(&tid).map_or(&[], Vec::as_slice)
    }
}

/// `spans` sorted and merged into disjoint ones; empty spans dropped.
fn merged(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.retain(|&(a, b)| b > a);
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(key: u64, tid: u32, ts: u64, entry: bool) -> WindowEvent {
        (key, tid, ts, if entry { Role::Entry } else { Role::Return })
    }

    #[test]
    fn recursion_counts_once_and_unmatched_returns_are_ignored() {
        let w = Windows::from_events(
            [
                ev(1, 10, 5, false), // placed mid-call: ignored
                ev(1, 10, 10, true),
                ev(1, 10, 12, true),
                ev(1, 10, 15, false),
                ev(1, 10, 20, false),
                ev(1, 10, 30, true), // still open at the end
            ],
            40,
        );
        assert_eq!(w.spans(10), &[(10, 20), (30, 40)]);
        assert_eq!(w.overlap_ns(10, 0, 100), 20);
        assert_eq!(w.overlap_ns(10, 15, 35), 10);
        assert!(w.contains(10, 10) && !w.contains(10, 20) && w.contains(10, 39));
        assert_eq!(w.overlap_ns(11, 0, 100), 0);
    }

    #[test]
    fn a_goroutine_that_moves_threads_is_kept_under_its_entry_thread() {
        let w = Windows::from_events([ev(0xc000, 10, 100, true), ev(0xc000, 11, 200, false)], 0);
        assert_eq!(w.spans(10), &[(100, 200)]);
        assert!(w.spans(11).is_empty());
    }

    /// Brute force: the time units during which some key of `tid`'s calls has depth > 0, from a
    /// replay of the events in time order (entries first at one instant).
    fn inside_units(events: &[WindowEvent], tid: u32, end: u64) -> Vec<bool> {
        let mut sorted = events.to_vec();
        sorted.sort_by_key(|&(_, _, ts, role)| (ts, role == Role::Return));
        let mut units = vec![false; end as usize];
        let mut depth: HashMap<u64, (u32, u32, u64)> = HashMap::new();
        let mark = |from: u64, to: u64, units: &mut Vec<bool>| {
            for u in from..to.min(end) {
                units[u as usize] = true;
            }
        };
        for &(key, t, ts, role) in &sorted {
            match role {
                Role::Entry => depth.entry(key).or_insert((0, t, ts)).0 += 1,
                Role::Return => {
                    if let Some(d) = depth.get_mut(&key) {
                        d.0 -= 1;
                        if d.0 == 0 {
                            let (_, owner, from) = depth.remove(&key).unwrap();
                            if owner == tid {
                                mark(from, ts, &mut units);
                            }
                        }
                    }
                }
            }
        }
        for (_, (_, owner, from)) in depth {
            if owner == tid {
                mark(from, end, &mut units);
            }
        }
        units
    }

    proptest! {
        #[test]
        fn overlap_matches_a_replay_unit_by_unit(
            raw in proptest::collection::vec((0u64..3, 0u32..3, 0u64..60, any::<bool>()), 0..40),
            from in 0u64..70,
            len in 0u64..70,
        ) {
            let end = 64;
            let events: Vec<WindowEvent> =
                raw.iter().map(|&(k, t, ts, e)| ev(k, t, ts, e)).collect();
            let w = Windows::from_events(events.clone(), end);
            for tid in 0..3u32 {
                let units = inside_units(&events, tid, end);
                let to = from + len;
                let expected = (from..to.min(end)).filter(|&u| units[u as usize]).count() as u64;
                prop_assert_eq!(w.overlap_ns(tid, from, to), expected);
                for t in 0..end {
                    prop_assert_eq!(w.contains(tid, t), units[t as usize]);
                }
                for pair in w.spans(tid).windows(2) {
                    prop_assert!(pair[0].1 < pair[1].0, "spans merged and sorted");
                }
            }
        }
    }
}
