//! The per-run parse cache (`netprobe_core::cache`, its parts parsed by
//! `netprobe_core::image::cached`): resolving names in an ELF program, a Go
//! binary and .NET CoreLib, from several threads at once and again one after the other, then
//! checking the resolved probes with the probe-safety gate on the same files, opens each file
//! once and parses each of its parts once.
//!
//! Its own test target (one process, one trial), so the counters see only this run. The
//! resolved offsets are checked against binutils' `nm` (ELF) and, through the probe-safety gate,
//! against each file's own tables (Go pclntab, ReadyToRun RUNTIME_FUNCTIONS); a missing compiler, Go binary or runtime skips outside CI and
//! fails under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::cache::ImageCache;
use netprobe_core::file_id::FileId;
use netprobe_core::image::cached::Part;
use netprobe_core::probe_safety::{CodeFile, ProbeRequest};
use netprobe_core::resolve::{resolve_file, ProbeTarget};
use std::path::{Path, PathBuf};
use std::process::Command;

fn go_binary() -> PathBuf {
    fixtures::go::third_party_go_dir().join("esbuild-0.17.19")
}

fn corelib() -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet/8/shared/Microsoft.NETCore.App/8.0.4/System.Private.CoreLib.dll")
}

/// Link-time address of `name` as `nm` prints it.
fn nm_address(path: &Path, name: &str) -> Result<u64, String> {
    let out = Command::new("nm").arg(path).output().map_err(err)?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (addr, _, n) = (f.next()?, f.next()?, f.next()?);
            (n == name).then(|| u64::from_str_radix(addr, 16).ok())?
        })
        .ok_or_else(|| format!("nm lists no {name} in {}", path.display()))
}

/// Every target of `pattern` in `path`, each passed by the probe-safety gate.
fn resolve_and_gate(path: &Path, pattern: &str) -> Result<Vec<ProbeTarget>, String> {
    let targets = resolve_file(path, pattern).map_err(err)?;
    let requests: Vec<ProbeRequest> = targets
        .iter()
        .map(|t| ProbeRequest {
            offset: t.file_offset,
            planned_entry: Some(t.file_offset),
            uretprobe: false,
        })
        .collect();
    let file = CodeFile::open(path).map_err(err)?;
    for (t, r) in targets.iter().zip(file.check(&requests)) {
        r.map_err(|e| format!("gate refused {} at {}: {e}", t.symbol.name, t.file_offset))?;
    }
    Ok(targets)
}

fn each_image_parsed_once() -> Result<(), String> {
    let elf = fixtures::build::CProgram::new("offsets").build();
    let files: [(PathBuf, &str); 3] = [
        (elf.clone(), "np_text_add"),
        (go_binary(), "main.main"),
        (corelib(), "System.Threading.Thread::Sleep"),
    ];
    // Several threads at once: the first parse of each part is shared, not repeated.
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .flat_map(|_| files.iter())
            .map(|(path, pattern)| s.spawn(move || resolve_and_gate(path, pattern)))
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| "a thread panicked".to_string())?
                .map(drop)
        })
    })?;
    // Then again, through the other entry points, one after the other.
    for (path, pattern) in &files {
        let targets = resolve_and_gate(path, pattern)?;
        if targets.is_empty() {
            return Err(format!(
                "{pattern} resolved to nothing in {}",
                path.display()
            ));
        }
        netprobe_core::image::load_symbols(path).map_err(err)?;
        netprobe_core::probe_safety::missing_offset_reasons(path, &[targets[0].symbol.clone()]);
    }
    netprobe_core::dotnet::Assembly::open(corelib()).map_err(err)?;
    netprobe_core::elf::ElfFile::open(&elf).map_err(err)?;

    // A right answer by a tool netprobe does not contain: nm's address of the ELF function (the
    // gate above checked Go's and CoreLib's against their own tables).
    let add = resolve_file(&elf, "np_text_add").map_err(err)?;
    let vaddr = nm_address(&elf, "np_text_add")?;
    let segments = netprobe_core::elf::ElfFile::open(&elf)
        .and_then(|f| f.segments())
        .map_err(err)?;
    if segments
        .vaddr_of_file_offset(add[0].file_offset)
        .map(|v| v.0)
        != Some(vaddr)
    {
        return Err(format!(
            "np_text_add at file offset {} is not nm's address {vaddr:#x}",
            add[0].file_offset
        ));
    }

    let stats = ImageCache::shared().stats();
    let mut report = Vec::new();
    for (path, _) in &files {
        let id = FileId::of(path).ok_or_else(|| format!("cannot stat {}", path.display()))?;
        let parts = stats.parts_of(id);
        let opens = stats.opens_of(id);
        eprintln!("{}: opened {opens}, parsed {parts:?}", path.display());
        if opens != 1 || parts.values().any(|&n| n != 1) {
            report.push(format!(
                "{}: opened {opens} times, parts parsed {parts:?} (want 1 each)",
                path.display()
            ));
        }
        // A Go binary's ELF function symbols are read only for a probe that needs them (an ELF
        // symbol's): its Go functions' probes are checked against the Go table alone.
        let (want, unread): (&[Part], &[Part]) = if path.extension().is_some_and(|e| e == "dll") {
            (&[Part::Assembly, Part::Symbols, Part::SafetyTables], &[])
        } else if *path == go_binary() {
            (&[Part::Go, Part::Symbols, Part::SafetyTables], &[Part::Elf])
        } else {
            (
                &[Part::Elf, Part::Go, Part::Symbols, Part::SafetyTables],
                &[],
            )
        };
        for part in want {
            if stats.parses_of(id, *part) != 1 {
                report.push(format!("{}: {part:?} not parsed once", path.display()));
            }
        }
        for part in unread {
            if stats.parses_of(id, *part) != 0 {
                report.push(format!("{}: {part:?} parsed, not needed", path.display()));
            }
        }
    }
    if report.is_empty() {
        Ok(())
    } else {
        Err(report.join("\n"))
    }
}

fn main() {
    e2e::run(vec![e2e::trial(
        "each_image_parsed_once_per_run",
        &[
            Need::CCompiler,
            Need::Program("nm"),
            Need::Path(go_binary()),
            Need::Path(corelib()),
        ],
        each_image_parsed_once,
    )]);
}
