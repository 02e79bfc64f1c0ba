//! Turning on perf maps in a running .NET 8+ process through its diagnostics IPC channel, as
//! `dotnet-trace`/`dotnet-counters` talk to it. Not part of symbolizing (which only reads): a
//! caller sends it when the user asks for JIT names of a process started without
//! `DOTNET_PerfMapEnabled`.
//!
//! Protocol (dotnet/diagnostics `documentation/design-docs/ipc-protocol.md`; dotnet/runtime
//! `src/native/eventpipe/ds-protocol.h`, `ds-process-protocol.h`, `ds-types.h`):
//! - the runtime listens on a Unix socket `$TMPDIR/dotnet-diagnostic-{pid}-{disambiguation}-socket`
//!   (pid in the process's own pid namespace; reached here through `/proc/PID/root/...` when the
//!   process has another root);
//! - a message is a 20-byte header: magic `"DOTNET_IPC_V1\0"` (14 bytes), `size` (u16, header plus
//!   payload), `command_set` (u8), `command_id` (u8), `reserved` (u16, 0), then the payload;
//! - Process command set `0x04`, `EnablePerfMap` = `0x05` (.NET 8+), payload `uint32 perfMapType`
//!   (`src/coreclr/vm/perfmap.h`, `PerfMapType`: 1 = perf map and jitdump, 2 = jitdump only,
//!   3 = perf map only);
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
    let mut m = Vec::with_capacity(24);
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(&24u16.to_le_bytes());
    m.push(PROCESS_COMMAND_SET);
    m.push(ENABLE_PERF_MAP);
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(&(kind as u32).to_le_bytes());
    m
}

/// The diagnostics socket of `pid` as netprobe opens it; `None` when the runtime has none
/// (not .NET, diagnostics disabled with `DOTNET_EnableDiagnostics=0`, or another `TMPDIR`).
pub fn diagnostic_socket(pid: u32) -> Result<Option<PathBuf>> {
    let process = Process::open(pid)?;
    let nspid = super::jit::namespace_pid(&process);
    // The runtime binds the socket in its `TMPDIR`, `/tmp` without one
    // (`src/native/eventpipe/ds-ipc-pal-socket.c`, `ipc_transport_get_default_name`).
    let tmpdir =
        super::jit::env_var(&process, &["TMPDIR"]).unwrap_or_else(|| PathBuf::from("/tmp"));
    let tmp = process.host_path(&tmpdir);
    let prefix = format!("dotnet-diagnostic-{nspid}-");
    let Ok(dir) = std::fs::read_dir(&tmp) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with("-socket"))
        })
        .collect();
    found.sort();
    Ok(found.pop())
}

/// Asks the .NET runtime of process `pid` to start writing perf maps (and jitdump) now. Errors:
/// [`Error::Unsupported`] naming the cause and the fix when the process has no diagnostics
/// socket or the runtime refuses (runtimes before .NET 8 do not know the command).
pub fn enable_perf_map(pid: u32, kind: PerfMapType) -> Result<()> {
    let Some(socket) = diagnostic_socket(pid)? else {
        return Err(Error::Unsupported(format!(
            "process {pid} has no .NET diagnostics socket (/tmp/dotnet-diagnostic-{pid}-*-socket): not a .NET process, or started with DOTNET_EnableDiagnostics=0; restart it with DOTNET_PerfMapEnabled=1 to get JIT names"
        )));
    };
    let io = |e: std::io::Error| Error::io(&socket, e);
    let mut s = UnixStream::connect(&socket).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    s.write_all(&enable_perf_map_message(kind)).map_err(io)?;
    let mut reply = [0u8; 24];
    s.read_exact(&mut reply[..20]).map_err(io)?;
    let ok = &reply[..14] == MAGIC && reply[16] == SERVER_COMMAND_SET && reply[17] == SERVER_OK;
    if ok {
        return Ok(());
    }
    let _ = s.read_exact(&mut reply[20..24]);
    let hresult = u32::from_le_bytes([reply[20], reply[21], reply[22], reply[23]]);
    Err(Error::Unsupported(format!(
        "the .NET runtime of process {pid} refused EnablePerfMap (HRESULT {hresult:#x}; the command exists from .NET 8 on): restart it with DOTNET_PerfMapEnabled=1 to get JIT names"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_header_and_type() {
        let m = enable_perf_map_message(PerfMapType::All);
        assert_eq!(m.len(), 24);
        assert_eq!(&m[..14], b"DOTNET_IPC_V1\0");
        assert_eq!(&m[14..], &[24, 0, 4, 5, 0, 0, 1, 0, 0, 0]);
    }
}
