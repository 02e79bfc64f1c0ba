//! Parsing an ELF file's function symbols with goblin (`.symtab`, `.dynsym`, GNU symbol versions).

use crate::addr::VirtAddr;
use crate::error::{Error, Result};
use crate::symbol::{SymbolKind, SymbolOrigin};
use goblin::elf::section_header::SHN_UNDEF;
use goblin::elf::sym::{STT_FUNC, STT_GNU_IFUNC};
use goblin::elf::Elf;
use std::path::Path;

/// Parses ELF headers from untrusted bytes. goblin checks bounds and returns errors; the
/// `catch_unwind` is a second guard so that a parser bug on hostile input is an error here, never
/// a crash of the tracer (DEVELOPERS.md: bad input never panics).
pub fn parse_elf<'a>(path: &Path, bytes: &'a [u8]) -> Result<Elf<'a>> {
    if bytes.len() < 4 || &bytes[..4] != b"\x7fELF" {
        return Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        });
    }
    match std::panic::catch_unwind(|| Elf::parse(bytes)) {
        Ok(Ok(elf)) => Ok(elf),
        Ok(Err(e)) => Err(Error::malformed(path, format!("ELF: {e}"))),
        Err(_) => Err(Error::malformed(path, "ELF: parser failed on this input")),
    }
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
}

const VER_FLG_BASE: u16 = 0x1; // LSB Core, "Version Definition Entries": the file's own version
const VERSYM_HIDDEN: u16 = 0x8000; // LSB Core, "Symbol Version Table"
const VERSYM_VERSION: u16 = 0x7fff;

/// Every defined function (`STT_FUNC`) and indirect function (`STT_GNU_IFUNC`) of `.symtab` then
/// `.dynsym`. Undefined symbols (imports) and symbols at address 0 are left out; so are symbols
/// whose name cannot be read (reported in the count of `skipped`).
pub fn functions(elf: &Elf<'_>) -> Vec<RawFunction> {
    let mut out = Vec::new();
    collect(
        elf,
        &elf.syms,
        &elf.strtab,
        SymbolOrigin::ElfSymtab,
        &mut out,
    );
    collect(
        elf,
        &elf.dynsyms,
        &elf.dynstrtab,
        SymbolOrigin::ElfDynsym,
        &mut out,
    );
    out
}

fn collect(
    elf: &Elf<'_>,
    table: &goblin::elf::Symtab<'_>,
    strtab: &goblin::strtab::Strtab<'_>,
    origin: SymbolOrigin,
    out: &mut Vec<RawFunction>,
) {
    for (idx, sym) in table.iter().enumerate() {
        let kind = match sym.st_type() {
            STT_FUNC => SymbolKind::Function,
            STT_GNU_IFUNC => SymbolKind::Ifunc,
            _ => continue,
        };
        if sym.st_shndx == SHN_UNDEF as usize || sym.st_value == 0 {
            continue;
        }
        let Some(name) = strtab.get_at(sym.st_name) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let name = match origin {
            SymbolOrigin::ElfDynsym => match version_suffix(elf, idx) {
                Some(v) => format!("{name}{v}"),
                None => name.to_string(),
            },
            _ => name.to_string(),
        };
        out.push(RawFunction {
            name,
            vaddr: VirtAddr(sym.st_value),
            size: sym.st_size,
            kind,
            origin,
        });
    }
}

/// `@@V` or `@V` for the `.dynsym` entry `idx` when it is a versioned definition; `None` for
/// unversioned symbols, the file's base version, or when the version tables are absent or broken.
fn version_suffix(elf: &Elf<'_>, idx: usize) -> Option<String> {
    let versym = elf.versym.as_ref()?.get_at(idx)?;
    let ver = versym.vs_val & VERSYM_VERSION;
    if ver <= 1 {
        return None; // 0: local, 1: global unversioned
    }
    let verdef = elf.verdef.as_ref()?;
    for def in verdef.iter() {
        if def.vd_ndx != ver || def.vd_flags & VER_FLG_BASE != 0 {
            continue;
        }
        let aux = def.iter().next()?;
        let vname = elf.dynstrtab.get_at(aux.vda_name)?;
        let sep = if versym.vs_val & VERSYM_HIDDEN != 0 {
            "@"
        } else {
            "@@"
        };
        return Some(format!("{sep}{vname}"));
    }
    None
}
