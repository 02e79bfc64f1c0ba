//! Arguments by name from DWARF, for native and Go functions probed with no ARG typed: each
//! formal parameter ([`netprobe_core::debuginfo::params_at`]) located where the entry probe
//! goes, turned into [`ArgRequest::Located`] values the plan fetches, named as the source names
//! them. `netprobe symbols --vars` prints the same decisions.
//!
//! Where the probe goes decides what is readable (the `perf probe --vars` question):
//! - **Native code**: the function's first instruction, where registers and the caller's stack
//!   hold what the System V ABI passed. Unoptimized code (GCC `-O0`, rustc without `-O`) keeps
//!   each parameter in the function's own frame, written by the prologue: when some parameter is
//!   only there, the probe goes where the prologue ends instead (the line table's
//!   `prologue_end`, or its second statement row, as gdb and `perf probe` find it), provided no
//!   branch of the function lands between its entry and that point (a loop starting there would
//!   make the probe count iterations, not calls).
//! - **Go**: after the stack-check prologue (`crate::lang::go`), which moves no argument.
//!
//! How values are fetched (`crate::plan`'s fetches, the kernel's fetch-args): integers, bool
//! (`u8`, 0 or 1), char (`s8`/`u8`, as a number), pointers (`x64`) from a register or memory;
//! `char *` as a NUL-terminated string; a Go `string` or Rust `&str` as its first 64 bytes
//! (`u8[64]` at the pointer) cut to its length word, so bytes past the length are never shown;
//! a Go slice as `NAME_ptr`, `NAME_len`, `NAME_cap`; a small struct as `NAME_FIELD` per field
//! that starts a register or lies in memory. A field in the upper bytes of a register, a float,
//! a union, or anything DWARF does not locate in a register or memory there is named in one
//! note, never guessed.

mod reading;

pub use reading::{describe_location, describe_param_location, Reading};

use crate::plan::ArgRequest;
use netprobe_core::debuginfo::{
    find_function, params_at, prologue_end, DebugSections, FunctionDie, FunctionQuery, Location,
    Param, FRAME_NOT_BUILT,
};
use std::path::Path;

/// Where the probe that reads the arguments sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbePoint {
    /// A native function's entry; it may move to where the prologue ends (module doc).
    NativeEntry,
    /// Exactly this address (Go: after the stack check).
    At(u64),
}

/// A function's parameters as a probe at `pc` reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DwarfArgs {
    pub function: FunctionDie,
    /// Where the probe goes (link-time address).
    pub pc: u64,
    pub params: Vec<(Param, Reading)>,
}

impl DwarfArgs {
    /// The values to fetch, in parameter order.
    pub fn requests(&self) -> Vec<ArgRequest> {
        self.params
            .iter()
            .flat_map(|(_, r)| r.values.iter().cloned())
            .collect()
    }

    /// One note naming what is not read, when something is not.
    pub fn note(&self) -> Option<String> {
        let missing: Vec<String> = self
            .params
            .iter()
            .filter_map(|(p, r)| Some(format!("{} ({})", p.name, r.not_read.as_ref()?)))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "note: {}: not readable at this point: {}",
                self.function.name,
                missing.join("; ")
            )
        })
    }
}

/// The debug sections of `path`: its own DWARF, else a separate debug file found as
/// `netprobe_core::debuginfo::locate` says (build-id, `.gnu_debuglink`, debuginfod), with the
/// image's call-frame sections. A path through another process's root (`/proc/PID/root/...`)
/// is searched in itself only: the host's debug folders say nothing of a container's files, and
/// a debuglink beside it could name a symlink that resolves on the host.
pub fn sections_of(path: &Path) -> netprobe_core::Result<DebugSections> {
    use netprobe_core::debuginfo::{locate, DebugSearch};
    let img = netprobe_core::image::cached::image(path)?;
    let own = DebugSections::parse(path, img.bytes())?;
    if own.has_debug_info() {
        return Ok(own);
    }
    let search = if path.starts_with("/proc") {
        DebugSearch::image_only()
    } else {
        DebugSearch::host(path)
    };
    Ok(match locate(img.bytes(), path, &search).found {
        Some((debug, _)) => debug.completed_by(&own),
        None => own,
    })
}

/// The parameters of the function whose first instruction is at `entry` (or, when DWARF has no
/// function there, the one named `name`) in `path`, as a probe at `point` reads them, its file
/// offset `entry_offset`. `Ok(None)` when the file has no DWARF for the function.
pub fn dwarf_args(
    sections: &DebugSections,
    path: &Path,
    entry: Option<u64>,
    entry_offset: netprobe_core::addr::FileOffset,
    name: &str,
    point: ProbePoint,
) -> netprobe_core::Result<Option<DwarfArgs>> {
    if !sections.has_debug_info() {
        return Ok(None);
    }
    let dwarf = sections.dwarf();
    let found = match entry {
        Some(pc) => find_function(&dwarf, FunctionQuery::Entry(pc))?,
        None => None,
    };
    let Some(function) = found.map_or_else(
        || find_function(&dwarf, FunctionQuery::Name(name)),
        |f| Ok(Some(f)),
    )?
    else {
        return Ok(None);
    };
    let pc = match point {
        ProbePoint::At(pc) => pc,
        ProbePoint::NativeEntry => function.entry,
    };
    let mut params = params_at(sections, &dwarf, &function, pc)?;
    let mut params_pc = pc;
    let waits_for_prologue = |ps: &[Param]| {
        ps.iter()
            .any(|p| matches!(&p.location, Location::Unreadable(w) if w == FRAME_NOT_BUILT))
    };
    if point == ProbePoint::NativeEntry && waits_for_prologue(&params.params) {
        if let Some(end) = prologue_end(&dwarf, &function)?
            .filter(|&end| no_branch_into(path, entry_offset, function.entry, end))
        {
            let later = params_at(sections, &dwarf, &function, end)?;
            let readable = |ps: &[Param]| {
                ps.iter()
                    .filter(|p| matches!(p.location, Location::Pieces(_)))
                    .count()
            };
            if readable(&later.params) > readable(&params.params) {
                params = later;
                params_pc = end;
            }
        }
    }
    let mut names = Vec::new();
    let params = params
        .params
        .into_iter()
        .map(|p| {
            let reading = reading::reading(&p, &mut names);
            (p, reading)
        })
        .collect();
    Ok(Some(DwarfArgs {
        function,
        pc: params_pc,
        params,
    }))
}

/// Whether no direct branch or call of the function at file offset `entry_offset` (link-time
/// address `entry`) lands in `(entry, until]`, and its code decodes.
fn no_branch_into(
    path: &Path,
    entry_offset: netprobe_core::addr::FileOffset,
    entry: u64,
    until: u64,
) -> bool {
    let Ok(file) = netprobe_core::probe_safety::CodeFile::open(path) else {
        return false;
    };
    let Ok((_, Some(code))) = file.function_code(entry_offset) else {
        return false;
    };
    if until >= entry.saturating_add(code.len() as u64) {
        return false;
    }
    let Some(arch) = file.arch() else {
        return false;
    };
    let reached = usize::try_from(until - entry).is_ok_and(|at| {
        arch.instruction_boundary(&code, at) == netprobe_core::arch::Boundary::Reached
    });
    let at = netprobe_core::addr::VirtAddr(entry);
    reached
        && arch.scan(&code, at).invalid == 0
        && !arch
            .direct_branches(&code, at)
            .iter()
            .any(|&(_, t)| t > entry && t <= until)
}

/// The debug sections of each file planning asks about, read once per command.
#[derive(Debug, Default)]
pub struct DebugFiles {
    by_path: std::collections::HashMap<std::path::PathBuf, Option<std::rc::Rc<DebugSections>>>,
}

impl DebugFiles {
    /// `path`'s sections, `None` when it cannot be read or has no DWARF.
    pub fn get(&mut self, path: &Path) -> Option<std::rc::Rc<DebugSections>> {
        self.by_path
            .entry(path.to_path_buf())
            .or_insert_with(|| {
                sections_of(path)
                    .ok()
                    .filter(DebugSections::has_debug_info)
                    .map(std::rc::Rc::new)
            })
            .clone()
    }
}

/// Gives `plan` (a native or Go function probed by name, with no ARG typed, whose arguments are
/// wanted) the arguments DWARF names at its entry probe, moving a native entry probe to where
/// the prologue ends when only there they are readable (module doc). What is not read is said
/// in `notes`; a file without DWARF changes nothing.
pub fn fill_in(
    files: &mut DebugFiles,
    plan: &mut crate::plan::FunctionPlan,
    loc: &crate::spec::Location,
    go: bool,
    notes: &mut Vec<String>,
) {
    let [probe] = plan.entry_offsets[..] else {
        return;
    };
    // DWARF numbers registers per architecture; the reader knows x86-64's (psABI §3.6.2). An
    // aarch64 image's parameters are not read by name (AADWARF64's numbers are not mapped), so
    // no x86 register is ever named in its plan.
    let arch = plan.convention.arch();
    if arch != netprobe_core::arch::Arch::X86_64 {
        notes.push(format!(
            "note: arguments by name from DWARF are read on x86_64 images only; {} is {arch}: type the ARGs (positional in {})",
            loc.probe_path.display(),
            plan.convention.label()
        ));
        return;
    }
    let Some(sections) = files.get(&loc.probe_path) else {
        return;
    };
    let entry = match loc.symbol.as_ref().map(|s| s.address) {
        Some(netprobe_core::symbol::Address::Virt(v)) => Some(v.0),
        _ => None,
    };
    let point = match (go, entry) {
        (true, Some(e)) => ProbePoint::At(e + probe.0.saturating_sub(plan.function_offset.0)),
        (true, None) => return,
        (false, _) if probe != plan.function_offset => return,
        (false, _) => ProbePoint::NativeEntry,
    };
    let symbol = loc
        .symbol
        .as_ref()
        .map_or(loc.name.as_str(), |s| s.name.as_str());
    let found = dwarf_args(
        &sections,
        &loc.probe_path,
        entry,
        plan.function_offset,
        symbol,
        point,
    );
    let args = match found {
        Ok(Some(a)) => a,
        Ok(None) => return,
        Err(e) => {
            notes.push(format!(
                "note: {}: its debug info could not be read ({e}); type its arguments (FUNCTION ARG...)",
                plan.name
            ));
            return;
        }
    };
    if let Some(n) = args.note() {
        notes.push(n);
    }
    let moved = args.pc.saturating_sub(args.function.entry);
    if moved > 0 && !go {
        notes.push(format!(
            "note: {}: its parameters are in its stack frame only after the prologue, so its entry probe is at +{moved:#x}, where the prologue ends",
            plan.name
        ));
        plan.entry_offsets = vec![netprobe_core::addr::FileOffset(
            plan.function_offset.0 + moved,
        )];
    }
    plan.args = args.requests();
}
