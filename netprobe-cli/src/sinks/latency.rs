//! `netprobe latency`: pairs entries with returns and records each call's duration in an HDR
//! histogram (percentiles) and in log2 buckets (the bcc funclatency layout).

use super::places::{Place, Places};
use super::TaskInfo;
use super::{Flow, Format, LatencyReport, LatencyRow, LatencyStats, Sink};
use crate::backend::Lost;
use crate::plan::{FunctionId, Hit, ProbePlan, Role};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::rc::Rc;

/// `netprobe latency`: pairs entries with returns and records durations.
#[derive(Debug, Default)]
pub struct Latency {
    /// (function, pairing key) → entry times of calls in progress (a stack: recursion).
    pub open: HashMap<(FunctionId, u64), Vec<u64>>,
    /// Per container (`None`: the host, or not placed) and function: the durations.
    pub hist: BTreeMap<(Option<Rc<Place>>, FunctionId), Histogram<u64>>,
    /// log2 buckets: index i counts durations in [2^i, 2^(i+1)) ns (0 in bucket 0).
    pub log2: BTreeMap<(Option<Rc<Place>>, FunctionId), Vec<u64>>,
    /// With [`Latency::by_container`]: how each call's process is found and placed.
    pub places: Option<(TaskInfo, Places)>,
    /// Returns seen without an entry (the call began before the probes).
    pub unpaired_returns: u64,
    pub max_events: Option<u64>,
    pub total: u64,
}

/// The durations log2 bucket `i` holds, in ns, both ends included: [0, 1] for bucket 0, else
/// [2^i, 2^(i+1) - 1].
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    let lo = if i == 0 { 0 } else { 1u64 << i };
    let hi = 1u64
        .checked_shl(i as u32 + 1)
        .map_or(u64::MAX, |next| next - 1);
    (lo, hi)
}

/// The log2 bucket of a duration of `ns` nanoseconds (0 in bucket 0).
pub(crate) fn bucket_of(ns: u64) -> usize {
    if ns == 0 {
        0
    } else {
        63 - ns.leading_zeros() as usize
    }
}

impl Sink for Latency {
    fn hit(&mut self, _plan: &ProbePlan, hit: Hit) -> Flow {
        self.record(&hit).0
    }
}

impl Latency {
    /// Times the calls of processes in containers per container, each process found by
    /// `tasks` and placed by `places`.
    pub fn by_container(mut self, tasks: TaskInfo, places: Places) -> Latency {
        self.places = Some((tasks, places));
        self
    }

    /// Records a hit: an entry opens a call, a return completes the latest open call of its
    /// function and pairing key. Returns the flow and the duration of the call it completed.
    pub fn record(&mut self, hit: &Hit) -> (Flow, Option<u64>) {
        let key = (hit.function, hit.pair_key);
        match hit.role {
            Role::Entry => {
                self.open.entry(key).or_default().push(hit.ts_ns);
                (Flow::Continue, None)
            }
            Role::Return => {
                let Some(start) = self.open.get_mut(&key).and_then(|v| v.pop()) else {
                    self.unpaired_returns += 1;
                    return (Flow::Continue, None);
                };
                let d = hit.ts_ns.saturating_sub(start);
                let place = self
                    .places
                    .as_mut()
                    .and_then(|(tasks, places)| tasks.process_of(hit).and_then(|p| places.of(p)));
                let key = (place, hit.function);
                let h = self.hist.entry(key.clone()).or_insert_with(|| {
                    // 1 ns .. 1 hour at 3 significant digits; longer calls saturate at 1 hour.
                    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                        .expect("valid histogram bounds")
                });
                h.saturating_record(d);
                let b = self.log2.entry(key).or_insert_with(|| vec![0; 64]);
                b[bucket_of(d)] += 1;
                self.total += 1;
                let flow = if self.max_events.is_some_and(|m| self.total >= m) {
                    Flow::Enough
                } else {
                    Flow::Continue
                };
                (flow, Some(d))
            }
        }
    }
}

impl Latency {
    /// Per function of `plan`, in plan order: the statistics of its completed calls on the host
    /// (or not placed); then per container, per function with calls there.
    pub fn latency_report<'a>(&'a self, plan: &'a ProbePlan, lost: Lost) -> LatencyReport<'a> {
        let stats = |key: &(Option<Rc<Place>>, FunctionId)| {
            self.hist.get(key).map(|h| LatencyStats {
                calls: h.len(),
                p50_ns: h.value_at_quantile(0.5),
                p90_ns: h.value_at_quantile(0.9),
                p99_ns: h.value_at_quantile(0.99),
                max_ns: h.max(),
                log2: self.log2.get(key).map_or(&[][..], |b| b.as_slice()),
            })
        };
        let placed = self.hist.keys().any(|(p, _)| p.is_some());
        let mut functions: Vec<LatencyRow<'a>> = plan
            .functions
            .iter()
            .map(|f| (f.name.as_str(), None, stats(&(None, f.id))))
            // With calls in containers, a function without host calls is no row of its own.
            .filter(|(_, _, s)| !placed || s.is_some())
            .collect();
        for (place, id) in self.hist.keys().filter(|(p, _)| p.is_some()) {
            functions.push((
                plan.function(*id).name.as_str(),
                place.clone(),
                stats(&(place.clone(), *id)),
            ));
        }
        LatencyReport {
            functions,
            unpaired_returns: self.unpaired_returns,
            lost,
        }
    }

    /// Writes, per function, the log2 histogram (bcc funclatency layout) and percentiles.
    pub fn report(
        &self,
        plan: &ProbePlan,
        format: Format,
        lost: Lost,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        format
            .printer()
            .latency(out, &self.latency_report(plan, lost))?;
        out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bucket_edges() {
        assert_eq!(bucket_bounds(0), (0, 1));
        assert_eq!(bucket_bounds(9), (512, 1023));
        assert_eq!(bucket_bounds(63), (1 << 63, u64::MAX));
    }

    proptest! {
        /// Every duration lies in the bounds of its bucket.
        #[test]
        fn a_duration_lies_in_its_bucket(ns in any::<u64>()) {
            let (lo, hi) = bucket_bounds(bucket_of(ns));
            prop_assert!(lo <= ns && ns <= hi, "{ns} outside [{lo}, {hi}]");
        }
    }
}
