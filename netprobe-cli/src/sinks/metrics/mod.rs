//! `--metrics ADDR:PORT`: the hits of `count` and `latency` as Prometheus metrics, served on
//! `/metrics` (`http.rs`) beside the text output.
//!
//! [`Metrics`] holds one series per (function, image, pid, comm, container); [`Exported`] is a
//! sink decorator that feeds it from the hits the runner hands to the command's own sink. A
//! session that re-attaches to a restarted target ([`Metrics::rebind`]) keeps its series: a
//! function is known by name and image (the path as the process names it, without
//! `/proc/PID/root`), so the new process's series differ from the old one's by pid only. The
//! exposition is written by the official Rust client, `prometheus-client` (OpenMetrics text
//! format, <https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md>),
//! through a [`Collector`] that encodes the series in a stable order:
//!
//! - `netprobe_calls_total{function,image,pid,comm,container}`: calls (entry hits; return hits
//!   of return-only probes), as `netprobe count` counts them;
//! - `netprobe_call_duration_seconds{function,image,pid,comm,container}` (`latency`): a classic
//!   histogram
//!   whose `le` bounds are the upper ends of the latency sink's log2 buckets
//!   ([`super::latency::bucket_bounds`]: `(2^(i+1) - 1)` ns), so each bucket holds exactly
//!   the calls of the text histogram's rows up to it;
//! - `container`: the container's name (Docker's metadata or Engine API), else its short id,
//!   from the process's cgroup (`/proc/PID/cgroup`); empty for a process on the host;
//! - `netprobe_lost_events_total`, `netprobe_probes_attached`, and
//!   `netprobe_dropped_series_total`: hits not exported because their series would pass the cap
//!   (memory stays bounded whatever the label cardinality; said once on stderr).

pub mod basic_auth;
pub mod http;
pub mod web_config;

use super::latency::{bucket_bounds, bucket_of};
use super::{Counter, Flow, Latency, Sink, TaskInfo};
use crate::backend::Lost;
use crate::plan::{FunctionId, Hit, ProbePlan};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::collections::{BTreeMap, HashMap};
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

/// Values per function (an index into [`State::functions`]), pid, comm and container (nested, so
/// a hit finds its series without allocating).
#[derive(Debug)]
#[allow(clippy::type_complexity)]
struct PerTask<T>(BTreeMap<usize, BTreeMap<Option<u32>, BTreeMap<String, BTreeMap<String, T>>>>);

impl<T> Default for PerTask<T> {
    fn default() -> Self {
        PerTask(BTreeMap::new())
    }
}

impl<T> PerTask<T> {
    fn get_mut(&mut self, f: usize, task: &Task<'_>) -> Option<&mut T> {
        self.0
            .get_mut(&f)?
            .get_mut(&task.pid)?
            .get_mut(task.comm)?
            .get_mut(task.container)
    }

    fn insert(&mut self, f: usize, task: &Task<'_>, v: T) {
        self.0
            .entry(f)
            .or_default()
            .entry(task.pid)
            .or_default()
            .entry(task.comm.to_string())
            .or_default()
            .insert(task.container.to_string(), v);
    }

    /// Every series, ordered by function (first-seen order), pid, comm, container.
    fn iter(&self) -> impl Iterator<Item = (usize, Task<'_>, &T)> {
        self.0.iter().flat_map(|(&f, pids)| {
            pids.iter().flat_map(move |(&pid, comms)| {
                comms.iter().flat_map(move |(comm, containers)| {
                    containers.iter().map(move |(container, v)| {
                        (
                            f,
                            Task {
                                pid,
                                comm,
                                container,
                            },
                            v,
                        )
                    })
                })
            })
        })
    }
}

/// The task labels of a series: the process (`None` when netprobe could not find it), its
/// command name and its container (empty on the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task<'a> {
    pub pid: Option<u32>,
    pub comm: &'a str,
    pub container: &'a str,
}

#[derive(Debug, Default)]
struct State {
    /// (function name, image label) of every function seen by any attached plan, in first-seen
    /// order; series refer to them by index.
    functions: Vec<(String, String)>,
    /// The attached plan's [`FunctionId`]s → index in `functions`.
    by_plan: Vec<usize>,
    /// Probes attached now (0 while a restarted target is awaited).
    probes: u64,
    /// Events lost by the sessions before the attached one.
    lost_before: u64,
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
    max_series: usize,
    state: Mutex<State>,
}

impl Metrics {
    /// Metrics for the functions of `plan`, with `probes` probes attached, keeping at most
    /// `max_series` series.
    pub fn new(plan: &ProbePlan, probes: usize, max_series: usize) -> Arc<Metrics> {
        let m = Arc::new(Metrics {
            max_series,
            state: Mutex::new(State::default()),
        });
        m.rebind(plan, probes);
        m
    }

    /// A new session's `plan` (a restarted target, re-resolved) with `probes` probes: its
    /// functions join the known ones by name and image, so their series continue; what the
    /// previous session lost stays counted.
    pub fn rebind(&self, plan: &ProbePlan, probes: usize) {
        let mut st = self.state();
        let st = &mut *st;
        st.lost_before = st.lost;
        st.probes = probes as u64;
        st.by_plan = vec![usize::MAX; plan.functions.len()];
        for f in &plan.functions {
            let key = (f.name.clone(), image_label(&f.image));
            let index = match st.functions.iter().position(|k| *k == key) {
                Some(i) => i,
                None => {
                    st.functions.push(key);
                    st.functions.len() - 1
                }
            };
            if let Some(slot) = st.by_plan.get_mut(f.id.0 as usize) {
                *slot = index;
            }
        }
    }

    /// The session's probes are gone (its target exited; a new one is awaited).
    pub fn detached(&self) {
        self.state().probes = 0;
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

    /// One call of the attached plan's `function` by `task`.
    pub fn call(&self, function: FunctionId, task: &Task<'_>) {
        let mut st = self.state();
        let st = &mut *st;
        let Some(&f) = st.by_plan.get(function.0 as usize) else {
            return;
        };
        if let Some(n) = st.calls.get_mut(f, task) {
            *n += 1;
        } else if self.admit(st, 1) {
            st.calls.insert(f, task, 1);
        }
    }

    /// One completed call of the attached plan's `function` by `task` that took `ns`
    /// nanoseconds.
    pub fn duration(&self, function: FunctionId, task: &Task<'_>, ns: u64) {
        let mut st = self.state();
        let st = &mut *st;
        let Some(&f) = st.by_plan.get(function.0 as usize) else {
            return;
        };
        if let Some(d) = st.durations.get_mut(f, task) {
            d.record(ns);
        } else if self.admit(st, HISTOGRAM_SERIES) {
            let mut d = Durations::default();
            d.record(ns);
            st.durations.insert(f, task, d);
        }
    }

    /// What the attached session lost so far (a running total; never goes down), added to what
    /// earlier sessions lost.
    pub fn set_lost(&self, lost: Lost) {
        let mut st = self.state();
        st.lost = st.lost.max(st.lost_before.saturating_add(lost.counted));
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
}

/// The labels of a series.
fn labels<'a>(
    st: &'a State,
    function: usize,
    pid: &'a str,
    task: &Task<'a>,
) -> [(&'static str, &'a str); 5] {
    let (name, image) = st
        .functions
        .get(function)
        .map_or(("", ""), |(n, i)| (n.as_str(), i.as_str()));
    [
        ("function", name),
        ("image", image),
        ("pid", pid),
        ("comm", task.comm),
        ("container", task.container),
    ]
}

/// The `image` label of a function's file: the path as the process names it, without the
/// `/proc/PID/root` through which netprobe opened a container's file (proc(5), `/proc/pid/root`),
/// so a restarted container's series keep their labels.
pub fn image_label(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    if let Some(rest) = text.strip_prefix("/proc/") {
        if let Some((pid, inside)) = rest.split_once("/root/") {
            if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
                return format!("/{inside}");
            }
        }
    }
    text.into_owned()
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
            for (f, task, n) in st.calls.iter() {
                let pid = pid_text(task.pid);
                let labels = labels(&st, f, &pid, &task);
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
            for (f, task, d) in st.durations.iter() {
                {
                    let pid = pid_text(task.pid);
                    let labels = labels(&st, f, &pid, &task);
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
            .encode_gauge(&st.probes)?;
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
    /// The command name (`/proc/PID/comm`, its main thread's name) and container label of each
    /// process, read once (at most [`MAX_CACHED_TASKS`] kept): the `comm` label names the
    /// process, so thread names add no series.
    processes: HashMap<u32, (String, String)>,
    /// The `container` label by container id: names already known (`--container`) or looked up
    /// once.
    containers: HashMap<String, String>,
}

/// The `container` label of process `pid`: its container's name (Docker's metadata, else the
/// Docker Engine API), else the container's short id (12 hex digits, as `docker ps` shows it);
/// empty for a process that is not in a container. `names` caches the answer by container id.
fn container_label(pid: u32, names: &mut HashMap<String, String>) -> String {
    let dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let Some(c) = netprobe_core::inventory::container_of_process(&dir) else {
        return String::new();
    };
    if let Some(n) = names.get(&c.id) {
        return n.clone();
    }
    let label = c
        .name
        .clone()
        .or_else(|| {
            (c.engine == "docker")
                .then(|| {
                    netprobe_core::ipc::docker::inspect(
                        &netprobe_core::ipc::docker::socket_path(),
                        &c.id,
                    )
                    .ok()
                })
                .flatten()
                .map(|i| i.name)
        })
        .unwrap_or_else(|| c.id.chars().take(12).collect());
    if names.len() > MAX_CACHED_TASKS {
        names.clear();
    }
    names.insert(c.id, label.clone());
    label
}

impl<'a> Exported<'a> {
    /// Around `count`'s sink.
    pub fn counting(inner: &'a mut dyn Sink, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Calls(inner),
            metrics,
            tasks,
            processes: Default::default(),
            containers: Default::default(),
        }
    }

    /// Around `latency`'s sink.
    pub fn timing(inner: &'a mut Latency, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Latency(inner),
            metrics,
            tasks,
            processes: Default::default(),
            containers: Default::default(),
        }
    }
}

impl Exported<'_> {
    /// Container `id` is labelled `name` (what `--container` already asked the engine).
    pub fn known_container(mut self, id: &str, name: &str) -> Self {
        self.containers.insert(id.to_string(), name.to_string());
        self
    }
}

impl Sink for Exported<'_> {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        // Threads and processes come and go in a long run: forget what is cached beyond a
        // bound (memory stays bounded), and look it up again.
        self.tasks.bound_cache(MAX_CACHED_TASKS);
        let pid = self.tasks.process_of(&hit);
        if self.processes.len() > MAX_CACHED_TASKS {
            self.processes.clear();
        }
        let containers = &mut self.containers;
        let (comm, container) = match pid {
            Some(p) => {
                let (comm, container) = self.processes.entry(p).or_insert_with(|| {
                    let comm = std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .map(|c| c.trim_end_matches('\n').to_string())
                        .unwrap_or_else(|_| hit.comm.clone().unwrap_or_default());
                    (comm, container_label(p, containers))
                });
                (comm.as_str(), container.as_str())
            }
            None => (hit.comm.as_deref().unwrap_or(""), ""),
        };
        let task = Task {
            pid,
            comm,
            container,
        };
        if Counter::counts_hit(plan, &hit) {
            self.metrics.call(hit.function, &task);
        }
        match &mut self.inner {
            Inner::Calls(s) => s.hit(plan, hit),
            Inner::Latency(l) => {
                let (flow, took) = l.record(&hit);
                if let Some(ns) = took {
                    self.metrics.duration(hit.function, &task, ns);
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

    fn task<'a>(pid: Option<u32>, comm: &'a str, container: &'a str) -> Task<'a> {
        Task {
            pid,
            comm,
            container,
        }
    }

    fn hit(function: u32, role: Role, ts_ns: u64, tid: u32) -> Hit {
        Hit {
            ts_ns,
            tid,
            pid: None,
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
            m.call(FunctionId(0), &task(Some(4242), "server", ""));
        }
        m.call(FunctionId(0), &task(Some(4343), "wor\"ker", "web"));
        m.call(FunctionId(1), &task(None, "", ""));
        for ns in [1_500, 1_023, 1_024, 200, 70_000_000_000] {
            m.duration(FunctionId(0), &task(Some(4242), "server", ""), ns);
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
            m.call(FunctionId(0), &task(Some(pid), "x", ""));
            m.call(FunctionId(0), &task(Some(pid), "x", ""));
        }
        m.duration(FunctionId(0), &task(Some(1), "x", ""), 10);
        let text = Metrics::exposition(&m.registry());
        assert_eq!(text.matches("netprobe_calls_total{").count(), 3, "{text}");
        // Known series keep counting; 7 new pids twice each, and the histogram, were dropped.
        assert!(
            text.contains("pid=\"0\",comm=\"x\",container=\"\"} 2"),
            "{text}"
        );
        assert!(text.contains("netprobe_dropped_series_total 15"), "{text}");
        assert!(
            !text.contains("netprobe_call_duration_seconds_count{"),
            "{text}"
        );
    }

    /// A restarted target's plan (another process, its image seen through another
    /// `/proc/PID/root`, functions in another order) continues the same series: counters keep
    /// their function and image labels and grow; lost events add up over sessions.
    #[test]
    fn a_rebound_plan_continues_the_series() {
        let first =
            crate::sinks::test_plan(&["main.handle", "main.other"], "/proc/100/root/app/srv");
        let m = Metrics::new(&first, 2, 100);
        m.call(FunctionId(0), &task(Some(100), "srv", "web"));
        m.call(FunctionId(1), &task(Some(100), "srv", "web"));
        m.set_lost(Lost {
            counted: 2,
            unknown_amount: false,
        });
        m.detached();
        assert!(Metrics::exposition(&m.registry()).contains("netprobe_probes_attached 0"));
        let second = crate::sinks::test_plan(
            &["main.other", "main.handle", "main.new"],
            "/proc/200/root/app/srv",
        );
        m.rebind(&second, 3);
        m.call(FunctionId(0), &task(Some(200), "srv", "web"));
        m.call(FunctionId(0), &task(Some(200), "srv", "web"));
        m.call(FunctionId(2), &task(Some(200), "srv", "web"));
        m.set_lost(Lost {
            counted: 1,
            unknown_amount: false,
        });
        let text = Metrics::exposition(&m.registry());
        let series = |f: &str, pid: u32| {
            format!("netprobe_calls_total{{function=\"{f}\",image=\"/app/srv\",pid=\"{pid}\",comm=\"srv\",container=\"web\"}}")
        };
        assert!(
            text.contains(&format!("{} 1", series("main.handle", 100))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", series("main.other", 100))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 2", series("main.other", 200))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", series("main.new", 200))),
            "{text}"
        );
        assert!(
            !text.contains("pid=\"200\",comm=\"srv\",container=\"web\"} 0"),
            "{text}"
        );
        assert!(text.contains("netprobe_lost_events_total 3"), "{text}");
        assert!(text.contains("netprobe_probes_attached 3"), "{text}");
    }

    #[test]
    fn image_labels_leave_out_the_proc_root() {
        let l = |p: &str| image_label(std::path::Path::new(p));
        assert_eq!(l("/proc/4242/root/app/sampleapp"), "/app/sampleapp");
        assert_eq!(l("/usr/lib/libc.so.6"), "/usr/lib/libc.so.6");
        assert_eq!(l("/proc/self/root/x"), "/proc/self/root/x");
        assert_eq!(l("/proc//root/x"), "/proc//root/x");
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
            "{{function=\"f\",image=\"/srv/app\",pid=\"{me}\",comm=\"{}\",container=\"{}\"}}",
            comm.trim_end(),
            container_label(me, &mut HashMap::new())
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
        /// An image label never names `/proc/PID/root`, and labelling twice changes nothing.
        #[test]
        fn image_labels_are_stable(pid in 1u32..99_999, inside in "(/[a-z._-]{1,8}){1,4}") {
            let label = image_label(std::path::Path::new(&format!("/proc/{pid}/root{inside}")));
            prop_assert_eq!(&label, &inside);
            prop_assert_eq!(image_label(std::path::Path::new(&label)), label);
        }

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
                m.duration(FunctionId(0), &task(Some(1), "c", ""), d);
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
