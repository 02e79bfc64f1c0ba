//! Language rules: which kernel probes observe a resolved location, by the kind of code it is.
//!
//! [`Planner`] is what `commands::live::build_plan` calls for each location: Go functions
//! ([`go`]: post-prologue entry, RET probes, Go ABIs, goroutine pairing), .NET ReadyToRun methods
//! ([`dotnet`]: signature-typed arguments, RET probes, tiering and inlining notes), everything else
//! as native ELF code ([`native`]: System V, uretprobes, IFUNC advice).

pub mod dotnet;
pub mod go;
pub mod native;

use crate::error::Result;
use crate::mode::Mode;
use crate::plan::FunctionPlan;
use crate::plan::Role;
use crate::spec::{Location, ProbeSpec};

/// What the user asked to see at one location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wants {
    pub entry: bool,
    pub ret: bool,
    /// Fetch the spec's arguments (trace and persistent probes; count and latency need none).
    pub args: bool,
    /// Pair entries with returns into calls (latency): read what pairs them (Go: the goroutine).
    pub pair: bool,
}

impl Wants {
    /// Latency needs entry and return; otherwise the spec's kind decides.
    pub fn of(mode: Mode, spec: &ProbeSpec) -> Wants {
        let latency = mode == Mode::Latency;
        Wants {
            entry: latency || spec.kind == Role::Entry,
            ret: latency || spec.kind == Role::Return,
            args: matches!(mode, Mode::Trace | Mode::Persist),
            pair: mode.pairs_calls(),
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
