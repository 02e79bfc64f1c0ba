//! Turning on perf maps in a running .NET 8+ process through its diagnostics IPC channel, as
//! `dotnet-trace`/`dotnet-counters` talk to it. Not part of symbolizing (which only reads): a
//! caller sends it when the user asks for JIT names of a process started without
//! `DOTNET_PerfMapEnabled`.
//!
//! Protocol (dotnet/diagnostics `documentation/design-docs/ipc-protocol.md`; dotnet/runtime
//! `src/native/eventpipe/ds-protocol.h`, `ds-process-protocol.h`, `ds-types.h`):
//! - the runtime listens on a Unix socket `$TMPDIR/dotnet-diagnostic-{pid}-{disambiguation}-socket`
//!   (pid in the process's own pid namespace; the folder is opened inside the process's root, and
//!   the listener checked to be the process, see [`connect_diagnostic_socket`]);
//! - a message is a 20-byte header: magic `"DOTNET_IPC_V1\0"` (14 bytes), `size` (u16, header plus
//!   payload), `command_set` (u8), `command_id` (u8), `reserved` (u16, 0), then the payload;
//! - Process command set `0x04`, `EnablePerfMap` = `0x05` (.NET 8+), payload `uint32 perfMapType`
//!   (`src/coreclr/vm/perfmap.h`, `PerfMapType`: 1 = perf map and jitdump, 2 = jitdump only,
//!   3 = perf map only); `DisablePerfMap` = `0x06` (.NET 8+), no payload;
//! - the reply is a header with command set `0xFF` (server) and id `0x00` (OK, payload a u32
//!   HRESULT 0) or `0xFF` (error, payload a u32 HRESULT);
//! - the runtime then calls `PerfMap::Enable(type, sendExisting = true)`
//!   (`src/coreclr/vm/perfmap.cpp`): methods compiled before the command are written too.

use crate::error::{Error, Result};
use crate::process::Process;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

const MAGIC: &[u8; 14] = b"DOTNET_IPC_V1\0";
const PROCESS_COMMAND_SET: u8 = 0x04;
const ENABLE_PERF_MAP: u8 = 0x05;
const DISABLE_PERF_MAP: u8 = 0x06;
const SERVER_COMMAND_SET: u8 = 0xFF;
const SERVER_OK: u8 = 0x00;

/// What `EnablePerfMap` asks the runtime to write (`PerfMapType` in `src/coreclr/vm/perfmap.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PerfMapType {
    /// `/tmp/perf-PID.map` and `/tmp/jit-PID.dump`.
    All = 1,
    JitDump = 2,
    PerfMap = 3,
}

/// The `EnablePerfMap` request bytes.
pub fn enable_perf_map_message(kind: PerfMapType) -> Vec<u8> {
    process_message(ENABLE_PERF_MAP, &(kind as u32).to_le_bytes())
}

/// A Process command set request: the 20-byte header for `command` and `payload`.
fn process_message(command: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(20 + payload.len());
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(&((20 + payload.len()) as u16).to_le_bytes());
    m.push(PROCESS_COMMAND_SET);
    m.push(command);
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(payload);
    m
}

/// The diagnostics socket of `pid`, connected; `None` when the runtime has none (not .NET,
/// diagnostics disabled with `DOTNET_EnableDiagnostics=0`, or another `TMPDIR`). The folder and
/// the name come from the process, so the folder is opened inside its root
/// ([`Process::open_in_root`]'s rules: no symlink there reaches the host), the socket must be a
/// socket in that folder (not a symlink), and the peer must be the process itself
/// (`SO_PEERCRED`, unix(7)): anything else is refused, so netprobe never writes to another
/// program's socket.
pub fn connect_diagnostic_socket(pid: u32) -> Result<Option<(PathBuf, UnixStream)>> {
    use rustix::fs::{AtFlags, FileType};
    use std::os::fd::AsRawFd;
    let process = Process::open(pid)?;
    let nspid = crate::symbolize::jit::namespace_pid(&process);
    // The runtime binds the socket in its `TMPDIR`, `/tmp` without one
    // (`src/native/eventpipe/ds-ipc-pal-socket.c`, `ipc_transport_get_default_name`).
    let tmpdir = crate::symbolize::jit::env_var(&process, &["TMPDIR"])
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let shown = process
        .root()
        .join(tmpdir.strip_prefix("/").unwrap_or(&tmpdir));
    let Ok(dir) = process.open_dir_in_root(&tmpdir) else {
        return Ok(None);
    };
    // The opened folder, named through our own descriptor table: nothing in this path can be
    // swapped any more.
    let dir_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let prefix = format!("dotnet-diagnostic-{nspid}-");
    let Ok(entries) = std::fs::read_dir(&dir_path) else {
        return Ok(None);
    };
    let mut found: Vec<std::ffi::OsString> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| {
            n.to_str()
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with("-socket"))
        })
        .collect();
    found.sort();
    let Some(name) = found.pop() else {
        return Ok(None);
    };
    let socket = shown.join(&name);
    let refuse = |why: String| {
        Error::Unsupported(format!(
            "refusing {}: {why}; it is not the .NET runtime's diagnostics socket of process {pid}",
            socket.display()
        ))
    };
    let stat = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| Error::io(&socket, e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Socket {
        return Err(refuse(
            "it is not a socket (a symlink or another file put there)".into(),
        ));
    }
    let stream = connect_within(&dir_path.join(&name), Duration::from_secs(5))
        .map_err(|e| Error::io(&socket, e))?;
    let peer = peer_pid(&stream).map_err(|e| Error::io(&socket, e))?;
    if peer != pid {
        return Err(refuse(format!(
            "the program listening on it is process {peer} (0: outside this pid namespace)"
        )));
    }
    Ok(Some((socket, stream)))
}

/// Connects to the Unix socket at `path` without waiting on a listener that does not accept: a
/// blocking `connect(2)` to a stream socket whose backlog is full waits until the listener
/// accepts (unix(7)), which a hostile target can make forever. Non-blocking, such a connect fails
/// at once with `EAGAIN`; it is tried again until `within` has passed, then refused. The stream
/// returned blocks (reads have their own timeout).
#[allow(unsafe_code)]
fn connect_within(path: &std::path::Path, within: Duration) -> std::io::Result<UnixStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeros is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if bytes.len() >= addr.sun_path.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: socket(2) with constant arguments; the descriptor is owned right after.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let deadline = std::time::Instant::now() + within;
    loop {
        // SAFETY: `addr` is a valid sockaddr_un of the size passed; `fd` is open (owned by
        // `sock` for the whole call).
        let rc = unsafe {
            libc::connect(
                fd,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
        if std::time::Instant::now() >= deadline {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the listener accepts no connection (its backlog stays full)",
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: fcntl(2) on the open descriptor: clear O_NONBLOCK so reads use their timeout.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(UnixStream::from(sock))
}

/// The pid, in netprobe's pid namespace, of the process that created the listening end of a
/// connected Unix socket (`SO_PEERCRED`, unix(7)); 0 when that process is outside our pid
/// namespace.
#[allow(unsafe_code)]
fn peer_pid(stream: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `cred`, a plain C struct of that
    // size that lives across the call; the descriptor is open for the borrow of `stream`.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u32::try_from(cred.pid).unwrap_or(0))
}

/// Asks the .NET runtime of process `pid` to start writing perf maps (and jitdump) now, methods
/// compiled so far included. Errors: [`Error::Unsupported`] naming the cause and the fix when the
/// process has no diagnostics socket or the runtime refuses (runtimes before .NET 8 do not know
/// the command).
pub fn enable_perf_map(pid: u32, kind: PerfMapType) -> Result<()> {
    process_command(pid, &enable_perf_map_message(kind), "EnablePerfMap")
}

/// Asks the .NET runtime of process `pid` to stop writing perf maps (`DisablePerfMap`, .NET 8+):
/// it closes the files and leaves them where they are. Errors as [`enable_perf_map`]'s.
pub fn disable_perf_map(pid: u32) -> Result<()> {
    process_command(pid, &disable_perf_map_message(), "DisablePerfMap")
}

/// The `DisablePerfMap` request bytes: the header alone.
pub fn disable_perf_map_message() -> Vec<u8> {
    process_message(DISABLE_PERF_MAP, &[])
}

/// Sends one Process command set `request` to the runtime of `pid` and reads the server's
/// answer: `Ok` for OK, an error naming `command` and the HRESULT for an error answer.
fn process_command(pid: u32, request: &[u8], command: &str) -> Result<()> {
    let Some((socket, mut s)) = connect_diagnostic_socket(pid)? else {
        return Err(Error::Unsupported(format!(
            "process {pid} has no .NET diagnostics socket (/tmp/dotnet-diagnostic-{pid}-*-socket): not a .NET process, or started with DOTNET_EnableDiagnostics=0; restart it with DOTNET_PerfMapEnabled=1 to get JIT names"
        )));
    };
    let io = |e: std::io::Error| Error::io(&socket, e);
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    s.write_all(request).map_err(io)?;
    let mut reply = [0u8; 24];
    s.read_exact(&mut reply[..20]).map_err(io)?;
    let ok = &reply[..14] == MAGIC && reply[16] == SERVER_COMMAND_SET && reply[17] == SERVER_OK;
    if ok {
        return Ok(());
    }
    let _ = s.read_exact(&mut reply[20..24]);
    let hresult = u32::from_le_bytes([reply[20], reply[21], reply[22], reply[23]]);
    Err(Error::Unsupported(format!(
        "the .NET runtime of process {pid} refused {command} (HRESULT {hresult:#x}; the command exists from .NET 8 on): restart it with DOTNET_PerfMapEnabled=1 to get JIT names"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener that never accepts, its backlog filled: connecting gives up after the time
    /// given instead of waiting for ever; with room in the backlog it connects.
    #[test]
    fn a_listener_that_accepts_nothing_does_not_hang_the_connect() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut held = Vec::new();
        let full = loop {
            match connect_within(&path, Duration::ZERO) {
                Ok(s) => held.push(s),
                Err(e) => break e,
            }
            assert!(held.len() < 100_000, "the backlog never filled");
        };
        assert_eq!(full.kind(), std::io::ErrorKind::TimedOut, "{full}");
        let started = std::time::Instant::now();
        let e = connect_within(&path, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(2));
        held.clear();
    }

    #[test]
    fn request_is_header_and_type() {
        let m = enable_perf_map_message(PerfMapType::All);
        assert_eq!(m.len(), 24);
        assert_eq!(&m[..14], b"DOTNET_IPC_V1\0");
        assert_eq!(&m[14..], &[24, 0, 4, 5, 0, 0, 1, 0, 0, 0]);
        let d = disable_perf_map_message();
        assert_eq!(&d[..14], b"DOTNET_IPC_V1\0");
        assert_eq!(&d[14..], &[20, 0, 4, 6, 0, 0]);
    }
}
