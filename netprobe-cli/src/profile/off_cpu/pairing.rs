//! Pairing a thread's switch-out with its next switch-in.
//!
//! Records come from per-CPU rings: a thread that blocks on one CPU may wake on another, so
//! the reader orders each batch by time ([`SwitchPairing`] takes events in time order per
//! thread). A switch-out is always written before its switch-in and every ring is emptied in
//! each drain, so a switch-in never reaches the reader before its switch-out.
//!
//! A full ring drops records. A wait whose switch-in was lost must not run on to the next
//! switch-in (that would count the time the thread ran in between as waiting): the kernel writes
//! a switch-out record right after the sample of every switch-out, so a second switch-out record
//! for a wait already confirmed by its own says the switch-in between was lost, and the wait is
//! dropped ([`SwitchPairing::stale`]).

use std::collections::HashMap;

/// A finished wait: what was recorded when the thread left, how long it was away, and whether
/// it left preempted (runnable, waiting for a CPU) rather than blocked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked<S> {
    pub left_with: S,
    pub tid: u32,
    pub ns: u64,
    pub preempted: bool,
}

#[derive(Debug)]
struct Away<S> {
    since: u64,
    left_with: S,
    preempted: bool,
    /// Its own switch-out record was seen.
    confirmed: bool,
}

/// Threads away from the CPU, by tid.
#[derive(Debug)]
pub struct SwitchPairing<S> {
    away: HashMap<u32, Away<S>>,
    /// Switch-ins of threads whose switch-out carried no sample (one not taken, lost to a full
    /// ring, or from before the profile began).
    pub unmatched_ins: u64,
    /// Waits dropped because their switch-in was lost.
    pub stale: u64,
}

impl<S> Default for SwitchPairing<S> {
    fn default() -> Self {
        SwitchPairing {
            away: HashMap::new(),
            unmatched_ins: 0,
            stale: 0,
        }
    }
}

impl<S> SwitchPairing<S> {
    /// Thread `tid` left the CPU at `time` (the sample taken as it left, with `left_with`).
    pub fn left(&mut self, tid: u32, time: u64, left_with: S) {
        self.away.insert(
            tid,
            Away {
                since: time,
                left_with,
                preempted: false,
                confirmed: false,
            },
        );
    }

    /// The switch-out record of `tid` at `time`: confirms the wait (a preemption when
    /// flagged), or, when the wait was confirmed already, says its switch-in was lost.
    pub fn switched_out(&mut self, tid: u32, time: u64, preempted: bool) {
        let Some(a) = self.away.get_mut(&tid) else {
            return;
        };
        if a.confirmed {
            self.away.remove(&tid);
            self.stale += 1;
        } else if a.since <= time {
            a.preempted = preempted;
            a.confirmed = true;
        }
    }

    /// Thread `tid` runs again at `time`: its wait, if its leaving was recorded.
    pub fn switched_in(&mut self, tid: u32, time: u64) -> Option<Blocked<S>> {
        match self.away.remove(&tid) {
            Some(a) if a.since <= time => Some(Blocked {
                left_with: a.left_with,
                tid,
                ns: time - a.since,
                preempted: a.preempted,
            }),
            Some(_) => None,
            None => {
                self.unmatched_ins += 1;
                None
            }
        }
    }

    /// Threads still away at `end` (the profile's end): their wait so far.
    pub fn finish(self, end: u64) -> Vec<Blocked<S>> {
        self.away
            .into_iter()
            .map(|(tid, a)| Blocked {
                left_with: a.left_with,
                tid,
                ns: end.saturating_sub(a.since),
                preempted: a.preempted,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_wait_runs_from_leaving_to_the_next_switch_in() {
        let mut p = SwitchPairing::default();
        p.left(7, 100, "read");
        p.switched_out(7, 100, false);
        assert_eq!(p.switched_in(8, 150), None);
        assert_eq!(p.unmatched_ins, 1);
        let b = p.switched_in(7, 400).unwrap();
        assert_eq!((b.left_with, b.ns, b.preempted), ("read", 300, false));
        assert_eq!(p.switched_in(7, 500), None);
        p.left(7, 600, "spin");
        p.switched_out(7, 600, true);
        p.left(9, 650, "sleep");
        let mut end = p.finish(1000);
        end.sort_by_key(|b| b.tid);
        assert_eq!(end.len(), 2);
        assert_eq!((end[0].ns, end[0].preempted), (400, true));
        assert_eq!((end[1].ns, end[1].preempted), (350, false));
    }

    #[test]
    fn a_lost_switch_in_drops_the_wait_instead_of_counting_the_run() {
        let mut p = SwitchPairing::default();
        p.left(7, 100, "futex");
        p.switched_out(7, 100, false);
        // The switch-in at 150 and the next sample were lost; the next switch-out record came.
        p.switched_out(7, 900, false);
        assert_eq!(p.stale, 1);
        assert_eq!(p.switched_in(7, 1000), None);
        // A sample whose own switch-out record was lost still pairs with its switch-in.
        p.left(7, 1100, "futex");
        assert_eq!(p.switched_in(7, 1300).map(|b| b.ns), Some(200));
    }

    proptest! {
        /// However a thread's switches interleave, the time counted never exceeds the time
        /// from its first leaving to the end, and equals the sum of out->in gaps.
        #[test]
        fn counted_time_is_the_sum_of_the_gaps(gaps in proptest::collection::vec((1u64..1000, 1u64..1000), 1..50)) {
            let mut p = SwitchPairing::default();
            let (mut t, mut expected) = (0u64, 0u64);
            let mut got = 0u64;
            for (run, away) in &gaps {
                t += run;
                p.left(1, t, ());
                p.switched_out(1, t, false);
                t += away;
                expected += away;
                got += p.switched_in(1, t).unwrap().ns;
            }
            prop_assert_eq!(got, expected);
            prop_assert!(p.finish(t + 5).is_empty());
        }
    }
}
