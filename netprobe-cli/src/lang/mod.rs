//! Language rules: which kernel probes observe a resolved location, by the kind of code it is.
//!
//! [`Planner`] is what [`build_plan`] calls for each location: Go functions
//! ([`go`]: post-prologue entry, RET probes, Go ABIs, goroutine pairing), .NET ReadyToRun methods
//! ([`dotnet`]: signature-typed arguments, RET probes, tiering and inlining notes), everything else
//! as native ELF code ([`native`]: System V, uretprobes, IFUNC advice).

pub mod dotnet;
pub mod go;
pub mod native;

use crate::dryrun::Mode;
use crate::error::{Error, Result};
use crate::plan::{FunctionPlan, ProbePlan};
use crate::spec::{Location, ProbeSpec, SpecKind, SpecTarget, Targeting};

/// What the user asked to see at one location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wants {
    pub entry: bool,
    pub ret: bool,
    /// Fetch the spec's arguments (trace and persistent probes; count and latency need none).
    pub args: bool,
}

impl Wants {
    /// Latency needs entry and return; otherwise the spec's kind decides.
    pub fn of(mode: Mode, spec: &ProbeSpec) -> Wants {
        let latency = mode == Mode::Latency;
        Wants {
            entry: latency || spec.kind == SpecKind::Entry,
            ret: latency || spec.kind == SpecKind::Return,
            args: matches!(mode, Mode::Trace | Mode::Persist),
        }
    }
}

/// Command-line choices that change how probes are planned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanOptions {
    /// `--force-uretprobe`: uretprobes on Go functions too (crashes Go programs whose goroutine
    /// stack moves during the call).
    pub force_uretprobe: bool,
    /// The `-p` processes (IFUNC implementations are looked up in them).
    pub pids: Vec<u32>,
}

/// Plans the functions of one command, location by location.
pub struct Planner {
    mode: Mode,
    options: PlanOptions,
    go: go::GoImages,
    go_summary: go::GoSummary,
    dotnet: dotnet::Planner,
    notes: Vec<String>,
}

impl Planner {
    /// Reads what the locations' images need (Go function tables) once.
    pub fn new<'a>(
        mode: Mode,
        options: PlanOptions,
        locations: impl IntoIterator<Item = &'a Location>,
    ) -> Planner {
        Planner {
            mode,
            options,
            go: go::GoImages::analyze(locations),
            go_summary: go::GoSummary::default(),
            dotnet: dotnet::Planner::new(),
            notes: Vec::new(),
        }
    }

    /// The plan of one location; `Ok(None)` when there is nothing to probe there (said in the
    /// notes).
    pub fn plan(&mut self, spec: &ProbeSpec, loc: &Location) -> Result<Option<FunctionPlan>> {
        let wants = Wants::of(self.mode, spec);
        if dotnet::is_managed(loc) {
            return self
                .dotnet
                .plan_function(spec, loc, wants, &mut self.notes)
                .map(Some);
        }
        if let Some((img, f)) = self.go.function(loc) {
            return go::plan_function(
                img,
                f,
                spec,
                loc,
                wants,
                self.options.force_uretprobe,
                &mut self.notes,
                &mut self.go_summary,
            );
        }
        if loc.kind() == Some(netprobe_core::symbol::SymbolKind::GoFunction) {
            // A pclntab function whose code could not be decoded: planning it as native code
            // would give it a uretprobe, which can kill the program.
            return Err(crate::error::Error::BadSpec {
                spec: spec.text.clone(),
                why: format!(
                    "the code of Go function {} in {} could not be read from the file, so its probe points (stack check, RETs) are unknown; probe an offset inside it (IMAGE:0xOFFSET) instead",
                    loc.name,
                    loc.probe_path.display()
                ),
            });
        }
        Ok(Some(native::plan_function(
            spec,
            loc,
            wants,
            &self.options.pids,
            &mut self.notes,
        )))
    }

    /// Called with the id `plan.add_function` gave the function [`Planner::plan`] returned last:
    /// adjusts its probes where the generic plan cannot say it (a .NET method's return without a
    /// readable value fetches none).
    pub fn added(&mut self, plan: &mut crate::plan::ProbePlan, id: crate::plan::FunctionId) {
        self.dotnet.added(plan, id);
    }

    /// Everything to tell the user, once each, in order: per-function notes, then summaries.
    pub fn finish(self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in self.notes.into_iter().chain(self.go_summary.notes()) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }
}

/// Parses and resolves every spec (a live command needs at least one).
pub fn resolve_specs(
    specs: &[String],
    targeting: &Targeting,
    dotnet_command: Option<&dotnet::resolve::DotnetCommand>,
) -> Result<Vec<(ProbeSpec, Vec<Location>)>> {
    if specs.is_empty() {
        return Err(Error::usage(
            "no probe given: name a function, e.g. `netprobe trace -p PID libc.so.6:malloc`",
        ));
    }
    specs
        .iter()
        .map(|s| {
            let spec = ProbeSpec::parse(s)?;
            let locs = dotnet::resolve::resolve(&spec, targeting, dotnet_command)?;
            Ok((spec, locs))
        })
        .collect()
}

/// Builds the plan of a live command from parsed specs and their locations: each location is
/// planned by its language's rules (`crate::lang`); what the user should know about the choices
/// made is in the plan's `notes`.
pub fn build_plan(
    mode: Mode,
    resolved: &[(ProbeSpec, Vec<Location>)],
    options: &PlanOptions,
) -> Result<ProbePlan> {
    let mut plan = ProbePlan::new(mode == Mode::Trace);
    let mut planner = Planner::new(
        mode,
        options.clone(),
        resolved.iter().flat_map(|(_, locs)| locs),
    );
    for (spec, locs) in resolved {
        for loc in locs {
            if let Some(f) = planner.plan(spec, loc)? {
                let id = plan.add_function(f)?;
                planner.added(&mut plan, id);
                if matches!(spec.target, SpecTarget::Offset(_)) {
                    plan.user_offsets.push((id, loc.file_offset));
                }
            }
        }
    }
    plan.notes = planner.finish();
    if plan.functions.is_empty() {
        return Err(Error::usage(format!(
            "nothing to probe: {}",
            plan.notes.join("; ")
        )));
    }
    Ok(plan)
}
