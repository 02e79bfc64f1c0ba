//! The container a process runs in, from its cgroup path alone (`/proc/PID/cgroup`,
//! `cgroups(7)`): every runtime names the cgroup it makes for a container after the container's
//! id, so this works with no runtime API and whatever runtime made it.

use super::Container;

/// The container a `/proc/PID/cgroup` text names, from the innermost path component that holds a
/// container id. Layouts (the cgroup paths each engine creates):
/// - Docker, systemd driver: `/system.slice/docker-ID.scope`; cgroupfs driver: `/docker/ID`;
/// - containerd (Kubernetes CRI): `.../cri-containerd-ID.scope`; nerdctl/ctr: `/NAMESPACE/ID`
///   (`default`, `k8s.io`, `moby`);
/// - CRI-O: `.../crio-ID.scope` (`crio-conmon-ID.scope` is its monitor, not the container);
/// - Podman: `.../libpod-ID.scope` (`libpod-conmon-ID.scope` likewise), cgroupfs `/libpod_parent/libpod-ID`.
///
/// cgroup v1 (`N:controllers:/path`) and v2 (`0::/path`) lines both work. `None` on the host.
pub fn container_of_cgroup(text: &str) -> Option<Container> {
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (i, comp) in comps.iter().enumerate().rev() {
            let parent = if i > 0 { Some(comps[i - 1]) } else { None };
            if let Some(c) = container_of_component(comp, parent) {
                return Some(c);
            }
        }
    }
    None
}

fn container_of_component(comp: &str, parent: Option<&str>) -> Option<Container> {
    let scope = comp.strip_suffix(".scope").unwrap_or(comp);
    for (prefix, engine) in [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("libpod-", "podman"),
    ] {
        if let Some(id) = scope.strip_prefix(prefix) {
            if is_container_id(id) {
                return Some(Container::bare(id, engine));
            }
        }
    }
    if is_container_id(comp) {
        let engine = match parent {
            Some("docker") => "docker",
            Some("default" | "k8s.io" | "moby") => "containerd",
            Some("libpod_parent") => "podman",
            _ => "unknown",
        };
        return Some(Container::bare(comp, engine));
    }
    None
}

/// 64 lowercase hex digits: the id Docker, containerd, CRI-O and Podman give containers.
pub fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
