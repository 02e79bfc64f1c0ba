//! The commands: `trace`, `count`, `latency` (live sessions), `probe add|list|remove`
//! (persistent probes), `clean`.

use super::follow::{reattach, Attachment, Reattached};
use super::generation::{run_generation, Generation, RunContext};
use super::recording::{
    check_overhead_plan, counts_in_kernel, overhead_meter, session_hit_costs, start_session,
    Scoping,
};
use crate::backend::monotonic_ns;
use crate::backend::tracefs::session::{PreparingInstance, SessionOptions};
use crate::backend::tracefs::Tracefs;
use crate::backend::Backend;
use crate::cleanup;
use crate::dryrun;
use crate::error::{Error, Result};
use crate::filter::Expr;
use crate::gate::{self, GateOptions};
use crate::lang::{build_plan, dotnet, resolve_specs, PlanOptions};
use crate::launch::{split_command, PausedChild};
use crate::mode::Mode;
use crate::plan::ProbePlan;
use crate::run_as::RunAs;
use crate::runner::{self, Limits, StopReason};
use crate::signals::SignalPipe;
use crate::sinks;
use crate::spec::Targeting;
use crate::watchdog::Watchdog;
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

/// Which hits to keep (`--filter`, `--tid`, `--comm`).
#[derive(Clone, Debug, Default)]
pub struct FilterOptions {
    pub filter: Option<String>,
    pub tids: Vec<u32>,
    pub comm: Option<String>,
}

impl FilterOptions {
    /// `--filter` parsed, and `--tid`/`--comm` as a filter on the task (both `None` when not
    /// given): the first applies where the probe reads the arguments it names, the second to
    /// every probe; each probe's filter is the two joined by `&&`.
    pub fn exprs(&self) -> Result<(Option<Expr>, Option<Expr>)> {
        let user = self.filter.as_deref().map(Expr::parse).transpose()?;
        if !self.tids.is_empty() && !crate::pidns::sees_global_pids() {
            return Err(Error::usage(
                "--tid inside a pid namespace: the kernel's filter sees global thread ids, which this namespace cannot name; use -p PID, or run netprobe in the host's pid namespace",
            ));
        }
        let comm = self.comm.as_deref().map(Expr::comm);
        Ok((user, Expr::and(Expr::tids(&self.tids), comm)))
    }
}

/// The processes of Docker container `name_or_id` (`--container`), said on stderr.
pub fn container_pids(name_or_id: &str) -> Result<Vec<u32>> {
    container_processes(name_or_id).map(|(_, pids)| pids)
}

/// What the Docker engine says about container `name_or_id` (`--container`), and its processes,
/// said on stderr.
fn container_processes(
    name_or_id: &str,
) -> Result<(netprobe_core::ipc::docker::ContainerInfo, Vec<u32>)> {
    let (info, pids) = netprobe_core::ipc::docker::container_processes(
        &netprobe_core::ipc::docker::socket_path(),
        name_or_id,
        crate::pidns::sees_global_pids(),
    )
    .map_err(|e| Error::usage(e.to_string()))?;
    crate::printable::eprint_line(&format!(
        "netprobe: container {} ({}): pid {}",
        info.name,
        short_id(&info.id),
        join_pids(&pids)
    ));
    Ok((info, pids))
}

/// Applies the filter (if any) to every probe of the plan, and checks that the backend can
/// evaluate it (tracefs: the text of each event's `filter` file) before anything is placed.
pub(crate) fn apply_filter(
    plan: &mut ProbePlan,
    (user, task): &(Option<Expr>, Option<Expr>),
) -> Result<()> {
    if user.is_none() && task.is_none() {
        return Ok(());
    }
    crate::filter::apply(plan, user.as_ref(), task.as_ref())?;
    let layout = crate::backend::tracefs::events::event_layout(plan)?;
    let texts: Vec<&str> = layout
        .events
        .iter()
        .filter_map(|e| e.filter.as_deref())
        .collect();
    let mut distinct = texts.clone();
    distinct.dedup();
    if let [one] = distinct.as_slice() {
        plan.notes
            .push(format!("kernel filter on {} event(s): {one}", texts.len()));
    } else {
        for e in &layout.events {
            if let Some(t) = &e.filter {
                plan.notes.push(format!("kernel filter on {}: {t}", e.name));
            }
        }
    }
    Ok(())
}

/// Prints the plan's notes and the probe-safety gate's on stderr, one `netprobe: ` line each.
pub(crate) fn print_notes(plan: &ProbePlan, report: &gate::GateReport) {
    for n in plan.notes.iter().chain(&report.notes()) {
        crate::printable::eprint_line(&format!("netprobe: {n}"));
    }
}

/// The largest per-CPU ring buffer `--buffer-kb` accepts (1 GiB): the kernel allocates it on
/// every CPU at once, and larger sizes only fail with ENOMEM after the probes are planned.
const MAX_BUFFER_KB: u64 = 1 << 20;

/// The plan for `targeting`, with the filter applied and the probe-safety gate's report (notes
/// said on stderr), and the .NET tiering guard where .NET rules apply (a plan with managed
/// methods, or --keep-r2r, which it checks).
pub(crate) fn checked_plan(
    mode: Mode,
    o: &LiveOptions,
    targeting: &Targeting,
    dotnet_command: Option<&dotnet::resolve::DotnetCommand>,
    pids: &[u32],
    filter: &(Option<Expr>, Option<Expr>),
) -> Result<(ProbePlan, gate::GateReport, dotnet::Guard)> {
    let resolved = resolve_specs(&o.specs, targeting, dotnet_command)?;
    let mut plan = build_plan(
        mode,
        &resolved,
        &PlanOptions {
            force_uretprobe: o.force_uretprobe,
            pids: pids.to_vec(),
            fetch_args: filter.0.as_ref().is_some_and(|f| !f.names().is_empty()),
        },
    )?;
    if o.stack {
        plan.record_user_stacks();
    }
    apply_filter(&mut plan, filter)?;
    gate::choose_entry_points(&mut plan, o.gate);
    let report = gate::check(&plan, o.gate);
    print_notes(&plan, &report);
    let guard = if !plan.managed.is_empty() || o.keep_r2r {
        let guard = dotnet::preflight(
            !plan.managed.is_empty(),
            targeting,
            dotnet_command,
            o.keep_r2r,
        )?;
        dotnet::print_guard(&guard);
        guard
    } else {
        dotnet::Guard::default()
    };
    Ok((plan, report, guard))
}

/// From this many uprobes on, a session says before placing them that it takes a while.
const LARGE_SESSION_PROBES: usize = 10_000;

/// Runs a live command (`trace`, `count`, `latency`); returns the process exit code.
pub fn run_live(mode: Mode, o: &LiveOptions) -> Result<i32> {
    if o.command.is_some() && (!o.pids.is_empty() || o.container.is_some()) {
        return Err(Error::usage("use either -p/--container or -c, not both"));
    }
    crate::run_as::check_user_with_command(o.user.as_deref(), o.command.as_deref())?;
    let user = o.user.as_deref().map(RunAs::lookup).transpose()?;
    if let Some(kb) = o.buffer_kb.filter(|&kb| kb == 0 || kb > MAX_BUFFER_KB) {
        return Err(Error::usage(format!(
            "--buffer-kb {kb}: the per-CPU ring buffer must be 1 to {MAX_BUFFER_KB} KiB (1 GiB); the default is 8192"
        )));
    }
    o.check_stack_options(mode)?;
    let metrics_addr = o.metrics_addr(mode)?;
    let filter = o.filter.exprs()?;
    let mut with_container;
    let mut followed = None;
    let o = match &o.container {
        Some(c) => {
            with_container = o.clone();
            let (info, pids) = container_processes(c)?;
            with_container.pids.extend(pids);
            with_container.pids.sort_unstable();
            with_container.pids.dedup();
            // `--metrics` makes a long-running agent: it follows the container through restarts.
            if metrics_addr.is_some() && o.pids.is_empty() {
                followed = Some(info);
            }
            &with_container
        }
        None => o,
    };
    let argv = o.command.as_deref().map(split_command).transpose()?;
    let targeting = match &argv {
        Some(a) => Targeting::Command {
            exe: crate::launch::find_program(&a[0])?,
        },
        None if !o.pids.is_empty() => {
            for &p in &o.pids {
                netprobe_core::process::Process::open(p)?.check_runs_user_code()?;
            }
            runner::remember_executables(&o.pids);
            Targeting::Pids(o.pids.clone())
        }
        None => Targeting::SystemWide,
    };
    let dotnet_command = dotnet::command_of(argv.as_deref(), &targeting);
    let me = std::process::id();
    let name = cleanup::session_name(me);
    let mut opts = SessionOptions::new(name.clone());
    if let Some(kb) = o.buffer_kb {
        opts.buffer_kb = kb;
    }
    // trace prints each hit as it comes (wake on any data); count and latency only aggregate, so
    // they let a buffer fill to an eighth before waking up (the 200 ms poll tick bounds the
    // delay). On a terminal, trace wakes on every hit so lines appear as calls happen; into a pipe
    // or file it wakes like count does, which saves a wakeup per hit at high rates. An eighth, not
    // a quarter: while the targets' threads hold every CPU the reader is scheduled sooner for
    // less work, and lost 6x fewer hits at the kernel's max rate (BENCHMARKS.md, "Tracing one
    // process").
    // With --stack, frames are named from the target's maps while it runs: wake on every hit
    // too, so a short-lived target is still there when its hits are read.
    opts.buffer_percent = if o.stack || (mode == Mode::Trace && std::io::stdout().is_terminal()) {
        0
    } else {
        12
    };
    // The kernel's share of starting a session (the instance, its clock and buffers: 30-60 ms of
    // waits here, BENCHMARKS.md, "One name in a Go binary through `.gnu.hash`") runs while the names resolve; if resolving fails,
    // what it made is removed before the error is shown.
    let host_wide = matches!(targeting, Targeting::SystemWide);
    if o.max_overhead.is_some() && host_wide {
        return Err(Error::usage(
            "--max-overhead needs -p, -c or --container: a host-wide session's probes trap in every process that maps the file, which no budget of its targets accounts for",
        ));
    }
    let early = (!o.dry_run)
        .then(|| EarlySession::begin(&opts, host_wide))
        .flatten();
    let (plan, report, guard) = checked_plan(
        mode,
        o,
        &targeting,
        dotnet_command.as_ref(),
        &o.pids,
        &filter,
    )?;
    if o.dry_run {
        let script = dryrun::render(&plan, &report, &name, &o.pids, o.command.as_deref(), mode)?;
        print!("{script}");
        return report.error().map_or(Ok(0), Err);
    }
    let plan = report.approve(plan)?;
    // Dropped on an error below, `preparing` (declared last) removes its instance before the
    // watchdog is let go.
    let (tracefs, watchdog, preparing) = match early.and_then(EarlySession::into_parts) {
        Some((tracefs, watchdog, preparing)) => (tracefs, watchdog, preparing),
        None => {
            let tracefs = Tracefs::open()?;
            let watchdog = Watchdog::arm(&tracefs, &name)?;
            (tracefs, watchdog, None)
        }
    };
    // The port is bound before any probe is placed (a port in use fails with nothing left), and
    // after the watchdog is forked (binding starts the HTTP server's accept thread).
    let listener = metrics_addr
        .map(|(addr, web)| sinks::metrics::http::Listener::bind(addr).map(|l| (l, web)))
        .transpose()?;
    // Dead sessions are cleaned once this one is sure to start, so an error above is the only
    // line it prints (a session killed a moment ago, still being cleaned by its own watchdog, would
    // otherwise add a "removed ..." line to a one-line error).
    report_stale(&tracefs);
    let signals = SignalPipe::install()?;
    let mut child = match &argv {
        Some(a) => Some(PausedChild::spawn_with_env(
            a,
            &guard.child_env,
            user.as_ref(),
        )?),
        None => None,
    };
    let mut pids: Vec<u32> = match &child {
        Some(c) => vec![c.pid()],
        None => o.pids.clone(),
    };
    opts.pids = (!pids.is_empty()).then(|| pids.clone());
    if plan.probes.len() >= LARGE_SESSION_PROBES {
        crate::printable::eprint_line(&format!(
            "netprobe: placing {} uprobes; the kernel checks each new uprobe against every one already registered (`validate_ref_ctr_offset` in kernel/trace/trace_uprobe.c), so placing them takes time that grows with the square of their number (about 1.5 s for 10,000 and minutes for 70,000 here); a narrower pattern is faster",
            plan.probes.len()
        ));
    }
    check_overhead_plan(o, &plan)?;
    let costs = session_hit_costs(o);
    let in_kernel = counts_in_kernel(mode, o, listener.is_some(), &plan);
    let mut session = start_session(
        &tracefs,
        &opts,
        plan,
        preparing,
        Scoping {
            held_command: child.is_some(),
            in_kernel,
            probe_per_event: o.max_overhead.is_some(),
        },
    )?;
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
    let start_ns = monotonic_ns();
    let started = Instant::now();
    let mut guard = guard;
    let mut lost_total = crate::backend::Lost::default();
    let reason = loop {
        say_attached(session.as_ref(), &pids);
        if let Some(c) = child.as_mut() {
            c.release()?;
        }
        let mut meter = overhead_meter(o, session.as_ref(), costs.as_ref());
        let mut run_ctx = RunContext {
            signals: &signals,
            pids: &pids,
            child: child.as_mut(),
            limits: Limits {
                duration: o.duration.map(|d| d.saturating_sub(started.elapsed())),
                interval: o.interval,
            },
            meter: meter.as_mut(),
        };
        let generation = Generation {
            metrics: exported.as_ref().map(|(m, _)| m),
            container: followed.as_ref(),
            tracefs: &tracefs,
            guard: &guard,
            start_ns,
        };
        let (reason, lost) = run_generation(mode, o, session.as_mut(), &mut run_ctx, &generation)?;
        if let Some(m) = &meter {
            let e = m.overall();
            let typical = costs.as_ref().is_some_and(|c| !c.measured);
            crate::printable::eprint_line(&format!(
                "netprobe: estimated cost to the targets over {:.1} s: {}{}",
                e.seconds,
                e.describe(),
                if typical {
                    " (typical costs per hit: this machine's could not be measured, the kernel's uprobe PMU needs CAP_PERFMON)"
                } else {
                    ""
                }
            ));
        }
        lost_total.counted = lost_total.counted.saturating_add(lost.counted);
        lost_total.unknown_amount |= lost.unknown_amount;
        let Some(info) = followed.as_ref().filter(|_| {
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
        match reattach(mode, o, info, &tracefs, &opts, &filter, &signals, started)? {
            Reattached::Attached(a) => {
                let Attachment {
                    session: s,
                    pids: p,
                    guard: g,
                    info: i,
                } = *a;
                session = s;
                pids = p;
                guard = g;
                crate::printable::eprint_line(&format!(
                    "netprobe: container {} ({}): re-attached to pid {}",
                    i.name,
                    short_id(&i.id),
                    join_pids(&pids)
                ));
                if let Some((m, _)) = &exported {
                    m.rebind(session.plan(), session.placed());
                }
                followed = Some(i);
            }
            Reattached::Stopped(reason) => {
                if let Some((_, server)) = exported {
                    server.shutdown();
                }
                watchdog.disarm();
                return finish(reason, started, lost_total);
            }
        }
    };
    if let Some((_, server)) = exported {
        server.shutdown();
    }
    if let Some(c) = child.as_mut() {
        c.terminate();
    }
    // Results are out; now the slow part (disabling each uprobe event), then the watchdog.
    session.detach()?;
    watchdog.disarm();
    finish(reason, started, lost_total)
}

/// Says why the session ended and what it lost; the exit code (3 when events were lost).
fn finish(reason: StopReason, started: Instant, lost: crate::backend::Lost) -> Result<i32> {
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

/// A container id as `docker ps` shows it (12 hex digits).
fn short_id(id: &str) -> &str {
    &id[..id.len().min(12)]
}

pub(crate) fn join_pids(pids: &[u32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `netprobe: N probe(s) on M function(s), pid ...; Ctrl-C to stop` on stderr.
fn say_attached(session: &dyn Backend, pids: &[u32]) {
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

/// What a live command sets up before it resolves its names: tracefs opened, the watchdog forked
/// (while the process has one thread), and the session's instance being prepared on a thread
/// ([`PreparingInstance`]). Dropped before [`EarlySession::into_parts`]
/// (resolving failed), it removes the instance, then lets the watchdog go: nothing is left.
struct EarlySession {
    tracefs: Tracefs,
    watchdog: Option<Watchdog>,
    preparing: Option<PreparingInstance>,
}

impl EarlySession {
    /// `None` when tracefs does not open or the watchdog cannot be forked: both are then tried
    /// after resolving, as before, and report their own errors.
    /// `host_wide`: the session records every process, through a tracefs instance, which is
    /// prepared now; a session scoped to processes needs none.
    fn begin(opts: &SessionOptions, host_wide: bool) -> Option<EarlySession> {
        let tracefs = Tracefs::open().ok()?;
        let watchdog = Watchdog::arm(&tracefs, &opts.name).ok()?;
        let preparing = host_wide.then(|| PreparingInstance::begin(&tracefs, opts));
        Some(EarlySession {
            tracefs,
            watchdog: Some(watchdog),
            preparing,
        })
    }

    /// The parts, for the session to take over (always `Some`: the parts are only taken here).
    fn into_parts(mut self) -> Option<(Tracefs, Watchdog, Option<PreparingInstance>)> {
        let (watchdog, preparing) = (self.watchdog.take()?, self.preparing.take());
        Some((self.tracefs.clone(), watchdog, preparing))
    }
}

impl Drop for EarlySession {
    fn drop(&mut self) {
        drop(self.preparing.take());
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.disarm();
        }
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
