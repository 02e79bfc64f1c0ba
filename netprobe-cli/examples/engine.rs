//! The tracing engine without the command line (no clap: it builds with
//! `--no-default-features`): trace one function of a file for a few seconds and print each hit.
//! The steps are those of `netprobe trace`: spec → locations → plan → probe-safety gate →
//! session (probes in tracefs, a recording instance) → event loop → sink.
//!
//! ```text
//! cargo build -p netprobe-cli --example engine
//! sudo target/debug/examples/engine FILE 'FUNCTION [ARG...]' [--pid PID] [--seconds N] [--json]
//! sudo target/debug/examples/engine ./tracee 'np_add a=s32 b=s64 s=string' --pid 1234
//! ```
//!
//! FUNCTION and its arguments follow the probe spec grammar (`netprobe_cli::spec`). With `--pid`
//! it records only that process and stops when it exits; otherwise every process running FILE,
//! for `--seconds` (default 5). Needs root and tracefs, like netprobe.

use netprobe_cli::backend::monotonic_ns;
use netprobe_cli::backend::tracefs::session::{Session, SessionOptions};
use netprobe_cli::backend::tracefs::Tracefs;
use netprobe_cli::backend::Backend;
use netprobe_cli::gate::{self, GateOptions};
use netprobe_cli::lang::{build_plan, resolve_specs, PlanOptions};
use netprobe_cli::mode::Mode;
use netprobe_cli::runner::{self, Limits};
use netprobe_cli::signals::SignalPipe;
use netprobe_cli::sinks::{Format, Sink, TaskInfo, TracePrinter};
use netprobe_cli::spec::Targeting;
use netprobe_cli::watchdog::Watchdog;
use netprobe_cli::{cleanup, Error, Result};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// What to trace, from the arguments.
struct Request {
    file: String,
    function: String,
    pid: Option<u32>,
    duration: Duration,
    format: Format,
}

fn parse(args: &[String]) -> Result<Request> {
    let usage = || {
        Error::usage("usage: engine FILE 'FUNCTION [ARG...]' [--pid PID] [--seconds N] [--json]")
    };
    let mut rest = args.iter();
    let (Some(file), Some(function)) = (rest.next(), rest.next()) else {
        return Err(usage());
    };
    let mut r = Request {
        file: file.clone(),
        function: function.clone(),
        pid: None,
        duration: Duration::from_secs(5),
        format: Format::Text,
    };
    while let Some(a) = rest.next() {
        let mut value = || rest.next().ok_or_else(usage);
        match a.as_str() {
            "--pid" => r.pid = Some(value()?.parse().map_err(|_| usage())?),
            "--seconds" => {
                let s: f64 = value()?.parse().map_err(|_| usage())?;
                r.duration = Duration::try_from_secs_f64(s).map_err(|_| usage())?;
            }
            "--json" => r.format = Format::Json,
            _ => return Err(usage()),
        }
    }
    Ok(r)
}

/// Traces `r`'s function, printing hits on stdout; returns how many were printed.
fn trace(r: &Request) -> Result<u64> {
    // 1. Spec → locations: where the function's code is, in FILE (or in the files `pid` maps).
    let targeting = match r.pid {
        Some(pid) => Targeting::Pids(vec![pid]),
        None => Targeting::SystemWide,
    };
    let spec = format!("{}:{}", r.file, r.function);
    let resolved = resolve_specs(&[spec], &targeting, None)?;
    // 2. Locations → plan: which kernel probes, by the language's rules (C, Go or .NET).
    let pids: Vec<u32> = r.pid.into_iter().collect();
    let options = PlanOptions {
        force_uretprobe: false,
        pids: pids.clone(),
        ..PlanOptions::default()
    };
    let plan = build_plan(Mode::Trace, &resolved, &options)?;
    // 3. The probe-safety gate: only a plan it approves can be placed.
    let report = gate::check(&plan, GateOptions::default());
    for note in plan.notes.iter().chain(&report.notes()) {
        eprintln!("engine: {note}");
    }
    let plan = report.approve(plan)?;
    // 4. The session: probes and a recording instance in tracefs, removed on every exit path
    //    (the watchdog removes them even if this process is killed).
    let tracefs = Tracefs::open()?;
    let name = cleanup::session_name(std::process::id());
    let watchdog = Watchdog::arm(&tracefs, &name)?;
    let signals = SignalPipe::install()?;
    let mut options = SessionOptions::new(name);
    options.pids = r.pid.map(|p| vec![p]);
    let mut session = Session::start(&tracefs, &options, plan)?;
    // 5. The sink: one line per hit, in the chosen format.
    let mut tasks = TaskInfo::new(Some(tracefs.root().to_path_buf()));
    tasks.set_translation(session.pid_map().cloned());
    let mut printer = TracePrinter {
        out: std::io::stdout().lock(),
        format: r.format,
        start_ns: monotonic_ns(),
        max_events: None,
        printed: 0,
        tasks,
        stacks: None,
    };
    eprintln!(
        "engine: {} probe(s) on {} function(s); tracing for {:?}",
        session.probes().len(),
        session.plan().functions.len(),
        r.duration
    );
    let _ = printer.header();
    // 6. The event loop, until the duration, a signal, or the target's exit; then what is still
    //    buffered.
    let limits = Limits {
        duration: Some(r.duration),
        interval: None,
    };
    let reason = runner::run(&mut session, &signals, &pids, None, limits, &mut printer)?;
    let lost = session.stop(&mut |plan, hit| {
        printer.hit(plan, hit);
    })?;
    let _ = printer.out.flush();
    session.close()?;
    watchdog.disarm();
    eprintln!(
        "engine: {reason}; {} hit(s), {} lost",
        printer.printed, lost.counted
    );
    Ok(printer.printed)
}

pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|r| trace(&r)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engine: error: {e}");
            ExitCode::FAILURE
        }
    }
}
