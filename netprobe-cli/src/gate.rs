//! The probe-safety gate's one call site: every probe of a plan is checked by
//! [`netprobe_core::probe_safety`] before its line can reach `uprobe_events`.
//!
//! [`check`] runs the checks over a plan and says, per probe, whether it passed, was let
//! through by `--unsafe-offset`, or is refused. [`GateReport::approve`] turns the plan into a
//! [`CheckedPlan`], the only thing [`crate::backend::tracefs::session::Session::start`] and `probe add` accept, so
//! no command can place a probe the gate did not see; `--dry-run` renders the report instead
//! (refused probes marked). A refusal is one line naming the function, the offset and the
//! reason, and nothing of the plan is placed.

use crate::error::{Error, Result};
use crate::plan::{FetchValue, FunctionId, ProbeKind, ProbePlan, Role};
use netprobe_core::addr::FileOffset;
use netprobe_core::probe_point::{cheapest_entry, recheck_branches_from_file, FetchedState};
use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
use std::collections::HashMap;
use std::path::PathBuf;

/// Command-line choices of the gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateOptions {
    /// `--unsafe-offset`: place raw `IMAGE:0xOFFSET` probes even where the gate cannot show them
    /// safe (not an instruction boundary of the enclosing function, outside executable code, a
    /// uretprobe inside a function), with a warning.
    pub unsafe_offset: bool,
    /// `--exact-entry`: keep entry probes where they were planned instead of moving them to the
    /// cheapest equivalent instruction ([`choose_entry_points`]).
    pub exact_entry: bool,
}

/// What the gate decided for one probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Passed every check.
    Safe,
    /// A raw offset no function of the file's tables encloses: only its segment was checked.
    Unchecked,
    /// Refused, but placed because of `--unsafe-offset` (the reason).
    Overridden(String),
    /// Refused (the reason, and whether `--unsafe-offset` would place it).
    Refused { reason: String, overridable: bool },
}

/// The gate's verdicts on a plan, one per probe in plan order, and what to tell the user.
#[derive(Clone, Debug, Default)]
pub struct GateReport {
    pub verdicts: Vec<Verdict>,
    /// One line per probe: `{function} at {path}:{offset}` for messages.
    labels: Vec<String>,
}

/// A plan every probe of which passed the gate (or `--unsafe-offset` let through).
#[derive(Debug)]
pub struct CheckedPlan(ProbePlan);

impl CheckedPlan {
    pub fn into_inner(self) -> ProbePlan {
        self.0
    }
}

impl std::ops::Deref for CheckedPlan {
    type Target = ProbePlan;
    fn deref(&self) -> &ProbePlan {
        &self.0
    }
}

impl GateReport {
    /// The refusal reason of probe `i`, when it is refused.
    pub fn refusal(&self, i: usize) -> Option<&str> {
        match self.verdicts.get(i) {
            Some(Verdict::Refused { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    /// Whether any probe is refused.
    pub fn any_refused(&self) -> bool {
        (0..self.verdicts.len()).any(|i| self.refusal(i).is_some())
    }

    /// Warnings and notes for stderr: probes placed by `--unsafe-offset`, raw offsets that
    /// could not be checked. One line each.
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (v, label) in self.verdicts.iter().zip(&self.labels) {
            let line = match v {
                Verdict::Overridden(why) => {
                    format!("warning: --unsafe-offset: placing the probe {label} although {why}")
                }
                Verdict::Unchecked => format!(
                    "note: no function of the file's symbol tables encloses {label}, so it cannot be checked to be an instruction boundary (it does lie in executable code); placing it as given"
                ),
                _ => continue,
            };
            if !out.contains(&line) {
                out.push(line);
            }
        }
        out
    }

    /// The error for the first refused probe (`None` when none is refused): one line naming
    /// the function, the offset, the reason and the fix.
    pub fn error(&self) -> Option<Error> {
        let refused: Vec<usize> = (0..self.verdicts.len())
            .filter(|&i| self.refusal(i).is_some())
            .collect();
        let &first = refused.first()?;
        let Verdict::Refused {
            reason,
            overridable,
        } = &self.verdicts[first]
        else {
            return None;
        };
        let fix = if *overridable {
            "--unsafe-offset places it anyway"
        } else {
            "the file's tables disagree with its code (a corrupt file, or one netprobe misreads), so no probe is placed from them; IMAGE:0xOFFSET with --unsafe-offset places one where you know the code is"
        };
        let more = match refused.len() - 1 {
            0 => String::new(),
            n => format!(" ({n} more refused; --dry-run lists them)"),
        };
        Some(Error::Refused {
            probe: self.labels[first].clone(),
            reason: reason.clone(),
            fix: format!("{fix}{more}"),
        })
    }

    /// The plan as a [`CheckedPlan`] when no probe is refused; else the error of the first
    /// refused one, and nothing is placed.
    pub fn approve(&self, plan: ProbePlan) -> Result<CheckedPlan> {
        if self.verdicts.len() != plan.probes.len() {
            return Err(Error::Usage(
                "internal error: the plan changed after the probe-safety gate checked it".into(),
            ));
        }
        match self.error() {
            Some(e) => Err(e),
            None => Ok(CheckedPlan(plan)),
        }
    }
}

/// Checks every probe of `plan`, each file opened once. A probe is a raw offset when its
/// function and offset are one of `plan.user_offsets`; every other probe is checked against the
/// function netprobe planned it for (its `function_offset`).
pub fn check(plan: &ProbePlan, options: GateOptions) -> GateReport {
    let raw: HashMap<FunctionId, FileOffset> = plan.user_offsets.iter().copied().collect();
    let mut by_path: HashMap<&PathBuf, Vec<usize>> = HashMap::new();
    for (i, p) in plan.probes.iter().enumerate() {
        by_path.entry(&p.path).or_default().push(i);
    }
    let mut verdicts = vec![Verdict::Safe; plan.probes.len()];
    let labels = plan
        .probes
        .iter()
        .map(|p| {
            format!(
                "on {} at {}:{}",
                plan.function(p.function).name,
                p.path.display(),
                p.offset
            )
        })
        .collect();
    for (path, idx) in by_path {
        let requests: Vec<ProbeRequest> = idx
            .iter()
            .map(|&i| {
                let p = &plan.probes[i];
                let is_raw = raw.get(&p.function) == Some(&p.offset);
                ProbeRequest {
                    offset: p.offset,
                    planned_entry: (!is_raw).then(|| plan.function(p.function).function_offset),
                    uretprobe: p.kind == ProbeKind::UretProbe,
                }
            })
            .collect();
        let results = match CodeFile::open(path) {
            Ok(file) => file.check(&requests),
            Err(e) => requests
                .iter()
                .map(|_| Err(Refusal::Unreadable(e.to_string())))
                .collect(),
        };
        for ((&i, req), result) in idx.iter().zip(&requests).zip(results) {
            let is_raw = req.planned_entry.is_none();
            verdicts[i] = match result {
                Ok(passed) if passed.enclosing.is_none() && is_raw => Verdict::Unchecked,
                Ok(_) => Verdict::Safe,
                Err(r) if is_raw && r.overridable() && options.unsafe_offset => {
                    Verdict::Overridden(r.to_string())
                }
                Err(r) => Verdict::Refused {
                    reason: r.to_string(),
                    overridable: is_raw && r.overridable(),
                },
            };
        }
    }
    GateReport { verdicts, labels }
}

/// Moves each entry probe netprobe planned from a function's tables to the cheapest equivalent
/// instruction ([`netprobe_core::probe_point::cheapest_entry`]: the first one the kernel
/// emulates in the straight-line run from the planned point, when no branch lands in the run and
/// nothing skipped writes a register the probe reads, RSP or RBP; and no branch anywhere in the
/// file's code lands there), and records each decision in
/// the probe's `entry_choice` for `--dry-run`. Applies to ELF functions and to the methods of
/// ReadyToRun assemblies (PE: the method's main body as RUNTIME_FUNCTIONS bounds it, and every
/// executable section swept for branches). Left alone: return probes (a uretprobe must sit on the
/// first byte; a RET probe is where the return is), raw `IMAGE:0xOFFSET` probes (the user chose
/// the byte), methods of assemblies inside a single-file bundle (not looked up by
/// `CodeFile::function_code`), and every probe under `--exact-entry`. Call it after the plan's
/// fetches are final (stacks, filters) and before [`check`], which then checks the moved offsets
/// like any other.
///
/// Hits still name the function: a probe's function and role do not change, only its offset.
pub fn choose_entry_points(plan: &mut ProbePlan, options: GateOptions) {
    if options.exact_entry {
        return;
    }
    let raw: Vec<FunctionId> = plan.user_offsets.iter().map(|(id, _)| *id).collect();
    let mut files: HashMap<PathBuf, Option<CodeFile>> = HashMap::new();
    // Branches of each file's whole code, swept once per file when a probe there could move.
    let mut branches: HashMap<PathBuf, Vec<(FileOffset, FileOffset)>> = HashMap::new();
    for i in 0..plan.probes.len() {
        let p = &plan.probes[i];
        if p.kind != ProbeKind::Entry || p.role != Role::Entry || raw.contains(&p.function) {
            continue;
        }
        let f = plan.function(p.function);
        let file = files.entry(p.path.clone()).or_insert_with(|| {
            use netprobe_core::image::{sniff_file, ImageFormat};
            let code = matches!(
                sniff_file(&p.path),
                Ok(Some(ImageFormat::Elf | ImageFormat::Pe))
            );
            code.then(|| CodeFile::open(&p.path).ok()).flatten()
        });
        let Some(file) = file.as_ref() else { continue };
        let Ok((unit, Some(code))) = file.function_code(f.function_offset) else {
            continue;
        };
        let Some(entry) = p.offset.0.checked_sub(unit.start.0) else {
            continue;
        };
        let mut choice = cheapest_entry(p.arch, &code, entry, &fetched_state(&p.fetches, p.arch));
        if choice.moved() {
            let targets = branches
                .entry(p.path.clone())
                .or_insert_with(|| file.direct_branch_targets());
            choice = recheck_branches_from_file(choice, unit.start.0, targets);
        }
        let p = &mut plan.probes[i];
        p.offset = FileOffset(unit.start.0 + choice.chosen.offset);
        p.entry_choice = Some(choice);
    }
}

/// The registers a probe's fetches read (directly, or as the base of a memory read; a stack
/// word reads the stack pointer; the return value, `arch`'s result register), and whether one
/// is a raw fetch-arg the rules cannot see into.
fn fetched_state(fetches: &[crate::plan::Fetch], arch: netprobe_core::arch::Arch) -> FetchedState {
    let mut state = FetchedState::default();
    for f in fetches {
        match &f.value {
            FetchValue::Int { at, .. }
            | FetchValue::CString { at }
            | FetchValue::Array { at, .. } => state.registers.extend(at.registers(arch)),
            FetchValue::Comm => {}
            FetchValue::Backend { .. } => state.opaque = true,
        }
    }
    state.registers.sort_unstable();
    state.registers.dedup();
    state
}
