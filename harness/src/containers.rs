//! The Docker scenario (a perf sidecar by hand was `docker run --pid=container:ID --privileged`;
//! on Kubernetes, a sidecar in a pod with `shareProcessNamespace: true`): an app container, and a netprobe sidecar joined to its PID namespace,
//! started with testcontainers 0.28 against the local engine.
//!
//! The sidecar asks for `--privileged` as the user asked. Where the engine refuses it (this VM:
//! the capability bounding set lacks CAP_SYS_RESOURCE, so runc cannot apply "all caps"), it says
//! so and falls back to [`MINIMAL_CAPS`] plus unconfined seccomp/AppArmor, which is enough to
//! mount tracefs and place uprobes (capabilities(7): CAP_SYS_ADMIN for mount and perf events).

use crate::docker::{docker, docker_output, ContainerGuard, ImageGuard};
use crate::owner::Owner;
use anyhow::{bail, Context, Result};
use std::process::Output;
use std::time::{Duration, Instant};
use testcontainers::core::WaitFor;
use testcontainers::runners::SyncRunner;
use testcontainers::{Container, GenericImage, ImageExt};

/// The capabilities the sidecar needs when `--privileged` is refused: SYS_ADMIN (mount tracefs,
/// write uprobe_events, perf_event_open) and SYS_PTRACE (read another container's
/// `/proc/PID/root`, `/proc/PID/maps`, `/proc/PID/environ`).
pub const MINIMAL_CAPS: &[&str] = &["SYS_ADMIN", "SYS_PTRACE"];
/// Security options that go with [`MINIMAL_CAPS`]: the default seccomp profile blocks mount(2)
/// and perf_event_open(2); AppArmor's docker-default profile blocks mounts.
pub const SECURITY_OPTS: &[&str] = &["seccomp=unconfined", "apparmor=unconfined"];

/// How the sidecar ended up running.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Privilege {
    /// `--privileged` worked.
    Privileged,
    /// The engine refused `--privileged`; the minimal set is in use. Holds the engine's reason.
    MinimalCaps {
        /// Why `--privileged` failed.
        refused: String,
    },
}

/// A running container: testcontainers' handle (removes it on drop) and a name guard (removes a
/// Created leftover of a failed start, and anything under the name, on drop).
pub struct Running {
    /// testcontainers' handle; dropped first.
    pub container: Container<GenericImage>,
    guard: ContainerGuard,
}

impl Running {
    /// The container's id.
    pub fn id(&self) -> &str {
        self.container.id()
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// `docker exec NAME ARGS`, whole output whatever the exit status.
    pub fn exec(&self, args: &[&str]) -> Result<Output> {
        let mut all = vec!["exec", self.name()];
        all.extend_from_slice(args);
        docker_output(&all)
    }

    /// `docker exec` that must succeed; returns stdout.
    pub fn exec_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.exec(args)?;
        if !out.status.success() {
            bail!(
                "`{}` in {} failed ({}): {}{}",
                args.join(" "),
                self.name(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The pid of the container's first process as the host sees it.
    pub fn host_pid(&self) -> Result<u32> {
        let pid = docker(&["inspect", "-f", "{{.State.Pid}}", self.name()])?;
        pid.trim()
            .parse()
            .with_context(|| format!("docker inspect gave pid {pid:?}"))
    }

    /// Everything the container printed so far (stdout, then stderr).
    pub fn logs(&self) -> String {
        match docker_output(&["logs", self.name()]) {
            Ok(o) => format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("(no logs: {e})"),
        }
    }

    /// Waits until the container's stdout holds `text`.
    pub fn wait_for_output(&self, text: &str, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let logs = self.logs();
            if logs.contains(text) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} never printed {text:?} within {} s; it printed: {logs}",
                    self.name(),
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What an app container runs.
pub struct AppLaunch<'a> {
    /// Role in names (`fixture_app`, `dotnet8_app`): unique per test.
    pub role: &'a str,
    /// The image.
    pub image: &'a ImageGuard,
    /// argv (the image has no entrypoint of its own).
    pub argv: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Text on stdout that says the app is ready (waited for by testcontainers).
    pub ready_stdout: Option<String>,
}

/// Starts an app container on the host's network (its HTTP port is reachable on 127.0.0.1
/// without publishing, and the test never talks to a bridge address).
pub fn start_app(owner: Owner, app: AppLaunch<'_>) -> Result<Running> {
    let name = owner.container_name(app.role);
    let guard = ContainerGuard::new(name.clone());
    let mut image = GenericImage::new(app.image.repository(), app.image.tag());
    let (first, rest) = app.argv.split_first().context("empty argv")?;
    image = image.with_entrypoint(first);
    if let Some(text) = &app.ready_stdout {
        image = image.with_wait_for(WaitFor::message_on_stdout(text.clone()));
    }
    let mut request = image
        .with_cmd(rest.to_vec())
        .with_container_name(name.clone())
        .with_network("host")
        .with_startup_timeout(Duration::from_secs(60));
    for (k, v) in &app.env {
        request = request.with_env_var(k.clone(), v.clone());
    }
    let container = request
        .start()
        .with_context(|| format!("starting app container {name}"))?;
    Ok(Running { container, guard })
}

/// Starts the netprobe sidecar in `app`'s PID namespace (`--pid=container:ID`), privileged when
/// the engine allows it, else with [`MINIMAL_CAPS`] (printing a NOTE that says why).
pub fn start_sidecar(
    owner: Owner,
    role: &str,
    image: &ImageGuard,
    app: &Running,
) -> Result<(Running, Privilege)> {
    let name = owner.container_name(role);
    let pid_mode = format!("container:{}", app.id());
    let base = || {
        let pid_mode = pid_mode.clone();
        GenericImage::new(image.repository(), image.tag())
            .with_container_name(name.clone())
            .with_network("host")
            .with_startup_timeout(Duration::from_secs(60))
            .with_host_config_modifier(move |hc| {
                hc.pid_mode = Some(pid_mode.clone());
            })
    };
    let guard = ContainerGuard::new(name.clone());
    let refused = match base().with_privileged(true).start() {
        Ok(container) => return Ok((Running { container, guard }, Privilege::Privileged)),
        Err(e) => e.to_string(),
    };
    // A refused start leaves a Created container under the name: remove it before retrying.
    let _ = docker_output(&["rm", "-f", "-v", &name]);
    eprintln!(
        "NOTE: the Docker engine refused --privileged for the sidecar ({}); using the minimal set instead: {} {}",
        refused.lines().next().unwrap_or("").trim(),
        MINIMAL_CAPS.iter().map(|c| format!("--cap-add {c}")).collect::<Vec<_>>().join(" "),
        SECURITY_OPTS.iter().map(|o| format!("--security-opt {o}")).collect::<Vec<_>>().join(" "),
    );
    let mut request = base();
    for cap in MINIMAL_CAPS {
        request = request.with_cap_add(*cap);
    }
    for opt in SECURITY_OPTS {
        request = request.with_security_opt(*opt);
    }
    let container = request
        .start()
        .with_context(|| format!("starting sidecar {name} with the minimal capability set"))?;
    Ok((
        Running { container, guard },
        Privilege::MinimalCaps { refused },
    ))
}

/// A free TCP port on 127.0.0.1 (bound and released; the app binds it right after).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// `GET path` on 127.0.0.1:`port` (HTTP/1.1, `Connection: close`); returns (status, body).
pub fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("not an HTTP response: {text:?}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Waits until `GET path` on `port` answers 200.
pub fn wait_http(port: u16, path: &str, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match http_get(port, path) {
            Ok((200, _)) => return Ok(()),
            other if Instant::now() >= deadline => {
                bail!(
                    "127.0.0.1:{port}{path} not ready within {} s: {other:?}",
                    limit.as_secs()
                )
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}
