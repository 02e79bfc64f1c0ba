//! From what the user typed to a plan the gate has checked: specs resolved to locations, the
//! plan each location's language makes, the filter applied, entry probes moved to their cheapest
//! equivalent point, every probe through the probe-safety gate, and the .NET tiering guard. The
//! notes of each step are said on stderr, one `netprobe: ` line each.

use super::options::Filters;
use crate::error::Result;
use crate::gate::{self, GateOptions, GateReport};
use crate::lang::{build_plan, dotnet, resolve_specs, PlanOptions};
use crate::mode::Mode;
use crate::plan::ProbePlan;
use crate::spec::Targeting;

/// What planning needs to know besides the specs.
pub(crate) struct PlanRequest<'a> {
    pub mode: Mode,
    pub specs: &'a [String],
    pub targeting: &'a Targeting,
    pub dotnet_command: Option<&'a dotnet::resolve::DotnetCommand>,
    pub pids: &'a [u32],
    pub filter: &'a Filters,
    pub force_uretprobe: bool,
    pub keep_r2r: bool,
    pub stack: bool,
    pub gate: GateOptions,
}

/// The plan for `r`, with the filter applied and the probe-safety gate's report (notes said on
/// stderr), and the .NET tiering guard where .NET rules apply (a plan with managed methods, or
/// --keep-r2r, which it checks).
pub(crate) fn checked_plan(r: &PlanRequest<'_>) -> Result<(ProbePlan, GateReport, dotnet::Guard)> {
    let resolved = resolve_specs(r.specs, r.targeting, r.dotnet_command)?;
    let mut plan = build_plan(
        r.mode,
        &resolved,
        &PlanOptions {
            force_uretprobe: r.force_uretprobe,
            pids: r.pids.to_vec(),
            fetch_args: r.filter.0.as_ref().is_some_and(|f| !f.names().is_empty()),
        },
    )?;
    if r.stack {
        plan.record_user_stacks();
    }
    apply_filter(&mut plan, r.filter)?;
    gate::choose_entry_points(&mut plan, r.gate);
    let report = gate::check(&plan, r.gate);
    print_notes(&plan, &report);
    let guard = if !plan.managed.is_empty() || r.keep_r2r {
        let guard = dotnet::preflight(
            !plan.managed.is_empty(),
            r.targeting,
            r.dotnet_command,
            r.keep_r2r,
        )?;
        dotnet::print_guard(&guard);
        guard
    } else {
        dotnet::Guard::default()
    };
    Ok((plan, report, guard))
}

/// Applies the filter (if any) to every probe of the plan, and checks that the backend can
/// evaluate it (tracefs: the text of each event's `filter` file) before anything is placed; the
/// kernel's filter text joins the plan's notes.
pub fn apply_filter(plan: &mut ProbePlan, (user, task): &Filters) -> Result<()> {
    if user.is_none() && task.is_none() {
        return Ok(());
    }
    crate::plan::apply_filter(plan, user.as_ref(), task.as_ref())?;
    let layout = crate::backend::tracefs::events::event_layout(plan)?;
    let texts: Vec<&str> = layout
        .events
        .iter()
        .filter_map(|e| e.filter.as_deref())
        .collect();
    let mut distinct = texts.clone();
    distinct.dedup();
    if let [one] = distinct.as_slice() {
        plan.notes
            .push(format!("kernel filter on {} event(s): {one}", texts.len()));
    } else {
        for e in &layout.events {
            if let Some(t) = &e.filter {
                plan.notes.push(format!("kernel filter on {}: {t}", e.name));
            }
        }
    }
    Ok(())
}

/// Prints the plan's notes and the probe-safety gate's on stderr, one `netprobe: ` line each.
pub fn print_notes(plan: &ProbePlan, report: &GateReport) {
    for n in plan.notes.iter().chain(&report.notes()) {
        crate::printable::eprint_line(&format!("netprobe: {n}"));
    }
}
