//! Names for the JIT-compiled code of the .NET processes a stack-taking command looks at
//! (`profile`, `trace --stack`, `count --stack`): each one's perf map turned on for the session
//! and off at its end ([`netprobe_core::ipc::perf_map_session`]), one line said for each, and
//! `--no-perf-map` to leave the processes alone.

use netprobe_core::ipc::perf_map_session::{begin, Begun, PerfMapSession};
use netprobe_core::symbolize::note;

/// The perf maps a command turned on, turned off by [`JitNames::end`] (or when dropped,
/// silently).
#[derive(Default)]
pub struct JitNames {
    sessions: Vec<PerfMapSession>,
}

/// Turns the perf map of each .NET process of `pids` on for the command (nothing when
/// `leave_off`, the user's `--no-perf-map`); says what it did or why it could not, once per
/// process.
pub fn turn_on(pids: &[u32], leave_off: bool) -> JitNames {
    let mut names = JitNames::default();
    if leave_off {
        return names;
    }
    for &pid in pids {
        let say = |line: String| crate::printable::eprint_line(&format!("netprobe: {line}"));
        match begin(pid) {
            None | Some(Begun::AlreadyOn(_)) => {}
            Some(Begun::TurnedOn(s)) => {
                say(format!(
                    "turned on the .NET perf map of process {pid} ({}) to name its JIT-compiled code; netprobe turns it off when it ends (--no-perf-map leaves it off)",
                    s.perf_map.display()
                ));
                names.sessions.push(s);
            }
            Some(Begun::Shared(s)) => {
                say(format!(
                    "the .NET perf map of process {pid} is on for another netprobe session; the last one to end turns it off"
                ));
                names.sessions.push(s);
            }
            Some(Begun::Foreign(path)) => {
                say(format!(
                    "note: process {pid} already has a perf map netprobe did not turn on ({}): reading it as it is, leaving it as it is",
                    path.display()
                ));
            }
            Some(Begun::Unavailable(why)) => {
                note::jit_names_explained(pid);
                say(format!("note: {why}"));
            }
        }
    }
    names
}

impl JitNames {
    /// Turns off what [`turn_on`] turned on (the last netprobe session using a map does), saying
    /// so once per process.
    pub fn end(self) {
        for s in self.sessions {
            if let Some(line) = s.end() {
                crate::printable::eprint_line(&format!("netprobe: {line}"));
            }
        }
    }
}
