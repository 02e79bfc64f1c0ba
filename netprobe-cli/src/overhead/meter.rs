//! The running estimate of what a session costs its targets, window by window, and the budget
//! check that picks the functions whose probes must go.

use crate::plan::{FunctionId, ProbePlan};
use std::time::{Duration, Instant};

/// The estimated cost of a span of a session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Length of the span.
    pub seconds: f64,
    /// Hits in the span.
    pub hits: u64,
    /// CPU time the hits cost the targets, as a share of one CPU over the span (1.0: one CPU).
    pub cpu_share: f64,
}

impl Estimate {
    /// `0.4% of a CPU (82.1k hits/s)`.
    pub fn describe(&self) -> String {
        let rate = if self.seconds > 0.0 {
            self.hits as f64 / self.seconds
        } else {
            0.0
        };
        format!(
            "{} of a CPU ({} hits/s)",
            percent(self.cpu_share),
            rate_text(rate)
        )
    }
}

/// A share as a percentage with two significant digits or more (`0.012%`, `0.11%`, `1.4%`,
/// `163%`).
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else if p >= 1.0 {
        format!("{p:.1}%")
    } else if p >= 0.1 {
        format!("{p:.2}%")
    } else {
        format!("{p:.3}%")
    }
}

fn rate_text(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// A function whose probes cost more than the budget allows in a window.
#[derive(Clone, Debug, PartialEq)]
pub struct OverBudget {
    pub function: FunctionId,
    /// Its probes (indexes into [`ProbePlan::probes`]).
    pub probes: Vec<usize>,
    /// Its hits per second and their cost as a share of one CPU, in the window.
    pub hits_per_s: f64,
    pub cpu_share: f64,
}

/// Counts hits per probe and turns them into estimates.
#[derive(Debug)]
pub struct OverheadMeter {
    /// Per probe: nanoseconds a hit costs its process.
    cost_ns: Vec<f64>,
    /// Per probe: the function it observes.
    function_of: Vec<FunctionId>,
    /// Per probe: hits in the current window, and in all.
    window: Vec<u64>,
    total: Vec<u64>,
    /// Per probe: taken out (its hits no longer come).
    removed: Vec<bool>,
    window_start: Instant,
    /// Per probe: hits since the last interval tick.
    tick: Vec<u64>,
    tick_start: Instant,
    started: Instant,
    /// The budget as a share of one CPU (`--max-overhead 1%`: 0.01).
    max_share: Option<f64>,
}

impl OverheadMeter {
    /// A meter for `plan`'s probes, each hit of probe `i` costing `cost_ns[i]`; `max_share`: the
    /// budget, if any.
    pub fn new(plan: &ProbePlan, cost_ns: Vec<f64>, max_share: Option<f64>) -> OverheadMeter {
        let n = plan.probes.len();
        let now = Instant::now();
        OverheadMeter {
            cost_ns,
            function_of: plan.probes.iter().map(|p| p.function).collect(),
            window: vec![0; n],
            total: vec![0; n],
            removed: vec![false; n],
            window_start: now,
            tick: vec![0; n],
            tick_start: now,
            started: now,
            max_share,
        }
    }

    /// `hits` more hits of probe `probe`.
    pub fn observe(&mut self, probe: usize, hits: u64) {
        if let (Some(w), Some(t), Some(k)) = (
            self.window.get_mut(probe),
            self.total.get_mut(probe),
            self.tick.get_mut(probe),
        ) {
            *w = w.saturating_add(hits);
            *t = t.saturating_add(hits);
            *k = k.saturating_add(hits);
        }
    }

    /// How long the current window has run.
    pub fn window_age(&self) -> Duration {
        self.window_start.elapsed()
    }

    fn estimate(&self, hits: &[u64], seconds: f64) -> Estimate {
        let ns: f64 = hits
            .iter()
            .zip(&self.cost_ns)
            .map(|(&h, &c)| h as f64 * c)
            .sum();
        Estimate {
            seconds,
            hits: hits.iter().sum(),
            cpu_share: if seconds > 0.0 {
                ns / 1e9 / seconds
            } else {
                0.0
            },
        }
    }

    /// The budget, as a share of one CPU.
    pub fn max_share(&self) -> Option<f64> {
        self.max_share
    }

    /// How long since the last interval tick.
    pub fn tick_age(&self) -> Duration {
        self.tick_start.elapsed()
    }

    /// The estimate since the last interval tick, which this call makes the last.
    pub fn close_tick(&mut self) -> Estimate {
        let e = self.estimate(&self.tick, self.tick_start.elapsed().as_secs_f64());
        self.tick.iter_mut().for_each(|t| *t = 0);
        self.tick_start = Instant::now();
        e
    }

    /// The whole session so far.
    pub fn overall(&self) -> Estimate {
        self.estimate(&self.total, self.started.elapsed().as_secs_f64())
    }

    /// Ends the current window: its estimate, and (with a budget it exceeded) the functions whose
    /// probes must go to bring it back under, dearest first, until what is left fits. The meter
    /// forgets them (their hits no longer come once the caller removes them).
    pub fn close_window(&mut self) -> (Estimate, Vec<OverBudget>) {
        let seconds = self.window_start.elapsed().as_secs_f64();
        let estimate = self.estimate(&self.window, seconds);
        let mut over = Vec::new();
        if let Some(max) = self.max_share.filter(|_| seconds > 0.0) {
            // Per function: every probe of it goes together (an entry without its return would
            // leave latencies unpaired).
            let mut by_function: Vec<OverBudget> = Vec::new();
            for (i, &h) in self.window.iter().enumerate() {
                if self.removed[i] || h == 0 {
                    continue;
                }
                let share = h as f64 * self.cost_ns[i] / 1e9 / seconds;
                let f = self.function_of[i];
                match by_function.iter_mut().find(|o| o.function == f) {
                    Some(o) => {
                        o.probes.push(i);
                        o.cpu_share += share;
                        o.hits_per_s += h as f64 / seconds;
                    }
                    None => by_function.push(OverBudget {
                        function: f,
                        probes: vec![i],
                        hits_per_s: h as f64 / seconds,
                        cpu_share: share,
                    }),
                }
            }
            by_function.sort_by(|a, b| b.cpu_share.total_cmp(&a.cpu_share));
            let mut left = estimate.cpu_share;
            for o in by_function {
                if left <= max {
                    break;
                }
                left -= o.cpu_share;
                over.push(o);
            }
            // The rest of each removed function's probes (those without hits in the window).
            for o in &mut over {
                for (i, f) in self.function_of.iter().enumerate() {
                    if *f == o.function && !o.probes.contains(&i) {
                        o.probes.push(i);
                    }
                }
                o.probes.sort_unstable();
                for &p in &o.probes {
                    self.removed[p] = true;
                }
            }
        }
        self.window.iter_mut().for_each(|w| *w = 0);
        self.window_start = Instant::now();
        (estimate, over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FunctionPlan, PairingKey, Returns};
    use netprobe_core::abi::CallingConvention;
    use netprobe_core::addr::FileOffset;
    use proptest::prelude::*;

    fn plan(functions: usize) -> ProbePlan {
        let mut plan = ProbePlan::new(false);
        for i in 0..functions {
            plan.add_function(FunctionPlan {
                name: format!("f{i}"),
                image: "/bin/x".into(),
                probe_path: "/bin/x".into(),
                function_offset: FileOffset(0x1000 + i as u64 * 16),
                entry_offsets: vec![FileOffset(0x1000 + i as u64 * 16)],
                returns: Returns::None,
                convention: CallingConvention::SysV,
                args: vec![],
                ret: None,
                pairing: PairingKey::Thread,
                symbol: Some(format!("f{i}")),
            })
            .unwrap();
        }
        plan
    }

    #[test]
    fn shares_are_hits_times_cost_over_time() {
        let p = plan(2);
        let mut m = OverheadMeter::new(&p, vec![1000.0, 10_000.0], None);
        m.observe(0, 1000);
        m.observe(1, 10);
        let e = m.estimate(&m.window, 1.0);
        // 1000 x 1 µs + 10 x 10 µs = 1.1 ms of CPU in one second.
        assert!((e.cpu_share - 0.0011).abs() < 1e-12);
        assert_eq!(e.hits, 1010);
        assert_eq!(e.describe(), "0.11% of a CPU (1.0k hits/s)");
    }

    #[test]
    fn percentages_keep_the_digits_that_matter() {
        assert_eq!(percent(1.634), "163%");
        assert_eq!(percent(0.014), "1.4%");
        assert_eq!(percent(0.00012), "0.012%");
    }

    proptest! {
        /// What is left after the functions over budget are taken out fits the budget, and no
        /// function is taken out when the whole already fits.
        #[test]
        fn what_is_left_fits(hits in proptest::collection::vec(0u64..2_000_000, 1..8), max in 0.0001f64..2.0) {
            let p = plan(hits.len());
            let costs: Vec<f64> = (0..hits.len()).map(|i| 500.0 + 700.0 * i as f64).collect();
            let mut m = OverheadMeter::new(&p, costs.clone(), Some(max));
            for (i, &h) in hits.iter().enumerate() {
                m.observe(i, h);
            }
            // A window of a known length: the shares scale with it, the decision must not
            // depend on how it was measured.
            m.window_start = Instant::now() - Duration::from_secs(1);
            let (est, over) = m.close_window();
            let taken: f64 = over.iter().map(|o| o.cpu_share).sum();
            if est.cpu_share <= max {
                prop_assert!(over.is_empty());
            } else {
                prop_assert!(est.cpu_share - taken <= max + 1e-9);
            }
            // Dearest first.
            for w in over.windows(2) {
                prop_assert!(w[0].cpu_share >= w[1].cpu_share);
            }
        }
    }
}
