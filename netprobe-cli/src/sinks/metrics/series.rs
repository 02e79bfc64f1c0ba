//! The series of one session ([`Metrics`]): calls and durations per (function, image, pid, comm,
//! container), kept under a cap ([`DEFAULT_MAX_SERIES`] unless `--metrics-max-series` says
//! otherwise; a hit of a new label set past it is counted as dropped, not stored), and carried
//! over to a restarted target's plan ([`Metrics::rebind`]).

use crate::backend::Lost;
use crate::plan::{FunctionId, ProbePlan};
use crate::sinks::latency::bucket_of;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The default cap on exported series (`--metrics-max-series`).
pub const DEFAULT_MAX_SERIES: usize = 10_000;

/// The log2 buckets the histogram exports: bucket 7 (durations up to 255 ns, the lower buckets
/// merged into it: a uprobe pair alone costs more) to bucket 35 (up to 2^36 - 1 ns, 68.7 s);
/// longer calls are in `+Inf`.
pub(super) const FIRST_BUCKET: usize = 7;
pub(super) const LAST_BUCKET: usize = 35;

/// Series a histogram costs in the exposition: its buckets, `+Inf`, `_sum` and `_count`.
const HISTOGRAM_SERIES: usize = LAST_BUCKET - FIRST_BUCKET + 1 + 3;

/// Durations of one label set's completed calls.
#[derive(Clone, Debug, Default)]
pub(super) struct Durations {
    /// Calls per exported bucket (non-cumulative); the last entry is `+Inf`.
    pub(super) buckets: Vec<u64>,
    pub(super) count: u64,
    pub(super) sum_ns: u128,
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

/// Values per function (an index into [`State::functions`]), pid, comm, container and pod
/// (nested, so a hit finds its series without allocating).
#[derive(Debug)]
pub(super) struct PerTask<T>(pub(super) BTreeMap<usize, PerPid<T>>);

/// Values per pid, comm, container and pod.
type PerPid<T> = BTreeMap<Option<u32>, BTreeMap<String, BTreeMap<String, BTreeMap<String, T>>>>;

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
            .get_mut(task.container)?
            .get_mut(task.pod)
    }

    fn insert(&mut self, f: usize, task: &Task<'_>, v: T) {
        self.0
            .entry(f)
            .or_default()
            .entry(task.pid)
            .or_default()
            .entry(task.comm.to_string())
            .or_default()
            .entry(task.container.to_string())
            .or_default()
            .insert(task.pod.to_string(), v);
    }

    /// Every series, ordered by function (first-seen order), pid, comm, container.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, Task<'_>, &T)> {
        self.0.iter().flat_map(|(&f, pids)| {
            pids.iter().flat_map(move |(&pid, comms)| {
                comms.iter().flat_map(move |(comm, containers)| {
                    containers.iter().flat_map(move |(container, pods)| {
                        pods.iter().map(move |(pod, v)| {
                            (
                                f,
                                Task {
                                    pid,
                                    comm,
                                    container,
                                    pod,
                                },
                                v,
                            )
                        })
                    })
                })
            })
        })
    }
}

/// The task labels of a series: the process (`None` when netprobe could not find it), its
/// command name, its container (empty on the host) and its Kubernetes pod as `NAMESPACE/POD`
/// (empty outside Kubernetes; exported as the `namespace` and `pod` labels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Task<'a> {
    pub pid: Option<u32>,
    pub comm: &'a str,
    pub container: &'a str,
    pub pod: &'a str,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// (function name, image label) of every function seen by any attached plan, in first-seen
    /// order; series refer to them by index.
    pub(super) functions: Vec<(String, String)>,
    /// The attached plan's [`FunctionId`]s → index in `functions`.
    pub(super) by_plan: Vec<usize>,
    /// Probes attached now (0 while a restarted target is awaited).
    pub(super) probes: u64,
    /// Events lost by the sessions before the attached one.
    pub(super) lost_before: u64,
    pub(super) calls: PerTask<u64>,
    pub(super) durations: PerTask<Durations>,
    /// Series in `calls` and `durations`, as the exposition counts them.
    pub(super) series: usize,
    pub(super) lost: u64,
    pub(super) dropped: u64,
    pub(super) warned: bool,
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

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
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
