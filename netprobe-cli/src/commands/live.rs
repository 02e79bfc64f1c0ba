//! `netprobe trace`, `count` and `latency`: a live session from the command line. The options
//! are checked (usage errors name the flag), turned into a [`Session`], and the session is run
//! into the mode's sink (`generation.rs`), re-attached when `--container ... --metrics` follows a
//! container through restarts, and stopped.

use super::generation::run_generation;
use crate::backend::Lost;
use crate::error::{Error, Result};
use crate::gate::GateOptions;
use crate::mode::Mode;
use crate::runner::StopReason;
use crate::session::{join_pids, short_id, FilterOptions, Options, Reattached, Session, Target};
use crate::sinks;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Options every live command shares.
#[derive(Clone, Debug, Default)]
pub struct LiveOptions {
    pub specs: Vec<String>,
    pub pids: Vec<u32>,
    /// `--container NAME|ID`: its processes join `pids`.
    pub container: Option<String>,
    /// `--filter`, `--tid`, `--comm`.
    pub filter: FilterOptions,
    pub command: Option<String>,
    /// `--user NAME|UID`: the user the `-c` command runs as.
    pub user: Option<String>,
    pub json: bool,
    pub duration: Option<Duration>,
    pub max_events: Option<u64>,
    pub interval: Option<Duration>,
    pub dry_run: bool,
    pub buffer_kb: Option<u64>,
    /// Use uretprobes on Go functions too (`--force-uretprobe`).
    pub force_uretprobe: bool,
    /// .NET `-c`: keep ReadyToRun code (no tiered compilation) in the command (`--keep-r2r`).
    pub keep_r2r: bool,
    /// The probe-safety gate's overrides (`--unsafe-offset`).
    pub gate: GateOptions,
    /// Record the user stack under each hit (`--stack`).
    pub stack: bool,
    /// At most this many frames of each stack (`--stack-depth`).
    pub stack_depth: Option<usize>,
    /// `count --stack --folded [FILE]`: folded stacks to FILE (`-`: stdout).
    pub folded: Option<std::path::PathBuf>,
    /// `--metrics ADDR:PORT`: also serve Prometheus metrics there (`count`, `latency`).
    pub metrics: Option<String>,
    /// `--metrics-max-series`: the cap on exported series.
    pub metrics_max_series: usize,
    /// `--metrics-web-config FILE`: TLS and basic authentication for `/metrics` (the exporter
    /// toolkit's web configuration file).
    pub metrics_web_config: Option<std::path::PathBuf>,
    /// `--max-overhead PCT`: the most the session may cost its targets, as a share of one CPU
    /// (1% is 0.01); the probes of functions beyond it are taken out.
    pub max_overhead: Option<f64>,
}

impl LiveOptions {
    /// The stack options fit together and with the command; a usage error names the fix.
    fn check_stack_options(&self, mode: Mode) -> Result<()> {
        if !self.stack {
            if self.stack_depth.is_some() {
                return Err(Error::usage(
                    "--stack-depth limits the stacks of --stack: add --stack",
                ));
            }
            if self.folded.is_some() {
                return Err(Error::usage(
                    "--folded writes the stacks of --stack: add --stack",
                ));
            }
            return Ok(());
        }
        if !matches!(mode, Mode::Trace | Mode::Count) {
            return Err(Error::usage(
                "--stack works with trace and count; use `netprobe count --stack` for calls per stack",
            ));
        }
        if self.stack_depth == Some(0) {
            return Err(Error::usage(
                "--stack-depth 0 shows no frame: give 1 or more",
            ));
        }
        if self.interval.is_some() {
            return Err(Error::usage(
                "count --stack prints once at the end: drop --interval (or --stack)",
            ));
        }
        // `--folded [FILE]` takes an optional value, so `--folded SPEC SPEC2` swallows a spec:
        // refuse a FILE that names an image before a colon, as specs do.
        if let Some(f) = self.folded.as_deref().filter(|f| {
            let text = f.to_string_lossy();
            !f.exists()
                && text.split_once(':').is_some_and(|(image, _)| {
                    std::path::Path::new(image).is_file()
                        || image.contains(".so")
                        || image.ends_with(".dll")
                })
        }) {
            return Err(Error::usage(format!(
                "--folded took '{}' as its FILE, which looks like a probe spec: write --folded=FILE, or --folded=- for stdout",
                f.display()
            )));
        }
        if self.json && self.folded.as_deref() == Some(std::path::Path::new("-")) {
            return Err(Error::usage(
                "--json and --folded both write to stdout: give --folded a FILE",
            ));
        }
        Ok(())
    }
}

impl LiveOptions {
    /// `--metrics`' address and web configuration, checked against the command and the other
    /// options (the file is read here, before anything is placed).
    fn metrics_addr(
        &self,
        mode: Mode,
    ) -> Result<Option<(std::net::SocketAddr, sinks::metrics::web_config::WebConfig)>> {
        let Some(text) = &self.metrics else {
            if self.metrics_web_config.is_some() {
                return Err(Error::usage(
                    "--metrics-web-config secures the server of --metrics: add --metrics ADDR:PORT",
                ));
            }
            return Ok(None);
        };
        if !matches!(mode, Mode::Count | Mode::Latency) {
            return Err(Error::usage(
                "--metrics works with count and latency: use `netprobe count --metrics ADDR:PORT`",
            ));
        }
        if self.stack {
            return Err(Error::usage(
                "--metrics exports calls per function, not per stack: drop --stack (or --metrics)",
            ));
        }
        if self.metrics_max_series == 0 {
            return Err(Error::usage(
                "--metrics-max-series 0 exports nothing: give 1 or more",
            ));
        }
        let addr = sinks::metrics::http::parse_addr(text).map_err(Error::usage)?;
        let web = match &self.metrics_web_config {
            Some(path) => {
                sinks::metrics::web_config::WebConfig::load(path).map_err(Error::usage)?
            }
            None => Default::default(),
        };
        Ok(Some((addr, web)))
    }
}

impl LiveOptions {
    /// Which processes: `-c`, `--container` (with any `-p`), `-p`, or the whole host.
    fn target(&self, follow: bool) -> Target {
        match (&self.command, &self.container) {
            (Some(line), _) => Target::Command {
                line: line.clone(),
                user: self.user.clone(),
            },
            (None, Some(c)) => Target::Container {
                name_or_id: c.clone(),
                pids: self.pids.clone(),
                follow,
            },
            (None, None) if !self.pids.is_empty() => Target::Pids(self.pids.clone()),
            (None, None) => Target::Host,
        }
    }

    /// The engine's options of these command-line options.
    fn session_options(&self, mode: Mode, metrics: bool) -> Options {
        Options {
            filter: self.filter.clone(),
            buffer_kb: self.buffer_kb,
            force_uretprobe: self.force_uretprobe,
            keep_r2r: self.keep_r2r,
            gate: self.gate,
            stack: self.stack,
            duration: self.duration,
            interval: self.interval,
            max_overhead: self.max_overhead,
            reads_each_hit: self.max_events.is_some() || metrics,
            // On a terminal, trace lines appear as calls happen; into a pipe or a file the reader
            // wakes like count's does.
            wake_on_every_hit: mode == Mode::Trace && std::io::stdout().is_terminal(),
        }
    }
}

/// Runs a live command (`trace`, `count`, `latency`); returns the process exit code.
pub fn run_live(mode: Mode, o: &LiveOptions) -> Result<i32> {
    if o.command.is_some() && (!o.pids.is_empty() || o.container.is_some()) {
        return Err(Error::usage("use either -p/--container or -c, not both"));
    }
    crate::run_as::check_user_with_command(o.user.as_deref(), o.command.as_deref())?;
    o.check_stack_options(mode)?;
    let metrics_addr = o.metrics_addr(mode)?;
    // `--metrics` makes a long-running agent: it follows a container through restarts.
    let builder = Session::builder(mode)
        .specs(o.specs.iter().cloned())
        .target(o.target(metrics_addr.is_some()))
        .options(o.session_options(mode, metrics_addr.is_some()));
    if o.dry_run {
        let planned = builder.plan()?;
        print!("{}", planned.dry_run_script()?);
        return planned.refusal().map_or(Ok(0), Err);
    }
    let mut planned = builder.arm().plan()?;
    planned.arm()?;
    // The port is bound before any probe is placed (a port in use fails with nothing left), and
    // after the watchdog is forked (serving starts the HTTP server's threads).
    let listener = metrics_addr
        .map(|(addr, web)| sinks::metrics::http::Listener::bind(addr).map(|l| (l, web)))
        .transpose()?;
    let mut session = planned.start()?;
    // `--metrics`: the exported series, served from now on.
    let exported = match listener {
        Some((l, web)) => {
            let metrics = sinks::metrics::Metrics::new(
                session.plan(),
                session.placed(),
                o.metrics_max_series,
            );
            let scheme = if web.tls.is_some() { "https" } else { "http" };
            crate::printable::eprint_line(&format!(
                "netprobe: serving metrics on {scheme}://{}/metrics",
                l.addr()
            ));
            let server = l.serve(metrics.registry(), web)?;
            Some((metrics, server))
        }
        None => None,
    };
    let started = Instant::now();
    let mut lost_total = Lost::default();
    let reason = loop {
        say_attached(&session);
        let outcome = run_generation(mode, o, &mut session, exported.as_ref().map(|(m, _)| m))?;
        let reason = outcome.reason;
        if let Some((e, typical)) = &outcome.cost {
            crate::printable::eprint_line(&format!(
                "netprobe: estimated cost to the targets over {:.1} s: {}{}",
                e.seconds,
                e.describe(),
                if *typical {
                    " (typical costs per hit: this machine's could not be measured, the kernel's uprobe PMU needs CAP_PERFMON)"
                } else {
                    ""
                }
            ));
        }
        lost_total.counted = lost_total.counted.saturating_add(outcome.lost.counted);
        lost_total.unknown_amount |= outcome.lost.unknown_amount;
        let Some(info) = session.container().cloned().filter(|_| {
            matches!(
                reason,
                StopReason::TargetsExited | StopReason::TargetExeced(_)
            )
        }) else {
            break reason;
        };
        // The container's processes are gone (or run another program): their probes go now,
        // and the session waits for the container's new processes, still serving what it counted.
        session.detach()?;
        if let Some((m, _)) = &exported {
            m.detached();
        }
        crate::printable::eprint_line(&format!(
            "netprobe: container {} ({}): {reason}; probes removed; waiting for its new processes",
            info.name,
            short_id(&info.id),
        ));
        match session.reattach()? {
            Reattached::Attached(i) => {
                crate::printable::eprint_line(&format!(
                    "netprobe: container {} ({}): re-attached to pid {}",
                    i.name,
                    short_id(&i.id),
                    join_pids(session.pids())
                ));
                if let Some((m, _)) = &exported {
                    m.rebind(session.plan(), session.placed());
                }
            }
            Reattached::Stopped(reason) => {
                if let Some((_, server)) = exported {
                    server.shutdown();
                }
                session.stop()?;
                return finish(reason, started, lost_total);
            }
        }
    };
    if let Some((_, server)) = exported {
        server.shutdown();
    }
    session.stop()?;
    finish(reason, started, lost_total)
}

/// Says why the session ended and what it lost; the exit code (3 when events were lost).
fn finish(reason: StopReason, started: Instant, lost: Lost) -> Result<i32> {
    crate::printable::eprint_line(&format!(
        "netprobe: {reason} after {:.1}s; probes removed",
        started.elapsed().as_secs_f64()
    ));
    if let Some(w) = sinks::lost_warning(lost) {
        crate::printable::eprint_line(&w);
        return Ok(3);
    }
    Ok(0)
}

/// `netprobe: N probe(s) on M function(s), pid ...; Ctrl-C to stop` on stderr.
fn say_attached(session: &Session) {
    let pids = session.pids();
    crate::printable::eprint_line(&format!(
        "netprobe: {} probe(s) on {} function(s){}; Ctrl-C to stop",
        session.placed(),
        session.plan().functions.len(),
        if pids.is_empty() {
            ", every process".to_string()
        } else {
            format!(", pid {}", join_pids(pids))
        }
    ));
}
