//! The symbolizer on Go code, against tools netprobe did not write: `llvm-symbolizer --inlining`
//! (the compiler's DWARF inline records) and `go tool addr2line` on the unstripped build of the Go
//! sample app while netprobe reads the stripped one (the installed Go and Go 1.27), a live
//! stripped PIE process against `nm`, resolve as the inverse of symbolize, and mutated tables
//! that never panic the index. Addresses become file offsets by the `PT_LOAD` headers as
//! `readelf -lW` prints them, not by netprobe's formulas.

mod symbolize_checks;

use fixtures::e2e::{self, err, Need};
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::{Frame, SourceKind, Symbolizer};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use symbolize_checks::{
    file_offset, load_segments, nm_functions, outer, round_trip, run, run_env, shape, Rng,
};

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

fn main() {
    let go_needs = [Need::Go, Need::CCompiler, Need::Program("llvm-symbolizer")];
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
            "go_stripped_pie_live_process_frames_match_nm",
            &[Need::Go, Need::CCompiler],
            go_pie_live,
        ),
    ]);
}
