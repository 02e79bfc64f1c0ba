//! Containers: which container a process runs in, and what the container runtimes say of it.
//!
//! Two independent sources, so that an answer never depends on one runtime's API being there:
//! - the process's cgroup (`/proc/PID/cgroup`, `cgroups(7)`): every runtime puts a container's
//!   processes in a cgroup named after the container ([`container_of_cgroup`]); this works with
//!   no runtime API at all, and inside any pid namespace;
//! - each runtime's own metadata, read from its state on disk ([`Metadata`]): Docker's
//!   `config.v2.json`, containerd's metadata database (namespaces `moby`, `k8s.io`, `default`,
//!   ...), Podman's state database. They give the name, the labels, and from the labels the
//!   kubelet sets, the Kubernetes pod ([`kubernetes`]). A runtime that is absent is skipped; one
//!   that refuses access or whose state is unreadable gives a one-line note ([`RuntimeError`]).
//!
//! Everything a runtime's state holds is treated as hostile input: a container (or whoever can
//! write a label) chooses its names and labels, so they are bounded and printed escaped.

pub mod bolt;
mod catalog;
mod cgroup;
pub mod containerd;
pub mod docker;
pub mod kubernetes;
pub mod podman;
mod state_file;

pub use catalog::{cgroup_path, display_name, read_system, Catalog, SelectError, Selection};
pub use cgroup::{container_of_cgroup, is_container_id};

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A container, as far as its cgroup path and its runtime's metadata tell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Container {
    /// The full container id (64 hex digits for Docker, containerd, CRI-O and Podman; a
    /// containerd container made with `ctr run` has the id its maker chose).
    pub id: String,
    /// The runtime whose cgroup layout or metadata named it: `docker`, `containerd`, `cri-o`,
    /// `podman`, or `unknown` when only a bare id was found.
    pub engine: &'static str,
    /// The container's name (Docker's and Podman's names; for containerd, the Kubernetes or
    /// nerdctl name label, else the id), when known.
    pub name: Option<String>,
    /// The containerd namespace (`k8s.io`, `moby`, `default`, ...), for containerd containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Kubernetes pod, from the labels the kubelet sets (see [`kubernetes::Pod`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<kubernetes::Pod>,
    /// The container's labels, as its runtime keeps them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Container {
    /// A container known by its id alone (what a cgroup path tells).
    pub fn bare(id: &str, engine: &'static str) -> Container {
        Container {
            id: id.to_string(),
            engine,
            name: None,
            namespace: None,
            pod: None,
            labels: BTreeMap::new(),
        }
    }
}

/// What one runtime's metadata says of one container.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Metadata {
    /// The container id as the runtime keeps it.
    pub id: String,
    /// `docker`, `containerd` or `podman`.
    pub runtime: &'static str,
    /// The containerd namespace; `None` for other runtimes.
    pub namespace: Option<String>,
    /// The name the runtime shows (`docker ps`/`podman ps` NAMES); `None` for containerd, whose
    /// containers have only an id.
    pub name: Option<String>,
    /// The container's labels (Docker `Config.Labels`, containerd container labels, Podman
    /// `labels`).
    pub labels: BTreeMap<String, String>,
    /// The pid (in the initial pid namespace) of the container's first process while it runs,
    /// when the runtime's state records it.
    pub init_pid: Option<u32>,
}

/// Most containers taken from one runtime's state (a node runs a few hundred; the cap keeps a
/// state directory someone filled on purpose from costing unbounded time and memory).
pub const MAX_CONTAINERS: usize = 16_384;
/// Most labels kept per container, and the longest key and value kept (Kubernetes caps keys at
/// 317 bytes and values at 63; Docker and Podman do not cap them, so a label over these is
/// dropped, not cut).
pub const MAX_LABELS: usize = 256;
pub const MAX_LABEL_KEY: usize = 512;
pub const MAX_LABEL_VALUE: usize = 4096;

/// The labels among `pairs` within [`MAX_LABELS`], [`MAX_LABEL_KEY`] and [`MAX_LABEL_VALUE`].
pub fn labels_from<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .filter(|(k, v)| !k.is_empty() && k.len() <= MAX_LABEL_KEY && v.len() <= MAX_LABEL_VALUE)
        .take(MAX_LABELS)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Why a runtime's metadata could not be read. [`RuntimeError::Absent`] is no error to the
/// user (the runtime is not installed or has never run); the others become one-line notes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeError {
    #[error("{runtime}: no state at {}", .path.display())]
    Absent {
        runtime: &'static str,
        path: PathBuf,
    },
    #[error("{runtime}: cannot read {} ({why}): run netprobe as root, or name the process with -p PID", .path.display())]
    Refused {
        runtime: &'static str,
        path: PathBuf,
        why: String,
    },
    #[error("{runtime}: {} is not what {runtime} writes ({why}); its containers are shown by id only", .path.display())]
    Unreadable {
        runtime: &'static str,
        path: PathBuf,
        why: String,
    },
}

impl RuntimeError {
    /// The runtime whose state it is.
    pub fn runtime(&self) -> &'static str {
        match self {
            RuntimeError::Absent { runtime, .. }
            | RuntimeError::Refused { runtime, .. }
            | RuntimeError::Unreadable { runtime, .. } => runtime,
        }
    }

    /// The error an I/O failure on `path` of `runtime`'s state is: absent, refused or unreadable.
    pub fn of_io(
        runtime: &'static str,
        path: &std::path::Path,
        e: &std::io::Error,
    ) -> RuntimeError {
        let path = path.to_path_buf();
        match e.kind() {
            std::io::ErrorKind::NotFound => RuntimeError::Absent { runtime, path },
            std::io::ErrorKind::PermissionDenied => RuntimeError::Refused {
                runtime,
                path,
                why: e.to_string(),
            },
            _ => RuntimeError::Unreadable {
                runtime,
                path,
                why: e.to_string(),
            },
        }
    }
}
