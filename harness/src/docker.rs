//! The Docker engine as the harness uses it: through `/usr/bin/docker` (the 20.10 client that
//! matches Debian's engine, installed by `scripts/docker-up.sh`), with images made
//! locally (`docker import` of a [`Rootfs`], or `docker build` of a local Dockerfile whose base
//! is such an image) and never pulled.
//!
//! Lifetime rules (the harness leaves no container and no image layer of its own behind):
//! - every container and image carries the run's [`Owner`] in its name;
//! - [`ContainerGuard`] and [`ImageGuard`] remove theirs on drop, so also when a test panics;
//! - [`sweep_dead_owners`] removes what runs that died without dropping (SIGKILL, power loss)
//!   left behind, and never touches a live run's resources nor anything not named by the harness.

use crate::owner::{Owner, CONTAINER_PREFIX, IMAGE_REPO_PREFIX};
use crate::rootfs::Rootfs;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The Docker client the harness calls.
pub const DOCKER: &str = "/usr/bin/docker";

/// Runs `docker ARGS` and returns its stdout; an error carrying stderr when it fails.
pub fn docker(args: &[&str]) -> Result<String> {
    crate::command::stdout_of(docker_output(args)?, "docker", args)
}

/// Runs `docker ARGS` and returns its whole output, whatever the exit status.
pub fn docker_output(args: &[&str]) -> Result<Output> {
    Command::new(DOCKER)
        .args(args)
        .env("DOCKER_BUILDKIT", "0")
        .output()
        .with_context(|| format!("running {DOCKER} (scripts/docker-up.sh installs it)"))
}

/// Starts the engine with the project's `scripts/docker-up.sh` unless it already answers.
pub fn ensure_engine() -> Result<()> {
    crate::command::start_unless(
        || docker_output(&["info"]).is_ok_and(|o| o.status.success()),
        "scripts/docker-up.sh",
        "the Docker engine",
    )
}

/// Removes the named container (and its anonymous volumes) on drop, running or not.
#[derive(Debug)]
pub struct ContainerGuard {
    name: String,
}

impl ContainerGuard {
    /// Guards `name`; removes any container already under that name first (a Created leftover
    /// of a failed start under the same owner).
    pub fn new(name: impl Into<String>) -> ContainerGuard {
        let guard = ContainerGuard { name: name.into() };
        guard.remove();
        guard
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn remove(&self) {
        let _ = docker_output(&["rm", "-f", "-v", &self.name]);
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the tagged image on drop. The layers go with it unless another image shares them
/// (an identical import by a concurrent run: Docker stores layers by content).
#[derive(Debug)]
pub struct ImageGuard {
    reference: String,
}

impl ImageGuard {
    /// The image reference (`netprobe-harness/<role>:<owner>`).
    pub fn reference(&self) -> &str {
        &self.reference
    }

    /// The repository part (before the tag), as testcontainers' `GenericImage::new` takes it.
    pub fn repository(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map(|(r, _)| r)
            .unwrap_or(&self.reference)
    }

    /// The tag part.
    pub fn tag(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map(|(_, t)| t)
            .unwrap_or("latest")
    }
}

impl Drop for ImageGuard {
    fn drop(&mut self) {
        // Containers of this owner using the image are gone by now (guards drop in reverse
        // order of creation); `rmi` without -f so that an image still in use is reported, not forced.
        let _ = docker_output(&["rmi", &self.reference]);
    }
}

/// Imports `rootfs` as the image `reference` (`docker import`, one layer), applying Dockerfile
/// `changes` such as `ENV K=V`, `WORKDIR /app`, `ENTRYPOINT [...]`.
pub fn import(rootfs: &Rootfs, reference: &str, changes: &[String]) -> Result<ImageGuard> {
    let mut args = vec!["import".to_string()];
    for c in changes {
        args.push("--change".into());
        args.push(c.clone());
    }
    args.push("-".into());
    args.push(reference.into());
    let mut child = Command::new(DOCKER)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {DOCKER} import"))?;
    // The guard exists before the import finishes, so a half-made image is removed too.
    let guard = ImageGuard {
        reference: reference.to_string(),
    };
    let stdin = child.stdin.take().expect("piped stdin");
    let write_result = rootfs.write_tar(std::io::BufWriter::with_capacity(1 << 20, stdin));
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "docker import {reference} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    write_result.context("writing the image's tar to docker import")?;
    Ok(guard)
}

/// Builds `dockerfile` with `context` as the build context into the image `reference`
/// (classic builder: intermediate containers removed also on failure).
pub fn build(
    dockerfile: &Path,
    context: &Path,
    reference: &str,
    build_args: &[(&str, &str)],
) -> Result<ImageGuard> {
    let guard = ImageGuard {
        reference: reference.to_string(),
    };
    let dockerfile = dockerfile.to_string_lossy().into_owned();
    let context = context.to_string_lossy().into_owned();
    let mut args: Vec<String> = vec![
        "build".into(),
        "--force-rm".into(),
        "--pull=false".into(),
        "-q".into(),
        "-f".into(),
        dockerfile,
        "-t".into(),
        reference.into(),
    ];
    for (k, v) in build_args {
        args.push("--build-arg".into());
        args.push(format!("{k}={v}"));
    }
    args.push(context);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    docker(&refs)?;
    Ok(guard)
}

/// Names of all containers (any state) whose names start with the harness's prefix.
pub fn harness_containers() -> Result<Vec<String>> {
    harness_containers_of(docker)
}

/// [`harness_containers`] as `client` lists them: `docker`, or Podman's CLI, which takes the
/// same `ps` arguments.
pub fn harness_containers_of(client: fn(&[&str]) -> Result<String>) -> Result<Vec<String>> {
    let out = client(&[
        "ps",
        "-a",
        "--filter",
        &format!("name={CONTAINER_PREFIX}"),
        "--format",
        "{{.Names}}",
    ])?;
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|n| n.starts_with(CONTAINER_PREFIX))
        .map(str::to_string)
        .collect())
}

/// References of all images in the harness's repositories.
pub fn harness_images() -> Result<Vec<String>> {
    let out = docker(&["images", "--format", "{{.Repository}}:{{.Tag}}"])?;
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|r| r.starts_with(IMAGE_REPO_PREFIX))
        .map(str::to_string)
        .collect())
}

/// What [`sweep_dead_owners`] removed.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Containers removed.
    pub containers: Vec<String>,
    /// Images removed.
    pub images: Vec<String>,
    /// Leftovers another process was removing (or had just removed) when this sweep came to
    /// them, each with the engine's words; left to it.
    pub raced: Vec<String>,
}

/// Removes containers and images left by harness runs that no longer exist. Resources of live
/// runs (this one included) and anything not named by the harness are left alone.
///
/// Sweeps of one process run one at a time (trials sweep from parallel threads); a sweep of
/// another process, or a dead run's removal still under way in the engine, can still reach a
/// leftover first: the engine's answer then says so ([`removal_raced`]) and the leftover is
/// listed in [`Sweep::raced`] instead of failing the sweep. CI saw both: `removal of container
/// ... is already in progress` and `No such image` for a leftover listed a moment before. The
/// names in that run carried the sweeping test process's own owner token while one of its
/// trials was removing them, so the process was judged dead although it ran: how is not known
/// (a failed read of its `/proc/PID/stat` is the one way the code allowed), and
/// [`Owner::is_alive`] now answers for the current process without procfs and counts a read
/// error as alive.
pub fn sweep_dead_owners() -> Result<Sweep> {
    static SWEEPING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = SWEEPING.lock().unwrap_or_else(|e| e.into_inner());
    let mut sweep = Sweep::default();
    for name in harness_containers()? {
        if Owner::of_container(&name).is_some_and(|o| !o.is_alive()) {
            match remove_leftover(&["rm", "-f", "-v", &name])? {
                None => sweep.containers.push(name),
                Some(why) => sweep.raced.push(format!("container {name}: {why}")),
            }
        }
    }
    // A dead run's image is still in use while its container is being removed elsewhere:
    // `conflict: unable to remove repository reference "X" (must force) - container Y is using
    // its referenced image Z`; left to the process removing the container, as that is.
    let containers_raced = !sweep.raced.is_empty();
    for reference in harness_images()? {
        if Owner::of_image(&reference).is_some_and(|o| !o.is_alive()) {
            match remove_leftover(&["rmi", &reference]) {
                Ok(None) => sweep.images.push(reference),
                Ok(Some(why)) => sweep.raced.push(format!("image {reference}: {why}")),
                Err(e)
                    if containers_raced
                        && format!("{e}").contains("is using its referenced image") =>
                {
                    sweep.raced.push(format!("image {reference}: {e}"))
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(sweep)
}

/// Runs the removal `docker ARGS`: `None` when it removed, the engine's words when another
/// process got there first ([`removal_raced`]), an error for any other failure.
fn remove_leftover(args: &[&str]) -> Result<Option<String>> {
    let out = docker_output(args)?;
    if out.status.success() {
        return Ok(None);
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if removal_raced(&stderr) {
        return Ok(Some(stderr));
    }
    bail!(
        "`docker {}` failed ({}): {stderr}",
        args.join(" "),
        out.status
    )
}

/// Whether the engine refused a removal because someone else is removing, or has removed, the
/// same thing (Docker 20.10's messages, seen in CI): `removal of container X is already in
/// progress`, `No such container: X`, `No such image: X`. Any other refusal is `false`.
pub fn removal_raced(engine_error: &str) -> bool {
    [
        "is already in progress",
        "No such container",
        "No such image",
    ]
    .iter()
    .any(|m| engine_error.contains(m))
}

/// Containers and images that `owner` still has (empty after a clean run).
pub fn leftovers_of(owner: Owner) -> Result<Vec<String>> {
    let mut left: Vec<String> = harness_containers()?
        .into_iter()
        .filter(|n| Owner::of_container(n) == Some(owner))
        .map(|n| format!("container {n}"))
        .collect();
    left.extend(
        harness_images()?
            .into_iter()
            .filter(|r| Owner::of_image(r) == Some(owner))
            .map(|r| format!("image {r}")),
    );
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::removal_raced;

    #[test]
    fn removals_raced_by_another_process_are_recognised() {
        // Docker 20.10's words, as CI printed them.
        for raced in [
            "Error response from daemon: removal of container nptest_harness_12503-8752588_dotnet8_echo_sidecar_sidecar is already in progress",
            "Error: No such image: netprobe-harness/dotnet8-echo-sidecar-app:12503-8752588",
            "Error: No such container: nptest_harness_1-2_x",
        ] {
            assert!(removal_raced(raced), "{raced}");
        }
        for other in [
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
            "Error response from daemon: conflict: unable to remove repository reference \"a:b\" (must force) - container 1234 is using its referenced image 5678",
            "",
        ] {
            assert!(!removal_raced(other), "{other}");
        }
    }
}
