//! `netprobe trace`, `count` and `latency`: a live session from the command line. The options
//! are checked (usage errors name the flag), turned into a [`Session`], and the session is run
//! into the mode's sink (`generation.rs`), re-attached when `--container ... --metrics` follows a
//! container through restarts, and stopped.

use super::generation::run_generation;
pub use super::live_options::LiveOptions;
use crate::backend::Lost;
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::runner::StopReason;
use crate::session::{join_pids, short_id, Reattached, Session};
use crate::sinks;
use std::time::Instant;

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
    // Stacks of .NET processes given by pid: their JIT code named from a perf map turned on for
    // the session (a `-c` command's runtime is not up yet; its map is its own business).
    let jit = match (o.stack, &o.command) {
        (true, None) => super::jit_names::turn_on(session.pids(), o.no_perf_map),
        _ => super::jit_names::JitNames::default(),
    };
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
                jit.end();
                return finish(reason, started, lost_total);
            }
        }
    };
    if let Some((_, server)) = exported {
        server.shutdown();
    }
    session.stop()?;
    jit.end();
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
