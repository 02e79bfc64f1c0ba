//! `netprobe profile` on .NET 8 (the IL sample app's `spin` mode; root, mcs and the .NET 8
//! runtime of sample-app/dotnet/fetch-runtimes.sh): CoreLib's ReadyToRun frames named as
//! `netprobe symbols` prints them; the JIT-compiled frames named from the runtime's perf map when
//! `DOTNET_PerfMapEnabled=1` (tiering default), unknown with a note saying how to name them
//! otherwise. Off the CPU (`--off-cpu`, the app's `waits` mode): a thread blocked in
//! `Thread.Sleep` and one in `Monitor.Wait` have their managed frames named under their callers,
//! each over nearly all of the profile's time. The runtime's and host's own frames
//! (`runtime_frames`): named by their exports, collapsed per run in folded output.

#[path = "profile_dotnet/runtime_frames.rs"]
mod runtime_frames;

#[path = "profile_dotnet/live_perf_map.rs"]
mod live_perf_map;

use fixtures::dotnet;
use fixtures::e2e::{self, err, succeeded, text, Need};
use fixtures::{netprobe, profile};
use serde_json::Value as Json;

use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

/// Total samples of the function named `name` (exactly), or of the first whose name contains
/// `part`.
fn total_of(v: &Json, pred: impl Fn(&str) -> bool) -> (String, u64) {
    v["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["name"].as_str().is_some_and(&pred))
        .map(|f| {
            (
                f["name"].as_str().unwrap_or("").to_string(),
                f["total"].as_u64().unwrap_or(0),
            )
        })
        .max_by_key(|(_, n)| *n)
        .unwrap_or_default()
}

/// .NET 8, IL app, tiering default, DOTNET_PerfMapEnabled=1, profiled with `-p` once warm (its
/// methods at their final tiers): SpinLoop (JIT) is named from the runtime's perf map,
/// String.Replace (tier-1 JIT code by then) too, under it; no JIT frame is left unknown.
fn dotnet8_jit_frames_named_with_perf_maps() -> R {
    let app = dotnet::sample_app_copy(&profile::artifacts())?;
    let mut target = Command::new(dotnet::dotnet8().join("dotnet"))
        .arg(&app)
        .args(["spin", "--ms", "9000"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("DOTNET_PerfMapEnabled", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_secs(3));
    let out = netprobe::command()
        .args(["profile", "-F", "499", "--json", "--duration", "4s", "-p"])
        .arg(target.id().to_string())
        .output()
        .map_err(err);
    let _ = target.kill();
    let _ = target.wait();
    let out = succeeded(out?, "profile -p dotnet")?;
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let samples = v["samples"].as_u64().unwrap_or(0);
    let (spin_name, spin) = total_of(&v, |n| {
        n == "sample_netcore_app.Program.SpinLoop(string, int)"
    });
    let (replace_name, replace) = total_of(&v, |n| n == "System.String.Replace(string, string)");
    eprintln!("{samples} samples: {spin} under {spin_name}, {replace} under {replace_name}");
    if samples < 100 || profile::pct(spin, samples) < 50.0 || profile::pct(replace, samples) < 50.0
    {
        return Err(format!(
            "SpinLoop {spin} / Replace {replace} of {samples}: {}",
            v["functions"]
        ));
    }
    let under = profile::stacks(&v).iter().any(|(f, _)| {
        let s = f.iter().position(|x| *x == spin_name);
        let r = f.iter().position(|x| *x == replace_name);
        matches!((s, r), (Some(s), Some(r)) if s < r)
    });
    if !under {
        return Err("no stack with String.Replace under SpinLoop".into());
    }
    // Anonymous memory is JIT code and stubs here: every such frame is in the perf map.
    let anon: Vec<String> = profile::stacks(&v)
        .into_iter()
        .flat_map(|(f, _)| f)
        .filter(|f| f.starts_with("[unknown] (0x"))
        .collect();
    if !anon.is_empty() {
        return Err(format!("JIT frames left unknown: {anon:?}"));
    }
    Ok(())
}

/// `netprobe profile -c` on the .NET 8 sample app's `spin` mode (SpinLoop, JIT-compiled app
/// code, calling CoreLib's String.Replace for 3 s) with `env`; the JSON line and stderr.
fn profile_dotnet_spin(env: &[(&str, &str)]) -> Result<(Json, String), String> {
    let app = dotnet::sample_app_copy(&profile::artifacts())?;
    let out = netprobe::command()
        .args(["profile", "-F", "499", "--json", "-c"])
        .arg(format!(
            "{} {} spin --ms 3000",
            dotnet::dotnet8().join("dotnet").display(),
            app.display()
        ))
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .envs(env.iter().copied())
        .output()
        .map_err(err)?;
    let out = succeeded(out, "profile -c dotnet")?;
    if !text(&out.stdout).contains("done calls=") {
        return Err(format!(
            "the app did not finish its run: {}",
            text(&out.stderr)
        ));
    }
    let v = profile::json_of(&out)?;
    Ok((v, text(&out.stderr)))
}

const REPLACE: &str =
    "instance string [System.Private.CoreLib] System.String::Replace(string,string)";

/// .NET 8, IL app, tiering off, no perf map: String.Replace's ReadyToRun frames carry the name
/// `netprobe symbols` prints for CoreLib; the JIT-compiled SpinLoop is unknown and netprobe says
/// how to name it.
fn dotnet8_r2r_frames_named_as_symbols_prints() -> R {
    let (v, stderr) = profile_dotnet_spin(&[
        ("DOTNET_TieredCompilation", "0"),
        ("DOTNET_PerfMapEnabled", "0"),
    ])?;
    let samples = v["samples"].as_u64().unwrap_or(0);
    let corelib = dotnet::corelib8();
    let symbols = succeeded(
        netprobe::command()
            .arg("symbols")
            .arg(&corelib)
            .arg("System.String::Replace(string,string)")
            .output()
            .map_err(err)?,
        "symbols",
    )?;
    if !text(&symbols.stdout).contains(REPLACE) {
        return Err(format!("symbols does not print {REPLACE}"));
    }
    // Stacks write it as C# does.
    let replace_cs = netprobe_core::dotnet::managed_name::readable(REPLACE).0;
    if replace_cs != "System.String.Replace(string, string)" {
        return Err(format!("{REPLACE} written as {replace_cs}"));
    }
    let (_, replace) = total_of(&v, |n| n == replace_cs);
    eprintln!("{samples} samples, {replace} under {REPLACE}");
    if profile::pct(replace, samples) < 50.0 {
        return Err(format!(
            "{replace} of {samples} samples under {REPLACE}: {}",
            v["functions"]
        ));
    }
    let (name, spin) = total_of(&v, |n| n.contains("Program.SpinLoop"));
    if spin > 0 {
        return Err(format!("{name} named without a perf map"));
    }
    if !stderr.contains("DOTNET_PerfMapEnabled=1") {
        return Err(format!("no note on how to name JIT frames: {stderr}"));
    }
    Ok(())
}

/// The microseconds of `v` under stacks where a frame containing `caller` comes before one
/// containing `callee`, and the leaf of the heaviest such stack.
fn time_under_pair(v: &Json, caller: &str, callee: &str) -> (u64, String) {
    let mut leaf = (0, String::new());
    let mut sum = 0;
    for (frames, n) in profile::stacks(v) {
        let c = frames.iter().position(|f| f.contains(caller));
        let d = frames.iter().rposition(|f| f.contains(callee));
        if matches!((c, d), (Some(c), Some(d)) if c < d) {
            sum += n;
            if n > leaf.0 {
                leaf = (n, frames.last().cloned().unwrap_or_default());
            }
        }
    }
    (sum, leaf.1)
}

/// .NET 8, IL app in `waits` mode with its perf map, profiled off the CPU with `-p` once warm:
/// SleepWaiter's thread sits in Thread.Sleep and MonitorWaiter's in Monitor.Wait (both futex
/// waits in the runtime: CoreCLR sleeps on a condition variable), each named (managed, from the
/// perf map and ReadyToRun) under its caller over at least 80% of the profile.
fn dotnet8_off_cpu_names_blocked_managed_frames() -> R {
    let app = dotnet::sample_app_copy(&profile::artifacts())?;
    let mut target = Command::new(dotnet::dotnet8().join("dotnet"))
        .arg(&app)
        .args(["waits", "--ms", "8000"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .env("DOTNET_PerfMapEnabled", "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_secs(2));
    let out = netprobe::command()
        .args(["profile", "--off-cpu", "--json", "--duration", "3s", "-p"])
        .arg(target.id().to_string())
        .output()
        .map_err(err);
    let _ = target.kill();
    let _ = target.wait();
    let out = succeeded(out?, "profile --off-cpu -p dotnet")?;
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let elapsed_us = (v["elapsed_s"].as_f64().unwrap_or(0.0) * 1e6) as u64;
    for (caller, callee, reason) in [
        (
            "sample_netcore_app.Program.SleepWaiter()",
            "System.Threading.Thread.Sleep(int)",
            "[off-cpu: futex]",
        ),
        (
            "sample_netcore_app.Program.MonitorWaiter()",
            "System.Threading.Monitor.Wait(object)",
            "[off-cpu: futex]",
        ),
    ] {
        let (us, leaf) = time_under_pair(&v, caller, callee);
        eprintln!("{us} us of {elapsed_us} under {caller} -> {callee}, mostly in {leaf}");
        if profile::pct(us, elapsed_us) < 80.0 || leaf != reason {
            return Err(format!(
                "{us} us under {caller} -> {callee} (leaf {leaf}) of {elapsed_us}: {}",
                v["functions"]
            ));
        }
    }
    Ok(())
}

fn dotnet_needs() -> Vec<Need> {
    vec![
        Need::Root,
        Need::Program("mcs"),
        Need::Path(dotnet::dotnet8().join("dotnet")),
    ]
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "dotnet8_r2r_frames_named_as_symbols_prints",
            &dotnet_needs(),
            dotnet8_r2r_frames_named_as_symbols_prints,
        ),
        e2e::trial(
            "dotnet8_jit_frames_named_with_perf_maps",
            &dotnet_needs(),
            dotnet8_jit_frames_named_with_perf_maps,
        ),
        e2e::trial(
            "dotnet8_runtime_frames_named_by_exports_and_collapsed_in_folded_output",
            &dotnet_needs(),
            runtime_frames::dotnet8_runtime_frames_named_by_exports_and_collapsed_in_folded_output,
        ),
        e2e::trial(
            "dotnet8_off_cpu_names_blocked_managed_frames",
            &dotnet_needs(),
            dotnet8_off_cpu_names_blocked_managed_frames,
        ),
        e2e::trial(
            "dotnet8_jit_frames_named_without_restart",
            &live_perf_map::NET8.needs(),
            || live_perf_map::jit_frames_named_without_restart(live_perf_map::NET8),
        ),
        e2e::trial(
            "dotnet9_jit_frames_named_without_restart",
            &live_perf_map::NET9.needs(),
            || live_perf_map::jit_frames_named_without_restart(live_perf_map::NET9),
        ),
        e2e::trial(
            "dotnet8_killed_sessions_map_is_turned_off_by_clean",
            &[live_perf_map::NET8.needs(), vec![Need::Tracefs]].concat(),
            live_perf_map::a_killed_sessions_map_is_turned_off_by_clean,
        ),
        e2e::trial(
            "dotnet8_one_function_across_a_tier_up",
            &live_perf_map::NET8.needs(),
            live_perf_map::one_function_across_a_tier_up,
        ),
        e2e::trial(
            "dotnet8_no_perf_map_leaves_the_process_alone",
            &live_perf_map::NET8.needs(),
            live_perf_map::no_perf_map_leaves_the_process_alone,
        ),
        e2e::trial(
            "netcore31_one_line_says_to_restart",
            &live_perf_map::NET31.needs(),
            || {
                live_perf_map::one_line_when_it_cannot(
                    live_perf_map::NET31,
                    &[],
                    "runs .NET Core 3.1.23, which cannot turn its perf map on while it runs (the diagnostics command came with .NET 8), so its JIT-compiled frames stay [unknown]: restart it with COMPlus_PerfMapEnabled=1",
                )
            },
        ),
        e2e::trial(
            "dotnet8_diagnostics_disabled_one_line_says_why",
            &live_perf_map::NET8.needs(),
            || {
                live_perf_map::one_line_when_it_cannot(
                    live_perf_map::NET8,
                    &[("DOTNET_EnableDiagnostics", "0")],
                    "was started with DOTNET_EnableDiagnostics=0, so it has no diagnostics socket",
                )
            },
        ),
    ]);
}
