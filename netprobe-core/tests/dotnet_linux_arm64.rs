//! A linux-arm64 .NET single-file app read on this host, checked against the linux-arm64 runtime
//! itself: `@azure/mcp-linux-arm64` 2.0.5's `azmcp` (fetched by
//! `sample-app/dotnet/fetch-linux-arm64.sh`), run by qemu-user (`qemu-aarch64-static`, with
//! Debian's arm64 libc and libstdc++ under `/usr/aarch64-linux-gnu`, and Debian's arm64 OpenSSL
//! from the same script, which the runtime loads about 13 s into the app's start). qemu-user
//! maps the guest's files with the host's mmap, so `/proc/PID/maps` of the qemu process shows
//! the file offsets at which the runtime's own bundle reader (`src/native/corehost/bundle/`, the
//! runtime's `PEImageLayout`) mapped each assembly out of the bundle.
//!
//! The app is trimmed, so its assemblies are IL only (no ReadyToRun code; the registries this
//! project reaches hold no linux-arm64 ReadyToRun image, docs/dotnet.md says more): what is
//! checked is the bundle's layout and the PE machine of each assembly, not method code.
//!
//! A missing file or tool skips a trial outside CI and fails it under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::arch::Arch;
use netprobe_core::dotnet::bundle::{Bundle, BundleFileType};
use netprobe_core::dotnet::pe::{PeImage, MACHINE_ARM64, MACHINE_I386};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type R = Result<(), String>;

/// The linux-arm64 single-file app.
fn arm64_bundle() -> PathBuf {
    fixtures::cache_dir().join("linux-arm64/azmcp-2.0.5/azmcp")
}

const QEMU: &str = "qemu-aarch64-static";
const ARM64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

/// Debian's arm64 `libssl.so.3` and `libcrypto.so.3`: without them the app's runtime aborts
/// ("No usable version of libssl was found") once it first uses cryptography.
fn arm64_openssl() -> PathBuf {
    fixtures::cache_dir().join("linux-arm64/libssl3/lib")
}

/// `(start, end, offset)` of the shared mappings of `file` in `/proc/pid/maps` (read here, not
/// with netprobe's maps parser).
fn shared_mappings(pid: u32, file: &Path) -> Result<BTreeSet<(u64, u64, u64)>, String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).map_err(err)?;
    let file = file.to_string_lossy();
    Ok(maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[5..].join(" ") != file || !f[1].ends_with('s') {
                return None;
            }
            let (a, b) = f[0].split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
                u64::from_str_radix(f[2], 16).ok()?,
            ))
        })
        .collect())
}

/// Runs the app's MCP server (it waits on stdin) under qemu-user until the set of assemblies it
/// mapped from the bundle has not changed for 3 s, and returns those mappings.
fn runtime_mappings(bundle: &Path) -> Result<BTreeSet<(u64, u64, u64)>, String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let mut child = Command::new(QEMU)
        .args(["-L", ARM64_SYSROOT])
        .arg(bundle)
        .args(["server", "start"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("LD_LIBRARY_PATH", arm64_openssl())
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let start = Instant::now();
    let mut last = BTreeSet::new();
    let mut stable_since = Instant::now();
    let result = loop {
        std::thread::sleep(Duration::from_millis(500));
        if let Ok(Some(status)) = child.try_wait() {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            break Err(format!(
                "the app exited ({status}) before it waited: {stderr}"
            ));
        }
        let now = match shared_mappings(pid, bundle) {
            Ok(m) => m,
            Err(e) => break Err(e),
        };
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if last.len() >= 10 && stable_since.elapsed() > Duration::from_secs(3) {
            break Ok(last);
        }
        if start.elapsed() > Duration::from_secs(120) {
            break Err(format!(
                "after 120 s the runtime had mapped {} pieces of the bundle",
                last.len()
            ));
        }
    };
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Every assembly the linux-arm64 runtime mapped out of the bundle (a shared mapping of the
/// bundle file) is an assembly entry netprobe lists: the mapping starts at the entry's page and
/// covers the entry's bytes. netprobe reads each assembly's PE machine: the app's own assembly is
/// `IMAGE_FILE_MACHINE_ARM64` (0xAA64, aarch64, no OS override: it is IL only), the framework's
/// are AnyCPU IL (`IMAGE_FILE_MACHINE_I386`), none ReadyToRun.
fn bundle_entries_match_runtime_mappings() -> R {
    let path = arm64_bundle();
    let bundle = Bundle::open(&path)
        .map_err(err)?
        .ok_or("not a single-file bundle")?;
    let data = std::fs::read(&path).map_err(err)?;
    let assemblies: Vec<_> = bundle
        .entries()
        .iter()
        .filter(|e| e.file_type == BundleFileType::Assembly)
        .collect();
    if assemblies.len() < 100 {
        return Err(format!("only {} assemblies listed", assemblies.len()));
    }
    let mut arm64 = Vec::new();
    for e in &assemblies {
        let at = e.offset.0 as usize;
        let bytes = data
            .get(at..at + e.size as usize)
            .ok_or_else(|| format!("{}: outside the file", e.path))?;
        let pe = PeImage::parse(bytes).map_err(|m| format!("{}: {m}", e.path))?;
        match (pe.machine, pe.target_os) {
            (MACHINE_ARM64, None) => {
                if Arch::of_pe_machine(pe.machine) != Some(Arch::Aarch64) {
                    return Err(format!("{}: 0xAA64 is not aarch64", e.path));
                }
                arm64.push(e.file_name().to_string());
            }
            (MACHINE_I386, None) => {}
            other => return Err(format!("{}: machine {other:x?}", e.path)),
        }
    }
    if arm64 != ["azmcp.dll"] {
        return Err(format!("arm64 assemblies {arm64:?}, expected azmcp.dll"));
    }
    let mapped = runtime_mappings(&path)?;
    let mut matched = BTreeSet::new();
    for &(start, end, offset) in &mapped {
        let entry = assemblies
            .iter()
            .find(|e| e.offset.0 & !0xfff == offset)
            .ok_or_else(|| {
                format!("the runtime mapped the bundle at offset {offset:#x}: no entry there")
            })?;
        let entry_end = entry.offset.0 + entry.size;
        if offset + (end - start) < entry_end {
            return Err(format!(
                "{}: mapped {offset:#x}+{:#x}, the entry ends at {entry_end:#x}",
                entry.path,
                end - start
            ));
        }
        matched.insert(entry.file_name().to_string());
    }
    if matched.len() < 20 {
        return Err(format!(
            "only {} assemblies mapped: {matched:?}",
            matched.len()
        ));
    }
    for must in ["System.Private.CoreLib.dll", "System.Linq.dll", "azmcp.dll"] {
        if !matched.contains(must) {
            return Err(format!(
                "{must} not among the mapped assemblies {matched:?}"
            ));
        }
    }
    eprintln!(
        "  linux-arm64 bundle: {} assemblies listed; the runtime under qemu-user mapped {} of them, each where netprobe puts it",
        assemblies.len(),
        matched.len()
    );
    Ok(())
}

fn main() {
    e2e::run(vec![e2e::trial(
        "linux_arm64_bundle_entries_match_runtime_mappings",
        &[
            Need::Path(arm64_bundle()),
            Need::Program(QEMU),
            Need::Path(PathBuf::from(ARM64_SYSROOT).join("lib/libstdc++.so.6")),
            Need::Path(arm64_openssl().join("libssl.so.3")),
        ],
        bundle_entries_match_runtime_mappings,
    )]);
}
