//! End-to-end tests of `--container NAME|ID` on a real Docker engine: the Go sample app runs in a
//! container made by the harness (`harness::images::program_rootfs`, imported, never pulled) and
//! is traced from the host by the container's name and by its id, with real hit counts; and the
//! one-line errors for a container that does not exist, one that is not running, and no engine.
//! Root, tracefs, Go, and a Docker engine (`scripts/docker-up.sh`).

use fixtures::e2e::{self, err, Need};
use fixtures::live::Waiting;
use fixtures::netprobe;
use std::process::Command;
use std::time::Duration;

const TRACEFS: &str = "/sys/kernel/tracing";
/// Workload rounds: Add3(i, 10i, 100i) for i = 0..ROUNDS-1.
const ROUNDS: i64 = 5;

type R = Result<(), String>;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn h<T>(r: anyhow::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{e:#}"))
}

/// `count --json` counts of `function`.
fn count_of(stdout: &str, function: &str) -> Option<u64> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|j| {
            j["counts"]
                .as_object()
                .map(|c| c.get(function).and_then(|v| v.as_u64()).unwrap_or(0))
        })
}

/// The sample app in a container, traced by name (all calls of Add3) and by id with a filter
/// (Add3 calls with a >= 2): counts equal the calls the workload made.
fn sample_app_traced_by_container_name() -> R {
    h(harness::docker::ensure_engine())?;
    let owner = harness::owner::Owner::current();
    let image = h(harness::images::go_sample_app_image(&owner, "filters-go"))?;
    for (i, (by_id, filter, want)) in [
        (false, None, ROUNDS as u64),
        (true, Some("a >= 2"), (ROUNDS - 2) as u64),
    ]
    .into_iter()
    .enumerate()
    {
        let container =
            harness::docker::ContainerGuard::new(owner.container_name(&format!("filters-go{i}")));
        let mut app = Waiting::start(Command::new("/usr/bin/docker").args([
            "run",
            "-i",
            "--name",
            container.name(),
            image.reference(),
            "/app/sampleapp",
            "workload",
            "-n",
            &ROUNDS.to_string(),
            "-wait",
        ]))?;
        let reference = if by_id {
            h(harness::docker::docker(&[
                "inspect",
                "-f",
                "{{.Id}}",
                container.name(),
            ]))?
            .trim()[..12]
                .to_string()
        } else {
            container.name().to_string()
        };
        let mut args = vec![
            "count".to_string(),
            "--json".into(),
            "--container".into(),
            reference.clone(),
            "main.Add3 a=s64 b=s64 c=s64".into(),
            "--duration".into(),
            "120s".into(),
        ];
        if let Some(f) = filter {
            args.extend(["--filter".into(), f.into()]);
        }
        let (child, stderr) = fixtures::live::spawn_until_live(
            netprobe::command().args(&args),
            Duration::from_secs(120),
        )?;
        let np_pid = child.id();
        // The workload's summary comes after its calls; then it exits, and netprobe with it.
        let rest = app.go()? + &app.finish();
        let out = child.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
            return Err(l);
        }
        let stdout = text(&out.stdout);
        if !rest.contains(&format!("Add3 calls={ROUNDS}")) {
            return Err(format!("the workload did not finish: {rest}"));
        }
        if !out.status.success() || count_of(&stdout, "main.Add3") != Some(want) {
            return Err(format!(
                "--container {reference}: expected main.Add3 {want}: {stdout} {stderr}"
            ));
        }
        if !stderr.contains(&format!("netprobe: container {} (", container.name())) {
            return Err(format!("the container's pids are not said: {stderr}"));
        }
    }
    Ok(())
}

/// One-line errors: no such container, a container that is not running, no engine socket.
fn container_errors_are_one_line() -> R {
    h(harness::docker::ensure_engine())?;
    let owner = harness::owner::Owner::current();
    let missing = owner.container_name("filters-none");
    let out = netprobe::output(&["count", "--container", &missing, "main.Add3"])?;
    let stderr = text(&out.stderr);
    if out.status.success()
        || stderr.lines().count() != 1
        || !stderr.contains(&format!("--container {missing}: no such container"))
    {
        return Err(format!("missing container: {stderr}"));
    }
    let image = h(harness::images::go_sample_app_image(
        &owner,
        "filters-created",
    ))?;
    let created = harness::docker::ContainerGuard::new(owner.container_name("filters-created"));
    h(harness::docker::docker(&[
        "create",
        "--name",
        created.name(),
        image.reference(),
        "/app/sampleapp",
    ]))?;
    let out = netprobe::output(&["trace", "--container", created.name(), "main.Add3"])?;
    let stderr = text(&out.stderr);
    if out.status.success()
        || stderr.lines().count() != 1
        || !stderr.contains("is not running (status created): start it with `docker start")
    {
        return Err(format!("created container: {stderr}"));
    }
    let out = netprobe::command()
        .args(["latency", "--container", "web", "main.Add3"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .map_err(err)?;
    let stderr = text(&out.stderr);
    if out.status.success()
        || stderr.lines().count() != 1
        || !stderr.contains("no Docker socket at /nonexistent/docker.sock")
    {
        return Err(format!("no socket: {stderr}"));
    }
    Ok(())
}

fn main() {
    let needs = vec![Need::Root, Need::Tracefs, Need::Go, Need::Docker];
    e2e::run(vec![
        e2e::trial(
            "sample_app_traced_by_container_name",
            &needs,
            sample_app_traced_by_container_name,
        ),
        e2e::trial(
            "container_errors_are_one_line",
            &needs,
            container_errors_are_one_line,
        ),
    ]);
}
