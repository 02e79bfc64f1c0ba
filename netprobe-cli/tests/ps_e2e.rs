//! `netprobe ps` on real processes: the .NET 8 sample app twice (tiering by default, and with
//! `DOTNET_TieredCompilation=0`), the Go sample app on the host and in a Docker container, and a
//! C program. Each line is checked against sources netprobe does not own: `go version BINARY`
//! (Go's own build-info reader), `docker inspect` (container id, name and host pid), the runtime's
//! own startup line (`runtime=8.0.4`), and the ReadyToRun header of every mapped assembly.
//!
//! Needs root, tracefs, `mcs`, the .NET 8 runtime, Go, a C compiler and Docker; a missing one
//! skips outside CI and fails under CI=true.

use fixtures::dotnet;
use fixtures::e2e::{self, err, Need};
use fixtures::live::{DotnetSampleApp, Waiting};
use fixtures::netprobe;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::process::Command;

/// The .NET 8 sample app in `sleep --wait` mode: started, runtime loaded, waiting on stdin.
struct DotnetApp {
    /// Keeps the app running (killed when dropped).
    _app: DotnetSampleApp,
    pid: u32,
    /// `Environment.Version` as the app printed it.
    runtime: String,
}

impl DotnetApp {
    fn start(env: &[(&str, &str)]) -> Result<DotnetApp, String> {
        let mut cmd = Command::new(dotnet::dotnet8().join("dotnet"));
        cmd.arg(dotnet::sample_app())
            .args(["sleep", "--count", "1", "--wait"])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .env_remove("DOTNET_TieredCompilation")
            .env_remove("COMPlus_TieredCompilation");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let app = DotnetSampleApp::start(&mut cmd)?;
        let runtime = app
            .field("runtime=")
            .ok_or_else(|| format!("the app printed no runtime: {:?}", app.banner))?
            .to_string();
        Ok(DotnetApp {
            pid: app.pid,
            runtime,
            _app: app,
        })
    }
}

fn build_dotnet_app() -> Result<(), String> {
    let out = Command::new(fixtures::workspace_root().join("sample-app/dotnet/run.sh"))
        .args(["--runtime", "8", "--build-only"])
        .output()
        .map_err(err)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "building the .NET sample app: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// ReadyToRun assemblies among the files `pid` maps, by their own headers (the managed native
/// header of the CLI header), not by how they are mapped.
fn r2r_assemblies_mapped(pid: u32) -> Result<usize, String> {
    let process = netprobe_core::process::Process::open(pid).map_err(err)?;
    let maps = process.maps().map_err(err)?;
    let mut paths: Vec<PathBuf> = maps
        .iter()
        .filter_map(|m| m.path.file().map(PathBuf::from))
        .filter(|p| p.extension().is_some_and(|e| e == "dll"))
        .collect();
    paths.sort();
    paths.dedup();
    Ok(paths
        .iter()
        .filter(|p| {
            netprobe_core::dotnet::Assembly::open(p)
                .map(|a| a.r2r().is_some())
                .unwrap_or(false)
        })
        .count())
}

/// `go version BINARY`: Go's own reading of the build info (`go1.19.8`).
fn go_version_of(bin: &std::path::Path) -> Result<String, String> {
    let out = Command::new("go")
        .arg("version")
        .arg(bin)
        .output()
        .map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| format!("go version said {text:?}"))
}

fn docker_inspect(name: &str, format: &str) -> Result<String, String> {
    harness::docker::docker(&["inspect", "-f", format, name])
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{e:#}"))
}

/// `netprobe ps --json` and `netprobe ps`, both.
fn ps() -> Result<(Vec<Json>, String), String> {
    let json = netprobe::command()
        .args(["ps", "--json"])
        .output()
        .map_err(err)?;
    if !json.status.success() {
        return Err(format!(
            "ps --json failed: {}",
            String::from_utf8_lossy(&json.stderr)
        ));
    }
    let entries = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}")))
        .collect::<Result<Vec<Json>, String>>()?;
    let text = netprobe::command().arg("ps").output().map_err(err)?;
    Ok((entries, String::from_utf8_lossy(&text.stdout).into_owned()))
}

fn entry(entries: &[Json], pid: u32) -> Result<Json, String> {
    entries
        .iter()
        .find(|e| e["pid"] == pid)
        .cloned()
        .ok_or_else(|| format!("pid {pid} is not listed"))
}

fn line(text: &str, pid: u32) -> Result<String, String> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .map(str::to_string)
        .ok_or_else(|| format!("pid {pid} has no line in:\n{text}"))
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn ps_lines_are_right_for_sample_processes() -> Result<(), String> {
    build_dotnet_app()?;
    let go_bin = fixtures::go::sample_app_variants().join("sampleapp-default");
    let c_bin = fixtures::CProgram::new("tracee").build();

    let tiered = DotnetApp::start(&[])?;
    let untiered = DotnetApp::start(&[("DOTNET_TieredCompilation", "0")])?;
    let go = Waiting::start(Command::new(&go_bin).args(["workload", "-n", "1", "-wait"]))?;
    let c = Waiting::start(Command::new(&c_bin).args(["stdin", "1"]))?;

    harness::docker::ensure_engine().map_err(|e| format!("{e:#}"))?;
    let owner = harness::owner::Owner::current();
    let rootfs =
        harness::images::program_rootfs(&go_bin, "sampleapp").map_err(|e| format!("{e:#}"))?;
    let image = harness::docker::import(&rootfs, &owner.image_ref("ps-go"), &[])
        .map_err(|e| format!("{e:#}"))?;
    let container = harness::docker::ContainerGuard::new(owner.container_name("ps-go"));
    let in_docker = Waiting::start(Command::new("/usr/bin/docker").args([
        "run",
        "-i",
        "--name",
        container.name(),
        image.reference(),
        "/app/sampleapp",
        "workload",
        "-n",
        "1",
        "-wait",
    ]))?;
    let docker_pid: u32 = docker_inspect(container.name(), "{{.State.Pid}}")?
        .parse()
        .map_err(err)?;
    let docker_id = docker_inspect(container.name(), "{{.Id}}")?;

    let (entries, text) = ps()?;

    // .NET, tiering by default and off.
    for (app, tiering, reason) in [
        (&tiered, true, "TieredCompilation default"),
        (&untiered, false, "DOTNET_TieredCompilation=0"),
    ] {
        let e = entry(&entries, app.pid)?;
        let r2r = r2r_assemblies_mapped(app.pid)?;
        expect(
            e["kind"] == "dotnet"
                && e["runtime"]["version"] == app.runtime.as_str()
                && e["runtime"]["tiering"] == tiering
                && e["runtime"]["tiering_reason"] == reason
                && e["r2r_images"] == r2r
                && r2r > 0
                && e["container"].is_null()
                && e["probe"]["ok"] == true,
            || format!("dotnet pid {}: {e} (R2R assemblies mapped: {r2r})", app.pid),
        )?;
        let l = line(&text, app.pid)?;
        let want = format!(
            ".NET {} tiering {} ({reason}), {r2r} R2R images",
            app.runtime,
            if tiering { "on" } else { "off" }
        );
        expect(l.contains(&want) && l.ends_with(" yes"), || {
            format!("{l:?} lacks {want:?}")
        })?;
    }

    // Go on the host and in the container: version as `go version` reads it, register ABI.
    let go_version = go_version_of(&go_bin)?;
    for (pid, id) in [(go.pid(), None), (docker_pid, Some(docker_id.as_str()))] {
        let e = entry(&entries, pid)?;
        expect(
            e["kind"] == "go"
                && e["version"] == go_version.as_str()
                && e["abi"] == "register"
                && e["probe"]["ok"] == true,
            || format!("go pid {pid}: {e}"),
        )?;
        match id {
            None => expect(e["container"].is_null(), || format!("{e}"))?,
            Some(id) => expect(
                e["container"]["id"] == id
                    && e["container"]["engine"] == "docker"
                    && e["container"]["name"] == container.name(),
                || format!("container {id} {}: {e}", container.name()),
            )?,
        }
        let l = line(&text, pid)?;
        expect(l.contains(&format!("Go {go_version} register ABI")), || {
            l.clone()
        })?;
    }
    let l = line(&text, docker_pid)?;
    expect(
        l.contains(&format!("{} ({})", &docker_id[..12], container.name())),
        || l.clone(),
    )?;

    // C: native.
    // The kernel keeps the first 15 bytes of the file name as comm (TASK_COMM_LEN).
    let c_name = c_bin.file_name().unwrap().to_string_lossy();
    let e = entry(&entries, c.pid())?;
    expect(
        e["kind"] == "native"
            && e["comm"] == c_name.get(..15).unwrap_or(&c_name)
            && e["probe"]["ok"] == true,
        || format!("{e}"),
    )?;

    // The snapshot: the sample processes' objects, what varies from run to run redacted.
    let mut shown = Vec::new();
    for (role, pid) in [
        ("dotnet tiering default", tiered.pid),
        ("dotnet tiering off", untiered.pid),
        ("go host", go.pid()),
        ("go docker", docker_pid),
        ("c", c.pid()),
    ] {
        let mut e = entry(&entries, pid)?;
        e["pid"] = Json::from("[pid]");
        if role == "c" {
            e["comm"] = Json::from("[tracee-HASH]");
        }
        if e["container"].is_object() {
            e["container"]["id"] = Json::from("[container id]");
            e["container"]["name"] = Json::from("[container name]");
        }
        shown.push(format!("{role}: {e}"));
    }
    insta::assert_snapshot!("ps_json_sample_processes", shown.join("\n"));

    drop(in_docker);
    drop(container);
    drop(image);
    drop((go, c));
    Ok(())
}

fn main() {
    let needs = [
        Need::Root,
        Need::Tracefs,
        Need::Program("mcs"),
        Need::Path(dotnet::dotnet8().join("dotnet")),
        Need::Go,
        Need::CCompiler,
        Need::Program("/usr/bin/docker"),
    ];
    e2e::run(vec![e2e::trial(
        "ps_lines_are_right_for_sample_processes",
        &needs,
        ps_lines_are_right_for_sample_processes,
    )]);
}
