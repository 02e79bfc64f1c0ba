//! JIT frames of a .NET process started without any variable, named for the session: netprobe
//! turns the runtime's perf map on through the diagnostics socket and off again at the end.
//! What the kernel says is the judge of "on" and "off": while the map is on, the runtime holds
//! the file open (`/proc/PID/fd`); after the session it holds no such file, and the files the
//! runtime made for netprobe are gone. .NET 8 and 9 framework-dependent; .NET Core 3.1 (no such
//! command) and a process started with `DOTNET_EnableDiagnostics=0` get one line saying what to
//! do; `--no-perf-map` leaves the process alone.

use fixtures::e2e::{err, text, Need};
use fixtures::{netprobe, profile};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

type R = Result<(), String>;

/// A runtime of the cache and the sample app's target framework for it.
#[derive(Clone, Copy)]
pub struct Rt {
    pub major: &'static str,
    pub tfm: &'static str,
}

pub const NET8: Rt = Rt {
    major: "8",
    tfm: "net8.0",
};
pub const NET9: Rt = Rt {
    major: "9",
    tfm: "net9.0",
};
pub const NET31: Rt = Rt {
    major: "3.1",
    tfm: "netcoreapp3.1",
};

impl Rt {
    fn dotnet(&self) -> PathBuf {
        fixtures::cache_dir()
            .join("dotnet")
            .join(self.major)
            .join("dotnet")
    }

    pub fn needs(&self) -> Vec<Need> {
        vec![Need::Root, Need::Program("mcs"), Need::Path(self.dotnet())]
    }

    /// The sample app built for this runtime, copied with its runtimeconfig.json into a folder
    /// of this test process, once per runtime (run.sh rewrites the cache's runtimeconfig on
    /// every call, and other trials start apps meanwhile).
    fn app(&self) -> Result<PathBuf, String> {
        static BUILT: Mutex<Vec<(&str, PathBuf)>> = Mutex::new(Vec::new());
        let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, app)) = built.iter().find(|(m, _)| *m == self.major) {
            return Ok(app.clone());
        }
        let script = fixtures::workspace_root().join("sample-app/dotnet/run.sh");
        fixtures::e2e::succeeded(
            Command::new(script)
                .args(["--runtime", self.major, "--build-only"])
                .output()
                .map_err(err)?,
            "building the .NET sample app",
        )?;
        let from = fixtures::cache_dir()
            .join("sample-app-dotnet")
            .join(self.tfm);
        let dir =
            profile::artifacts().join(format!("dotnet-app-{}-{}", self.tfm, std::process::id()));
        std::fs::create_dir_all(&dir).map_err(err)?;
        for f in [
            "sample-netcore-app.dll",
            "sample-netcore-app.runtimeconfig.json",
        ] {
            std::fs::copy(from.join(f), dir.join(f)).map_err(err)?;
        }
        let app = dir.join("sample-netcore-app.dll");
        built.push((self.major, app.clone()));
        Ok(app)
    }

    /// The app spinning in `String.Replace` under `SpinLoop` for `ms`, with `env` only (and the
    /// invariant globalization this machine needs), given 3 s to warm up.
    fn spin(&self, ms: u32, env: &[(&str, &str)]) -> Result<Target, String> {
        let app = self.app()?;
        let mut cmd = Command::new(self.dotnet());
        cmd.arg(&app)
            .args(["spin", "--ms", &ms.to_string()])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .stdout(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().map_err(err)?;
        std::thread::sleep(Duration::from_secs(3));
        Ok(Target(child))
    }
}

/// The target, killed when the trial ends however it ends.
struct Target(Child);

impl Target {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The runtime's perf map files process `pid` holds open (`/proc/PID/fd` links to
/// `/tmp/perf-PID.map` or `/tmp/perfinfo-PID.map`).
fn open_perf_maps(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| {
            l.contains(&format!("/perf-{pid}.map")) || l.contains(&format!("/perfinfo-{pid}.map"))
        })
        .collect()
}

/// Runs `netprobe ARGS -p PID`, looking at the target's open files `at` into the run; returns
/// the output and what was open then.
fn run_looking(
    args: &[&str],
    pid: u32,
    at: Duration,
) -> Result<(std::process::Output, Vec<String>), String> {
    let child = netprobe::command()
        .args(args)
        .args(["-p", &pid.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(at);
    let during = open_perf_maps(pid);
    let out = child.wait_with_output().map_err(err)?;
    Ok((out, during))
}

/// Frames of the profile `v` by kind, weighed by samples: (managed frames named, JIT frames
/// left unknown). Managed frames are the app's and the framework's (`sample_netcore_app`,
/// `System.`); a JIT frame left unknown prints as `[unknown] (0xADDR)`, in no file.
fn managed_frames(v: &Json) -> (u64, u64) {
    let (mut named, mut unknown) = (0, 0);
    for (frames, n) in profile::stacks(v) {
        for f in frames {
            if f.starts_with("[unknown] (0x") {
                unknown += n;
            } else if f.contains("sample_netcore_app") || f.contains("System.") {
                named += n;
            }
        }
    }
    (named, unknown)
}

/// Nothing of the session is left: the runtime holds no perf map open, the files it made for
/// netprobe are gone, and so is netprobe's claim on them.
fn nothing_left(pid: u32) -> R {
    let open = open_perf_maps(pid);
    if !open.is_empty() {
        return Err(format!("process {pid} still writes its perf map: {open:?}"));
    }
    for f in [
        format!("/tmp/perf-{pid}.map"),
        format!("/tmp/perfinfo-{pid}.map"),
    ] {
        if Path::new(&f).exists() {
            return Err(format!("{f} is left behind"));
        }
    }
    let claims: Vec<_> = std::fs::read_dir("/run/netprobe/perf-map")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{pid}-"))
        })
        .collect();
    if !claims.is_empty() {
        return Err(format!("claim files left: {claims:?}"));
    }
    Ok(())
}

/// `profile -p` on the app started without any variable: the map is on during the session (the
/// runtime holds it open), ≥ 99% of managed frames are named, SpinLoop and Replace are on top,
/// and afterwards nothing is left.
pub fn jit_frames_named_without_restart(rt: Rt) -> R {
    let target = rt.spin(12_000, &[])?;
    let pid = target.pid();
    let (out, during) = run_looking(
        &["profile", "-F", "499", "--json", "--duration", "4s"],
        pid,
        Duration::from_secs(2),
    )?;
    let stderr = text(&out.stderr);
    if !out.status.success() {
        return Err(format!("profile failed: {stderr}"));
    }
    if during
        .iter()
        .all(|l| !l.contains(&format!("/perf-{pid}.map")))
    {
        return Err(format!(
            "the runtime did not write its perf map during the session: {during:?}; {stderr}"
        ));
    }
    for said in [
        format!("netprobe: turned on the .NET perf map of process {pid} (/tmp/perf-{pid}.map)"),
        format!("netprobe: turned the .NET perf map of process {pid} off again"),
    ] {
        if !stderr.contains(&said) {
            return Err(format!("stderr lacks {said:?}: {stderr}"));
        }
    }
    if stderr.contains("without a perf map") {
        return Err(format!("a note says the map is missing: {stderr}"));
    }
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let samples = v["samples"].as_u64().unwrap_or(0);
    let (named, unknown) = managed_frames(&v);
    let on_top = |part: &str| {
        profile::stacks(&v)
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x.contains(part)))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let (spin, replace) = (on_top("SpinLoop"), on_top("Replace"));
    eprintln!(
        "{samples} samples; managed frames {named} named, {unknown} unknown; SpinLoop {spin}, Replace {replace}"
    );
    if samples < 100
        || (unknown as f64) > 0.01 * ((named + unknown) as f64)
        || profile::pct(spin, samples) < 50.0
        || profile::pct(replace, samples) < 50.0
    {
        return Err(format!(
            "{named} named / {unknown} unknown managed frames, SpinLoop {spin}, Replace {replace} of {samples}: {}",
            v["functions"]
        ));
    }
    nothing_left(pid)
}

/// `--no-perf-map`: the process is left alone (its runtime never opens a map) and the JIT
/// frames stay unknown, with the note saying how to name them.
pub fn no_perf_map_leaves_the_process_alone() -> R {
    let target = NET8.spin(8_000, &[])?;
    let pid = target.pid();
    let (out, during) = run_looking(
        &["profile", "--no-perf-map", "--json", "--duration", "2s"],
        pid,
        Duration::from_secs(1),
    )?;
    let stderr = text(&out.stderr);
    if !out.status.success() || !during.is_empty() || stderr.contains("turned on") {
        return Err(format!("{during:?}: {stderr}"));
    }
    if !stderr.contains(&format!(
        "process {pid} runs JIT-compiled .NET code without a perf map"
    )) {
        return Err(format!("no note on the unnamed frames: {stderr}"));
    }
    nothing_left(pid)
}

/// A runtime that cannot turn its map on while it runs, or a process without a diagnostics
/// socket: exactly one line says why and what to do, the profile still runs.
pub fn one_line_when_it_cannot(rt: Rt, env: &[(&str, &str)], expect: &str) -> R {
    let target = rt.spin(6_000, env)?;
    let pid = target.pid();
    let (out, during) = run_looking(
        &["profile", "--json", "--duration", "1s"],
        pid,
        Duration::from_millis(500),
    )?;
    let stderr = text(&out.stderr);
    if !out.status.success() || !during.is_empty() {
        return Err(format!("{}: {during:?}: {stderr}", out.status));
    }
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(&format!("process {pid}")))
        .collect();
    if lines.len() != 1 || !lines[0].contains(expect) {
        return Err(format!(
            "expected one line with {expect:?} on process {pid}: {stderr}"
        ));
    }
    nothing_left(pid)
}

/// A session killed with SIGKILL cannot turn the map off: the runtime keeps writing it until
/// `netprobe clean` (or the next session on the process) turns it off as the killed one would
/// have, and removes the files it made.
pub fn a_killed_sessions_map_is_turned_off_by_clean() -> R {
    let target = NET8.spin(8_000, &[])?;
    let pid = target.pid();
    let mut np = netprobe::command()
        .args(["profile", "--duration", "30s", "-p", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_secs(2));
    let _ = np.kill();
    let _ = np.wait();
    if open_perf_maps(pid).is_empty() {
        return Err("the killed session had not turned the map on".into());
    }
    let out = netprobe::command().arg("clean").output().map_err(err)?;
    let stdout = text(&out.stdout);
    if !out.status.success()
        || !stdout.contains(&format!(
            "turned the .NET perf map of process {pid} off again"
        ))
    {
        return Err(format!("clean: {stdout}{}", text(&out.stderr)));
    }
    nothing_left(pid)
}

/// A method that runs as ReadyToRun code and then, tiered up, as JIT code is one function: the
/// app, started without any variable and waiting, is profiled with `-p` (netprobe turns its perf
/// map on) and then spins in CoreLib's `String.Replace`, first in its precompiled code, then in
/// its tier-1 code; the JSON stacks carry both tiers on frames of one name, and the table has
/// one row for it, counting its samples per tier as the frames do. `--tiers` writes the tier after
/// the name in the folded stacks: there the same tiers as in JSON, each its own frame. (The app outlives the profile, so its JIT names are there to be read however
/// late the samples are named.)
pub fn one_function_across_a_tier_up() -> R {
    let app = NET8.app()?;
    let mut target = fixtures::live::DotnetSampleApp::start(
        Command::new(NET8.dotnet())
            .arg(&app)
            .args(["spin", "--ms", "8000", "--wait"])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .stderr(Stdio::null()),
    )?;
    let dir = tempfile::tempdir().map_err(err)?;
    let folded = dir.path().join("tier-up.folded");
    let np = netprobe::command()
        .args([
            "profile",
            "-F",
            "999",
            "--json",
            "--duration",
            "4s",
            "--tiers",
        ])
        .arg("--folded")
        .arg(&folded)
        .arg("-p")
        .arg(target.pid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    // Sampling is on before the first call.
    std::thread::sleep(Duration::from_millis(700));
    target.go()?;
    let out = np.wait_with_output().map_err(err)?;
    drop(target);
    let stderr = text(&out.stderr);
    if !out.status.success() {
        return Err(format!("profile -p failed: {stderr}"));
    }
    let v = profile::json_of(&out)?;
    const REPLACE: &str = "System.String.Replace(string, string)";
    let mut tiers = std::collections::BTreeMap::<String, u64>::new();
    for s in v["stacks"].as_array().into_iter().flatten() {
        let n = s["count"].as_u64().unwrap_or(0);
        let mut seen = std::collections::BTreeSet::new();
        for f in s["frames"].as_array().into_iter().flatten() {
            if f["function"] == REPLACE {
                seen.insert(f["tier"].as_str().unwrap_or("none").to_string());
            }
        }
        for t in seen {
            *tiers.entry(t).or_default() += n;
        }
    }
    let replace_rows: Vec<&Json> = v["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| {
            f["name"]
                .as_str()
                .is_some_and(|n| n.contains("String.Replace("))
        })
        .collect();
    let rows = replace_rows.len();
    eprintln!("samples under {REPLACE} by tier: {tiers:?}; {rows} row(s)");
    let jit = tiers.keys().any(|t| t != "ready_to_run" && t != "none");
    if !tiers.contains_key("ready_to_run") || !jit || rows != 1 {
        return Err(format!("{REPLACE} by tier {tiers:?}, {rows} table rows"));
    }
    // The row counts the same samples per tier as its stacks' frames say.
    let mut by_tier = tiers.clone();
    by_tier.remove("none");
    let row_tiers: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(replace_rows[0]["tiers"].clone()).map_err(err)?;
    if row_tiers != by_tier {
        return Err(format!(
            "{REPLACE}'s row counts {row_tiers:?} by tier, its frames {by_tier:?}"
        ));
    }
    // Folded with `--tiers`: `...;System.String.Replace(string, string) [tier1];... N`.
    let folded = std::fs::read_to_string(&folded).map_err(err)?;
    let mut folded_tiers = std::collections::BTreeMap::<String, u64>::new();
    for line in folded.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let n: u64 = n.parse().map_err(err)?;
        let mut seen = std::collections::BTreeSet::new();
        for f in stack.split(';') {
            if f == REPLACE {
                return Err(format!("{f} without its tier in --tiers folded output"));
            }
            if let Some(t) = f.strip_prefix(REPLACE).and_then(|r| r.strip_prefix(" [")) {
                seen.insert(t.trim_end_matches(']').to_string());
            }
        }
        for t in seen {
            *folded_tiers.entry(t).or_default() += n;
        }
    }
    if folded_tiers != by_tier {
        return Err(format!(
            "folded --tiers counts {folded_tiers:?} under {REPLACE} by tier, JSON {by_tier:?}"
        ));
    }
    Ok(())
}
