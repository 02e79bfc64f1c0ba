//! What the symbolizer tests share (`symbolize_go`, `symbolize_elf`, `symbolize_dotnet`): file
//! offsets from the `PT_LOAD` headers as `readelf -lW` prints them, functions as `nm` lists them,
//! resolve as the inverse of symbolize, and running the tools. A module of each of those test
//! targets; each uses part of it.
#![allow(dead_code)]

use fixtures::e2e::err;
use netprobe_core::addr::FileOffset;
use netprobe_core::symbolize::{Frame, Symbolizer};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// `(p_offset, p_vaddr, p_filesz)` of each `PT_LOAD` of `path`, from `readelf -lW`.
pub fn load_segments(path: &Path) -> Result<Vec<(u64, u64, u64)>, String> {
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

pub fn file_offset(segs: &[(u64, u64, u64)], vaddr: u64) -> Option<u64> {
    segs.iter()
        .find(|&&(_, v, sz)| vaddr >= v && vaddr < v + sz)
        .map(|&(o, v, _)| vaddr - v + o)
}

/// Runs `prog args` with `input` on stdin; its stdout.
pub fn run(prog: &str, args: &[&str], input: &str) -> Result<String, String> {
    run_env(prog, args, input, None)
}

/// [`run`] with one more environment variable.
pub fn run_env(
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
pub fn nm_functions(path: &Path, extra: &[&str]) -> Result<Vec<(u64, u64, String)>, String> {
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
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// The outer (non-inlined) frame.
pub fn outer(frames: &[Frame]) -> &Frame {
    frames.last().expect("symbolize returns at least one frame")
}

/// A generic function's name with its type arguments as the pclntab writes them (`F[...]`):
/// DWARF spells out the shape (`F[go.shape.*uint8_0]`), the function table does not; and `·`
/// as `.` (the function table keeps Go's `·`, the linker writes `.` into ELF and DWARF names).
pub fn shape(name: &str) -> String {
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

/// The round trip over `funcs` `(vaddr, size, name)` of `path`, proptest-driven.
pub fn round_trip(
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
