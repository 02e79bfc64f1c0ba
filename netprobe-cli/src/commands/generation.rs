//! One run of a live session into its command's sink: the sink each mode gets (trace lines,
//! counts, stack counts, latency; with `--metrics`, exported too), the event loop until the session
//! stops, and the report of what it saw.

use super::live_options::LiveOptions;
use crate::error::Result;
use crate::mode::Mode;
use crate::session::{Outcome, Session};
use crate::sinks::metrics::Exported;
use crate::sinks::{self, Counter, Format, IntervalCounter, Latency, TracePrinter};
use std::io::Write;
use std::time::Instant;

/// Runs `session` into the command's sink until it stops, and prints the command's report of
/// what it saw (count, latency, stacks). Returns why it stopped and what was lost.
pub(crate) fn run_generation(
    mode: Mode,
    o: &LiveOptions,
    session: &mut Session,
    metrics: Option<&std::sync::Arc<sinks::metrics::Metrics>>,
) -> Result<Outcome> {
    let container = session.container().cloned();
    fn export<'s>(
        inner: Exported<'s>,
        container: Option<&netprobe_core::ipc::docker::ContainerInfo>,
        pids: &[u32],
    ) -> Exported<'s> {
        match container {
            Some(c) => inner.known_container(&c.id, &c.name),
            None => inner,
        }
        .learn(pids)
    }
    /// Where the hits' processes run, with the followed container's name already known, and
    /// the targets looked up while they run.
    fn places(
        container: Option<&netprobe_core::ipc::docker::ContainerInfo>,
        pids: &[u32],
    ) -> sinks::places::Places {
        let mut p = sinks::places::Places::default();
        if let Some(c) = container {
            p.known(&c.id, &c.name);
        }
        p.learn(pids)
    }
    let format = if o.json { Format::Json } else { Format::Text };
    let stdout = std::io::stdout();
    let start_ns = session.start_ns();
    let started = Instant::now();
    Ok(match mode {
        Mode::Trace => {
            let mut printer = TracePrinter {
                out: std::io::BufWriter::with_capacity(64 * 1024, stdout.lock()),
                format,
                start_ns,
                max_events: o.max_events,
                printed: 0,
                tasks: session.tasks(),
                places: places(container.as_ref(), session.pids()),
                stacks: o.stack.then(|| {
                    let mut show = sinks::stack::StackShow::new(o.stack_depth);
                    show.tiers = o.tiers;
                    show.use_recorded_maps(session.recorded_maps());
                    show
                }),
            };
            let _ = printer.header();
            let outcome = session.run(&mut printer)?;
            let _ = printer.out.flush();
            outcome
        }
        Mode::Count if o.stack => {
            let mut counter =
                sinks::stack::StackCounter::new(session.tasks(), o.stack_depth, o.max_events);
            counter.use_recorded_maps(session.recorded_maps());
            let outcome = session.run(&mut counter)?;
            let elapsed = started.elapsed().as_secs_f64();
            let report = counter.stack_report(outcome.lost, elapsed);
            // Text and folded stacks: with `--tiers` each .NET frame named with its tier, else
            // a method one frame at every tier; JSON frames carry `tier` as a field.
            let shown = match o.tiers {
                true => report.clone().with_tiers_in_names(),
                false => report.clone().with_tiers_merged(),
            };
            let printed = match format {
                Format::Text => &shown,
                Format::Json => &report,
            };
            let mut out = stdout.lock();
            let folded = || match o.unknown_addrs {
                true => shown.folded(o.folded_lines),
                false => shown.folded_collapsed(o.folded_lines),
            };
            match o.folded.as_deref() {
                Some(p) if p == std::path::Path::new("-") => {
                    let _ = out.write_all(folded().as_bytes());
                }
                Some(p) => {
                    let folded = folded();
                    super::profile::write_file(p, |w| w.write_all(folded.as_bytes()))?;
                    let _ = format.printer().stack_counts(&mut out, printed);
                }
                None => {
                    let _ = format.printer().stack_counts(&mut out, printed);
                }
            }
            let _ = out.flush();
            outcome
        }
        Mode::Count => {
            let mut counter = IntervalCounter {
                counter: Counter {
                    max_events: o.max_events,
                    ..Counter::default()
                }
                .by_container(session.tasks(), places(container.as_ref(), session.pids())),
                out: stdout.lock(),
                format,
                last_tick: Instant::now(),
            };
            let mut with_metrics;
            let sink: &mut dyn sinks::Sink = match metrics {
                Some(m) => {
                    with_metrics = export(
                        Exported::counting(&mut counter, m.clone(), session.tasks()),
                        container.as_ref(),
                        session.pids(),
                    );
                    &mut with_metrics
                }
                None => &mut counter,
            };
            let outcome = session.run(sink)?;
            if o.interval.is_none() || counter.counter.total > 0 {
                let elapsed = counter.last_tick.elapsed().as_secs_f64();
                let _ = counter.counter.report(
                    session.plan(),
                    format,
                    outcome.lost,
                    elapsed,
                    &mut counter.out,
                );
            }
            outcome
        }
        Mode::Latency | Mode::Persist => {
            let mut lat = Latency {
                max_events: o.max_events,
                ..Latency::default()
            }
            .by_container(session.tasks(), places(container.as_ref(), session.pids()));
            let mut with_metrics;
            let sink: &mut dyn sinks::Sink = match metrics {
                Some(m) => {
                    with_metrics = export(
                        Exported::timing(&mut lat, m.clone(), session.tasks()),
                        container.as_ref(),
                        session.pids(),
                    );
                    &mut with_metrics
                }
                None => &mut lat,
            };
            let outcome = session.run(sink)?;
            let _ = lat.report(session.plan(), format, outcome.lost, &mut stdout.lock());
            outcome
        }
    })
}
