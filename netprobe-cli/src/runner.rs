//! The event loop of a session: poll the per-CPU buffers, the signal pipe and the targets' pidfds;
//! hand hits to a sink; stop on a signal, the duration, the event limit, the targets' exit or a
//! closed output.

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::launch::PausedChild;
use crate::overhead::OverheadMeter;
use crate::signals::SignalPipe;
use crate::sinks::{Flow, Sink};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Signal(i32),
    Duration,
    MaxEvents,
    TargetsExited,
    /// A `-p` target ran `execve(2)`: its pid lives on with another program, so the probes on
    /// its old image no longer apply.
    TargetExeced(u32),
    OutputClosed,
    /// The sink asked to stop ([`Sink::stop_requested`]): its owner ended the run.
    Requested,
}

impl std::fmt::Display for StopReason {
    /// The reason as netprobe reports it (`stopped by SIGINT`, `target exited`, ...).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Signal(s) => write!(f, "stopped by {}", crate::signals::name(*s)),
            StopReason::Duration => f.write_str("duration reached"),
            StopReason::MaxEvents => f.write_str("event limit reached"),
            StopReason::TargetsExited => f.write_str("target exited"),
            StopReason::TargetExeced(pid) => write!(
                f,
                "target {pid} ran another program (execve), so the probes on its old image no longer apply;{} stopped",
                exe_of(*pid).map_or(String::new(), |e| format!(" it now runs {e};"))
            ),
            StopReason::OutputClosed => f.write_str("output closed"),
            StopReason::Requested => f.write_str("stopped by its caller"),
        }
    }
}

/// When to stop, besides signals.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub duration: Option<Duration>,
    pub interval: Option<Duration>,
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: plain syscall; returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The executable process `pid` runs now (`/proc/PID/exe` followed), by device and inode;
/// `None` when unreadable (gone, or a kernel thread).
fn exe_id(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The executables `-p` targets ran when their probes were resolved, by pid (device and inode
/// of `/proc/PID/exe`): an exec between resolving and the start of the loop must count as one.
#[derive(Clone, Debug, Default)]
pub struct Executables(Vec<(u32, (u64, u64))>);

impl Executables {
    /// Records the executable each of `pids` runs now. Take it before resolving probes against
    /// those processes; [`run`] compares against it (for a pid not recorded, against what it runs
    /// when the loop starts).
    pub fn of(pids: &[u32]) -> Executables {
        Executables(pids.iter().filter_map(|&p| Some((p, exe_id(p)?))).collect())
    }

    fn at_resolve(&self, pid: u32) -> Option<(u64, u64)> {
        self.0.iter().find(|(q, _)| *q == pid).map(|(_, id)| *id)
    }
}

/// What the loop watches: the target processes (they exiting or exec'ing ends it), netprobe's
/// own `-c` child among them (reaped, and free to exec), and what the targets ran at resolve.
pub struct Targets<'a> {
    pub pids: &'a [u32],
    pub child: Option<&'a mut PausedChild>,
    pub executables: &'a Executables,
}

/// The path of the executable process `pid` runs now, as `/proc/PID/exe` names it.
fn exe_of(pid: u32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.display().to_string())
}

/// Runs until a stop condition; the backend still holds its probes afterwards (call
/// [`Backend::stop`] and [`Backend::detach`]).
pub fn run(
    session: &mut dyn Backend,
    signals: &SignalPipe,
    targets: Targets<'_>,
    limits: Limits,
    sink: &mut dyn Sink,
) -> Result<StopReason> {
    run_metered(session, signals, targets, limits, sink, None)
}

/// [`run`] with an [`OverheadMeter`]: every hit and kernel count is shown to it; once a second
/// (the kernel's counts read then) it closes a window, and the functions it finds over the
/// budget (`--max-overhead`) have their probes taken out of the session, said on stderr; each
/// interval tick says the estimated cost of the interval on stderr.
pub fn run_metered(
    session: &mut dyn Backend,
    signals: &SignalPipe,
    targets: Targets<'_>,
    limits: Limits,
    sink: &mut dyn Sink,
    mut meter: Option<&mut OverheadMeter>,
) -> Result<StopReason> {
    let start = Instant::now();
    let deadline = limits.duration.map(|d| start + d);
    let mut next_tick = limits.interval.map(|i| start + i);
    // What the backend lost so far goes to the sink about once a second (`--metrics`).
    let mut next_lost = start + Duration::from_secs(1);
    // Targets are watched through pidfds; a pid without one (old kernel) is checked in /proc.
    let Targets {
        pids: targets,
        mut child,
        executables,
    } = targets;
    let mut watched: Vec<(u32, Option<OwnedFd>, bool)> =
        targets.iter().map(|&p| (p, pidfd_open(p), false)).collect();
    // `-p` targets (no child of ours) are also watched for execve: the executable they run now,
    // compared on each tick. A `-c` command may exec on purpose (a shell, the `dotnet` host).
    let exes: Vec<Option<(u64, u64)>> = if child.is_none() {
        targets
            .iter()
            .map(|&p| executables.at_resolve(p).or_else(|| exe_id(p)))
            .collect()
    } else {
        vec![None; targets.len()]
    };
    let mut execed = None;
    let mut flow = Flow::Continue;
    loop {
        if let Some(sig) = signals.received() {
            return Ok(StopReason::Signal(sig));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(StopReason::Duration);
        }
        let mut timeout = Duration::from_millis(200);
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        if let Some(t) = next_tick {
            timeout = timeout.min(t.saturating_duration_since(now));
        }
        let mut fds: Vec<libc::pollfd> = vec![libc::pollfd {
            fd: signals.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        fds.extend(session.event_fds().iter().map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        let first_pidfd = fds.len();
        for (_, pfd, _) in &watched {
            fds.push(libc::pollfd {
                fd: pfd.as_ref().map_or(-1, |f| f.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: fds is a valid array of pollfd for the call's duration.
        let rc = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                timeout.as_millis().max(1) as libc::c_int,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(Error::io("poll", e));
            }
        }
        session.read(&mut |plan, hit| {
            if let Some(m) = meter.as_deref_mut() {
                m.observe(hit.probe, 1);
            }
            if flow == Flow::Continue {
                flow = sink.hit(plan, hit);
            }
        })?;
        sink.idle(session.plan());
        if flow == Flow::Continue && sink.stop_requested() {
            return Ok(StopReason::Requested);
        }
        if Instant::now() >= next_lost {
            sink.lost_so_far(session.plan(), session.lost());
            next_lost += Duration::from_secs(1);
            if let Some(m) = meter.as_deref_mut() {
                meter_window(session, sink, m)?;
            }
        }
        match flow {
            Flow::Continue => {}
            Flow::Enough => return Ok(StopReason::MaxEvents),
            Flow::OutputClosed => return Ok(StopReason::OutputClosed),
        }
        if let Some(t) = next_tick {
            if Instant::now() >= t {
                // Calls counted in the kernel are read once per interval.
                session.read_counts(&mut |plan, probe, calls| {
                    if let Some(m) = meter.as_deref_mut() {
                        m.observe(probe, calls);
                    }
                    let _ = sink.counted(plan, probe, calls);
                })?;
                if let Some(m) = meter.as_deref_mut() {
                    crate::printable::eprint_line(&format!(
                        "netprobe: estimated cost to the targets in the last {:.1} s: {}",
                        m.tick_age().as_secs_f64(),
                        m.close_tick().describe()
                    ));
                }
                let lost = session.lost();
                match sink.tick(session.plan(), lost) {
                    Flow::Continue => {}
                    Flow::Enough => return Ok(StopReason::MaxEvents),
                    Flow::OutputClosed => return Ok(StopReason::OutputClosed),
                }
                next_tick = Some(t + limits.interval.unwrap_or(Duration::from_secs(1)));
            }
        }
        if !watched.is_empty() {
            for (i, (pid, pfd, exited)) in watched.iter_mut().enumerate() {
                let gone = match pfd {
                    Some(_) => fds[first_pidfd + i].revents & libc::POLLIN != 0,
                    None => !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                };
                if gone {
                    *exited = true;
                } else if exes[i]
                    .is_some_and(|before| exe_id(*pid).is_some_and(|now| now != before))
                {
                    *exited = true;
                    execed.get_or_insert(*pid);
                }
            }
            if let Some(c) = child.as_deref_mut() {
                // Reap our own child so it does not linger as a zombie.
                if watched.iter().all(|w| w.2) {
                    c.try_wait();
                }
            }
            if watched.iter().all(|w| w.2) {
                return Ok(execed.map_or(StopReason::TargetsExited, StopReason::TargetExeced));
            }
        }
    }
}

/// Once a second with a meter: the kernel's counts read, the window closed, and the probes of
/// the functions over the budget taken out, each said in one line.
fn meter_window(
    session: &mut dyn Backend,
    sink: &mut dyn Sink,
    m: &mut OverheadMeter,
) -> Result<()> {
    session.read_counts(&mut |plan, probe, calls| {
        m.observe(probe, calls);
        let _ = sink.counted(plan, probe, calls);
    })?;
    let (window, over) = m.close_window();
    if over.is_empty() {
        return Ok(());
    }
    let probes: Vec<usize> = over.iter().flat_map(|o| o.probes.iter().copied()).collect();
    let removed = session.remove_probes(&probes)?;
    let budget = m
        .max_share()
        .map(crate::overhead::meter::percent)
        .unwrap_or_default();
    for o in &over {
        let name = &session.plan().function(o.function).name;
        crate::printable::eprint_line(&format!(
            "netprobe: --max-overhead {budget}: removed the probes of {name}: {:.0} hits/s cost the targets an estimated {} of a CPU (the session's {} in the last {:.1} s); the session goes on without them",
            o.hits_per_s,
            crate::overhead::meter::percent(o.cpu_share),
            crate::overhead::meter::percent(window.cpu_share),
            window.seconds,
        ));
    }
    // Probes that shared a kernel event with those (none when each has its own) go too.
    let extra = removed.iter().filter(|p| !probes.contains(p)).count();
    if extra > 0 {
        crate::printable::eprint_line(&format!(
            "netprobe: {extra} more probe(s) shared their kernel events and were removed with them"
        ));
    }
    Ok(())
}
