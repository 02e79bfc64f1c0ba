//! Podman 4's containers from its state on disk (rootful Podman), without its API.
//!
//! - The state database, `GRAPH_ROOT/libpod/bolt_state.db` (BoltDB, read with [`super::bolt`]),
//!   buckets of libpod `libpod/boltdb_state_internal.go` (v4.3.1): `ctr/<id>/config` holds the
//!   container's configuration as JSON (`ContainerConfig` in `libpod/container_config.go`:
//!   `id`, `name`, `labels`), `ctr/<id>/state` its state (`ContainerState` in
//!   `libpod/container.go`: `state`, a `define.ContainerStatus` where 3 is running and 5 paused,
//!   and `pid`).
//! - Names also from containers/storage's `GRAPH_ROOT/overlay-containers/containers.json`
//!   (`names`), for a container whose configuration lacks one.
//! - The run root (`/run/containers/storage`, a tmpfs): the OCI runtime's pid file
//!   `RUN_ROOT/overlay-containers/<id>/userdata/pidfile` (libpod passes it as `--pid-file`).
//!   The database outlives a reboot and then still says "running" until Podman next runs; the
//!   pid file does not, so a state's pid is kept only when the pid file is there and agrees.
//!
//! Not read: Podman 5's default SQLite state (`db.sql` in the same directory; the error says
//! so, with the fix), and rootless Podman (each user's
//! `~/.local/share/containers/storage`, with its own pid namespace view), whose containers are
//! still found by their cgroups.

use super::bolt::{BoltError, Db, Value};
use super::{is_container_id, state_file, Metadata, RuntimeError, MAX_CONTAINERS, MAX_LABEL_KEY};
use std::collections::BTreeMap;
use std::path::Path;

/// Rootful Podman's default graph root and run root (containers/storage `storage.conf`).
pub const DEFAULT_GRAPH_ROOT: &str = "/var/lib/containers/storage";
pub const DEFAULT_RUN_ROOT: &str = "/run/containers/storage";

/// The state database under the graph root (libpod's static dir, `GRAPH_ROOT/libpod`).
pub const BOLT_STATE: &str = "libpod/bolt_state.db";
/// Podman 5's default state database, which is SQLite (libpod `sqlite_state.go`).
const SQLITE_STATE: &str = "libpod/db.sql";
/// The largest `config` or `state` JSON parsed: Podman's are a few KiB (the OCI spec is the
/// bulk); this bounds what one hostile value costs to parse.
const MAX_JSON: usize = 4 << 20;
/// The largest `containers.json` read (one ~500-byte record per container of storage).
const CONTAINERS_JSON_CAP: u64 = 64 << 20;
/// `define.ContainerStateRunning` and `ContainerStatePaused` (libpod `define/containerstate.go`).
const RUNNING: u64 = 3;
const PAUSED: u64 = 5;

/// Every container of the Podman whose graph root is `graph_root` and run root `run_root`: id,
/// name, labels and, while it runs, its first process. Absent database: [`RuntimeError::Absent`]
/// (or [`RuntimeError::Unreadable`] when only Podman 5's SQLite one is there); not readable by
/// us: [`RuntimeError::Refused`]; not a Podman database: [`RuntimeError::Unreadable`]. A
/// container whose JSON does not parse is left out (as Podman itself leaves it out).
pub fn containers(graph_root: &Path, run_root: &Path) -> Result<Vec<Metadata>, RuntimeError> {
    let path = graph_root.join(BOLT_STATE);
    let bytes = match state_file::map("podman", &path) {
        Err(RuntimeError::Absent { .. }) if graph_root.join(SQLITE_STATE).exists() => {
            return Err(RuntimeError::Unreadable {
                runtime: "podman",
                path: graph_root.join(SQLITE_STATE),
                why: "Podman 5's SQLite state is not read: run podman with --db-backend boltdb, or name the process with -p PID".into(),
            })
        }
        other => other?,
    };
    let mut found = state_file::read_db("podman", &path, &bytes, containers_in_db)?;
    if found.iter().any(|m| m.name.is_none()) {
        let names = storage_names(graph_root);
        for m in found.iter_mut().filter(|m| m.name.is_none()) {
            m.name = names.get(&m.id).cloned();
        }
    }
    for m in &mut found {
        let pidfile = run_root
            .join("overlay-containers")
            .join(&m.id)
            .join("userdata/pidfile");
        if m.init_pid.is_some() && state_file::read_pid(&pidfile) != m.init_pid {
            m.init_pid = None;
        }
    }
    Ok(found)
}

/// The containers a Podman 4 state database holds, their pid as the state records it (not yet
/// checked against the run root), at most [`MAX_CONTAINERS`]. Only ids of 64 hex digits are
/// taken (Podman's; they become path components).
pub fn containers_in_db(db: &Db) -> Result<Vec<Metadata>, BoltError> {
    let mut out = Vec::new();
    let Some(ctrs) = db.bucket(&[b"ctr"])? else {
        return Ok(out);
    };
    for c in ctrs.entries() {
        if out.len() >= MAX_CONTAINERS {
            break;
        }
        let c = c?;
        let (Value::Bucket(bucket), Ok(id)) = (c.value, std::str::from_utf8(c.key)) else {
            continue;
        };
        if !is_container_id(id) {
            continue;
        }
        let Some(config) = bucket.value(b"config")?.and_then(json) else {
            continue;
        };
        if config["id"].as_str().is_some_and(|i| i != id) {
            continue;
        }
        let state = bucket.value(b"state")?.and_then(json);
        let init_pid = state.and_then(|s| {
            let live = matches!(s["state"].as_u64(), Some(RUNNING | PAUSED));
            let pid = s["pid"].as_u64().and_then(|p| u32::try_from(p).ok());
            pid.filter(|&p| live && p != 0)
        });
        let labels = state_file::labels_in_json(&config["labels"]);
        out.push(Metadata {
            id: id.to_string(),
            runtime: "podman",
            namespace: None,
            name: config["name"].as_str().and_then(name),
            labels,
            init_pid,
        });
    }
    Ok(out)
}

/// A container name as kept: not empty, at most [`MAX_LABEL_KEY`] bytes (Podman's names are
/// `[a-zA-Z0-9][a-zA-Z0-9_.-]*`; a longer one was not written by Podman and is dropped).
fn name(n: &str) -> Option<String> {
    (!n.is_empty() && n.len() <= MAX_LABEL_KEY).then(|| n.to_string())
}

fn json(bytes: &[u8]) -> Option<serde_json::Value> {
    (bytes.len() <= MAX_JSON)
        .then(|| serde_json::from_slice(bytes).ok())
        .flatten()
}

/// Container id to first name, from containers/storage's `containers.json` (overlay driver,
/// then vfs); empty when unreadable.
fn storage_names(graph_root: &Path) -> BTreeMap<String, String> {
    ["overlay-containers", "vfs-containers"]
        .iter()
        .find_map(|dir| {
            let path = graph_root.join(dir).join("containers.json");
            crate::regular_file::read_capped(&path, CONTAINERS_JSON_CAP, "containers.json").ok()
        })
        .map(|bytes| names_in_storage(&bytes))
        .unwrap_or_default()
}

/// [`storage_names`]'s parse: `[{"id": ..., "names": [...]}, ...]` (containers/storage
/// `containers.go`, `Container`), at most [`MAX_CONTAINERS`] records.
pub fn names_in_storage(bytes: &[u8]) -> BTreeMap<String, String> {
    let Ok(serde_json::Value::Array(records)) = serde_json::from_slice(bytes) else {
        return BTreeMap::new();
    };
    records
        .iter()
        .take(MAX_CONTAINERS)
        .filter_map(|r| {
            let id = r["id"].as_str().filter(|i| is_container_id(i))?;
            Some((id.to_string(), name(r["names"].get(0)?.as_str()?)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::bolt::tests::recorded;

    /// Id, name, labels, pid.
    type Row<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Option<u32>);

    const WEB: &str = "3eaa02b28103c43452c5292903c126021654e6739899903993311f3fb56cf1a5";
    const WORKER: &str = "6e8bd06d514f46b4897370c7f74dc278348ccc685a28abb6dc5ac6dae046dabf";
    const IDLE: &str = "f398714a9115f7b7ad90f0d7f85cdebe45c9b1c925de2948018efd282f3e0eba";

    /// What Podman 4.3.1 printed for the state of `fixtures/recorded/containers/podman-4.3.1-*`
    /// (`podman ps -a --format json`: Id, Names, State, Pid, Labels; `podman inspect` agreed):
    ///
    /// ```text
    /// f398714a…3e0eba ['idle']   created 0    None
    /// 3eaa02b2…56cf1a5 ['web']    running 1791 {app: checkout, io.kubernetes.pod.name: checkout-7d4}
    /// 6e8bd06d…046dabf ['worker'] running 1822 {tier: back}
    /// ```
    fn podman_saw() -> Vec<Row<'static>> {
        vec![
            (
                WEB,
                "web",
                vec![
                    ("app", "checkout"),
                    ("io.kubernetes.pod.name", "checkout-7d4"),
                ],
                Some(1791),
            ),
            (WORKER, "worker", vec![("tier", "back")], Some(1822)),
            (IDLE, "idle", vec![], None),
        ]
    }

    /// A graph root with the recorded database and `containers.json`, and a run root with the
    /// pid files runc wrote for the running two (digits, no newline).
    fn recorded_roots() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("graph").join(BOLT_STATE);
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        std::fs::write(&db, recorded("podman-4.3.1-bolt_state.db.gz")).unwrap();
        for (id, pid) in [(WEB, 1791), (WORKER, 1822)] {
            let userdata = dir
                .path()
                .join("run/overlay-containers")
                .join(id)
                .join("userdata");
            std::fs::create_dir_all(&userdata).unwrap();
            std::fs::write(userdata.join("pidfile"), pid.to_string()).unwrap();
        }
        dir
    }

    fn summary(found: &[Metadata]) -> Vec<Row<'_>> {
        let mut got: Vec<_> = found
            .iter()
            .map(|m| {
                let labels = m
                    .labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                (
                    m.id.as_str(),
                    m.name.as_deref().unwrap_or("?"),
                    labels,
                    m.init_pid,
                )
            })
            .collect();
        got.sort_by_key(|g| g.1 == "idle");
        got
    }

    #[test]
    fn every_container_as_podman_ps_lists_it() {
        let dir = recorded_roots();
        let found = containers(&dir.path().join("graph"), &dir.path().join("run")).unwrap();
        assert!(found
            .iter()
            .all(|m| m.runtime == "podman" && m.namespace.is_none()));
        assert_eq!(summary(&found), podman_saw());
    }

    #[test]
    fn a_state_from_before_a_reboot_gives_no_pid() {
        let dir = recorded_roots();
        std::fs::remove_dir_all(dir.path().join("run")).unwrap();
        let found = containers(&dir.path().join("graph"), &dir.path().join("run")).unwrap();
        assert!(found.iter().all(|m| m.init_pid.is_none()));
        assert_eq!(found.iter().filter(|m| m.name.is_some()).count(), 3);
    }

    #[test]
    fn names_from_storage_when_the_config_has_none() {
        let bytes = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../fixtures/recorded/containers/podman-4.3.1-containers.json"),
        )
        .unwrap();
        let names = names_in_storage(&bytes);
        assert_eq!(names.get(WEB).map(String::as_str), Some("web"));
        assert_eq!(names.get(IDLE).map(String::as_str), Some("idle"));
        assert_eq!(names.len(), 3);
        assert!(names_in_storage(b"{").is_empty());
        assert!(names_in_storage(br#"[{"id":"../x","names":["evil"]}]"#).is_empty());
        let long = format!(r#"[{{"id":"{WEB}","names":["{}"]}}]"#, "n".repeat(600));
        assert!(
            names_in_storage(long.as_bytes()).is_empty(),
            "a name over the cap is dropped"
        );
    }

    #[test]
    fn absent_and_sqlite_only() {
        let dir = tempfile::tempdir().unwrap();
        let e = containers(dir.path(), dir.path()).unwrap_err();
        assert!(matches!(e, RuntimeError::Absent { .. }), "{e}");
        std::fs::create_dir_all(dir.path().join("libpod")).unwrap();
        std::fs::write(dir.path().join(SQLITE_STATE), b"SQLite format 3\0").unwrap();
        let e = containers(dir.path(), dir.path()).unwrap_err();
        assert!(matches!(e, RuntimeError::Unreadable { .. }), "{e}");
        let line = e.to_string();
        assert!(
            line.contains("db.sql")
                && line.contains("--db-backend boltdb")
                && line.contains("-p PID"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
