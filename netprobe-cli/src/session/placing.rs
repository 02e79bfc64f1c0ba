//! How a session records: which backend it gets (perf events on the targets' tasks for a
//! session scoped to processes, a tracefs instance host-wide), whether it counts in the kernel,
//! and the meter of what it costs its targets (`--max-overhead`, `--interval`).

use super::options::Options;
use crate::backend::per_task::{self, PerTaskSession, TaskOptions};
use crate::backend::tracefs::session::{PreparingInstance, Session, SessionOptions};
use crate::backend::tracefs::Tracefs;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::gate::CheckedPlan;
use crate::mode::Mode;
use crate::overhead::{self, OverheadMeter};
use crate::plan::ProbePlan;

/// How a session scoped to processes records (see [`PerTaskSession`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scoping {
    /// The target is a `-c` command held before its execve, recorded from its exec on.
    pub held_command: bool,
    /// Count in the kernel ([`counts_in_kernel`]).
    pub in_kernel: bool,
    /// A kernel event per probe, so any can be taken out alone (`--max-overhead`).
    pub probe_per_event: bool,
}

/// `--max-overhead` takes probes out one function at a time, so each probe gets a kernel event of
/// its own: at most [`per_task::MAX_BUDGETED_PROBES`] probes.
pub(crate) fn check_overhead_plan(o: &Options, plan: &ProbePlan) -> Result<()> {
    if o.max_overhead.is_some() && plan.probes.len() > per_task::MAX_BUDGETED_PROBES {
        return Err(Error::usage(format!(
            "--max-overhead watches each probe through a kernel event of its own (the kernel takes about 80 ms to close each), at most {} probes; these patterns make {}: narrow them",
            per_task::MAX_BUDGETED_PROBES,
            plan.probes.len()
        )));
    }
    Ok(())
}

/// The meter of a session's cost (`--max-overhead`, or `--interval`, whose ticks say the
/// estimate): each probe's cost per hit on this machine, a record included when the session
/// writes one per hit.
pub(crate) fn overhead_meter(
    o: &Options,
    session: &dyn Backend,
    costs: Option<&overhead::HitCosts>,
) -> Option<OverheadMeter> {
    let costs = costs?;
    let plan = session.plan();
    let handling = overhead::probe_handling(plan);
    let cost_ns = overhead::probe_costs(plan, &handling, costs, !session.counts_in_kernel());
    Some(OverheadMeter::new(plan, cost_ns, o.max_overhead))
}

/// This machine's hit costs when the session estimates its cost (`--max-overhead`,
/// `--interval`): measured before anything is placed (the first time, about a second), so the
/// first window of the estimate starts when recording does.
pub(crate) fn session_hit_costs(o: &Options) -> Option<overhead::HitCosts> {
    (o.max_overhead.is_some() || o.interval.is_some()).then(overhead::hit_costs)
}

/// Places `plan` and starts recording: on the target tasks alone when `opts` names processes
/// ([`PerTaskSession`]: no other process that maps the probed files traps), host-wide through a
/// tracefs instance otherwise (made by `preparing` when it was begun early).
pub(crate) fn start_backend(
    tracefs: &Tracefs,
    opts: &SessionOptions,
    plan: CheckedPlan,
    preparing: Option<PreparingInstance>,
    scoping: Scoping,
) -> Result<Box<dyn Backend>> {
    match &opts.pids {
        Some(pids) => {
            drop(preparing);
            let mut s = PerTaskSession::new(
                tracefs,
                TaskOptions {
                    name: opts.name.clone(),
                    pids: pids.clone(),
                    buffer_kb: opts.buffer_kb,
                    buffer_percent: opts.buffer_percent,
                    enable_on_exec: scoping.held_command,
                    count_in_kernel: scoping.in_kernel,
                    probe_per_event: scoping.probe_per_event,
                },
            );
            s.attach(plan)?;
            Ok(Box::new(s))
        }
        None => Ok(Box::new(match preparing {
            Some(preparing) => Session::start_prepared(tracefs, opts, plan, preparing)?,
            None => Session::start(tracefs, opts, plan)?,
        })),
    }
}

/// Whether a session counts its probes' calls in the kernel (counting perf events read once per
/// interval) instead of reading a record per hit: `count` with nothing to look at per hit (no
/// stack, event limit or metrics labels; a `--filter`, `--tid` or `--comm` is the kernel's to test
/// on counting events too, `perf_tp_event_match`), on processes (the per-task backend), without
/// .NET methods (whose stall watch needs each hit), of at most
/// [`per_task::MAX_COUNTED_PROBES`] probes, none of which may be one file reached through two
/// paths (see [`one_file_through_two_paths`]).
pub(crate) fn counts_in_kernel(mode: Mode, o: &Options, plan: &ProbePlan) -> bool {
    mode == Mode::Count
        && !o.stack
        && !o.reads_each_hit
        && plan.managed.is_empty()
        && plan.probes.len() <= per_task::MAX_COUNTED_PROBES
        && !one_file_through_two_paths(plan)
}

/// Whether two probes of one function sit at the same offset of two paths: two containers of
/// one image reach one file through two overlay mounts, which stat tells apart but uprobes do
/// not (they sit on the layer's inode underneath), so each probe fires in both containers'
/// tasks. Counting perf events cannot tell which process a probe belongs to; records can (the
/// per-task backend keeps a record only from a process that maps its probe's path).
fn one_file_through_two_paths(plan: &ProbePlan) -> bool {
    let mut seen = std::collections::HashMap::new();
    plan.probes.iter().any(|p| {
        let key = (plan.function(p.function).name.as_str(), p.role, p.offset.0);
        matches!(seen.insert(key, &p.path), Some(other) if *other != p.path)
    })
}
