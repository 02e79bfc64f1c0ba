//! The options of `trace`, `count` and `latency` as the command line gives them, the checks
//! that name their flags, and what they become for the engine: a [`Target`] and [`Options`].

use crate::error::{Error, Result};
use crate::gate::GateOptions;
use crate::mode::Mode;
use crate::session::{FilterOptions, Options, Target};
use crate::sinks;
use std::io::IsTerminal;
use std::time::Duration;

/// Options every live command shares.
#[derive(Clone, Debug, Default)]
pub struct LiveOptions {
    pub specs: Vec<String>,
    pub pids: Vec<u32>,
    /// `--container`, `--pod` or `--selector`: the chosen containers' processes join `pids`.
    pub container: Option<netprobe_core::containers::Selection>,
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
    /// Leave .NET targets' perf maps as they are (`--no-perf-map`).
    pub no_perf_map: bool,
    /// Text and folded stacks show each .NET frame's code tier after its name (`--tiers`).
    pub tiers: bool,
    /// `count --stack --folded [FILE]`: folded stacks to FILE (`-`: stdout).
    pub folded: Option<std::path::PathBuf>,
    /// `--folded-lines`: folded frames carry their source line.
    pub folded_lines: bool,
    /// `--unknown-addrs`: folded stacks keep each unnamed frame with its address, instead of one
    /// `[image]` frame per run of them in an image.
    pub unknown_addrs: bool,
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
    pub(super) fn check_stack_options(&self, mode: Mode) -> Result<()> {
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
    pub(super) fn metrics_addr(
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
    pub(super) fn target(&self, follow: bool) -> Target {
        match (&self.command, &self.container) {
            (Some(line), _) => Target::Command {
                line: line.clone(),
                user: self.user.clone(),
            },
            (None, Some(c)) => Target::Container {
                selection: c.clone(),
                pids: self.pids.clone(),
                follow,
            },
            (None, None) if !self.pids.is_empty() => Target::Pids(self.pids.clone()),
            (None, None) => Target::Host,
        }
    }

    /// The engine's options of these command-line options.
    pub(super) fn session_options(&self, mode: Mode, metrics: bool) -> Options {
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
            // Containers' hits are counted per container, which needs each hit's process: the
            // kernel's per-probe counts carry none.
            reads_each_hit: self.max_events.is_some() || metrics || self.container.is_some(),
            // On a terminal, trace lines appear as calls happen; into a pipe or a file the reader
            // wakes like count's does.
            wake_on_every_hit: mode == Mode::Trace && std::io::stdout().is_terminal(),
        }
    }
}
