//! Docker's metadata on disk: `DOCKER_ROOT/containers/ID/config.v2.json` (moby
//! `container/container.go`), read without the Engine API.

use super::{Metadata, RuntimeError, MAX_CONTAINERS};
use std::path::Path;

/// Docker's default data root (`dockerd --data-root`).
pub const DEFAULT_ROOT: &str = "/var/lib/docker";

/// Every container Docker keeps under `docker_root` (its `containers/ID/config.v2.json`): id,
/// name, labels (`Config.Labels`) and, while it runs, its first process (`State.Pid`).
/// A config that cannot be read or parsed is left out (Docker may be writing it).
pub fn containers(docker_root: &Path) -> Result<Vec<Metadata>, RuntimeError> {
    let dir = docker_root.join("containers");
    let entries = std::fs::read_dir(&dir).map_err(|e| RuntimeError::of_io("docker", &dir, &e))?;
    let mut out = Vec::new();
    for entry in entries.flatten().take(MAX_CONTAINERS) {
        let Some(id) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if !super::is_container_id(&id) {
            continue;
        }
        let path = entry.path().join("config.v2.json");
        let Ok(text) = crate::regular_file::read_capped(
            &path,
            crate::regular_file::cap::DOCKER_CONFIG_JSON,
            "Docker config.v2.json",
        ) else {
            continue;
        };
        if let Some(m) = metadata_of_config(&id, &text) {
            out.push(m);
        }
    }
    Ok(out)
}

/// The metadata in one `config.v2.json` (moby `container/container.go`: `Name`, `Config.Labels`,
/// `State.Running`, `State.Pid`); `None` when it is not JSON or names another container.
pub fn metadata_of_config(id: &str, bytes: &[u8]) -> Option<Metadata> {
    let doc: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if doc["ID"].as_str().is_some_and(|i| i != id) {
        return None;
    }
    let name = doc["Name"]
        .as_str()
        .map(|n| n.trim_start_matches('/'))
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let state = &doc["State"];
    let init_pid = (state["Running"].as_bool() == Some(true))
        .then(|| state["Pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
        .flatten()
        .filter(|p| *p != 0);
    let labels = super::state_file::labels_in_json(&doc["Config"]["Labels"]);
    Some(Metadata {
        id: id.to_string(),
        runtime: "docker",
        namespace: None,
        name,
        labels,
        init_pid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e1b2c9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";

    #[test]
    fn a_running_container_with_kubelet_labels() {
        let cfg = format!(
            r#"{{"ID":"{ID}","Name":"/k8s_api_checkout","State":{{"Running":true,"Pid":4242}},
               "Config":{{"Labels":{{"io.kubernetes.pod.name":"checkout-7d4","app":"checkout","n":1}}}}}}"#
        );
        let m = metadata_of_config(ID, cfg.as_bytes()).unwrap();
        assert_eq!(m.name.as_deref(), Some("k8s_api_checkout"));
        assert_eq!(m.init_pid, Some(4242));
        assert_eq!(
            m.labels.len(),
            2,
            "a label that is not a string is left out"
        );
        assert_eq!(m.labels["app"], "checkout");
    }

    #[test]
    fn stopped_foreign_and_broken_configs() {
        let stopped = format!(r#"{{"ID":"{ID}","Name":"/x","State":{{"Running":false,"Pid":0}}}}"#);
        assert_eq!(
            metadata_of_config(ID, stopped.as_bytes()).unwrap().init_pid,
            None
        );
        let other = r#"{"ID":"abc","Name":"/x"}"#;
        assert_eq!(metadata_of_config(ID, other.as_bytes()), None);
        assert_eq!(metadata_of_config(ID, b"{"), None);
    }

    #[test]
    fn no_docker_is_absent() {
        let e = containers(Path::new("/nonexistent/docker")).unwrap_err();
        assert!(matches!(e, RuntimeError::Absent { .. }), "{e}");
    }
}
