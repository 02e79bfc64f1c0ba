//! A container's processes by name or id, from the Docker Engine API over its Unix socket
//! (Docker Engine API reference, "ContainerInspect": `GET /containers/{id}/json` gives `Id`,
//! `Name`, `State.Running`, `State.Status` and `State.Pid`), and the processes of this pid
//! namespace whose cgroup is that container's (`containers::container_of_cgroup`), so pids are
//! ours whichever namespace netprobe runs in.
//!
//! The API is plain HTTP/1.0 over `unix:///var/run/docker.sock` (or `$DOCKER_HOST` when it is a
//! `unix://` address); HTTP/1.0 makes the engine answer with a whole body and close, without
//! chunked encoding. The response is parsed bounds-checked; a body larger than
//! [`MAX_RESPONSE`] is refused.

use crate::containers::container_of_cgroup;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Docker's default socket.
pub const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
/// Largest API response read (an inspect document is a few KiB).
pub const MAX_RESPONSE: usize = 4 << 20;

/// What the Docker engine says about a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerInfo {
    /// The full id (64 hex digits).
    pub id: String,
    /// The name without Docker's leading `/`.
    pub name: String,
    pub running: bool,
    /// `running`, `exited`, `created`, `paused`, ...
    pub status: String,
    /// The host pid of the container's first process (0 when it is not running).
    pub pid: u32,
}

/// Why a container's processes could not be found; each message names the fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ContainerError {
    #[error("--container {container}: no Docker socket at {} ({why}): start dockerd, set DOCKER_HOST=unix:///path/to/docker.sock, or give the process with -p PID", .socket.display())]
    NoSocket {
        container: String,
        socket: PathBuf,
        why: String,
    },
    #[error("--container {container}: no such container ({message}): list them with `docker ps`")]
    NoSuchContainer { container: String, message: String },
    #[error("--container {container}: container {name} is not running (status {status}): start it with `docker start {name}`")]
    NotRunning {
        container: String,
        name: String,
        status: String,
    },
    #[error("--container {container}: container {name} runs, but none of its processes is visible in this pid namespace: run netprobe on the host or in the container's pid namespace (--pid=container:{name})")]
    NoVisibleProcess { container: String, name: String },
    #[error("--container {container}: {why}")]
    Invalid { container: String, why: String },
    #[error("--container {container}: the Docker engine at {} answered badly ({why}): check `docker info`", .socket.display())]
    BadAnswer {
        container: String,
        socket: PathBuf,
        why: String,
    },
}

/// The socket to talk to: `$DOCKER_HOST` when it is `unix://PATH`, else [`DEFAULT_SOCKET`].
pub fn socket_path() -> PathBuf {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") => PathBuf::from(&h["unix://".len()..]),
        _ => PathBuf::from(DEFAULT_SOCKET),
    }
}

/// Whether `s` can name a container in an API path: Docker names are `[a-zA-Z0-9][a-zA-Z0-9_.-]*`
/// (moby `daemon/names`), ids and id prefixes are hex.
pub fn is_container_ref(s: &str) -> bool {
    let s = s.strip_prefix('/').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 256
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Asks the engine at `socket` about container `name_or_id`.
pub fn inspect(socket: &Path, name_or_id: &str) -> Result<ContainerInfo, ContainerError> {
    let container = name_or_id.to_string();
    if !is_container_ref(name_or_id) {
        return Err(ContainerError::Invalid {
            container,
            why: "a container name has letters, digits, '_', '.' and '-' only (an id is hex): see `docker ps`".into(),
        });
    }
    let bad = |why: String| ContainerError::BadAnswer {
        container: container.clone(),
        socket: socket.to_path_buf(),
        why,
    };
    let reference = name_or_id.strip_prefix('/').unwrap_or(name_or_id);
    let (status, body) = get(socket, &format!("/containers/{reference}/json")).map_err(|why| {
        ContainerError::NoSocket {
            container: container.clone(),
            socket: socket.to_path_buf(),
            why,
        }
    })?;
    let doc: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("HTTP {status}, body is not JSON: {e}")))?;
    match status {
        200 => {}
        404 => {
            return Err(ContainerError::NoSuchContainer {
                container,
                message: doc["message"].as_str().unwrap_or("not found").to_string(),
            })
        }
        _ => {
            return Err(bad(format!(
                "HTTP {status}: {}",
                doc["message"].as_str().unwrap_or("no message")
            )))
        }
    }
    parse_inspect(&doc).ok_or_else(|| bad("the inspect document lacks Id, Name or State".into()))
}

/// `Id`, `Name`, `State.{Running,Status,Pid}` of an inspect document.
pub fn parse_inspect(doc: &serde_json::Value) -> Option<ContainerInfo> {
    let id = doc["Id"].as_str()?.to_string();
    let name = doc["Name"].as_str()?.trim_start_matches('/').to_string();
    let state = &doc["State"];
    Some(ContainerInfo {
        id,
        name,
        running: state["Running"].as_bool()?,
        status: state["Status"].as_str().unwrap_or("unknown").to_string(),
        pid: state["Pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
    })
}

/// One `GET` over the socket: (status, body).
fn get(socket: &Path, path: &str) -> Result<(u16, Vec<u8>), String> {
    let mut s = UnixStream::connect(socket).map_err(|e| e.to_string())?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(10)));
    s.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: docker\r\nUser-Agent: netprobe\r\n\r\n").as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    if raw.len() > MAX_RESPONSE {
        return Err(format!("the answer is larger than {MAX_RESPONSE} bytes"));
    }
    parse_response(&raw)
}

/// Splits an HTTP/1.x response into status and body (chunked bodies are decoded).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| "headers are not text")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP answer: {status_line:.40}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {status_line:.40}"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = &raw[head_end + 4..];
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line has no end")?;
        let size_text = std::str::from_utf8(&rest[..eol]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "bad chunk size")?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok((status, out));
        }
        let chunk = rest.get(..size).ok_or("chunk is cut short")?;
        out.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("chunk is cut short")?;
    }
}

/// Processes of this pid namespace (under `proc`, normally `/proc`) whose cgroup names
/// container `id`, ascending; threads are not listed (`-p` takes processes).
pub fn processes_of(proc: &Path, id: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir(proc)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(proc.join(pid.to_string()).join("cgroup"))
                        .ok()
                        .and_then(|t| container_of_cgroup(&t))
                        .is_some_and(|c| c.id == id)
                })
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// The processes of a running container, named or by id (prefix), as this pid namespace sees
/// them: those whose cgroup is the container's; where cgroups do not say (an engine laid out
/// differently), the container's first process as the engine names it, when
/// `host_pids_are_ours` (netprobe runs in the initial pid namespace, whose pids the engine
/// reports).
pub fn container_processes(
    socket: &Path,
    name_or_id: &str,
    host_pids_are_ours: bool,
) -> Result<(ContainerInfo, Vec<u32>), ContainerError> {
    let info = inspect(socket, name_or_id)?;
    if !info.running {
        return Err(ContainerError::NotRunning {
            container: name_or_id.to_string(),
            name: info.name.clone(),
            status: info.status.clone(),
        });
    }
    let mut pids = processes_of(Path::new("/proc"), &info.id);
    if pids.is_empty()
        && info.pid != 0
        && host_pids_are_ours
        && Path::new(&format!("/proc/{}", info.pid)).exists()
    {
        pids.push(info.pid);
    }
    if pids.is_empty() {
        return Err(ContainerError::NoVisibleProcess {
            container: name_or_id.to_string(),
            name: info.name.clone(),
        });
    }
    Ok((info, pids))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn responses() {
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}";
        assert_eq!(parse_response(r).unwrap(), (200, b"{\"a\":1}".to_vec()));
        let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), (404, b"{\"a\":1}".to_vec()));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"SSH-2.0\r\n\r\n").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab")
                .is_err()
        );
    }

    #[test]
    fn inspect_documents() {
        let doc: serde_json::Value = serde_json::from_str(
            r#"{"Id":"0123","Name":"/web","State":{"Status":"running","Running":true,"Pid":4242}}"#,
        )
        .unwrap();
        assert_eq!(
            parse_inspect(&doc).unwrap(),
            ContainerInfo {
                id: "0123".into(),
                name: "web".into(),
                running: true,
                status: "running".into(),
                pid: 4242
            }
        );
        assert_eq!(parse_inspect(&serde_json::json!({"Id": "x"})), None);
    }

    #[test]
    fn container_references() {
        assert!(is_container_ref("web-1.a_b"));
        assert!(is_container_ref("/web"));
        assert!(is_container_ref("0123abcd"));
        for bad in ["", "../x", "a/b", "a b", "a?x", "-x", "a%2f"] {
            assert!(!is_container_ref(bad), "{bad}");
        }
    }

    #[test]
    fn missing_socket_is_named() {
        let e = inspect(Path::new("/nonexistent/docker.sock"), "web").unwrap_err();
        assert!(matches!(e, ContainerError::NoSocket { .. }), "{e}");
        assert!(e
            .to_string()
            .contains("no Docker socket at /nonexistent/docker.sock"));
    }

    proptest! {
        #[test]
        fn responses_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_response(&raw);
        }

        #[test]
        fn chunked_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            raw.extend(body);
            let _ = parse_response(&raw);
        }
    }
}
