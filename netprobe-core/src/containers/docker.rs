//! Docker's metadata on disk: `DOCKER_ROOT/containers/ID/config.v2.json` (moby
//! `container/container.go`), read without the Engine API.

use super::Container;
use std::path::Path;

/// The container's name from Docker's metadata, `DOCKER_ROOT/containers/ID/config.v2.json`
/// (`"Name":"/NAME"`, moby `container/container.go`); `None` for other engines or when unreadable.
pub fn docker_name(docker_root: &Path, c: &Container) -> Option<String> {
    if c.engine != "docker" {
        return None;
    }
    let path = docker_root
        .join("containers")
        .join(&c.id)
        .join("config.v2.json");
    let text = crate::regular_file::read_capped(
        &path,
        crate::regular_file::cap::DOCKER_CONFIG_JSON,
        "Docker config.v2.json",
    )
    .ok()?;
    name_in_config(std::str::from_utf8(&text).ok()?)
}

/// The `"Name"` member of a Docker `config.v2.json`, without its leading `/`. A minimal scan
/// (the file can be large; only the top-level `"Name":"..."` is wanted, which Docker writes with
/// no spaces and never with escapes, names being `[a-zA-Z0-9][a-zA-Z0-9_.-]+`).
pub fn name_in_config(text: &str) -> Option<String> {
    let at = text.find("\"Name\":\"")? + "\"Name\":\"".len();
    let rest = text.get(at..)?;
    let end = rest.find('"')?;
    let name = rest[..end].trim_start_matches('/');
    (!name.is_empty()).then(|| name.to_string())
}

