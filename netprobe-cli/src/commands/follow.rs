//! Following a container through restarts (`count`/`latency --container NAME --metrics`): when
//! its traced processes are gone, wait for its new ones and place the probes on them again.

use super::live::{checked_plan, join_pids, LiveOptions};
use super::recording::{check_overhead_plan, counts_in_kernel, start_session, Scoping};
use crate::backend::tracefs::session::SessionOptions;
use crate::backend::tracefs::Tracefs;
use crate::backend::Backend;
use crate::error::Result;
use crate::filter::Expr;
use crate::lang::dotnet;
use crate::mode::Mode;
use crate::runner::{self, StopReason};
use crate::signals::SignalPipe;
use crate::spec::Targeting;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// A followed container's new processes, traced.
pub(crate) struct Attachment {
    pub session: Box<dyn Backend>,
    pub pids: Vec<u32>,
    pub guard: dotnet::Guard,
    pub info: netprobe_core::ipc::docker::ContainerInfo,
}

/// How a followed container came back.
pub(crate) enum Reattached {
    Attached(Box<Attachment>),
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

/// Waits for container `info`'s new processes (those running a program: a zombie's
/// `/proc/PID/exe` does not resolve), resolves the specs against them again (the image may be
/// another build) and places the probes with the session options `opts` (the same session
/// name, so the watchdog and `netprobe clean` know them). Ends early on a signal or the
/// duration. A failure to resolve or attach is said once it persists, and retried.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reattach(
    mode: Mode,
    o: &LiveOptions,
    info: &netprobe_core::ipc::docker::ContainerInfo,
    tracefs: &Tracefs,
    opts: &SessionOptions,
    filter: &(Option<Expr>, Option<Expr>),
    signals: &SignalPipe,
    started: Instant,
) -> Result<Reattached> {
    let socket = netprobe_core::ipc::docker::socket_path();
    let mut failing: Option<(Vec<u32>, Instant)> = None;
    let mut said = String::new();
    loop {
        if let Some(sig) = signals.received() {
            return Ok(Reattached::Stopped(StopReason::Signal(sig)));
        }
        if o.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(Reattached::Stopped(StopReason::Duration));
        }
        let found = netprobe_core::ipc::docker::container_processes(
            &socket,
            &info.id,
            crate::pidns::sees_global_pids(),
        );
        let attempt = match found {
            Ok((now, pids)) => {
                let pids: Vec<u32> = pids
                    .into_iter()
                    .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok())
                    .collect();
                (!pids.is_empty()).then(|| {
                    let tried = attach_to(mode, o, tracefs, opts, filter, &pids);
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
            Some((now, pids, Ok((session, guard)))) => {
                return Ok(Reattached::Attached(Box::new(Attachment {
                    session,
                    pids,
                    guard,
                    info: now,
                })))
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
            fd: signals.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        unsafe { libc::poll(&mut fd, 1, REATTACH_POLL.as_millis() as libc::c_int) };
    }
}

/// Resolves and attaches to `pids` (a followed container's new processes); nothing stays
/// placed on failure.
fn attach_to(
    mode: Mode,
    o: &LiveOptions,
    tracefs: &Tracefs,
    opts: &SessionOptions,
    filter: &(Option<Expr>, Option<Expr>),
    pids: &[u32],
) -> Result<(Box<dyn Backend>, dotnet::Guard)> {
    for &p in pids {
        netprobe_core::process::Process::open(p)?.check_runs_user_code()?;
    }
    runner::remember_executables(pids);
    let targeting = Targeting::Pids(pids.to_vec());
    let (plan, report, guard) = checked_plan(mode, o, &targeting, None, pids, filter)?;
    let plan = report.approve(plan)?;
    let mut opts = opts.clone();
    opts.pids = Some(pids.to_vec());
    check_overhead_plan(o, &plan)?;
    let in_kernel = counts_in_kernel(mode, o, false, &plan);
    let scoping = Scoping {
        held_command: false,
        in_kernel,
        probe_per_event: o.max_overhead.is_some(),
    };
    Ok((start_session(tracefs, &opts, plan, None, scoping)?, guard))
}
