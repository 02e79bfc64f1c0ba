//! Container runtimes other than Docker, as a node runs them: containerd through `ctr` (the
//! daemon of `scripts/containerd-up.sh`, namespaces `moby` and `k8s.io`) and Podman through
//! `podman` (rootful, its default storage). Images come from an archive the harness writes
//! ([`archive`]), never from a registry.
//!
//! The lifetime rules are Docker's (`crate::docker`): every container carries the run's
//! [`Owner`](crate::owner::Owner) in its name and in the label [`OWNER_LABEL`]; its guard removes
//! it on drop, also when a test panics; `sweep_dead_owners` of each runtime removes what a run
//! that died without dropping left.
//!
//! [`KubeletLabels`] labels a container the way the kubelet labels the containers of a pod
//! (kubelet `pkg/kubelet/types/labels.go`), so a plain `ctr run` stands for a pod's container.

pub mod archive;
pub mod containerd;
pub mod podman;

pub use archive::ImageArchive;
pub use containerd::CtrContainer;
pub use podman::PodmanContainer;

/// The label every container of the harness carries: its owner's token (`<pid>-<start>`).
pub const OWNER_LABEL: &str = "netprobe.harness.owner";

/// The labels the kubelet gives a pod's container, plus the pod's own labels (which CRI runtimes
/// copy onto its containers).
#[derive(Clone, Debug)]
pub struct KubeletLabels {
    /// `io.kubernetes.pod.namespace`.
    pub namespace: String,
    /// `io.kubernetes.pod.name`.
    pub pod: String,
    /// `io.kubernetes.pod.uid`.
    pub uid: String,
    /// `io.kubernetes.container.name`.
    pub container: String,
    /// The pod's labels (`app=checkout`).
    pub pod_labels: Vec<(String, String)>,
}

impl KubeletLabels {
    /// Every label, as `(key, value)`.
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = [
            ("io.kubernetes.pod.namespace", &self.namespace),
            ("io.kubernetes.pod.name", &self.pod),
            ("io.kubernetes.pod.uid", &self.uid),
            ("io.kubernetes.container.name", &self.container),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
        v.extend(self.pod_labels.iter().cloned());
        v
    }
}

/// A 64-hex-digit container id for `owner`'s `role` (the form containerd's CRI plugin, nerdctl,
/// Docker and Podman give ids; `ctr run` takes whatever id it is given).
pub fn container_id(owner: &crate::owner::Owner, role: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(format!("{owner}/{role}"))
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_labels_name_the_pod_and_its_container() {
        let l = KubeletLabels {
            namespace: "shop".into(),
            pod: "checkout-7d4".into(),
            uid: "u-1".into(),
            container: "web".into(),
            pod_labels: vec![("app".into(), "checkout".into())],
        }
        .labels();
        let get = |k: &str| l.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("io.kubernetes.pod.namespace"), Some("shop"));
        assert_eq!(get("io.kubernetes.pod.name"), Some("checkout-7d4"));
        assert_eq!(get("io.kubernetes.pod.uid"), Some("u-1"));
        assert_eq!(get("io.kubernetes.container.name"), Some("web"));
        assert_eq!(get("app"), Some("checkout"));
    }

    #[test]
    fn container_ids_are_64_hex_digits_per_owner_and_role() {
        let me = crate::owner::Owner::current();
        let id = container_id(&me, "web");
        assert_eq!(id.len(), 64);
        assert!(id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(id, container_id(&me, "web"));
        assert_ne!(id, container_id(&me, "worker"));
    }
}
