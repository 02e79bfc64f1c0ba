//! The DWARF parameter reader (`netprobe_core::debuginfo::params`) on `fixtures/c/dwarf_args.c`
//! built by the system C compiler: at -O2 every parameter is where the System V ABI passes it at
//! the function's first instruction (psABI §3.2.3: the six integer registers in order, then the
//! caller's stack from `rsp+8`), at -O0 each one is in the frame only after the prologue; and
//! hostile bytes in the debug sections give errors or reasons, never a panic.

use fixtures::e2e::{self, err, Need};
use netprobe_core::abi::Register;
use netprobe_core::debuginfo::{
    find_function, params_at, prologue_end, DebugSections, FunctionQuery, Location, ParamType,
    Piece, Place, FRAME_NOT_BUILT,
};
use std::path::Path;

type R = Result<(), String>;

fn bin(opt: &str) -> std::path::PathBuf {
    fixtures::CProgram::new("dwarf_args")
        .flags(&["-g", opt])
        .build()
}

fn sections(path: &Path) -> Result<DebugSections, String> {
    DebugSections::parse(path, &std::fs::read(path).map_err(err)?).map_err(err)
}

fn reg(r: Register) -> Location {
    Location::Pieces(vec![Piece {
        bytes: None,
        place: Place::Register(r),
    }])
}

fn entry_stack(offset: i64) -> Location {
    Location::Pieces(vec![Piece {
        bytes: None,
        place: Place::Memory {
            base: Register::Sp,
            offset,
        },
    }])
}

fn o2_at_entry_follows_the_abi() -> R {
    let path = bin("-O2");
    let s = sections(&path)?;
    let dwarf = s.dwarf();
    let f = find_function(&dwarf, FunctionQuery::Name("np_args"))
        .map_err(err)?
        .ok_or("np_args not found")?;
    let by_entry = find_function(&dwarf, FunctionQuery::Entry(f.entry)).map_err(err)?;
    if by_entry.as_ref() != Some(&f) {
        return Err(format!("by entry {by_entry:?} != by name {f:?}"));
    }
    let got = params_at(&s, &dwarf, &f, f.entry).map_err(err)?;
    let want = [
        ("i", reg(Register::Di)),
        ("u", reg(Register::Si)),
        ("b", reg(Register::Dx)),
        ("s", reg(Register::Cx)),
        ("p", reg(Register::R8)),
        ("pt", reg(Register::R9)),
        ("pr", entry_stack(8)),
        ("c", entry_stack(24)),
    ];
    let names: Vec<_> = got.params.iter().map(|p| p.name.as_str()).collect();
    if names != want.iter().map(|w| w.0).collect::<Vec<_>>() {
        return Err(format!("names {names:?}"));
    }
    for (p, (_, loc)) in got.params.iter().zip(&want) {
        if p.location != *loc {
            return Err(format!("{}: {:?}, want {loc:?}", p.name, p.location));
        }
    }
    let ty = |i: usize| &got.params[i].ty;
    let checks = [
        matches!(
            ty(0),
            ParamType::Int {
                bytes: 4,
                signed: true,
                ..
            }
        ),
        matches!(
            ty(1),
            ParamType::Int {
                bytes: 8,
                signed: false,
                ..
            }
        ),
        matches!(ty(2), ParamType::Bool { bytes: 1, .. }),
        matches!(ty(3), ParamType::CString { name } if name == "const char *"),
        matches!(ty(4), ParamType::Pointer { name } if name == "void *"),
        matches!(ty(5), ParamType::Struct { bytes: 8, fields, .. } if fields.len() == 2 && fields[1].offset == 4),
        matches!(ty(6), ParamType::Struct { bytes: 16, fields, .. } if fields[1].name == "b"),
        matches!(ty(7), ParamType::Char { .. }),
    ];
    match checks.iter().position(|ok| !ok) {
        Some(i) => Err(format!("type of {}: {:?}", got.params[i].name, ty(i))),
        None => Ok(()),
    }
}

fn o0_only_after_the_prologue() -> R {
    let path = bin("-O0");
    let s = sections(&path)?;
    let dwarf = s.dwarf();
    let f = find_function(&dwarf, FunctionQuery::Name("np_args"))
        .map_err(err)?
        .ok_or("np_args not found")?;
    let at_entry = params_at(&s, &dwarf, &f, f.entry).map_err(err)?;
    // Only `pr` (passed on the stack) is in the caller's frame; the rest wait for the prologue.
    for p in &at_entry.params {
        let waits = p.location == Location::Unreadable(FRAME_NOT_BUILT.into());
        if waits == (p.name == "pr") {
            return Err(format!("at entry {}: {:?}", p.name, p.location));
        }
    }
    let end = prologue_end(&dwarf, &f)
        .map_err(err)?
        .ok_or("no prologue end")?;
    if end <= f.entry || end >= f.end {
        return Err(format!("prologue end {end:#x} outside {f:?}"));
    }
    let after = params_at(&s, &dwarf, &f, end).map_err(err)?;
    for p in &after.params {
        // GCC keeps the frame pointer at -O0: every parameter is at rbp-N, `pr` at rbp+16.
        let Location::Pieces(pieces) = &p.location else {
            return Err(format!("after the prologue {}: {:?}", p.name, p.location));
        };
        if !matches!(
            pieces[..],
            [Piece {
                bytes: None,
                place: Place::Memory {
                    base: Register::Bp,
                    ..
                }
            }]
        ) {
            return Err(format!("after the prologue {}: {pieces:?}", p.name));
        }
    }
    Ok(())
}

/// Random bytes over the DWARF sections of both builds: the reader returns, never panics.
fn hostile_debug_sections_never_panic() -> R {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    for opt in ["-O0", "-O2"] {
        let path = bin(opt);
        let original = std::fs::read(&path).map_err(err)?;
        let elf = goblin::elf::Elf::parse(&original).map_err(err)?;
        let ranges: Vec<(usize, usize)> = elf
            .section_headers
            .iter()
            .filter(|sh| {
                elf.shdr_strtab
                    .get_at(sh.sh_name)
                    .is_some_and(|n| n.starts_with(".debug_") || n == ".eh_frame")
            })
            .map(|sh| (sh.sh_offset as usize, sh.sh_size as usize))
            .filter(|(_, len)| *len > 0)
            .collect();
        drop(elf);
        let mut runner = TestRunner::new(Config {
            cases: 192,
            ..Config::default()
        });
        let edits =
            proptest::collection::vec((0..ranges.len(), any::<usize>(), any::<u8>()), 1..48);
        runner
            .run(&edits, |edits| {
                let mut bytes = original.clone();
                for (r, at, b) in edits {
                    let (start, len) = ranges[r];
                    bytes[start + at % len] = b;
                }
                let Ok(s) = DebugSections::parse(&path, &bytes) else {
                    return Ok(());
                };
                let dwarf = s.dwarf();
                if let Ok(Some(f)) = find_function(&dwarf, FunctionQuery::Name("np_args")) {
                    let _ = params_at(&s, &dwarf, &f, f.entry);
                    if let Ok(Some(end)) = prologue_end(&dwarf, &f) {
                        let _ = params_at(&s, &dwarf, &f, end);
                    }
                }
                let _ = find_function(&dwarf, FunctionQuery::Entry(0x1139));
                Ok(())
            })
            .map_err(|e| format!("{opt}: {e}"))?;
    }
    Ok(())
}

fn main() {
    let cc = [Need::CCompiler];
    e2e::run(vec![
        e2e::trial(
            "o2_at_entry_follows_the_abi",
            &cc,
            o2_at_entry_follows_the_abi,
        ),
        e2e::trial(
            "o0_only_after_the_prologue",
            &cc,
            o0_only_after_the_prologue,
        ),
        e2e::trial(
            "hostile_debug_sections_never_panic",
            &cc,
            hostile_debug_sections_never_panic,
        ),
    ])
}
