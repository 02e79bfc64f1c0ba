//! [`PlannedSession`]: names resolved and every probe checked, nothing placed yet. What
//! `--dry-run` shows, and what [`PlannedSession::start`] places.

use super::armed::Armed;
use super::options::{Filters, Options};
use super::placing::Scoping;
use super::placing::{check_overhead_plan, counts_in_kernel, session_hit_costs, start_backend};
use super::Session;
use crate::backend::monotonic_ns;
use crate::backend::tracefs::cleanup;
use crate::backend::tracefs::session::{PreparingInstance, SessionOptions as InstanceOptions};
use crate::backend::tracefs::watchdog::Watchdog;
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use crate::gate::{CheckedPlan, GateReport};
use crate::lang::dotnet;
use crate::launch::PausedChild;
use crate::mode::Mode;
use crate::plan::ProbePlan;
use crate::run_as::RunAs;
use crate::runner::Executables;
use crate::signals::SignalPipe;
use netprobe_core::arch::Arch;
use netprobe_core::ipc::docker::ContainerInfo;
use std::time::Instant;

/// The processes a planned session traces.
pub(crate) struct Targets {
    /// `-p` processes and a container's; empty for a host-wide session or a command.
    pub pids: Vec<u32>,
    /// The `-c` command line, as given, and split into its words.
    pub command: Option<String>,
    pub argv: Option<Vec<String>>,
    /// Whom the command runs as (`--user`).
    pub user: Option<RunAs>,
    /// The container followed through restarts.
    pub followed: Option<ContainerInfo>,
    /// What the `-p` targets ran when their names were resolved.
    pub executables: Executables,
}

/// The plan approved by the gate, with tracefs and the watchdog: all a start needs. (Fields
/// drop in order: the instance being prepared goes before the watchdog is let go.)
pub(super) struct Ready {
    plan: CheckedPlan,
    tracefs: Tracefs,
    preparing: Option<PreparingInstance>,
    watchdog: Watchdog,
}

/// Where a planned session is: checked by the gate, or also approved and armed.
pub(super) enum Stage {
    Planned(ProbePlan),
    Ready(Box<Ready>),
}

/// A session whose names are resolved and whose probes the gate checked. Dropped before
/// [`PlannedSession::start`], it leaves nothing behind.
pub struct PlannedSession {
    pub(super) mode: Mode,
    pub(super) specs: Vec<String>,
    pub(super) options: Options,
    pub(super) instance: InstanceOptions,
    pub(super) targets: Targets,
    pub(super) filter: Filters,
    pub(super) report: GateReport,
    pub(super) guard: dotnet::Guard,
    pub(super) stage: Stage,
    pub(super) armed: Option<Armed>,
}

/// From this many uprobes on, a session says before placing them that it takes a while.
const LARGE_SESSION_PROBES: usize = 10_000;

impl PlannedSession {
    /// The plan: functions, probe points, the values each probe reads.
    pub fn plan(&self) -> &ProbePlan {
        match &self.stage {
            Stage::Planned(p) => p,
            Stage::Ready(r) => &r.plan,
        }
    }

    /// The probe-safety gate's verdict on each probe.
    pub fn report(&self) -> &GateReport {
        &self.report
    }

    /// The processes traced: `-p` processes and a container's (empty for a command, which
    /// has no pid before it starts, and for a host-wide session).
    pub fn pids(&self) -> &[u32] {
        &self.targets.pids
    }

    /// The shell script that places the same probes by hand (`--dry-run`): uprobe_events lines,
    /// and the equivalent perf and bpftrace commands. Refused probes are shown with their
    /// reasons; [`PlannedSession::refusal`] is then the error to exit with.
    pub fn dry_run_script(&self) -> Result<String> {
        crate::backend::tracefs::dryrun::render(
            self.plan(),
            &self.report,
            &self.instance.name,
            &self.targets.pids,
            self.targets.command.as_deref(),
            self.mode,
        )
    }

    /// The gate's refusal of the plan, if it refused a probe.
    pub fn refusal(&self) -> Option<Error> {
        self.report.error()
    }

    /// Approves the plan (a probe in an image of another architecture than the host's, or a
    /// refused probe, is the error), opens tracefs and forks the watchdog
    /// if [`super::SessionBuilder::arm`] did not. After it, nothing can fail for want of
    /// privilege before the probes are placed; a caller binds what must exist before they are
    /// (a metrics port) between this and [`PlannedSession::start`].
    pub fn arm(&mut self) -> Result<()> {
        let Stage::Planned(waiting) = &mut self.stage else {
            return Ok(());
        };
        if let Some(e) = super::host_arch::foreign_architecture(waiting, Arch::host()) {
            return Err(e);
        }
        if let Some(e) = self.report.error() {
            return Err(e);
        }
        let (tracefs, watchdog, preparing) = match self.armed.take().and_then(Armed::into_parts) {
            Some(parts) => parts,
            None => Armed::now(&self.instance.name)?
                .into_parts()
                .ok_or_else(|| Error::usage("internal: the watchdog was not armed"))?,
        };
        let plan = self.report.approve(std::mem::take(waiting))?;
        self.stage = Stage::Ready(Box::new(Ready {
            plan,
            tracefs,
            preparing,
            watchdog,
        }));
        Ok(())
    }

    /// Places the probes and starts recording: stale sessions of dead netprobes are removed
    /// (said on stderr), a `-c` command is started held before its first instruction, and the
    /// probes go on the targets' tasks (host-wide: into a tracefs instance of the session's
    /// own). The command runs from the first [`Session::run`].
    pub fn start(mut self) -> Result<Session> {
        self.arm()?;
        let Stage::Ready(ready) =
            std::mem::replace(&mut self.stage, Stage::Planned(ProbePlan::default()))
        else {
            return Err(Error::usage("internal: the session was not armed"));
        };
        let Ready {
            plan,
            tracefs,
            preparing,
            watchdog,
        } = *ready;
        // Dead sessions are cleaned once this one is sure to start, so an error above is the
        // only line it prints (a session killed a moment ago, still being cleaned by its own
        // watchdog, would otherwise add a "removed ..." line to a one-line error).
        report_stale(&tracefs);
        let signals = SignalPipe::install()?;
        let child = match &self.targets.argv {
            Some(a) => Some(PausedChild::spawn_with_env(
                a,
                &self.guard.child_env,
                self.targets.user.as_ref(),
            )?),
            None => None,
        };
        let pids: Vec<u32> = match &child {
            Some(c) => vec![c.pid()],
            None => self.targets.pids.clone(),
        };
        let mut instance = self.instance.clone();
        instance.pids = (!pids.is_empty()).then(|| pids.clone());
        if plan.probes.len() >= LARGE_SESSION_PROBES {
            crate::printable::eprint_line(&format!(
                "netprobe: placing {} uprobes; the kernel checks each new uprobe against every one already registered (`validate_ref_ctr_offset` in kernel/trace/trace_uprobe.c), so placing them takes time that grows with the square of their number (about 1.5 s for 10,000 and minutes for 70,000 here); a narrower pattern is faster",
                plan.probes.len()
            ));
        }
        check_overhead_plan(&self.options, &plan)?;
        let costs = session_hit_costs(&self.options);
        let in_kernel = counts_in_kernel(self.mode, &self.options, &plan);
        let backend = start_backend(
            &tracefs,
            &instance,
            plan,
            preparing,
            Scoping {
                held_command: child.is_some(),
                in_kernel,
                probe_per_event: self.options.max_overhead.is_some(),
            },
        )?;
        Ok(Session {
            backend,
            child,
            released: false,
            signals,
            watchdog: Some(watchdog),
            tracefs,
            instance,
            mode: self.mode,
            specs: self.specs,
            options: self.options,
            filter: self.filter,
            pids,
            executables: self.targets.executables,
            followed: self.targets.followed,
            guard: self.guard,
            costs,
            started: Instant::now(),
            start_ns: monotonic_ns(),
        })
    }
}

/// Removes stale sessions, saying so on stderr; failures are reported, not fatal.
fn report_stale(tracefs: &Tracefs) {
    match cleanup::clean_stale(tracefs) {
        Ok(removed) => {
            for (name, r) in removed
                .into_iter()
                .filter(|(_, r)| !r.by_watchdog && !r.already_gone)
            {
                crate::printable::eprint_line(&format!(
                    "netprobe: removed {} event(s){} left by dead session {name}",
                    r.events.len(),
                    if r.instance { " and its instance" } else { "" }
                ));
            }
        }
        Err(e) => crate::printable::eprint_line(&format!(
            "netprobe: warning: could not remove a stale session: {e}"
        )),
    }
}
