//! The ELF symbol source checked against binutils on programs the test builds: names and
//! addresses against `nm`, file offsets against the bytes `objdump -s` shows at each address.

use fixtures::CProgram;
use netprobe_core::addr::{FileOffset, VirtAddr};
use netprobe_core::elf::ElfFile;
use netprobe_core::symbol::{Address, Symbol, SymbolKind, SymbolOrigin, SymbolSource};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn offsets_program(extra: &[&str]) -> std::path::PathBuf {
    let mut flags = vec!["-O1", "-Wl,--section-start=.farcode=0x800000"];
    flags.extend_from_slice(extra);
    CProgram::new("offsets").flags(&flags).build()
}

fn versioned_library() -> std::path::PathBuf {
    fixtures::build::versioned_library()
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `nm` (or `nm -D`) function symbols: name -> address, for T/t/W/i types.
fn nm_functions(path: &Path, dynamic: bool) -> BTreeMap<String, u64> {
    let mut args = vec!["--defined-only"];
    if dynamic {
        args.push("-D");
    }
    let p = path.to_str().unwrap();
    args.push(p);
    run("nm", &args)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let addr = u64::from_str_radix(it.next()?, 16).ok()?;
            let ty = it.next()?;
            let name = it.next()?;
            matches!(ty, "T" | "t" | "W" | "i").then(|| (name.to_string(), addr))
        })
        .collect()
}

/// The bytes `objdump -s` shows at `[vaddr, vaddr + len)`: what the loader puts there.
fn objdump_bytes(path: &Path, vaddr: u64, len: u64) -> Vec<u8> {
    let out = run(
        "objdump",
        &[
            "-s",
            &format!("--start-address={vaddr:#x}"),
            &format!("--stop-address={:#x}", vaddr + len),
            path.to_str().unwrap(),
        ],
    );
    let mut bytes = Vec::new();
    for line in out.lines().filter(|l| l.starts_with(' ')) {
        // " 800000 8d440001 c3                          .D..."
        for group in line.split_whitespace().skip(1).take(4) {
            if group.len() % 2 != 0 || !group.chars().all(|c| c.is_ascii_hexdigit()) {
                break;
            }
            for i in (0..group.len()).step_by(2) {
                bytes.push(u8::from_str_radix(&group[i..i + 2], 16).unwrap());
            }
        }
    }
    bytes.truncate(len as usize);
    bytes
}

fn check_against_binutils(path: &Path, dynamic: bool) -> Vec<Symbol> {
    let elf = ElfFile::open(path).unwrap();
    let syms = elf.symbols().unwrap();
    let file = std::fs::read(path).unwrap();
    let mut nm = nm_functions(path, false);
    if dynamic {
        nm.extend(nm_functions(path, true));
    }
    let mut checked = 0;
    for s in syms.iter().filter(|s| s.name.starts_with("np_")) {
        let Address::Virt(VirtAddr(v)) = s.address else {
            panic!("ELF symbols are vaddrs")
        };
        assert_eq!(nm.get(&s.name), Some(&v), "{} address vs nm", s.name);
        let FileOffset(off) = s
            .file_offset
            .unwrap_or_else(|| panic!("{} has no offset", s.name));
        let len = s.size.unwrap_or(4).min(16);
        assert_eq!(
            &file[off as usize..(off + len) as usize],
            objdump_bytes(path, v, len).as_slice(),
            "{}: bytes at file offset {off:#x} differ from objdump's bytes at {v:#x}",
            s.name
        );
        checked += 1;
    }
    assert!(checked > 0);
    // Every function nm lists is found, under its name or (a .dynsym duplicate of a .symtab
    // entry) its unversioned name at the same address.
    let base = |n: &str| n.split('@').next().unwrap().to_string();
    for (name, addr) in nm.iter().filter(|(n, _)| n.starts_with("np_")) {
        assert!(
            syms.iter()
                .any(|s| s.address.value() == *addr
                    && (s.name == *name || base(&s.name) == base(name))),
            "nm's {name} at {addr:#x} not found"
        );
    }
    syms
}

#[test]
fn non_pie_program_matches_nm_and_objdump() {
    let syms = check_against_binutils(&offsets_program(&["-no-pie"]), false);
    let ifunc = syms.iter().find(|s| s.name == "np_ifunc").unwrap();
    assert_eq!(ifunc.kind, SymbolKind::Ifunc);
}

#[test]
fn pie_program_matches_nm_and_objdump() {
    check_against_binutils(&offsets_program(&["-pie", "-fPIE"]), false);
}

#[test]
fn shared_library_versioned_names_match_nm_dynamic() {
    let syms = check_against_binutils(&versioned_library(), true);
    let names: Vec<&str> = syms
        .iter()
        .filter(|s| s.name.starts_with("np_lib"))
        .map(|s| s.name.as_str())
        .collect();
    assert!(names.contains(&"np_lib_hello@@NPVER_2"), "{names:?}");
    assert!(names.contains(&"np_lib_hello@NPVER_1"), "{names:?}");
    // .symtab also names np_lib_plain at the same address; it is listed once.
    assert_eq!(
        syms.iter()
            .filter(|s| s.name.starts_with("np_lib_plain"))
            .count(),
        1
    );
}

/// The `.text` section formula is wrong for code outside `.text`; the segment formula is right.
#[test]
fn far_section_breaks_the_text_formula_not_the_segment_formula() {
    let path = offsets_program(&["-no-pie"]);
    let elf = ElfFile::open(&path).unwrap();
    let far = elf
        .symbols()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "np_far_function")
        .unwrap();
    let ex = elf.explain(VirtAddr(far.address.value())).unwrap();
    assert_eq!(ex.section.as_ref().unwrap().name, ".farcode");
    assert_eq!(ex.segment_offset, far.file_offset);
    assert_ne!(ex.text_section_offset, ex.segment_offset);
    // readelf agrees on where .farcode's bytes are.
    let sections = run("readelf", &["-SW", path.to_str().unwrap()]);
    let line = sections.lines().find(|l| l.contains(".farcode")).unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let name_at = fields.iter().position(|f| *f == ".farcode").unwrap();
    let off = u64::from_str_radix(fields[name_at + 3], 16).unwrap();
    assert_eq!(ex.segment_offset, Some(FileOffset(off)));

    // Inside .text both formulas agree.
    let add = elf
        .symbols()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "np_text_add")
        .unwrap();
    let ex = elf.explain(VirtAddr(add.address.value())).unwrap();
    assert_eq!(ex.text_section_offset, ex.segment_offset);
}

#[test]
fn stripped_library_falls_back_to_dynsym_with_versions() {
    let dir = tempfile::tempdir().unwrap();
    let stripped = dir.path().join("libnpver-stripped.so");
    run(
        "strip",
        &[
            "--strip-all",
            "-o",
            stripped.to_str().unwrap(),
            versioned_library().to_str().unwrap(),
        ],
    );
    let syms = check_against_binutils(&stripped, true);
    assert!(syms.iter().all(|s| s.origin == SymbolOrigin::ElfDynsym));
    let names: Vec<&str> = syms.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"np_lib_plain@@NPVER_1"), "{names:?}");
    assert!(names.contains(&"np_lib_hello@NPVER_1"), "{names:?}");
}

#[test]
fn not_an_elf_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("notes.txt");
    std::fs::write(&p, b"hello").unwrap();
    let e = ElfFile::open(&p).unwrap_err().to_string();
    assert!(e.contains("is not an ELF or PE file"), "{e}");
    std::fs::write(&p, b"\x7fELF\x02\x01\x01").unwrap();
    let e = ElfFile::open(&p).unwrap_err().to_string();
    assert!(e.contains("truncated or corrupt"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        if bytes.len() >= 4 { bytes[..4].copy_from_slice(b"\x7fELF"); }
        let p = Path::new("arbitrary");
        if let Ok(elf) = ElfFile::from_bytes(p, netprobe_core::bytes::FileBytes::Owned(bytes)) {
            let _ = elf.symbols();
            let _ = elf.explain(VirtAddr(0x401000));
        }
    }

    #[test]
    fn mutated_real_binary_never_panics(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                                        cut in any::<prop::sample::Index>()) {
        let path = offsets_program(&["-no-pie"]);
        let mut bytes = std::fs::read(path).unwrap();
        // Mutate the headers and tables, where parsers go wrong; then maybe truncate.
        for (i, b) in edits {
            let idx = i.index(bytes.len().min(4096));
            bytes[idx] = b;
        }
        if cut.index(4) == 0 { let n = cut.index(bytes.len()); bytes.truncate(n); }
        if let Ok(elf) = ElfFile::from_bytes(Path::new("mutated"), netprobe_core::bytes::FileBytes::Owned(bytes)) {
            let _ = elf.symbols();
        }
    }
}

/// Instruction starts `objdump -d` lists in `[vaddr, vaddr + len)`.
fn objdump_instruction_starts(path: &Path, vaddr: u64, len: u64) -> Vec<u64> {
    let out = run(
        "objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            &format!("--start-address={vaddr:#x}"),
            &format!("--stop-address={:#x}", vaddr + len),
            path.to_str().unwrap(),
        ],
    );
    out.lines()
        .filter_map(|l| {
            let (addr, rest) = l.trim_start().split_once(":\t")?;
            (!rest.trim().is_empty()).then(|| u64::from_str_radix(addr, 16).ok())?
        })
        .collect()
}

/// The probe-safety gate on a C program: every byte offset of `np_add` is accepted as a raw
/// offset exactly where `objdump -d` starts an instruction; a uretprobe anywhere but the first
/// byte, an offset in read-only data, and a planned entry that is no symbol's are refused; every
/// function of the program and of libc passes as a planned entry with a uretprobe (what
/// netprobe plans for C).
#[test]
fn probe_safety_gate_agrees_with_objdump() {
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let path = CProgram::new("tracee").flags(&["-O2"]).build();
    let elf = ElfFile::open(&path).unwrap();
    let syms = elf.symbols().unwrap();
    let add = syms.iter().find(|s| s.name == "np_add").unwrap();
    let (start, size) = (add.file_offset.unwrap().0, add.size.unwrap());
    let vaddr = add.address.value();
    let starts = objdump_instruction_starts(&path, vaddr, size);
    assert!(starts.len() > 3, "objdump listed {starts:?}");
    let raw = |off: u64, uretprobe: bool| ProbeRequest {
        offset: FileOffset(off),
        planned_entry: None,
        uretprobe,
    };
    let file = CodeFile::open(&path).unwrap();
    let requests: Vec<ProbeRequest> = (0..size).map(|d| raw(start + d, false)).collect();
    for (d, result) in (0..size).zip(file.check(&requests)) {
        let is_start = starts.contains(&(vaddr + d));
        match result {
            Ok(p) => {
                assert!(is_start, "np_add+{d:#x} accepted, objdump: {starts:x?}");
                assert_eq!(p.enclosing.unwrap().name, "np_add");
            }
            Err(Refusal::NotInstructionBoundary { .. }) => {
                assert!(!is_start, "np_add+{d:#x} refused, objdump: {starts:x?}")
            }
            Err(e) => panic!("np_add+{d:#x}: {e}"),
        }
    }
    // A uretprobe must sit on the first byte; the second instruction is a boundary, not an entry.
    let second = starts[1] - vaddr;
    let r = file.check(&[raw(start, true), raw(start + second, true)]);
    assert!(r[0].is_ok(), "{:?}", r[0]);
    assert!(
        matches!(r[1], Err(Refusal::UretprobeNotAtEntry { .. })),
        "{:?}",
        r[1]
    );
    // Read-only data (the ELF header at offset 0 is in the first, non-executable PT_LOAD).
    let r = file.check(&[raw(0, false)]);
    assert!(
        matches!(r[0], Err(Refusal::NotExecutable { .. })),
        "{:?}",
        r[0]
    );
    // A probe planned for np_add past its last byte.
    let r = file.check(&[ProbeRequest {
        offset: FileOffset(start + size),
        planned_entry: Some(FileOffset(start)),
        uretprobe: false,
    }]);
    assert!(
        matches!(r[0], Err(Refusal::OutsideFunction { .. })),
        "{:?}",
        r[0]
    );
    // A planned entry where no symbol starts.
    let r = file.check(&[ProbeRequest {
        offset: FileOffset(start + second),
        planned_entry: Some(FileOffset(start + second)),
        uretprobe: false,
    }]);
    assert!(
        matches!(r[0], Err(Refusal::NoFunctionAtEntry { .. })),
        "{:?}",
        r[0]
    );
    // Everything netprobe plans for C code passes, here and in libc.
    let libc = Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
    for p in [path.as_path(), libc] {
        let planned: Vec<ProbeRequest> = ElfFile::open(p)
            .unwrap()
            .symbols()
            .unwrap()
            .iter()
            .filter_map(|s| s.file_offset)
            .map(|o| ProbeRequest {
                offset: o,
                planned_entry: Some(o),
                uretprobe: true,
            })
            .collect();
        assert!(planned.len() > 5);
        let file = CodeFile::open(p).unwrap();
        for (q, r) in planned.iter().zip(file.check(&planned)) {
            assert!(
                r.is_ok(),
                "{}:{}: {}",
                p.display(),
                q.offset,
                r.unwrap_err()
            );
        }
    }
}
