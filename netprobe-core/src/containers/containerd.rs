//! containerd's containers from its state on disk, every namespace (`k8s.io` of the kubelet,
//! `moby` of Docker, `default` of `ctr`/nerdctl, ...), without its API.
//!
//! - The metadata database, `ROOT/io.containerd.metadata.v1.bolt/meta.db` (BoltDB, read with
//!   [`super::bolt`]), schema of containerd `core/metadata/buckets.go`:
//!   `v1/<namespace>/containers/<id>/labels/<key> = <value>` (beside `image`, `runtime`,
//!   `spec`, ...; `v1/version` is a plain value, not a namespace).
//! - The running task's first process, `STATE/io.containerd.runtime.v2.task/<ns>/<id>/init.pid`:
//!   the runc shim v2 keeps its bundle there and runc writes the pid to it (containerd
//!   `cmd/containerd-shim-runc-v2/process/utils.go`, `InitPidFile`); the
//!   bundle exists from task create to task delete, so the pid may be of a task that exited
//!   and was not deleted yet (the caller confirms it by the process's cgroup).
//!
//! containerd containers have ids only: [`Metadata::name`] is `None`, names come from labels.

use super::bolt::{BoltError, Bucket, Db, Value};
use super::{labels_from, state_file, Metadata, RuntimeError, MAX_CONTAINERS, MAX_LABELS};
use std::path::Path;

/// The (root, state) directory pairs containerd runs with by default: the system daemon
/// (`containerd --root/--state` defaults, containerd `defaults/defaults_unix.go`), and the one
/// dockerd starts for itself when no system containerd answers, under Docker's data root and
/// exec root (moby `cmd/dockerd/daemon.go`: `containerd/daemon` under each; its containers are
/// in namespace `moby`).
pub const DEFAULT_DIRS: &[(&str, &str)] = &[
    ("/var/lib/containerd", "/run/containerd"),
    (
        "/var/lib/docker/containerd/daemon",
        "/run/docker/containerd/daemon",
    ),
];

/// The metadata database under containerd's root.
pub const META_DB: &str = "io.containerd.metadata.v1.bolt/meta.db";

/// Most namespaces read (a node has a handful: `k8s.io`, `moby`, `default`, a few of nerdctl's);
/// bounds the work a database made hostile can cost.
const MAX_NAMESPACES: usize = 4096;
/// Most label entries looked at per container, valid or not (four times [`MAX_LABELS`]: a bucket
/// of overlong labels costs no more than that to skip).
const MAX_LABEL_ENTRIES: usize = 4 * MAX_LABELS;

/// Every container in every namespace of the containerd whose root is `root` and state `state`:
/// id, namespace, labels, and the running task's first process. Absent database:
/// [`RuntimeError::Absent`]; not readable by us: [`RuntimeError::Refused`]; not a containerd
/// database: [`RuntimeError::Unreadable`].
pub fn containers(root: &Path, state: &Path) -> Result<Vec<Metadata>, RuntimeError> {
    let path = root.join(META_DB);
    let bytes = state_file::map("containerd", &path)?;
    let mut found = state_file::read_db("containerd", &path, &bytes, containers_in_db)?;
    let tasks = state.join("io.containerd.runtime.v2.task");
    for m in &mut found {
        let Some(ns) = m.namespace.as_deref() else {
            continue;
        };
        if is_identifier(ns) && is_identifier(&m.id) {
            m.init_pid = state_file::read_pid(&tasks.join(ns).join(&m.id).join("init.pid"));
        }
    }
    Ok(found)
}

/// The containers a containerd metadata database holds (no pids: those are in the state
/// directory), at most [`MAX_CONTAINERS`] over all namespaces. A namespace or id that is not
/// UTF-8 is skipped (containerd's identifiers are ASCII); a label that is not UTF-8 or over the
/// caps is left out ([`labels_from`]).
pub fn containers_in_db(db: &Db) -> Result<Vec<Metadata>, BoltError> {
    let mut out = Vec::new();
    let Some(v1) = db.bucket(&[b"v1"])? else {
        return Ok(out);
    };
    for ns in v1.entries().take(MAX_NAMESPACES) {
        let ns = ns?;
        let (Value::Bucket(ns_bucket), Ok(namespace)) = (ns.value, std::str::from_utf8(ns.key))
        else {
            continue;
        };
        let Some(containers) = ns_bucket.bucket(b"containers")? else {
            continue;
        };
        for c in containers.entries() {
            if out.len() >= MAX_CONTAINERS {
                return Ok(out);
            }
            let c = c?;
            let (Value::Bucket(bucket), Ok(id)) = (c.value, std::str::from_utf8(c.key)) else {
                continue;
            };
            out.push(Metadata {
                id: id.to_string(),
                runtime: "containerd",
                namespace: Some(namespace.to_string()),
                name: None,
                labels: labels(&bucket)?,
                init_pid: None,
            });
        }
    }
    Ok(out)
}

/// The `labels` bucket of a container's bucket.
fn labels(container: &Bucket) -> Result<std::collections::BTreeMap<String, String>, BoltError> {
    let Some(labels) = container.bucket(b"labels")? else {
        return Ok(Default::default());
    };
    let mut pairs = Vec::new();
    for e in labels.entries().take(MAX_LABEL_ENTRIES) {
        let e = e?;
        if let (Value::Data(v), Ok(k)) = (e.value, std::str::from_utf8(e.key)) {
            if let Ok(v) = std::str::from_utf8(v) {
                pairs.push((k, v));
            }
        }
    }
    Ok(labels_from(pairs))
}

/// containerd's identifier rule for namespaces and container ids (containerd
/// `pkg/identifiers/validate.go`: `^[A-Za-z0-9]+(?:[._-](?:[A-Za-z0-9]+))*$`, at most 76
/// characters), checked before either becomes a path component.
fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 76
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        && !b
            .windows(2)
            .any(|w| !w[0].is_ascii_alphanumeric() && !w[1].is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::bolt::tests::recorded;

    /// What `ctr` printed for the state of `fixtures/recorded/containers/containerd-1.6.20-meta.db.gz`
    /// (a standalone containerd 1.6.20, `ctr run --rootfs` and `ctr containers create`):
    /// `ctr -n NS containers ls` and the `Labels` of `ctr -n NS containers info ID`, and
    /// `ctr -n NS tasks ls` for the pids:
    ///
    /// ```text
    /// k8s.io web-api {app: checkout, io.kubernetes.container.name: api,
    ///                 io.kubernetes.pod.name: checkout-7d4, io.kubernetes.pod.namespace: shop} pid=31413
    /// k8s.io web-sidecar {io.kubernetes.container.name: sidecar, io.kubernetes.pod.name: checkout-7d4,
    ///                     io.kubernetes.pod.namespace: shop} pid=31490
    /// moby 3f4e1b2c…a3b2c {com.example.role: cache} pid=31549
    /// default never-started {stopped: yes} (no task)
    /// ```
    /// Namespace, id, labels, pid.
    type Seen = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
        Option<u32>,
    );
    const CTR_SAW: [Seen; 4] = [
        ("default", "never-started", &[("stopped", "yes")], None),
        (
            "k8s.io",
            "web-api",
            &[
                ("app", "checkout"),
                ("io.kubernetes.container.name", "api"),
                ("io.kubernetes.pod.name", "checkout-7d4"),
                ("io.kubernetes.pod.namespace", "shop"),
            ],
            Some(31413),
        ),
        (
            "k8s.io",
            "web-sidecar",
            &[
                ("io.kubernetes.container.name", "sidecar"),
                ("io.kubernetes.pod.name", "checkout-7d4"),
                ("io.kubernetes.pod.namespace", "shop"),
            ],
            Some(31490),
        ),
        (
            "moby",
            "3f4e1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
            &[("com.example.role", "cache")],
            Some(31549),
        ),
    ];

    /// A containerd root holding the recorded database and a state directory with the init.pid
    /// files the shims wrote (as they wrote them: digits, no newline).
    fn recorded_dirs() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("root").join(META_DB);
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        std::fs::write(&db, recorded("containerd-1.6.20-meta.db.gz")).unwrap();
        for (ns, id, _, pid) in CTR_SAW {
            if let Some(pid) = pid {
                let bundle = dir
                    .path()
                    .join("state/io.containerd.runtime.v2.task")
                    .join(ns)
                    .join(id);
                std::fs::create_dir_all(&bundle).unwrap();
                std::fs::write(bundle.join("init.pid"), pid.to_string()).unwrap();
            }
        }
        dir
    }

    #[test]
    fn every_namespace_as_ctr_lists_it() {
        let dir = recorded_dirs();
        let found = containers(&dir.path().join("root"), &dir.path().join("state")).unwrap();
        let got: Vec<_> = found
            .iter()
            .map(|m| {
                let labels: Vec<_> = m
                    .labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                (
                    m.namespace.clone().unwrap(),
                    m.id.clone(),
                    labels,
                    m.init_pid,
                    m.name.clone(),
                    m.runtime,
                )
            })
            .collect();
        let want: Vec<_> = CTR_SAW
            .iter()
            .map(|(ns, id, labels, pid)| {
                (
                    ns.to_string(),
                    id.to_string(),
                    labels.to_vec(),
                    *pid,
                    None,
                    "containerd",
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn two_hundred_containers_and_the_cap() {
        let file = recorded("containerd-1.6.20-meta-many.db.gz");
        let db = Db::open(&file).unwrap();
        let found = containers_in_db(&db).unwrap();
        assert_eq!(
            found
                .iter()
                .filter(|m| m.namespace.as_deref() == Some("many"))
                .count(),
            200
        );
        let c7 = found.iter().find(|m| m.id == "c007").unwrap();
        assert_eq!(c7.labels["idx"], "007");
    }

    #[test]
    fn no_containerd_a_stale_pid_file_and_a_hostile_id() {
        let e = containers(
            Path::new("/nonexistent/containerd"),
            Path::new("/nonexistent/run"),
        )
        .unwrap_err();
        assert!(matches!(e, RuntimeError::Absent { .. }), "{e}");
        let dir = recorded_dirs();
        let bundle = dir
            .path()
            .join("state/io.containerd.runtime.v2.task/k8s.io/web-api");
        std::fs::write(bundle.join("init.pid"), "31413\nrubbish").unwrap();
        let found = containers(&dir.path().join("root"), &dir.path().join("state")).unwrap();
        assert_eq!(
            found.iter().find(|m| m.id == "web-api").unwrap().init_pid,
            None
        );
        for bad in ["", "..", ".", "a/b", "a..b", "-a", "a-", &"x".repeat(77)] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
        for good in ["k8s.io", "moby", "web-api", "a_b.c-d", "3f4e1b2c"] {
            assert!(is_identifier(good), "{good:?}");
        }
    }

    #[test]
    fn a_file_that_is_not_bolt_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(META_DB);
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        std::fs::write(&db, vec![7u8; 8192]).unwrap();
        let e = containers(dir.path(), dir.path()).unwrap_err();
        assert!(matches!(e, RuntimeError::Unreadable { .. }), "{e}");
        assert!(e.to_string().contains("not a BoltDB file"), "{e}");
    }
}
