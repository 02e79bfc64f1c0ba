//! The Go readers on linux/arm64 builds (`GOARCH=arm64`), judged by the same build's ELF symbol
//! table read with goblin (never by netprobe): every function the pclntab lists sits at the
//! address of the `.symtab` FUNC symbol of its name, and its file offset is that symbol's
//! section formula `st_value - sh_addr + sh_offset` (the section the symbol's `st_shndx`
//! names, as `readelf -s` and `readelf -S` show them). A stripped build has no `.symtab`: its
//! twin built without `-s -w` (the same compile, the same link layout) gives the symbols, and
//! the stripped file holds the twin's code bytes at every offset netprobe gives.
//!
//! The arm64 pclntab counts pc deltas in 4-byte instructions (`pcHeader.minLC`, Go
//! `src/cmd/internal/sys/arch.go`: `MinLC: 4` for ARM64), so a reader that assumes x86's 1
//! places every line and every function end wrong while the entries still look right: the
//! checks below cover entries, ends (sizes against `st_size`) and offsets.

use super::same_go_name;
use fixtures::e2e::err;
use goblin::elf::sym::STT_FUNC;
use goblin::elf::Elf;
use netprobe_core::arch::Arch;
use netprobe_core::golang::GoBinary;
use netprobe_core::symbol::SymbolSource;
use std::collections::HashMap;

/// A FUNC symbol of an unstripped build: its address, size and file offset by its section.
#[derive(Clone, Debug)]
pub struct SymtabFunc {
    pub addr: u64,
    pub size: u64,
    pub file_offset: u64,
}

/// The FUNC symbols of `bytes`' `.symtab` by name, each with the file offset of its section's
/// formula. `Err` when the file has no `.symtab` or is not an aarch64 ELF file.
pub fn symtab_funcs(bytes: &[u8]) -> Result<HashMap<String, Vec<SymtabFunc>>, String> {
    let elf = Elf::parse(bytes).map_err(err)?;
    if elf.header.e_machine != goblin::elf::header::EM_AARCH64 {
        return Err(format!(
            "e_machine {} is not EM_AARCH64",
            elf.header.e_machine
        ));
    }
    if elf.syms.is_empty() {
        return Err("no .symtab".into());
    }
    let mut by_name: HashMap<String, Vec<SymtabFunc>> = HashMap::new();
    for s in elf.syms.iter().filter(|s| s.st_type() == STT_FUNC) {
        let Some(sh) = elf.section_headers.get(s.st_shndx) else {
            continue;
        };
        if !(sh.sh_addr..sh.sh_addr + sh.sh_size).contains(&s.st_value) {
            continue;
        }
        let name = elf.strtab.get_at(s.st_name).unwrap_or("").to_string();
        by_name.entry(name).or_default().push(SymtabFunc {
            addr: s.st_value,
            size: s.st_size,
            file_offset: s.st_value - sh.sh_addr + sh.sh_offset,
        });
    }
    Ok(by_name)
}

/// The `.symtab` FUNC symbol naming pclntab function `name` (the pclntab spelling, see
/// [`same_go_name`]) at `entry`.
fn symbol_for<'s>(
    by_name: &'s HashMap<String, Vec<SymtabFunc>>,
    by_addr: &HashMap<u64, Vec<&'s str>>,
    name: &str,
    entry: u64,
) -> Option<&'s SymtabFunc> {
    if let Some(f) = by_name
        .get(name)
        .and_then(|v| v.iter().find(|f| f.addr == entry))
    {
        return Some(f);
    }
    by_addr.get(&entry)?.iter().find_map(|sym| {
        same_go_name(name, sym)
            .then(|| by_name.get(*sym)?.iter().find(|f| f.addr == entry))
            .flatten()
    })
}

/// Every function of `go` (an arm64 build) is at the address and file offset the `.symtab` of
/// `symtab_bytes` gives (the same file, or the unstripped twin of a stripped one), with the
/// symbol's size; the pclntab counts 4-byte instructions; the image says aarch64; and `go`'s
/// file holds the symbol-table build's code bytes at each offset. Returns how many functions
/// were checked.
pub fn check_every_function_against_symtab(
    go: &GoBinary<'_>,
    symtab_bytes: &[u8],
) -> Result<usize, String> {
    let header = go.pclntab().header();
    if header.quantum != 4 || header.ptr_size != 8 {
        return Err(format!(
            "pclntab quantum {} pointer size {}: arm64 has 4 and 8",
            header.quantum, header.ptr_size
        ));
    }
    let elf_arch = netprobe_core::elf::parser::ElfView::parse(go.path(), go.bytes())
        .map_err(err)?
        .arch();
    if elf_arch != Some(Arch::Aarch64) {
        return Err(format!("image architecture {elf_arch:?}, not aarch64"));
    }
    let by_name = symtab_funcs(symtab_bytes)?;
    let mut by_addr: HashMap<u64, Vec<&str>> = HashMap::new();
    for (name, fs) in &by_name {
        for f in fs {
            by_addr.entry(f.addr).or_default().push(name);
        }
    }
    let symbols = go.symbols().map_err(err)?;
    let funcs: Vec<_> = go.functions().collect();
    if funcs.len() != symbols.len() || funcs.len() < 1000 {
        return Err(format!(
            "{} functions, {} symbols",
            funcs.len(),
            symbols.len()
        ));
    }
    let mut failures = Vec::new();
    for (f, s) in funcs.iter().zip(&symbols) {
        let Some(sym) = symbol_for(&by_name, &by_addr, &f.name, f.entry.0) else {
            failures.push(format!(
                "{} at {:#x}: no .symtab FUNC of that name there (there: {:?})",
                f.name,
                f.entry.0,
                by_addr.get(&f.entry.0)
            ));
            continue;
        };
        if s.name != f.name || s.file_offset.map(|o| o.0) != Some(sym.file_offset) {
            failures.push(format!(
                "{} at {:#x}: file offset {:?}, .symtab's section says {:#x}",
                f.name, f.entry.0, s.file_offset, sym.file_offset
            ));
            continue;
        }
        // Assembly functions carry no size in .symtab (0), and the linker's markers (`go:` names:
        // `go:textfipsstart`, Go 1.24+) a nominal 1 where the pclntab runs to the next entry;
        // every other sized one must agree.
        if sym.size != 0 && !f.name.starts_with("go:") && sym.size != f.size() {
            failures.push(format!(
                "{} at {:#x}: size {:#x}, .symtab says {:#x}",
                f.name,
                f.entry.0,
                f.size(),
                sym.size
            ));
            continue;
        }
        let at = sym.file_offset as usize;
        let n = f.size().min(64) as usize;
        if go.bytes().get(at..at + n) != symtab_bytes.get(at..at + n) {
            failures.push(format!("{}: code bytes differ at {at:#x}", f.name));
        }
    }
    if !failures.is_empty() {
        let shown: Vec<&String> = failures.iter().take(8).collect();
        return Err(format!(
            "{} of {} functions wrong: {shown:#?}",
            failures.len(),
            funcs.len()
        ));
    }
    Ok(funcs.len())
}
