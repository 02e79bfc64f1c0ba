//! [`Exported`], the sink decorator of `--metrics`: every hit the runner hands to `count`'s or
//! `latency`'s sink is first counted (and timed) in [`Metrics`] under its task's labels: the
//! process (`/proc/PID/comm`) and its container's name, each looked up once and cached within a
//! bound.

use super::Metrics;
use super::Task;
use crate::backend::Lost;
use crate::plan::{Hit, ProbePlan};
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
pub(super) fn container_label(pid: u32, names: &mut HashMap<String, String>) -> String {
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
