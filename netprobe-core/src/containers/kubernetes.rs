//! Kubernetes pods on a node, from the labels the kubelet puts on every container it asks the
//! runtime for (kubelet `pkg/kubelet/types/labels.go`: `io.kubernetes.pod.name`,
//! `io.kubernetes.pod.namespace`, `io.kubernetes.pod.uid`, `io.kubernetes.container.name`), and
//! the pod's own labels, which the CRI runtimes copy onto the pod's containers.

use serde::Serialize;
use std::collections::BTreeMap;

/// The label keys the kubelet sets on a container (kubelet `pkg/kubelet/types/labels.go`).
pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// Where a container sits in Kubernetes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    /// The container's name in the pod spec; `None` for the pod's sandbox (`pause`) container.
    pub container: Option<String>,
}

impl Pod {
    /// The pod a container with `labels` belongs to; `None` when the kubelet did not make it.
    pub fn of_labels(labels: &BTreeMap<String, String>) -> Option<Pod> {
        Some(Pod {
            namespace: labels.get(POD_NAMESPACE)?.clone(),
            name: labels.get(POD_NAME)?.clone(),
            container: labels.get(CONTAINER_NAME).cloned(),
        })
    }
}
