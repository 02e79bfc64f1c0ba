//! Docker end to end, the plumbing: a netprobe sidecar sees the app through its PID namespace,
//! the sidecar's Dockerfile builds and runs, the .NET runtime images run, and `profile` from the
//! sidecar names a Go app's frames. Images are built locally (no registry); the table of hit
//! checks is `docker_checks_e2e.rs`.
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
use harness::containers::{self, AppLaunch};
use harness::docker;
use harness::images;
use harness::owner::Owner;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn sha256_of(path: &Path) -> Result<String, String> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
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
    e2e::run(trials);
}
