//! Language rules: where a spec's functions are ([`resolve`]) and which probes observe each
//! resolved location, by the kind of code it is.
//!
//! [`Planner`] is what [`build_plan`] calls for each location. It decides the kind
//! of each image once, when it is made: .NET ReadyToRun assemblies ([`dotnet`]: signature-typed
//! arguments, RET probes, tiering and inlining notes), Go binaries ([`go`]: post-prologue entry,
//! RET probes, Go ABIs, goroutine pairing), and native ELF code ([`native`]: System V,
//! uretprobes, IFUNC advice); a location is planned by its image's rules only, so a Go session
//! never runs .NET planning and a .NET one never reads Go tables of its assemblies.

pub mod dotnet;
pub mod dwarf_args;
pub mod go;
pub mod native;

use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::plan::{FunctionPlan, ProbePlan, Role};
use crate::spec::{self, Location, ProbeSpec, SpecTarget, Targeting};
use netprobe_core::symbol::SymbolKind;
use std::collections::HashMap;
use std::path::PathBuf;

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
    /// Read the arguments in every mode (a `--filter` tests them where hits are made, so count
    /// and latency need them too).
    pub fetch_args: bool,
}

/// Resolves `spec` for `targeting`: the assemblies of a .NET `-c` command (`dotnet_command`) are
/// searched the way its host finds them; everything else by [`spec::resolve`]. A pattern that
/// matches nothing gets the .NET explanation when it names a method that exists without
/// precompiled code in one of the targets' assemblies.
pub fn resolve(
    spec: &ProbeSpec,
    targeting: &Targeting,
    dotnet_command: Option<&dotnet::resolve::DotnetCommand>,
) -> Result<Vec<Location>> {
    if let Some(found) = dotnet_command
        .and_then(|cmd| dotnet::resolve::resolve_in_dotnet_command(spec, targeting, cmd))
    {
        return found;
    }
    spec::resolve(spec, targeting).map_err(|e| dotnet::resolve::explain_failure(e, spec, targeting))
}

/// Which language's rules plan the locations of one image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    /// A .NET assembly (a PE file, or an assembly inside a single-file bundle).
    Managed,
    /// A Go binary (it has a Go function table).
    Go,
    /// Anything else: native ELF code.
    Native,
}

/// Plans the functions of one command, location by location.
pub struct Planner {
    mode: Mode,
    options: PlanOptions,
    /// By (probe path, image): decided once per image in [`Planner::new`].
    kinds: HashMap<(PathBuf, PathBuf), ImageKind>,
    go: go::GoImages,
    go_summary: go::GoSummary,
    dotnet: dotnet::Assemblies,
    /// DWARF of native and Go images, for arguments by name.
    debug_files: dwarf_args::DebugFiles,
    /// Whether the function [`Planner::plan`] returned last is a .NET managed method.
    last_managed: bool,
    notes: Vec<String>,
}

impl Planner {
    /// Decides the kind of each image the locations name, once, and reads what planning needs
    /// from Go images (their function tables).
    pub fn new<'a>(
        mode: Mode,
        options: PlanOptions,
        locations: impl IntoIterator<Item = &'a Location>,
    ) -> Planner {
        let mut kinds = HashMap::new();
        let mut unmanaged = Vec::new();
        for loc in locations {
            let key = (loc.probe_path.clone(), loc.image.clone());
            if kinds.contains_key(&key) {
                if kinds[&key] != ImageKind::Managed {
                    unmanaged.push(loc);
                }
                continue;
            }
            let kind = if dotnet::is_managed_function(&loc.image, &loc.probe_path) {
                ImageKind::Managed
            } else {
                unmanaged.push(loc);
                ImageKind::Native
            };
            kinds.insert(key, kind);
        }
        let go = go::GoImages::analyze(unmanaged);
        for ((probe_path, _), kind) in kinds.iter_mut() {
            if *kind == ImageKind::Native && go.contains(probe_path) {
                *kind = ImageKind::Go;
            }
        }
        Planner {
            mode,
            options,
            kinds,
            go,
            go_summary: go::GoSummary::default(),
            dotnet: dotnet::Assemblies::default(),
            debug_files: dwarf_args::DebugFiles::default(),
            last_managed: false,
            notes: Vec::new(),
        }
    }

    /// The plan of one location; `Ok(None)` when there is nothing to probe there (said in the
    /// notes).
    pub fn plan(&mut self, spec: &ProbeSpec, loc: &Location) -> Result<Option<FunctionPlan>> {
        let mut wants = Wants::of(self.mode, spec);
        wants.args |= self.options.fetch_args;
        self.last_managed = false;
        let kind = self
            .kinds
            .get(&(loc.probe_path.clone(), loc.image.clone()))
            .copied()
            .unwrap_or(ImageKind::Native);
        match kind {
            ImageKind::Managed if loc.kind() == Some(SymbolKind::ManagedMethod) => {
                self.last_managed = true;
                return self
                    .dotnet
                    .plan_function(spec, loc, wants, &mut self.notes)
                    .map(Some);
            }
            ImageKind::Go => {
                if let Some((img, f)) = self.go.function(loc) {
                    let planned = go::plan_function(
                        img,
                        f,
                        spec,
                        loc,
                        wants,
                        self.options.force_uretprobe,
                        &mut self.notes,
                        &mut self.go_summary,
                    )?;
                    return Ok(planned.map(|p| self.with_dwarf_args(p, spec, loc, wants, true)));
                }
            }
            _ => {}
        }
        if loc.kind() == Some(SymbolKind::GoFunction) {
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
        let planned = native::plan_function(spec, loc, wants, &self.options.pids, &mut self.notes)?;
        Ok(Some(self.with_dwarf_args(planned, spec, loc, wants, false)))
    }

    /// `plan` with its arguments from DWARF when the spec names a function by pattern, types no
    /// ARG, and its arguments are wanted at entry ([`dwarf_args::fill_in`]).
    fn with_dwarf_args(
        &mut self,
        mut plan: FunctionPlan,
        spec: &ProbeSpec,
        loc: &Location,
        wants: Wants,
        go: bool,
    ) -> FunctionPlan {
        if wants.args
            && wants.entry
            && spec.args.is_empty()
            && matches!(spec.target, SpecTarget::Pattern(_))
        {
            dwarf_args::fill_in(&mut self.debug_files, &mut plan, loc, go, &mut self.notes);
        }
        plan
    }

    /// Called with the id `plan.add_function` gave the function [`Planner::plan`] returned last:
    /// records a .NET method as managed (`ProbePlan::managed`) and adjusts its probes where the
    /// generic plan cannot say it (a return without a readable value fetches none).
    pub fn added(&mut self, plan: &mut crate::plan::ProbePlan, id: crate::plan::FunctionId) {
        if self.last_managed {
            plan.managed.push(id);
            self.dotnet.added(plan, id);
        }
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
            let locs = resolve(&spec, targeting, dotnet_command)?;
            Ok((spec, locs))
        })
        .collect()
}

/// Builds the plan of a live command from parsed specs and their locations: each location is
/// planned by its image's rules ([`Planner`]); what the user should know about the choices made
/// is in the plan's `notes`.
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
