//! Command-line arguments (clap) and dispatch. Errors are printed as one line,
//! `netprobe: error: <cause>: <fix>`, with exit status 1; usage errors exit with 2 (clap).

use crate::commands;
use crate::commands::live;
use crate::commands::probe;
use crate::mode::Mode;
use clap::Parser;
use std::process::ExitCode;

/// A tracing command's result as the dispatcher's: exit codes pass through (3 = hits were lost).
fn tracing(r: crate::Result<i32>) -> anyhow::Result<ExitCode> {
    r.map(|code| ExitCode::from(code.clamp(0, 255) as u8))
        .map_err(anyhow::Error::from)
}

mod args;

pub use args::*;

/// Parses the command line, runs the command, prints any error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Symbols(a) => commands::symbols::run(&a),
        Command::Offsets(a) => commands::offsets::run(&a),
        Command::Trace(l) => tracing(live::run_live(Mode::Trace, &l.options(None, None))),
        Command::Count {
            live: l,
            interval,
            folded,
            folded_lines,
            unknown_addrs,
            metrics,
        } => tracing(live::run_live(
            Mode::Count,
            &crate::commands::live_options::LiveOptions {
                folded_lines,
                unknown_addrs,
                ..l.options_with(interval, folded, metrics)
            },
        )),
        Command::Latency { live: l, metrics } => tracing(live::run_live(
            Mode::Latency,
            &l.options_with(None, None, metrics),
        )),
        Command::Profile(a) => tracing(commands::profile::run(&a)),
        Command::Probe { action } => {
            let mut out = std::io::stdout();
            tracing(match action {
                ProbeAction::Add {
                    probes,
                    pids,
                    containers,
                    filter,
                    group,
                    dry_run,
                    force_uretprobe,
                    unsafe_offset,
                } => probe::probe_add(
                    &probe::PersistOptions {
                        specs: probes,
                        pids,
                        container: containers.clone().selection(),
                        filter: filter.options(),
                        group,
                        dry_run,
                        force_uretprobe,
                        gate: crate::gate::GateOptions {
                            unsafe_offset,
                            // Persistent probes stay where their names say (perf users read
                            // them by offset).
                            exact_entry: true,
                        },
                    },
                    &mut out,
                ),
                ProbeAction::List { group } => probe::probe_list(group.as_deref(), &mut out),
                ProbeAction::Remove { group, events } => {
                    probe::probe_remove(group.as_deref(), &events, &mut out)
                }
            })
        }
        Command::Ps(a) => commands::ps::run(&a),
        Command::Completions { shell } => commands::docs::completions(shell),
        Command::Man { dir } => commands::docs::man(dir.as_deref()),
        Command::Clean => tracing(commands::clean::clean(&mut std::io::stdout())),
        Command::Demo => tracing(crate::demo::run(&mut std::io::stdout())),
        Command::DemoTarget { calls } => Ok(ExitCode::from(crate::demo::demo_target(calls) as u8)),
    };
    if std::env::var_os("NETPROBE_PARSE_STATS").is_some() {
        print_parse_stats();
    }
    match result {
        Ok(code) => code,
        Err(e) if crate::output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netprobe: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line (`a: b: c`), newlines folded, and the control characters
/// of any name it quotes escaped ([`crate::printable`]).
pub fn one_line(e: &anyhow::Error) -> String {
    crate::printable::printable(&format!("{e:#}").replace('\n', " ")).into_owned()
}

/// With `NETPROBE_PARSE_STATS` set: how often this run opened and parsed each image, one
/// stderr line per image (`netprobe: parse stats: DEV:INO[+OFFSET] opens=N PART=N ...`), so a
/// test can check that every image is parsed once per run.
fn print_parse_stats() {
    let stats = netprobe_core::cache::ImageCache::shared().stats();
    for (key, opens) in &stats.opens {
        let mut line = format!("netprobe: parse stats: {}:{}", key.file.dev, key.file.ino);
        if let Some((offset, _)) = key.member {
            line.push_str(&format!("+{offset:#x}"));
        }
        line.push_str(&format!(" opens={opens}"));
        for ((k, part), n) in &stats.parses {
            if k == key {
                line.push_str(&format!(" {part:?}={n}"));
            }
        }
        eprintln!("{line}");
    }
}
