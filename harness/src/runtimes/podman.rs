//! Podman (Debian's 4.3) as root, on its default storage (`/var/lib/containers/storage`, the
//! state database netprobe reads): images loaded from an [`ImageArchive`], containers run with
//! names and labels and no network (`--network none`: nothing added to the host's firewall
//! rules beside Docker's). On a machine without systemd Podman picks the cgroupfs manager and
//! file events by itself (`podman --help` shows the defaults).

use super::{ImageArchive, OWNER_LABEL};
use crate::owner::Owner;
use anyhow::{Context, Result};
use std::process::{Command, Output};

/// The Podman client.
pub const PODMAN: &str = "/usr/bin/podman";

/// Runs `podman ARGS` and returns its whole output, whatever the exit status.
pub fn podman_output(args: &[&str]) -> Result<Output> {
    Command::new(PODMAN)
        .args(args)
        .output()
        .with_context(|| format!("running {PODMAN} (scripts/install-prereqs.sh installs it)"))
}

/// Runs `podman ARGS` and returns its stdout; an error carrying stderr when it fails.
pub fn podman(args: &[&str]) -> Result<String> {
    crate::command::stdout_of(podman_output(args)?, "podman", args)
}

/// Loads `archive` (`podman load`), once per process; returns the image's reference
/// (`localhost/<archive name>`: Podman's name for an unqualified tag). Loading the same archive
/// again changes nothing in Podman's store.
pub fn load(archive: &ImageArchive) -> Result<String> {
    static DONE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let reference = format!("localhost/{}", archive.name);
    if done.contains(&reference) {
        return Ok(reference);
    }
    podman(&["load", "-q", "-i", &archive.path.to_string_lossy()])?;
    podman(&["image", "exists", &reference])
        .with_context(|| format!("no image {reference} after podman load"))?;
    done.push(reference.clone());
    Ok(reference)
}

/// A Podman container of the harness, named `nptest_harness_<owner>_<role>`: removed (killed
/// first) when dropped, also on panic.
#[derive(Debug)]
pub struct PodmanContainer {
    name: String,
    owner: Owner,
}

impl PodmanContainer {
    /// Guards the container of `owner`'s `role`; removes a leftover under the same name first.
    pub fn new(owner: Owner, role: &str) -> PodmanContainer {
        let guard = PodmanContainer {
            name: owner.container_name(role),
            owner,
        };
        guard.remove();
        guard
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `podman run -i --name NAME --network none --ulimit ... --label K=V... IMAGE COMMAND...`, not yet run:
    /// stdin, stdout and stderr go to the container's process and podman exits with it (add
    /// `-d` through `detach` to return once it started). Labels: `labels` and [`OWNER_LABEL`].
    pub fn run_command(
        &self,
        image: &str,
        labels: &[(String, String)],
        detach: bool,
        command: &[&str],
    ) -> Command {
        let mut c = Command::new(PODMAN);
        c.args(["run", "-i", "--name", &self.name, "--network", "none"]);
        // Podman 4.3 gives a rootful container the hard limits of nofile 1048576 and nproc at
        // the host's maximum; runc failed to set them where the host's own hard limits are lower
        // (`error setting rlimit type 7: operation not permitted`). These are ctr's values.
        c.args([
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=4096:4096",
        ]);
        if detach {
            c.arg("-d");
        }
        for (k, v) in labels {
            c.args(["--label", &format!("{k}={v}")]);
        }
        c.args(["--label", &format!("{OWNER_LABEL}={}", self.owner), image])
            .args(command);
        c
    }

    /// `podman inspect NAME`'s one object.
    pub fn inspect(&self) -> Result<serde_json::Value> {
        let out = podman(&["inspect", "--type", "container", &self.name])?;
        let all: serde_json::Value =
            serde_json::from_str(&out).context("parsing podman inspect")?;
        Ok(all[0].clone())
    }

    fn remove(&self) {
        let _ = podman_output(&["rm", "-f", "-t", "0", &self.name]);
    }
}

impl Drop for PodmanContainer {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the containers that runs of the harness which no longer exist left (their name names
/// a dead owner); returns their names. Live runs' containers and others are left alone.
pub fn sweep_dead_owners() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for name in crate::docker::harness_containers_of(podman)? {
        if Owner::of_container(&name).is_some_and(|o| !o.is_alive()) {
            let _ = podman_output(&["rm", "-f", "-t", "0", &name]);
            removed.push(name);
        }
    }
    Ok(removed)
}
