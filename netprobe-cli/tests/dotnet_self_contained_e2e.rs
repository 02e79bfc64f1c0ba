//! A self-contained .NET 9 application (azmcp, fetched by
//! `sample-app/dotnet/fetch-net9-nativeaot.sh`): counts and the environment guard with `-c`, and
//! the guard finding the runtime inside the application with `-p`. Needs root, tracefs and azmcp;
//! a missing one skips outside CI and fails under CI=true.

mod dotnet_app;

use dotnet_app::{no_tiering_messages, SLEEP};
use fixtures::e2e::{self, err, json_lines, Need};
use fixtures::netprobe;
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

fn main() {
    let azmcp_needs = [Need::Root, Need::Tracefs, Need::Path(azmcp())];
    e2e::run(vec![
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
