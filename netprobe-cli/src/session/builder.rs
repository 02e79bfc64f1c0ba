//! [`SessionBuilder`]: what a session traces (specs, or a plan made by hand), in which
//! processes ([`Target`]), in which [`Mode`], with which [`Options`]; then [`SessionBuilder::plan`]
//! (resolve and check, touching nothing in the kernel: enough for `--dry-run`) and
//! [`SessionBuilder::start`].

use super::armed::Armed;
use super::container::container_processes;
use super::options::{command_user, Options, Target};
use super::planned::{PlannedSession, Stage, Targets};
use super::planning::{checked_plan, PlanRequest};
use super::Session;
use crate::backend::tracefs::cleanup;
use crate::backend::tracefs::session::SessionOptions as InstanceOptions;
use crate::error::{Error, Result};
use crate::gate;
use crate::lang::dotnet;
use crate::launch::split_command;
use crate::mode::Mode;
use crate::plan::ProbePlan;
use crate::runner::Executables;
use crate::spec::Targeting;

/// A session being described. Made by [`Session::builder`].
pub struct SessionBuilder {
    mode: Mode,
    specs: Vec<String>,
    made: Option<ProbePlan>,
    target: Target,
    options: Options,
    armed: Option<Armed>,
}

impl SessionBuilder {
    pub(crate) fn new(mode: Mode) -> SessionBuilder {
        SessionBuilder {
            mode,
            specs: Vec::new(),
            made: None,
            target: Target::Host,
            options: Options::default(),
            armed: None,
        }
    }

    /// Adds a probe spec: `IMAGE:PATTERN [ARG...]`, `r:IMAGE:PATTERN [TYPE]` (the grammar of
    /// `netprobe trace --help`).
    pub fn spec(mut self, spec: impl Into<String>) -> SessionBuilder {
        self.specs.push(spec.into());
        self
    }

    /// Adds probe specs (see [`SessionBuilder::spec`]).
    pub fn specs<S: Into<String>>(mut self, specs: impl IntoIterator<Item = S>) -> SessionBuilder {
        self.specs.extend(specs.into_iter().map(Into::into));
        self
    }

    /// Places `plan` instead of resolving specs: functions and probe points the caller chose. It
    /// still goes through the probe-safety gate.
    pub fn probe_plan(mut self, plan: ProbePlan) -> SessionBuilder {
        self.made = Some(plan);
        self
    }

    /// The processes to trace (default: every process that runs the probed files).
    pub fn target(mut self, target: Target) -> SessionBuilder {
        self.target = target;
        self
    }

    /// How to plan, place and record.
    pub fn options(mut self, options: Options) -> SessionBuilder {
        self.options = options;
        self
    }

    /// Opens tracefs and forks the watchdog now, before names are resolved (resolving may start
    /// threads, and the watchdog must be forked before any; a host-wide session's instance is
    /// prepared meanwhile). Best effort: what fails here is tried again, and reported, when the
    /// session starts. Leave it out for a plan that is only shown (`--dry-run`).
    pub fn arm(mut self) -> SessionBuilder {
        let name = cleanup::session_name(std::process::id());
        let host_wide = matches!(self.target, Target::Host);
        self.armed = Armed::begin(&name, &self.instance_options(&name), host_wide);
        self
    }

    /// Resolves the names and checks the plan: nothing is placed and nothing in the kernel is
    /// touched (unless [`SessionBuilder::arm`] was called).
    pub fn plan(self) -> Result<PlannedSession> {
        let user = command_user(&self.target)?;
        self.options.check()?;
        if self.options.max_overhead.is_some() && matches!(self.target, Target::Host) {
            return Err(Error::usage(
                "--max-overhead needs -p, -c or --container: a host-wide session's probes trap in every process that maps the file, which no budget of its targets accounts for",
            ));
        }
        let filter = self.options.filter.exprs()?;
        let (pids, command, followed) = match &self.target {
            Target::Host => (Vec::new(), None, None),
            Target::Pids(p) => (p.clone(), None, None),
            Target::Command { line, .. } => (Vec::new(), Some(line.clone()), None),
            Target::Container {
                selection,
                pids,
                follow,
            } => {
                let (info, found) = container_processes(selection)?;
                let mut all = pids.clone();
                all.extend(found);
                all.sort_unstable();
                all.dedup();
                // Followed only when the container alone names the targets.
                let followed = info.filter(|_| *follow && pids.is_empty());
                (all, None, followed)
            }
        };
        let argv = command.as_deref().map(split_command).transpose()?;
        let mut executables = Executables::default();
        let targeting = match &argv {
            Some(a) => Targeting::Command {
                exe: crate::launch::find_program(&a[0])?,
            },
            None if !pids.is_empty() => {
                for &p in &pids {
                    netprobe_core::process::Process::open(p)?.check_runs_user_code()?;
                }
                executables = Executables::of(&pids);
                Targeting::Pids(pids.clone())
            }
            None => Targeting::SystemWide,
        };
        let dotnet_command = dotnet::command_of(argv.as_deref(), &targeting);
        let name = cleanup::session_name(std::process::id());
        let instance = self.instance_options(&name);
        let (plan, report, guard) = match self.made {
            Some(mut plan) => {
                super::planning::apply_filter(&mut plan, &filter)?;
                let report = gate::check(&plan, self.options.gate);
                (plan, report, dotnet::Guard::default())
            }
            None => checked_plan(&PlanRequest {
                mode: self.mode,
                specs: &self.specs,
                targeting: &targeting,
                dotnet_command: dotnet_command.as_ref(),
                pids: &pids,
                filter: &filter,
                force_uretprobe: self.options.force_uretprobe,
                keep_r2r: self.options.keep_r2r,
                stack: self.options.stack,
                gate: self.options.gate,
            })?,
        };
        Ok(PlannedSession {
            mode: self.mode,
            specs: self.specs,
            options: self.options,
            instance,
            targets: Targets {
                pids,
                command,
                argv,
                user,
                followed,
                executables,
            },
            filter,
            report,
            guard,
            stage: Stage::Planned(plan),
            armed: self.armed,
        })
    }

    /// Arms, plans and starts the session: the probes are in place when it returns.
    pub fn start(self) -> Result<Session> {
        self.arm().plan()?.start()
    }

    /// The tracefs recording options of this session (the instance a host-wide session records
    /// into is prepared with them before its plan exists).
    fn instance_options(
        &self,
        name: &crate::backend::tracefs::probe::GroupName,
    ) -> InstanceOptions {
        let mut opts = InstanceOptions::new(name.clone());
        if let Some(kb) = self.options.buffer_kb {
            opts.buffer_kb = kb;
        }
        // Trace prints each hit as it comes (wake on any data); count and latency only
        // aggregate, so they let a buffer fill to an eighth before waking up (the 200 ms poll
        // tick bounds the delay). Into a pipe or file trace wakes like count does, which saves
        // a wakeup per hit at high rates. An eighth, not a quarter: while the targets' threads
        // hold every CPU the reader is scheduled sooner for less work, and lost 6x fewer hits at
        // the kernel's max rate (BENCHMARKS.md, "Tracing one process"). With --stack, frames
        // are named from the target's maps while it runs: wake on every hit too, so a
        // short-lived target is still there when its hits are read.
        opts.buffer_percent = if self.options.stack || self.options.wake_on_every_hit {
            0
        } else {
            12
        };
        opts
    }
}
