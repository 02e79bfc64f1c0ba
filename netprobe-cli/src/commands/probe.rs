//! `netprobe probe add|list|remove`: probes that outlive netprobe on purpose (for perf and other
//! tools), in a group of their own that `netprobe clean` never touches.

use crate::backend::tracefs::cleanup;
use crate::backend::tracefs::dryrun;
use crate::backend::tracefs::events::{probe_defs, removal_lines};
use crate::backend::tracefs::probe::{self, GroupName, ProbeLine};
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use crate::gate::{self, GateOptions};
use crate::lang::{build_plan, resolve_specs, PlanOptions};
use crate::mode::Mode;
use crate::session::{apply_filter, container_pids, print_notes, FilterOptions};
use crate::spec::Targeting;
use std::io::Write;

/// Default group of persistent probes.
pub const PERSIST_GROUP: &str = "netprobe_persist";

fn persist_group(group: Option<&str>) -> Result<GroupName> {
    let g = GroupName::new(group.unwrap_or(PERSIST_GROUP))?;
    if cleanup::session_owner(g.as_str()).is_some() {
        return Err(Error::usage(format!(
            "group {g} looks like a live session's (netprobe_<PIDNS>_<PID>) and would be removed by `netprobe clean`; pick another name"
        )));
    }
    Ok(g)
}

/// `netprobe probe add`: persistent probes (entry, or return for `r:` specs) that stay until
/// `probe remove`, for perf (`perf record -e GROUP:EVENT`) and anything else that reads trace
/// events. (Not for bpftrace: BPF programs attach to uprobe events as kprobe-type programs only,
/// and `tracepoint:GROUP:*` fails with `PERF_EVENT_IOC_SET_BPF: Invalid argument`, verified with
/// bpftrace 0.17 here; `--dry-run` prints the equivalent bpftrace `uprobe:` program instead.)
/// What `netprobe probe add` places.
#[derive(Clone, Debug, Default)]
pub struct PersistOptions {
    pub specs: Vec<String>,
    pub pids: Vec<u32>,
    /// `--container`, `--pod` or `--selector`: the chosen containers' processes join `pids`.
    pub container: Option<netprobe_core::containers::Selection>,
    pub filter: FilterOptions,
    pub group: Option<String>,
    pub dry_run: bool,
    pub force_uretprobe: bool,
    pub gate: GateOptions,
}

pub fn probe_add(o: &PersistOptions, out: &mut dyn Write) -> Result<i32> {
    let filter = o.filter.exprs()?;
    let mut pids = o.pids.clone();
    if let Some(c) = &o.container {
        pids.extend(container_pids(c)?);
    }
    let (specs, pids, dry_run, force_uretprobe, gate_options) =
        (&o.specs, &pids, o.dry_run, o.force_uretprobe, o.gate);
    let group = persist_group(o.group.as_deref())?;
    let targeting = if pids.is_empty() {
        Targeting::SystemWide
    } else {
        Targeting::Pids(pids.to_vec())
    };
    let resolved = resolve_specs(specs, &targeting, None)?;
    let mut plan = build_plan(
        Mode::Trace,
        &resolved,
        &PlanOptions {
            force_uretprobe,
            pids: pids.to_vec(),
            fetch_args: false,
        },
    )?;
    plan.record_comm = false;
    for p in &mut plan.probes {
        p.fetches.retain(|a| a.field != "np_comm");
        p.comm_field = None;
    }
    apply_filter(&mut plan, &filter)?;
    let report = gate::check(&plan, gate_options);
    print_notes(&plan, &report);
    if dry_run {
        let script = dryrun::render(&plan, &report, &group, pids, None, Mode::Persist)?;
        let _ = write!(out, "{script}");
        return report.error().map_or(Ok(0), Err);
    }
    let plan = report.approve(plan)?;
    let tracefs = Tracefs::open()?;
    let defs = probe_defs(&plan, &group)?;
    let lines: Vec<ProbeLine> = crate::backend::tracefs::events::creation_order(&defs)
        .into_iter()
        .map(ProbeLine::Add)
        .collect();
    probe::append_lines(&tracefs, &lines)?;
    // The filters go into the top-level events (what trace and trace_pipe readers see); perf
    // takes its own copy with `perf record --filter`.
    let layout = crate::backend::tracefs::events::event_layout(&plan)?;
    let mut perf_filter = String::new();
    for e in &layout.events {
        let Some(text) = &e.filter else { continue };
        if let Err(err) =
            crate::backend::tracefs::filter::set_filter(tracefs.root(), &group, &e.name, text)
        {
            // Nothing of a refused add stays.
            let _ = probe::append_lines(&tracefs, &removal_lines(&defs));
            return Err(err);
        }
        perf_filter = format!(" --filter {}", crate::shell::quote(text));
    }
    for d in &defs {
        let _ = writeln!(out, "added {}:{}  ({d})", group, d.event());
    }
    let _ = writeln!(
        out,
        "use with: perf record -e '{group}:*'{perf_filter} -a && perf script   |   for bpftrace, `--dry-run` prints the same probes as a bpftrace program   |   remove with: netprobe probe remove --group {group}"
    );
    Ok(0)
}

/// `netprobe probe list`: probes of a group (default: every netprobe group).
pub fn probe_list(group: Option<&str>, out: &mut dyn Write) -> Result<i32> {
    let tracefs = Tracefs::open()?;
    for p in probe::list_all(&tracefs)? {
        let ours = match group {
            Some(g) => p.group == g,
            None => p.group.starts_with("netprobe_"),
        };
        if ours {
            let _ = writeln!(out, "{}:{}/{} {}", p.kind, p.group, p.event, p.location);
        }
    }
    Ok(0)
}

/// `netprobe probe remove`: removes the named events (or all) of a persistent group.
pub fn probe_remove(group: Option<&str>, events: &[String], out: &mut dyn Write) -> Result<i32> {
    let group = persist_group(group)?;
    let tracefs = Tracefs::open()?;
    let present = probe::list_events(&tracefs, &group)?;
    let chosen: Vec<_> = if events.is_empty() {
        present
    } else {
        let mut v = Vec::new();
        for e in events {
            match present.iter().find(|p| p.as_str() == e) {
                Some(p) => v.push(p.clone()),
                None => {
                    return Err(Error::usage(format!(
                        "no probe {group}:{e}; see `netprobe probe list --group {group}`"
                    )))
                }
            }
        }
        v
    };
    let lines: Vec<ProbeLine> = chosen
        .iter()
        .map(|e| ProbeLine::Remove {
            group: group.clone(),
            event: e.clone(),
        })
        .collect();
    probe::append_lines(&tracefs, &lines)?;
    for e in &chosen {
        let _ = writeln!(out, "removed {group}:{e}");
    }
    if chosen.is_empty() {
        let _ = writeln!(out, "no probes in group {group}");
    }
    Ok(0)
}
