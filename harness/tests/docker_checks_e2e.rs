//! Docker end to end, the table of checks ([`harness::docker_checks::DOCKER_CHECKS`]): apps in
//! containers built locally (no registry), a netprobe sidecar in the app's PID namespace, and
//! netprobe from the host through the container's pid; each row's hits judged like the kernel
//! checks.
//!
//! Every container and image is named after this test process ([`Owner`]) and the trial, removed
//! on drop (also when a trial fails), and checked to be gone at the end of each trial; leftovers
//! of earlier runs that died are swept at start. Hit-asserting trials need the netprobe
//! subcommand they run: until it exists they are skipped (failed under CI=true) with that reason.

mod docker_trials;

use docker_trials::{
    assert_nothing_left, fixture_binary, go_sample_app, netprobe_builds, note_privilege,
    sidecar_image, with_sweep, TrialResult,
};
use fixtures::e2e::{self, Need};
use harness::checks::{self, RunOutput};
use harness::containers::{self, AppLaunch, Running};
use harness::docker;
use harness::docker_checks::{App, DockerCheck, Drive, Vantage, DOCKER_CHECKS};
use harness::images;
use harness::owner::Owner;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Runs one row of the Docker check table.
fn run_docker_check(check: &'static DockerCheck) -> TrialResult {
    // One hit trial at a time: the .NET rows share probed files (CoreLib of one runtime), and a
    // probe of one trial would otherwise look like another's readiness or leftover.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let owner = Owner::current();
    let prefix = check.name.replace('_', "-");
    let result = (|| -> TrialResult {
        let netprobe_host = harness::binaries::netprobe_release().map_err(|e| format!("{e:#}"))?;
        let port = containers::free_port().map_err(e2e::err)?.to_string();
        let with_port = |args: &[&str]| -> Vec<String> {
            args.iter().map(|a| a.replace("{port}", &port)).collect()
        };
        let (app_image, launch_argv, app_file, env) = match check.app {
            App::CFixture { count, a, b } => {
                // A file name unique to the check: its own inode, so concurrent checks never
                // share a probed file, and its probes are recognisable in uprobe_events.
                let file = format!("harness_calls_{}", check.name);
                let root = images::program_rootfs(&fixture_binary(), &file).map_err(e2e::err)?;
                let image = docker::import(&root, &owner.image_ref(&format!("{prefix}-app")), &[])
                    .map_err(e2e::err)?;
                let argv = vec![
                    format!("/app/{file}"),
                    "--on-signal".into(),
                    count.to_string(),
                    a.to_string(),
                    b.to_string(),
                ];
                (image, argv, format!("/app/{file}"), vec![])
            }
            App::Dotnet { major, args } => {
                let app_dir = dotnet_sample_app(major)?;
                let runtime = images::dotnet_runtime_root(major);
                let root = images::dotnet_rootfs(&runtime, Some(&app_dir)).map_err(e2e::err)?;
                let image = docker::import(
                    &root,
                    &owner.image_ref(&format!("{prefix}-app")),
                    &images::dotnet_changes(),
                )
                .map_err(e2e::err)?;
                let mut argv = vec![
                    format!("{}/dotnet", images::DOTNET_ROOT),
                    "/app/sample-netcore-app.dll".to_string(),
                ];
                argv.extend(with_port(args));
                // Tiering off: ReadyToRun code is never replaced, every call hits (3.1 reads
                // only COMPlus_, 8 both; learn.microsoft.com/dotnet/core/runtime-config/#environment-variables).
                let env = vec![
                    ("COMPlus_TieredCompilation".to_string(), "0".to_string()),
                    ("DOTNET_TieredCompilation".to_string(), "0".to_string()),
                ];
                (image, argv, "/app/sample-netcore-app.dll".to_string(), env)
            }
            App::GoSample { args } => {
                let bin = go_sample_app()?;
                let root = images::program_rootfs(&bin, "sampleapp").map_err(e2e::err)?;
                let image = docker::import(&root, &owner.image_ref(&format!("{prefix}-app")), &[])
                    .map_err(e2e::err)?;
                let mut argv = vec!["/app/sampleapp".to_string()];
                argv.extend(with_port(args));
                (image, argv, "/app/sampleapp".to_string(), vec![])
            }
        };
        let app = containers::start_app(
            owner,
            AppLaunch {
                role: &format!("{}_app", check.name),
                image: &app_image,
                argv: launch_argv,
                env,
                ready_stdout: Some(check.ready.into()),
            },
        )
        .map_err(|e| format!("{e:#}"))?;
        let side_image;
        let sidecar: Option<Running>;
        let (pid, program, mut argv_prefix): (u32, PathBuf, Vec<String>) = match check.vantage {
            Vantage::Sidecar => {
                side_image = sidecar_image(owner, &format!("{prefix}-sidecar"))?;
                let (side, privilege) = containers::start_sidecar(
                    owner,
                    &format!("{}_sidecar", check.name),
                    &side_image,
                    &app,
                )
                .map_err(|e| format!("{e:#}"))?;
                note_privilege(&privilege);
                let name = side.name().to_string();
                sidecar = Some(side);
                (
                    1,
                    PathBuf::from(docker::DOCKER),
                    vec!["exec".into(), name, images::SIDECAR_NETPROBE.into()],
                )
            }
            Vantage::Host => {
                sidecar = None;
                (
                    app.host_pid().map_err(e2e::err)?,
                    netprobe_host.clone(),
                    vec![],
                )
            }
        };
        if let Drive::Http {
            warmup: Some(path), ..
        } = check.drive
        {
            let port: u16 = port.parse().map_err(e2e::err)?;
            containers::wait_http(port, path, Duration::from_secs(30)).map_err(e2e::err)?;
        }
        // What every uprobe_events line of this check's probes holds and no other test's does
        // (readiness, and "no probe left behind"): netprobe probes the app's files through
        // `/proc/PID/map_files/` (the files the kernel maps), with the app's pid as netprobe
        // sees it; from a sidecar that pid is 1 in every app, but the session's group names
        // netprobe's pid namespace, the app's own.
        let marker = match check.vantage {
            Vantage::Host => format!("/proc/{pid}/map_files/"),
            Vantage::Sidecar => {
                let host_pid = app.host_pid().map_err(e2e::err)?;
                let ns =
                    std::fs::read_link(format!("/proc/{host_pid}/ns/pid")).map_err(e2e::err)?;
                let ns = ns.to_string_lossy();
                let inode = ns.trim_start_matches("pid:[").trim_end_matches(']');
                format!("netprobe_{inode}_")
            }
        };
        let root = format!("/proc/{pid}/root");
        argv_prefix.extend(check.args.iter().map(|a| {
            a.replace("{app}", &app_file)
                .replace("{root}", &root)
                .replace("{pid}", &pid.to_string())
        }));
        let limit = Duration::from_secs(check.expect.timeout_secs);
        let tracer =
            std::thread::spawn(move || checks::run_with_timeout(&program, &argv_prefix, limit));
        // Ready when netprobe's probe on the app's file is in uprobe_events.
        if let Err(e) = wait_probe_present(&marker, Duration::from_secs(30), &tracer) {
            let said = if tracer.is_finished() {
                match tracer.join() {
                    Ok(Ok(out)) => format!(
                        "netprobe exited {:?}: {}{}",
                        out.code,
                        out.stdout.trim(),
                        out.stderr.trim()
                    ),
                    Ok(Err(e)) => e,
                    Err(_) => "the tracer thread panicked".into(),
                }
            } else {
                "netprobe is still running".into()
            };
            return Err(format!("{e}; {said}"));
        }
        std::thread::sleep(Duration::from_millis(500));
        match check.drive {
            Drive::Signal { rounds } => {
                for round in 1..=rounds {
                    match &sidecar {
                        Some(side) => {
                            side.exec_ok(&["kill", "-USR1", "1"]).map_err(e2e::err)?;
                        }
                        None => {
                            // SAFETY: kill(2) on the app container's first process.
                            if unsafe { libc::kill(pid as i32, libc::SIGUSR1) } != 0 {
                                return Err(format!(
                                    "kill -USR1 {pid}: {}",
                                    std::io::Error::last_os_error()
                                ));
                            }
                        }
                    }
                    app.wait_for_output(&format!("round {round} done"), Duration::from_secs(30))
                        .map_err(e2e::err)?;
                }
            }
            Drive::Http { path, times, .. } => {
                let port: u16 = port.parse().map_err(e2e::err)?;
                for _ in 0..times {
                    let (status, body) = containers::http_get(port, path).map_err(e2e::err)?;
                    if status != 200 {
                        return Err(format!("GET {path}: {status} {body}"));
                    }
                }
            }
            Drive::AppDriven => {}
        }
        let out: RunOutput = tracer
            .join()
            .map_err(|_| "the tracer thread panicked".to_string())??;
        let verdict = checks::evaluate(&check.expect, &out);
        eprintln!(
            "{}: {} hits, {}; netprobe stderr: {}",
            check.name,
            verdict.hits.map(|h| h.to_string()).unwrap_or("?".into()),
            verdict.detail,
            out.stderr.trim()
        );
        drop(sidecar);
        drop(app);
        // No probe of ours may outlive netprobe.
        let left = probes_on(&marker);
        if !left.is_empty() {
            return Err(format!("netprobe left probes behind: {left:?}"));
        }
        if verdict.ok {
            Ok(())
        } else {
            Err(format!("{}: {}", check.name, verdict.detail))
        }
    })();
    let clean = assert_nothing_left(owner, &prefix).and(assert_nothing_left(owner, check.name));
    result.and(clean)
}

/// Builds the .NET sample app for `major` with its own script; returns the folder holding
/// `sample-netcore-app.dll` and its runtimeconfig.json.
fn dotnet_sample_app(major: &str) -> Result<PathBuf, String> {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    let script = fixtures::workspace_root().join("sample-app/dotnet/run.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["--runtime", major, "--build-only"])
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --build-only failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let dll = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dll.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("run.sh printed no dll path: {dll:?}"))
}

fn uprobe_events() -> String {
    [
        "/sys/kernel/tracing/uprobe_events",
        "/sys/kernel/debug/tracing/uprobe_events",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .unwrap_or_default()
}

/// uprobe_events lines that probe `file` (a path unique to one check).
fn probes_on(file: &str) -> Vec<String> {
    uprobe_events()
        .lines()
        .filter(|l| l.contains(file))
        .map(str::to_string)
        .collect()
}

fn wait_probe_present<T>(
    file: &str,
    limit: Duration,
    tracer: &std::thread::JoinHandle<T>,
) -> TrialResult {
    let deadline = Instant::now() + limit;
    while probes_on(file).is_empty() {
        if Instant::now() >= deadline || tracer.is_finished() {
            return Err(format!(
                "netprobe placed no probe on {file} within {} s",
                limit.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for check in DOCKER_CHECKS {
        let mut needs = vec![
            Need::Root,
            Need::Docker,
            Need::Tracefs,
            Need::Check(netprobe_builds),
        ];
        needs.extend(harness::binaries::subcommand_need(check.expect.subcommand));
        let root = fixtures::workspace_root();
        match check.app {
            App::CFixture { .. } => needs.push(Need::CCompiler),
            App::Dotnet { major, .. } => {
                needs.push(Need::Path(
                    images::dotnet_runtime_root(major).join("dotnet"),
                ));
                needs.push(Need::Path(root.join("sample-app/dotnet/run.sh")));
                needs.push(Need::Program("mcs"));
            }
            App::GoSample { .. } => {
                needs.push(Need::Go);
                needs.push(Need::Path(root.join("sample-app/go/build.sh")));
            }
        }
        trials.push(e2e::trial(check.name, &needs, move || {
            with_sweep(|| run_docker_check(check))
        }));
    }
    e2e::run(trials);
}
