//! Source lines and inlined frames against binutils' `addr2line -a -i -f` (run once per binary,
//! every address on its stdin), for 1,000 seeded random code addresses per binary, each inside a
//! function the symbol table lists: a C program built `gcc -g -O2`, a Rust program built
//! `rustc -g -O`, the Go sample app built by Go 1.21 and by the newest Go the fixtures fetch, and
//! Debian's libc through libc6-dbg's build-id debug file.
//!
//! What is compared, per address, innermost frame first:
//! - the number of frames (every inlined function, then the function holding the code);
//! - each frame's file and line as addr2line prints them (both join the file name with its
//!   directory and the unit's compilation directory as DWARF says); addr2line's
//!   `(discriminator N)` suffix is not part of the line and is dropped, and [`same_file`] forgives
//!   one binutils habit: in a DWARF 5 line table, directory 0 *is* the compilation directory
//!   (DWARF 5 §6.2.4, `include_directories`), and binutils joins a relative one with
//!   `DW_AT_comp_dir` once more (glibc's `./nptl/./nptl/sem_timedwait.c` for
//!   `./nptl/sem_timedwait.c`);
//! - the names of inlined frames exactly (both print the linkage name when DWARF has one, so a
//!   C++ or Rust name is mangled on both sides, as netprobe's symbol-table names are);
//! - the outermost name modulo what the symbol table spells differently from DWARF: GCC's clone
//!   suffixes (`round_of.part.0`, `checksum.constprop.0`, `.isra.0`, `.cold`) and LLVM's
//!   `.llvm.N` that only the symbol table carries; Go generic shapes
//!   ([`symbolize_checks::shape`]) and the `.abi0` of Go assembly functions' DWARF names; functions merged into one body (LLVM's identical-code
//!   folding: the symbol table lists every name at the address, netprobe shows one of them and
//!   DWARF's line table may name another; both must be names of that address); libc's
//!   `.dynsym` aliases and versions (its outer names are checked by `symbolize_elf` already).
//!   Where DWARF names nothing (addr2line `??`, startup code built without `-g`), netprobe's
//!   name comes from the symbol table and the frame must then have no line either.
//!
//! Where binutils 2.40 is known to misread DWARF (glibc's and Go's DWARF 5 file tables, Go's
//! inlined frames: see [`go`] and [`libc_via_build_id`]), an address passes when netprobe
//! equals llvm-addr2line instead, a second implementation that gdb agrees with there. Without a
//! line on the tool's side, netprobe must have no line either (binutils then prints the unit's
//! name as the file, which is not a location).
//!
//! Go keeps its function table's names and inline trees: where they list as many frames as
//! DWARF, every frame is compared; otherwise the innermost line (the line table's row for the
//! address itself) is.

mod symbolize_checks;

use fixtures::e2e::{self, err, Need};
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::{Frame, SourceKind, Symbolizer};
use std::path::{Path, PathBuf};
use symbolize_checks::{file_offset, load_segments, nm_functions, run, shape, Rng};

/// Addresses per binary.
const ADDRESSES: usize = 1000;

/// One frame as both sides give it: function, file, line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Line {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

/// `PROG -a -i -f -e DEBUG` over `addrs` (PROG: binutils' `addr2line` or `llvm-addr2line`): per
/// address, its frames innermost first.
fn addr2line(prog: &str, debug: &Path, addrs: &[u64]) -> Result<Vec<Vec<Line>>, String> {
    let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    let out = run(
        prog,
        &["-a", "-i", "-f", "-e", &debug.to_string_lossy()],
        &input,
    )?;
    let mut groups: Vec<Vec<Line>> = Vec::new();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.starts_with("0x") {
            groups.push(Vec::new());
            continue;
        }
        let loc = lines.next().ok_or("addr2line: a name without a location")?;
        let loc = loc.split(" (discriminator").next().unwrap_or(loc);
        let (file, line) = loc.rsplit_once(':').unwrap_or((loc, "?"));
        let frame = Line {
            function: (l != "??").then(|| l.to_string()),
            file: (file != "??").then(|| file.to_string()),
            line: line.parse().ok().filter(|&n| n > 0),
        };
        groups
            .last_mut()
            .ok_or("addr2line: no address")?
            .push(frame);
    }
    if groups.len() != addrs.len() {
        return Err(format!(
            "addr2line answered {} of {} addresses",
            groups.len(),
            addrs.len()
        ));
    }
    Ok(groups)
}

fn netprobe_lines(frames: &[Frame]) -> Vec<Line> {
    frames
        .iter()
        .map(|f| Line {
            function: f.function.clone(),
            file: f.file.clone(),
            line: f.line,
        })
        .collect()
}

/// A symbol-table name without GCC's clone suffixes (`.part.N`, `.constprop.N`, `.isra.N`,
/// `.cold`) and LLVM's `.llvm.N` (a local symbol promoted to a unique global name), which
/// DWARF's name of the function does not carry.
fn unclone(name: &str) -> &str {
    let mut n = name;
    loop {
        let before = n;
        for suffix in [".cold", ".part", ".constprop", ".isra", ".llvm"] {
            let trimmed = n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
            let base = if trimmed.ends_with(suffix) {
                trimmed
            } else {
                n
            };
            if let Some(b) = base.strip_suffix(suffix) {
                n = b;
            }
        }
        if n == before {
            return n;
        }
    }
}

/// `a` and `b` name the same file: equal, or equal once `.` components are dropped and a
/// relative path's leading folders written twice (binutils' doubled DWARF 5 directory 0) once.
fn same_file(a: &Option<String>, b: &Option<String>) -> bool {
    fn norm(p: &str) -> Vec<&str> {
        let mut c: Vec<&str> = p
            .split('/')
            .filter(|c| *c != "." && !c.is_empty())
            .collect();
        if !p.starts_with('/') {
            for k in (1..=c.len() / 2).rev() {
                if c[..k] == c[k..2 * k] {
                    c.drain(..k);
                    break;
                }
            }
        }
        c
    }
    match (a, b) {
        (Some(a), Some(b)) => a == b || norm(a) == norm(b),
        (a, b) => a == b,
    }
}

/// netprobe's `frames` at `addr` against one addr2line's `want` (see the module docs); the
/// difference when they disagree.
fn agree(
    frames: &[Frame],
    want: &[Line],
    addr: u64,
    names_at: &std::collections::HashMap<u64, Vec<&str>>,
    outer: Outer,
) -> Result<(), String> {
    let got = netprobe_lines(frames);
    let go = frames.last().map(|f| f.source) == Some(SourceKind::GoPclntab);
    // Without a line the file is only where the tool looked (binutils prints the unit's name):
    // both must then have no line.
    let same_line =
        |g: &Line, w: &Line| g.line == w.line && (w.line.is_none() || same_file(&g.file, &w.file));
    if go && got.len() != want.len() {
        return match (got.first(), want.first()) {
            (Some(g), Some(w)) if same_line(g, w) => Ok(()),
            _ => Err("the innermost line differs".into()),
        };
    }
    if got.len() != want.len() {
        return Err("a different number of frames".into());
    }
    let last = got.len() - 1;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !same_line(g, w) {
            return Err(format!("frame {i}: a different file:line"));
        }
        let same_name = match (&g.function, &w.function) {
            // DWARF names nothing here: the symbol table may, and then there is no line.
            (_, None) => g.line.is_none(),
            // Go's linker names an assembly function's ABI0 symbol `NAME.abi0` in ELF and
            // DWARF; the function table names it `NAME`.
            (Some(g), Some(w)) if go => shape(g) == shape(w.trim_end_matches(".abi0")),
            (Some(g), Some(w)) if i == last => {
                let entry = frames[last].offset.map(|o| addr - o);
                let merged = entry.and_then(|e| names_at.get(&e)).is_some_and(|names| {
                    names.contains(&g.as_str()) && names.contains(&w.as_str())
                });
                outer == Outer::Skipped || unclone(g) == unclone(w) || merged
            }
            (g, w) => g == w,
        };
        if !same_name {
            return Err(format!("frame {i}: a different function"));
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Outer {
    /// The outermost name must equal DWARF's modulo clone suffixes and Go shapes.
    Compared,
    /// Not compared (libc's `.dynsym` aliases).
    Skipped,
}

/// Compares netprobe's frames of `image` at 1,000 random addresses of its functions with
/// addr2line on `debug` (the image itself or its separate debug file).
/// Where `second_opinion` names another addr2line (llvm-addr2line), an address where netprobe
/// differs from binutils passes when it equals that one.
fn compare(
    image: &Path,
    debug: &Path,
    dynsym: bool,
    outer: Outer,
    second_opinion: Option<&str>,
) -> Result<(), String> {
    let funcs = nm_functions(image, if dynsym { &["-D"] } else { &[] })?;
    compare_in(image, debug, &funcs, outer, second_opinion)
}

/// [`compare`] at random addresses of `funcs` (address, size, name).
fn compare_in(
    image: &Path,
    debug: &Path,
    funcs: &[(u64, u64, String)],
    outer: Outer,
    second_opinion: Option<&str>,
) -> Result<(), String> {
    let segs = load_segments(image)?;
    if funcs.is_empty() {
        return Err(format!("nm lists no functions in {}", image.display()));
    }
    let mut names_at: std::collections::HashMap<u64, Vec<&str>> = Default::default();
    for (v, _, n) in funcs {
        names_at.entry(*v).or_default().push(n);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let addrs: Vec<u64> = (0..ADDRESSES)
        .map(|_| {
            let (v, size, _) = &funcs[rng.below(funcs.len() as u64) as usize];
            v + rng.below(*size)
        })
        .collect();
    let expected = addr2line("addr2line", debug, &addrs)?;
    let second = match second_opinion {
        Some(prog) => Some(addr2line(prog, debug, &addrs)?),
        None => None,
    };
    let mut s = Symbolizer::new();
    let (mut chains, mut with_lines) = (0, 0);
    for (i, (addr, want)) in addrs.iter().zip(&expected).enumerate() {
        let off = file_offset(&segs, *addr).ok_or("no PT_LOAD")?;
        let frames = s.symbolize_file(image, FileOffset(off)).map_err(err)?;
        // Counted on netprobe's side (checked against a tool just below).
        if frames.len() > 1 {
            chains += 1;
        }
        if frames[0].line.is_some() {
            with_lines += 1;
        }
        let agrees = |want: &[Line]| agree(&frames, want, *addr, &names_at, outer);
        if let Err(why) = agrees(want) {
            if second.as_ref().is_some_and(|s| agrees(&s[i]).is_ok()) {
                continue;
            }
            return Err(format!(
                "{} {addr:#x}: {why}\n netprobe:  {:?}\n addr2line: {want:?}",
                image.display(),
                netprobe_lines(&frames)
            ));
        }
    }
    // The comparison means something only if the binary has lines and inlined code.
    if with_lines < ADDRESSES / 2 || chains < ADDRESSES / 20 {
        return Err(format!(
            "{}: only {with_lines} addresses with a line and {chains} with inlined frames",
            image.display()
        ));
    }
    Ok(())
}

fn c_o2() -> Result<(), String> {
    let bin = fixtures::build::CProgram::new("lines")
        .flags(&["-g", "-O2"])
        .build();
    compare(&bin, &bin, false, Outer::Compared, None)
}

/// `fixtures/rust/inlines.rs` built with `rustc -g -O` into the fixtures folder (once per
/// source and compiler).
fn rust_program() -> Result<PathBuf, String> {
    let src = fixtures::workspace_root().join("fixtures/rust/inlines.rs");
    let version = run("rustc", &["--version"], "")?;
    let text = std::fs::read_to_string(&src).map_err(err)?;
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (text, version).hash(&mut h);
        h.finish()
    };
    let dir = fixtures::build::target_dir().join("fixtures-bin");
    let out = dir.join(format!("inlines-rs-{key:016x}"));
    if !out.exists() {
        std::fs::create_dir_all(&dir).map_err(err)?;
        let tmp = fixtures::build::unique_tmp(&dir, "inlines-rs");
        let tmp_s = tmp.to_string_lossy().into_owned();
        run(
            "rustc",
            &["-g", "-O", "-o", &tmp_s, &src.to_string_lossy()],
            "",
        )?;
        fixtures::build::put_in_place(&tmp, &out);
    }
    Ok(out)
}

fn rust_o() -> Result<(), String> {
    let bin = rust_program()?;
    compare(&bin, &bin, false, Outer::Compared, None)
}

fn go(version: &'static str) -> impl FnOnce() -> Result<(), String> {
    move || {
        let bin = fixtures::go::sample_app_variants_by(version).join("sampleapp-default");
        // binutils 2.40 names the outer function for the innermost of some Go inline chains
        // (Go 1.21, `sync/atomic.(*Int32).Add` inlined into `sync.(*RWMutex).RUnlock`), and
        // reads no line from the DWARF 5 line tables Go writes from 1.25 on (`go.go:?`, so
        // for those releases llvm-addr2line is the reference at every address with a line);
        // llvm-addr2line and gdb's `info line` give netprobe's answer there.
        compare(&bin, &bin, false, Outer::Compared, Some("llvm-addr2line"))
    }
}

/// libc and its libc6-dbg debug file, found by build-id.
fn libc_and_debug() -> Result<(&'static Path, PathBuf), String> {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let bytes = std::fs::read(libc).map_err(err)?;
    let view = netprobe_core::elf::parser::ElfView::parse(libc, &bytes).map_err(err)?;
    let id = netprobe_core::debuginfo::build_id(&view).ok_or("libc has no build-id")?;
    let debug = netprobe_core::debuginfo::build_id_path(&id).ok_or("short build-id")?;
    if !debug.exists() {
        return Err(format!(
            "{} is missing: install libc6-dbg (scripts/install-prereqs.sh)",
            debug.display()
        ));
    }
    Ok((libc, debug))
}

fn libc_via_build_id() -> Result<(), String> {
    let (libc, debug) = libc_and_debug()?;
    // binutils 2.40 reads some of glibc's DWARF 5 file entries wrongly (at strfromf128+0x9f it
    // names strfromf128.c:122 where gdb's `info line` and llvm-addr2line name the file the
    // line is in, strfrom-skeleton.c:122): there llvm-addr2line decides.
    compare(libc, &debug, true, Outer::Skipped, Some("llvm-addr2line"))
}

/// libc's local functions (in the debug file's `.symtab` only; the stripped library's `.dynsym`
/// covers none of their code, e.g. `__libc_start_call_main`, `msort_with_tmp`) are named by
/// DWARF as addr2line names them, with their lines and inlined frames.
fn libc_local_functions() -> Result<(), String> {
    let (libc, debug) = libc_and_debug()?;
    let exported = nm_functions(libc, &["-D"])?;
    let covered = |v: u64| exported.iter().any(|(s, n, _)| *s <= v && v < s + n);
    let local: Vec<(u64, u64, String)> = nm_functions(&debug, &[])?
        .into_iter()
        .filter(|(v, n, _)| *n > 0 && !covered(*v) && !covered(v + n - 1))
        .collect();
    if local.len() < 100 {
        return Err(format!(
            "{} lists {} local functions",
            debug.display(),
            local.len()
        ));
    }
    // The names are checked here (the lines of libc's DWARF 5 are what the trial above
    // checks): the function each address is in, and the functions inlined there.
    let segs = load_segments(libc)?;
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let addrs: Vec<u64> = (0..200)
        .map(|_| {
            let (v, size, _) = &local[rng.below(local.len() as u64) as usize];
            v + rng.below(*size)
        })
        .collect();
    let expected = addr2line("addr2line", &debug, &addrs)?;
    let mut s = Symbolizer::new();
    let mut named = 0;
    for (addr, want) in addrs.iter().zip(&expected) {
        let off = file_offset(&segs, *addr).ok_or("no PT_LOAD")?;
        let frames = s.symbolize_file(libc, FileOffset(off)).map_err(err)?;
        let got: Vec<Option<String>> = frames.iter().map(|f| f.function.clone()).collect();
        named += usize::from(got.last().is_some_and(Option::is_some));
        // Where DWARF does not cover the address (no line: hand-written assembly, libgcc's
        // soft-float helpers), addr2line names it from the debug file's `.symtab`, which
        // netprobe does not read: it leaves the frame unnamed rather than guess.
        let no_dwarf = want.iter().all(|l| l.line.is_none());
        let want: Vec<Option<String>> = want.iter().map(|l| l.function.clone()).collect();
        if got != want && !(no_dwarf && got == [None]) {
            return Err(format!(
                "{addr:#x}: netprobe names {got:?}, addr2line {want:?}"
            ));
        }
    }
    if named < addrs.len() * 3 / 4 {
        return Err(format!("only {named} of {} addresses named", addrs.len()));
    }
    Ok(())
}

fn main() {
    let newest = *fixtures::go::GO_TOOLCHAINS.last().expect("a Go release");
    let go_needs = |v: &str| {
        vec![
            Need::Program("addr2line"),
            Need::Program("llvm-addr2line"),
            Need::CCompiler,
            Need::Path(fixtures::go::toolchain_go(v)),
        ]
    };
    e2e::run(vec![
        e2e::trial(
            "c_o2_lines_and_inlines_equal_addr2line",
            &[Need::CCompiler, Need::Program("addr2line")],
            c_o2,
        ),
        e2e::trial(
            "rust_release_lines_and_inlines_equal_addr2line",
            &[Need::Program("rustc"), Need::Program("addr2line")],
            rust_o,
        ),
        e2e::trial(
            "go_1_21_lines_equal_addr2line",
            &go_needs("1.21.13"),
            go("1.21.13"),
        ),
        e2e::trial(
            "go_newest_lines_equal_addr2line",
            &go_needs(newest),
            go(newest),
        ),
        e2e::trial(
            "libc_lines_from_its_build_id_debug_file_equal_addr2line",
            &[Need::Program("addr2line"), Need::Program("llvm-addr2line")],
            libc_via_build_id,
        ),
        e2e::trial(
            "libc_local_functions_named_by_its_debug_files_dwarf_as_addr2line",
            &[Need::Program("addr2line"), Need::Program("llvm-addr2line")],
            libc_local_functions,
        ),
    ])
}
