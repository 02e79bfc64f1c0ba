//! The tracing engine without the command line (no clap: it builds with
//! `--no-default-features`): trace one function of a file for a few seconds and print each hit,
//! through the engine's front door, `netprobe_cli::session::Session`: a builder (the spec, the
//! target, the options), `start` (names resolved, every probe checked by the probe-safety gate and
//! placed, a watchdog that removes them if this process is killed), `run` into a sink, `stop`.
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

use netprobe_cli::mode::Mode;
use netprobe_cli::session::{Options, Session, Target};
use netprobe_cli::sinks::{Format, TracePrinter};
use netprobe_cli::{Error, Result};
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
    // The spec names the function and its arguments in FILE; with `--pid`, in the files that
    // process maps, and only its calls are recorded.
    let target = match r.pid {
        Some(pid) => Target::Pids(vec![pid]),
        None => Target::Host,
    };
    let mut session = Session::builder(Mode::Trace)
        .spec(format!("{}:{}", r.file, r.function))
        .target(target)
        .options(Options {
            duration: Some(r.duration),
            wake_on_every_hit: true,
            ..Options::default()
        })
        .start()?;
    let mut printer = TracePrinter::new(
        std::io::stdout().lock(),
        r.format,
        session.tasks(),
        session.start_ns(),
    );
    eprintln!(
        "engine: {} probe(s) on {} function(s); tracing for {:?}",
        session.placed(),
        session.plan().functions.len(),
        r.duration
    );
    let _ = printer.header();
    // Until the duration, a signal, or the target's exit; then what is still buffered.
    let outcome = session.run(&mut printer)?;
    let _ = printer.out.flush();
    session.stop()?;
    eprintln!(
        "engine: {}; {} hit(s), {} lost",
        outcome.reason, printer.printed, outcome.lost.counted
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
