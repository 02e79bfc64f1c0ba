//! `netprobe count`: calls per function (entry hits; return hits for return-only probes), once at
//! the end or every interval.

use super::places::{Place, Places};
use super::{flow_of, CountReport, Flow, Format, Sink, TaskInfo};
use crate::backend::Lost;
use crate::plan::{FunctionId, Hit, ProbePlan, Role};
use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;

/// `netprobe count`: calls per function (entry hits; return hits for return-only probes).
#[derive(Debug, Default)]
pub struct Counter {
    pub counts: BTreeMap<FunctionId, u64>,
    pub max_events: Option<u64>,
    pub total: u64,
    /// With [`Counter::by_container`]: how each hit's process is found and placed, and the
    /// counts of the hits in containers, per container (calls counted in the kernel carry no
    /// process and are in `counts` only).
    pub places: Option<(TaskInfo, Places)>,
    pub by_place: BTreeMap<Rc<Place>, BTreeMap<FunctionId, u64>>,
}

impl Counter {
    /// Counts the hits of processes in containers per container too, each process found by
    /// `tasks` and placed by `places`.
    pub fn by_container(mut self, tasks: TaskInfo, places: Places) -> Counter {
        self.places = Some((tasks, places));
        self
    }

    /// The counts of every function of `plan`, in plan order.
    pub fn counts_report<'a>(
        &self,
        plan: &'a ProbePlan,
        lost: Lost,
        elapsed_s: f64,
    ) -> CountReport<'a> {
        CountReport {
            rows: by_name(plan, &self.counts, true),
            by_place: self
                .by_place
                .iter()
                .map(|(place, counts)| (place.clone(), by_name(plan, counts, false)))
                .collect(),
            lost,
            elapsed_s,
        }
    }

    /// Writes the counts in `format`; `elapsed_s` is the length of the counted span.
    pub fn report(
        &self,
        plan: &ProbePlan,
        format: Format,
        lost: Lost,
        elapsed_s: f64,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        format
            .printer()
            .counts(out, &self.counts_report(plan, lost, elapsed_s))?;
        out.flush()
    }

    /// Whether `hit` counts as a call.
    pub(crate) fn counts_hit(plan: &ProbePlan, hit: &Hit) -> bool {
        Counter::counts_role(plan, hit.function, hit.role)
    }

    /// Whether a hit of a probe of `function` in `role` counts as a call: entries do, and returns
    /// of a function probed only at its returns.
    fn counts_role(plan: &ProbePlan, function: FunctionId, role: Role) -> bool {
        role == Role::Entry
            || !plan
                .probes
                .iter()
                .any(|p| p.function == function && p.role == Role::Entry)
    }
}

/// Calls per function name, in plan order: one name can be several planned functions (a
/// function of one image in two containers, reached through two paths), whose calls add up.
/// `all`: functions without calls too.
fn by_name<'a>(
    plan: &'a ProbePlan,
    counts: &BTreeMap<FunctionId, u64>,
    all: bool,
) -> Vec<(&'a str, u64)> {
    let mut rows: Vec<(&str, u64)> = Vec::new();
    for f in &plan.functions {
        let n = counts.get(&f.id).copied();
        if n.is_none() && !all {
            continue;
        }
        match rows.iter_mut().find(|(name, _)| *name == f.name) {
            Some((_, total)) => *total += n.unwrap_or(0),
            None => rows.push((f.name.as_str(), n.unwrap_or(0))),
        }
    }
    rows
}

impl Sink for Counter {
    fn counted(&mut self, plan: &ProbePlan, probe: usize, calls: u64) -> Flow {
        let Some(p) = plan.probes.get(probe) else {
            return Flow::Continue;
        };
        if Counter::counts_role(plan, p.function, p.role) {
            *self.counts.entry(p.function).or_insert(0) += calls;
            self.total += calls;
        }
        Flow::Continue
    }

    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        if Counter::counts_hit(plan, &hit) {
            *self.counts.entry(hit.function).or_insert(0) += 1;
            if let Some((tasks, places)) = self.places.as_mut() {
                if let Some(place) = tasks.process_of(&hit).and_then(|p| places.of(p)) {
                    *self
                        .by_place
                        .entry(place)
                        .or_default()
                        .entry(hit.function)
                        .or_insert(0) += 1;
                }
            }
            self.total += 1;
            if self.max_events.is_some_and(|m| self.total >= m) {
                return Flow::Enough;
            }
        }
        Flow::Continue
    }
}

/// A counter that prints (and resets) every interval.
pub struct IntervalCounter<W: Write> {
    pub counter: Counter,
    pub out: W,
    pub format: Format,
    pub last_tick: std::time::Instant,
}

impl<W: Write> Sink for IntervalCounter<W> {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        self.counter.hit(plan, hit)
    }
    fn counted(&mut self, plan: &ProbePlan, probe: usize, calls: u64) -> Flow {
        self.counter.counted(plan, probe, calls)
    }
    fn tick(&mut self, plan: &ProbePlan, lost: Lost) -> Flow {
        let elapsed = self.last_tick.elapsed().as_secs_f64();
        self.last_tick = std::time::Instant::now();
        let r = self
            .counter
            .report(plan, self.format, lost, elapsed, &mut self.out);
        self.counter.counts.clear();
        self.counter.by_place.clear();
        flow_of(r)
    }
}
