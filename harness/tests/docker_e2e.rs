//! Docker end to end: apps in containers built locally (no registry), a netprobe
//! sidecar in the app's PID namespace, and netprobe from the host through the container's pid.
//!
//! Every container and image is named after this test process ([`Owner`]) and the trial, removed
//! on drop (also when a trial fails), and checked to be gone at the end of each trial; leftovers
//! of earlier runs that died are swept at start. Hit-asserting trials need the netprobe
//! subcommand they run: until it exists they are skipped (failed under CI=true) with that reason.

use fixtures::e2e::{self, Need};
use harness::checks::{self, RunOutput};
use harness::containers::{self, AppLaunch, Privilege, Running};
use harness::docker::{self, ImageGuard};
use harness::docker_checks::{App, DockerCheck, Drive, Vantage, DOCKER_CHECKS};
use harness::images;
use harness::owner::Owner;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

type TrialResult = Result<(), String>;

fn main() {
    let mut trials = vec![
        e2e::trial(
            "sidecar_sees_the_app_through_its_pid_namespace",
            &[Need::Root, Need::Docker, Need::CCompiler],
            || with_sweep(sidecar_plumbing),
        ),
        e2e::trial(
            "sidecar_dockerfile_builds_and_runs",
            &[Need::Root, Need::Docker],
            || with_sweep(sidecar_dockerfile),
        ),
    ];
    for major in ["8", "3.1"] {
        let root = images::dotnet_runtime_root(major);
        trials.push(e2e::trial(
            &format!("dotnet{}_runtime_image_runs", major.replace('.', "")),
            &[Need::Root, Need::Docker, Need::Path(root.join("dotnet"))],
            move || with_sweep(|| dotnet_runtime_image(major)),
        ));
    }
    trials.push(e2e::trial(
        "go_profile_from_sidecar",
        &[
            Need::Root,
            Need::Docker,
            Need::Go,
            Need::Check(netprobe_builds),
        ],
        || with_sweep(go_profile_from_sidecar),
    ));
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

/// Sweeps leftovers of dead runs, runs `body`, then fails if this process still has any
/// container or image of the trial's making (the guards must have removed them).
fn with_sweep(body: impl FnOnce() -> TrialResult) -> TrialResult {
    docker::ensure_engine().map_err(e2e::err)?;
    let swept = docker::sweep_dead_owners().map_err(e2e::err)?;
    for c in swept.containers.iter().chain(&swept.images) {
        eprintln!("swept leftover of a dead harness run: {c}");
    }
    for r in &swept.raced {
        eprintln!("left to the process already removing it: {r}");
    }
    body()
}

/// Fails when anything named with `role_prefix` by this process is still there.
fn assert_nothing_left(owner: Owner, role_prefix: &str) -> TrialResult {
    let left: Vec<String> = docker::leftovers_of(owner)
        .map_err(e2e::err)?
        .into_iter()
        .filter(|l| l.contains(role_prefix))
        .collect();
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("left behind: {}", left.join(", ")))
    }
}

fn netprobe_builds() -> Result<(), String> {
    harness::binaries::netprobe_release()
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

fn sha256_of(path: &Path) -> Result<String, String> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn fixture_binary() -> PathBuf {
    fixtures::CProgram::new("harness_calls")
        .flags(&["-static", "-O2"])
        .build()
}

fn sidecar_image(owner: Owner, role: &str) -> Result<ImageGuard, String> {
    let netprobe = harness::binaries::netprobe_release().map_err(|e| format!("{e:#}"))?;
    let root = images::sidecar_rootfs(&netprobe).map_err(e2e::err)?;
    docker::import(&root, &owner.image_ref(role), &images::sidecar_changes()).map_err(e2e::err)
}

fn note_privilege(p: &Privilege) {
    match p {
        Privilege::Privileged => eprintln!("sidecar runs --privileged"),
        Privilege::MinimalCaps { .. } => {
            eprintln!("sidecar runs with the minimal capability set (see NOTE above)")
        }
    }
}

/// The container plumbing, with what exists today: images built locally, the sidecar in the
/// app's PID namespace sees the app as pid 1 and reads its files and maps through /proc/1/root,
/// can mount tracefs, runs netprobe, and signals the app; the host reaches the same file through
/// the container's host pid; everything is removed afterwards.
fn sidecar_plumbing() -> TrialResult {
    let owner = Owner::current();
    let prefix = "plumbing";
    {
        let bin = fixture_binary();
        let want_sha = sha256_of(&bin)?;
        let app_root = images::program_rootfs(&bin, "harness_calls").map_err(e2e::err)?;
        let app_image =
            docker::import(&app_root, &owner.image_ref("plumbing-app"), &[]).map_err(e2e::err)?;
        let side_image = sidecar_image(owner, "plumbing-sidecar")?;
        let app = containers::start_app(
            owner,
            AppLaunch {
                role: "plumbing_app",
                image: &app_image,
                argv: ["/app/harness_calls", "--on-signal", "3", "7", "12345"]
                    .map(String::from)
                    .to_vec(),
                env: vec![],
                ready_stdout: Some("ready pid=1".into()),
            },
        )
        .map_err(|e| format!("{e:#}"))?;
        let (side, privilege) =
            containers::start_sidecar(owner, "plumbing_sidecar", &side_image, &app)
                .map_err(|e| format!("{e:#}"))?;
        note_privilege(&privilege);

        // The app is pid 1 in the shared namespace, and its files are under /proc/1/root.
        let cmdline = side
            .exec_ok(&["cat", "/proc/1/cmdline"])
            .map_err(e2e::err)?;
        if !cmdline.starts_with("/app/harness_calls\0--on-signal") {
            return Err(format!("pid 1 in the sidecar is not the app: {cmdline:?}"));
        }
        let seen = side
            .exec_ok(&["sha256sum", "/proc/1/root/app/harness_calls"])
            .map_err(e2e::err)?;
        if !seen.starts_with(&want_sha) {
            return Err(format!("sidecar sees other bytes: {seen} vs {want_sha}"));
        }
        let maps = side.exec_ok(&["cat", "/proc/1/maps"]).map_err(e2e::err)?;
        if !maps
            .lines()
            .any(|l| l.contains(" r-xp ") && l.ends_with("/app/harness_calls"))
        {
            return Err(format!(
                "the app's code mapping is not in /proc/1/maps:\n{maps}"
            ));
        }
        // tracefs can be mounted in the sidecar (uprobe_events is only looked at, never written).
        side.exec_ok(&[
            "sh",
            "-c",
            "test -e /sys/kernel/tracing/uprobe_events || mount -t tracefs nodev /sys/kernel/tracing; test -e /sys/kernel/tracing/uprobe_events",
        ])
        .map_err(|e| format!("tracefs in the sidecar: {e:#}"))?;
        let version = side.exec_ok(&["netprobe", "--version"]).map_err(e2e::err)?;
        if !version.starts_with("netprobe ") {
            return Err(format!(
                "netprobe --version in the sidecar said {version:?}"
            ));
        }
        // netprobe in the sidecar resolves the app's function through /proc/1/root and the app's
        // maps, to the offset binutils gives for the file.
        let want = harness::oracle::elf_offsets(&bin, &["np_harness_add"]).map_err(e2e::err)?
            ["np_harness_add"];
        let side_json = side
            .exec_ok(&[
                "netprobe",
                "offsets",
                "1",
                "harness_calls",
                "np_harness_add",
                "--json",
            ])
            .map_err(e2e::err)?;
        check_offset("sidecar", &side_json, want)?;
        // A signal from the sidecar reaches the app.
        side.exec_ok(&["kill", "-USR1", "1"]).map_err(e2e::err)?;
        app.wait_for_output("round 1 done", Duration::from_secs(20))
            .map_err(e2e::err)?;
        // The host reaches the same file through the container's host pid.
        let host_pid = app.host_pid().map_err(e2e::err)?;
        let host_view = PathBuf::from(format!("/proc/{host_pid}/root/app/harness_calls"));
        if sha256_of(&host_view)? != want_sha {
            return Err(format!(
                "{} differs from the built fixture",
                host_view.display()
            ));
        }
        // netprobe on the host resolves the same function through the container's host pid.
        let netprobe = harness::binaries::netprobe_release().map_err(|e| format!("{e:#}"))?;
        let pid_arg = host_pid.to_string();
        let out = std::process::Command::new(&netprobe)
            .args([
                "offsets",
                &pid_arg,
                "harness_calls",
                "np_harness_add",
                "--json",
            ])
            .output()
            .map_err(e2e::err)?;
        if !out.status.success() {
            return Err(format!(
                "netprobe offsets from the host failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        check_offset("host", &String::from_utf8_lossy(&out.stdout), want)?;
        drop(side);
        drop(app);
    }
    assert_nothing_left(owner, prefix)
}

/// The `offset` of `np_harness_add` in `netprobe offsets --json` output equals `want`.
fn check_offset(vantage: &str, json_lines: &str, want: u64) -> TrialResult {
    let got = json_lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["name"] == "np_harness_add")
        .and_then(|v| v["offset"].as_str().map(str::to_string))
        .ok_or_else(|| {
            format!("{vantage}: no np_harness_add in netprobe's output: {json_lines}")
        })?;
    if got != format!("{want:#x}") {
        return Err(format!(
            "{vantage}: netprobe says np_harness_add is at {got}, nm+readelf say {want:#x}"
        ));
    }
    eprintln!("{vantage}: netprobe offsets np_harness_add = {got} (nm+readelf agree)");
    Ok(())
}

/// harness/docker/netprobe-sidecar.Dockerfile builds (with BASE set to a local glibc + busybox
/// image, as no registry is reachable here) and the image runs netprobe.
fn sidecar_dockerfile() -> TrialResult {
    let owner = Owner::current();
    {
        let netprobe = harness::binaries::netprobe_release().map_err(|e| format!("{e:#}"))?;
        // The base: the libraries netprobe needs and a shell with `sleep`, like bookworm-slim.
        let mut base = harness::rootfs::Rootfs::new();
        base.libs_of(&netprobe).map_err(e2e::err)?;
        images::add_busybox(&mut base, &["sh", "sleep"]).map_err(e2e::err)?;
        base.dir("/tmp", 0o1777).map_err(e2e::err)?;
        let base_image = docker::import(
            &base,
            &owner.image_ref("dockerfile-base"),
            &["ENV PATH=/usr/local/bin:/bin".to_string()],
        )
        .map_err(e2e::err)?;
        let context = tempfile::tempdir().map_err(e2e::err)?;
        std::fs::copy(&netprobe, context.path().join("netprobe")).map_err(e2e::err)?;
        let dockerfile =
            fixtures::workspace_root().join("harness/docker/netprobe-sidecar.Dockerfile");
        let built = docker::build(
            &dockerfile,
            context.path(),
            &owner.image_ref("dockerfile-sidecar"),
            &[("BASE", base_image.reference())],
        )
        .map_err(e2e::err)?;
        let name = owner.container_name("dockerfile_sidecar");
        let _guard = docker::ContainerGuard::new(name.clone());
        let out = docker::docker(&[
            "run",
            "--rm",
            "--name",
            &name,
            "--entrypoint",
            "/usr/local/bin/netprobe",
            built.reference(),
            "--version",
        ])
        .map_err(e2e::err)?;
        if !out.starts_with("netprobe ") {
            return Err(format!("the built sidecar's netprobe said {out:?}"));
        }
    }
    assert_nothing_left(owner, "dockerfile")
}

/// The .NET runtime image (runtime + ldd-named host libraries, `tar | docker import`) starts the
/// real host and lists its runtime.
fn dotnet_runtime_image(major: &str) -> TrialResult {
    let owner = Owner::current();
    let role = format!("dotnet{}-runtime", major.replace('.', ""));
    {
        let root_dir = images::dotnet_runtime_root(major);
        let versions = images::dotnet_runtime_versions(&root_dir).map_err(e2e::err)?;
        let version = versions.last().ok_or("no runtime version in the cache")?;
        let started = Instant::now();
        let root = images::dotnet_rootfs(&root_dir, None).map_err(e2e::err)?;
        let size = root.size().map_err(e2e::err)?;
        let image = docker::import(&root, &owner.image_ref(&role), &images::dotnet_changes())
            .map_err(e2e::err)?;
        eprintln!(
            ".NET {major} image: {:.0} MB imported in {:.1} s",
            size as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        let app = containers::start_app(
            owner,
            AppLaunch {
                role: &role.replace('-', "_"),
                image: &image,
                argv: vec![
                    format!("{}/dotnet", images::DOTNET_ROOT),
                    "--list-runtimes".into(),
                ],
                env: vec![],
                ready_stdout: Some(format!("Microsoft.NETCore.App {version}")),
            },
        )
        .map_err(|e| format!("{e:#}"))?;
        drop(app);
    }
    assert_nothing_left(owner, &role.replace('-', "_"))
}

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

/// `netprobe profile` in the sidecar (the sample Go service is pid 1 there; its binary read
/// through /proc/1/root) while the host keeps the service busy with CPU-bound `GET /spin`
/// requests: most samples are under `main.Spin`, named from the Go function table.
fn go_profile_from_sidecar() -> TrialResult {
    let owner = Owner::current();
    let prefix = "profile-go";
    let result = (|| -> TrialResult {
        let bin = go_sample_app()?;
        let root = images::program_rootfs(&bin, "sampleapp").map_err(e2e::err)?;
        let app_image =
            docker::import(&root, &owner.image_ref("profile-go-app"), &[]).map_err(e2e::err)?;
        let side_image = sidecar_image(owner, "profile-go-sidecar")?;
        let port = containers::free_port().map_err(e2e::err)?;
        let app = containers::start_app(
            owner,
            AppLaunch {
                role: "profile_go_app",
                image: &app_image,
                argv: vec![
                    "/app/sampleapp".into(),
                    "serve".into(),
                    "-addr".into(),
                    format!("127.0.0.1:{port}"),
                ],
                env: vec![],
                ready_stdout: Some("listening on".into()),
            },
        )
        .map_err(|e| format!("{e:#}"))?;
        let (side, privilege) =
            containers::start_sidecar(owner, "profile_go_sidecar", &side_image, &app)
                .map_err(|e| format!("{e:#}"))?;
        note_privilege(&privilege);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let load = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut ok = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok((200, _)) = containers::http_get(port, "/spin?n=10000000") {
                        ok += 1;
                    }
                }
                ok
            })
        };
        std::thread::sleep(Duration::from_millis(500));
        let out = side.exec(&[
            images::SIDECAR_NETPROBE,
            "profile",
            "--json",
            "-F",
            "199",
            "--duration",
            "4s",
            "-p",
            "1",
        ]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let requests = load.join().map_err(|_| "the load thread panicked")?;
        let out = out.map_err(e2e::err)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!("profile in the sidecar: {}: {stderr}", out.status));
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(e2e::err)?;
        let samples = v["samples"].as_u64().unwrap_or(0);
        let under_spin: u64 = v["stacks"]
            .as_array()
            .map(|stacks| {
                stacks
                    .iter()
                    .filter(|st| {
                        st["frames"].as_array().is_some_and(|f| {
                            f.iter()
                                .any(|x| x["function"].as_str() == Some("main.Spin"))
                        })
                    })
                    .filter_map(|st| st["count"].as_u64())
                    .sum()
            })
            .unwrap_or(0);
        eprintln!(
            "sidecar profile: {samples} samples, {under_spin} under main.Spin, {requests} requests"
        );
        drop(side);
        drop(app);
        let pct = 100.0 * under_spin as f64 / samples.max(1) as f64;
        if samples < 100 || pct < 50.0 {
            return Err(format!(
                "{under_spin} of {samples} samples under main.Spin ({requests} requests): {}",
                v["functions"]
            ));
        }
        Ok(())
    })();
    result.and(assert_nothing_left(owner, prefix))
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

/// Builds the Go sample app with its own script; returns the static `sampleapp-default`.
fn go_sample_app() -> Result<PathBuf, String> {
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    let out_dir = fixtures::build::target_dir().join("harness-go-sample");
    let script = fixtures::workspace_root().join("sample-app/go/build.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(&out_dir)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(out_dir.join("sampleapp-default"))
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
