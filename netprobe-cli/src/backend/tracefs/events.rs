//! How a plan's probes become kernel events and `uprobe_events` lines: event names, probes of
//! one signature sharing an event, and the lines that add and remove them.

use crate::backend::tracefs::fetch::{self, FetchArg, FetchType};
use crate::backend::tracefs::format::EventFormat;
use crate::backend::tracefs::probe::{EventName, GroupName, ProbeDef, ProbeKind, ProbeLine};
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use crate::plan::{ProbeKind as PlanKind, ProbePlan, Role};
use netprobe_core::abi::IntType;
use std::path::PathBuf;

/// The event name of probe `index` of the plan: `<function>_e<index>` / `_r<index>`.
pub fn event_name(plan: &ProbePlan, index: usize) -> Result<EventName> {
    let p = &plan.probes[index];
    let f = plan.function(p.function);
    let tag = match p.role {
        Role::Entry => 'e',
        Role::Return => 'r',
    };
    let base = f.symbol.as_deref().unwrap_or(&f.name);
    EventName::sanitized(base, &format!("_{tag}{index}"))
}

/// Which kernel event each probe of a plan goes into.
///
/// Probes of the same kind whose fetch-args have the same names and types share one event: the
/// kernel's multi-probe events (appending `p:GROUP/EVENT PATH:OFFSET ARGS` for an existing EVENT
/// adds a uprobe to it when kind and argument types match; kernel `trace_uprobe.c`,
/// `register_trace_uprobe` / `append_trace_uprobe`). Each probe of a shared event carries
/// `np_id=\INDEX:u32`, an immediate value (`\IMM`, uprobetracer.rst) stored with every hit, so a
/// hit names its probe without any address lookup.
///
/// Why: disabling an uprobe event waits for one RCU-tasks-trace grace period however many uprobes
/// it holds (`__probe_event_disable`: one `uprobe_unregister_sync` per event). Measured here: 1,000
/// single-uprobe events took 67 s to disable, one event holding 1,000 uprobes 24 ms.
///
/// Two probes at the same place (file and offset) cannot share an event (the kernel refuses the
/// second as the "same probe"): they go to separate events. A filter is a property of the event
/// (its `filter` file), so only probes with the same filter text share one.
///
/// An event holds at most [`MAX_PROBES_PER_EVENT`] probes: appending a probe to an event compares
/// it with every probe already in that event (`trace_uprobe_has_same_uprobe`), so one event of N
/// probes costs the kernel N²/2 comparisons to build, while each further event costs one more
/// grace period to disable. [`creation_order`] writes each event's first probe before the rest,
/// because the kernel finds the event of every appended line by walking the uprobe list from its
/// start (`find_probe_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLayout {
    pub events: Vec<KernelEvent>,
    /// For each probe of the plan, the index of its event in `events`.
    pub event_of: Vec<usize>,
}

/// One kernel event of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEvent {
    pub name: EventName,
    /// The plan's probes in this event, ascending.
    pub probes: Vec<usize>,
    /// The text of the event's `filter` file (`--filter`, `--tid`, `--comm`), if any.
    pub filter: Option<String>,
}

impl KernelEvent {
    /// Whether hits of this event say which probe fired (`np_id`), i.e. it holds several probes.
    pub fn tagged(&self) -> bool {
        self.probes.len() > 1
    }
}

/// Name of the fetch-arg that tags the probes of a shared event.
pub const PROBE_ID_FIELD: &str = "np_id";

/// Most probes in one kernel event (see [`EventLayout`]). Measured here with 10,000 probes of
/// one file: one event built in 1.15 s and disabled in 0.03 s; ten events of 1,000 (each first
/// probe written first) built in 0.73 s and disabled in 0.47 s (one ~47 ms grace period each).
pub const MAX_PROBES_PER_EVENT: usize = 2048;

/// Groups a plan's probes into kernel events (see [`EventLayout`]).
pub fn event_layout(plan: &ProbePlan) -> Result<EventLayout> {
    event_layout_with(plan, MAX_PROBES_PER_EVENT)
}

/// [`event_layout`] with at most `per_event` probes in one event (1: an event per probe, whose
/// perf events then count that probe alone).
pub fn event_layout_with(plan: &ProbePlan, per_event: usize) -> Result<EventLayout> {
    let per_event = per_event.clamp(1, MAX_PROBES_PER_EVENT);
    /// What must match for probes to share an event: kind, argument names and types, filter.
    type Key = (PlanKind, Vec<(String, String)>, Option<String>);
    /// Places (file, offset) already in an event.
    type Places = std::collections::HashSet<(PathBuf, u64)>;
    let mut events: Vec<(Key, Vec<usize>, Places)> = Vec::new();
    let mut event_of = Vec::with_capacity(plan.probes.len());
    for (i, p) in plan.probes.iter().enumerate() {
        let key: Key = (
            p.kind,
            fetch::fetchargs(p)
                .into_iter()
                .map(|a| (a.name, a.ty.kernel_name()))
                .collect(),
            super::filter::kernel_filter(p)?,
        );
        let place = (p.path.clone(), p.offset.0);
        let slot = events.iter().position(|(k, probes, places)| {
            *k == key && probes.len() < per_event && !places.contains(&place)
        });
        let e = match slot {
            Some(e) => e,
            None => {
                events.push((key, Vec::new(), Default::default()));
                events.len() - 1
            }
        };
        events[e].1.push(i);
        events[e].2.insert(place);
        event_of.push(e);
    }
    let events = events
        .into_iter()
        .map(|((_, _, filter), probes, _)| {
            let first = probes[0];
            let one_function = probes
                .iter()
                .all(|&q| plan.probes[q].function == plan.probes[first].function);
            let name = if one_function {
                event_name(plan, first)?
            } else {
                EventName::sanitized("multi", &format!("_{first}"))?
            };
            Ok(KernelEvent {
                name,
                probes,
                filter,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(EventLayout { events, event_of })
}

/// How a record of a kernel event names its probe.
#[derive(Clone, Debug)]
pub enum ProbeSlot {
    /// The event holds one probe.
    Single(usize),
    /// The event holds several; the [`PROBE_ID_FIELD`] field names the probe.
    Tagged {
        probes: Vec<usize>,
        id_offset: usize,
    },
}

impl ProbeSlot {
    /// The probe a record (`data`: the event's record, laid out as its format says) belongs to;
    /// `None` for an id this event was not given (a stale or foreign record is no hit).
    pub fn probe(&self, data: &[u8]) -> Option<usize> {
        match self {
            ProbeSlot::Single(p) => Some(*p),
            ProbeSlot::Tagged { probes, id_offset } => {
                let id = data
                    .get(*id_offset..id_offset.checked_add(4)?)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)?;
                probes.binary_search(&id).is_ok().then_some(id)
            }
        }
    }
}

/// Each kernel event of `plan` (as [`event_layout_with`] groups it, at most `per_event` probes
/// in one) with its `format`, read from tracefs once the probes of group `group` are defined, and
/// how its records name their probe.
pub fn event_formats_with(
    tracefs: &Tracefs,
    group: &GroupName,
    plan: &ProbePlan,
    per_event: usize,
) -> Result<Vec<(KernelEvent, EventFormat, ProbeSlot)>> {
    let mut out = Vec::new();
    for event in event_layout_with(plan, per_event)?.events {
        let text = tracefs.read(
            std::path::Path::new("events")
                .join(group.as_str())
                .join(event.name.as_str())
                .join("format"),
        )?;
        let f = EventFormat::parse(&text)?;
        let slot = if event.tagged() {
            let Some(field) = f.field(PROBE_ID_FIELD) else {
                return Err(Error::BadPage(format!(
                    "event {} has no {PROBE_ID_FIELD} field",
                    event.name
                )));
            };
            ProbeSlot::Tagged {
                probes: event.probes.clone(),
                id_offset: field.offset,
            }
        } else {
            ProbeSlot::Single(event.probes[0])
        };
        out.push((event, f, slot));
    }
    Ok(out)
}

/// [`event_formats_with`] with events of up to [`MAX_PROBES_PER_EVENT`] probes.
pub fn event_formats(
    tracefs: &Tracefs,
    group: &GroupName,
    plan: &ProbePlan,
) -> Result<Vec<(KernelEvent, EventFormat, ProbeSlot)>> {
    event_formats_with(tracefs, group, plan, MAX_PROBES_PER_EVENT)
}

/// The `uprobe_events` lines of a plan in group `group`, one per probe, in plan order (probes of
/// a shared event carry their `np_id`).
pub fn probe_defs(plan: &ProbePlan, group: &GroupName) -> Result<Vec<ProbeDef>> {
    probe_defs_with(plan, group, MAX_PROBES_PER_EVENT)
}

/// [`probe_defs`] with at most `per_event` probes in one kernel event.
pub fn probe_defs_with(
    plan: &ProbePlan,
    group: &GroupName,
    per_event: usize,
) -> Result<Vec<ProbeDef>> {
    let layout = event_layout_with(plan, per_event)?;
    (0..plan.probes.len())
        .map(|i| {
            let p = &plan.probes[i];
            let event = &layout.events[layout.event_of[i]];
            let mut args = fetch::fetchargs(p);
            if event.tagged() {
                args.push(FetchArg::new(
                    PROBE_ID_FIELD,
                    format!("\\{i}"),
                    FetchType::Int(IntType::U32),
                ));
            }
            ProbeDef::new(
                match p.kind {
                    PlanKind::Entry => ProbeKind::Entry,
                    PlanKind::UretProbe => ProbeKind::Return,
                },
                group.clone(),
                event.name.clone(),
                &p.path,
                p.offset,
                args,
            )
        })
        .collect()
}

/// The order in which to write `defs` (a session's probe lines, as [`probe_defs`] makes them):
/// the first probe of every event, then all the others in their order. The kernel looks up the
/// event of each appended line by walking every uprobe registered before it (`find_probe_event`
/// in `kernel/trace/trace_uprobe.c`); with every event's first probe at the front of that list,
/// the walk stops early instead of crossing the probes of earlier events.
pub fn creation_order(defs: &[ProbeDef]) -> Vec<ProbeDef> {
    let mut seen = std::collections::HashSet::new();
    let (heads, rest): (Vec<&ProbeDef>, Vec<&ProbeDef>) =
        defs.iter().partition(|d| seen.insert(d.event().clone()));
    heads.into_iter().chain(rest).cloned().collect()
}

/// One removal line per event of `defs` (several probes of a shared event go with one line).
pub fn removal_lines(defs: &[ProbeDef]) -> Vec<ProbeLine> {
    let mut seen = std::collections::HashSet::new();
    defs.iter()
        .filter(|d| seen.insert(d.event().clone()))
        .map(|d| d.removal())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FunctionPlan, PairingKey, Returns};
    use netprobe_core::abi::CallingConvention;
    use netprobe_core::addr::FileOffset;

    fn function(name: &str, offset: u64, returns: Returns) -> FunctionPlan {
        FunctionPlan {
            name: name.into(),
            image: "/bin/x".into(),
            probe_path: "/bin/x".into(),
            function_offset: FileOffset(offset),
            entry_offsets: vec![FileOffset(offset)],
            returns,
            convention: CallingConvention::SysV,
            args: vec![],
            ret: None,
            pairing: PairingKey::Thread,
            symbol: Some(name.into()),
        }
    }

    #[test]
    fn probes_share_events_by_kind_and_signature_never_by_place() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(function("a", 0x1000, Returns::UretProbe))
            .unwrap();
        plan.add_function(function("b", 0x2000, Returns::UretProbe))
            .unwrap();
        // An alias of `a` (two symbols, one address): the kernel refuses a second uprobe at the
        // same place in one event.
        plan.add_function(function("a_alias", 0x1000, Returns::None))
            .unwrap();
        let layout = event_layout(&plan).unwrap();
        let names: Vec<(&str, &[usize])> = layout
            .events
            .iter()
            .map(|e| (e.name.as_str(), e.probes.as_slice()))
            .collect();
        // probes: 0 a entry, 1 a uretprobe, 2 b entry, 3 b uretprobe, 4 a_alias entry
        assert_eq!(
            names,
            vec![
                ("multi_0", &[0, 2][..]),
                ("multi_1", &[1, 3][..]),
                ("a_alias_e4", &[4][..])
            ]
        );
        let defs = probe_defs(&plan, &GroupName::new("g").unwrap()).unwrap();
        let lines: Vec<String> = defs.iter().map(|d| d.to_string()).collect();
        assert_eq!(lines[0], "p:g/multi_0 /bin/x:0x1000 np_id=\\0:u32");
        assert_eq!(
            lines[3],
            "r:g/multi_1 /bin/x:0x2000 ret=$retval:x64 np_id=\\3:u32"
        );
        assert_eq!(lines[4], "p:g/a_alias_e4 /bin/x:0x1000");
        let removals: Vec<String> = removal_lines(&defs).iter().map(|l| l.to_string()).collect();
        assert_eq!(
            removals,
            vec!["-:g/multi_0", "-:g/multi_1", "-:g/a_alias_e4"]
        );
    }

    #[test]
    fn events_hold_at_most_the_cap_and_each_first_probe_is_written_first() {
        let mut plan = ProbePlan::new(false);
        let n = MAX_PROBES_PER_EVENT * 2 + 3;
        for i in 0..n {
            plan.add_function(function(&format!("f{i}"), 0x1000 + i as u64, Returns::None))
                .unwrap();
        }
        let layout = event_layout(&plan).unwrap();
        let sizes: Vec<usize> = layout.events.iter().map(|e| e.probes.len()).collect();
        assert_eq!(sizes, vec![MAX_PROBES_PER_EVENT, MAX_PROBES_PER_EVENT, 3]);
        // Every probe is in exactly the event `event_of` names.
        for (i, &e) in layout.event_of.iter().enumerate() {
            assert!(layout.events[e].probes.contains(&i));
        }
        let defs = probe_defs(&plan, &GroupName::new("g").unwrap()).unwrap();
        let order = creation_order(&defs);
        assert_eq!(order.len(), n);
        let line = |m: usize| format!("p:g/multi_{m} /bin/x:{:#x} np_id=\\{m}:u32", 0x1000 + m);
        let firsts: Vec<String> = order[..3].iter().map(|d| d.to_string()).collect();
        assert_eq!(
            firsts,
            vec![
                "p:g/multi_0 /bin/x:0x1000 np_id=\\0:u32".to_string(),
                line(MAX_PROBES_PER_EVENT),
                line(2 * MAX_PROBES_PER_EVENT),
            ]
        );
        // The rest keep plan order, and nothing is lost or doubled.
        let mut all: Vec<String> = order.iter().map(|d| d.to_string()).collect();
        all.sort();
        let mut want: Vec<String> = defs.iter().map(|d| d.to_string()).collect();
        want.sort();
        assert_eq!(all, want);
        assert_eq!(removal_lines(&defs).len(), 3);
    }
}
