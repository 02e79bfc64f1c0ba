//! Parsing ELF files: headers with goblin, symbol and string tables read lazily from the bytes.
//!
//! goblin's `Elf::parse` splits every string table into a vector and parses relocations up
//! front; for a 117 MB C++ library that costs more than listing its 36k functions. netprobe
//! parses only the file header, program headers and section headers with goblin, reads symbol
//! entries through goblin's lazy `Symtab`, and reads each name straight from its string table
//! when it needs it. Files without section headers (stripped with `--remove-section-headers`)
//! fall back to goblin's full parse, which finds `.dynsym` through the dynamic segment.
//!
//! Formats: System V gABI ("Symbol Table", "String Table"); GNU symbol versioning
//! (LSB Core, "Symbol Versioning": `.gnu.version`, `.gnu.version_d`).

use crate::addr::VirtAddr;
use crate::elf::gnu_hash::{GnuHash, SHT_GNU_HASH};
use crate::error::{Error, Result};
use crate::image::format::{sniff, ImageFormat};
use crate::name_budget::NameBudget;
use crate::symbol::{SymbolKind, SymbolOrigin};
use goblin::container::Ctx;
use goblin::elf::header::Header;
use goblin::elf::program_header::ProgramHeader;
use goblin::elf::reloc::RelocSection;
use goblin::elf::section_header::{
    SectionHeader, SHN_UNDEF, SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERSYM, SHT_NOBITS, SHT_RELA,
    SHT_SYMTAB,
};
use goblin::elf::sym::{Symtab, STT_FUNC, STT_GNU_IFUNC};
use goblin::elf::Elf;
use std::collections::HashMap;
use std::path::Path;

/// An ELF file's headers over its bytes; tables are read on demand.
pub struct ElfView<'a> {
    pub bytes: &'a [u8],
    pub header: Header,
    pub ctx: Ctx,
    pub program_headers: Vec<ProgramHeader>,
    pub section_headers: Vec<SectionHeader>,
}

fn guarded<T>(path: &Path, f: impl FnOnce() -> goblin::error::Result<T>) -> Result<T> {
    // goblin checks bounds and returns errors; catch_unwind is a second guard so that a parser
    // bug on hostile input is an error here, never a crash of the tracer.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::malformed(path, format!("ELF: {e}"))),
        Err(_) => Err(Error::malformed(path, "ELF: parser failed on this input")),
    }
}

impl<'a> ElfView<'a> {
    /// The file's architecture from `e_machine`; `None` for a machine netprobe has no rules for.
    pub fn arch(&self) -> Option<crate::arch::Arch> {
        crate::arch::Arch::of_elf_machine(self.header.e_machine)
    }

    /// Parses the headers. Errors: [`Error::NotAnObjectFile`] without the ELF magic,
    /// [`Error::Malformed`] when a header is out of bounds or inconsistent.
    pub fn parse(path: &Path, bytes: &'a [u8]) -> Result<ElfView<'a>> {
        if sniff(bytes) != Some(ImageFormat::Elf) {
            return Err(Error::NotAnObjectFile {
                path: path.to_path_buf(),
            });
        }
        let header = guarded(path, || Elf::parse_header(bytes))?;
        let container = guarded(path, || header.container())?;
        let endian = guarded(path, || header.endianness())?;
        let ctx = Ctx::new(container, endian);
        let program_headers = guarded(path, || {
            ProgramHeader::parse(bytes, header.e_phoff as usize, header.e_phnum as usize, ctx)
        })?;
        let section_headers = if header.e_shoff == 0 {
            Vec::new()
        } else {
            let mut count = header.e_shnum as usize;
            if count == 0 {
                // Extended numbering (gABI): the real count is section 0's sh_size.
                let first = guarded(path, || {
                    SectionHeader::parse(bytes, header.e_shoff as usize, 1, ctx)
                })?;
                count = first.first().map_or(0, |s| s.sh_size as usize);
            }
            let table_len = count.saturating_mul(SectionHeader::size(ctx));
            if (header.e_shoff as usize).saturating_add(table_len) > bytes.len() {
                return Err(Error::malformed(
                    path,
                    "ELF: section header table beyond the end of the file",
                ));
            }
            guarded(path, || {
                SectionHeader::parse(bytes, header.e_shoff as usize, count, ctx)
            })?
        };
        Ok(ElfView {
            bytes,
            header,
            ctx,
            program_headers,
            section_headers,
        })
    }

    /// The contents of a section; `None` for `SHT_NOBITS` or a range outside the file.
    pub fn section_bytes(&self, sh: &SectionHeader) -> Option<&'a [u8]> {
        if sh.sh_type == SHT_NOBITS {
            return None;
        }
        let start = usize::try_from(sh.sh_offset).ok()?;
        let len = usize::try_from(sh.sh_size).ok()?;
        self.bytes.get(start..start.checked_add(len)?)
    }

    /// A section's name from the section-name string table; `None` when unreadable.
    pub fn section_name(&self, sh: &SectionHeader) -> Option<&'a str> {
        let shstrtab = self.section_headers.get(self.header.e_shstrndx as usize)?;
        cstr_at(self.section_bytes(shstrtab)?, sh.sh_name)
    }

    /// Every defined function (`STT_FUNC`) and indirect function (`STT_GNU_IFUNC`) of `.symtab`,
    /// then of `.dynsym`. Left out: undefined symbols (imports), symbols at address 0, symbols
    /// whose name is unreadable or empty.
    pub fn functions(&self, path: &Path) -> Result<Vec<RawFunction>> {
        self.functions_where(path, &|_, _| true)
    }

    /// [`ElfView::functions`] of the symbols that `keep` accepts: it sees the symbol's value
    /// (`st_value`, the function's address) and the string table from the symbol's name on (its
    /// NUL and whatever follows included) before the name is read, checked or copied. A file
    /// without section headers has its dynamic symbols read whole first; `keep` then sees each
    /// one's address and name (NUL-terminated).
    pub fn functions_where(
        &self,
        path: &Path,
        keep: &dyn Fn(VirtAddr, &[u8]) -> bool,
    ) -> Result<Vec<RawFunction>> {
        self.functions_reading(path, None, keep)
    }

    /// [`ElfView::functions_where`] for a `keep` that refuses every `.dynsym` name but `names`
    /// (as the string table holds them: `.dynsym` names carry no version, GNU versions live in
    /// `.gnu.version`, LSB "Symbol Versioning"): the same functions, in the same order, but of
    /// the `.dynsym` entries the file's `.gnu.hash` covers ([`ElfView::dynsym_hash`]) only those
    /// whose name hashes as one of `names` are read. The table is what the dynamic linker looks
    /// names up in, so a name it does not lead to is one no program could link against either.
    /// Without a usable `.gnu.hash`, every entry is read.
    pub fn functions_named_where(
        &self,
        path: &Path,
        names: &[&[u8]],
        keep: &dyn Fn(VirtAddr, &[u8]) -> bool,
    ) -> Result<Vec<RawFunction>> {
        self.functions_reading(path, Some(names), keep)
    }

    /// The `.gnu.hash` of the file's `.dynsym` (the `SHT_GNU_HASH` section linked to it);
    /// `None` when there is none or it cannot describe the `.dynsym` (cut off, no buckets).
    pub fn dynsym_hash(&self) -> Option<GnuHash<'a>> {
        self.dynsym_and_hash().map(|(_, hash)| hash)
    }

    /// The `.dynsym` section header and its [`ElfView::dynsym_hash`].
    fn dynsym_and_hash(&self) -> Option<(&SectionHeader, GnuHash<'a>)> {
        let (index, dynsym) = self
            .section_headers
            .iter()
            .enumerate()
            .find(|(_, s)| s.sh_type == SHT_DYNSYM)?;
        let hash = self
            .section_headers
            .iter()
            .find(|s| s.sh_type == SHT_GNU_HASH && s.sh_link as usize == index)?;
        let entsize = goblin::elf::sym::Sym::size(self.ctx.container) as u64;
        let word_size = if self.ctx.container == goblin::container::Container::Big {
            8
        } else {
            4
        };
        let hash = GnuHash::parse(
            self.section_bytes(hash)?,
            word_size,
            self.ctx.le == goblin::container::Endian::Little,
            usize::try_from(dynsym.sh_size / entsize).ok()?,
        )?;
        Some((dynsym, hash))
    }

    /// The value (`st_value`) of the defined `.dynsym` symbol named exactly `name`, of any type,
    /// found through `.gnu.hash` ([`ElfView::dynsym_hash`]); `None` without a usable table, a
    /// 64-bit little-endian `.dynsym` in the file, or such a symbol among the hashed entries.
    pub fn dynamic_symbol_value(&self, name: &str) -> Option<u64> {
        let (dynsym, hash) = self.dynsym_and_hash()?;
        let strtab = self.section_bytes(self.section_headers.get(dynsym.sh_link as usize)?)?;
        if self.ctx.container != goblin::container::Container::Big
            || self.ctx.le != goblin::container::Endian::Little
        {
            return None;
        }
        let table = self.section_bytes(dynsym)?;
        hash.candidates(name.as_bytes())
            .into_iter()
            .find_map(|idx| {
                let at = idx.checked_mul(24)?;
                let sym = SymFields::elf64_le(table.get(at..at.checked_add(24)?)?);
                (names_exactly(strtab, sym.name, name.as_bytes())
                    && sym.shndx != SHN_UNDEF as usize)
                    .then_some(sym.value)
            })
    }

    fn functions_reading(
        &self,
        path: &Path,
        dynsym_names: Option<&[&[u8]]>,
        keep: &dyn Fn(VirtAddr, &[u8]) -> bool,
    ) -> Result<Vec<RawFunction>> {
        if self.section_headers.is_empty() {
            let mut functions = functions_via_dynamic(path, self.bytes)?;
            let mut name = Vec::new();
            functions.retain(|f| {
                name.clear();
                name.extend_from_slice(f.name.as_bytes());
                name.push(0);
                keep(f.vaddr, &name)
            });
            return Ok(functions);
        }
        let mut out = Vec::new();
        // Names are copied out of the string tables, so many symbols naming one long string
        // would copy it many times: bounded ([`crate::name_budget`]).
        let mut budget = NameBudget::for_file(self.bytes.len());
        for (ty, origin) in [
            (SHT_SYMTAB, SymbolOrigin::ElfSymtab),
            (SHT_DYNSYM, SymbolOrigin::ElfDynsym),
        ] {
            let Some(sh) = self.section_headers.iter().find(|s| s.sh_type == ty) else {
                continue;
            };
            let Some(strtab) = self
                .section_headers
                .get(sh.sh_link as usize)
                .and_then(|s| self.section_bytes(s))
            else {
                continue;
            };
            let entsize = goblin::elf::sym::Sym::size(self.ctx.container) as u64;
            let count = (sh.sh_size / entsize) as usize;
            let versions = if origin == SymbolOrigin::ElfDynsym {
                Versions::read(self)
            } else {
                Versions::default()
            };
            let mut add = |idx: usize, sym: SymFields| {
                if budget.exceeded() {
                    return;
                }
                let kind = match sym.info & 0xf {
                    STT_FUNC => SymbolKind::Function,
                    STT_GNU_IFUNC => SymbolKind::Ifunc,
                    _ => return,
                };
                if sym.shndx == SHN_UNDEF as usize || sym.value == 0 {
                    return;
                }
                if !strtab
                    .get(sym.name..)
                    .is_some_and(|rest| keep(VirtAddr(sym.value), rest))
                {
                    return;
                }
                let Some(name) = cstr_at(strtab, sym.name).filter(|n| !n.is_empty()) else {
                    return;
                };
                // Counted with its version (`@@VERSION`), which is copied too.
                let name = versions.decorate(idx, name);
                if !budget.take(name.len()) {
                    return;
                }
                out.push(RawFunction {
                    name,
                    vaddr: VirtAddr(sym.value),
                    size: sym.size,
                    kind,
                    origin,
                    section: sym.shndx,
                });
            };
            // A 64-bit little-endian table (every file netprobe probes) is read in place;
            // anything else, or a table not inside the file, through goblin (which reports the
            // latter).
            let table_bytes = usize::try_from(sh.sh_offset).ok().and_then(|at| {
                self.bytes
                    .get(at..at.checked_add(count.checked_mul(entsize as usize)?)?)
            });
            match table_bytes {
                Some(table)
                    if self.ctx.container == goblin::container::Container::Big
                        && self.ctx.le == goblin::container::Endian::Little =>
                {
                    let entry = |idx: usize| {
                        let at = idx * entsize as usize;
                        SymFields::elf64_le(&table[at..at + entsize as usize])
                    };
                    let hashed = dynsym_names
                        .filter(|_| origin == SymbolOrigin::ElfDynsym)
                        .zip(self.dynsym_hash());
                    match hashed {
                        Some((names, hash)) => {
                            // Entries before the hashed ones are read as usual; of the rest
                            // only those the table leads each name to, named exactly so.
                            let named = |idx: &usize| {
                                let at = entry(*idx).name;
                                names.iter().any(|n| names_exactly(strtab, at, n))
                            };
                            let mut found: Vec<usize> = names
                                .iter()
                                .flat_map(|n| hash.candidates(n))
                                .filter(|i| *i < count)
                                .collect();
                            found.sort_unstable();
                            found.dedup();
                            found.retain(named);
                            for idx in (0..hash.first_hashed().min(count)).chain(found) {
                                add(idx, entry(idx));
                            }
                        }
                        None => {
                            for (idx, e) in table.chunks_exact(entsize as usize).enumerate() {
                                add(idx, SymFields::elf64_le(e));
                            }
                        }
                    }
                }
                _ => {
                    let table = guarded(path, || {
                        Symtab::parse(self.bytes, sh.sh_offset as usize, count, self.ctx)
                    })?;
                    for (idx, sym) in table.iter().enumerate() {
                        add(
                            idx,
                            SymFields {
                                name: sym.st_name,
                                info: sym.st_info,
                                shndx: sym.st_shndx,
                                value: sym.st_value,
                                size: sym.st_size,
                            },
                        );
                    }
                }
            }
            if budget.exceeded() {
                return Err(budget.error(path));
            }
        }
        Ok(out)
    }
}

/// Whether the string at `at` of the string table `strtab` is `name` (followed by its NUL).
fn names_exactly(strtab: &[u8], at: usize, name: &[u8]) -> bool {
    strtab
        .get(at..)
        .is_some_and(|rest| rest.starts_with(name) && rest.get(name.len()) == Some(&0))
}

/// The fields of a symbol table entry netprobe reads.
struct SymFields {
    name: usize,
    info: u8,
    shndx: usize,
    value: u64,
    size: u64,
}

impl SymFields {
    /// An `Elf64_Sym` of a little-endian file (gABI, "Symbol Table": `st_name` u32 at 0,
    /// `st_info` at 4, `st_other` at 5, `st_shndx` u16 at 6, `st_value` u64 at 8, `st_size` u64
    /// at 16); `e` is one whole entry of 24 bytes.
    // Inlined: it runs once per entry of 170,000-entry tables, from three loops.
    #[inline(always)]
    fn elf64_le(e: &[u8]) -> SymFields {
        let u16_at = |o: usize| u16::from_le_bytes([e[o], e[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(e[o..o + 4].try_into().unwrap_or_default());
        let u64_at = |o: usize| u64::from_le_bytes(e[o..o + 8].try_into().unwrap_or_default());
        SymFields {
            name: u32_at(0) as usize,
            info: e[4],
            shndx: usize::from(u16_at(6)),
            value: u64_at(8),
            size: u64_at(16),
        }
    }
}

impl ElfView<'_> {
    /// Every relative relocation (`B + A`: `R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`, the one of
    /// the image's machine, [`crate::arch::Arch::relative_relocation`]) of the RELA sections:
    /// relocated word's address to its addend (negative addends, which no pointer has, are left
    /// out). Unreadable sections are skipped; an image of no known machine has none.
    pub fn relative_relocations(&self) -> HashMap<u64, u64> {
        let Some(relative) = self.arch().map(crate::arch::Arch::relative_relocation) else {
            return HashMap::new();
        };
        self.section_headers
            .iter()
            .filter(|sh| sh.sh_type == SHT_RELA)
            .filter_map(|sh| {
                guarded(Path::new(""), || {
                    RelocSection::parse(
                        self.bytes,
                        usize::try_from(sh.sh_offset).unwrap_or(usize::MAX),
                        usize::try_from(sh.sh_size).unwrap_or(usize::MAX),
                        true,
                        self.ctx,
                    )
                })
                .ok()
            })
            .flat_map(|relocs| {
                relocs
                    .iter()
                    .filter(|r| r.r_type == relative)
                    .filter_map(|r| Some((r.r_offset, u64::try_from(r.r_addend?).ok()?)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The value of the `.symtab` symbol named `name`; `None` without a symbol table or symbol.
    pub fn symbol_value(&self, name: &str) -> Option<u64> {
        self.symbol_extent(name).map(|(value, _)| value)
    }

    /// The value and size (`st_size`) of the `.symtab` symbol named `name`; `None` without a
    /// symbol table or symbol.
    pub fn symbol_extent(&self, name: &str) -> Option<(u64, u64)> {
        let symtab = self
            .section_headers
            .iter()
            .find(|sh| sh.sh_type == SHT_SYMTAB)?;
        let names = self.section_bytes(self.section_headers.get(symtab.sh_link as usize)?)?;
        let entsize = goblin::elf::sym::Sym::size(self.ctx.container) as u64;
        let count = usize::try_from(symtab.sh_size / entsize).ok()?;
        let syms = guarded(Path::new(""), || {
            Symtab::parse(
                self.bytes,
                usize::try_from(symtab.sh_offset).unwrap_or(usize::MAX),
                count,
                self.ctx,
            )
        })
        .ok()?;
        let found = syms
            .iter()
            .find(|s| cstr_at(names, s.st_name) == Some(name))
            .map(|s| (s.st_value, s.st_size));
        found
    }
}

/// What the rest of netprobe reads of an ELF file, parsed once per image
/// ([`crate::image::cached::Part::Elf`]): loadable segments, section headers with their names, and
/// function symbols ([`ElfView::functions`]).
#[derive(Clone, Debug)]
pub struct ElfFacts {
    pub segments: crate::elf::segments::LoadSegments,
    pub section_headers: Vec<SectionHeader>,
    /// The name of each section header, in order ("" when unreadable).
    pub section_names: Vec<String>,
    pub functions: Vec<RawFunction>,
}

impl ElfFacts {
    /// Parses the headers and symbol tables; errors as [`ElfView::parse`] and
    /// [`ElfView::functions`].
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<ElfFacts> {
        let view = ElfView::parse(path, bytes)?;
        let functions = view.functions(path)?;
        // Section names are copied too: many headers naming one long string are bounded like
        // symbol names.
        let mut budget = NameBudget::for_file(bytes.len());
        let section_names = view
            .section_headers
            .iter()
            .map(|sh| {
                let name = view.section_name(sh).unwrap_or("");
                budget.take(name.len()).then(|| name.to_string())
            })
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| budget.error(path))?;
        Ok(ElfFacts {
            segments: crate::elf::segments::LoadSegments::from_program_headers(
                &view.program_headers,
            ),
            section_names,
            section_headers: view.section_headers,
            functions,
        })
    }
}

/// The NUL-terminated string at `off` in a string table; `None` when out of bounds,
/// unterminated, or not UTF-8.
pub fn cstr_at(table: &[u8], off: usize) -> Option<&str> {
    std::str::from_utf8(crate::bytes::cstr_at(table, off)?).ok()
}

/// A function symbol as the tables state it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFunction {
    /// Name, with `@@VERSION` (default) or `@VERSION` (hidden) appended for versioned `.dynsym`
    /// definitions, as `nm -D` and `readelf --dyn-syms` print them.
    pub name: String,
    pub vaddr: VirtAddr,
    pub size: u64,
    pub kind: SymbolKind,
    pub origin: SymbolOrigin,
    /// `st_shndx`: index of the section the symbol is defined in (gABI "Symbol Table"); special
    /// indices (`SHN_ABS` 0xfff1, ...) as stored.
    pub section: usize,
}

const VER_FLG_BASE: u16 = 0x1; // LSB: the version definition of the file itself
const VERSYM_HIDDEN: u16 = 0x8000; // LSB: the symbol is not the default version
const VERSYM_VERSION: u16 = 0x7fff;

/// `.gnu.version` entries and the names of the versions `.gnu.version_d` defines, by index.
#[derive(Default)]
struct Versions<'a> {
    versym: &'a [u8],
    little_endian: bool,
    names: Vec<Option<&'a str>>,
}

impl<'a> Versions<'a> {
    /// Reads the version tables once; empty (no decoration) when absent or unreadable.
    fn read(view: &ElfView<'a>) -> Versions<'a> {
        let find = |ty| view.section_headers.iter().find(|s| s.sh_type == ty);
        let (Some(versym_sh), Some(verdef_sh)) = (find(SHT_GNU_VERSYM), find(SHT_GNU_VERDEF))
        else {
            return Versions::default();
        };
        let (Some(versym), Some(verdef)) =
            (view.section_bytes(versym_sh), view.section_bytes(verdef_sh))
        else {
            return Versions::default();
        };
        let strtab = view
            .section_headers
            .get(verdef_sh.sh_link as usize)
            .and_then(|s| view.section_bytes(s))
            .unwrap_or(&[]);
        let le = view.ctx.le == goblin::container::Endian::Little;
        let u16_at = |b: &[u8], o: usize| -> Option<u16> {
            let s: [u8; 2] = b.get(o..o + 2)?.try_into().ok()?;
            Some(if le {
                u16::from_le_bytes(s)
            } else {
                u16::from_be_bytes(s)
            })
        };
        let u32_at = |b: &[u8], o: usize| -> Option<u32> {
            let s: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
            Some(if le {
                u32::from_le_bytes(s)
            } else {
                u32::from_be_bytes(s)
            })
        };
        // Elf_Verdef: vd_version u16, vd_flags u16, vd_ndx u16, vd_cnt u16, vd_hash u32,
        // vd_aux u32, vd_next u32; Elf_Verdaux: vda_name u32, vda_next u32.
        let mut names: Vec<Option<&'a str>> = Vec::new();
        let mut off = 0usize;
        for _ in 0..verdef_sh.sh_info.min(0x8000) {
            let (Some(flags), Some(ndx), Some(aux), Some(next)) = (
                u16_at(verdef, off + 2),
                u16_at(verdef, off + 4),
                u32_at(verdef, off + 12),
                u32_at(verdef, off + 16),
            ) else {
                break;
            };
            if flags & VER_FLG_BASE == 0 {
                if let Some(name_off) = u32_at(verdef, off + aux as usize) {
                    let idx = usize::from(ndx & VERSYM_VERSION);
                    if names.len() <= idx {
                        names.resize(idx + 1, None);
                    }
                    names[idx] = cstr_at(strtab, name_off as usize);
                }
            }
            if next == 0 {
                break;
            }
            off = match off.checked_add(next as usize) {
                Some(o) => o,
                None => break,
            };
        }
        Versions {
            versym,
            little_endian: le,
            names,
        }
    }

    /// `name@@V` / `name@V` for a versioned definition at `.dynsym` index `idx`; `name` as is
    /// for unversioned symbols, the base version, or unknown versions.
    fn decorate(&self, idx: usize, name: &str) -> String {
        let Some(raw) = idx
            .checked_mul(2)
            .and_then(|o| self.versym.get(o..o + 2))
            .and_then(|s| <[u8; 2]>::try_from(s).ok())
        else {
            return name.to_string();
        };
        let vs = if self.little_endian {
            u16::from_le_bytes(raw)
        } else {
            u16::from_be_bytes(raw)
        };
        match self
            .names
            .get(usize::from(vs & VERSYM_VERSION))
            .copied()
            .flatten()
        {
            Some(v) if vs & VERSYM_HIDDEN != 0 => format!("{name}@{v}"),
            Some(v) => format!("{name}@@{v}"),
            None => name.to_string(),
        }
    }
}

/// Files without section headers: goblin's full parse finds `.dynsym` through the dynamic
/// segment (`DT_SYMTAB`, `DT_STRTAB`, hash tables). No versions are decorated.
fn functions_via_dynamic(path: &Path, bytes: &[u8]) -> Result<Vec<RawFunction>> {
    let elf = guarded(path, || Elf::parse(bytes))?;
    let mut out = Vec::new();
    let mut budget = NameBudget::for_file(bytes.len());
    for sym in elf.dynsyms.iter() {
        let kind = match sym.st_type() {
            STT_FUNC => SymbolKind::Function,
            STT_GNU_IFUNC => SymbolKind::Ifunc,
            _ => continue,
        };
        if sym.st_shndx == SHN_UNDEF as usize || sym.st_value == 0 {
            continue;
        }
        let Some(name) = elf.dynstrtab.get_at(sym.st_name).filter(|n| !n.is_empty()) else {
            continue;
        };
        if !budget.take(name.len()) {
            return Err(budget.error(path));
        }
        out.push(RawFunction {
            name: name.to_string(),
            vaddr: VirtAddr(sym.st_value),
            size: sym.st_size,
            kind,
            origin: SymbolOrigin::ElfDynsym,
            section: sym.st_shndx,
        });
    }
    Ok(out)
}

/// Parses the whole file with goblin (all tables); for callers that need goblin's `Elf`.
pub fn parse_elf<'a>(path: &Path, bytes: &'a [u8]) -> Result<Elf<'a>> {
    if sniff(bytes) != Some(ImageFormat::Elf) {
        return Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        });
    }
    guarded(path, || Elf::parse(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// An entry read in place has the fields goblin parses from it.
        #[test]
        fn elf64_le_entry_as_goblin_reads_it(e in proptest::array::uniform24(any::<u8>())) {
            let ctx = Ctx::new(goblin::container::Container::Big, goblin::container::Endian::Little);
            let sym = Symtab::parse(&e, 0, 1, ctx).unwrap().get(0).unwrap();
            let ours = SymFields::elf64_le(&e);
            prop_assert_eq!(ours.name, sym.st_name);
            prop_assert_eq!(ours.info, sym.st_info);
            prop_assert_eq!(ours.shndx, sym.st_shndx);
            prop_assert_eq!(ours.value, sym.st_value);
            prop_assert_eq!(ours.size, sym.st_size);
        }
    }
}
