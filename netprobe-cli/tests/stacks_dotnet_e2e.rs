//! `trace --stack` and `count --stack` on .NET 8 (root, tracefs, mcs and the .NET 8 runtime of
//! sample-app/dotnet/fetch-runtimes.sh): the IL sample app calling CoreLib's Thread.Sleep(int32).
//! The ReadyToRun frame is named as `netprobe symbols` prints it, the JIT-compiled caller from the
//! perf map when `DOTNET_PerfMapEnabled=1`, unknown with one note otherwise; `count --stack`
//! counts the three calls on one such stack.

use fixtures::dotnet;
use fixtures::e2e::{self, err, Need};
use fixtures::{netprobe, stacks};
use std::path::Path;

type R = Result<(), String>;

/// Thread.Sleep(int32) of .NET 8's CoreLib as `netprobe symbols` names it, written as stacks
/// write .NET methods (C#: `System.Threading.Thread.Sleep(int)`).
fn corelib_sleep_name() -> Result<String, String> {
    let corelib = dotnet::corelib8();
    let symbols = netprobe::command()
        .arg("symbols")
        .arg(&corelib)
        .arg("System.Threading.Thread::Sleep(int32)")
        .output()
        .map_err(err)?;
    String::from_utf8_lossy(&symbols.stdout)
        .lines()
        .find_map(|l| {
            l.find("void [System.Private.CoreLib] System.Threading.Thread::Sleep(int32)")
                .map(|i| netprobe_core::dotnet::managed_name::readable(l[i..].trim()).0)
        })
        .ok_or_else(|| "netprobe symbols does not list Thread::Sleep(int32)".to_string())
        .and_then(|name| match name.as_str() {
            "System.Threading.Thread.Sleep(int)" => Ok(name),
            _ => Err(format!("Thread::Sleep(int32) written as {name}")),
        })
}

/// Whether `frames` (innermost first) are Thread.Sleep named `sleep`, then the JIT-compiled
/// `Program.SleepMode` and `Program.Main` of the sample app, named.
fn sleep_under_its_callers(frames: &[String], sleep: &str) -> bool {
    frames.first().map(String::as_str) == Some(sleep)
        && frames
            .get(1)
            .is_some_and(|f| f.contains("sample_netcore_app.Program.SleepMode("))
        && frames
            .get(2)
            .is_some_and(|f| f.contains("sample_netcore_app.Program.Main("))
}

/// netprobe `args` with `-c` on the sample `app` sleeping three times (tiering off, so the
/// ReadyToRun code of Thread.Sleep stays), Thread.Sleep(int32) probed.
fn sleep_three_times(
    args: &[&str],
    app: &Path,
    perf_map: &str,
) -> Result<std::process::Output, String> {
    netprobe::command()
        .args(args)
        .arg("-c")
        .arg(format!(
            "{} {} sleep --count 3 --ms 100",
            dotnet::dotnet8().join("dotnet").display(),
            app.display()
        ))
        .arg("System.Private.CoreLib.dll:System.Threading.Thread::Sleep(int32)")
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("DOTNET_TieredCompilation", "0")
        .env("DOTNET_PerfMapEnabled", perf_map)
        .output()
        .map_err(err)
}

/// `count --stack` on the same calls, perf maps on: one stack counted 3 times, whose frames are
/// Thread.Sleep from ReadyToRun (as `symbols` names it), then the JIT-compiled
/// `Program::SleepMode` and `Program::Main` from the perf map.
fn dotnet8_count_stack_one_path() -> R {
    let app = dotnet::sample_app_copy(&fixtures::build::target_dir().join("stacks-artifacts"))?;
    let sleep = corelib_sleep_name()?;
    let out = sleep_three_times(&["count", "--stack", "--json"], &app, "1")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "netprobe exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stacks = stacks::counted_stacks(&stdout)?;
    let [(frames, 3, _)] = stacks.as_slice() else {
        return Err(format!("want one stack counted 3 times: {stacks:?}"));
    };
    let named = sleep_under_its_callers(frames, &sleep);
    if !named {
        return Err(format!("frames {frames:?}"));
    }
    Ok(())
}

/// `trace --stack --json -c` on the .NET 8 sample app calling CoreLib's Thread.Sleep(int32)
/// three times from the JIT-compiled `Program::SleepMode` (tiering off, so the ReadyToRun code
/// stays): the innermost frame is named from ReadyToRun exactly as `netprobe symbols` prints
/// it; the caller is named from the runtime's perf map with `DOTNET_PerfMapEnabled=1`, unknown
/// otherwise, with one note saying how to name it.
fn dotnet8_r2r_and_jit_frames() -> R {
    let app = dotnet::sample_app_copy(&fixtures::build::target_dir().join("stacks-artifacts"))?;
    let sleep = corelib_sleep_name()?;
    for perf_map in ["1", "0"] {
        let out = sleep_three_times(&["trace", "--stack", "--json"], &app, perf_map)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("netprobe exited with {}: {stderr}", out.status));
        }
        let hits = e2e::json_lines_strict(&out.stdout)?;
        if hits.len() != 3 {
            return Err(format!("{} hits for 3 calls: {stdout}", hits.len()));
        }
        for h in &hits {
            let f0 = &h["stack"][0];
            let f1 = &h["stack"][1];
            if f0["function"].as_str() != Some(&sleep) || f0["source"] != "dotnet_r2r" {
                return Err(format!(
                    "innermost frame {f0}, want {sleep} from ReadyToRun"
                ));
            }
            let caller = f1["function"].as_str().unwrap_or("");
            let named = f1["source"] == "perf_map" && caller.contains("Program.SleepMode(");
            let unknown = f1["source"] == "unknown" && f1["image"].is_null();
            if (perf_map == "1" && !named) || (perf_map == "0" && !unknown) {
                return Err(format!(
                    "DOTNET_PerfMapEnabled={perf_map}: caller frame {f1}"
                ));
            }
        }
        let notes = stderr
            .matches("DOTNET_PerfMapEnabled=1 to name them")
            .count();
        if notes != usize::from(perf_map == "0") {
            return Err(format!(
                "DOTNET_PerfMapEnabled={perf_map}: {notes} notes: {stderr}"
            ));
        }
    }
    Ok(())
}

/// `count --stack -p` on the sample app started without any perf map variable (tiering off, so
/// the ReadyToRun Thread.Sleep keeps being hit): netprobe turns the runtime's perf map on for the
/// session, so the JIT-compiled callers are named; 5 calls on one stack; the files the runtime
/// made for netprobe are gone after the app exits. (The app's calls are 300 ms apart: the test's
/// app handle removes the runtime's files when the app exits, and the first hit must be named
/// while they are there.)
fn dotnet8_count_stack_names_jit_frames_without_restart() -> R {
    let app = dotnet::sample_app_copy(&fixtures::build::target_dir().join("stacks-artifacts"))?;
    let sleep = corelib_sleep_name()?;
    let target = fixtures::live::DotnetSampleApp::start(
        std::process::Command::new(dotnet::dotnet8().join("dotnet"))
            .arg(&app)
            .args(["sleep", "--count", "5", "--ms", "300", "--wait"])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .env("DOTNET_TieredCompilation", "0"),
    )?;
    let pid = target.pid;
    let (np, stderr) = fixtures::live::spawn_until_live(
        netprobe::command().args([
            "count",
            "--stack",
            "--json",
            "-p",
            &pid.to_string(),
            "System.Private.CoreLib.dll:System.Threading.Thread::Sleep(int32)",
        ]),
        std::time::Duration::from_secs(60),
    )?;
    target.go_and_wait()?;
    let out = np.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    if !out.status.success() {
        return Err(format!("netprobe failed ({}): {stderr}", out.status));
    }
    if !stderr.contains(&format!("turned on the .NET perf map of process {pid}")) {
        return Err(format!("the perf map was not turned on: {stderr}"));
    }
    let stacks = stacks::counted_stacks(&String::from_utf8_lossy(&out.stdout))?;
    let [(frames, 5, _)] = stacks.as_slice() else {
        return Err(format!("want one stack counted 5 times: {stacks:?}"));
    };
    let named = sleep_under_its_callers(frames, &sleep);
    if !named {
        return Err(format!("frames {frames:?}: {stderr}"));
    }
    for f in [
        format!("/tmp/perf-{pid}.map"),
        format!("/tmp/perfinfo-{pid}.map"),
    ] {
        if Path::new(&f).exists() {
            return Err(format!("{f} left behind"));
        }
    }
    Ok(())
}

/// `trace --stack --tiers` (text) on the same calls, perf map on: each stack's Thread.Sleep line
/// ends in `[ready_to_run]` and its JIT-compiled caller's in the tier the JSON frames of the same
/// run without `--tiers` give it (`tier`), as the runtime's perf map names it.
fn dotnet8_trace_stack_text_shows_tiers() -> R {
    let app = dotnet::sample_app_copy(&fixtures::build::target_dir().join("stacks-artifacts"))?;
    let sleep = corelib_sleep_name()?;
    let json = sleep_three_times(&["trace", "--stack", "--json"], &app, "1")?;
    if !json.status.success() {
        return Err(format!("netprobe exited with {}", json.status));
    }
    let hits = e2e::json_lines_strict(&json.stdout)?;
    let tiers: std::collections::BTreeSet<(String, String)> = hits
        .iter()
        .map(|h| {
            let tier = |i: usize| h["stack"][i]["tier"].as_str().unwrap_or("none").to_string();
            (tier(0), tier(1))
        })
        .collect();
    let pairs: Vec<(String, String)> = tiers.iter().cloned().collect();
    let [(sleep_tier, caller_tier)] = &pairs[..] else {
        return Err(format!("tiers of (Sleep, caller) over the hits: {tiers:?}"));
    };
    if hits.len() != 3 || sleep_tier != "ready_to_run" || caller_tier == "none" {
        return Err(format!("{} hits; tiers {tiers:?}", hits.len()));
    }
    let out = sleep_three_times(&["trace", "--stack", "--tiers"], &app, "1")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("netprobe exited with {}: {stdout}", out.status));
    }
    let lines: Vec<&str> = stdout.lines().map(str::trim_start).collect();
    let sleeps = lines
        .iter()
        .filter(|l| {
            l.starts_with(&format!("{sleep}+0x"))
                && l.ends_with(" [ready_to_run] (System.Private.CoreLib.dll)")
        })
        .count();
    let callers = lines
        .iter()
        .filter(|l| {
            l.starts_with("sample_netcore_app.Program.SleepMode(")
                && l.contains(&format!(" [{caller_tier}]"))
        })
        .count();
    if sleeps != 3 || callers != 3 {
        return Err(format!(
            "{sleeps} Sleep lines with [ready_to_run], {callers} SleepMode lines with [{caller_tier}]: {stdout}"
        ));
    }
    Ok(())
}

fn main() {
    let dotnet = [
        Need::Root,
        Need::Tracefs,
        Need::Program("mcs"),
        Need::Path(dotnet::dotnet8().join("dotnet")),
    ];
    e2e::run(vec![
        e2e::trial(
            "dotnet8_r2r_and_jit_frames",
            &dotnet,
            dotnet8_r2r_and_jit_frames,
        ),
        e2e::trial(
            "dotnet8_trace_stack_text_shows_tiers",
            &dotnet,
            dotnet8_trace_stack_text_shows_tiers,
        ),
        e2e::trial(
            "dotnet8_count_stack_one_path",
            &dotnet,
            dotnet8_count_stack_one_path,
        ),
        e2e::trial(
            "dotnet8_count_stack_names_jit_frames_without_restart",
            &dotnet,
            dotnet8_count_stack_names_jit_frames_without_restart,
        ),
    ]);
}
