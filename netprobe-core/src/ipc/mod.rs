//! The core's one impure module: the code that talks to another program over a socket, and so
//! has effects outside this process. Everything else in `netprobe-core` only reads files and
//! `/proc`; what sits here writes a request and reads the answer:
//!
//! - [`docker`]: a container's id, name, state and main pid from the Docker Engine API
//!   (`GET /containers/{id}/json` over its Unix socket; Docker Engine API reference,
//!   "ContainerInspect"). A read of the engine's state, but a request to a daemon all the same.
//! - [`dotnet_diagnostics`]: the .NET diagnostics IPC command `EnablePerfMap` (dotnet/diagnostics
//!   `documentation/design-docs/ipc-protocol.md`), which changes what the target runtime does
//!   from then on: it starts writing `/tmp/perf-PID.map`. It also holds the module's `unsafe`
//!   block: the `SO_PEERCRED` read that checks the listener is the process asked for.
//!
//! - [`perf_map_session`]: a session's use of that command: turned on at its start, off at its
//!   end, the files the runtime made for it removed, shared between concurrent sessions through
//!   claim files under `/run/netprobe`.
//!
//! - [`debuginfod`]: a build-id's debug file from the debuginfod servers `DEBUGINFOD_URLS` names
//!   (elfutils' protocol, `GET /buildid/HEX/debuginfo`), written to elfutils' cache folder.
//!   Never called unless that variable is set.
//!
//! Kept apart so that a reader, a reviewer or a sandbox policy finds every outgoing effect of
//! the core in one folder, and so that the parsers and resolvers beside it stay pure functions
//! of the bytes they are given.

pub mod debuginfod;
pub mod docker;
pub mod dotnet_diagnostics;
pub mod perf_map_session;
