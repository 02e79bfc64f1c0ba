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
//!
//! "Raw offsets" are the `IMAGE:0xOFFSET` specs a user types: the user may know better than the
//! tables (hand-written assembly with data inside, a function the tables do not name), so the CLI
//! lets `--unsafe-offset` place them anyway, with a warning. A refusal of a probe netprobe
//! planned from the tables means the tables and the code disagree (a corrupt or unsupported
//! file): nothing overrides it but probing a raw offset.
//!
//! Linear decoding from a function's start is exact for compiler output without data inside
//! functions (Go on amd64, GCC, Clang and the .NET JIT put jump tables in read-only data); where
//! the decoding meets bytes that do not decode, the probe is refused (refusing is the safe
//! answer when the gate cannot tell).

use crate::addr::{FileOffset, Rva, VirtAddr};
use crate::bytes::FileBytes;
use crate::dotnet::pe::PeSection;
use crate::dotnet::Assembly;
use crate::elf::parser::{ElfView, RawFunction};
use crate::elf::LoadSegments;
use crate::golang::GoBinary;
use crate::image::cached::{Image, Parsed, Part};
use crate::image::format::{sniff, ImageFormat};
use crate::x86;
use goblin::elf::section_header::{SHF_EXECINSTR, SHT_NOBITS};
use serde::Serialize;
use std::fmt;
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

/// Which table a function came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitSource {
    /// ELF `.symtab`/`.dynsym` (`STT_FUNC`, `STT_GNU_IFUNC`).
    ElfSymbol,
    /// Go's pclntab.
    Pclntab,
    /// A ReadyToRun RUNTIME_FUNCTIONS entry (a method body, funclet or cold part).
    RuntimeFunction,
}

impl UnitSource {
    fn label(self) -> &'static str {
        match self {
            UnitSource::ElfSymbol => "ELF symbol table",
            UnitSource::Pclntab => "Go pclntab",
            UnitSource::RuntimeFunction => "ReadyToRun RUNTIME_FUNCTIONS",
        }
    }
}

/// A function as one of the file's tables states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeUnit {
    /// Its name (`main.Fib`, `np_add`), or `RUNTIME_FUNCTION #N` for .NET code.
    pub name: String,
    pub source: UnitSource,
    /// Its first byte in the file's address space (ELF: link-time address; PE: RVA).
    pub address: u64,
    /// Its first byte in the file.
    pub start: FileOffset,
    /// Its extent in bytes; `None` when the table does not say (ELF size 0).
    pub size: Option<u64>,
}

impl CodeUnit {
    /// `main.Fib+0x12` for a file offset inside it.
    pub fn at(&self, off: FileOffset) -> String {
        match off.0.checked_sub(self.start.0) {
            Some(0) => self.name.clone(),
            Some(d) => format!("{}+{d:#x}", self.name),
            None => format!("{}-{:#x}", self.name, self.start.0 - off.0),
        }
    }
}

/// Why the gate refuses a probe. `Display` is the reason, for a one-line message that names the
/// function and the offset around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The file cannot be read as ELF or PE (or at all).
    Unreadable(String),
    /// No executable segment (ELF `PT_LOAD` with `PF_X`, file-backed part) or executable section
    /// (PE `IMAGE_SCN_MEM_EXECUTE`) holds the offset.
    NotExecutable { format: &'static str },
    /// No function of the file's tables starts at the planned entry.
    NoFunctionAtEntry { entry: FileOffset },
    /// The offset lies outside the function's extent.
    OutsideFunction { unit: CodeUnit },
    /// Decoding the function from its start gives an instruction that covers the offset.
    NotInstructionBoundary {
        unit: CodeUnit,
        instruction: FileOffset,
        len: usize,
    },
    /// Decoding from the function's start meets bytes that are no x86-64 instruction before it
    /// reaches the offset.
    Undecodable { unit: CodeUnit, at: FileOffset },
    /// Go: the pclntab maps the probe's address to another function (or none).
    PclntabMismatch {
        address: u64,
        planned: String,
        found: Option<String>,
    },
    /// Go, .NET: the bytes between the previous function's end and the entry are not the
    /// linker's padding, so the entry is not where a function's code begins.
    EntryNotAfterPadding {
        unit: CodeUnit,
        at: FileOffset,
        byte: u8,
    },
    /// Go: most entries of the whole table are not preceded by the linker's padding: the table
    /// is read with a wrong text start (or is corrupt), so none of its addresses is trusted.
    PclntabMisaligned { failed: usize, checked: usize },
    /// .NET: no RUNTIME_FUNCTION begins at the method's entry.
    NoRuntimeFunction { rva: Rva },
    /// ELF: the symbol's address lies outside the section it is defined in, or that section is
    /// not executable.
    SymbolOutsideSection {
        unit: CodeUnit,
        section: String,
        executable: bool,
    },
    /// A uretprobe that is not on a function's first byte.
    UretprobeNotAtEntry { unit: CodeUnit },
}

impl Refusal {
    /// Whether `--unsafe-offset` may override this refusal of a raw `IMAGE:0xOFFSET` probe: the
    /// checks the user may know better than the tables (the offset's instruction boundary, its
    /// segment, a uretprobe's position). Refusals of planned probes are never overridden.
    pub fn overridable(&self) -> bool {
        matches!(
            self,
            Refusal::NotExecutable { .. }
                | Refusal::NotInstructionBoundary { .. }
                | Refusal::Undecodable { .. }
                | Refusal::UretprobeNotAtEntry { .. }
                | Refusal::OutsideFunction { .. }
        )
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unreadable(e) => write!(f, "the file cannot be checked: {e}"),
            Refusal::NotExecutable { format } => write!(
                f,
                "it lies in no executable {format} of the file, so it is not code"
            ),
            Refusal::NoFunctionAtEntry { entry } => write!(
                f,
                "no function of the file's tables starts at the planned entry {entry}"
            ),
            Refusal::OutsideFunction { unit } => match unit.size {
                Some(z) => write!(
                    f,
                    "it lies outside {} (file offsets {}..{:#x}, from the {})",
                    unit.name,
                    unit.start,
                    unit.start.0.saturating_add(z),
                    unit.source.label()
                ),
                None => write!(f, "it lies before {} ({})", unit.name, unit.start),
            },
            Refusal::NotInstructionBoundary {
                unit,
                instruction,
                len,
            } => write!(
                f,
                "it is not an instruction boundary: decoding {} from its start ({}) gives a {len}-byte instruction at {} ({}) that covers it",
                unit.name,
                unit.start,
                instruction,
                unit.at(*instruction)
            ),
            Refusal::Undecodable { unit, at } => write!(
                f,
                "the bytes at {at} ({}) do not decode as x86-64 instructions, so it cannot be shown to be an instruction boundary",
                unit.at(*at)
            ),
            Refusal::PclntabMismatch {
                address,
                planned,
                found,
            } => match found {
                Some(other) => write!(
                    f,
                    "the Go pclntab maps its address {address:#x} to {other}, not to {planned}"
                ),
                None => write!(
                    f,
                    "the Go pclntab maps its address {address:#x} to no function (planned for {planned})"
                ),
            },
            Refusal::EntryNotAfterPadding { unit, at, byte } => write!(
                f,
                "the {} says {} starts at {}, but the byte {byte:#04x} at {at} before it is neither the previous function's code nor the linker's padding, so that entry is not where code begins",
                unit.source.label(),
                unit.name,
                unit.start
            ),
            Refusal::PclntabMisaligned { failed, checked } => write!(
                f,
                "the Go pclntab's entries do not line up with the code ({failed} of {checked} function entries are not preceded by the linker's padding), so its text start is wrong or the table is corrupt, and none of its addresses is trusted"
            ),
            Refusal::NoRuntimeFunction { rva } => write!(
                f,
                "no RUNTIME_FUNCTION of the ReadyToRun image begins at the method's entry (RVA {rva})"
            ),
            Refusal::SymbolOutsideSection {
                unit,
                section,
                executable,
            } => {
                if *executable {
                    write!(
                        f,
                        "the symbol {} at {:#x} lies outside its own section {section}",
                        unit.name, unit.address
                    )
                } else {
                    write!(
                        f,
                        "the symbol {} lies in section {section}, which is not executable",
                        unit.name
                    )
                }
            }
            Refusal::UretprobeNotAtEntry { unit } => write!(
                f,
                "a uretprobe must sit on a function's first byte (it replaces the return address at the top of the stack when it fires), and {} is not",
                unit.at(unit.start)
            ),
        }
    }
}

/// What the gate found for a probe it lets through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passed {
    /// The function whose decoding reached the offset; `None` when no table names a function
    /// around it (a raw offset in code no symbol covers: only its segment was checked).
    pub enclosing: Option<CodeUnit>,
}

/// Where decoding `code` linearly from its first byte meets `target` (a byte index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// An instruction starts at `target`.
    Reached,
    /// The instruction at `start`, `len` bytes long, covers `target`.
    Inside { start: usize, len: usize },
    /// The bytes at `at` do not decode (or an instruction is cut off by the end of `code`)
    /// before `target`.
    Undecodable { at: usize },
}

/// Decodes `code` (x86-64) from its first byte until an instruction starts at or covers
/// `target`. `target == 0` is always reached; a `target` at or past `code.len()` is reached
/// only when the instructions end exactly there. Never reads outside `code`, never panics.
pub fn instruction_boundary(code: &[u8], target: usize) -> Boundary {
    let mut pos = 0usize;
    for instr in x86::instructions(code, VirtAddr(0)) {
        if pos == target {
            return Boundary::Reached;
        }
        if instr.is_invalid() {
            return Boundary::Undecodable { at: pos };
        }
        let len = instr.len();
        if target < pos + len {
            return Boundary::Inside { start: pos, len };
        }
        pos += len;
    }
    if pos == target {
        Boundary::Reached
    } else {
        Boundary::Undecodable { at: pos }
    }
}

/// An executable range of the file: file offsets `[offset, offset + len)` at addresses
/// `[address, address + len)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodeRange {
    offset: u64,
    len: u64,
    address: u64,
}

impl CodeRange {
    fn holds_offset(&self, off: u64) -> bool {
        off >= self.offset && off - self.offset < self.len
    }
    fn holds_address(&self, a: u64) -> bool {
        a >= self.address && a - self.address < self.len
    }
}

/// One probed file, opened for checking.
pub struct CodeFile {
    path: PathBuf,
    /// Its bytes and tables: parsed once per run ([`crate::image::cached`]) for a file opened by
    /// [`CodeFile::open`].
    image: Arc<Image>,
}

/// Section facts of an ELF file.
pub(crate) struct ElfSection {
    name: String,
    addr: u64,
    size: u64,
    executable: bool,
    nobits: bool,
}

/// The tables of a file as the cache keeps them (a refusal when they cannot be read).
pub(crate) type CachedTables<'a> = Arc<Result<Tables<'a>, Refusal>>;

/// The format-specific tables of a file, read once per image ([`crate::image::cached::Part::SafetyTables`]).
pub(crate) enum Tables<'a> {
    Elf {
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
    fn all(&self) -> &[RawFunction] {
        self.facts.as_ref().map_or(&[], |f| f.functions.as_slice())
    }

    /// The function symbols at `address`, in table order.
    fn at(&self, address: u64) -> impl Iterator<Item = &RawFunction> {
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

/// Go's amd64 linker pads between functions with INT3 (`cmd/link/internal/amd64/obj.go`:
/// `CodePad: []byte{0xCC}`).
const GO_PAD: u8 = 0xcc;

/// Bytes crossgen2 and the JIT leave between ReadyToRun method bodies: INT3 (the object
/// writer's code-section fill) and zero (section alignment).
fn r2r_pad(b: u8) -> bool {
    b == 0xcc || b == 0x00 || b == 0x90
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
            let tables = p
                .safety
                .get_or_init(&self.image, Part::SafetyTables, || Arc::new(self.tables(p)));
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
            let tables = p
                .safety
                .get_or_init(&self.image, Part::SafetyTables, || Arc::new(self.tables(p)));
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

    /// Every direct branch and call of the file's executable code that lands in code of the file,
    /// as `(target, source)` file offsets sorted by target: a linear sweep over each executable
    /// range (ELF `PT_LOAD` with `PF_X`). Hand-written code jumps into the middle of other
    /// functions (glibc's `__mempcpy_chk` continues inside `memmove` at a label after its first
    /// instructions, `sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S`), which no decoding of
    /// one function shows. Data inside code may add spurious targets (never fewer real ones once
    /// the sweep has resynchronised, which x86 does within a few instructions). Empty for a file
    /// whose tables cannot be read.
    pub fn direct_branch_targets(&self) -> Vec<(FileOffset, FileOffset)> {
        use iced_x86::OpKind;
        self.image.with(|p| {
            let tables = p
                .safety
                .get_or_init(&self.image, Part::SafetyTables, || Arc::new(self.tables(p)));
            let Ok(t) = tables.as_ref() else {
                return Vec::new();
            };
            let ranges = match t {
                Tables::Elf { ranges, .. } | Tables::Pe { ranges, .. } => ranges,
            };
            let mut out = Vec::new();
            for r in ranges {
                let end = (r.offset.saturating_add(r.len)).min(self.bytes().len() as u64);
                let Some(code) = self.bytes().get(r.offset as usize..end as usize) else {
                    continue;
                };
                for i in x86::instructions(code, VirtAddr(r.address)) {
                    if !matches!(
                        i.op0_kind(),
                        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
                    ) {
                        continue;
                    }
                    let target = i.near_branch_target();
                    if let Some(to) = ranges.iter().find(|c| c.holds_address(target)) {
                        out.push((
                            FileOffset(to.offset + (target - to.address)),
                            FileOffset(r.offset + (i.ip() - r.address)),
                        ));
                    }
                }
            }
            out.sort_unstable();
            out
        })
    }

    fn tables<'a>(&self, p: &Parsed<'a>) -> Result<Tables<'a>, Refusal> {
        let unreadable = |e: crate::Error| Refusal::Unreadable(e.to_string());
        let image = &self.image;
        match sniff(p.bytes) {
            Some(ImageFormat::Elf) => {
                // The headers only: the function symbols are read on demand.
                let view = ElfView::parse(&self.path, p.bytes).map_err(unreadable)?;
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
                let go = image.go(&self.path, p).ok().flatten();
                let go_misaligned = go
                    .as_deref()
                    .map_or((0, 0), |g| self.go_alignment(&ranges, g));
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

    fn check_one(&self, t: &Tables<'_>, r: &ProbeRequest) -> Result<Passed, Refusal> {
        if let Tables::Elf { bundled, .. } = t {
            let inside = |&&((at, len), _): &&((u64, u64), Tables<'_>)| {
                r.offset.0 >= at && r.offset.0 - at < len
            };
            if let Some((_, member)) = bundled.iter().find(inside) {
                return self.check_one(member, r);
            }
        }
        let (ranges, format) = match t {
            Tables::Elf { ranges, .. } => (ranges, "segment (PT_LOAD with PF_X)"),
            Tables::Pe { ranges, .. } => (ranges, "section"),
        };
        let Some(range) = ranges.iter().find(|c| c.holds_offset(r.offset.0)) else {
            return Err(Refusal::NotExecutable { format });
        };
        let address = range.address + (r.offset.0 - range.offset);
        let unit = match r.planned_entry {
            Some(entry) => Some(self.planned_unit(t, ranges, entry)?),
            None => self.enclosing_unit(t, ranges, address),
        };
        let Some(unit) = unit else {
            return Ok(Passed { enclosing: None });
        };
        let end = unit.size.map(|z| unit.start.0.saturating_add(z));
        if r.offset.0 < unit.start.0 || end.is_some_and(|e| r.offset.0 >= e) {
            return Err(Refusal::OutsideFunction { unit });
        }
        if r.uretprobe && r.offset != unit.start {
            return Err(Refusal::UretprobeNotAtEntry { unit });
        }
        if let (
            Tables::Elf {
                go_misaligned: (failed, checked),
                ..
            },
            UnitSource::Pclntab,
        ) = (t, unit.source)
        {
            // A table whose entries mostly miss the code (a wrong text start shifts them all)
            // places no probe, even where one entry happens to look right.
            if *checked >= 8 && 2 * failed > *checked {
                return Err(Refusal::PclntabMisaligned {
                    failed: *failed,
                    checked: *checked,
                });
            }
        }
        if let (Tables::Elf { go: Some(go), .. }, UnitSource::Pclntab) = (t, unit.source) {
            let found = go.function_at(VirtAddr(address));
            if found.as_ref().map(|f| f.entry.0) != Some(unit.address) {
                return Err(Refusal::PclntabMismatch {
                    address,
                    planned: unit.name.clone(),
                    found: found.map(|f| f.name.to_string()),
                });
            }
        }
        // The bytes from the start to the probe, within the executable range holding the start.
        let start_range = ranges
            .iter()
            .find(|c| c.holds_offset(unit.start.0))
            .ok_or(Refusal::NotExecutable { format })?;
        let range_end = start_range.offset + start_range.len;
        let code = self
            .bytes()
            .get(unit.start.0 as usize..range_end.min(self.bytes().len() as u64) as usize)
            .unwrap_or(&[]);
        let target = (r.offset.0 - unit.start.0) as usize;
        match instruction_boundary(code, target) {
            Boundary::Reached => {}
            Boundary::Inside { start, len } => {
                return Err(Refusal::NotInstructionBoundary {
                    instruction: FileOffset(unit.start.0 + start as u64),
                    unit,
                    len,
                })
            }
            Boundary::Undecodable { at } => {
                return Err(Refusal::Undecodable {
                    at: FileOffset(unit.start.0 + at as u64),
                    unit,
                })
            }
        }
        self.check_entry(t, ranges, &unit)?;
        Ok(Passed {
            enclosing: Some(unit),
        })
    }

    /// The function netprobe planned a probe for: the one of the file's tables that starts at
    /// `entry` (Go: the pclntab's; .NET: the RUNTIME_FUNCTION's; else the ELF symbol's).
    fn planned_unit(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        entry: FileOffset,
    ) -> Result<CodeUnit, Refusal> {
        let missing = Refusal::NoFunctionAtEntry { entry };
        let Some(range) = ranges.iter().find(|c| c.holds_offset(entry.0)) else {
            return Err(missing);
        };
        let address = range.address + (entry.0 - range.offset);
        let unit = match t {
            Tables::Elf {
                go, elf_functions, ..
            } => go
                .as_ref()
                .and_then(|g| g.function_at(VirtAddr(address)))
                .filter(|f| f.entry.0 == address)
                .map(|f| CodeUnit {
                    name: f.name.to_string(),
                    source: UnitSource::Pclntab,
                    address,
                    start: entry,
                    size: Some(f.size()),
                })
                .or_else(|| {
                    self.elf_functions(elf_functions)
                        .at(address)
                        .max_by_key(|s| s.size)
                        .map(|s| elf_unit(s, entry))
                }),
            Tables::Pe {
                runtime_functions, ..
            } => {
                let found = runtime_functions
                    .binary_search_by_key(&address, |&(b, _)| b)
                    .ok();
                match found {
                    Some(i) => Some(rf_unit(runtime_functions, i, entry)),
                    None => return Err(Refusal::NoRuntimeFunction { rva: Rva(address) }),
                }
            }
        };
        unit.ok_or(missing)
    }

    /// The function of the file's tables that holds `address` (a raw offset's): the pclntab's
    /// (up to its code's end), else an ELF symbol with a size, else a RUNTIME_FUNCTION.
    fn enclosing_unit(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        address: u64,
    ) -> Option<CodeUnit> {
        let offset_of = |a: u64| {
            ranges
                .iter()
                .find(|c| c.holds_address(a))
                .map(|c| FileOffset(c.offset + (a - c.address)))
        };
        match t {
            Tables::Elf {
                go, elf_functions, ..
            } => {
                let from_go = go
                    .as_ref()
                    .and_then(|g| g.function_at(VirtAddr(address)))
                    .filter(|f| address < f.code_end().0)
                    .and_then(|f| {
                        Some(CodeUnit {
                            name: f.name.to_string(),
                            source: UnitSource::Pclntab,
                            address: f.entry.0,
                            start: offset_of(f.entry.0)?,
                            size: Some(f.size()),
                        })
                    });
                from_go.or_else(|| {
                    // The innermost sized symbol around the address (the one starting last).
                    self.elf_functions(elf_functions)
                        .all()
                        .iter()
                        .filter(|s| {
                            s.size > 0 && address >= s.vaddr.0 && address - s.vaddr.0 < s.size
                        })
                        .max_by_key(|s| (s.vaddr.0, std::cmp::Reverse(s.size)))
                        .and_then(|s| Some(elf_unit(s, offset_of(s.vaddr.0)?)))
                })
            }
            Tables::Pe {
                runtime_functions, ..
            } => {
                let i = runtime_functions
                    .partition_point(|&(b, _)| b <= address)
                    .checked_sub(1)?;
                let (_, end) = runtime_functions[i];
                if address >= end {
                    return None;
                }
                Some(rf_unit(
                    runtime_functions,
                    i,
                    offset_of(runtime_functions[i].0)?,
                ))
            }
        }
    }

    /// Checks of a function's entry itself, by the table it comes from.
    fn check_entry(
        &self,
        t: &Tables<'_>,
        ranges: &[CodeRange],
        unit: &CodeUnit,
    ) -> Result<(), Refusal> {
        match (t, unit.source) {
            (Tables::Elf { go: Some(go), .. }, UnitSource::Pclntab) => {
                // The previous function's code, then INT3 up to this entry.
                let table = go.pclntab();
                let Some(i) = table.find_index(VirtAddr(unit.address)) else {
                    return Ok(());
                };
                let Some(prev) = i.checked_sub(1).and_then(|p| table.function(p)) else {
                    return Ok(());
                };
                self.padding_before(ranges, unit, prev.code_end().0, |b| b == GO_PAD)
            }
            (
                Tables::Pe {
                    runtime_functions, ..
                },
                UnitSource::RuntimeFunction,
            ) => {
                let i = runtime_functions.partition_point(|&(b, _)| b < unit.address);
                let Some(&(_, prev_end)) = i.checked_sub(1).and_then(|p| runtime_functions.get(p))
                else {
                    return Ok(());
                };
                self.padding_before(ranges, unit, prev_end, r2r_pad)
            }
            (
                Tables::Elf {
                    sections,
                    elf_functions,
                    ..
                },
                UnitSource::ElfSymbol,
            ) => {
                let Some(sym) = self
                    .elf_functions(elf_functions)
                    .at(unit.address)
                    .find(|s| s.name == unit.name)
                else {
                    return Ok(());
                };
                // Special indices (SHN_ABS, SHN_COMMON, ...) name no section; files without
                // section headers have none to check.
                let Some(sec) = sections.get(sym.section).filter(|_| sym.section < 0xff00) else {
                    return Ok(());
                };
                let inside =
                    !sec.nobits && unit.address >= sec.addr && unit.address - sec.addr < sec.size;
                if !inside || !sec.executable {
                    return Err(Refusal::SymbolOutsideSection {
                        unit: unit.clone(),
                        section: if sec.name.is_empty() {
                            format!("#{}", sym.section)
                        } else {
                            sec.name.clone()
                        },
                        executable: sec.executable,
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The bytes from `prev_end` (the previous function's end, same address space) up to the
    /// unit's start must all be padding; a previous function ending after the start, or too far
    /// away (over 4 KiB: another section's gap), is not checked.
    fn padding_before(
        &self,
        ranges: &[CodeRange],
        unit: &CodeUnit,
        prev_end: u64,
        pad: impl Fn(u8) -> bool,
    ) -> Result<(), Refusal> {
        match self.gap_check(ranges, prev_end, unit.address, pad) {
            Some(Some((at, byte))) => Err(Refusal::EntryNotAfterPadding {
                unit: unit.clone(),
                at,
                byte,
            }),
            _ => Ok(()),
        }
    }

    /// The bytes between `prev_end` and `start` (addresses): `None` when not checkable (no gap,
    /// a gap over 4 KiB or outside the file's code), else the first byte that is not padding.
    fn gap_check(
        &self,
        ranges: &[CodeRange],
        prev_end: u64,
        start: u64,
        pad: impl Fn(u8) -> bool,
    ) -> Option<Option<(FileOffset, u8)>> {
        let gap = start.checked_sub(prev_end)?;
        if gap == 0 || gap > 4096 {
            return None;
        }
        let range = ranges.iter().find(|c| c.holds_address(prev_end))?;
        let from = range.offset + (prev_end - range.address);
        let bytes = self.bytes().get(from as usize..(from + gap) as usize)?;
        Some(
            bytes
                .iter()
                .position(|&b| !pad(b))
                .map(|i| (FileOffset(from + i as u64), bytes[i])),
        )
    }

    /// The file's ELF function symbols (`.symtab`, `.dynsym`), read once per run
    /// ([`crate::image::cached::Image::elf`]); empty when they cannot be read.
    fn elf_functions<'t>(&self, slot: &'t std::sync::OnceLock<ElfFunctions>) -> &'t ElfFunctions {
        slot.get_or_init(|| ElfFunctions::new(self.image.elf(&self.path).ok()))
    }

    /// The padding check over pairs of neighbouring functions of a Go table: (entries not
    /// preceded by padding, entries checked). Right tables have none (checked on the sample
    /// app's builds, esbuild built by Go 1.15-1.20, Debian's Go binaries); a table read with a
    /// wrong text start misses the code with nearly every entry. Every pair of a table of up to
    /// [`GO_ALIGNMENT_PAIRS`] functions is checked, else that many pairs spread evenly over it.
    fn go_alignment(&self, ranges: &[CodeRange], go: &GoBinary<'_>) -> (usize, usize) {
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
            match self.gap_check(ranges, f.code_end().0, next.entry.0, |b| b == GO_PAD) {
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

/// Why each symbol of the file at `path` has no file offset (`None` for those that have one):
/// one short phrase each, for listings (`netprobe symbols`) and errors. The reasons, by what the
/// file's headers say about the symbol's address:
/// - a Go pclntab function of a 1.18+ layout whose text start is unknown (header field zero, no
///   relocation supplies it): its "address" is an offset from the start of text;
/// - ELF: in a segment that is not executable (data); in the zero-filled tail of a segment
///   (`p_memsz` beyond `p_filesz`); outside every `PT_LOAD`;
/// - PE: outside the file data of every section;
/// - an address in a live process (perf map): JIT code, in no file.
pub fn missing_offset_reasons<'s>(
    path: &Path,
    symbols: impl IntoIterator<Item = &'s crate::symbol::Symbol>,
) -> Vec<Option<String>> {
    use crate::symbol::{Address, SymbolOrigin};
    let image = crate::image::cached::image(path).ok();
    let elf = image
        .as_ref()
        .filter(|i| sniff(i.bytes()) == Some(ImageFormat::Elf));
    // Read only when a symbol has no file offset: the ELF facts hold every symbol of the file,
    // which a one-name listing (`symbols dockerd main.main`) does not otherwise read.
    let read_segments = || {
        elf.and_then(|i| match i.elf(path) {
            Ok(facts) => Some(facts.segments.clone()),
            // Headers readable, symbol tables not: the segments still tell.
            Err(_) => ElfView::parse(path, i.bytes())
                .ok()
                .map(|v| LoadSegments::from_program_headers(&v.program_headers)),
        })
    };
    let mut segments: Option<Option<LoadSegments>> = None;
    let go_text_unknown = || {
        elf.and_then(|i| {
            i.with_go(path, |g| {
                g.is_some_and(|g| {
                    g.pclntab().version().entries_are_text_offsets()
                        && g.pclntab().text_start() == 0
                })
            })
            .ok()
        })
        .unwrap_or(false)
    };
    let mut text_unknown: Option<bool> = None;
    symbols
        .into_iter()
        .map(|s| {
            if s.file_offset.is_some() {
                return None;
            }
            Some(match s.address {
                Address::Runtime(_) => "JIT code: in no file".to_string(),
                Address::Rva(rva) => {
                    format!("RVA {rva} lies outside the file data of every section")
                }
                Address::Virt(v) => {
                    if s.origin == SymbolOrigin::GoPclntab
                        && *text_unknown.get_or_insert_with(go_text_unknown)
                    {
                        return Some(
                            "text start unknown: the pclntab header's text-start field is zero, so this is an offset from the start of text, not an address"
                                .to_string(),
                        );
                    }
                    let seg = segments.get_or_insert_with(read_segments).as_ref().and_then(|segs| {
                        segs.0
                            .iter()
                            .find(|g| v.0 >= g.vaddr && v.0 - g.vaddr < g.memsz.max(g.filesz))
                    });
                    match seg {
                        Some(g) if !g.executable => {
                            format!("address {v} lies in a segment that is not executable (data)")
                        }
                        Some(_) => format!(
                            "address {v} lies in the zero-filled part of its segment (no bytes in the file)"
                        ),
                        None => format!("address {v} lies outside every executable segment"),
                    }
                }
            })
        })
        .collect()
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
    Tables::Pe {
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

fn elf_unit(s: &RawFunction, start: FileOffset) -> CodeUnit {
    CodeUnit {
        name: s.name.clone(),
        source: UnitSource::ElfSymbol,
        address: s.vaddr.0,
        start,
        size: (s.size > 0).then_some(s.size),
    }
}

fn rf_unit(rfs: &[(u64, u64)], i: usize, start: FileOffset) -> CodeUnit {
    let (begin, end) = rfs[i];
    CodeUnit {
        name: format!("RUNTIME_FUNCTION #{i}"),
        source: UnitSource::RuntimeFunction,
        address: begin,
        start,
        size: Some(end.saturating_sub(begin)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// x86-64 instructions with their lengths, immediates and displacements as `0x11` bytes that
    /// the generator replaces with random ones (they never change an instruction's length).
    const INSTRUCTIONS: &[&[u8]] = &[
        &[0x90],                                                       // nop
        &[0xc3],                                                       // ret
        &[0xcc],                                                       // int3
        &[0x55],                                                       // push rbp
        &[0x48, 0x89, 0xe5],                                           // mov rbp, rsp
        &[0x48, 0x83, 0xec, 0x11],                                     // sub rsp, imm8
        &[0x49, 0x3b, 0x66, 0x11],                                     // cmp rsp, [r14+disp8]
        &[0x0f, 0x86, 0x11, 0x11, 0x11, 0x11],                         // jbe rel32
        &[0x74, 0x11],                                                 // je rel8
        &[0xe8, 0x11, 0x11, 0x11, 0x11],                               // call rel32
        &[0xe9, 0x11, 0x11, 0x11, 0x11],                               // jmp rel32
        &[0xb8, 0x11, 0x11, 0x11, 0x11],                               // mov eax, imm32
        &[0x48, 0xb8, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11], // mov rax, imm64
        &[0x48, 0x8b, 0x44, 0x24, 0x11],                               // mov rax, [rsp+disp8]
        &[0x48, 0x8d, 0x05, 0x11, 0x11, 0x11, 0x11],                   // lea rax, [rip+disp32]
        &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],                         // nop word [rax+rax]
        &[0xf3, 0x0f, 0x1e, 0xfa],                                     // endbr64
        &[0xc2, 0x11, 0x11],                                           // ret imm16
        &[0x48, 0x81, 0xc4, 0x11, 0x11, 0x11, 0x11],                   // add rsp, imm32
    ];

    fn stream() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
        proptest::collection::vec(
            (
                0..INSTRUCTIONS.len(),
                proptest::collection::vec(any::<u8>(), 8),
            ),
            1..40,
        )
        .prop_map(|parts| {
            let mut code = Vec::new();
            let mut starts = Vec::new();
            for (i, imm) in parts {
                starts.push(code.len());
                let mut k = 0;
                for &b in INSTRUCTIONS[i] {
                    if b == 0x11 {
                        code.push(imm[k % imm.len()]);
                        k += 1;
                    } else {
                        code.push(b);
                    }
                }
            }
            starts.push(code.len());
            (code, starts)
        })
    }

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
                let t = (2..code.len())
                    .step_by(2)
                    .find(|&t| instruction_boundary(code, t) == Boundary::Reached)?;
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

    proptest! {
        /// Code made of instructions of known lengths: an offset is accepted exactly when an
        /// instruction starts there (or it is the end of the code).
        #[test]
        fn accepted_iff_an_instruction_starts_there((code, starts) in stream(), pick in any::<prop::sample::Index>()) {
            let target = pick.index(code.len() + 1);
            let verdict = instruction_boundary(&code, target);
            if starts.contains(&target) {
                prop_assert_eq!(verdict, Boundary::Reached);
            } else {
                let Boundary::Inside { start, len } = verdict else {
                    return Err(TestCaseError::fail(format!("{verdict:?} at {target}")));
                };
                prop_assert!(starts.contains(&start));
                prop_assert!(start < target && target < start + len);
            }
        }

        /// Arbitrary bytes: never a panic, never an answer outside the code, and an accepted
        /// offset is one the instruction sequence reaches (re-decoding up to it lands on it).
        #[test]
        fn arbitrary_bytes_are_answered_within_bounds(code in proptest::collection::vec(any::<u8>(), 0..64), target in 0usize..80) {
            match instruction_boundary(&code, target) {
                Boundary::Reached => prop_assert!(target <= code.len()),
                Boundary::Inside { start, len } => {
                    prop_assert!(start < target && target < start + len && start + len <= code.len());
                    prop_assert_eq!(instruction_boundary(&code, start), Boundary::Reached);
                }
                Boundary::Undecodable { at } => prop_assert!(at < target),
            }
        }
    }

    #[test]
    fn an_offset_inside_an_immediate_is_not_a_boundary() {
        // mov eax, 0xc3c3c3c3; ret
        let code = [0xb8, 0xc3, 0xc3, 0xc3, 0xc3, 0xc3];
        assert_eq!(instruction_boundary(&code, 0), Boundary::Reached);
        assert_eq!(
            instruction_boundary(&code, 2),
            Boundary::Inside { start: 0, len: 5 }
        );
        assert_eq!(instruction_boundary(&code, 5), Boundary::Reached);
        assert_eq!(instruction_boundary(&code, 6), Boundary::Reached);
        // Cut off: the instruction runs past the bytes given.
        assert_eq!(
            instruction_boundary(&code[..3], 3),
            Boundary::Undecodable { at: 0 }
        );
    }
}
