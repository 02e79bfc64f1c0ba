//! The synthetic Go images `scripts/go-seed-images.py` writes as seeds for the fuzz targets that
//! read whole Go binaries (`go_binary`, `go_pclntab`, `symbolize_index`, `go_buildinfo`): a few KB
//! each instead of the megabytes of a real Go program, so the fuzzer runs thousands of inputs a
//! second. A seed is only worth its size if every part of it parses (a mutation of a seed that
//! fails early never reaches the deep code), so each is read here through the same entry points
//! as the targets: the table of its layout with its functions, the text start from the source
//! the variant names, the build info, the stack-check prologues, RETs, tail calls, and for the
//! 1.18+ layouts the inline trees, through the symbolizer's index too.

use fixtures::e2e::{self, Need};
use netprobe_core::addr::{FileOffset, VirtAddr};
use netprobe_core::golang::pclntab::Pclntab;
use netprobe_core::golang::{gofunc, GoAbi, GoBinary, PclntabVersion, TextStartSource};
use netprobe_core::symbolize::ImageIndex;
use std::path::{Path, PathBuf};
use std::process::Command;

const FUNCTIONS: [&str; 5] = [
    "runtime.main",
    "main.add",
    "main.(*T).Get",
    "main.tail",
    "main.main",
];

/// Runs the generator into a fresh directory.
fn generate() -> Result<tempfile::TempDir, String> {
    let dir = tempfile::tempdir().map_err(e2e::err)?;
    let script = fixtures::workspace_root().join("scripts/go-seed-images.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .output()
        .map_err(e2e::err)?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}: {}",
            script.display(),
            out.status,
            e2e::text(&out.stderr)
        ));
    }
    Ok(dir)
}

fn files(dir: &Path, target: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join(target))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The layout a seed's name (`synthetic-go1.18-plain`, `synthetic-go1.18.gopclntab`) says it
/// holds.
fn layout_of(path: &Path) -> PclntabVersion {
    let name = path.file_name().unwrap().to_string_lossy();
    let layout = name
        .trim_start_matches("synthetic-")
        .trim_end_matches(".gopclntab")
        .split('-')
        .next()
        .unwrap_or_default()
        .to_string();
    PclntabVersion::ALL
        .into_iter()
        .find(|v| v.to_string() == layout)
        .unwrap_or_else(|| panic!("{name}: no layout in the name"))
}

fn check_binary(path: &Path) -> Result<(), String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = std::fs::read(path).map_err(e2e::err)?;
    let go = GoBinary::parse(path, &bytes)
        .map_err(|e| format!("{name}: {e}"))?
        .ok_or_else(|| format!("{name}: not read as a Go binary"))?;
    let layout = layout_of(path);
    let table = go.pclntab();
    if table.version() != layout {
        return Err(format!("{name}: layout {}", table.version()));
    }
    let names: Vec<String> = go.functions().map(|f| f.name.into_owned()).collect();
    if names != FUNCTIONS {
        return Err(format!("{name}: functions {names:?}"));
    }
    let source = go.pclntab_location().text_start_source;
    let want = if !layout.entries_are_text_offsets() {
        TextStartSource::NotNeeded
    } else if name.ends_with("-moduledata") {
        TextStartSource::ModuleData {
            moduledata_vaddr: 0,
        }
    } else if name.ends_with("-symbol") {
        TextStartSource::RuntimeTextSymbol
    } else if name.ends_with("-relocation") {
        TextStartSource::Relocation
    } else {
        TextStartSource::Header
    };
    let same_source = match (source, want) {
        (TextStartSource::ModuleData { .. }, TextStartSource::ModuleData { .. }) => true,
        (a, b) => a == b,
    };
    if !same_source {
        return Err(format!("{name}: text start from {source:?}, not {want:?}"));
    }
    let by_scan = name.ends_with("-data-rel-ro") || name.ends_with("-no-sections");
    if go.pclntab_location().section.is_some() == by_scan {
        return Err(format!(
            "{name}: table found at {:?}",
            go.pclntab_location()
        ));
    }
    if go.module_path() != Some("example.com/tiny") || go.version().is_none() {
        return Err(format!("{name}: build info {:?}", go.build_info()));
    }
    let register = layout.entries_are_text_offsets();
    if (go.abi() == GoAbi::Register) != register {
        return Err(format!("{name}: ABI {:?}", go.abi()));
    }
    let f = |n: &str| go.functions().find(|f| f.name == n).unwrap();
    let main = go
        .probe_points(&f("main.main"))
        .ok_or_else(|| format!("{name}: main.main has no code"))?;
    if main.stack_check.is_none() || main.rets.len() != 1 {
        return Err(format!("{name}: main.main's probe points {main:?}"));
    }
    let tail = go.probe_points(&f("main.tail")).unwrap();
    // Its `jmp main.add`, one byte in (after a nop).
    if tail.tail_jumps != [VirtAddr(f("main.tail").entry.0 + 1)] {
        return Err(format!("{name}: main.tail's probe points {tail:?}"));
    }
    if go
        .function_at(VirtAddr(f("main.add").entry.0 + 1))
        .map(|f| f.name)
        != Some("main.add".into())
    {
        return Err(format!("{name}: main.add not found by address"));
    }
    // Inline trees: funcdata of the 1.18+ layouts, counted from the module data's gofunc.
    if register && !name.ends_with("-symbol") && !name.ends_with("-no-sections") {
        let base = gofunc::go_func_base(&go).ok_or_else(|| format!("{name}: no gofunc"))?;
        let read_at = |v: u64| {
            let off = go.segments().file_offset(VirtAddr(v))?;
            bytes.get(usize::try_from(off.0).ok()?..)
        };
        let i = names.iter().position(|n| n == "main.main").unwrap() as u64;
        let chains: Vec<Vec<String>> = table
            .inline_ranges(i, base, read_at)
            .into_iter()
            .map(|r| r.chain)
            .collect();
        if chains != [vec!["main.(*T).Get".to_string()]] {
            return Err(format!("{name}: main.main's inline ranges {chains:?}"));
        }
    }
    Ok(())
}

/// The symbolizer's index over a seed: the inlined call in main.main gives two frames.
fn check_index(path: &Path) -> Result<(), String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = std::fs::read(path).map_err(e2e::err)?;
    let go = GoBinary::parse(path, &bytes).unwrap().unwrap();
    let main = go.functions().find(|f| f.name == "main.main").unwrap();
    let at = go.segments().code_file_offset(main.entry).unwrap().0;
    let index = ImageIndex::build(path).map_err(|e| format!("{name}: {e}"))?;
    // The inlined body runs 10 bytes in (after cmp rsp,[r14+0x10]; jbe; sub rsp).
    let inlined = layout_of(path).entries_are_text_offsets();
    let off = if inlined { at + 10 } else { at };
    let frames: Vec<(Option<String>, bool)> = index
        .frames(path, FileOffset(off), off)
        .into_iter()
        .map(|f| (f.function, f.inlined))
        .collect();
    let mut want = vec![(Some("main.main".to_string()), false)];
    if inlined {
        want.insert(0, (Some("main.(*T).Get".to_string()), true));
    }
    if frames != want {
        return Err(format!("{name}: frames at {off:#x}: {frames:?}"));
    }
    Ok(())
}

fn every_seed_reads_whole() -> Result<(), String> {
    let dir = generate()?;
    let binaries = files(dir.path(), "go_binary");
    // Four layouts: plain, data-rel-ro, no-sections; 1.18+ also moduledata, symbol, relocation.
    if binaries.len() != 18 {
        return Err(format!("{} go_binary seeds", binaries.len()));
    }
    for path in &binaries {
        check_binary(path)?;
        let size = std::fs::metadata(path).map_err(e2e::err)?.len();
        if size > 4096 {
            return Err(format!("{}: {size} bytes", path.display()));
        }
    }
    for path in files(dir.path(), "go_pclntab") {
        let data = std::fs::read(&path).map_err(e2e::err)?;
        let table = Pclntab::parse(&data).map_err(|e| format!("{}: {e}", path.display()))?;
        if table.version() != layout_of(&path) || table.functions().count() != FUNCTIONS.len() {
            return Err(format!("{}: {:?}", path.display(), table.header()));
        }
    }
    for path in files(dir.path(), "symbolize_index") {
        check_index(&path)?;
    }
    Ok(())
}

fn main() {
    e2e::run(vec![e2e::trial(
        "every_seed_reads_whole",
        &[Need::Program("python3")],
        every_seed_reads_whole,
    )]);
}
