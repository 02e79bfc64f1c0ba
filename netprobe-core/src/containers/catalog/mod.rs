//! Every container the runtimes on this machine know, and which one a process runs in.
//!
//! A process is placed in a container by its cgroup (`/proc/PID/cgroup`): the id a runtime
//! writes into the cgroup's name ([`super::container_of_cgroup`]), else the cgroup of a running
//! container's first process (its `init_pid`, from the runtime's state) or one of its
//! sub-cgroups, else a containerd `NAMESPACE/ID` path (`ctr run`'s default cgroup, whose id the
//! user chose and need not be hex). The runtime's metadata then names it.

use super::kubernetes::{is_sandbox, LabelSelector, Pod, PodRef, CONTAINER_NAME};
use super::{container_of_cgroup, is_container_id, Container, Metadata, RuntimeError};
use std::collections::HashMap;
use std::path::Path;

/// How containers are chosen on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// `--container NAME|ID`: one container by name, id, unique id prefix or containerd
    /// `NAMESPACE/ID`.
    Container(String),
    /// `--pod [NAMESPACE/]NAME`: every container of the pod.
    Pod(PodRef),
    /// `--selector SELECTOR`: every container whose labels match.
    Labels(LabelSelector),
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::Container(c) => write!(f, "--container {c}"),
            Selection::Pod(p) => match &p.namespace {
                Some(ns) => write!(f, "--pod {ns}/{}", p.name),
                None => write!(f, "--pod {}", p.name),
            },
            Selection::Labels(s) => write!(f, "--selector {s}"),
        }
    }
}

/// Why no container was chosen; each message names the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("{selection}: no container has that name or id (looked in {looked}): list them with `netprobe ps`")]
    NoSuchContainer { selection: String, looked: String },
    #[error("{selection}: {} containers answer to it ({}): give the full id or NAMESPACE/ID", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        selection: String,
        candidates: Vec<String>,
    },
    #[error("{selection}: no container carries the labels the kubelet gives that pod's containers (looked in {looked}): list pods with `kubectl get pods -A -o wide`, or containers and their pods with `netprobe ps`")]
    NoSuchPod { selection: String, looked: String },
    #[error("{selection}: no container's labels match (looked in {looked}): see the labels with `netprobe ps --json`")]
    NoMatch { selection: String, looked: String },
    #[error("{selection}: {} is not running: start it, or choose a running container (`netprobe ps`)", .what)]
    NotRunning { selection: String, what: String },
    #[error("{selection}: {what} runs, but none of its processes is visible in this pid namespace: run netprobe on the host (hostPID: true in Kubernetes)")]
    NoVisibleProcess { selection: String, what: String },
}

/// The containers of every runtime read, with the notes of the runtimes that could not be.
#[derive(Debug, Default)]
pub struct Catalog {
    entries: Vec<Metadata>,
    /// One line per runtime whose state was refused or unreadable.
    notes: Vec<String>,
    /// The runtimes read (for "looked in" in errors): `docker`, `containerd k8s.io`, ...
    looked: Vec<String>,
    /// The runtimes with no state here (not installed, or never run).
    absent: Vec<&'static str>,
    by_id: HashMap<String, usize>,
    /// `NAMESPACE/ID` of containerd containers.
    by_namespaced_id: HashMap<String, usize>,
    /// The cgroup path of each running container's first process.
    by_cgroup: HashMap<String, usize>,
}

impl Catalog {
    /// A catalog of what each runtime said (in order of preference when two runtimes know the
    /// same id: Docker's containers are also containerd's, in namespace `moby`, and Docker's
    /// record has the name). `cgroup_of` gives the cgroup path of a pid (see [`cgroup_path`]);
    /// pass `|_| None` when the runtimes' pids are not this pid namespace's.
    pub fn new(
        answers: Vec<Result<Vec<Metadata>, RuntimeError>>,
        cgroup_of: impl Fn(u32) -> Option<String>,
    ) -> Catalog {
        let mut c = Catalog::default();
        // One note per runtime (containerd has two state folders: its own and Docker's).
        let mut failed: Vec<(&'static str, RuntimeError, usize)> = Vec::new();
        for answer in answers {
            match answer {
                Ok(found) => {
                    for m in found {
                        c.add(m, &cgroup_of);
                    }
                }
                Err(RuntimeError::Absent { runtime, .. }) => {
                    if !c.absent.contains(&runtime) {
                        c.absent.push(runtime);
                    }
                }
                Err(e) => match failed.iter_mut().find(|(r, _, _)| *r == e.runtime()) {
                    Some((_, _, more)) => *more += 1,
                    None => failed.push((e.runtime(), e, 0)),
                },
            }
        }
        for (_, e, more) in failed {
            c.notes.push(match more {
                0 => format!("netprobe: note: {e}"),
                n => format!("netprobe: note: {e} (and {n} more of its state folders)"),
            });
        }
        c
    }

    fn add(&mut self, m: Metadata, cgroup_of: &impl Fn(u32) -> Option<String>) {
        let looked = match &m.namespace {
            Some(ns) => format!("{} {ns}", m.runtime),
            None => m.runtime.to_string(),
        };
        if !self.looked.contains(&looked) {
            self.looked.push(looked);
        }
        if self.by_id.contains_key(&m.id) {
            return;
        }
        let i = self.entries.len();
        self.by_id.insert(m.id.clone(), i);
        if let Some(ns) = &m.namespace {
            self.by_namespaced_id.insert(format!("{ns}/{}", m.id), i);
        }
        if let Some(path) = m.init_pid.and_then(cgroup_of) {
            // The host's root cgroup would put every process in this container.
            if path != "/" {
                self.by_cgroup.entry(path).or_insert(i);
            }
        }
        self.entries.push(m);
    }

    /// What could not be read, one line each (a runtime that refused access or whose state
    /// is not what it writes).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn entries(&self) -> &[Metadata] {
        &self.entries
    }

    fn looked(&self) -> String {
        // A runtime with state in one place and none in another (containerd's own folders and
        // Docker's) was looked in.
        let absent: Vec<&str> = self
            .absent
            .iter()
            .copied()
            .filter(|r| !self.looked.iter().any(|l| l.split(' ').next() == Some(*r)))
            .collect();
        let looked = if self.looked.is_empty() {
            "no runtime's containers".to_string()
        } else {
            self.looked.join(", ")
        };
        match absent[..] {
            [] => looked,
            _ => format!("{looked}; no state of {} here", absent.join(", ")),
        }
    }

    /// Container `i` as netprobe shows it.
    pub fn describe(&self, i: usize) -> Container {
        let m = &self.entries[i];
        Container {
            id: m.id.clone(),
            engine: m.runtime,
            name: display_name(m),
            namespace: m.namespace.clone(),
            pod: Pod::of_labels(&m.labels),
            labels: m.labels.clone(),
        }
    }

    /// Which known container a `/proc/PID/cgroup` text places its process in.
    pub fn index_of_cgroup(&self, text: &str) -> Option<usize> {
        if let Some(c) = container_of_cgroup(text) {
            if let Some(&i) = self.by_id.get(&c.id) {
                return Some(i);
            }
        }
        for path in cgroup_paths(text) {
            let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
            for n in (1..=comps.len()).rev() {
                let prefix = format!("/{}", comps[..n].join("/"));
                if let Some(&i) = self.by_cgroup.get(&prefix) {
                    return Some(i);
                }
                if n >= 2 {
                    let key = format!("{}/{}", comps[n - 2], comps[n - 1]);
                    if let Some(&i) = self.by_namespaced_id.get(&key) {
                        return Some(i);
                    }
                }
            }
        }
        None
    }

    /// The container a `/proc/PID/cgroup` text places its process in: a known one with its
    /// metadata, else what the cgroup name alone says; `None` on the host.
    pub fn container_of_cgroup(&self, text: &str) -> Option<Container> {
        match self.index_of_cgroup(text) {
            Some(i) => Some(self.describe(i)),
            None => container_of_cgroup(text),
        }
    }

    /// The containers `selection` chooses (indexes into [`Catalog::entries`]), running or not.
    pub fn select(&self, selection: &Selection) -> Result<Vec<usize>, SelectError> {
        let text = selection.to_string();
        // A pod's sandbox carries the pod's labels but runs no application: never chosen by
        // pod or labels.
        let workloads = (0..self.entries.len()).filter(|&i| !is_sandbox(&self.entries[i].labels));
        let chosen: Vec<usize> = match selection {
            Selection::Container(name_or_id) => {
                return self.find(&text, name_or_id).map(|i| vec![i])
            }
            Selection::Pod(p) => workloads
                .filter(|&i| {
                    Pod::of_labels(&self.entries[i].labels).is_some_and(|pod| p.matches(&pod))
                })
                .collect(),
            Selection::Labels(s) => workloads
                .filter(|&i| s.matches(&self.entries[i].labels))
                .collect(),
        };
        if chosen.is_empty() {
            let looked = self.looked();
            return Err(match selection {
                Selection::Pod(_) => SelectError::NoSuchPod {
                    selection: text,
                    looked,
                },
                _ => SelectError::NoMatch {
                    selection: text,
                    looked,
                },
            });
        }
        Ok(chosen)
    }

    /// One container by name, id, `NAMESPACE/ID`, or unique id prefix.
    fn find(&self, selection: &str, name_or_id: &str) -> Result<usize, SelectError> {
        let exact: Vec<usize> = (0..self.entries.len())
            .filter(|&i| {
                let m = &self.entries[i];
                m.id == name_or_id
                    || display_name(m).as_deref() == Some(name_or_id)
                    || m.namespace.as_ref().is_some_and(|ns| {
                        name_or_id
                            .strip_prefix(ns.as_str())
                            .and_then(|r| r.strip_prefix('/'))
                            == Some(m.id.as_str())
                    })
            })
            .collect();
        let candidates = if exact.is_empty() && name_or_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..self.entries.len())
                .filter(|&i| {
                    is_container_id(&self.entries[i].id)
                        && self.entries[i].id.starts_with(name_or_id)
                })
                .collect()
        } else {
            exact
        };
        match candidates[..] {
            [] => Err(SelectError::NoSuchContainer {
                selection: selection.to_string(),
                looked: self.looked(),
            }),
            [i] => Ok(i),
            _ => Err(SelectError::Ambiguous {
                selection: selection.to_string(),
                candidates: candidates.iter().take(8).map(|&i| self.label(i)).collect(),
            }),
        }
    }

    /// `RUNTIME [NAMESPACE/]ID` of container `i`, as errors list candidates.
    pub fn label(&self, i: usize) -> String {
        let m = &self.entries[i];
        let id = if is_container_id(&m.id) {
            &m.id[..12]
        } else {
            &m.id
        };
        match &m.namespace {
            Some(ns) => format!("{} {ns}/{id}", m.runtime),
            None => format!("{} {id}", m.runtime),
        }
    }

    /// The processes (under `proc`, normally `/proc`) of the containers `chosen`, ascending,
    /// each with the index of its container. Threads are not listed (`-p` takes processes).
    pub fn processes(&self, proc: &Path, chosen: &[usize]) -> Vec<(u32, usize)> {
        let Ok(dir) = std::fs::read_dir(proc) else {
            return Vec::new();
        };
        let mut found: Vec<(u32, usize)> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| {
                let text = std::fs::read(proc.join(pid.to_string()).join("cgroup")).ok()?;
                let i = self.index_of_cgroup(&String::from_utf8_lossy(&text))?;
                chosen.contains(&i).then_some((pid, i))
            })
            .collect();
        found.sort_unstable();
        found
    }

    /// The processes of `selection`'s containers, each with its container; an error when none
    /// is chosen, or none of those chosen runs a process netprobe can see.
    pub fn select_processes(
        &self,
        proc: &Path,
        selection: &Selection,
    ) -> Result<Vec<(u32, Container)>, SelectError> {
        let chosen = self.select(selection)?;
        let found = self.processes(proc, &chosen);
        if found.is_empty() {
            let what = match chosen[..] {
                [i] => format!("container {}", self.named(i)),
                _ => format!("none of its {} containers", chosen.len()),
            };
            let running = chosen.iter().any(|&i| self.entries[i].init_pid.is_some());
            return Err(if running {
                SelectError::NoVisibleProcess {
                    selection: selection.to_string(),
                    what,
                }
            } else {
                SelectError::NotRunning {
                    selection: selection.to_string(),
                    what: if chosen.len() == 1 {
                        what
                    } else {
                        format!("any of its {} containers", chosen.len())
                    },
                }
            });
        }
        let mut described: HashMap<usize, Container> = HashMap::new();
        Ok(found
            .into_iter()
            .map(|(pid, i)| {
                (
                    pid,
                    described
                        .entry(i)
                        .or_insert_with(|| self.describe(i))
                        .clone(),
                )
            })
            .collect())
    }

    /// `NAME (RUNTIME [NAMESPACE])` of container `i`.
    fn named(&self, i: usize) -> String {
        let m = &self.entries[i];
        let name = display_name(m).unwrap_or_else(|| m.id.clone());
        match &m.namespace {
            Some(ns) => format!("{name} ({} {ns})", m.runtime),
            None => format!("{name} ({})", m.runtime),
        }
    }
}

/// The name a container goes by: the runtime's (Docker, Podman), else nerdctl's name label,
/// else, for a containerd container, the Kubernetes container name (what `crictl ps` shows), else
/// an id its maker chose (`ctr run IMAGE web`).
pub fn display_name(m: &Metadata) -> Option<String> {
    m.name
        .clone()
        .or_else(|| m.labels.get("nerdctl/name").cloned())
        .or_else(|| m.labels.get(CONTAINER_NAME).cloned())
        .or_else(|| (!is_container_id(&m.id)).then(|| m.id.clone()))
}

/// The cgroup paths of a `/proc/PID/cgroup` text: the unified (v2) line's first, then v1's.
fn cgroup_paths(text: &str) -> impl Iterator<Item = &str> {
    let unified = text.lines().filter(|l| l.starts_with("0::"));
    let v1 = text.lines().filter(|l| !l.starts_with("0::"));
    unified.chain(v1).filter_map(|l| l.splitn(3, ':').nth(2))
}

/// The cgroup path of process `pid` (its unified line, else its first), read from
/// `PROC/PID/cgroup`.
pub fn cgroup_path(proc: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read(proc.join(pid.to_string()).join("cgroup")).ok()?;
    let text = String::from_utf8_lossy(&text);
    let path = cgroup_paths(&text).next().map(str::to_string);
    path
}

/// The containers of every runtime on this machine, read from their default state locations:
/// Docker's data root, containerd's metadata database (every namespace) and Podman's state.
/// `pids_are_ours`: whether netprobe runs in the initial pid namespace, whose pids the runtimes
/// record (elsewhere a container is found by its cgroup name only).
pub fn read_system(pids_are_ours: bool) -> Catalog {
    let mut answers = vec![super::docker::containers(Path::new(
        super::docker::DEFAULT_ROOT,
    ))];
    for (root, state) in super::containerd::DEFAULT_DIRS {
        answers.push(super::containerd::containers(
            Path::new(root),
            Path::new(state),
        ));
    }
    answers.push(super::podman::containers(
        Path::new(super::podman::DEFAULT_GRAPH_ROOT),
        Path::new(super::podman::DEFAULT_RUN_ROOT),
    ));
    let proc = Path::new("/proc");
    Catalog::new(answers, |pid| {
        if pids_are_ours {
            cgroup_path(proc, pid)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests;
