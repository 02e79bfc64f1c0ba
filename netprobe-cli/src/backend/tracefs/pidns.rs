//! Pid namespaces: trace events and `set_event_pid` speak the kernel's *global* pids, while a
//! netprobe in a container (a sidecar sharing the app's pid namespace: a Kubernetes pod with
//! `shareProcessNamespace: true`, or `docker run --pid=container:ID`) knows only
//! its namespace's pids. Writing namespace pids into `set_event_pid` filters out every hit
//! (found by the Docker harness: 0 hits from the sidecar).
//!
//! Inside a non-initial pid namespace nothing in `/proc` tells the global pid, but trace events
//! do. So netprobe makes each target thread produce one event that names it: writing a thread's
//! own `oom_score_adj` value back to `/proc/PID/task/TID/oom_score_adj` changes nothing and emits
//! `oom:oom_score_adj_update` with that thread's global pid (kernel `fs/proc/base.c`,
//! `__set_oom_adj`, which traces unconditionally). Recorded into netprobe's own instance before
//! any pid filter is set, each event gives one (namespace tid, global tid) pair.
//!
//! Side effect: with CAP_SYS_RESOURCE (not granted to the sidecar set documented in docs/containers-and-metrics.md)
//! the kernel also sets the process's `oom_score_adj_min` to its current value.

use crate::backend::tracefs::instance::{threads_of, Instance};
use crate::backend::PidMap;
use crate::error::{Error, Result};
use netprobe_core::process::Process;

const OOM_EVENT: &str = "events/oom/oom_score_adj_update";

/// Maps every thread of `pids` (our namespace's ids) to its global id through `inst`, which must
/// have no pid filter yet. Errors name the cause and the fix.
pub fn calibrate(inst: &Instance, pids: &[u32]) -> Result<PidMap> {
    if !inst.dir().join(OOM_EVENT).is_dir() {
        return Err(Error::Usage(
            "this kernel has no oom:oom_score_adj_update event, which netprobe needs to find the kernel's pids of the target from inside a pid namespace: run netprobe from the host (or a container sharing the host's pid namespace)".into(),
        ));
    }
    inst.write(format!("{OOM_EVENT}/enable"), "1")?;
    let result = (|| -> Result<PidMap> {
        let mut map = PidMap::default();
        for &pid in pids {
            let mut tids = threads_of(pid);
            if tids.is_empty() {
                tids.push(pid);
            }
            for tid in tids {
                if let Some(global) = global_tid(inst, pid, tid)? {
                    map.insert(global, (pid, tid));
                }
            }
        }
        Ok(map)
    })();
    let off = inst.write(format!("{OOM_EVENT}/enable"), "0");
    let cleared = inst.write("trace", "");
    let map = result?;
    off?;
    cleared?;
    if map.is_empty() && !pids.is_empty() {
        return Err(Error::Usage(format!(
            "could not find the kernel's pids of {pids:?} from inside this pid namespace (no oom_score_adj_update event came back): run netprobe from the host"
        )));
    }
    Ok(map)
}

/// The global id of thread `tid` of process `pid`; `None` when the thread is gone.
fn global_tid(inst: &Instance, pid: u32, tid: u32) -> Result<Option<u32>> {
    let proc = Process::open(pid)?;
    let file = proc.dir().join(format!("task/{tid}/oom_score_adj"));
    let Ok(value) = std::fs::read_to_string(&file) else {
        return Ok(None); // exited meanwhile
    };
    inst.write("trace", "")?; // empty the instance's buffer (only ours)
    if let Err(e) = std::fs::write(&file, value.trim()) {
        if !file.exists() {
            return Ok(None);
        }
        return Err(netprobe_core::Error::io(&file, e).into());
    }
    let text = inst.read("trace")?;
    let comm =
        std::fs::read_to_string(proc.dir().join(format!("task/{tid}/comm"))).unwrap_or_default();
    Ok(parse_oom_events(&text)
        .into_iter()
        .find(|(_, c)| *c == comm.trim_end())
        .map(|(g, _)| g))
}

/// `(global pid, comm)` of each `oom_score_adj_update` line of a `trace` file:
/// `<comm>-<pid> [cpu] ... : oom_score_adj_update: pid=G comm=C oom_score_adj=V`.
fn parse_oom_events(text: &str) -> Vec<(u32, &str)> {
    text.lines()
        .filter_map(|l| l.split("oom_score_adj_update: pid=").nth(1))
        .filter_map(|rest| {
            let (pid, rest) = rest.split_once(" comm=")?;
            let comm = rest.rsplit_once(" oom_score_adj=")?.0;
            Some((pid.parse().ok()?, comm))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the kernel prints them (6.18 here), a comm with a space included.
    #[test]
    fn oom_event_lines() {
        let text = "# tracer: nop\n\
            netprobe-12 [001] ..... 5.1: oom_score_adj_update: pid=4242 comm=dotnet oom_score_adj=0\n\
            netprobe-12 [001] ..... 5.2: oom_score_adj_update: pid=77 comm=my app oom_score_adj=-100\n";
        assert_eq!(
            parse_oom_events(text),
            vec![(4242, "dotnet"), (77, "my app")]
        );
    }
}
