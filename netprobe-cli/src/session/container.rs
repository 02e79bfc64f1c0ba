//! Containers as a session's target (`--container`, `--pod`, `--selector`): their processes,
//! from the catalog of every runtime's containers (`netprobe_core::containers`), with the Docker
//! Engine API as a second source for `--container` (it knows Docker's containers when Docker's
//! state on disk is not readable, e.g. from a sidecar given only the socket), and how netprobe
//! names them on stderr.

use crate::error::{Error, Result};
use netprobe_core::containers::{Container, SelectError, Selection};
use netprobe_core::ipc::docker::{ContainerError, ContainerInfo};

/// The processes of the containers `selection` chooses, said on stderr.
pub fn container_pids(selection: &Selection) -> Result<Vec<u32>> {
    container_processes(selection).map(|(_, pids)| pids)
}

/// The processes of the containers `selection` chooses, said on stderr, and for a Docker
/// container what the engine says of it (a session can follow it through restarts).
pub(crate) fn container_processes(
    selection: &Selection,
) -> Result<(Option<ContainerInfo>, Vec<u32>)> {
    let global = netprobe_core::pid_namespace::sees_global_pids();
    let catalog = netprobe_core::containers::read_system(global);
    for note in catalog.notes() {
        crate::printable::eprint_line(note);
    }
    let found = catalog.select_processes(std::path::Path::new("/proc"), selection);
    let found = match (found, selection) {
        (Ok(found), _) => without_netprobe(found),
        // Docker's API may know what its state on disk did not tell (unreadable to netprobe).
        (Err(e @ SelectError::NoSuchContainer { .. }), Selection::Container(name)) => {
            return from_docker_api(name, e, catalog.entries().is_empty())
        }
        // The engine says why a Docker container has no process (`created`, `exited`) and how
        // to start it.
        (
            Err(e @ (SelectError::NotRunning { .. } | SelectError::NoVisibleProcess { .. })),
            Selection::Container(name),
        ) if docker_chosen(&catalog, selection) => return from_docker_api(name, e, false),
        (Err(e), _) => return Err(Error::usage(e.to_string())),
    };
    if found.is_empty() {
        return Err(Error::usage(format!(
            "{selection}: its only processes are netprobe's own: choose the application's container"
        )));
    }
    crate::sinks::places::remember_targets(&found);
    let mut pids: Vec<u32> = found.iter().map(|(p, _)| *p).collect();
    pids.dedup();
    let mut said: Vec<(&Container, Vec<u32>)> = Vec::new();
    for (pid, c) in &found {
        match said.iter_mut().find(|(k, _)| k.id == c.id) {
            Some((_, p)) => p.push(*pid),
            None => said.push((c, vec![*pid])),
        }
    }
    for (c, p) in &said {
        crate::printable::eprint_line(&format!("netprobe: {}: pid {}", describe(c), join_pids(p)));
    }
    // A Docker container chosen by name can be followed through restarts (the Engine API
    // says when its new processes run).
    let docker = match (selection, &said[..]) {
        (Selection::Container(_), [(c, p)]) if c.engine == "docker" => Some(ContainerInfo {
            id: c.id.clone(),
            name: c
                .name
                .clone()
                .unwrap_or_else(|| short_id(&c.id).to_string()),
            running: true,
            status: "running".into(),
            pid: p[0],
        }),
        _ => None,
    };
    Ok((docker, pids))
}

/// `found` without netprobe's own processes (this one and its watchdog, which run netprobe's
/// executable): a sidecar selecting its own pod, or a container netprobe runs in, must not
/// have netprobe probe itself.
fn without_netprobe(found: Vec<(u32, Container)>) -> Vec<(u32, Container)> {
    let me = std::fs::metadata("/proc/self/exe").ok();
    let same_file = |pid: u32| {
        let Some(me) = &me else { return false };
        std::fs::metadata(format!("/proc/{pid}/exe")).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.dev() == me.dev() && m.ino() == me.ino()
        })
    };
    found
        .into_iter()
        .filter(|(pid, _)| *pid != std::process::id() && !same_file(*pid))
        .collect()
}

/// Whether `selection` chooses one container, and Docker's.
fn docker_chosen(catalog: &netprobe_core::containers::Catalog, selection: &Selection) -> bool {
    matches!(catalog.select(selection).as_deref(), Ok([i]) if catalog.entries()[*i].runtime == "docker")
}

/// `--container NAME` that no runtime's state names: asked of the Docker Engine API. When that
/// has no socket either, the catalog's error stands, unless there was no state to look in.
fn from_docker_api(
    name: &str,
    not_in_catalog: SelectError,
    catalog_empty: bool,
) -> Result<(Option<ContainerInfo>, Vec<u32>)> {
    match netprobe_core::ipc::docker::container_processes(
        &netprobe_core::ipc::docker::socket_path(),
        name,
        netprobe_core::pid_namespace::sees_global_pids(),
    ) {
        Ok((info, pids)) => {
            crate::printable::eprint_line(&format!(
                "netprobe: container {} ({}): pid {}",
                info.name,
                short_id(&info.id),
                join_pids(&pids)
            ));
            Ok((Some(info), pids))
        }
        Err(ContainerError::NoSocket { socket, .. }) if !catalog_empty => {
            Err(Error::usage(format!(
                "{not_in_catalog}; no Docker socket at {} to ask either",
                socket.display()
            )))
        }
        Err(e) => Err(Error::usage(e.to_string())),
    }
}

/// How netprobe names a container on stderr: `container NAME (ID)`, with its runtime when it is
/// not Docker, its containerd namespace and its pod.
pub fn describe(c: &Container) -> String {
    let mut s = format!(
        "container {} ({})",
        c.name.as_deref().unwrap_or(short_id(&c.id)),
        short_id(&c.id)
    );
    if c.engine != "docker" {
        s.push_str(&format!(", {}", c.engine));
        if let Some(ns) = &c.namespace {
            s.push_str(&format!(" namespace {ns}"));
        }
    }
    if let Some(p) = &c.pod {
        s.push_str(&format!(", pod {}/{}", p.namespace, p.name));
    }
    s
}

/// A container id as `docker ps` shows it (12 hex digits).
pub fn short_id(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Pids as netprobe lists them: `1,2,3`.
pub fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
