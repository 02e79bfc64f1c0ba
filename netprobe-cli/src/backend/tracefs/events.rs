//! How a plan's probes become kernel events and `uprobe_events` lines: event names, probes of
//! one signature sharing an event, and the lines that add and remove them.

use crate::backend::tracefs::fetch::{self, FetchArg, FetchType};
use crate::backend::tracefs::probe::{EventName, GroupName, ProbeDef, ProbeKind, ProbeLine};
use crate::error::Result;
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

/// Groups a plan's probes into kernel events (see [`EventLayout`]).
pub fn event_layout(plan: &ProbePlan) -> Result<EventLayout> {
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
        let slot = events
            .iter()
            .position(|(k, _, places)| *k == key && !places.contains(&place));
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

/// The `uprobe_events` lines of a plan in group `group`, one per probe, in plan order (probes of
/// a shared event carry their `np_id`).
pub fn probe_defs(plan: &ProbePlan, group: &GroupName) -> Result<Vec<ProbeDef>> {
    let layout = event_layout(plan)?;
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
}
