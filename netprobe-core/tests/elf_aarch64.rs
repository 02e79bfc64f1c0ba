//! aarch64 ELF images read on any host, checked against binutils' `readelf` (it reads every
//! machine's ELF files; nothing of netprobe's): a C program cross-built with
//! `aarch64-linux-gnu-gcc` (non-PIE with a far executable section in a PT_LOAD of its own, and a
//! PIE), and a real linux-arm64 NativeAOT library (PyPI pyaniparser 0.6.1's
//! `Banned.AniParser.Native-linux-arm64.so`, fetched by `sample-app/dotnet/fetch-linux-arm64.sh`).
//! Every function symbol is where `readelf -s`/`--dyn-syms` puts it, with the file offset of the
//! `PT_LOAD` formula `vaddr - p_vaddr + p_offset` computed here from `readelf -l`.

use fixtures::e2e::{self, err, Need};
use fixtures::{CProgram, AARCH64_CC};
use netprobe_core::arch::Arch;
use netprobe_core::elf::parser::ElfView;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

type R = Result<(), String>;

fn readelf(args: &[&str], path: &Path) -> Result<String, String> {
    let out = Command::new("readelf")
        .args(args)
        .arg(path)
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(format!(
            "readelf {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// `(p_offset, p_vaddr, p_filesz)` of each `LOAD` line of `readelf -lW`.
fn load_segments(path: &Path) -> Result<Vec<(u64, u64, u64)>, String> {
    let text = readelf(&["-lW"], path)?;
    let segs: Vec<(u64, u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"LOAD")).then_some(())?;
            Some((hex(f.get(1)?)?, hex(f.get(2)?)?, hex(f.get(4)?)?))
        })
        .collect();
    if segs.is_empty() {
        return Err("readelf -l shows no LOAD".into());
    }
    Ok(segs)
}

/// The `PT_LOAD` formula for `vaddr`.
fn formula(segs: &[(u64, u64, u64)], vaddr: u64) -> Option<u64> {
    segs.iter()
        .find(|(_, v, sz)| (*v..v + sz).contains(&vaddr))
        .map(|(off, v, _)| vaddr - v + off)
}

/// Defined FUNC and IFUNC symbols of `readelf -sW` (or `--dyn-syms -W`): name (version cut) ->
/// address.
fn readelf_funcs(path: &Path, table: &str) -> Result<HashMap<String, u64>, String> {
    let text = readelf(&[table, "-W"], path)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Num: Value Size Type Bind Vis Ndx Name
            if f.len() < 8 || !matches!(f[3], "FUNC" | "IFUNC") || f[6] == "UND" {
                return None;
            }
            let name = f[7].split('@').next()?.to_string();
            Some((name, hex(f[1])?))
        })
        .collect())
}

/// netprobe's symbols of `path` (what `netprobe symbols` lists): name (version cut) ->
/// (address, file offset).
fn netprobe_symbols(path: &Path) -> Result<HashMap<String, (u64, Option<u64>)>, String> {
    Ok(netprobe_core::image::load_symbols(path)
        .map_err(err)?
        .into_iter()
        .map(|s| {
            let name = s.name.split('@').next().unwrap_or(&s.name).to_string();
            (name, (s.address.value(), s.file_offset.map(|o| o.0)))
        })
        .collect())
}

/// Every function of `readelf` in `theirs` is in netprobe's list at readelf's address with the
/// PT_LOAD formula's offset. Returns how many were compared.
fn compare(path: &Path, theirs: &HashMap<String, u64>) -> Result<usize, String> {
    let bytes = std::fs::read(path).map_err(err)?;
    let arch = ElfView::parse(path, &bytes).map_err(err)?.arch();
    if arch != Some(Arch::Aarch64) {
        return Err(format!("{}: architecture {arch:?}", path.display()));
    }
    let segs = load_segments(path)?;
    let ours = netprobe_symbols(path)?;
    let mut n = 0;
    for (name, &addr) in theirs {
        if addr == 0 {
            continue;
        }
        let want = (addr, formula(&segs, addr));
        if ours.get(name) != Some(&want) {
            return Err(format!(
                "{}: {name}: readelf + PT_LOAD say {want:x?}, netprobe {:x?}",
                path.display(),
                ours.get(name)
            ));
        }
        n += 1;
    }
    Ok(n)
}

/// `fixtures/c/offsets.c` cross-built for aarch64: every `.symtab` function at readelf's address
/// and the PT_LOAD offset (`.farcode` sits in a PT_LOAD of its own at 0x800000, where the `.text`
/// formula would be wrong), in a non-PIE and a PIE; and the offsets `netprobe offsets` prints
/// (`resolve_file`) for every `np_` function are the same formula's.
fn c_program_symbols_and_offsets() -> R {
    for flags in [
        &["-O1", "-no-pie", "-Wl,--section-start=.farcode=0x800000"][..],
        &["-O1", "-pie", "-fPIE"][..],
    ] {
        let path = aarch64_c_program("offsets", flags);
        let theirs = readelf_funcs(&path, "-s")?;
        let n = compare(&path, &theirs)?;
        let segs = load_segments(&path)?;
        let targets = netprobe_core::resolve::resolve_file(&path, "np_*").map_err(err)?;
        let mut np = 0;
        for t in &targets {
            let addr = *theirs
                .get(&t.symbol.name)
                .ok_or_else(|| format!("{}: not in readelf -s", t.symbol.name))?;
            if Some(t.file_offset.0) != formula(&segs, addr) {
                return Err(format!(
                    "offsets {}: {:#x}, PT_LOAD formula {:x?}",
                    t.symbol.name,
                    t.file_offset.0,
                    formula(&segs, addr)
                ));
            }
            np += 1;
        }
        if n < 10 || np < 4 || !targets.iter().any(|t| t.symbol.name == "np_far_function") {
            return Err(format!(
                "{flags:?}: {n} functions, {np} np_ offsets compared"
            ));
        }
        eprintln!("  aarch64 offsets.c {flags:?}: {n} functions, {np} np_ offsets equal readelf");
    }
    Ok(())
}

/// The linux-arm64 NativeAOT library fetched by `fetch-linux-arm64.sh`.
fn arm64_nativeaot_lib() -> PathBuf {
    fixtures::cache_dir().join("linux-arm64/nativeaot/Banned.AniParser.Native-linux-arm64.so")
}

/// A real linux-arm64 NativeAOT library: every export of `readelf --dyn-syms` is listed at its
/// address with the PT_LOAD offset; and the library is recognised as NativeAOT through its
/// `__modules` slot, whose `R_AARCH64_RELATIVE` relocation (`readelf -r`) points at the `RTR`
/// module header netprobe reports.
fn nativeaot_arm64_exports() -> R {
    let lib = arm64_nativeaot_lib();
    let exports = readelf_funcs(&lib, "--dyn-syms")?;
    let n = compare(&lib, &exports)?;
    if n < 5 {
        return Err(format!("only {n} exports compared"));
    }
    let sections = readelf(&["-SW"], &lib)?;
    let modules = sections
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let i = f.iter().position(|w| *w == "__modules")?;
            hex(f.get(i + 2)?)
        })
        .ok_or("readelf -S shows no __modules")?;
    let relocs = readelf(&["-rW"], &lib)?;
    let header = relocs
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f.first()?)? == modules && *f.get(2)? == "R_AARCH64_RELATIVE")
                .then(|| hex(f.last()?))
                .flatten()
        })
        .ok_or("no R_AARCH64_RELATIVE on __modules")?;
    let bytes = std::fs::read(&lib).map_err(err)?;
    let segs = load_segments(&lib)?;
    let at = formula(&segs, header).ok_or("header outside the file")? as usize;
    if bytes.get(at..at + 4) != Some(b"RTR\0") {
        return Err(format!("no RTR signature at {header:#x}"));
    }
    let view = ElfView::parse(&lib, &bytes).map_err(err)?;
    let aot = netprobe_core::elf::nativeaot::detect(&view).ok_or("not recognised as NativeAOT")?;
    if aot.header_vaddr != header {
        return Err(format!(
            "module header {:#x}, readelf's relocation says {header:#x}",
            aot.header_vaddr
        ));
    }
    // The same with the slot's stored pointer zeroed, as a linker that leaves it to the loader
    // writes it (`--no-apply-dynamic-relocs`): the relocation's addend alone leads to the header.
    let mut unapplied = bytes.clone();
    let slot = formula(&segs, modules).ok_or("__modules outside the file")? as usize;
    unapplied[slot..slot + 8].fill(0);
    let view = ElfView::parse(&lib, &unapplied).map_err(err)?;
    let aot = netprobe_core::elf::nativeaot::detect(&view)
        .ok_or("with the slot zeroed: not recognised through R_AARCH64_RELATIVE")?;
    if aot.header_vaddr != header {
        return Err(format!(
            "slot zeroed: module header {:#x}",
            aot.header_vaddr
        ));
    }
    eprintln!("  linux-arm64 NativeAOT: {n} exports equal readelf; RTR header at {header:#x}");
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "aarch64_c_program_symbols_and_offsets_match_readelf",
            &[Need::Program(AARCH64_CC), Need::Program("readelf")],
            c_program_symbols_and_offsets,
        ),
        e2e::trial(
            "linux_arm64_nativeaot_exports_match_readelf",
            &[Need::Program("readelf"), Need::Path(arm64_nativeaot_lib())],
            nativeaot_arm64_exports,
        ),
    ]);
}

/// `fixtures/c/<name>.c` cross-built for aarch64 with `flags` (callers check
/// `Need::Program(AARCH64_CC)` first).
fn aarch64_c_program(name: &str, flags: &[&str]) -> std::path::PathBuf {
    CProgram::new(name)
        .compiler(AARCH64_CC)
        .flags(flags)
        .build()
}
