//! [`Exported`], the sink decorator of `--metrics`: every hit the runner hands to `count`'s or
//! `latency`'s sink is first counted (and timed) in [`Metrics`] under its task's labels: the
//! process (`/proc/PID/comm`) and its container's name, each looked up once and cached within a
//! bound.

use super::Metrics;
use super::Task;
use crate::backend::Lost;
use crate::plan::{Hit, ProbePlan};
use crate::sinks::places::Places;
use crate::sinks::{Counter, Flow, Latency, Sink, TaskInfo};
use std::collections::HashMap;
use std::sync::Arc;

/// Threads (pid lookups) and processes (names) an exporter remembers at most.
const MAX_CACHED_TASKS: usize = 65_536;

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
    /// The command name (`/proc/PID/comm`, its main thread's name) and the `container` and
    /// `pod` labels of each process, read once (at most [`MAX_CACHED_TASKS`] kept): the `comm`
    /// label names the process, so thread names add no series.
    processes: HashMap<u32, (String, String, String)>,
    /// Where each process runs (container, pod, namespace).
    places: Places,
}

impl<'a> Exported<'a> {
    /// Around `count`'s sink.
    pub fn counting(inner: &'a mut dyn Sink, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Calls(inner),
            metrics,
            tasks,
            processes: Default::default(),
            places: Places::default(),
        }
    }

    /// Around `latency`'s sink.
    pub fn timing(inner: &'a mut Latency, metrics: Arc<Metrics>, tasks: TaskInfo) -> Self {
        Exported {
            inner: Inner::Latency(inner),
            metrics,
            tasks,
            processes: Default::default(),
            places: Places::default(),
        }
    }
}

impl Exported<'_> {
    /// Container `id` is labelled `name` (what `--container` already asked the engine).
    pub fn known_container(mut self, id: &str, name: &str) -> Self {
        self.places.known(id, name);
        self
    }

    /// The targets `pids`, looked up now while they run.
    pub fn learn(mut self, pids: &[u32]) -> Self {
        self.places = std::mem::take(&mut self.places).learn(pids);
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
        let places = &mut self.places;
        let (comm, container, pod) = match pid {
            Some(p) => {
                let (comm, container, pod) = self.processes.entry(p).or_insert_with(|| {
                    let comm = std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .map(|c| c.trim_end_matches('\n').to_string())
                        .unwrap_or_else(|_| hit.comm.clone().unwrap_or_default());
                    let place = places.of(p);
                    let container = place.as_ref().map(|c| c.container.clone());
                    let pod = place.as_ref().and_then(|c| {
                        Some(format!("{}/{}", c.namespace.as_ref()?, c.pod.as_ref()?))
                    });
                    (comm, container.unwrap_or_default(), pod.unwrap_or_default())
                });
                (comm.as_str(), container.as_str(), pod.as_str())
            }
            None => (hit.comm.as_deref().unwrap_or(""), "", ""),
        };
        let task = Task {
            pid,
            comm,
            container,
            pod,
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

    fn stop_requested(&self) -> bool {
        match &self.inner {
            Inner::Calls(s) => s.stop_requested(),
            Inner::Latency(l) => l.stop_requested(),
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
