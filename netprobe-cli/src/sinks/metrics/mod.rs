//! `--metrics ADDR:PORT`: the hits of `count` and `latency` as Prometheus metrics, served on
//! `/metrics` (`http.rs`) beside the text output.
//!
//! [`Metrics`] holds one series per (function, image, pid, comm); [`Exported`] is a sink
//! decorator that feeds it from the hits the runner hands to the command's own sink. The
//! exposition is written by the official Rust client, `prometheus-client` (OpenMetrics text
//! format, <https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md>),
//! through a [`Collector`] that encodes the series in a stable order:
//!
//! - `netprobe_calls_total{function,image,pid,comm}`: calls (entry hits; return hits of
//!   return-only probes), as `netprobe count` counts them;
//! - `netprobe_call_duration_seconds{function,image,pid,comm}` (`latency`): a classic histogram
//!   whose `le` bounds are the upper ends of the latency sink's log2 buckets
//!   ([`super::latency::bucket_bounds`]: `(2^(i+1) - 1)` ns), so each bucket holds exactly the
//!   calls of the text histogram's rows up to it;
//! - `netprobe_lost_events_total`, `netprobe_probes_attached`, and
//!   `netprobe_dropped_series_total`: hits not exported because their series would pass the cap
//!   (memory stays bounded whatever the label cardinality; said once on stderr).

pub mod http;

use super::latency::{bucket_bounds, bucket_of};
use super::{Counter, Flow, Latency, Sink, TaskInfo};
use crate::backend::Lost;
use crate::plan::{FunctionId, Hit, ProbePlan};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The default cap on exported series (`--metrics-max-series`).
pub const DEFAULT_MAX_SERIES: usize = 10_000;

/// The log2 buckets the histogram exports: bucket 7 (durations up to 255 ns, the lower buckets
/// merged into it: a uprobe pair alone costs more) to bucket 35 (up to 2^36 - 1 ns, 68.7 s);
/// longer calls are in `+Inf`.
const FIRST_BUCKET: usize = 7;
const LAST_BUCKET: usize = 35;

/// Threads (pid lookups) and processes (names) an exporter remembers at most.
const MAX_CACHED_TASKS: usize = 65_536;

/// Series a histogram costs in the exposition: its buckets, `+Inf`, `_sum` and `_count`.
const HISTOGRAM_SERIES: usize = LAST_BUCKET - FIRST_BUCKET + 1 + 3;

/// Durations of one label set's completed calls.
#[derive(Clone, Debug, Default)]
struct Durations {
    /// Calls per exported bucket (non-cumulative); the last entry is `+Inf`.
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
}

impl Durations {
    fn record(&mut self, ns: u64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; LAST_BUCKET - FIRST_BUCKET + 2];
        }
        let i = bucket_of(ns).clamp(FIRST_BUCKET, LAST_BUCKET + 1) - FIRST_BUCKET;
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
    }
}

/// Values per function, pid and comm (nested, so a hit finds its series without allocating).
#[derive(Debug)]
struct PerTask<T>(BTreeMap<FunctionId, BTreeMap<Option<u32>, BTreeMap<String, T>>>);

impl<T> Default for PerTask<T> {
    fn default() -> Self {
        PerTask(BTreeMap::new())
    }
}

impl<T> PerTask<T> {
    fn get_mut(&mut self, f: FunctionId, pid: Option<u32>, comm: &str) -> Option<&mut T> {
        self.0.get_mut(&f)?.get_mut(&pid)?.get_mut(comm)
    }

    fn insert(&mut self, f: FunctionId, pid: Option<u32>, comm: &str, v: T) {
        self.0
            .entry(f)
            .or_default()
            .entry(pid)
            .or_default()
            .insert(comm.to_string(), v);
    }

    /// Every series, ordered by function (plan order), pid, comm.
    fn iter(&self) -> impl Iterator<Item = (FunctionId, Option<u32>, &str, &T)> {
        self.0.iter().flat_map(|(&f, pids)| {
            pids.iter().flat_map(move |(&pid, comms)| {
                comms.iter().map(move |(c, v)| (f, pid, c.as_str(), v))
            })
        })
    }
}

#[derive(Debug, Default)]
struct State {
    calls: PerTask<u64>,
    durations: PerTask<Durations>,
    /// Series in `calls` and `durations`, as the exposition counts them.
    series: usize,
    lost: u64,
    dropped: u64,
    warned: bool,
}

/// The exported metrics of one session; shared between the sink and the HTTP server thread.
#[derive(Debug)]
pub struct Metrics {
    /// (function name, image) by [`FunctionId`] index.
    functions: Vec<(String, String)>,
    probes: u64,
    max_series: usize,
    state: Mutex<State>,
}

impl Metrics {
    /// Metrics for the functions of `plan`, with `probes` probes attached, keeping at most
    /// `max_series` series.
    pub fn new(plan: &ProbePlan, probes: usize, max_series: usize) -> Arc<Metrics> {
        let mut functions = vec![(String::new(), String::new()); plan.functions.len()];
        for f in &plan.functions {
            if let Some(slot) = functions.get_mut(f.id.0 as usize) {
                *slot = (f.name.clone(), f.image.to_string_lossy().into_owned());
            }
        }
        Arc::new(Metrics {
            functions,
            probes: probes as u64,
            max_series,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain counters behind: keep serving them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a new series of `cost` series fits; when not, counts the drop and says so once.
    fn admit(&self, state: &mut State, cost: usize) -> bool {
        if state.series + cost <= self.max_series {
            state.series += cost;
            return true;
        }
        state.dropped += 1;
        if !state.warned {
            state.warned = true;
            eprintln!(
                "netprobe: metrics: {} series reached; hits of new (function, pid, comm) label sets are not exported from now on (counted in netprobe_dropped_series_total); raise --metrics-max-series or narrow the probes",
                self.max_series
            );
        }
        false
    }

    /// One call of `function` by `task`.
    pub fn call(&self, function: FunctionId, pid: Option<u32>, comm: &str) {
        let mut st = self.state();
        let st = &mut *st;
        if let Some(n) = st.calls.get_mut(function, pid, comm) {
            *n += 1;
        } else if self.admit(st, 1) {
            st.calls.insert(function, pid, comm, 1);
        }
    }

    /// One completed call of `function` by `task` that took `ns` nanoseconds.
    pub fn duration(&self, function: FunctionId, pid: Option<u32>, comm: &str, ns: u64) {
        let mut st = self.state();
        let st = &mut *st;
        if let Some(d) = st.durations.get_mut(function, pid, comm) {
            d.record(ns);
        } else if self.admit(st, HISTOGRAM_SERIES) {
            let mut d = Durations::default();
            d.record(ns);
            st.durations.insert(function, pid, comm, d);
        }
    }

    /// What the backend lost so far (a running total; never goes down).
    pub fn set_lost(&self, lost: Lost) {
        let mut st = self.state();
        st.lost = st.lost.max(lost.counted);
    }

    /// A registry holding these metrics (what the HTTP server encodes).
    pub fn registry(self: &Arc<Metrics>) -> Registry {
        let mut r = Registry::default();
        r.register_collector(Box::new(Arc::clone(self)));
        r
    }

    /// The exposition text, as `/metrics` serves it.
    pub fn exposition(registry: &Registry) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would be a bug in our labels.
        if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
            out.clear();
        }
        out
    }

    /// The labels of a series.
    fn labels<'a>(
        &'a self,
        function: FunctionId,
        pid: &'a str,
        comm: &'a str,
    ) -> [(&'static str, &'a str); 4] {
        let (name, image) = self
            .functions
            .get(function.0 as usize)
            .map_or(("", ""), |(n, i)| (n.as_str(), i.as_str()));
        [
            ("function", name),
            ("image", image),
            ("pid", pid),
            ("comm", comm),
        ]
    }
}

/// The text a label holds for a pid (`unknown` when netprobe could not find the process).
fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
}

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let st = self.state();
        {
            let mut m = encoder.encode_descriptor(
                "netprobe_calls",
                "Calls per probed function (entry hits; return hits of return-only probes).",
                None,
                MetricType::Counter,
            )?;
            for (f, pid, comm, n) in st.calls.iter() {
                let pid = pid_text(pid);
                let labels = self.labels(f, &pid, comm);
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, u64, u64>(n, None)?;
            }
        }
        if !st.durations.0.is_empty() {
            let mut m = encoder.encode_descriptor(
                "netprobe_call_duration",
                "Durations of completed calls (entry to return); le bounds are the log2 buckets of netprobe latency.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (f, pid, comm, d) in st.durations.iter() {
                {
                    let pid = pid_text(pid);
                    let labels = self.labels(f, &pid, comm);
                    let buckets: Vec<(f64, u64)> = d
                        .buckets
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            let b = FIRST_BUCKET + i;
                            let le = if b > LAST_BUCKET {
                                f64::INFINITY
                            } else {
                                bucket_bounds(b).1 as f64 / 1e9
                            };
                            (le, n)
                        })
                        .collect();
                    m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                        d.sum_ns as f64 / 1e9,
                        d.count,
                        &buckets,
                        None,
                    )?;
                }
            }
        }
        encoder
            .encode_descriptor(
                "netprobe_lost_events",
                "Hits the kernel lost (ring buffer full) or that did not decode.",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, u64, u64>(&st.lost, None)?;
        encoder
            .encode_descriptor(
                "netprobe_dropped_series",
                "Hits not exported because their new series would pass the series cap (--metrics-max-series).",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, u64, u64>(&st.dropped, None)?;
        encoder
            .encode_descriptor(
                "netprobe_probes_attached",
                "Uprobes this session placed.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&self.probes)?;
        Ok(())
    }
}

/// What the decorated sink is, so [`Exported`] knows where durations come from.
enum Inner<'a> {
    /// `count`: any sink; calls are counted as [`Counter`] counts them.
    Calls(&'a mut dyn Sink),
    /// `latency`: the latency sink pairs entries with returns; its durations are exported too.
    Latency(&'a mut Latency),
}

/// A sink decorator: exports every hit to [`Metrics`], then hands it to the command's sink.
pub struct Exported<'a> {
    inner: Inner<'a>,
    metrics: Arc<Metrics>,
    tasks: TaskInfo,
    /// The command name of each process (`/proc/PID/comm`, its main thread's name), read once
    /// (at most [`MAX_CACHED_TASKS`] kept):
    /// the `comm` label names the process, so thread names add no series.
    comms: std::collections::HashMap<u32, String>,
}

impl<'a> Exported<'a> {
    /// Around `count`'s sink.
    pub fn counting(inner: &'a mut dyn Sink, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Calls(inner),
            metrics,
            tasks,
            comms: Default::default(),
        }
    }

    /// Around `latency`'s sink.
    pub fn timing(inner: &'a mut Latency, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Latency(inner),
            metrics,
            tasks,
            comms: Default::default(),
        }
    }
}

impl Sink for Exported<'_> {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        // Threads and processes come and go in a long run: forget what is cached beyond a
        // bound (memory stays bounded), and look it up again.
        self.tasks.bound_cache(MAX_CACHED_TASKS);
        let pid = self.tasks.pid_of(hit.tid);
        if self.comms.len() > MAX_CACHED_TASKS {
            self.comms.clear();
        }
        let comm = match pid {
            Some(p) => self
                .comms
                .entry(p)
                .or_insert_with(|| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .map(|c| c.trim_end_matches('\n').to_string())
                        .unwrap_or_else(|_| hit.comm.clone().unwrap_or_default())
                })
                .as_str(),
            None => hit.comm.as_deref().unwrap_or(""),
        };
        if Counter::counts_hit(plan, &hit) {
            self.metrics.call(hit.function, pid, comm);
        }
        match &mut self.inner {
            Inner::Calls(s) => s.hit(plan, hit),
            Inner::Latency(l) => {
                let (flow, took) = l.record(&hit);
                if let Some(ns) = took {
                    self.metrics.duration(hit.function, pid, comm, ns);
                }
                flow
            }
        }
    }

    fn tick(&mut self, plan: &ProbePlan, lost: Lost) -> Flow {
        self.metrics.set_lost(lost);
        match &mut self.inner {
            Inner::Calls(s) => s.tick(plan, lost),
            Inner::Latency(l) => l.tick(plan, lost),
        }
    }

    fn idle(&mut self, plan: &ProbePlan) {
        match &mut self.inner {
            Inner::Calls(s) => s.idle(plan),
            Inner::Latency(l) => l.idle(plan),
        }
    }

    fn lost_so_far(&mut self, plan: &ProbePlan, lost: Lost) {
        self.metrics.set_lost(lost);
        match &mut self.inner {
            Inner::Calls(s) => s.lost_so_far(plan, lost),
            Inner::Latency(l) => l.lost_so_far(plan, lost),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Role;
    use proptest::prelude::*;

    fn plan(names: &[&str]) -> ProbePlan {
        crate::sinks::test_plan(names, "/srv/app")
    }

    fn hit(function: u32, role: Role, ts_ns: u64, tid: u32) -> Hit {
        Hit {
            ts_ns,
            tid,
            probe: 0,
            function: FunctionId(function),
            role,
            args: vec![],
            pair_key: u64::from(tid),
            comm: None,
            user_stack: None,
        }
    }

    /// The exposition of a fixed set of calls: two functions, two processes, durations in
    /// several buckets (one past the last bound, in `+Inf`), a label value that needs escaping.
    #[test]
    fn exposition_of_known_calls() {
        let m = Metrics::new(&plan(&["main.handle", "np_add"]), 3, DEFAULT_MAX_SERIES);
        for _ in 0..3 {
            m.call(FunctionId(0), Some(4242), "server");
        }
        m.call(FunctionId(0), Some(4343), "wor\"ker");
        m.call(FunctionId(1), None, "");
        for ns in [1_500, 1_023, 1_024, 200, 70_000_000_000] {
            m.duration(FunctionId(0), Some(4242), "server", ns);
        }
        m.set_lost(Lost {
            counted: 7,
            unknown_amount: false,
        });
        let text = Metrics::exposition(&m.registry());
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_series_cap_holds_and_drops_are_counted() {
        // Room for 3 call series, or one histogram (HISTOGRAM_SERIES) and change.
        let m = Metrics::new(&plan(&["f"]), 1, 3);
        for pid in 0..10 {
            m.call(FunctionId(0), Some(pid), "x");
            m.call(FunctionId(0), Some(pid), "x");
        }
        m.duration(FunctionId(0), Some(1), "x", 10);
        let text = Metrics::exposition(&m.registry());
        assert_eq!(text.matches("netprobe_calls_total{").count(), 3, "{text}");
        // Known series keep counting; 7 new pids twice each, and the histogram, were dropped.
        assert!(text.contains("pid=\"0\",comm=\"x\"} 2"), "{text}");
        assert!(text.contains("netprobe_dropped_series_total 15"), "{text}");
        assert!(
            !text.contains("netprobe_call_duration_seconds_count{"),
            "{text}"
        );
    }

    #[test]
    fn lost_events_never_go_down() {
        let m = Metrics::new(&plan(&["f"]), 1, 10);
        for counted in [5, 3, 9] {
            m.set_lost(Lost {
                counted,
                unknown_amount: false,
            });
        }
        assert!(Metrics::exposition(&m.registry()).contains("netprobe_lost_events_total 9"));
    }

    /// Through the decorator on our own process: pid and comm come from /proc, calls are counted
    /// as `count` counts them, and latency's pairs become the histogram.
    #[test]
    fn the_decorator_exports_what_the_sinks_see() {
        let p = plan(&["f"]);
        let me = std::process::id();
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        let m = Metrics::new(&p, 2, 100);
        let mut lat = Latency::default();
        {
            let mut s = Exported::timing(&mut lat, m.clone(), TaskInfo::new(None));
            for i in 0..4u64 {
                s.hit(&p, hit(0, Role::Entry, 1_000 + i * 10_000, me));
                s.hit(&p, hit(0, Role::Return, 1_000 + i * 10_000 + 3_000, me));
            }
        }
        assert_eq!(lat.total, 4);
        let text = Metrics::exposition(&m.registry());
        let labels = format!(
            "{{function=\"f\",image=\"/srv/app\",pid=\"{me}\",comm=\"{}\"}}",
            comm.trim_end()
        );
        assert!(
            text.contains(&format!("netprobe_calls_total{labels} 4")),
            "{text}"
        );
        assert!(
            text.contains(&format!("netprobe_call_duration_seconds_count{labels} 4")),
            "{text}"
        );
        assert!(text.contains("netprobe_probes_attached 2"), "{text}");
    }

    /// The cumulative count the exposition shows at bound `le` (seconds; parsed back, so the
    /// text round-trips to the same number).
    fn cumulative(text: &str, le: f64) -> u64 {
        text.lines()
            .filter_map(|l| {
                let rest = l.split_once("_bucket{le=\"")?.1;
                let (bound, _) = rest.split_once('"')?;
                let bound: f64 = if bound == "+Inf" {
                    f64::INFINITY
                } else {
                    bound.parse().ok()?
                };
                (bound == le).then(|| l.rsplit(' ').next()?.parse().ok())?
            })
            .next()
            .unwrap_or_else(|| panic!("no bucket le={le} in {text}"))
    }

    proptest! {
        /// Each exported bucket holds exactly the calls of the latency sink's log2 buckets up to
        /// its own: the cumulative count at `le` = (2^(b+1) - 1) ns equals the durations whose
        /// bucket is at most b, and `+Inf`, `_count` and `_sum` cover every call.
        #[test]
        fn buckets_match_the_latency_sink(durations in proptest::collection::vec(
            prop_oneof![0u64..5_000, 0u64..200_000_000_000, Just(1023), Just(1024), Just((1 << 36) - 1)],
            1..40,
        )) {
            let m = Metrics::new(&plan(&["f"]), 1, 1000);
            for &d in &durations {
                m.duration(FunctionId(0), Some(1), "c", d);
            }
            let text = Metrics::exposition(&m.registry());
            for b in FIRST_BUCKET..=LAST_BUCKET {
                let le = bucket_bounds(b).1 as f64 / 1e9;
                let want = durations.iter().filter(|&&d| bucket_of(d) <= b).count() as u64;
                prop_assert_eq!(cumulative(&text, le), want, "le {}", le);
            }
            prop_assert_eq!(cumulative(&text, f64::INFINITY), durations.len() as u64);
            let sum: u128 = durations.iter().map(|&d| u128::from(d)).sum();
            let shown: f64 = text.lines()
                .find(|l| l.starts_with("netprobe_call_duration_seconds_sum"))
                .and_then(|l| l.rsplit(' ').next()).unwrap().parse().unwrap();
            prop_assert!((shown - sum as f64 / 1e9).abs() <= 1e-9 * (sum as f64 / 1e9).max(1.0));
        }
    }
}
