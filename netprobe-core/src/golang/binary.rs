//! [`GoBinary`]: one Go ELF executable, its function table, build info and probe points.

use super::buildinfo::{BuildInfo, GoVersion};
use super::moduledata::{find_moduledata, LinkImage, TableFacts};
use super::pclntab::{magic_candidates_iter, GoFunction, Pclntab, PclntabResolver, PclntabVersion};
use super::prologue::{self, GSource, StackCheck};
use crate::abi::go::{abi_for, GoAbi};
use crate::addr::{AddressSet, FileOffset, VirtAddr};
use crate::arch::Arch;
use crate::elf::parser::ElfView;
use crate::elf::LoadSegments;
use crate::image::format::{sniff, ImageFormat};
use crate::symbol::{Address, Symbol, SymbolKind, SymbolOrigin, SymbolSource};
use crate::{Error, Result};
use goblin::elf::section_header::SHT_NOBITS;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Section names under which the Go linker writes the function table: `.gopclntab` in
/// executables, `.data.rel.ro.gopclntab` in internally linked PIEs (it must be relocated there).
/// Externally linked PIEs have neither: the system linker merges it into `.data.rel.ro`.
const PCLNTAB_SECTIONS: [&str; 2] = [".gopclntab", ".data.rel.ro.gopclntab"];

/// Where the function table was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PclntabLocation {
    /// The section it is, or `None` when it was found by scanning for its magic.
    pub section: Option<String>,
    /// File offset of its first byte.
    pub file_offset: FileOffset,
    /// Link-time address of its first byte; `None` when no loadable segment holds it.
    pub vaddr: Option<VirtAddr>,
    /// The address 1.18+ entries are offsets from (`textStart`); 0 before 1.18.
    pub text_start: u64,
    /// Whether `text_start` came from a dynamic relocation because the header field in the file
    /// was left zero for the loader.
    pub text_start_from_relocation: bool,
    /// Where `text_start` came from (the rule: [`super::moduledata`]).
    pub text_start_source: TextStartSource,
}

/// Where a table's text start came from, in the order [`super::moduledata`] tries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum TextStartSource {
    /// Go 1.2 and 1.16 layouts: entries are absolute addresses; no text start is needed.
    NotNeeded,
    /// The header's `textStart` word.
    Header,
    /// The relative relocation (`R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`) on the header's
    /// `textStart` word.
    Relocation,
    /// The `text` field of `runtime.firstmoduledata`, found at `moduledata_vaddr`.
    ModuleData { moduledata_vaddr: u64 },
    /// The `runtime.text` symbol.
    RuntimeTextSymbol,
}

/// A probe point: an address in the file's link-time address space and where it is in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProbePoint {
    pub vaddr: VirtAddr,
    /// `None` when no executable `PT_LOAD` holds the address.
    pub file_offset: Option<FileOffset>,
}

/// Where to probe one Go function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProbePoints {
    /// The function's first byte.
    pub entry: ProbePoint,
    /// Where an entry probe counts each call once: after the stack-check prologue, or the entry
    /// when the function has none (see [`prologue`]).
    pub entry_probe: ProbePoint,
    /// The recognised stack check, if any.
    pub stack_check: Option<StackCheck>,
    /// Every RET of the function: return probes without uretprobes (which crash Go programs whose
    /// stacks move; Go `src/runtime/traceback.go`, "unexpected return pc").
    pub rets: Vec<ProbePoint>,
    /// Direct jumps out of the function (tail calls): returns through them pass no RET here.
    pub tail_jumps: Vec<VirtAddr>,
    /// Bytes decoded: the function's code length.
    pub code_size: u64,
}

/// A Go executable: its function table, build info and segments, borrowing the file's bytes.
pub struct GoBinary<'a> {
    path: PathBuf,
    bytes: &'a [u8],
    segments: LoadSegments,
    pclntab: Pclntab<'a>,
    location: PclntabLocation,
    buildinfo: Option<BuildInfo>,
    resolver: OnceLock<PclntabResolver<'a>>,
    /// The ELF file's architecture (`e_machine`); `None` for a machine netprobe has no rules for.
    arch: Option<Arch>,
}

impl std::fmt::Debug for GoBinary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoBinary")
            .field("path", &self.path)
            .field("location", &self.location)
            .field("version", &self.pclntab.version())
            .field("functions", &self.pclntab.len())
            .field("buildinfo", &self.buildinfo)
            .finish()
    }
}

impl<'a> GoBinary<'a> {
    /// Reads the Go facts of the ELF file `bytes` (read from `path`, which is used in messages).
    ///
    /// Returns `Ok(None)` when the file is not ELF or is ELF without a Go function table (not a
    /// Go binary); `Err(Malformed)` when the ELF headers are corrupt or a section named as the
    /// table holds no valid table.
    pub fn parse(path: impl AsRef<Path>, bytes: &'a [u8]) -> Result<Option<GoBinary<'a>>> {
        let path = path.as_ref();
        if sniff(bytes) != Some(ImageFormat::Elf) {
            return Ok(None);
        }
        let elf = ElfView::parse(path, bytes)?;
        let segments = LoadSegments::from_program_headers(&elf.program_headers);

        let named = elf.section_headers.iter().find_map(|sh| {
            let name = elf.section_name(sh)?;
            (PCLNTAB_SECTIONS.contains(&name) && sh.sh_type != SHT_NOBITS)
                .then(|| (name.to_string(), sh.sh_offset, sh.sh_size, sh.sh_addr))
        });
        let (pclntab, text_start_source, section, file_offset, vaddr) = match named {
            Some((name, off, size, addr)) => {
                let data = crate::bytes::slice(bytes, off, size).ok_or_else(|| {
                    Error::malformed(
                        path,
                        format!("section {name} runs past the end of the file"),
                    )
                })?;
                let table = Pclntab::parse(data)
                    .map_err(|e| Error::malformed(path, format!("section {name}: {e}")))?;
                let (table, source) =
                    establish_text_start(&elf, &segments, table, Some(VirtAddr(addr)))
                        .map_err(|e| text_start_unknown(path, &format!("section {name}: {e}")))?;
                (table, source, Some(name), off, Some(VirtAddr(addr)))
            }
            None => match scan_for_pclntab(&elf, bytes, &segments) {
                Ok(Some((table, source, off, vaddr))) => (table, source, None, off, vaddr),
                Ok(None) => return Ok(None),
                Err(e) => return Err(text_start_unknown(path, &e)),
            },
        };
        let text_start_from_relocation = text_start_source == TextStartSource::Relocation;

        let buildinfo_section = elf.section_headers.iter().find_map(|sh| {
            let name = elf.section_name(sh)?;
            (name == ".go.buildinfo" && sh.sh_type != SHT_NOBITS)
                .then_some((sh.sh_offset, sh.sh_size))
        });
        let buildinfo = BuildInfo::locate(bytes, buildinfo_section)
            .and_then(|blob| BuildInfo::parse(blob, bytes, &segments));

        let location = PclntabLocation {
            section,
            file_offset: FileOffset(file_offset),
            vaddr,
            text_start: pclntab.text_start(),
            text_start_from_relocation,
            text_start_source,
        };
        Ok(Some(GoBinary {
            path: path.to_path_buf(),
            bytes,
            segments,
            pclntab,
            location,
            buildinfo,
            resolver: OnceLock::new(),
            arch: elf.arch(),
        }))
    }

    /// The binary's architecture (ELF `e_machine`): the rules its code is decoded by. `None`
    /// for a machine netprobe has no rules for (its functions then get no probe points).
    pub fn arch(&self) -> Option<Arch> {
        self.arch
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The path the binary was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The Go release that built the binary, from `.go.buildinfo`; `None` when that is absent
    /// (Go before 1.13, or removed) or names no `goX.Y`.
    pub fn version(&self) -> Option<GoVersion> {
        self.buildinfo.as_ref().and_then(BuildInfo::version)
    }

    /// The oldest Go release that writes this binary's table layout: a lower bound on the
    /// compiler version that holds even without build info.
    pub fn version_lower_bound(&self) -> GoVersion {
        let (major, minor) = self.pclntab.version().oldest_go();
        GoVersion::new(major, minor, 0)
    }

    /// The main module's path (`mod` line of the build info), e.g.
    /// `netprobe.example/sampleapp`; `None` without module info.
    pub fn module_path(&self) -> Option<&str> {
        self.buildinfo.as_ref()?.main_module.as_deref()
    }

    /// The build info, when the binary has it.
    pub fn build_info(&self) -> Option<&BuildInfo> {
        self.buildinfo.as_ref()
    }

    /// The function table.
    pub fn pclntab(&self) -> &Pclntab<'a> {
        &self.pclntab
    }

    /// Where the function table was found.
    pub fn pclntab_location(&self) -> &PclntabLocation {
        &self.location
    }

    /// The file's loadable segments.
    pub fn segments(&self) -> &LoadSegments {
        &self.segments
    }

    /// Every function of the table, sorted by entry.
    pub fn functions(&self) -> impl Iterator<Item = GoFunction<'a>> + '_ {
        self.pclntab.functions()
    }

    fn resolver(&self) -> &PclntabResolver<'a> {
        self.resolver
            .get_or_init(|| PclntabResolver::new(self.pclntab.clone()))
    }

    /// Functions named exactly `name` as the table spells it (`main.(*Calc).Add`,
    /// `net/http.(*conn).serve`); usually one, empty when there is none.
    pub fn functions_named(&self, name: &str) -> Vec<GoFunction<'a>> {
        self.resolver().by_name(name)
    }

    /// The function whose `[entry, end)` holds `addr`; `None` outside the table. A binary search
    /// of the table (as [`PclntabResolver::at`]), without building the name index.
    pub fn function_at(&self, addr: VirtAddr) -> Option<GoFunction<'a>> {
        self.pclntab
            .find_index(addr)
            .and_then(|i| self.pclntab.function(i))
    }

    /// The calling convention: from the build info's version and the architecture when known
    /// (register ABI since 1.17 on amd64, 1.18 on arm64); else from the table layout (1.18+ register, 1.2 stack); for the 1.16 layout, which
    /// Go 1.16 (stack) and 1.17 (register) share, from where the stack checks of the first
    /// functions read g: R14 under the register ABI, thread-local storage before it.
    pub fn abi(&self) -> GoAbi {
        if let Some(v) = self.version() {
            return abi_for(&v, self.arch().unwrap_or(Arch::X86_64));
        }
        match self.pclntab.version() {
            PclntabVersion::Go12 => GoAbi::Stack,
            PclntabVersion::Go118 | PclntabVersion::Go120 => GoAbi::Register,
            PclntabVersion::Go116 => {
                let (mut r14, mut tls) = (0, 0);
                for f in self.functions().take(400) {
                    let arch = self.arch.unwrap_or(Arch::X86_64);
                    match self
                        .code(&f)
                        .and_then(|c| prologue::stack_check(arch, c, f.entry))
                    {
                        Some(c) if c.g_source == GSource::R14 => r14 += 1,
                        Some(_) => tls += 1,
                        None => {}
                    }
                }
                if r14 > tls {
                    GoAbi::Register
                } else {
                    GoAbi::Stack
                }
            }
        }
    }

    /// The bytes of `f`'s code (`[entry, entry + size)`), cut at the end of the executable
    /// segment that holds the entry; `None` when no executable segment holds it.
    pub fn code(&self, f: &GoFunction<'_>) -> Option<&'a [u8]> {
        let seg = self.segments.executable_containing(f.entry)?;
        let start = self.segments.code_file_offset(f.entry)?.0;
        let in_segment = seg
            .vaddr
            .saturating_add(seg.filesz)
            .saturating_sub(f.entry.0);
        crate::bytes::slice(self.bytes, start, f.size().min(in_segment))
    }

    fn point(&self, vaddr: VirtAddr) -> ProbePoint {
        ProbePoint {
            vaddr,
            file_offset: self.segments.code_file_offset(vaddr),
        }
    }

    /// Where to probe `f`: the entry, the post-prologue entry probe, every return instruction,
    /// by the binary's architecture. `None` when its code is not in the file (no executable
    /// segment holds it) or the binary's machine is one netprobe has no rules for.
    pub fn probe_points(&self, f: &GoFunction<'_>) -> Option<ProbePoints> {
        let arch = self.arch?;
        let code = self.code(f)?;
        let stack_check = prologue::stack_check(arch, code, f.entry);
        let scan = arch.scan(code, f.entry);
        Some(ProbePoints {
            entry: self.point(f.entry),
            entry_probe: self.point(stack_check.map_or(f.entry, |c| c.after)),
            stack_check,
            rets: scan.rets.into_iter().map(|r| self.point(r)).collect(),
            tail_jumps: scan.tail_jumps,
            code_size: code.len() as u64,
        })
    }

    /// `f` as a [`Symbol`] (kind GoFunction, origin GoPclntab, size = code length).
    pub fn symbol(&self, f: &GoFunction<'_>) -> Symbol {
        Symbol {
            name: f.name.to_string(),
            kind: SymbolKind::GoFunction,
            origin: SymbolOrigin::GoPclntab,
            address: Address::Virt(f.entry),
            size: Some(f.size()),
            file_offset: self.segments.code_file_offset(f.entry),
        }
    }
}

impl GoBinary<'_> {
    /// [`SymbolSource::symbols`] of the functions whose name `keep` accepts, in the same order
    /// (only their records are decoded), from one pass over the table that also puts the entry
    /// of every function it lists into `entries` when given (for telling which ELF symbols of
    /// the file name a Go function again; [`GoBinary::lists_entry`] tells it of one address
    /// without the set). `may_match` sees each name's bytes first: a name it refuses is never
    /// checked as UTF-8 nor shown to `keep` (it must accept every name `keep` could accept).
    /// The names kept are bounded as [`SymbolSource::symbols`] bounds them: past the bound, the
    /// answer is [`crate::Error::NamesTooLarge`].
    pub fn symbols_where(
        &self,
        may_match: &dyn Fn(&[u8]) -> bool,
        keep: &dyn Fn(&str) -> bool,
        mut entries: Option<&mut AddressSet>,
    ) -> Result<Vec<Symbol>> {
        let n = self.pclntab.len();
        if let Some(set) = entries.as_deref_mut() {
            set.reserve(n.min(1 << 20) as usize);
        }
        let mut kept = Vec::new();
        let mut budget = crate::name_budget::NameBudget::for_file(self.bytes.len());
        for i in 0..n {
            // What `Pclntab::function` needs to decode: the name, the entry and the next one.
            let Some(raw) = self.pclntab.function_name_bytes(i) else {
                continue;
            };
            let (Some(entry), Some(_)) = (self.pclntab.entry(i), self.pclntab.entry(i + 1)) else {
                continue;
            };
            if let Some(set) = entries.as_deref_mut() {
                set.insert(entry.0);
            }
            if may_match(raw) && self.pclntab.function_name(i).is_some_and(|n| keep(&n)) {
                if let Some(f) = self.pclntab.function(i) {
                    if !budget.take(f.name.len()) {
                        return Err(budget.error(&self.path));
                    }
                    kept.push(self.symbol(&f));
                }
            }
        }
        Ok(kept)
    }

    /// Whether a function [`SymbolSource::symbols`] lists starts at `vaddr` (what
    /// [`GoBinary::symbols_where`] puts into its `entries`), found by binary search: the
    /// table's entries are sorted (checked when it is parsed).
    pub fn lists_entry(&self, vaddr: VirtAddr) -> bool {
        let Some(last) = self.pclntab.find_index(vaddr) else {
            return false;
        };
        // Functions sharing an entry sit side by side; `find_index` gives the last of them.
        (0..=last)
            .rev()
            .take_while(|&i| self.pclntab.entry(i) == Some(vaddr))
            .any(|i| {
                self.pclntab.function_name_bytes(i).is_some() && self.pclntab.entry(i + 1).is_some()
            })
    }
}

impl SymbolSource for GoBinary<'_> {
    /// Every function of the table, sorted by entry.
    fn symbols(&self) -> Result<Vec<Symbol>> {
        // Reserved up front (the table's count, capped: a hostile count costs no more).
        let mut out = Vec::with_capacity(self.pclntab.len().min(1 << 20) as usize);
        // Each function's name is an offset into `funcnametab`, which many functions may share:
        // the copies are bounded ([`crate::name_budget`]).
        let mut budget = crate::name_budget::NameBudget::for_file(self.bytes.len());
        for f in self.functions() {
            if !budget.take(f.name.len()) {
                return Err(budget.error(&self.path));
            }
            out.push(self.symbol(&f));
        }
        Ok(out)
    }
}

/// The table with its text start established by the rule [`super::moduledata`] documents, and
/// where the value came from; `Err(reason)` when no source gives a value that passes the checks
/// (then no function address can be known, and none is given).
fn establish_text_start<'a>(
    elf: &ElfView<'_>,
    segments: &LoadSegments,
    table: Pclntab<'a>,
    table_vaddr: Option<VirtAddr>,
) -> std::result::Result<(Pclntab<'a>, TextStartSource), String> {
    if !table.version().entries_are_text_offsets() {
        return Ok((table, TextStartSource::NotNeeded));
    }
    let header = *table.header();
    let mut tried = Vec::new();
    let checked = |table: Pclntab<'a>, source: TextStartSource, tried: &mut Vec<String>| {
        match entries_in_code(segments, &table) {
            Ok(()) => Some((table, source)),
            Err(e) => {
                tried.push(format!(
                    "{source:?} gives {:#x}, but {e}",
                    table.text_start()
                ));
                None
            }
        }
    };
    // 1. The header word.
    if let Some(v) = header.text_start_field.filter(|&v| v != 0) {
        if let Some(ok) = checked(
            table.clone().with_text_start(v),
            TextStartSource::Header,
            &mut tried,
        ) {
            return Ok(ok);
        }
    }
    // 2. The relocation on the header word (`table + 8 + 2 * ptrsize`).
    let field = table_vaddr.and_then(|v| v.0.checked_add(8 + 2 * u64::from(header.ptr_size)));
    let relocs = elf.relative_relocations();
    if let Some(v) = field
        .and_then(|at| relocs.get(&at).copied())
        .filter(|&v| v != 0)
    {
        if let Some(ok) = checked(
            table.clone().with_text_start(v),
            TextStartSource::Relocation,
            &mut tried,
        ) {
            return Ok(ok);
        }
    }
    // 3. The module data's `text` field.
    match table_vaddr {
        Some(vaddr) => {
            let image = LinkImage {
                segments: segments
                    .0
                    .iter()
                    .filter_map(|s| {
                        Some((s.vaddr, crate::bytes::slice(elf.bytes, s.offset, s.filesz)?))
                    })
                    .collect(),
                relative: relocs,
            };
            let facts = TableFacts {
                vaddr: vaddr.0,
                ptr_size: header.ptr_size,
                nfunc: header.nfunc,
                funcname_offset: header.funcname_offset,
                pctab_offset: header.pctab_offset,
                functab_offset: header.functab_offset,
            };
            match find_moduledata(&image, &facts) {
                Some(md) => {
                    let t = table.clone().with_text_start(md.text);
                    if t.entry(0).map(|e| e.0) != Some(md.minpc) {
                        tried.push(format!(
                            "runtime.firstmoduledata at {:#x} has text {:#x} but minpc {:#x} is not the first function's entry",
                            md.vaddr, md.text, md.minpc
                        ));
                    } else if let Some(ok) = checked(
                        t,
                        TextStartSource::ModuleData {
                            moduledata_vaddr: md.vaddr,
                        },
                        &mut tried,
                    ) {
                        return Ok(ok);
                    }
                }
                None => tried.push("no runtime.firstmoduledata points at the table".into()),
            }
        }
        None => {
            tried.push("the table is in no loadable segment, so nothing can point at it".into())
        }
    }
    // 4. The `runtime.text` symbol.
    match elf.symbol_value("runtime.text") {
        Some(v) => {
            if let Some(ok) = checked(
                table.clone().with_text_start(v),
                TextStartSource::RuntimeTextSymbol,
                &mut tried,
            ) {
                return Ok(ok);
            }
        }
        None => tried.push("no runtime.text symbol".into()),
    }
    Err(format!(
        "Go function table entries are offsets from a text start this file does not establish \
         (header textStart is {:#x}; {}): function addresses unknown, nothing can be probed",
        header.text_start_field.unwrap_or(0),
        tried.join("; ")
    ))
}

/// The error for a table whose text start is not established: which sources were tried and what
/// netprobe does instead of guessing.
fn text_start_unknown(path: &Path, why: &str) -> Error {
    Error::Unsupported(format!(
        "{}: {why}; netprobe lists no Go function addresses rather than guess (a binary with a \
         symbol table still lists its ELF functions): report the Go version that built it",
        path.display()
    ))
}

/// The cross-check every text start passes: the text start, the first function's entry and the
/// last function's entry all lie in executable `PT_LOAD` segments.
fn entries_in_code(
    segments: &LoadSegments,
    table: &Pclntab<'_>,
) -> std::result::Result<(), String> {
    let in_code =
        |a: Option<VirtAddr>| a.is_some_and(|a| segments.executable_containing(a).is_some());
    let last = table
        .header()
        .nfunc
        .checked_sub(1)
        .and_then(|i| table.entry(i));
    if !in_code(Some(VirtAddr(table.text_start()))) {
        return Err("it is in no executable segment".into());
    }
    if !in_code(table.entry(0)) || !in_code(last) {
        return Err("the first or last function then lies outside every executable segment".into());
    }
    Ok(())
}

/// Finds a table by its magic when no section is named for it (externally linked PIE: inside
/// `.data.rel.ro`; files without section headers: anywhere). A candidate counts when it parses
/// (header sane, offsets in bounds, entries sorted, records repeating their entries) and its text
/// start is established (which checks its first and last entries lie in an executable segment).
/// Returns the table, where its text start came from, its file offset and its link-time address;
/// `Err` with the reason when a table parsed but its text start could not be established.
#[allow(clippy::type_complexity)]
fn scan_for_pclntab<'a>(
    elf: &ElfView<'_>,
    bytes: &'a [u8],
    segments: &LoadSegments,
) -> std::result::Result<Option<(Pclntab<'a>, TextStartSource, u64, Option<VirtAddr>)>, String> {
    let mut unestablished = None;
    // Where Go's linker puts the table when it names no section for it (an externally linked
    // PIE: `.data.rel.ro`, `cmd/link/internal/ld/data.go`) is searched first, then, for a file
    // without section headers, the whole file minus what was searched: Debian's dockerd (75 MB)
    // holds its table 6.9 MB into `.data.rel.ro`, 58 MB into the file.
    let preferred: Vec<(u64, u64)> = elf
        .section_headers
        .iter()
        .filter(|sh| sh.sh_type != SHT_NOBITS && sh.sh_size > 0)
        .filter(|sh| {
            elf.section_name(sh)
                .is_some_and(|n| n.starts_with(".data.rel.ro"))
        })
        .map(|sh| (sh.sh_offset, sh.sh_offset.saturating_add(sh.sh_size)))
        .collect();
    let in_preferred = |at: u64| preferred.iter().any(|&(lo, hi)| at >= lo && at < hi);
    let first = preferred.iter().flat_map(|&(lo, hi)| {
        let (lo, hi) = (
            (lo as usize).min(bytes.len()),
            (hi as usize).min(bytes.len()),
        );
        magic_candidates_iter(&bytes[lo..hi]).map(move |at| at + lo)
    });
    // A file with section headers and no section named for the table keeps it in
    // `.data.rel.ro` if it is Go's at all: the rest of the file is searched only when there are
    // no section headers to tell (`sstrip`-ed files). Every native library of a process would
    // otherwise be searched whole (libcoreclr's 7 MB for each `trace -p` of a .NET process).
    let whole = if elf.section_headers.is_empty() {
        bytes
    } else {
        &bytes[..0]
    };
    let rest = magic_candidates_iter(whole).filter(|&at| !in_preferred(at as u64));
    let table_at = |at: u64| {
        // The table cannot run past the section (or else the segment, or the file) holding it.
        let end = elf
            .section_headers
            .iter()
            .filter(|sh| sh.sh_type != SHT_NOBITS && sh.sh_size > 0)
            .find(|sh| at >= sh.sh_offset && at - sh.sh_offset < sh.sh_size)
            .map(|sh| sh.sh_offset.saturating_add(sh.sh_size))
            .or_else(|| {
                segments
                    .0
                    .iter()
                    .find(|s| at >= s.offset && at - s.offset < s.filesz)
                    .map(|s| s.offset.saturating_add(s.filesz))
            })
            .unwrap_or(bytes.len() as u64);
        let data = crate::bytes::slice(bytes, at, end.saturating_sub(at))?;
        let table = Pclntab::parse(data).ok()?;
        let vaddr = segments.vaddr_of_file_offset(FileOffset(at));
        Some((establish_text_start(elf, segments, table, vaddr), vaddr))
    };
    // The table the module data points at, tried before the megabytes ahead of it are searched
    // (as a candidate of the same region, checked the same way; not found, the search decides).
    let pointed_at = super::moduledata::table_named_by_dynamic_symbol(elf, bytes, segments)
        .filter(|&at| in_preferred(at) || elf.section_headers.is_empty());
    if let Some(at) = pointed_at {
        if let Some((Ok((table, source)), vaddr)) = table_at(at) {
            return Ok(Some((table, source, at, vaddr)));
        }
    }
    for at in first.chain(rest) {
        let at = at as u64;
        match table_at(at) {
            None => continue,
            Some((Ok((table, source)), vaddr)) => return Ok(Some((table, source, at, vaddr))),
            Some((Err(e), _)) => {
                unestablished.get_or_insert(format!("table at file offset {at:#x}: {e}"));
            }
        }
    }
    unestablished.map_or(Ok(None), Err)
}
