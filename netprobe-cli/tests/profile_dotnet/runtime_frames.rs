//! The .NET runtime's own frames in a real profile (.NET 8, the IL sample app's `spin` mode,
//! no environment variable): the functions libcoreclr and the host export (`nm -D
//! --defined-only`, a tool netprobe is not) are named, no unnamed frame lies inside one of them,
//! and folded output shows each run of unnamed runtime and host frames as one `[image]` frame,
//! every address again with `--unknown-addrs`, while JSON keeps every address.

use fixtures::dotnet;
use fixtures::e2e::{err, succeeded, text};
use fixtures::{netprobe, profile};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

/// The runtime's and the host's images of the .NET 8 root, by the name frames carry.
fn runtime_images() -> Vec<(&'static str, PathBuf)> {
    let root = dotnet::dotnet8();
    vec![
        (
            "libcoreclr.so",
            root.join("shared/Microsoft.NETCore.App/8.0.4/libcoreclr.so"),
        ),
        (
            "libhostpolicy.so",
            root.join("shared/Microsoft.NETCore.App/8.0.4/libhostpolicy.so"),
        ),
        ("libhostfxr.so", root.join("host/fxr/8.0.4/libhostfxr.so")),
        ("dotnet", root.join("dotnet")),
    ]
}

/// The functions `nm -D --defined-only -S` lists in `lib`: (name, start, end) in virtual
/// addresses.
fn exported_functions(lib: &Path) -> Result<Vec<(String, u64, u64)>, String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only", "-S"])
        .arg(lib)
        .output()
        .map_err(err)?;
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [addr, size, kind, name] = f[..] else {
                return None;
            };
            let start = u64::from_str_radix(addr, 16).ok()?;
            let size = u64::from_str_radix(size, 16).ok()?;
            matches!(kind, "T" | "t" | "W" | "i").then(|| (name.to_string(), start, start + size))
        })
        .collect())
}

/// `lib`'s loadable segments from `readelf -lW`: (file offset, virtual address, file size).
fn load_segments(lib: &Path) -> Result<Vec<(u64, u64, u64)>, String> {
    let out = Command::new("readelf")
        .arg("-lW")
        .arg(lib)
        .output()
        .map_err(err)?;
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"LOAD")).then_some(())?;
            Some((hex(f.get(1)?)?, hex(f.get(2)?)?, hex(f.get(4)?)?))
        })
        .collect())
}

/// `netprobe profile -p PID --duration 3s --json --folded FILE` plus `extra`: the JSON and the
/// folded text.
fn profile_with_folded(pid: u32, folded: &Path, extra: &[&str]) -> Result<(Json, String), String> {
    let out = netprobe::command()
        .args(["profile", "-F", "499", "--json", "--duration", "3s", "-p"])
        .arg(pid.to_string())
        .arg("--folded")
        .arg(folded)
        .args(extra)
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile -p dotnet --folded")?;
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let f = std::fs::read_to_string(folded).map_err(err)?;
    Ok((v, f))
}

/// The frames of folded `text` (every line's) with the samples under each line.
fn folded_frames(text: &str) -> Vec<(Vec<&str>, u64)> {
    text.lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack.split(';').collect(), n.parse().ok()?))
        })
        .collect()
}

pub fn dotnet8_runtime_frames_named_by_exports_and_collapsed_in_folded_output() -> R {
    let app = dotnet::sample_app_copy(&profile::artifacts())?;
    let mut target = Command::new(dotnet::dotnet8().join("dotnet"))
        .arg(&app)
        .args(["spin", "--ms", "12000"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env_remove("DOTNET_PerfMapEnabled")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_secs(2));
    let dir = tempfile::tempdir().map_err(err)?;
    let pid = target.id();
    let collapsed = profile_with_folded(pid, &dir.path().join("c.folded"), &[]);
    let raw = profile_with_folded(pid, &dir.path().join("r.folded"), &["--unknown-addrs"]);
    let _ = target.kill();
    let _ = target.wait();
    let (v, folded) = collapsed?;
    let (raw_v, raw_folded) = raw?;

    // Named where nm names them, and never unknown inside a function nm lists.
    let stacks = profile::stacks(&v);
    let frames = || {
        stacks
            .iter()
            .flat_map(|(f, n)| f.iter().map(move |x| (x, *n)))
    };
    let mut named_exports = 0;
    for (image, path) in runtime_images() {
        let exports = exported_functions(&path)?;
        let segments = load_segments(&path)?;
        let prefix = format!("[unknown] ({image}+0x");
        let (mut unknown, mut named) = (0u64, 0u64);
        for (f, n) in frames() {
            if exports.iter().any(|e| e.0 == *f) {
                named += n;
            }
            let Some(off) = f
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            else {
                continue;
            };
            unknown += n;
            // A return address: the call before it is the byte looked up.
            let Some(va) = segments
                .iter()
                .find(|s| off > s.0 && off <= s.0 + s.2)
                .map(|s| off - 1 - s.0 + s.1)
            else {
                return Err(format!("{f}: offset in no loadable segment of {image}"));
            };
            if let Some(e) = exports.iter().find(|e| va >= e.1 && va < e.2) {
                return Err(format!("{f} is in {} ({image} exports it)", e.0));
            }
        }
        eprintln!(
            "{image}: {} exported functions; {named} frames named by them, {unknown} unknown ({:.1}% named)",
            exports.len(),
            profile::pct(named, named + unknown)
        );
        named_exports += named;
    }
    for name in [
        "coreclr_execute_assembly@@V1.0",
        "corehost_main@@V1.0",
        "hostfxr_main_startupinfo@@V1.0",
    ] {
        if !frames().any(|(f, _)| f == name) {
            return Err(format!("no frame named {name}: {}", v["functions"]));
        }
    }
    if named_exports == 0 {
        return Err("no runtime frame named by an export".into());
    }

    // Folded output: one [libcoreclr.so] per run, no address; the same samples.
    let lines = folded_frames(&folded);
    let sum: u64 = lines.iter().map(|l| l.1).sum();
    if sum != v["samples"].as_u64().unwrap_or(0) || sum == 0 {
        return Err(format!(
            "folded lines sum to {sum}, JSON says {}",
            v["samples"]
        ));
    }
    let all = || lines.iter().flat_map(|l| l.0.iter());
    if !all().any(|f| *f == "[libcoreclr.so]") {
        return Err(format!("no [libcoreclr.so] frame in\n{folded}"));
    }
    for image in [
        "libcoreclr.so",
        "libhostfxr.so",
        "libhostpolicy.so",
        "dotnet",
    ] {
        if let Some(f) = all().find(|f| f.starts_with(&format!("[unknown] ({image}+"))) {
            return Err(format!("{f} left in folded output"));
        }
    }
    if let Some((l, _)) = lines.iter().find(|l| {
        l.0.windows(2)
            .any(|w| w[0] == w[1] && w[0] == "[libcoreclr.so]")
    }) {
        return Err(format!(
            "two [libcoreclr.so] frames in a row: {}",
            l.join(";")
        ));
    }
    // JSON keeps the addresses.
    if !frames().any(|(f, _)| f.starts_with("[unknown] (libcoreclr.so+0x")) {
        return Err("JSON lost the libcoreclr addresses".into());
    }
    // --unknown-addrs: the addresses are back in folded output, no [libcoreclr.so] frame.
    let raw_lines = folded_frames(&raw_folded);
    let raw_all = || raw_lines.iter().flat_map(|l| l.0.iter());
    if !raw_all().any(|f| f.starts_with("[unknown] (libcoreclr.so+0x"))
        || raw_all().any(|f| *f == "[libcoreclr.so]")
    {
        return Err(format!("--unknown-addrs folded output:\n{raw_folded}"));
    }
    let raw_sum: u64 = raw_lines.iter().map(|l| l.1).sum();
    if raw_sum != raw_v["samples"].as_u64().unwrap_or(0) {
        return Err(format!(
            "--unknown-addrs: folded {raw_sum} vs {}",
            raw_v["samples"]
        ));
    }
    eprintln!(
        "folded: {} distinct stacks collapsed, {} with --unknown-addrs",
        lines.len(),
        raw_lines.len()
    );
    Ok(())
}
