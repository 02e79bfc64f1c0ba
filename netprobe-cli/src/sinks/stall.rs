//! "Hits stopped", a sink decorator for sessions with .NET methods: a probed managed method that
//! was hitting goes silent while its process lives.
//!
//! With tiered compilation on, the runtime replaces a hot method's ReadyToRun code with tier-1
//! JIT code after about 30 calls; calls then run the new code and the probe on the old code never
//! fires again (verified: `Thread.Sleep` 200 calls, 50 hits on .NET 8, 58 on 3.1). A JIT-compiled
//! caller may also inline the method. Either way the trace looks as if the program stopped
//! calling it; this watcher says what probably happened, once per method.

use crate::plan::{FunctionId, Hit, ProbePlan, Role};
use crate::sinks::{Flow, Sink, TaskInfo};
use std::collections::HashMap;

/// The shortest silence that counts as "stopped", and how many mean gaps between hits it must
/// also exceed.
const MIN_SILENCE_NS: u64 = 1_500_000_000;
const GAPS: u64 = 8;
/// At most this many messages per session (a glob can select hundreds of methods).
const MAX_MESSAGES: usize = 3;

#[derive(Clone, Debug)]
struct Track {
    name: String,
    calls: u64,
    first_ns: u64,
    last_ns: u64,
    last_pid: Option<u32>,
    reported: bool,
}

/// Watches the hits of managed functions.
#[derive(Debug)]
pub struct StallWatch {
    tracks: HashMap<FunctionId, Track>,
    /// Return-only functions count their return hits.
    count_returns: HashMap<FunctionId, bool>,
    /// What to do about it, per process (`restart it with DOTNET_TieredCompilation=0`).
    fix: HashMap<u32, String>,
    default_fix: Option<String>,
    messages: usize,
    tasks: TaskInfo,
    /// Whether any target may replace ReadyToRun code; when none can, a stop is just the program
    /// not calling, and nothing is said.
    armed: bool,
}

impl StallWatch {
    /// A watcher for the functions of `plan` that `managed` selects. `fix` says what to do for
    /// each pid whose runtime replaces R2R code (pids absent from it are not warned about, unless
    /// `default_fix` is given: system-wide or `-c` targets).
    pub fn new(
        plan: &ProbePlan,
        managed: impl Fn(FunctionId) -> bool,
        fix: HashMap<u32, String>,
        default_fix: Option<String>,
    ) -> StallWatch {
        let mut tracks = HashMap::new();
        let mut count_returns = HashMap::new();
        for f in &plan.functions {
            if !managed(f.id) {
                continue;
            }
            let has_entry = plan
                .probes
                .iter()
                .any(|p| p.function == f.id && p.role == Role::Entry);
            count_returns.insert(f.id, !has_entry);
            tracks.insert(
                f.id,
                Track {
                    name: f.name.clone(),
                    calls: 0,
                    first_ns: 0,
                    last_ns: 0,
                    last_pid: None,
                    reported: false,
                },
            );
        }
        let armed = !tracks.is_empty() && (!fix.is_empty() || default_fix.is_some());
        StallWatch {
            tracks,
            count_returns,
            fix,
            default_fix,
            messages: 0,
            tasks: TaskInfo::new(None),
            armed,
        }
    }

    /// A watcher for the session of `plan`, or `None` when it would never say anything: no
    /// function is managed (a Go or native session: its hits never pass through the watcher), or
    /// no target's runtime replaces ReadyToRun code.
    pub fn for_session(
        plan: &ProbePlan,
        managed: impl Fn(FunctionId) -> bool,
        fix: HashMap<u32, String>,
        default_fix: Option<String>,
    ) -> Option<StallWatch> {
        let watch = StallWatch::new(plan, managed, fix, default_fix);
        watch.armed.then_some(watch)
    }

    /// Records a hit.
    pub fn observe(&mut self, hit: &Hit) {
        if !self.armed {
            return;
        }
        let Some(t) = self.tracks.get_mut(&hit.function) else {
            return;
        };
        let counts = match hit.role {
            Role::Entry => true,
            Role::Return => self
                .count_returns
                .get(&hit.function)
                .copied()
                .unwrap_or(false),
        };
        if !counts {
            return;
        }
        if t.calls == 0 {
            t.first_ns = hit.ts_ns;
        }
        t.calls += 1;
        t.last_ns = t.last_ns.max(hit.ts_ns);
        if t.last_pid.is_none() {
            t.last_pid = self.tasks.process_of(hit);
        }
    }

    /// The messages due at `now_ns` (CLOCK_MONOTONIC): one per method whose hits stopped while
    /// its process still runs, each method at most once, at most [`MAX_MESSAGES`] in all.
    pub fn check(&mut self, now_ns: u64, alive: impl Fn(u32) -> bool) -> Vec<String> {
        let mut out = Vec::new();
        if !self.armed || self.messages >= MAX_MESSAGES {
            return out;
        }
        let mut ids: Vec<FunctionId> = self.tracks.keys().copied().collect();
        ids.sort();
        for id in ids {
            let Some(t) = self.tracks.get_mut(&id) else {
                continue;
            };
            if t.reported || t.calls < 2 {
                continue;
            }
            let mean_gap = (t.last_ns - t.first_ns) / (t.calls - 1);
            let silence = now_ns.saturating_sub(t.last_ns);
            if silence < MIN_SILENCE_NS.max(mean_gap.saturating_mul(GAPS)) {
                continue;
            }
            let Some(pid) = t.last_pid else { continue };
            if !alive(pid) {
                continue;
            }
            let Some(fix) = self.fix.get(&pid).or(self.default_fix.as_ref()) else {
                continue;
            };
            t.reported = true;
            self.messages += 1;
            out.push(format!(
                "netprobe: hits on {} stopped after {} call(s) ({:.1}s without one) while pid {pid} still runs: most likely tiered compilation replaced its ReadyToRun code with JIT code (or a JIT-compiled caller now inlines it), so later calls no longer reach the probe; {fix}",
                t.name,
                t.calls,
                silence as f64 / 1e9
            ));
            if self.messages >= MAX_MESSAGES {
                break;
            }
        }
        out
    }
}

/// Whether process `pid` still runs (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A sink that feeds a [`StallWatch`] and prints its messages on stderr, around another sink.
pub struct Watched<'a> {
    pub inner: &'a mut dyn Sink,
    pub watch: &'a mut StallWatch,
}

impl Sink for Watched<'_> {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        self.watch.observe(&hit);
        self.inner.hit(plan, hit)
    }

    fn counted(&mut self, plan: &ProbePlan, probe: usize, calls: u64) -> Flow {
        self.inner.counted(plan, probe, calls)
    }

    fn tick(&mut self, plan: &ProbePlan, lost: crate::backend::Lost) -> Flow {
        self.inner.tick(plan, lost)
    }

    fn lost_so_far(&mut self, plan: &ProbePlan, lost: crate::backend::Lost) {
        self.inner.lost_so_far(plan, lost)
    }

    fn idle(&mut self, plan: &ProbePlan) {
        for m in self
            .watch
            .check(crate::backend::monotonic_ns(), process_alive)
        {
            crate::printable::eprint_line(&m);
        }
        self.inner.idle(plan);
    }

    fn stop_requested(&self) -> bool {
        self.inner.stop_requested()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ProbePlan {
        crate::sinks::test_plan(&["Thread::Sleep"], "/x.dll")
    }

    fn hit(ts: u64) -> Hit {
        Hit {
            ts_ns: ts,
            tid: std::process::id(),
            pid: None,
            probe: 0,
            function: FunctionId(0),
            role: Role::Entry,
            args: vec![],
            pair_key: 0,
            comm: None,
            user_stack: None,
        }
    }

    #[test]
    fn says_it_once_when_hits_stop_and_the_process_lives() {
        let me = std::process::id();
        let fix = HashMap::from([(me, "restart it".to_string())]);
        let mut w = StallWatch::new(&plan(), |_| true, fix, None);
        for i in 0..30u64 {
            w.observe(&hit(1_000_000_000 + i * 10_000_000));
        }
        let last = 1_000_000_000 + 29 * 10_000_000;
        assert!(w.check(last + 1_000_000_000, |_| true).is_empty());
        let m = w.check(last + 2_000_000_000, |_| true);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains("after 30 call(s)") && m[0].contains("restart it"));
        assert!(w.check(last + 9_000_000_000, |_| true).is_empty());
    }

    #[test]
    fn quiet_when_the_process_exited_or_tiering_is_off() {
        let me = std::process::id();
        let fix = HashMap::from([(me, "restart it".to_string())]);
        let mut w = StallWatch::new(&plan(), |_| true, fix, None);
        for i in 0..5u64 {
            w.observe(&hit(i * 10_000_000));
        }
        assert!(w.check(60_000_000_000, |_| false).is_empty());
        let mut off = StallWatch::new(&plan(), |_| true, HashMap::new(), None);
        for i in 0..5u64 {
            off.observe(&hit(i * 10_000_000));
        }
        assert!(off.check(60_000_000_000, |_| true).is_empty());
    }

    #[test]
    fn slow_callers_get_more_time() {
        let me = std::process::id();
        let fix = HashMap::from([(me, "x".to_string())]);
        let mut w = StallWatch::new(&plan(), |_| true, fix, None);
        // One call a second: 3 s of silence is not a stop yet (8 gaps = 8 s).
        for i in 0..4u64 {
            w.observe(&hit(i * 1_000_000_000));
        }
        assert!(w.check(6_000_000_000, |_| true).is_empty());
        assert_eq!(w.check(12_000_000_000, |_| true).len(), 1);
    }

    #[test]
    fn only_sessions_with_managed_functions_are_watched() {
        let me = std::process::id();
        let fix = || HashMap::from([(me, "restart it".to_string())]);
        assert!(StallWatch::for_session(&plan(), |_| true, fix(), None).is_some());
        assert!(
            StallWatch::for_session(&plan(), |_| true, HashMap::new(), Some("x".into())).is_some()
        );
        // Go or native functions only: nothing to watch.
        assert!(StallWatch::for_session(&plan(), |_| false, fix(), Some("x".into())).is_none());
        // No target replaces ReadyToRun code: a stop is the program not calling.
        assert!(StallWatch::for_session(&plan(), |_| true, HashMap::new(), None).is_none());
    }

    #[test]
    fn our_own_process_is_alive() {
        assert!(process_alive(std::process::id()));
        assert!(!process_alive(u32::MAX - 1));
    }
}
