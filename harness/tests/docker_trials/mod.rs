//! What the Docker end-to-end tests share (`docker_sidecar_e2e`, `docker_checks_e2e`): the sweep
//! of dead runs' leftovers around each trial, the check that a trial left nothing, the sidecar
//! image, and the programs the apps run. A module of each of those test targets; each uses part
//! of it.
#![allow(dead_code)]

use fixtures::e2e;
use harness::containers::Privilege;
use harness::docker::{self, ImageGuard};
use harness::images;
use harness::owner::Owner;
use std::path::PathBuf;

pub type TrialResult = Result<(), String>;

/// Sweeps leftovers of dead runs, runs `body`, then fails if this process still has any
/// container or image of the trial's making (the guards must have removed them).
pub fn with_sweep(body: impl FnOnce() -> TrialResult) -> TrialResult {
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
pub fn assert_nothing_left(owner: Owner, role_prefix: &str) -> TrialResult {
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

pub fn netprobe_builds() -> Result<(), String> {
    harness::binaries::netprobe_release()
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

pub fn fixture_binary() -> PathBuf {
    fixtures::CProgram::new("harness_calls")
        .flags(&["-static", "-O2"])
        .build()
}

pub fn sidecar_image(owner: Owner, role: &str) -> Result<ImageGuard, String> {
    let netprobe = harness::binaries::netprobe_release().map_err(|e| format!("{e:#}"))?;
    let root = images::sidecar_rootfs(&netprobe).map_err(e2e::err)?;
    docker::import(&root, &owner.image_ref(role), &images::sidecar_changes()).map_err(e2e::err)
}

pub fn note_privilege(p: &Privilege) {
    match p {
        Privilege::Privileged => eprintln!("sidecar runs --privileged"),
        Privilege::MinimalCaps { .. } => {
            eprintln!("sidecar runs with the minimal capability set (see NOTE above)")
        }
    }
}

/// Builds the Go sample app with its own script; returns the static `sampleapp-default`.
pub fn go_sample_app() -> Result<PathBuf, String> {
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
