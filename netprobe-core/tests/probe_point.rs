//! The cheapest-entry decisions (`netprobe_core::probe_point`) for every function of real
//! programs, built by the system C compiler at -O2 from `fixtures/c/{probepoint,tracee,
//! golive_native}.c`: a snapshot of each decision, for a probe reading all six System V argument
//! registers and for one reading nothing, and every decision checked against `objdump -d`: the
//! planned and chosen offsets are instruction starts objdump shows, with the mnemonic the
//! decision names, and a moved probe lands on an instruction the kernel emulates.

use fixtures::e2e::{self, err, text, Need};
use netprobe_core::probe_point::{cheapest_entry, recheck_branches_from_file, FetchedState};
use netprobe_core::probe_safety::CodeFile;
use netprobe_core::symbol::{Address, SymbolKind};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::process::Command;

/// objdump's instructions of `bin` by address: the mnemonic (AT&T, without suffix letters
/// compared: `push`, `jmp`, `endbr64`).
fn objdump(bin: &Path) -> Result<BTreeMap<u64, String>, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "intel"])
        .arg(bin)
        .output()
        .map_err(err)?;
    let mut by = BTreeMap::new();
    for line in text(&out.stdout).lines() {
        let Some((addr, rest)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(a) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let mnemonic = rest.split_whitespace().next().unwrap_or_default();
        by.insert(a, mnemonic.to_string());
    }
    Ok(by)
}

fn decisions(bin: &Path, name: &str, out: &mut String) -> Result<(), String> {
    let listing = objdump(bin)?;
    let file = CodeFile::open(bin).map_err(err)?;
    let mut symbols = netprobe_core::image::load_symbols(bin).map_err(err)?;
    symbols.retain(|s| s.kind == SymbolKind::Function && s.size.is_some_and(|z| z > 0));
    symbols.sort_by(|a, b| a.name.cmp(&b.name));
    symbols.dedup_by(|a, b| a.name == b.name);
    let all_args = FetchedState {
        registers: netprobe_core::arch::x86_64::calling_convention::INT_ARGUMENT_REGISTERS.to_vec(),
        opaque: false,
    };
    let _ = writeln!(out, "## {name}");
    for s in &symbols {
        let (Some(off), Address::Virt(addr)) = (s.file_offset, s.address) else {
            continue;
        };
        let (_, Some(code)) = file
            .function_code(off)
            .map_err(|r| format!("{}: {r}", s.name))?
        else {
            continue;
        };
        for (fetch, label) in [(&all_args, "args"), (&FetchedState::default(), "none")] {
            let c = cheapest_entry(netprobe_core::arch::Arch::X86_64, &code, 0, fetch);
            for p in [&c.planned, &c.chosen] {
                let at = addr.0 + p.offset;
                let seen = listing.get(&at).ok_or_else(|| {
                    format!(
                        "{}+{:#x}: objdump shows no instruction start there",
                        s.name, p.offset
                    )
                })?;
                // objdump's Intel mnemonics equal iced's, but for `nop` forms it spells `xchg ax,ax`.
                if *seen != p.mnemonic && !(p.mnemonic == "nop" && seen == "xchg") {
                    return Err(format!(
                        "{}+{:#x}: objdump shows {seen}, the decision says {}",
                        s.name, p.offset, p.mnemonic
                    ));
                }
            }
            let what = match &c.kept {
                None => format!("moved to {}", c.chosen.describe()),
                Some(k) => format!("kept: {k}"),
            };
            let _ = writeln!(out, "{} [{label}] {}: {what}", s.name, c.planned.describe());
        }
    }
    Ok(())
}

fn real_programs() -> Result<(), String> {
    let mut out = String::new();
    for name in ["probepoint", "tracee", "golive_native"] {
        let bin = fixtures::CProgram::new(name).flags(&["-O2"]).build();
        decisions(&bin, name, &mut out)?;
    }
    // The hand-assembled functions move (or stay) exactly as their comments in the source say.
    for want in [
        "pp_sum [args] +0x0 (mov, single-stepped: ~12 µs/hit): moved to +0x3 (push",
        "pp_endbr [args] +0x0 (endbr64, single-stepped: ~12 µs/hit): moved to +0x4 (push",
        "pp_loop [none] +0x0 (mov, single-stepped: ~12 µs/hit): kept: +0x4 is the target",
        "pp_argwrite [args] +0x0 (lea, single-stepped: ~12 µs/hit): kept: the instruction at +0x0 writes %di",
        "pp_argwrite [none] +0x0 (lea, single-stepped: ~12 µs/hit): moved to +0x4 (push",
    ] {
        if !out.contains(want) {
            return Err(format!("missing: {want}\n{out}"));
        }
    }
    insta::assert_snapshot!("probe_point_decisions_c_o2", out);
    Ok(())
}

/// A real program with arbitrary bytes overwritten (headers, symbol tables, code): reading a
/// function's code and choosing its probe point never panics, and any choice lies inside the
/// bytes returned for the function.
fn hostile_bytes_never_panic() -> Result<(), String> {
    use netprobe_core::bytes::FileBytes;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let bin = fixtures::CProgram::new("probepoint")
        .flags(&["-O2"])
        .build();
    let original = std::fs::read(&bin).map_err(err)?;
    let offsets: Vec<_> = netprobe_core::image::load_symbols(&bin)
        .map_err(err)?
        .into_iter()
        .filter_map(|s| s.file_offset)
        .collect();
    let len = original.len();
    let mut runner = TestRunner::new(Config {
        cases: 128,
        ..Config::default()
    });
    runner
        .run(
            &proptest::collection::vec((0..len, any::<u8>()), 1..64),
            |edits| {
                let mut bytes = original.clone();
                for (at, b) in edits {
                    bytes[at] = b;
                }
                let file = CodeFile::from_bytes(&bin, FileBytes::Owned(bytes));
                for &off in &offsets {
                    if let Ok((_, Some(code))) = file.function_code(off) {
                        let c = cheapest_entry(
                            netprobe_core::arch::Arch::X86_64,
                            &code,
                            0,
                            &FetchedState::default(),
                        );
                        prop_assert!(
                            c.chosen.offset == 0 || (c.chosen.offset as usize) < code.len()
                        );
                    }
                }
                Ok(())
            },
        )
        .map_err(|e| e.to_string())
}

/// Debian's libc: every move netprobe makes, checked against every direct jump and call
/// `objdump -d` shows in the whole file: none lands after a function's first byte up to its
/// chosen point (hand-written string functions jump into each other: `memcpy@GLIBC_2.2.5+0x3`
/// is such a target and keeps its first byte).
fn libc_moves_match_objdump_branches() -> Result<(), String> {
    let libc = Path::new(LIBC);
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(libc)
        .output()
        .map_err(err)?;
    let mut targets: Vec<u64> = text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let insn = l.split('\t').nth(1)?;
            let mut w = insn.split_whitespace();
            let m = w.next()?;
            if !(m.starts_with('j') || m.starts_with("call")) {
                return None;
            }
            u64::from_str_radix(w.next()?, 16).ok()
        })
        .collect();
    targets.sort_unstable();
    if targets.len() < 10_000 {
        return Err(format!("objdump listed only {} branches", targets.len()));
    }
    let file = CodeFile::open(libc).map_err(err)?;
    let file_targets = file.direct_branch_targets();
    let (mut moved, mut undone) = (0, 0);
    for s in netprobe_core::image::load_symbols(libc).map_err(err)? {
        let (Some(off), Address::Virt(addr), Some(_)) = (s.file_offset, s.address, s.size) else {
            continue;
        };
        let Ok((_, Some(code))) = file.function_code(off) else {
            continue;
        };
        let first = cheapest_entry(
            netprobe_core::arch::Arch::X86_64,
            &code,
            0,
            &FetchedState::default(),
        );
        let c = recheck_branches_from_file(first.clone(), off.0, &file_targets);
        if first.moved() && !c.moved() {
            undone += 1;
        }
        if !c.moved() {
            continue;
        }
        moved += 1;
        let (lo, hi) = (addr.0 + c.planned.offset, addr.0 + c.chosen.offset);
        let i = targets.partition_point(|&t| t <= lo);
        if let Some(t) = targets.get(i).filter(|&&t| t <= hi) {
            return Err(format!(
                "{}: moved to +{:#x}, but objdump shows a branch to {t:#x}",
                s.name, c.chosen.offset
            ));
        }
    }
    if moved == 0 || undone == 0 {
        return Err(format!(
            "{moved} moves, {undone} undone by outside branches: expected some of each"
        ));
    }
    Ok(())
}

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn main() {
    e2e::run(vec![
        e2e::trial(
            "real_programs_decisions_match_objdump",
            &[Need::CCompiler, Need::Program("objdump")],
            real_programs,
        ),
        e2e::trial(
            "libc_moves_match_objdump_branches",
            &[Need::Program("objdump"), Need::Path(LIBC.into())],
            libc_moves_match_objdump_branches,
        ),
        e2e::trial(
            "hostile_bytes_never_panic",
            &[Need::CCompiler],
            hostile_bytes_never_panic,
        ),
    ])
}
