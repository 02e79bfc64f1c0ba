//! One run of a live session into its command's sink: the sink each mode gets (trace lines,
//! counts, stack counts, latency; with `--metrics`, exported too), the event loop until the session
//! stops, and the report of what it saw.

use super::live::LiveOptions;
use crate::backend::tracefs::Tracefs;
use crate::backend::Backend;
use crate::error::Result;
use crate::lang::dotnet;
use crate::launch::PausedChild;
use crate::mode::Mode;
use crate::overhead::OverheadMeter;
use crate::runner::{self, Limits, StopReason};
use crate::signals::SignalPipe;
use crate::sinks::metrics::Exported;
use crate::sinks::{self, Counter, Format, IntervalCounter, Latency, TaskInfo, TracePrinter};
use std::io::Write;
use std::time::Instant;

/// What one run of a session's sinks needs besides the session: the exported metrics, the
/// followed container (its name labels its processes), tracefs (task lookups) and the .NET
/// tiering guard (the stall watcher's advice).
pub(crate) struct Generation<'a> {
    pub metrics: Option<&'a std::sync::Arc<sinks::metrics::Metrics>>,
    pub container: Option<&'a netprobe_core::ipc::docker::ContainerInfo>,
    pub tracefs: &'a Tracefs,
    pub guard: &'a dotnet::Guard,
    /// CLOCK_MONOTONIC at the session's start (trace lines show times relative to it).
    pub start_ns: u64,
}

/// Runs `session` into the command's sink until it stops, and prints the command's report of
/// what it saw (count, latency, stacks). Returns why it stopped and what was lost.
pub(crate) fn run_generation(
    mode: Mode,
    o: &LiveOptions,
    session: &mut dyn Backend,
    run_ctx: &mut RunContext<'_>,
    g: &Generation<'_>,
) -> Result<(StopReason, crate::backend::Lost)> {
    let tracefs = g.tracefs;
    // Only a session with .NET methods is watched for hits that stop (tiered compilation);
    // Go and native hits go straight to the sink.
    let managed = &session.plan().managed;
    let mut stall = if managed.is_empty() {
        None
    } else {
        sinks::stall::StallWatch::for_session(
            session.plan(),
            |id| managed.contains(&id),
            g.guard.fix.clone(),
            g.guard.default_fix.clone(),
        )
    };
    fn export<'s>(
        inner: Exported<'s>,
        container: Option<&netprobe_core::ipc::docker::ContainerInfo>,
    ) -> Exported<'s> {
        match container {
            Some(c) => inner.known_container(&c.id, &c.name),
            None => inner,
        }
    }
    let export_tasks = || {
        let mut t = TaskInfo::new(Some(tracefs.root().to_path_buf()));
        t.set_translation(session.pid_map().cloned());
        t
    };
    let format = if o.json { Format::Json } else { Format::Text };
    let stdout = std::io::stdout();
    let start_ns = g.start_ns;
    let started = Instant::now();
    Ok(match mode {
        Mode::Trace => {
            let mut printer = TracePrinter {
                out: std::io::BufWriter::with_capacity(64 * 1024, stdout.lock()),
                format,
                start_ns,
                max_events: o.max_events,
                printed: 0,
                tasks: {
                    let mut t = TaskInfo::new(Some(tracefs.root().to_path_buf()));
                    t.set_translation(session.pid_map().cloned());
                    t
                },
                stacks: o.stack.then(|| sinks::stack::StackShow::new(o.stack_depth)),
            };
            let _ = printer.header();
            let (reason, lost) = run_to_end(session, run_ctx, &mut printer, stall.as_mut())?;
            let _ = printer.out.flush();
            (reason, lost)
        }
        Mode::Count if o.stack => {
            let mut tasks = TaskInfo::new(Some(tracefs.root().to_path_buf()));
            tasks.set_translation(session.pid_map().cloned());
            let mut counter = sinks::stack::StackCounter::new(tasks, o.stack_depth, o.max_events);
            let (reason, lost) = run_to_end(session, run_ctx, &mut counter, stall.as_mut())?;
            let elapsed = started.elapsed().as_secs_f64();
            let report = counter.stack_report(lost, elapsed);
            let mut out = stdout.lock();
            match o.folded.as_deref() {
                Some(p) if p == std::path::Path::new("-") => {
                    let _ = out.write_all(report.folded().as_bytes());
                }
                Some(p) => {
                    super::profile::write_file(p, |w| w.write_all(report.folded().as_bytes()))?;
                    let _ = format.printer().stack_counts(&mut out, &report);
                }
                None => {
                    let _ = format.printer().stack_counts(&mut out, &report);
                }
            }
            let _ = out.flush();
            (reason, lost)
        }
        Mode::Count => {
            let mut counter = IntervalCounter {
                counter: Counter {
                    max_events: o.max_events,
                    ..Counter::default()
                },
                out: stdout.lock(),
                format,
                last_tick: Instant::now(),
            };
            let mut with_metrics;
            let sink: &mut dyn sinks::Sink = match g.metrics {
                Some(m) => {
                    with_metrics = export(
                        Exported::counting(&mut counter, m.clone(), export_tasks()),
                        g.container,
                    );
                    &mut with_metrics
                }
                None => &mut counter,
            };
            let (reason, lost) = run_to_end(session, run_ctx, sink, stall.as_mut())?;
            if o.interval.is_none() || counter.counter.total > 0 {
                let elapsed = counter.last_tick.elapsed().as_secs_f64();
                let _ =
                    counter
                        .counter
                        .report(session.plan(), format, lost, elapsed, &mut counter.out);
            }
            (reason, lost)
        }
        Mode::Latency | Mode::Persist => {
            let mut lat = Latency {
                max_events: o.max_events,
                ..Latency::default()
            };
            let mut with_metrics;
            let sink: &mut dyn sinks::Sink = match g.metrics {
                Some(m) => {
                    with_metrics = export(
                        Exported::timing(&mut lat, m.clone(), export_tasks()),
                        g.container,
                    );
                    &mut with_metrics
                }
                None => &mut lat,
            };
            let (reason, lost) = run_to_end(session, run_ctx, sink, stall.as_mut())?;
            let _ = lat.report(session.plan(), format, lost, &mut stdout.lock());
            (reason, lost)
        }
    })
}

/// What a live command's event loop needs besides the session and the sink.
pub(crate) struct RunContext<'a> {
    pub signals: &'a SignalPipe,
    pub pids: &'a [u32],
    pub child: Option<&'a mut PausedChild>,
    pub limits: Limits,
    /// The session's cost meter (`--max-overhead`, `--interval`).
    pub meter: Option<&'a mut OverheadMeter>,
}

/// Runs the session into `sink` (wrapped by the stall watcher when there is one: .NET sessions)
/// until it stops, then stops recording and hands the sink what is still buffered, unless it had
/// enough or nobody reads its output anymore. Returns why it stopped and what was lost.
fn run_to_end(
    session: &mut dyn Backend,
    ctx: &mut RunContext<'_>,
    sink: &mut dyn sinks::Sink,
    stall: Option<&mut sinks::stall::StallWatch>,
) -> Result<(StopReason, crate::backend::Lost)> {
    let mut watched;
    let first: &mut dyn sinks::Sink = match stall {
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
        session,
        ctx.signals,
        ctx.pids,
        ctx.child.as_deref_mut(),
        ctx.limits,
        first,
        ctx.meter.as_deref_mut(),
    )?;
    let mut meter = ctx.meter.as_deref_mut();
    let lost = session.stop(&mut |plan, hit| {
        if let Some(m) = meter.as_deref_mut() {
            m.observe(hit.probe, 1);
        }
        if reason != StopReason::MaxEvents && reason != StopReason::OutputClosed {
            let _ = sink.hit(plan, hit);
        }
    })?;
    // What the kernel counted since the last interval (recording has stopped: this is final).
    session.read_counts(&mut |plan, probe, calls| {
        if let Some(m) = meter.as_deref_mut() {
            m.observe(probe, calls);
        }
        let _ = sink.counted(plan, probe, calls);
    })?;
    Ok((reason, lost))
}
