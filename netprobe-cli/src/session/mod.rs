//! The front door of the engine: one tracing session from what the user typed to the probes'
//! removal. [`Session::builder`] takes the specs, the [`Target`] (processes, a command, a
//! container, or the whole host), the [`Mode`] and the [`Options`]; [`SessionBuilder::plan`]
//! resolves and checks without touching the kernel (`--dry-run`); [`PlannedSession::start`]
//! places the probes; [`Session::run`] hands hits to a [`Sink`] until a stop condition, and
//! [`Session::stop`] removes everything the session placed.
//!
//! The session owns what must not outlive it: the backend (its probes and buffers), the
//! watchdog (a forked process that removes them if netprobe is killed), the signal pipe, and a
//! `-c` command. Dropped on any path, it removes its probes first, then ends the command, then
//! lets the watchdog go.
//!
//! ```no_run
//! use netprobe_cli::mode::Mode;
//! use netprobe_cli::session::{Options, Session, Target};
//! use netprobe_cli::sinks::{Format, TracePrinter};
//!
//! # fn main() -> netprobe_cli::Result<()> {
//! let mut session = Session::builder(Mode::Trace)
//!     .spec("/usr/lib/x86_64-linux-gnu/libc.so.6:malloc size=u64")
//!     .target(Target::Pids(vec![1234]))
//!     .options(Options::default())
//!     .start()?;
//! let mut printer = TracePrinter::new(std::io::stdout(), Format::Text, session.tasks(), session.start_ns());
//! let outcome = session.run(&mut printer)?;
//! session.stop()?;
//! eprintln!("{}; {} hit(s), {} lost", outcome.reason, printer.printed, outcome.lost.counted);
//! # Ok(())
//! # }
//! ```

mod armed;
mod builder;
mod container;
mod follow;
mod host_arch;
mod options;
mod placing;
mod planned;
mod planning;
mod probe_feed;
mod running;

pub use builder::SessionBuilder;
pub use container::{container_pids, join_pids, short_id};
pub use follow::Reattached;
pub use options::{FilterOptions, Filters, Options, Target, MAX_BUFFER_KB};
pub use planned::PlannedSession;
pub use planning::{apply_filter, print_notes};
pub use probe_feed::{FeedTarget, ProbeFeed};
pub use running::{Outcome, Stopped};

use crate::backend::tracefs::session::SessionOptions as InstanceOptions;
use crate::backend::tracefs::watchdog::Watchdog;
use crate::backend::tracefs::Tracefs;
use crate::backend::Backend;
use crate::lang::dotnet;
use crate::launch::PausedChild;
use crate::mode::Mode;
use crate::overhead::HitCosts;
use crate::plan::ProbePlan;
use crate::runner::Executables;
use crate::signals::SignalPipe;
use crate::sinks::{Sink, TaskInfo};
use netprobe_core::ipc::docker::ContainerInfo;
use std::time::Instant;

/// A tracing session whose probes are in place. Fields drop in order: the backend (its probes
/// removed), the command, the signal pipe, then the watchdog.
pub struct Session {
    backend: Box<dyn Backend>,
    child: Option<PausedChild>,
    /// The command was let run (it runs from the first [`Session::run`]).
    released: bool,
    signals: SignalPipe,
    watchdog: Option<Watchdog>,
    tracefs: Tracefs,
    instance: InstanceOptions,
    mode: Mode,
    specs: Vec<String>,
    options: Options,
    filter: Filters,
    pids: Vec<u32>,
    executables: Executables,
    followed: Option<ContainerInfo>,
    guard: dotnet::Guard,
    costs: Option<HitCosts>,
    started: Instant,
    start_ns: u64,
}

impl Session {
    /// Describes a session in `mode`: see [`SessionBuilder`].
    pub fn builder(mode: Mode) -> SessionBuilder {
        SessionBuilder::new(mode)
    }

    /// The plan in place: functions, probe points, the values each probe reads.
    pub fn plan(&self) -> &ProbePlan {
        self.backend.plan()
    }

    /// The kernel probe definitions in effect.
    pub fn placed(&self) -> usize {
        self.backend.placed()
    }

    /// The probe definitions as the kernel was given them (tracefs: `uprobe_events` lines).
    pub fn definitions(&self) -> Vec<String> {
        self.backend.definitions()
    }

    /// The processes traced (a `-c` command's pid once started); empty host-wide.
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// The container followed through restarts, when there is one.
    pub fn container(&self) -> Option<&ContainerInfo> {
        self.followed.as_ref()
    }

    /// The session's name: its probe group and tracefs instance (`netprobe_<PIDNS>_<PID>`).
    pub fn name(&self) -> &str {
        self.instance.name.as_str()
    }

    /// The .NET tiering guard of the plan (what the stall watch advises when hits stop).
    pub fn dotnet_guard(&self) -> &dotnet::Guard {
        &self.guard
    }

    /// CLOCK_MONOTONIC when the session started, in nanoseconds (the hits' clock).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Whether the session counts calls in the kernel instead of recording a hit each (a sink
    /// then gets [`Sink::counted`] instead of [`Sink::hit`]).
    pub fn counts_in_kernel(&self) -> bool {
        self.backend.counts_in_kernel()
    }

    /// Thread → process lookups for the sinks, with what the backend knows of exited threads
    /// and, inside a pid namespace, its translation of the kernel's ids.
    pub fn tasks(&self) -> TaskInfo {
        TaskInfo::of(self.backend.as_ref())
    }

    /// The targets' mappings as the backend recorded them (see
    /// [`crate::backend::Backend::recorded_maps`]), for naming stacks.
    pub fn recorded_maps(&self) -> Option<netprobe_core::maps::RecordedMaps> {
        self.backend.recorded_maps()
    }

    /// The mode the session was built for.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Hands hits to `sink` until a stop condition: a signal (SIGINT, SIGTERM, SIGHUP), the
    /// duration, the sink's own limit, the targets' exit or exec, or a closed output. Recording
    /// is then stopped and what is still buffered is handed over too. A `-c` command starts
    /// running at the first call. See [`running`] for what it reports.
    pub fn run(&mut self, sink: &mut dyn Sink) -> crate::Result<Outcome> {
        running::run(self, sink)
    }
}
