//! containerd through `ctr` (Debian's containerd 1.6), on the daemon `scripts/containerd-up.sh`
//! starts at containerd's default socket: images imported from an [`ImageArchive`] into a
//! namespace, and containers run with labels, each in a cgroup (`/NAMESPACE/ID`, ctr's default
//! cgroups path) and a pid namespace of its own (the OCI spec's defaults ctr applies).

use super::{container_id, ImageArchive, OWNER_LABEL};
use crate::owner::Owner;
use anyhow::{bail, Context, Result};
use std::process::{Command, Output};

/// The `ctr` client.
pub const CTR: &str = "/usr/bin/ctr";
/// containerd's default socket, the one `scripts/containerd-up.sh` serves.
pub const ADDRESS: &str = "/run/containerd/containerd.sock";

/// `ctr --address ADDRESS -n NAMESPACE ARGS`, not yet run (2 s to connect, not ctr's 10).
pub fn ctr_command(namespace: &str, args: &[&str]) -> Command {
    let mut c = Command::new(CTR);
    c.args([
        "--address",
        ADDRESS,
        "--connect-timeout",
        "2s",
        "-n",
        namespace,
    ])
    .args(args);
    c
}

/// Runs `ctr -n NAMESPACE ARGS` and returns its whole output, whatever the exit status.
pub fn ctr_output(namespace: &str, args: &[&str]) -> Result<Output> {
    ctr_command(namespace, args)
        .output()
        .with_context(|| format!("running {CTR} (scripts/containerd-up.sh installs it)"))
}

/// Runs `ctr -n NAMESPACE ARGS` and returns its stdout; an error carrying stderr when it fails.
pub fn ctr(namespace: &str, args: &[&str]) -> Result<String> {
    crate::command::stdout_of(
        ctr_output(namespace, args)?,
        &format!("ctr -n {namespace}"),
        args,
    )
}

/// Whether a containerd answers on [`ADDRESS`].
pub fn answers() -> bool {
    std::path::Path::new(ADDRESS).exists()
        && ctr_output("default", &["version"]).is_ok_and(|o| o.status.success())
}

/// Starts the daemon with the project's `scripts/containerd-up.sh` unless one already answers.
pub fn ensure_daemon() -> Result<()> {
    crate::command::start_unless(answers, "scripts/containerd-up.sh", "containerd")
}

/// Imports `archive` into `namespace` (unpacked for the default snapshotter), once per process
/// and namespace; returns the image's reference there (`docker.io/<archive name>`). A second
/// import of the same archive changes nothing in containerd.
pub fn import(namespace: &str, archive: &ImageArchive) -> Result<String> {
    static DONE: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    let reference = format!("docker.io/{}", archive.name);
    let key = (namespace.to_string(), reference.clone());
    if done.contains(&key) {
        return Ok(reference);
    }
    ctr(
        namespace,
        &["images", "import", &archive.path.to_string_lossy()],
    )?;
    let listed = ctr(namespace, &["images", "ls", "-q"])?;
    if !listed.lines().any(|l| l.trim() == reference) {
        bail!(
            "ctr -n {namespace} images import {}: no image {reference} after it (listed: {listed})",
            archive.path.display(),
        );
    }
    done.push(key);
    Ok(reference)
}

/// A containerd container of the harness: removed (task killed, container and snapshot deleted)
/// when dropped, also on panic.
#[derive(Debug)]
pub struct CtrContainer {
    namespace: String,
    id: String,
    owner: Owner,
}

impl CtrContainer {
    /// Guards the container of `owner`'s `role` in `namespace` (its id: [`container_id`]);
    /// removes a leftover under the same id first.
    pub fn new(namespace: &str, owner: Owner, role: &str) -> CtrContainer {
        let guard = CtrContainer {
            namespace: namespace.to_string(),
            id: container_id(&owner, role),
            owner,
        };
        guard.remove();
        guard
    }

    /// The 64-hex-digit container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The containerd namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `ctr -n NS run --label K=V... [-d] IMAGE ID COMMAND...`, not yet run: in the foreground
    /// (without `detach`) ctr forwards its stdin, stdout and stderr to the container's process
    /// and exits with it, as `docker run -i` does; detached it returns once the task started.
    /// Labels: `labels` and [`OWNER_LABEL`].
    pub fn run_command(
        &self,
        image: &str,
        labels: &[(String, String)],
        detach: bool,
        command: &[&str],
    ) -> Command {
        let mut args: Vec<String> = vec!["run".into()];
        if detach {
            args.push("-d".into());
        }
        for (k, v) in labels {
            args.extend(["--label".into(), format!("{k}={v}")]);
        }
        args.extend([
            "--label".into(),
            format!("{OWNER_LABEL}={}", self.owner),
            image.into(),
            self.id.clone(),
        ]);
        args.extend(command.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ctr_command(&self.namespace, &refs)
    }

    /// Runs the container detached ([`CtrContainer::run_command`] with `detach`).
    pub fn run_detached(
        &self,
        image: &str,
        labels: &[(String, String)],
        command: &[&str],
    ) -> Result<()> {
        let out = self
            .run_command(image, labels, true, command)
            .output()
            .context("running ctr run -d")?;
        if !out.status.success() {
            bail!(
                "ctr -n {} run -d {image} {}: {}",
                self.namespace,
                self.id,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// `ctr -n NS containers info ID`: the container record (labels, image, spec) as JSON.
    pub fn info(&self) -> Result<serde_json::Value> {
        let out = ctr(&self.namespace, &["containers", "info", &self.id])?;
        serde_json::from_str(&out).context("parsing ctr containers info")
    }

    /// The pids (in the initial pid namespace) of the container's processes, as
    /// `ctr task ps` lists them.
    pub fn pids(&self) -> Result<Vec<u32>> {
        let out = ctr(&self.namespace, &["tasks", "ps", &self.id])?;
        // `PID  INFO` header, then one pid per line.
        Ok(out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect())
    }

    /// The task's first process (`ctr task ls`'s PID column), once it runs.
    pub fn task_pid(&self) -> Result<u32> {
        let out = ctr(&self.namespace, &["tasks", "ls"])?;
        out.lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                (f.next()? == self.id).then(|| f.next()?.parse().ok())?
            })
            .next()
            .with_context(|| {
                format!(
                    "no task {} in ctr -n {} tasks ls: {out}",
                    self.id, self.namespace
                )
            })
    }

    fn remove(&self) {
        remove(&self.namespace, &self.id);
    }
}

impl Drop for CtrContainer {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Kills and deletes the task of container `id`, then the container and its snapshot.
fn remove(namespace: &str, id: &str) {
    let _ = ctr_output(namespace, &["tasks", "rm", "-f", id]);
    let _ = ctr_output(namespace, &["containers", "rm", id]);
}

/// Removes the containers in `namespaces` that runs of the harness which no longer exist left
/// ([`OWNER_LABEL`] names a dead owner); returns their ids. Live runs' containers and any
/// container without the label are left alone.
pub fn sweep_dead_owners(namespaces: &[&str]) -> Result<Vec<String>> {
    let filter = format!("labels.\"{OWNER_LABEL}\"");
    let mut removed = Vec::new();
    for ns in namespaces {
        for id in ctr(ns, &["containers", "ls", "-q", &filter])?.lines() {
            let info: serde_json::Value =
                serde_json::from_str(&ctr(ns, &["containers", "info", id])?)?;
            let dead = info["Labels"][OWNER_LABEL]
                .as_str()
                .and_then(Owner::parse)
                .is_some_and(|o| !o.is_alive());
            if dead {
                remove(ns, id);
                removed.push(format!("{ns}/{id}"));
            }
        }
    }
    Ok(removed)
}
