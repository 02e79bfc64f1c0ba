//! The symbolizer on native ELF code, against tools netprobe did not write: `nm`/`addr2line`
//! (binutils) on a C fixture and on libc's `.dynsym`, and the vDSO as `readelf` lists it (data is
//! not code). Addresses become file offsets by the `PT_LOAD` headers as `readelf -lW` prints
//! them, not by netprobe's formulas.

mod symbolize_checks;

use fixtures::e2e::{self, err, Need};
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::{SourceKind, Symbolizer};
use std::path::Path;
use symbolize_checks::{file_offset, load_segments, nm_functions, outer, round_trip, run, Rng};

/// Each of the C fixture's 1000 functions at several offsets: the name `nm` and `addr2line -f`
/// give, the offset from its `nm` address, source `.symtab`; and the round trip.
fn elf_c_fixture_matches() -> Result<(), String> {
    let bin = fixtures::build::CProgram::new("many").build();
    let segs = load_segments(&bin)?;
    let funcs = nm_functions(&bin, &[])?;
    let mut rng = Rng(7);
    let mut probes = Vec::new();
    for (v, size, name) in &funcs {
        for d in [0, size - 1, rng.below(*size)] {
            probes.push((v + d, d, name.clone()));
        }
    }
    let input: String = probes.iter().map(|p| format!("{:#x}\n", p.0)).collect();
    let a2l = run("addr2line", &["-f", "-e", &bin.to_string_lossy()], &input)?;
    let a2l_names: Vec<&str> = a2l.lines().step_by(2).collect();
    let mut s = Symbolizer::new();
    for ((v, d, name), a2l_name) in probes.iter().zip(&a2l_names) {
        let off = file_offset(&segs, *v).ok_or("no PT_LOAD")?;
        let frames = s.symbolize_file(&bin, FileOffset(off)).map_err(err)?;
        let o = outer(&frames);
        if o.function.as_deref() != Some(name.as_str())
            || o.function.as_deref() != Some(*a2l_name)
            || o.offset != Some(*d)
            || o.source != SourceKind::ElfSymtab
        {
            return Err(format!(
                "{v:#x}: netprobe {o:?}, nm {name}+{d:#x}, addr2line {a2l_name}"
            ));
        }
    }
    if funcs.len() < 1000 {
        return Err(format!("nm lists only {} functions", funcs.len()));
    }
    round_trip(
        &bin,
        &funcs
            .iter()
            .filter(|f| f.2.starts_with('f'))
            .cloned()
            .collect::<Vec<_>>(),
        &segs,
    )
}

/// libc (no `.symtab`): functions named from `.dynsym` as `nm -D` lists them, with versions.
fn elf_libc_matches() -> Result<(), String> {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let segs = load_segments(libc)?;
    let funcs = nm_functions(libc, &["-D"])?;
    let mut s = Symbolizer::new();
    let mut checked = 0;
    for (v, size, name) in &funcs {
        let off = file_offset(&segs, v + size / 2).ok_or("no PT_LOAD")?;
        let frames = s.symbolize_file(libc, FileOffset(off)).map_err(err)?;
        let o = outer(&frames);
        // Aliases share an address (`malloc`, `__libc_malloc`): any of the names there.
        let aliases: Vec<&str> = funcs
            .iter()
            .filter(|f| f.0 == *v)
            .map(|f| f.2.as_str())
            .collect();
        let base = o
            .function
            .as_deref()
            .map(|n| n.split('@').next().unwrap_or(n));
        if !base.is_some_and(|b| aliases.iter().any(|a| a.split('@').next() == Some(b)))
            || o.offset != Some(size / 2)
            || o.source != SourceKind::ElfDynsym
        {
            return Err(format!("{name} at {v:#x}+{:#x}: netprobe {o:?}", size / 2));
        }
        checked += 1;
    }
    eprintln!("{checked} libc functions agree with nm -D");
    Ok(())
}

/// This process's vDSO (in no file: the symbolizer reads it from memory) is named as `readelf`
/// lists the symbols of the same bytes written to a file; an address on the stack (mapped, not
/// executable) is `[not code]`, not an unknown frame.
fn vdso_and_data() -> Result<(), String> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(err)?;
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .ok_or("no [vdso] in /proc/self/maps")?;
    let range = line.split(' ').next().unwrap_or_default();
    let (start, end) = range.split_once('-').ok_or("bad maps line")?;
    let start = u64::from_str_radix(start, 16).map_err(err)?;
    let end = u64::from_str_radix(end, 16).map_err(err)?;
    let mut bytes = vec![0u8; (end - start) as usize];
    std::fs::File::open("/proc/self/mem")
        .map_err(err)?
        .read_exact_at(&mut bytes, start)
        .map_err(err)?;
    let dir = tempfile::tempdir().map_err(err)?;
    let file = dir.path().join("vdso.so");
    std::fs::write(&file, &bytes).map_err(err)?;
    // `Num: Value Size Type Bind Vis Ndx Name` rows of FUNC symbols.
    let syms = run("readelf", &["-W", "--dyn-syms", file.to_str().unwrap()], "")?;
    let funcs: Vec<(u64, u64, String)> = syms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[3] == "FUNC").then(|| {
                let v = u64::from_str_radix(f[1], 16).ok()?;
                let size = f[2].parse().ok()?;
                Some((v, size, f[7].to_string()))
            })?
        })
        .collect();
    if funcs.is_empty() {
        return Err(format!("readelf lists no functions in the vDSO:\n{syms}"));
    }
    let mut sym = Symbolizer::new();
    let pid = std::process::id();
    for (value, size, _) in &funcs {
        // The vDSO's first PT_LOAD maps file offset 0 at vaddr 0: a symbol's value is its
        // offset from the mapping's start.
        let addr = start + value + size / 2;
        let frames = sym.symbolize(pid, addr).map_err(err)?;
        let f = outer(&frames);
        let names: Vec<&str> = funcs
            .iter()
            .filter(|(v, _, _)| v == value)
            .map(|(_, _, n)| n.as_str())
            .collect();
        let ok = f.function.as_deref().is_some_and(|n| names.contains(&n))
            && f.offset == Some(size / 2)
            && f.image.as_deref() == Some(Path::new("[vdso]"));
        if !ok {
            return Err(format!("{addr:#x}: {f} ({f:?}), readelf names {names:?}"));
        }
    }
    let on_stack = 0u64;
    let addr = &on_stack as *const u64 as u64;
    let frames = sym.symbolize(pid, addr).map_err(err)?;
    match &frames[..] {
        [f] if f.source == SourceKind::NotCode
            && f.to_string() == format!("[not code] ({addr:#x})") =>
        {
            Ok(())
        }
        other => Err(format!("a stack address symbolized as {other:?}")),
    }
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "elf_c_fixture_matches_nm_and_addr2line",
            &[Need::CCompiler, Need::Program("addr2line")],
            elf_c_fixture_matches,
        ),
        e2e::trial(
            "elf_libc_dynsym_matches_nm",
            &[Need::Program("nm")],
            elf_libc_matches,
        ),
        e2e::trial(
            "vdso_frames_named_as_readelf_lists_them_and_data_is_not_code",
            &[Need::Program("readelf")],
            vdso_and_data,
        ),
    ]);
}
