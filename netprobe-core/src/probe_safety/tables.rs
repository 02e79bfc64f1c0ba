//! The tables of each format the checks read, built once per image
//! ([`crate::image::cached::Part::SafetyTables`]): ELF's executable `PT_LOAD` segments, sections and
//! function symbols, Go's pclntab (and how well its entries meet the code), a bundle's
//! ReadyToRun assemblies; PE's executable sections and RUNTIME_FUNCTIONS; and the padding
//! each format's linker leaves between functions.

use super::{CodeFile, Refusal};
use crate::arch::Arch;
use crate::dotnet::pe::PeSection;
use crate::dotnet::Assembly;
use crate::elf::parser::{ElfView, RawFunction};
use crate::elf::LoadSegments;
use crate::golang::GoBinary;
use crate::image::{sniff, ImageFormat};
use goblin::elf::section_header::{SHF_EXECINSTR, SHT_NOBITS};
use std::sync::Arc;

/// An executable range of the file: file offsets `[offset, offset + len)` at addresses
/// `[address, address + len)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodeRange {
    pub(super) offset: u64,
    pub(super) len: u64,
    pub(super) address: u64,
}

impl CodeRange {
    pub(super) fn holds_offset(&self, off: u64) -> bool {
        off >= self.offset && off - self.offset < self.len
    }
    pub(super) fn holds_address(&self, a: u64) -> bool {
        a >= self.address && a - self.address < self.len
    }
}

/// Section facts of an ELF file.
pub(crate) struct ElfSection {
    pub(super) name: String,
    pub(super) addr: u64,
    pub(super) size: u64,
    pub(super) executable: bool,
    pub(super) nobits: bool,
}

/// The tables of a file as the cache keeps them (a refusal when they cannot be read).
pub(crate) type CachedTables<'a> = Arc<Result<Tables<'a>, Refusal>>;

/// The format-specific tables of a file, read once per image ([`crate::image::cached::Part::SafetyTables`]).
pub(crate) enum Tables<'a> {
    Elf {
        /// The file's architecture (`e_machine`): the rules its code is decoded by.
        arch: Arch,
        ranges: Vec<CodeRange>,
        sections: Vec<ElfSection>,
        /// The file's ELF function symbols, read when a probe needs them
        /// ([`CodeFile::elf_functions`]), which a Go function's probe never does.
        elf_functions: std::sync::OnceLock<ElfFunctions>,
        go: Option<Arc<GoBinary<'a>>>,
        /// Go: how many function entries of the pairs checked (all neighbours, or up to
        /// [`GO_ALIGNMENT_PAIRS`] spread over the table) are not preceded by padding, of how
        /// many could be checked ([`CodeFile::go_alignment`]).
        go_misaligned: (usize, usize),
        /// A .NET single-file bundle's ReadyToRun assemblies, stored uncompressed after the
        /// app host's segments (`dotnet::bundle`): each one's bytes in the file, `(offset, len)`,
        /// and its tables with file offsets in the bundle. A probe there is checked as in the
        /// assembly.
        bundled: Vec<((u64, u64), Tables<'a>)>,
    },
    Pe {
        /// The image's architecture (its `Machine`, the .NET OS bits removed); `None` for a
        /// machine netprobe has no rules for (its value, to name it).
        arch: Result<Arch, u16>,
        ranges: Vec<CodeRange>,
        /// RUNTIME_FUNCTIONS: begin, end RVAs, sorted.
        runtime_functions: Vec<(u64, u64)>,
    },
}

/// The ELF function symbols of a file as the per-run cache holds them (none when unreadable),
/// with their indices sorted by address: a plan of every function of a library asks for each
/// one's symbols by address (2,200 in libc, each a scan of all its symbols before).
pub(crate) struct ElfFunctions {
    facts: Option<Arc<crate::elf::parser::ElfFacts>>,
    /// Indices into `facts.functions`, by address, then by index (equal addresses keep the
    /// table's order).
    by_address: Vec<usize>,
}

impl ElfFunctions {
    fn new(facts: Option<Arc<crate::elf::parser::ElfFacts>>) -> ElfFunctions {
        let all = facts.as_ref().map_or(&[][..], |f| f.functions.as_slice());
        let mut by_address: Vec<usize> = (0..all.len()).collect();
        by_address.sort_by_key(|&i| (all[i].vaddr.0, i));
        ElfFunctions { facts, by_address }
    }

    /// Every function symbol, in table order.
    pub(super) fn all(&self) -> &[RawFunction] {
        self.facts.as_ref().map_or(&[], |f| f.functions.as_slice())
    }

    /// The function symbols at `address`, in table order.
    pub(super) fn at(&self, address: u64) -> impl Iterator<Item = &RawFunction> {
        let all = self.all();
        let from = self
            .by_address
            .partition_point(|&i| all[i].vaddr.0 < address);
        self.by_address[from..]
            .iter()
            .map(move |&i| &all[i])
            .take_while(move |s| s.vaddr.0 == address)
    }
}

/// Neighbouring pairs of a Go table [`CodeFile::go_alignment`] checks at most. A wrong text
/// start moves every entry alike, so pairs spread over the table show it as surely as all of
/// them, without decoding 70,000 records and reading every page of the code for one probe
/// (dockerd: `trace --dry-run dockerd:main.main` spent most of its time there).
const GO_ALIGNMENT_PAIRS: u64 = 1024;

/// The byte Go's linker pads between functions with: INT3 on amd64
/// (`cmd/link/internal/amd64/obj.go`: `CodePad: []byte{0xCC}`); zero on arm64, whose
/// `cmd/link/internal/arm64/obj.go` sets no `CodePad` (the gap is the section's zero fill,
/// `udf #0` as instructions).
pub(super) fn go_pad(arch: Arch) -> u8 {
    match arch {
        Arch::X86_64 => 0xcc,
        Arch::Aarch64 => 0x00,
    }
}

/// Bytes crossgen2 and the JIT leave between ReadyToRun method bodies: INT3 (the object
/// writer's code-section fill) and zero (section alignment).
pub(super) fn r2r_pad(b: u8) -> bool {
    b == 0xcc || b == 0x00 || b == 0x90
}

impl CodeFile {
    /// The tables of a file whose bytes are `bytes`; `go` gives its Go tables (parsed once per
    /// image by the caller's cache), asked only of an ELF file.
    pub(super) fn tables<'a>(
        &self,
        bytes: &'a [u8],
        go: impl FnOnce() -> Option<Arc<GoBinary<'a>>>,
    ) -> Result<Tables<'a>, Refusal> {
        let unreadable = |e: crate::Error| Refusal::Unreadable(e.to_string());
        let image = &self.image;
        match sniff(bytes) {
            Some(ImageFormat::Elf) => {
                // The headers only: the function symbols are read on demand.
                let view = ElfView::parse(&self.path, bytes).map_err(unreadable)?;
                let arch = view.arch().ok_or_else(|| {
                    Refusal::UnsupportedMachine(crate::arch::unsupported_elf_machine(
                        view.header.e_machine,
                    ))
                })?;
                let ranges: Vec<CodeRange> =
                    LoadSegments::from_program_headers(&view.program_headers)
                        .0
                        .iter()
                        .filter(|s| s.executable)
                        .map(|s| CodeRange {
                            offset: s.offset,
                            len: s.filesz,
                            address: s.vaddr,
                        })
                        .collect();
                let sections = view
                    .section_headers
                    .iter()
                    .map(|sh| ElfSection {
                        name: view.section_name(sh).unwrap_or("").to_string(),
                        addr: sh.sh_addr,
                        size: sh.sh_size,
                        executable: sh.sh_flags & u64::from(SHF_EXECINSTR) != 0,
                        nobits: sh.sh_type == SHT_NOBITS,
                    })
                    .collect();
                let go = go();
                let go_misaligned = go
                    .as_deref()
                    .map_or((0, 0), |g| self.go_alignment(&ranges, g, go_pad(arch)));
                let bundled = match image.bundle(&self.path) {
                    Ok(Some(bundle)) => bundle
                        .mapped_assemblies()
                        .into_iter()
                        .filter_map(|(e, asm)| {
                            let asm = asm.ok().filter(|a| a.r2r().is_some())?;
                            Some(((e.offset.0, e.size), pe_tables(&asm)))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                Ok(Tables::Elf {
                    arch,
                    ranges,
                    sections,
                    elf_functions: std::sync::OnceLock::new(),
                    go,
                    go_misaligned,
                    bundled,
                })
            }
            Some(ImageFormat::Pe) => {
                let asm = image.assembly(&self.path).map_err(unreadable)?;
                Ok(pe_tables(&asm))
            }
            None => Err(Refusal::Unreadable(format!(
                "{} is neither ELF nor PE",
                self.path.display()
            ))),
        }
    }

    /// The file's ELF function symbols (`.symtab`, `.dynsym`), read once per run
    /// ([`crate::image::cached::Image::elf`]); empty when they cannot be read.
    pub(super) fn elf_functions<'t>(
        &self,
        slot: &'t std::sync::OnceLock<ElfFunctions>,
    ) -> &'t ElfFunctions {
        slot.get_or_init(|| ElfFunctions::new(self.image.elf(&self.path).ok()))
    }

    /// The padding check over pairs of neighbouring functions of a Go table: (entries not
    /// preceded by padding, entries checked). Right tables have none (checked on the sample
    /// app's builds, esbuild built by Go 1.15-1.20, Debian's Go binaries); a table read with a
    /// wrong text start misses the code with nearly every entry. Every pair of a table of up to
    /// [`GO_ALIGNMENT_PAIRS`] functions is checked, else that many pairs spread evenly over it.
    fn go_alignment(&self, ranges: &[CodeRange], go: &GoBinary<'_>, pad: u8) -> (usize, usize) {
        let table = go.pclntab();
        let pairs = table.len().saturating_sub(1);
        let (mut failed, mut checked) = (0, 0);
        for k in 0..pairs.min(GO_ALIGNMENT_PAIRS) {
            // Evenly spread: k * pairs / GO_ALIGNMENT_PAIRS (all of them for a small table).
            let i = if pairs <= GO_ALIGNMENT_PAIRS {
                k
            } else {
                k * pairs / GO_ALIGNMENT_PAIRS
            };
            let (Some(f), Some(next)) = (table.function(i), table.function(i + 1)) else {
                continue;
            };
            match self.gap_check(ranges, f.code_end().0, next.entry.0, |b| b == pad) {
                Some(Some(_)) => {
                    failed += 1;
                    checked += 1;
                }
                Some(None) => checked += 1,
                None => {}
            }
        }
        (failed, checked)
    }
}

/// The tables of a ReadyToRun assembly: its executable sections (at file offsets in the file
/// that stores it: shifted by [`Assembly::file_base`] inside a bundle) and RUNTIME_FUNCTIONS.
fn pe_tables<'a>(asm: &Assembly) -> Tables<'a> {
    let base = asm.file_base().0;
    let ranges = asm
        .sections()
        .iter()
        .filter(|s| s.is_executable())
        .map(|s| {
            let r = pe_range(s);
            CodeRange {
                offset: r.offset + base,
                ..r
            }
        })
        .collect();
    let runtime_functions = asm
        .r2r()
        .map(|r| {
            r.runtime_functions
                .iter()
                .map(|f| (u64::from(f.begin), u64::from(f.end)))
                .collect()
        })
        .unwrap_or_default();
    let machine = asm.pe().machine;
    Tables::Pe {
        arch: Arch::of_pe_machine(machine).ok_or(machine),
        ranges,
        runtime_functions,
    }
}

fn pe_range(s: &PeSection) -> CodeRange {
    CodeRange {
        offset: u64::from(s.pointer_to_raw_data),
        // Only the bytes both in the file and in memory are code at their file offsets.
        len: u64::from(s.size_of_raw_data.min(s.memory_size())),
        address: u64::from(s.virtual_address),
    }
}
