//! Turning an ELF file's function symbols into [`Symbol`]s with file offsets, and explaining how
//! an offset comes about.

use super::parser::{parse_elf, ElfFacts, ElfView, RawFunction};
use super::segments::LoadSegments;
use super::types::{OffsetExplanation, SectionInfo};
use crate::addr::VirtAddr;
use crate::bytes::FileBytes;
use crate::error::Result;
use crate::formulas;
use crate::symbol::{Address, Symbol, SymbolKind, SymbolOrigin, SymbolSource};
use goblin::elf::section_header::SHF_EXECINSTR;
use goblin::elf::Elf;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An ELF file opened for symbol lookup.
#[derive(Debug)]
pub struct ElfFile {
    path: PathBuf,
    bytes: FileBytes,
    /// Where its function symbols come from when they are parsed once elsewhere and kept
    /// (`ElfFile::open`, [`crate::image::cached`]); `None` for bytes handed in.
    facts: Option<FactsSource>,
}

/// The function symbols and segments of an opened file, as another layer parses them once and
/// keeps them ([`crate::image::cached`]); asked for by the first [`ElfFile::symbols`].
#[derive(Clone)]
pub struct FactsSource(Arc<ReadFacts>);

/// Reads (or hands out the kept) facts of the file its argument names in messages.
type ReadFacts = dyn Fn(&Path) -> Result<Arc<ElfFacts>> + Send + Sync;

impl FactsSource {
    pub fn new(f: impl Fn(&Path) -> Result<Arc<ElfFacts>> + Send + Sync + 'static) -> FactsSource {
        FactsSource(Arc::new(f))
    }
}

impl std::fmt::Debug for FactsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FactsSource")
    }
}

impl ElfFile {
    /// Wraps bytes already read (or mapped) and checks their headers. Errors:
    /// [`crate::Error::NotAnObjectFile`] when they are no ELF file, [`crate::Error::Malformed`]
    /// when the headers are truncated or corrupt. (`ElfFile::open`, in [`crate::image::cached`],
    /// opens a path once per run.)
    pub fn from_bytes(path: &Path, bytes: FileBytes) -> Result<ElfFile> {
        ElfView::parse(path, &bytes)?;
        Ok(ElfFile {
            path: path.to_path_buf(),
            bytes,
            facts: None,
        })
    }

    /// Bytes whose headers were checked, with their function symbols from `facts`.
    pub fn with_facts(path: &Path, bytes: FileBytes, facts: FactsSource) -> ElfFile {
        ElfFile {
            path: path.to_path_buf(),
            bytes,
            facts: Some(facts),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The headers, with tables read on demand (cheap).
    pub fn view(&self) -> Result<ElfView<'_>> {
        ElfView::parse(&self.path, &self.bytes)
    }

    /// goblin's full parse of the file (every table; slower than [`ElfFile::view`]).
    pub fn elf(&self) -> Result<Elf<'_>> {
        parse_elf(&self.path, &self.bytes)
    }

    /// The `PT_LOAD` segments.
    pub fn segments(&self) -> Result<LoadSegments> {
        Ok(LoadSegments::from_program_headers(
            &self.view()?.program_headers,
        ))
    }

    /// Section headers with names (empty when the file has none, e.g. after `strip --strip-all
    /// --remove-section-headers`).
    pub fn sections(&self) -> Result<Vec<SectionInfo>> {
        Ok(sections_of(&self.view()?))
    }

    /// How the file offset of `vaddr` comes about: the segment formula netprobe uses and the
    /// `.text` section formula ([`formulas::text_section_offset`]), side by side.
    pub fn explain(&self, vaddr: VirtAddr) -> Result<OffsetExplanation> {
        let view = self.view()?;
        let segments = LoadSegments::from_program_headers(&view.program_headers);
        let sections = sections_of(&view);
        let segment = segments.executable_containing(vaddr).copied();
        let text = sections.iter().find(|s| s.name == ".text");
        Ok(OffsetExplanation {
            vaddr,
            segment,
            segment_offset: segment.and_then(|s| formulas::elf_segment(vaddr, s.vaddr, s.offset)),
            section: sections
                .iter()
                .find(|s| s.addr != 0 && vaddr.0 >= s.addr && vaddr.0 - s.addr < s.size)
                .cloned(),
            text_section_offset: text
                .and_then(|t| formulas::text_section_offset(vaddr, t.addr, t.offset)),
        })
    }
}

fn sections_of(view: &ElfView<'_>) -> Vec<SectionInfo> {
    view.section_headers
        .iter()
        .map(|sh| SectionInfo {
            name: view.section_name(sh).unwrap_or("").to_string(),
            addr: sh.sh_addr,
            offset: sh.sh_offset,
            size: sh.sh_size,
            executable: sh.sh_flags & u64::from(SHF_EXECINSTR) != 0,
        })
        .collect()
}

/// The name without its `@VERSION` / `@@VERSION` suffix, with the address.
fn unversioned(f: &RawFunction) -> (&str, u64) {
    let base = f.name.split('@').next().unwrap_or(&f.name);
    (base, f.vaddr.0)
}

impl SymbolSource for ElfFile {
    /// `.symtab` functions, then the `.dynsym` functions that `.symtab` does not already name at
    /// the same address (a `.dynsym` entry `f@@V` duplicates a `.symtab` `f` or `f@@V`, GNU as
    /// writing versioned names into `.symtab` too; the `.dynsym` name is kept only when `.symtab`
    /// lacks the function, e.g. in stripped libraries). File offsets come
    /// from the segment formula; `None` for a symbol outside every executable `PT_LOAD`.
    fn symbols(&self) -> Result<Vec<Symbol>> {
        if let Some(FactsSource(facts)) = &self.facts {
            let facts = facts(&self.path)?;
            return Ok(symbols_of(&facts.functions, &facts.segments));
        }
        let view = self.view()?;
        let segments = LoadSegments::from_program_headers(&view.program_headers);
        Ok(symbols_of(&view.functions(&self.path)?, &segments))
    }
}

/// [`ElfFile::symbols`] of the function symbols `raw` of a file with loadable `segments`.
pub(crate) fn symbols_of(raw: &[RawFunction], segments: &LoadSegments) -> Vec<Symbol> {
    symbols_where(raw, segments, &|_, _| true)
}

/// [`symbols_of`], keeping only the functions `keep` accepts (by name and kind, before a
/// [`Symbol`] is built); which `.dynsym` entries `.symtab` already names is decided over all of
/// `raw`, so the kept ones are exactly those [`symbols_of`] lists.
pub(crate) fn symbols_where(
    raw: &[RawFunction],
    segments: &LoadSegments,
    keep: &dyn Fn(&str, SymbolKind) -> bool,
) -> Vec<Symbol> {
    let in_symtab: HashSet<(&str, u64)> = raw
        .iter()
        .filter(|f| f.origin == SymbolOrigin::ElfSymtab)
        .map(|f| (f.name.as_str(), f.vaddr.0))
        .collect();
    raw.iter()
        .filter(|f| {
            f.origin == SymbolOrigin::ElfSymtab
                || !(in_symtab.contains(&(f.name.as_str(), f.vaddr.0))
                    || in_symtab.contains(&unversioned(f)))
        })
        .filter(|f| keep(&f.name, f.kind))
        .map(|f| Symbol {
            name: f.name.clone(),
            kind: f.kind,
            origin: f.origin,
            address: Address::Virt(f.vaddr),
            size: (f.size != 0).then_some(f.size),
            file_offset: segments.code_file_offset(f.vaddr),
        })
        .collect()
}
