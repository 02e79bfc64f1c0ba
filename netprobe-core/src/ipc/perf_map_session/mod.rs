//! Names for a running .NET process's JIT-compiled code for the length of one netprobe session:
//! its runtime's perf map turned on through the diagnostics socket when the session starts
//! (`EnablePerfMap`, .NET 8+: the runtime writes every method compiled so far, then each new
//! one), and turned off again when the session ends (`DisablePerfMap`), leaving the process as
//! it was found: the files the runtime made for netprobe are removed, a perf map that was on
//! before stays on, and while several netprobe sessions use one process's map, the last one to
//! end turns it off ([`claims`]).
//!
//! What is checked first, each with the line said instead:
//! - a process started with `DOTNET_PerfMapEnabled` (or `COMPlus_`) already writes its map:
//!   nothing to do;
//! - a runtime before .NET 8 has no such command (`src/native/eventpipe/ds-protocol.c` of .NET
//!   8 added `EnablePerfMap`): the variable to restart it with;
//! - `DOTNET_EnableDiagnostics=0` (or `DOTNET_EnableDiagnostics_IPC=0`, .NET 8) removes the
//!   socket (`src/coreclr/inc/clrconfignames.h`): the variable to drop;
//! - a perf map file is there that netprobe did not make (another tool turned it on, or left
//!   it): used as it is, never turned off by netprobe.
//!
//! Microsoft documents perf maps as costing the target while on (BENCHMARKS.md measures it).
//!
//! ```no_run
//! use netprobe_core::ipc::perf_map_session::{begin, Begun};
//! match begin(1234) {
//!     Some(Begun::TurnedOn(session)) => {
//!         // ... profile, naming JIT frames from the perf map ...
//!         let _said = session.end();
//!     }
//!     Some(Begun::Unavailable(why)) => eprintln!("{why}"),
//!     _ => {}
//! }
//! ```

pub mod claims;

use crate::dotnet::runtime::{env_knob, runtime_of_process};
use crate::ipc::dotnet_diagnostics::{disable_perf_map, enable_perf_map, PerfMapType};
use crate::process::Process;
use crate::symbolize::jit::PerfMapFiles;
use claims::{Claim, Record, Taken};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// What starting a session found and did about a process's perf map.
#[derive(Debug)]
pub enum Begun {
    /// netprobe turned the perf map on (or found it on because of an earlier netprobe session
    /// that is gone); [`PerfMapSession::end`] turns it off.
    TurnedOn(PerfMapSession),
    /// Another running netprobe session turned it on; the last session to end turns it off.
    Shared(PerfMapSession),
    /// The process was started with its perf map on (the variable that did it).
    AlreadyOn(String),
    /// A perf map file netprobe did not make is there: read as it is, left alone.
    Foreign(PathBuf),
    /// It cannot be turned on: one line naming the cause and the fix.
    Unavailable(String),
}

/// A session's use of a process's perf map; ended by [`PerfMapSession::end`], or when dropped.
#[derive(Debug)]
pub struct PerfMapSession {
    pid: u32,
    claim: Option<Claim>,
    /// The folder of the runtime's files, opened in the process's root when the session began
    /// (so that what the runtime made is removed even after the process exited), and their names.
    dir: Option<OwnedFd>,
    files: PerfMapFiles,
    /// The perf map's path as the process names it.
    pub perf_map: PathBuf,
    ended: bool,
}

/// Starts naming the JIT code of process `pid` for a session; `None` when the process runs no
/// .NET runtime netprobe can name.
pub fn begin(pid: u32) -> Option<Begun> {
    let (version, _) = runtime_of_process(pid)?;
    let process = Process::open(pid).ok()?;
    let env = crate::dotnet::runtime::environment_of(pid);
    let restart = format!(
        "restart it with {}=1",
        version.recommended("PerfMapEnabled")
    );
    if let Some((v, var)) = env_knob(&env, &version, "PerfMapEnabled", &mut Vec::new()) {
        if v != 0 {
            return Some(Begun::AlreadyOn(var));
        }
    }
    if version.major < 8 {
        return Some(Begun::Unavailable(format!(
            "process {pid} runs {}, which cannot turn its perf map on while it runs (the diagnostics command came with .NET 8), so its JIT-compiled frames stay [unknown]: {restart} to name them",
            version.label()
        )));
    }
    for k in ["EnableDiagnostics", "EnableDiagnostics_IPC"] {
        if let Some((0, var)) = env_knob(&env, &version, k, &mut Vec::new()) {
            return Some(Begun::Unavailable(format!(
                "process {pid} was started with {var}, so it has no diagnostics socket to turn its perf map on through and its JIT-compiled frames stay [unknown]: {restart} (or without {var})"
            )));
        }
    }
    let files = PerfMapFiles::of(&process);
    let start_time = process.start_time().ok()?;
    // Without a claims folder (netprobe cannot write /run) the session is taken as the only one.
    let (claim, taken) = match Claim::take(pid, start_time) {
        Ok((c, t)) => (Some(c), t),
        Err(_) => (None, Taken::First),
    };
    let mut session = PerfMapSession {
        pid,
        claim,
        dir: process.open_dir_in_root(&files.dir).ok(),
        perf_map: files.dir.join(&files.perf_map),
        files,
        ended: false,
    };
    if let Taken::Shared(_) = taken {
        return Some(Begun::Shared(session));
    }
    if taken == Taken::First {
        if session.has(&session.files.perf_map) {
            session.ended = true;
            if let Some(c) = session.claim.take() {
                c.abandon();
            }
            return Some(Begun::Foreign(session.perf_map.clone()));
        }
        let record = Record {
            perf_map_created: true,
            perf_info_created: !session.has(&session.files.perf_info),
        };
        // Without the record, the last session would not know what to remove: then the
        // session goes on alone (the claim is dropped, the map still turned off at its end).
        if session
            .claim
            .as_mut()
            .is_some_and(|c| c.record(record).is_err())
        {
            session.claim = None;
        }
    }
    match enable_perf_map(pid, PerfMapType::PerfMap) {
        Ok(()) => Some(Begun::TurnedOn(session)),
        Err(e) => {
            // Nothing was turned on: nothing to restore but what an orphaned record says.
            session.ended = true;
            if let (Some(c), Taken::First) = (session.claim.take(), &taken) {
                c.abandon();
            }
            Some(Begun::Unavailable(format!(
                "{e}; its JIT-compiled frames stay [unknown]"
            )))
        }
    }
}

/// Turns off the perf maps that killed netprobe sessions left on (an unheld claim with a
/// record, [`claims`]), as their last session would have, and removes claims of processes that
/// are gone. Returns a line per process dealt with. For `netprobe clean`.
pub fn end_orphans() -> Vec<String> {
    let mut said = Vec::new();
    let Ok(entries) = std::fs::read_dir(claims::CLAIMS_DIR) else {
        return said;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((pid, start)) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, t)| Some((p.parse::<u32>().ok()?, t.parse::<u64>().ok()?)))
        else {
            continue;
        };
        let Ok((claim, taken)) = Claim::take(pid, start) else {
            continue;
        };
        let process = Process::open(pid)
            .ok()
            .filter(|p| p.start_time().ok() == Some(start));
        match (taken, process) {
            (Taken::Orphaned(_), Some(process)) => {
                let files = PerfMapFiles::of(&process);
                let session = PerfMapSession {
                    pid,
                    claim: Some(claim),
                    dir: process.open_dir_in_root(&files.dir).ok(),
                    perf_map: files.dir.join(&files.perf_map),
                    files,
                    ended: false,
                };
                said.extend(session.end());
            }
            (Taken::Shared(_), _) => {
                let _ = claim.end();
            }
            (_, None) => {
                // Gone: its files went with its /tmp or stay as the runtime left them; the
                // claim names nothing any more.
                let _ = claim.end();
                said.push(format!(
                    "process {pid} is gone: its perf map claim is removed"
                ));
            }
            (Taken::First, Some(_)) => claim.abandon(),
        }
    }
    said
}

impl PerfMapSession {
    /// Whether the runtime's folder holds an entry `name` (a symlink counts: it is not
    /// followed, and not netprobe's).
    fn has(&self, name: &str) -> bool {
        self.dir.as_ref().is_some_and(|d| {
            rustix::fs::statat(d, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
        })
    }

    /// Ends the session's use of the perf map: the last session turns it off and removes the
    /// files the runtime made for netprobe. Returns what was done, as a line to say.
    pub fn end(mut self) -> Option<String> {
        self.finish()
    }

    fn finish(&mut self) -> Option<String> {
        self.ended = true;
        let record = match self.claim.take() {
            Some(c) => c.end()?,
            // No claims folder: this session turned the map on and is the only one it knows.
            None => Record {
                perf_map_created: true,
                perf_info_created: false,
            },
        };
        let pid = self.pid;
        let gone = Process::open(pid).is_err();
        let off = if gone { Ok(()) } else { disable_perf_map(pid) };
        if let Some(dir) = &self.dir {
            for (made, name) in [
                (record.perf_map_created, &self.files.perf_map),
                (record.perf_info_created, &self.files.perf_info),
            ] {
                // Only a regular file of that name, and never through a symlink: the folder is
                // the process's, and anything in it may have been put there.
                let regular =
                    rustix::fs::statat(dir, name.as_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| {
                            rustix::fs::FileType::from_raw_mode(st.st_mode)
                                == rustix::fs::FileType::RegularFile
                        });
                if made && regular {
                    let _ = rustix::fs::unlinkat(dir, name.as_str(), rustix::fs::AtFlags::empty());
                }
            }
        }
        Some(match off {
            Ok(()) if gone => format!(
                "process {pid} exited; the perf map files netprobe made it write are removed"
            ),
            Ok(()) => format!("turned the .NET perf map of process {pid} off again"),
            Err(e) => format!("could not turn the .NET perf map of process {pid} off: {e}"),
        })
    }
}

impl Drop for PerfMapSession {
    /// A session that is not ended explicitly (an error on the way out) still restores.
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.finish();
        }
    }
}
