//! Turning an ELF file's function symbols into [`Symbol`]s with file offsets, and explaining how
//! an offset comes about.

use super::parser::{parse_elf, ElfView, RawFunction};
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

/// An ELF file opened for symbol lookup.
#[derive(Debug)]
pub struct ElfFile {
    path: PathBuf,
    bytes: FileBytes,
    /// The cached image it was opened from ([`ElfFile::open`]); `None` for bytes handed in.
    image: Option<std::sync::Arc<crate::cache::Image>>,
}

impl ElfFile {
    /// Opens and checks `path`. Errors: [`crate::Error::NotAnObjectFile`] when it is no ELF file,
    /// [`crate::Error::Malformed`] when its headers are truncated or corrupt, I/O errors naming
    /// the path. The file is opened once per run ([`crate::cache`]); its symbol tables are parsed
    /// (once per run) by the first [`SymbolSource::symbols`], not here: asking a 75 MB Go binary
    /// for its segments or sections must not read its 170,000 `.dynsym` names.
    pub fn open(path: &Path) -> Result<ElfFile> {
        let image = crate::cache::image(path)?;
        if crate::image::sniff(image.bytes()) != Some(crate::image::ImageFormat::Elf) {
            return Err(crate::Error::NotAnObjectFile {
                path: path.to_path_buf(),
            });
        }
        ElfView::parse(path, image.bytes())?;
        Ok(ElfFile {
            path: path.to_path_buf(),
            bytes: image.bytes().clone(),
            image: Some(image),
        })
    }

    /// Wraps bytes already read (or mapped); checks them as [`ElfFile::open`] does.
    pub fn from_bytes(path: &Path, bytes: FileBytes) -> Result<ElfFile> {
        ElfView::parse(path, &bytes)?;
        Ok(ElfFile {
            path: path.to_path_buf(),
            bytes,
            image: None,
        })
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
        if let Some(image) = &self.image {
            let facts = image.elf(&self.path)?;
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
