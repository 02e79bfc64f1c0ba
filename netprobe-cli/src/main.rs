//! The `netprobe` binary: parses arguments and calls into the library.
use clap::{Args, Parser, Subcommand};
use netprobe_cli::commands::{self, parse_duration, LiveOptions};
use netprobe_cli::dryrun::Mode;
use std::time::Duration;

/// Dynamic tracing of .NET and Go programs with uprobes.
#[derive(Parser, Debug)]
#[command(name = "netprobe", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where and how long to trace (shared by trace, count, latency).
#[derive(Args, Debug)]
struct Live {
    /// Probe specs: [p:|r:][IMAGE:]PATTERN|IMAGE:0xOFFSET [ARG...], e.g. './app:add s32 s32',
    /// 'r:./app:add s32', 'libc.so.6:puts string'.
    #[arg(required = true)]
    probes: Vec<String>,
    /// Trace this process (repeatable); patterns without IMAGE search its mapped files.
    #[arg(short = 'p', long = "pid")]
    pids: Vec<u32>,
    /// Start this command (split like a shell does) and trace it from its first instruction.
    #[arg(short = 'c', long = "command")]
    command: Option<String>,
    /// Print JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Stop after this long (e.g. 10s, 500ms, 2m).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many events (trace: hits; count: calls; latency: completed calls).
    #[arg(long)]
    max_events: Option<u64>,
    /// Print the uprobe_events lines, perf probe commands and a bpftrace program; place nothing.
    #[arg(long)]
    dry_run: bool,
    /// Per-CPU ring buffer size in KiB (default 8192).
    #[arg(long)]
    buffer_kb: Option<u64>,
}

impl Live {
    fn options(self, interval: Option<Duration>) -> LiveOptions {
        LiveOptions {
            specs: self.probes,
            pids: self.pids,
            command: self.command,
            json: self.json,
            duration: self.duration,
            max_events: self.max_events,
            interval,
            dry_run: self.dry_run,
            buffer_kb: self.buffer_kb,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print one line per hit: time, pid/tid, command, function, arguments or return value.
    Trace(Live),
    /// Count calls per function (like bcc funccount).
    Count {
        #[command(flatten)]
        live: Live,
        /// Print (and reset) the counts every interval instead of once at the end.
        #[arg(long, value_parser = parse_duration)]
        interval: Option<Duration>,
    },
    /// Time calls per function: log2 histogram and p50/p90/p99/max (like bcc funclatency).
    Latency(Live),
    /// Persistent probes for perf and bpftrace (stay until `probe remove`).
    Probe {
        #[command(subcommand)]
        action: ProbeAction,
    },
    /// Remove probes and instances left by netprobe processes that no longer run.
    Clean,
    /// Trace a known function of netprobe itself end to end and explain each step (needs root).
    Demo,
    /// (internal) the demo's target process.
    #[command(hide = true, name = "demo-target")]
    DemoTarget {
        #[arg(long, default_value_t = netprobe_cli::demo::DEMO_CALLS)]
        calls: i32,
    },
}

#[derive(Subcommand, Debug)]
enum ProbeAction {
    /// Add probes (entry, or return for r: specs) to a group (default netprobe_persist).
    Add {
        #[arg(required = true)]
        probes: Vec<String>,
        #[arg(short = 'p', long = "pid")]
        pids: Vec<u32>,
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        dry_run: bool,
    },
    /// List netprobe's probes (or one group's).
    List {
        #[arg(long)]
        group: Option<String>,
    },
    /// Remove the named events of a group, or all of it when none are named.
    Remove {
        #[arg(long)]
        group: Option<String>,
        events: Vec<String>,
    },
}

fn main() {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout();
    let result = match cli.command {
        Command::Trace(l) => commands::run_live(Mode::Trace, &l.options(None)),
        Command::Count { live, interval } => {
            commands::run_live(Mode::Count, &live.options(interval))
        }
        Command::Latency(l) => commands::run_live(Mode::Latency, &l.options(None)),
        Command::Probe { action } => match action {
            ProbeAction::Add {
                probes,
                pids,
                group,
                dry_run,
            } => commands::probe_add(&probes, &pids, group.as_deref(), dry_run, &mut stdout),
            ProbeAction::List { group } => commands::probe_list(group.as_deref(), &mut stdout),
            ProbeAction::Remove { group, events } => {
                commands::probe_remove(group.as_deref(), &events, &mut stdout)
            }
        },
        Command::Clean => commands::clean(&mut stdout),
        Command::Demo => netprobe_cli::demo::run(&mut stdout),
        Command::DemoTarget { calls } => Ok(netprobe_cli::demo::demo_target(calls)),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("netprobe: error: {e}");
            std::process::exit(1);
        }
    }
}
