//! Where a process runs, as the sinks label its hits: its container's name, and the Kubernetes
//! pod and namespace (the labels Kubernetes tools use: `container`, `pod`, `namespace`, as
//! kube-state-metrics and cAdvisor name them). Looked up once per process from its cgroup and the
//! runtimes' metadata (`netprobe_core::containers`), and cached.

use netprobe_core::containers::{Catalog, Container};
use serde::Serialize;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A process's container, pod and namespace; a field is `None` where unknown (a container made
/// by no kubelet has no pod).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Place {
    /// The container's name, else its short id (12 hex digits).
    pub container: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The Kubernetes namespace of the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl Place {
    pub fn of(c: &Container) -> Place {
        Place {
            container: c
                .pod
                .as_ref()
                .and_then(|p| p.container.clone())
                .or_else(|| c.name.clone())
                .unwrap_or_else(|| c.id.chars().take(12).collect()),
            pod: c.pod.as_ref().map(|p| p.name.clone()),
            namespace: c.pod.as_ref().map(|p| p.namespace.clone()),
        }
    }

    /// `NAMESPACE/POD/CONTAINER`, or the container alone outside Kubernetes.
    pub fn path(&self) -> String {
        match (&self.namespace, &self.pod) {
            (Some(ns), Some(pod)) => format!("{ns}/{pod}/{}", self.container),
            _ => self.container.clone(),
        }
    }
}

/// The containers a session chose its targets from (`--container`, `--pod`, `--selector`), by
/// target pid: what the selection found is what the targets' hits are labelled with, whether or
/// not their cgroup can still be read when the hits are (a short workload exits first).
static TARGETS: std::sync::Mutex<Vec<(u32, Container)>> = std::sync::Mutex::new(Vec::new());

/// Remembers the containers of a session's targets (see [`TARGETS`]).
pub fn remember_targets(found: &[(u32, Container)]) {
    if let Ok(mut t) = TARGETS.lock() {
        t.extend(found.iter().cloned());
    }
}

fn target_container(pid: u32) -> Option<Container> {
    let t = TARGETS.lock().ok()?;
    t.iter().find(|(p, _)| *p == pid).map(|(_, c)| c.clone())
}

/// Processes kept before the cache is cleared (a long session sees processes come and go).
const MAX_CACHED: usize = 65_536;
/// A container not in the catalog (started after it was read) makes it read again, at most
/// this often.
const REREAD_EVERY: Duration = Duration::from_secs(5);

/// Process → [`Place`], cached. The runtimes' state is read on first use.
#[derive(Default)]
pub struct Places {
    catalog: Option<(Catalog, Instant)>,
    by_pid: HashMap<u32, Option<Rc<Place>>>,
    /// Names already known by container id (what `--container` asked the Docker engine).
    names: HashMap<String, String>,
    /// Looks nothing up (every process is the host's): for output that must not depend on
    /// this machine's processes.
    off: bool,
}

impl std::fmt::Debug for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Places")
            .field("cached", &self.by_pid.len())
            .finish_non_exhaustive()
    }
}

impl Places {
    /// Places nothing: every process is shown as the host's.
    pub fn off() -> Places {
        Places {
            off: true,
            ..Places::default()
        }
    }

    /// Looks `pids` up now, while they run: a target whose hits are read after it exited (a
    /// short workload) is still placed.
    pub fn learn(mut self, pids: &[u32]) -> Places {
        for &p in pids {
            self.of(p);
        }
        self
    }

    /// Container `id` is named `name` (what `--container` already asked the engine).
    pub fn known(&mut self, id: &str, name: &str) {
        self.names.insert(id.to_string(), name.to_string());
    }

    /// Where process `pid` (an id of netprobe's pid namespace) runs; `None` on the host.
    pub fn of(&mut self, pid: u32) -> Option<Rc<Place>> {
        if self.off {
            return None;
        }
        if let Some(p) = self.by_pid.get(&pid) {
            return p.clone();
        }
        if self.by_pid.len() >= MAX_CACHED {
            self.by_pid.clear();
        }
        if let Some(c) = target_container(pid) {
            let place = Some(Rc::new(Place::of(&c)));
            self.by_pid.insert(pid, place.clone());
            return place;
        }
        let cgroup = std::fs::read(format!("/proc/{pid}/cgroup")).ok();
        let place = cgroup.and_then(|text| {
            let text = String::from_utf8_lossy(&text);
            let known = |c: &Catalog| c.index_of_cgroup(&text).map(|i| c.describe(i));
            let c = match known(self.catalog()) {
                Some(c) => Some(c),
                None if netprobe_core::containers::container_of_cgroup(&text).is_some() => {
                    self.reread();
                    known(self.catalog())
                        .or_else(|| netprobe_core::containers::container_of_cgroup(&text))
                }
                None => None,
            };
            c.map(|mut c| {
                if c.name.is_none() {
                    c.name = self.name_of(&c);
                }
                Rc::new(Place::of(&c))
            })
        });
        self.by_pid.insert(pid, place.clone());
        place
    }

    /// A Docker container's name when its state on disk did not say it (unreadable to
    /// netprobe): known, else asked of the Engine API once.
    fn name_of(&mut self, c: &Container) -> Option<String> {
        if let Some(n) = self.names.get(&c.id) {
            return Some(n.clone());
        }
        if c.engine != "docker" {
            return None;
        }
        let name =
            netprobe_core::ipc::docker::inspect(&netprobe_core::ipc::docker::socket_path(), &c.id)
                .ok()
                .map(|i| i.name)?;
        if self.names.len() < MAX_CACHED {
            self.names.insert(c.id.clone(), name.clone());
        }
        Some(name)
    }

    fn catalog(&mut self) -> &Catalog {
        &self
            .catalog
            .get_or_insert_with(|| (read(), Instant::now()))
            .0
    }

    fn reread(&mut self) {
        if self
            .catalog
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < REREAD_EVERY)
        {
            return;
        }
        self.catalog = Some((read(), Instant::now()));
    }
}

fn read() -> Catalog {
    netprobe_core::containers::read_system(netprobe_core::pid_namespace::sees_global_pids())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netprobe_core::containers::kubernetes::Pod;

    #[test]
    fn kubernetes_containers_are_named_as_in_their_pod() {
        let mut c = Container::bare(&"ab".repeat(32), "containerd");
        assert_eq!(Place::of(&c).path(), "abababababab");
        c.name = Some("k8s_api_checkout".into());
        c.pod = Some(Pod {
            namespace: "shop".into(),
            name: "checkout-7d4".into(),
            container: Some("api".into()),
        });
        let p = Place::of(&c);
        assert_eq!(p.path(), "shop/checkout-7d4/api");
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"container":"api","pod":"checkout-7d4","namespace":"shop"}"#
        );
    }

    #[test]
    fn a_process_is_placed_as_its_cgroup_says() {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let in_container = netprobe_core::containers::container_of_cgroup(&text).is_some();
        assert_eq!(
            Places::default().of(std::process::id()).is_some(),
            in_container
        );
    }
}
