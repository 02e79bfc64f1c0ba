//! The probe-safety gate: every check a probe point must pass before netprobe writes it to
//! `uprobe_events`, in one place.
//!
//! The model is bpftrace's `src/attached_probe.cpp`, where every check a probe must pass before
//! attaching (symbol found, offset inside the function, offset on an instruction boundary, ...)
//! lives next to the attach call. A uprobe replaces the first byte of an instruction with INT3
//! and later single-steps or emulates that instruction (kernel `kernel/events/uprobes.c`,
//! `arch/x86/kernel/uprobes.c`); placed in the middle of an instruction it rewrites an
//! immediate or displacement byte of the target's code, which then computes garbage or crashes.
//! The kernel cannot tell: it accepts any offset in the file.
//!
//! [`CodeFile::check`] takes the probes of one file and checks each, from the file's own tables:
//!
//! | check | refused with | overridden by |
//! |---|---|---|
//! | the offset lies in an executable `PT_LOAD` (ELF) / executable section (PE) | [`Refusal::NotExecutable`] | `--unsafe-offset` (raw offsets) |
//! | a function of the file's tables starts at the planned entry | [`Refusal::NoFunctionAtEntry`] | none |
//! | the offset lies in that function's extent `[start, start + size)` | [`Refusal::OutsideFunction`] | none |
//! | decoding the function from its start reaches the offset exactly | [`Refusal::NotInstructionBoundary`], [`Refusal::Undecodable`] | `--unsafe-offset` (raw offsets) |
//! | Go: the pclntab maps the address back to the same function | [`Refusal::PclntabMismatch`] | none |
//! | Go, .NET: the entry is where code begins after the previous function's end and the linker's padding | [`Refusal::EntryNotAfterPadding`] | none |
//! | Go: most entries of the whole table are preceded by padding (a wrong text start shifts them all) | [`Refusal::PclntabMisaligned`] | none |
//! | .NET: a RUNTIME_FUNCTION begins at the method's entry | [`Refusal::NoRuntimeFunction`] | none |
//! | ELF: the symbol's address lies in its section, and that section is executable | [`Refusal::SymbolOutsideSection`] | none |
//! | a uretprobe sits on a function's first byte | [`Refusal::UretprobeNotAtEntry`] | `--unsafe-offset` (raw offsets) |
//! | the file is x86-64 or aarch64 (ELF `e_machine`, PE `Machine`) | [`Refusal::UnsupportedMachine`] | none |
//! | aarch64: the kernel's uprobes accept the instruction (`arch/arm64/kernel/probes/decode-insn.c`: no exclusive load/store, exception, literal load, `MRS`/`MSR`, authenticated branch, blocked hint) | [`Refusal::KernelRejects`] | none: the kernel would fail the registration, so nothing can place it |
//! | aarch64: the offset lies in no `LDXR`..`STXR` sequence | [`Refusal::InsideExclusiveSequence`] | none: the kernel accepts it, and the target then retries its store-exclusive forever |
//!
//! "Raw offsets" are the `IMAGE:0xOFFSET` specs a user types: the user may know better than the
//! tables (hand-written assembly with data inside, a function the tables do not name), so the CLI
//! lets `--unsafe-offset` place them anyway, with a warning. A refusal of a probe netprobe
//! planned from the tables means the tables and the code disagree (a corrupt or unsupported
//! file): nothing overrides it but probing a raw offset.
//!
//! Every check that decodes uses the rules of the file's own architecture ([`crate::arch::Arch`],
//! from the file, never the host): on aarch64 an instruction boundary is a decodable 4-byte word
//! at a multiple of 4 from the function's start.
//!
//! Linear decoding from a function's start is exact for compiler output without data inside
//! functions (Go on amd64, GCC, Clang and the .NET JIT put jump tables in read-only data); where
//! the decoding meets bytes that do not decode, the probe is refused (refusing is the safe
//! answer when the gate cannot tell).
//!
//! One concept per file: `checks.rs` (the checks of one probe), `refusals.rs` (why a probe is
//! refused, and the texts that say it), `tables.rs` (each format's tables the checks read),
//! `units.rs` (a function as a table states it), `boundary.rs` (instruction boundaries),
//! `missing_offsets.rs` (why a symbol has no file offset).

mod checks;
mod missing_offsets;
mod refusals;
mod tables;
mod units;

pub use missing_offsets::missing_offset_reasons;
pub use refusals::Refusal;
pub(crate) use tables::CachedTables;
use tables::Tables;
pub use units::{CodeUnit, UnitSource};

use crate::addr::{FileOffset, VirtAddr};
use crate::bytes::FileBytes;
use crate::image::cached::{Image, Part};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One probe to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeRequest {
    /// Where the probe would go.
    pub offset: FileOffset,
    /// The file offset of the first byte of the function netprobe planned the probe for, from
    /// its symbol tables; `None` for a raw `IMAGE:0xOFFSET` the user typed (then the gate looks
    /// for the function that encloses the offset itself).
    pub planned_entry: Option<FileOffset>,
    /// A uretprobe (the kernel hijacks the return address at the stack top when it fires).
    pub uretprobe: bool,
}

/// What the gate found for a probe it lets through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The function whose decoding reached the offset; `None` when no table names a function
    /// around it (a raw offset in code no symbol covers: only its segment was checked).
    pub enclosing: Option<CodeUnit>,
}

/// One probed file, opened for checking.
pub struct CodeFile {
    path: PathBuf,
    /// Its bytes and tables: parsed once per run ([`crate::image::cached`]) for a file opened by
    /// [`CodeFile::open`].
    image: Arc<Image>,
}

impl CodeFile {
    /// Opens `path` (mapped; once per run, with its tables, [`crate::image::cached`]). Errors: I/O
    /// errors naming the path.
    pub fn open(path: &Path) -> crate::Result<CodeFile> {
        Ok(CodeFile {
            path: path.to_path_buf(),
            image: crate::image::cached::image(path)?,
        })
    }

    /// Checks bytes already read (a mutated copy in tests; `path` names it in messages).
    pub fn from_bytes(path: &Path, bytes: FileBytes) -> CodeFile {
        CodeFile {
            path: path.to_path_buf(),
            image: Arc::new(Image::uncached(path, bytes)),
        }
    }

    fn bytes(&self) -> &[u8] {
        self.image.bytes()
    }

    /// Checks every probe of `requests` against this file; one result per request, in order.
    /// Every probe is refused when the file shrank under its mapping while the gate read it
    /// ([`FileBytes::check_unchanged`]): the bytes it decoded there were zeros, not the file's
    /// (`00 00` decodes as an instruction, so zeros could pass the boundary check).
    pub fn check(&self, requests: &[ProbeRequest]) -> Vec<Result<Passed, Refusal>> {
        let results: Vec<_> = self.image.with(|p| {
            let tables = p.safety.get_or_init(&self.image, Part::SafetyTables, || {
                Arc::new(self.tables(p.bytes, || self.image.go(&self.path, p).ok().flatten()))
            });
            match tables.as_ref() {
                Ok(t) => requests.iter().map(|r| self.check_one(t, r)).collect(),
                Err(e) => requests.iter().map(|_| Err(e.clone())).collect(),
            }
        });
        match self.unchanged() {
            Ok(()) => results,
            Err(changed) => requests.iter().map(|_| Err(changed.clone())).collect(),
        }
    }

    /// `Ok` unless the file shrank under its mapping since it was mapped: then the refusal
    /// naming [`crate::Error::ChangedWhileRead`].
    fn unchanged(&self) -> Result<(), Refusal> {
        self.image
            .bytes()
            .check_unchanged(&self.path)
            .map_err(|e| Refusal::Unreadable(e.to_string()))
    }

    /// The function of the file's tables that starts at `entry` (the same one [`CodeFile::check`]
    /// checks a planned probe against) and its bytes: the whole function as its table bounds it
    /// (ELF symbol size, Go pclntab code size), cut at the end of its executable range.
    /// Errors: no such function ([`Refusal::NoFunctionAtEntry`]), or its table gives no size
    /// (`Ok` with `None` bytes). Functions inside a .NET bundle are not looked up.
    pub fn function_code(&self, entry: FileOffset) -> Result<(CodeUnit, Option<Vec<u8>>), Refusal> {
        self.image.with(|p| {
            let tables = p.safety.get_or_init(&self.image, Part::SafetyTables, || {
                Arc::new(self.tables(p.bytes, || self.image.go(&self.path, p).ok().flatten()))
            });
            let t = tables.as_ref().as_ref().map_err(Clone::clone)?;
            let ranges = match t {
                Tables::Elf { ranges, .. } | Tables::Pe { ranges, .. } => ranges,
            };
            let unit = self.planned_unit(t, ranges, entry)?;
            let Some(size) = unit.size.filter(|&z| z > 0) else {
                return Ok((unit, None));
            };
            let range = ranges
                .iter()
                .find(|c| c.holds_offset(unit.start.0))
                .ok_or(Refusal::NoFunctionAtEntry { entry })?;
            let end = (range.offset + range.len)
                .min(unit.start.0.saturating_add(size))
                .min(self.bytes().len() as u64);
            let code = self
                .bytes()
                .get(unit.start.0 as usize..end as usize)
                .map(<[u8]>::to_vec);
            self.unchanged()?;
            Ok((unit, code))
        })
    }

    /// The file's architecture, the rules its code is decoded by: ELF `e_machine`, PE
    /// `Machine`; `None` when its tables cannot be read or its machine is one netprobe has no
    /// rules for.
    pub fn arch(&self) -> Option<crate::arch::Arch> {
        self.image.with(|p| {
            let tables = p.safety.get_or_init(&self.image, Part::SafetyTables, || {
                Arc::new(self.tables(p.bytes, || self.image.go(&self.path, p).ok().flatten()))
            });
            match tables.as_ref() {
                Ok(Tables::Elf { arch, .. }) => Some(*arch),
                Ok(Tables::Pe { arch, .. }) => arch.ok(),
                Err(_) => None,
            }
        })
    }

    /// Every direct branch and call of the file's executable code that lands in code of the file,
    /// as `(target, source)` file offsets sorted by target: a linear sweep over each executable
    /// range (ELF `PT_LOAD` with `PF_X`). Hand-written code jumps into the middle of other
    /// functions (glibc's `__mempcpy_chk` continues inside `memmove` at a label after its first
    /// instructions, `sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S`), which no decoding of
    /// one function shows. Data inside code may add spurious targets (never fewer real ones once
    /// the sweep has resynchronised, which x86 does within a few instructions). Empty for a file
    /// whose tables cannot be read.
    pub fn direct_branch_targets(&self) -> Vec<(FileOffset, FileOffset)> {
        self.image.with(|p| {
            let tables = p.safety.get_or_init(&self.image, Part::SafetyTables, || {
                Arc::new(self.tables(p.bytes, || self.image.go(&self.path, p).ok().flatten()))
            });
            let Ok(t) = tables.as_ref() else {
                return Vec::new();
            };
            let (ranges, arch) = match t {
                Tables::Elf { ranges, arch, .. } => (ranges, *arch),
                Tables::Pe {
                    ranges,
                    arch: Ok(arch),
                    ..
                } => (ranges, *arch),
                Tables::Pe { .. } => return Vec::new(),
            };
            let mut out = Vec::new();
            for r in ranges {
                let end = (r.offset.saturating_add(r.len)).min(self.bytes().len() as u64);
                let Some(code) = self.bytes().get(r.offset as usize..end as usize) else {
                    continue;
                };
                for (source, target) in arch.direct_branches(code, VirtAddr(r.address)) {
                    if let Some(to) = ranges.iter().find(|c| c.holds_address(target)) {
                        out.push((
                            FileOffset(to.offset + (target - to.address)),
                            FileOffset(r.offset + (source - r.address)),
                        ));
                    }
                }
            }
            out.sort_unstable();
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::parser::ElfView;
    use crate::elf::LoadSegments;

    /// A file shrunk under its mapping after its tables were read, while the gate decodes its
    /// code: the pages past the new end read as zeros ([`crate::guarded_map`]), and zeros decode
    /// (`00 00` is `add [rax], al`), so a probe at an even offset of a function would pass on
    /// them. The gate looks at the mapping after decoding and refuses the probe, naming the
    /// change.
    #[test]
    fn a_file_shrunk_while_the_gate_reads_it_refuses_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exe");
        std::fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
        let bytes = FileBytes::open(&path).unwrap();
        let view = ElfView::parse(&path, &bytes).unwrap();
        let segments = LoadSegments::from_program_headers(&view.program_headers);
        // A function past the first pages with an instruction boundary at an even offset.
        let (entry, probe) = view
            .functions(&path)
            .unwrap()
            .iter()
            .filter(|f| f.size >= 64)
            .find_map(|f| {
                let at = segments.file_offset(f.vaddr).filter(|at| at.0 >= 1 << 16)?;
                let code = bytes.get(at.0 as usize..(at.0 + f.size) as usize)?;
                let t = (2..code.len()).step_by(2).find(|&t| {
                    crate::arch::Arch::host()
                        .expect("the tests run on x86_64 or aarch64")
                        .instruction_boundary(code, t)
                        == crate::arch::Boundary::Reached
                })?;
                Some((at, FileOffset(at.0 + t as u64)))
            })
            .expect("the test binary has such a function");
        drop(view);
        let request = ProbeRequest {
            offset: probe,
            planned_entry: Some(entry),
            uretprobe: false,
        };
        let file = CodeFile::from_bytes(&path, bytes);
        assert!(file.check(std::slice::from_ref(&request))[0].is_ok());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let refused = file.check(&[request]).remove(0).unwrap_err().to_string();
        assert!(
            refused.contains("changed size while it was read") && !refused.contains('\n'),
            "{refused}"
        );
    }
}
