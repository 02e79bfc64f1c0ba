//! A self-contained .NET 9 application (azmcp, fetched by
//! `sample-app/dotnet/fetch-net9-nativeaot.sh`): counts and the environment guard with `-c`, and
//! the guard finding the runtime inside the application with `-p`. Needs root, tracefs and azmcp;
//! a missing one skips outside CI and fails under CI=true.

mod dotnet_app;

use dotnet_app::{no_tiering_messages, SLEEP};
use fixtures::e2e::{self, err, json_lines, Need};
use fixtures::netprobe;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// azmcp 0.5.0 (npm `@azure/mcp-linux-x64`): a .NET 9.0.5 self-contained app, loose files, no
/// `dotnet` host and no `shared/` folder (`libcoreclr.so` beside the apphost).
fn azmcp() -> PathBuf {
    fixtures::cache_dir().join("azmcp-0.5.0/azmcp")
}

/// `count -c 'azmcp --version'` on the self-contained app: `System.Console`'s type initializer
/// runs exactly once per process (ECMA-335 II.10.5.3.1), so with --keep-r2r the count is 1; and
/// without it the tiering warning names the runtime netprobe found in the app's own folder.
fn azmcp_self_contained_counts_and_guard() -> Result<(), String> {
    const CCTOR: &str = "System.Console::.cctor()";
    let cmd = format!("{} --version", azmcp().display());
    let run = |extra: &[&str]| -> Result<(String, String), String> {
        let out = netprobe::command()
            .args(["count", "--json", "--duration", "60s"])
            .args(extra)
            .args(["-c", &cmd, &format!("System.Console.dll:{CCTOR}")])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .output()
            .map_err(err)?;
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        if !out.status.success() || !o.contains("0.5.0+") {
            return Err(format!("{:?}: {o} {e}", out.status));
        }
        Ok((o, e))
    };
    let (out, stderr) = run(&["--keep-r2r"])?;
    let last = json_lines(&out).pop().ok_or("no JSON output")?;
    if last["counts"][CCTOR] != 1 {
        return Err(format!("{last}: expected 1 call; {stderr}"));
    }
    no_tiering_messages(&stderr)?;
    let (_, stderr) = run(&[])?;
    if !stderr.contains(
        "the command (.NET 9.0.5 (file version 9.0.525.21509)) runs with tiered compilation on",
    ) {
        return Err(format!("no tiering warning naming .NET 9.0.5: {stderr}"));
    }
    Ok(())
}

/// `-p` on the running self-contained app (`azmcp server start` waits on stdin): netprobe finds
/// the runtime from the mapped `libcoreclr.so` outside any `shared/` folder, warns with the
/// variable .NET 9 reads, and says nothing when the app runs with it.
fn azmcp_pid_guard_finds_the_runtime() -> Result<(), String> {
    for guard in [false, true] {
        let mut cmd = Command::new(azmcp());
        cmd.args(["server", "start"])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if guard {
            cmd.env("DOTNET_TieredCompilation", "0");
        }
        let mut app = cmd.spawn().map_err(err)?;
        // The runtime is mapped once the host loaded it.
        std::thread::sleep(Duration::from_secs(2));
        let pid = app.id();
        let out = netprobe::command()
            .args(["count", "--duration", "1s", "-p", &pid.to_string(), SLEEP])
            .output()
            .map_err(err);
        let _ = app.kill();
        let _ = app.wait();
        let out = out?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warned = stderr.contains(&format!(
            "pid {pid} (.NET 9.0.5 (file version 9.0.525.21509)) runs with tiered compilation on"
        )) && stderr.contains("DOTNET_TieredCompilation=0");
        if !out.status.success() || warned == guard {
            return Err(format!("guard {guard}: {:?} {stderr}", out.status));
        }
    }
    Ok(())
}

/// `profile --off-cpu -p` on the azmcp server answering one MCP request (.NET 9 self-contained, started without any
/// perf map variable): netprobe turns its perf map on for the session, so its threads' managed
/// frames (JIT-compiled and ReadyToRun) are named and none in JIT memory is left unknown; the
/// map is off again afterwards (the runtime holds no perf map open).
fn azmcp_off_cpu_names_jit_frames_without_restart() -> Result<(), String> {
    let mut app = Command::new(azmcp())
        .args(["server", "start"])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(err)?;
    std::thread::sleep(Duration::from_secs(3));
    let pid = app.id();
    let np = netprobe::command()
        .args([
            "profile",
            "--off-cpu",
            "--json",
            "--duration",
            "3s",
            "-p",
            &pid.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err);
    // An MCP request a second in: the server's threads wake, answer and wait again, under
    // their managed frames (waits that began before the profile are not counted).
    std::thread::sleep(Duration::from_secs(1));
    if let Some(stdin) = app.stdin.as_mut() {
        let _ = stdin.write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"netprobe-test","version":"1"}}}"#,
        );
        let _ = stdin.write_all(b"\n");
        let _ = stdin.flush();
    }
    let out = np.and_then(|np| np.wait_with_output().map_err(err));
    let open: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| l.contains(&format!("perf-{pid}.map")))
        .collect();
    let _ = app.kill();
    let _ = app.wait();
    let out = out?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success()
        || !stderr.contains(&format!("turned on the .NET perf map of process {pid}"))
        || !stderr.contains(&format!(
            "turned the .NET perf map of process {pid} off again"
        ))
        || !open.is_empty()
    {
        return Err(format!("{}: open {open:?}: {stderr}", out.status));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(err)?;
    let (mut managed, mut jit_unknown) = (0, 0);
    for s in v["stacks"].as_array().into_iter().flatten() {
        for f in s["frames"].as_array().into_iter().flatten() {
            let name = f["function"].as_str().unwrap_or("");
            if name.starts_with("[unknown] (0x") {
                jit_unknown += 1;
            } else if ["System.", "Azure.", "Microsoft."]
                .iter()
                .any(|ns| name.contains(ns))
            {
                managed += 1;
            }
        }
    }
    eprintln!("{managed} managed frames named, {jit_unknown} JIT frames unknown");
    if managed < 20 || jit_unknown * 100 > managed {
        return Err(format!(
            "{managed} managed frames named, {jit_unknown} unknown: {} {stderr}",
            v["samples"]
        ));
    }
    Ok(())
}

fn main() {
    let azmcp_needs = [Need::Root, Need::Tracefs, Need::Path(azmcp())];
    e2e::run(vec![
        e2e::trial(
            "azmcp_off_cpu_names_jit_frames_without_restart_net9",
            &azmcp_needs,
            azmcp_off_cpu_names_jit_frames_without_restart,
        ),
        e2e::trial(
            "azmcp_self_contained_counts_and_guard_net9",
            &azmcp_needs,
            azmcp_self_contained_counts_and_guard,
        ),
        e2e::trial(
            "azmcp_pid_guard_finds_the_runtime_net9",
            &azmcp_needs,
            azmcp_pid_guard_finds_the_runtime,
        ),
    ]);
}
