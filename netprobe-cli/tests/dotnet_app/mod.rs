//! What the .NET end-to-end tests share (`dotnet_trace_e2e`, `dotnet_probe_placement_e2e`,
//! `dotnet_self_contained_e2e`): the runtimes (.NET 8.0.4 and .NET Core 3.1.23 fetched by
//! `sample-app/dotnet/fetch-runtimes.sh`, .NET 9.0.5 by
//! `sample-app/dotnet/fetch-net9-nativeaot.sh`), the C# sample app (`sample-app/dotnet`, built with Debian's `mcs`) started on each, netprobe
//! running against it, and one trial per runtime. A module of each of those test targets; each
//! uses part of it.
#![allow(dead_code)]

use fixtures::e2e::{self, err, json_lines, Need};
use fixtures::live::DotnetSampleApp;
use fixtures::netprobe;
use serde_json::Value as Json;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const TRACEFS: &str = "/sys/kernel/tracing";

pub const SLEEP: &str = "System.Threading.Thread::Sleep(int32)";

pub const REPLACE: &str = "System.String::Replace(string,string)";

#[derive(Clone, Copy, Debug)]
pub struct Runtime {
    pub major: &'static str,
    pub version: &'static str,
    pub tfm: &'static str,
    /// Suffix of trial names.
    pub tag: &'static str,
}

pub const NET8: Runtime = Runtime {
    major: "8",
    version: "8.0.4",
    tfm: "net8.0",
    tag: "net8",
};

/// .NET 9.0.5: the runtime root `sample-app/dotnet/fetch-net9-nativeaot.sh` builds from the files
/// of a self-contained .NET 9 app (npm `@azure/mcp-linux-x64@0.5.0`).
pub const NET9: Runtime = Runtime {
    major: "9",
    version: "9.0.5",
    tfm: "net9.0",
    tag: "net9",
};

pub const NET31: Runtime = Runtime {
    major: "3.1",
    version: "3.1.23",
    tfm: "netcoreapp3.1",
    tag: "netcore31",
};

impl Runtime {
    pub fn root(&self) -> PathBuf {
        fixtures::cache_dir().join("dotnet").join(self.major)
    }
    pub fn dotnet(&self) -> PathBuf {
        self.root().join("dotnet")
    }
    pub fn corelib(&self) -> PathBuf {
        self.root()
            .join("shared/Microsoft.NETCore.App")
            .join(self.version)
            .join("System.Private.CoreLib.dll")
    }
    pub fn app(&self) -> PathBuf {
        fixtures::cache_dir()
            .join("sample-app-dotnet")
            .join(self.tfm)
            .join("sample-netcore-app.dll")
    }
    pub fn needs(&self) -> Vec<Need> {
        vec![
            Need::Root,
            Need::Tracefs,
            Need::Program("mcs"),
            Need::Path(self.corelib()),
        ]
    }
    /// The variable that keeps ReadyToRun code on this runtime (3.1 reads only `COMPlus_`).
    pub fn guard_var(&self) -> &'static str {
        if self.major == "3.1" {
            "COMPlus_TieredCompilation"
        } else {
            "DOTNET_TieredCompilation"
        }
    }
    /// The command line that runs the sample app (for `-c`).
    pub fn command(&self, mode_args: &str) -> String {
        format!(
            "{} {} {mode_args}",
            self.dotnet().display(),
            self.app().display()
        )
    }
}

/// Builds the sample app for `rt` (run.sh rebuilds only when a source changed).
pub fn build_app(rt: Runtime) -> Result<(), String> {
    let script = fixtures::workspace_root().join("sample-app/dotnet/run.sh");
    let out = Command::new(script)
        .args(["--runtime", rt.major, "--build-only"])
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(format!(
            "building the sample app failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The sample app started with `--wait`: running, its pid known, waiting for "go".
pub type App = DotnetSampleApp;

/// Starts `dotnet app.dll ARGS --wait` with `env` added (and the invariant globalization mode
/// this machine needs).
pub fn start_app(rt: Runtime, args: &[&str], env: &[(&str, &str)]) -> Result<App, String> {
    let mut cmd = Command::new(rt.dotnet());
    cmd.arg(rt.app())
        .args(args)
        .arg("--wait")
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    DotnetSampleApp::start(&mut cmd)
}

/// A netprobe run in the background, its stderr collected.
pub struct Netprobe {
    pub child: Child,
    pub stderr: std::thread::JoinHandle<String>,
}

impl Netprobe {
    /// Starts `netprobe ARGS` and waits until its probes are live (or it failed).
    pub fn start(args: &[String]) -> Result<Netprobe, String> {
        let (child, h) = fixtures::live::spawn_until_live(
            netprobe::command()
                .args(args)
                // For -c commands (no ICU on this machine kind).
                .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1"),
            Duration::from_secs(60),
        )?;
        Ok(Netprobe { child, stderr: h })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for netprobe to end by itself (the target exited); returns stdout, stderr.
    pub fn wait(mut self) -> Result<(String, String), String> {
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut out).map_err(err)?;
        }
        let status = self.child.wait().map_err(err)?;
        let stderr = self.stderr.join().unwrap_or_default();
        if !status.success() {
            return Err(format!("netprobe failed ({status}): {stderr}"));
        }
        Ok((out, stderr))
    }
}

pub fn entries<'a>(hits: &'a [Json], function: &str) -> Vec<&'a Json> {
    hits.iter()
        .filter(|h| h["event"] == "entry" && h["function"] == function)
        .collect()
}

/// `netprobe trace --json -p PID SPECS` around an app run; returns the hits, netprobe's stderr
/// and the app's output.
pub fn trace_app(
    rt: Runtime,
    app_args: &[&str],
    env: &[(&str, &str)],
    np_args: &[&str],
) -> Result<(Vec<Json>, String, String), String> {
    let app = start_app(rt, app_args, env)?;
    let mut args: Vec<String> = np_args.iter().map(|s| s.to_string()).collect();
    args.extend([
        "-p".into(),
        app.pid.to_string(),
        "--duration".into(),
        "90s".into(),
    ]);
    let np = Netprobe::start(&args)?;
    let np_pid = np.pid();
    let app_out = app.go_and_wait()?;
    let (out, stderr) = np.wait()?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    Ok((json_lines(&out), stderr, app_out))
}

pub fn no_tiering_messages(stderr: &str) -> Result<(), String> {
    if stderr.contains("tiered compilation on") || stderr.contains("stopped after") {
        return Err(format!(
            "tiering message although the guard is set: {stderr}"
        ));
    }
    Ok(())
}

/// One trial per runtime (.NET 8, .NET 9, .NET Core 3.1) of each `(name, test, needs)`, named
/// `NAME_TAG`; the sample app is built once per runtime first, and a failed build shows up in every
/// trial of that runtime.
pub fn per_runtime(tests: &[(&str, Test, NeedsOf)]) -> Vec<e2e::E2eTrial> {
    let mut trials = Vec::new();
    for rt in [NET8, NET9, NET31] {
        let built = e2e::unmet(&rt.needs()[2..]).is_none() && build_app(rt).is_ok();
        for &(name, f, needs) in tests {
            trials.push(e2e::trial(
                &format!("{name}_{}", rt.tag),
                &needs(rt),
                move || {
                    if !built {
                        build_app(rt)?;
                    }
                    f(rt)
                },
            ));
        }
    }
    trials
}

/// A test of one runtime.
pub type Test = fn(Runtime) -> Result<(), String>;

/// What a test of one runtime needs on that runtime.
pub type NeedsOf = fn(Runtime) -> Vec<Need>;

/// What a live trial needs: root, tracefs, `mcs` and the runtime.
pub fn all(rt: Runtime) -> Vec<Need> {
    rt.needs()
}
