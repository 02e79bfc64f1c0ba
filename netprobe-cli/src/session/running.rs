//! A session's run and its end: the event loop into the caller's sink (with the .NET stall
//! watch and the cost meter around it), what the session reports when it stops, and the removal
//! of everything it placed.

use super::placing::overhead_meter;
use super::Session;
use crate::backend::tracefs::probe;
use crate::backend::Lost;
use crate::error::Result;
use crate::overhead::meter::Estimate;
use crate::runner::{self, Limits, StopReason, Targets};
use crate::sinks::{self, Sink};

/// How one [`Session::run`] ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Why recording stopped.
    pub reason: StopReason,
    /// What the kernel lost, or what did not decode, in this run.
    pub lost: Lost,
    /// What the run cost its targets, estimated (with `--max-overhead` or `--interval`), and
    /// whether the costs per hit are typical ones because this machine's could not be measured.
    pub cost: Option<(Estimate, bool)>,
}

/// What [`Session::stop`] leaves to check.
pub struct Stopped {
    /// The `-c` command's exit status (as from `waitpid`), when the session started one.
    pub command_status: Option<i32>,
    tracefs: crate::backend::tracefs::Tracefs,
    name: crate::backend::tracefs::probe::GroupName,
}

impl Stopped {
    /// What the kernel still holds of the session: its probe definitions and whether its
    /// tracefs instance exists (both nothing after a clean stop).
    pub fn leftovers(&self) -> Result<(usize, bool)> {
        let events = probe::list_events(&self.tracefs, &self.name)?.len();
        let instance = self
            .tracefs
            .path("instances")
            .join(self.name.as_str())
            .exists();
        Ok((events, instance))
    }
}

pub(super) fn run(s: &mut Session, sink: &mut dyn Sink) -> Result<Outcome> {
    if !s.released {
        if let Some(c) = s.child.as_mut() {
            c.release()?;
        }
        s.released = true;
    }
    let mut meter = overhead_meter(&s.options, s.backend.as_ref(), s.costs.as_ref());
    let limits = Limits {
        duration: s
            .options
            .duration
            .map(|d| d.saturating_sub(s.started.elapsed())),
        interval: s.options.interval,
    };
    // Only a session with .NET methods is watched for hits that stop (tiered compilation); Go
    // and native hits go straight to the sink.
    let plan = s.backend.plan();
    let mut stall = if plan.managed.is_empty() {
        None
    } else {
        sinks::stall::StallWatch::for_session(
            plan,
            |id| plan.managed.contains(&id),
            s.guard.fix.clone(),
            s.guard.default_fix.clone(),
        )
    };
    let mut watched;
    let first: &mut dyn Sink = match stall.as_mut() {
        Some(watch) => {
            watched = sinks::stall::Watched {
                inner: &mut *sink,
                watch,
            };
            &mut watched
        }
        None => &mut *sink,
    };
    let reason = runner::run_metered(
        s.backend.as_mut(),
        &s.signals,
        Targets {
            pids: &s.pids,
            child: s.child.as_mut(),
            executables: &s.executables,
        },
        limits,
        first,
        meter.as_mut(),
    )?;
    // Recording stops; what is still buffered goes to the sink unless it had enough or nobody
    // reads its output anymore.
    let mut m = meter.as_mut();
    let lost = s.backend.stop(&mut |plan, hit| {
        if let Some(m) = m.as_deref_mut() {
            m.observe(hit.probe, 1);
        }
        if reason != StopReason::MaxEvents && reason != StopReason::OutputClosed {
            let _ = sink.hit(plan, hit);
        }
    })?;
    // What the kernel counted since the last interval (recording has stopped: this is final).
    s.backend.read_counts(&mut |plan, probe, calls| {
        if let Some(m) = m.as_deref_mut() {
            m.observe(probe, calls);
        }
        let _ = sink.counted(plan, probe, calls);
    })?;
    let typical = s.costs.as_ref().is_some_and(|c| !c.measured);
    Ok(Outcome {
        reason,
        lost,
        cost: meter.map(|m| (m.overall(), typical)),
    })
}

impl Session {
    /// Ends the session: the command (if any) is ended and reaped, every probe and buffer is
    /// removed, and the watchdog is told all is clean.
    pub fn stop(mut self) -> Result<Stopped> {
        let command_status = self.child.as_mut().map(|c| {
            c.terminate();
            c.wait()
        });
        // Results are out; now the slow part (disabling each uprobe event), then the watchdog.
        self.backend.detach()?;
        if let Some(w) = self.watchdog.take() {
            w.disarm();
        }
        Ok(Stopped {
            command_status,
            tracefs: self.tracefs.clone(),
            name: self.instance.name.clone(),
        })
    }
}
