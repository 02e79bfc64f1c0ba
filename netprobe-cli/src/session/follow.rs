//! Following a container through restarts (`count`/`latency --container NAME --metrics`): when
//! its traced processes are gone, the probes are taken out, and the session waits for the
//! container's new processes and places the probes on them again.

use super::container::join_pids;
use super::placing::{check_overhead_plan, counts_in_kernel, start_backend, Scoping};
use super::planning::{checked_plan, PlanRequest};
use super::Session;
use crate::backend::Backend;
use crate::error::Result;
use crate::lang::dotnet;
use crate::runner::{Executables, StopReason};
use crate::spec::Targeting;
use netprobe_core::ipc::docker::ContainerInfo;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How a followed container came back.
pub enum Reattached {
    /// Its new processes are traced (the container as the engine now knows it).
    Attached(ContainerInfo),
    /// A signal or the duration ended the wait.
    Stopped(StopReason),
}

/// How often a followed container is asked for its new processes while none runs (the Docker
/// Engine API's inspect; the socket is local, an answer takes about a millisecond).
const REATTACH_POLL: Duration = Duration::from_millis(250);

/// How long a new process may fail to resolve before the failure is said on stderr: right
/// after a restart the container's first process can still be the runtime's init (`runc init`),
/// which execs the program a moment later.
const REATTACH_QUIET: Duration = Duration::from_secs(2);

impl Session {
    /// Takes the probes out of the targets (a followed container's processes, which are gone or
    /// run another program), keeping the session: [`Session::reattach`] may place them again.
    pub fn detach(&mut self) -> Result<()> {
        self.backend.detach()
    }

    /// After [`Session::detach`], waits for the followed container's new processes (those running a program: a zombie's
    /// `/proc/PID/exe` does not resolve); resolves the specs against them again (the image may
    /// be another build) and places the probes with the same session name, so the watchdog and
    /// `netprobe clean` know them. Ends early on a signal or the duration. A failure to resolve
    /// or attach is said once it persists, and retried. Without a followed container there is
    /// nothing to wait for.
    pub fn reattach(&mut self) -> Result<Reattached> {
        let Some(info) = self.followed.clone() else {
            return Ok(Reattached::Stopped(StopReason::TargetsExited));
        };
        match wait_for(self, &info)? {
            Reattached::Attached(now) => {
                self.followed = Some(now.clone());
                Ok(Reattached::Attached(now))
            }
            stopped => Ok(stopped),
        }
    }
}

/// The waiting of [`Session::reattach`].
fn wait_for(s: &mut Session, info: &ContainerInfo) -> Result<Reattached> {
    let socket = netprobe_core::ipc::docker::socket_path();
    let mut failing: Option<(Vec<u32>, Instant)> = None;
    let mut said = String::new();
    loop {
        if let Some(sig) = s.signals.received() {
            return Ok(Reattached::Stopped(StopReason::Signal(sig)));
        }
        if s.options.duration.is_some_and(|d| s.started.elapsed() >= d) {
            return Ok(Reattached::Stopped(StopReason::Duration));
        }
        let found = netprobe_core::ipc::docker::container_processes(
            &socket,
            &info.id,
            netprobe_core::pid_namespace::sees_global_pids(),
        );
        let attempt = match found {
            Ok((now, pids)) => {
                let pids: Vec<u32> = pids
                    .into_iter()
                    .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok())
                    .collect();
                (!pids.is_empty()).then(|| {
                    let tried = attach_to(s, &pids);
                    (now, pids, tried)
                })
            }
            // Stopped, restarting, or between processes: wait.
            Err(
                netprobe_core::ipc::docker::ContainerError::NotRunning { .. }
                | netprobe_core::ipc::docker::ContainerError::NoVisibleProcess { .. },
            ) => None,
            Err(e) => {
                let text = e.to_string();
                if text != said {
                    crate::printable::eprint_line(&format!(
                        "netprobe: warning: {text}; still waiting"
                    ));
                    said = text;
                }
                None
            }
        };
        match attempt {
            Some((now, pids, Ok(attached))) => {
                let Attached {
                    backend,
                    guard,
                    executables,
                } = attached;
                s.backend = backend;
                s.guard = guard;
                s.executables = executables;
                s.pids = pids;
                return Ok(Reattached::Attached(now));
            }
            Some((_, pids, Err(e))) => {
                let since = match &failing {
                    Some((p, t)) if *p == pids => *t,
                    _ => {
                        failing = Some((pids.clone(), Instant::now()));
                        Instant::now()
                    }
                };
                let text = e.to_string();
                if since.elapsed() >= REATTACH_QUIET && text != said {
                    crate::printable::eprint_line(&format!(
                        "netprobe: container {}: cannot attach to pid {}: {text}; retrying",
                        info.name,
                        join_pids(&pids)
                    ));
                    said = text;
                }
            }
            None => failing = None,
        }
        let mut fd = libc::pollfd {
            fd: s.signals.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        unsafe { libc::poll(&mut fd, 1, REATTACH_POLL.as_millis() as libc::c_int) };
    }
}

/// A followed container's new processes, traced.
struct Attached {
    backend: Box<dyn Backend>,
    guard: dotnet::Guard,
    executables: Executables,
}

/// Resolves and attaches to `pids` (a followed container's new processes) with the session's
/// specs and options; nothing stays placed on failure.
fn attach_to(s: &Session, pids: &[u32]) -> Result<Attached> {
    for &p in pids {
        netprobe_core::process::Process::open(p)?.check_runs_user_code()?;
    }
    let executables = Executables::of(pids);
    let targeting = Targeting::Pids(pids.to_vec());
    let o = &s.options;
    let (plan, report, guard) = checked_plan(&PlanRequest {
        mode: s.mode,
        specs: &s.specs,
        targeting: &targeting,
        dotnet_command: None,
        pids,
        filter: &s.filter,
        force_uretprobe: o.force_uretprobe,
        keep_r2r: o.keep_r2r,
        stack: o.stack,
        gate: o.gate,
    })?;
    let plan = report.approve(plan)?;
    let mut instance = s.instance.clone();
    instance.pids = Some(pids.to_vec());
    check_overhead_plan(o, &plan)?;
    let scoping = Scoping {
        held_command: false,
        in_kernel: counts_in_kernel(s.mode, o, &plan),
        probe_per_event: o.max_overhead.is_some(),
    };
    Ok(Attached {
        backend: start_backend(&s.tracefs, &instance, plan, None, scoping)?,
        guard,
        executables,
    })
}
