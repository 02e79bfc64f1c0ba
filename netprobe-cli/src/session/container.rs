//! A Docker container as a session's target (`--container NAME|ID`): its processes, asked of the
//! Docker Engine API (`netprobe_core::ipc::docker`), and how netprobe names it on stderr.

use crate::error::{Error, Result};
use netprobe_core::ipc::docker::ContainerInfo;

/// The processes of Docker container `name_or_id` (`--container`), said on stderr.
pub fn container_pids(name_or_id: &str) -> Result<Vec<u32>> {
    container_processes(name_or_id).map(|(_, pids)| pids)
}

/// What the Docker engine says about container `name_or_id`, and its processes, said on stderr.
pub(crate) fn container_processes(name_or_id: &str) -> Result<(ContainerInfo, Vec<u32>)> {
    let (info, pids) = netprobe_core::ipc::docker::container_processes(
        &netprobe_core::ipc::docker::socket_path(),
        name_or_id,
        netprobe_core::pid_namespace::sees_global_pids(),
    )
    .map_err(|e| Error::usage(e.to_string()))?;
    crate::printable::eprint_line(&format!(
        "netprobe: container {} ({}): pid {}",
        info.name,
        short_id(&info.id),
        join_pids(&pids)
    ));
    Ok((info, pids))
}

/// A container id as `docker ps` shows it (12 hex digits).
pub fn short_id(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// Pids as netprobe lists them: `1,2,3`.
pub fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
