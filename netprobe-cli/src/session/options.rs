//! What a session is asked to do besides its specs: its targets and the engine's options.

use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::gate::GateOptions;
use std::time::Duration;

/// Which processes a session traces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Target {
    /// Every process that runs the probed files (a host-wide session).
    #[default]
    Host,
    /// Running processes (`-p`).
    Pids(Vec<u32>),
    /// A command the session starts, held before its first instruction until the probes are in
    /// place (`-c`); `user` is whom it runs as (`--user`, a name or uid).
    Command { line: String, user: Option<String> },
    /// The processes of containers (`--container`, `--pod`, `--selector`), with any further
    /// `pids`. With `follow`, the session waits for a Docker container's new processes when
    /// its traced ones are gone, and places the probes on them again.
    Container {
        selection: netprobe_core::containers::Selection,
        pids: Vec<u32>,
        follow: bool,
    },
}

/// Which hits to keep (`--filter`, `--tid`, `--comm`).
#[derive(Clone, Debug, Default)]
pub struct FilterOptions {
    pub filter: Option<String>,
    pub tids: Vec<u32>,
    pub comm: Option<String>,
}

/// A filter as the plan takes it: the user's expression, which applies where the probe reads
/// the arguments it names, and one on the task (`--tid`, `--comm`), which applies to every probe;
/// each probe's filter is the two joined by `&&`.
pub type Filters = (Option<Expr>, Option<Expr>);

impl FilterOptions {
    /// `--filter` parsed, and `--tid`/`--comm` as a filter on the task (both `None` when not
    /// given).
    pub fn exprs(&self) -> Result<Filters> {
        let user = self.filter.as_deref().map(Expr::parse).transpose()?;
        if !self.tids.is_empty() && !netprobe_core::pid_namespace::sees_global_pids() {
            return Err(Error::usage(
                "--tid inside a pid namespace: the kernel's filter sees global thread ids, which this namespace cannot name; use -p PID, or run netprobe in the host's pid namespace",
            ));
        }
        let comm = self.comm.as_deref().map(Expr::comm);
        Ok((user, Expr::and(Expr::tids(&self.tids), comm)))
    }
}

/// The largest per-CPU ring buffer `--buffer-kb` accepts (1 GiB): the kernel allocates it on
/// every CPU at once, and larger sizes only fail with ENOMEM after the probes are planned.
pub const MAX_BUFFER_KB: u64 = 1 << 20;

/// How a session plans, places and records its probes.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--filter`, `--tid`, `--comm`.
    pub filter: FilterOptions,
    /// The per-CPU ring buffer in KiB (`--buffer-kb`; the backend's default when `None`).
    pub buffer_kb: Option<u64>,
    /// Use uretprobes on Go functions too (`--force-uretprobe`).
    pub force_uretprobe: bool,
    /// .NET `-c`: keep ReadyToRun code (no tiered compilation) in the command (`--keep-r2r`).
    pub keep_r2r: bool,
    /// The probe-safety gate's overrides (`--unsafe-offset`, `--exact-entry`).
    pub gate: GateOptions,
    /// Record the user stack under each hit (`--stack`).
    pub stack: bool,
    /// Stop after this long (`--duration`), counted from the session's start across re-attaches.
    pub duration: Option<Duration>,
    /// Hand the sink an interval tick this often (`count --interval`).
    pub interval: Option<Duration>,
    /// `--max-overhead PCT`: the most the session may cost its targets, as a share of one CPU
    /// (1% is 0.01); the probes of functions beyond it are taken out.
    pub max_overhead: Option<f64>,
    /// The sink looks at each hit (an event limit, per-process metrics labels): a `count`
    /// session then records hits instead of counting in the kernel.
    pub reads_each_hit: bool,
    /// Wake the reader on every hit (a terminal showing lines as calls happen) instead of when a
    /// buffer is an eighth full.
    pub wake_on_every_hit: bool,
}

impl Options {
    /// The option values the engine refuses whatever the command; a usage error names the fix.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(kb) = self.buffer_kb.filter(|&kb| kb == 0 || kb > MAX_BUFFER_KB) {
            return Err(Error::usage(format!(
                "--buffer-kb {kb}: the per-CPU ring buffer must be 1 to {MAX_BUFFER_KB} KiB (1 GiB); the default is 8192"
            )));
        }
        Ok(())
    }
}

/// A `-c` command's user, checked before anything else (see [`crate::run_as`]).
pub(crate) fn command_user(target: &Target) -> Result<Option<crate::run_as::RunAs>> {
    let (line, user) = match target {
        Target::Command { line, user } => (Some(line.as_str()), user.as_deref()),
        _ => (None, None),
    };
    crate::run_as::check_user_with_command(user, line)?;
    user.map(crate::run_as::RunAs::lookup).transpose()
}
