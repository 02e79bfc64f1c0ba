//! The command line's arguments (clap derive): every command, its flags and their help, and
//! the grammars `--help` and the man pages end with.

use crate::commands;
use crate::commands::container_args::ContainerArgs;
use crate::commands::live::LiveOptions;
use crate::commands::parse::{parse_cpu_percent, parse_duration};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// The probe-spec and filter grammars, shown under `--help` of every command that takes specs
/// (trace, count, latency, probe add) and in their man pages (clap_mangen's EXTRA section). Written
/// once here; the parsers' module docs (`crate::spec`, `crate::filter`) hold the same grammars.
/// Grammar lines start with spaces so that roff keeps them on lines of their own; a blank line
/// ends each block, so that the prose after it is not joined to its last line.
pub const SPEC_AND_FILTER_GRAMMAR: &str = r#"PROBE SPECS
  SPEC     := [p: | r:] LOCATION { ARG }       p: entry (the default), r: return
  LOCATION := IMAGE:PATTERN | IMAGE:0xOFFSET | PATTERN
  ARG      := TYPE | NAME=TYPE | NAME=FETCHARG:KTYPE
  TYPE     := u8..u64 | s8..s64 | x8..x64 | string | utf16 | gostring

IMAGE is a path, or with -p the name of a mapped file (libc.so.6, System.Private.CoreLib.dll).
Without IMAGE the pattern is searched in every executable file the -p processes map, or in the
-c command's executable (and a .NET app's framework). PATTERN is a name or glob as
`netprobe symbols` lists it; 0xOFFSET is a file offset. The first single ':' ends IMAGE ('::' in
.NET names belongs to the pattern); the location ends at the first space (use * for a space).
ARGs are positional in the target's calling convention (System V: di, si, dx, cx, r8, r9; Go
1.17+: ax, bx, cx, di, si, r8-r11; older Go: the stack), arguments past the registers read from
the stack; string is a C char *, utf16 a .NET string, gostring a Go string. For r: the one TYPE
is the return value's (default x64). .NET methods take their arguments from their signatures.
NAME=FETCHARG:KTYPE is a raw kernel fetch-arg (len=+8(%si):s32), which takes no position.
  Examples: './app:add s32 s32'  'r:./app:add s32'  'libc.so.6:puts string'
            'System.Threading.Thread::Sleep'  'main.(*Calc).Add'  './app:0x1139 a=s32'

FILTERS (--filter EXPR)
  EXPR    := OR
  OR      := AND { || AND }
  AND     := UNARY { && UNARY }
  UNARY   := ! UNARY | ( EXPR ) | CMP
  CMP     := OPERAND OP OPERAND             OP := == | != | < | <= | > | >= | ~
  OPERAND := NAME | $tid | $comm | INTEGER | STRING
  NAME    := an argument's name in the spec | arg0, arg1, ... by position | ret (returns)
  INTEGER := [-](decimal | 0x hex)          STRING := "..." or '...' (\" \' \\ escapes)

~ is a glob match on strings (*, ?, [...]); < <= > >= compare numbers only. The kernel tests the
filter before a hit is recorded; what it cannot test (two arguments compared, arithmetic, .NET
and Go string arguments) is refused before anything is placed. --tid and --comm join it with &&.
  Example: --filter 'arg0 > 5 && name ~ "/tmp/*"'
"#;

/// Dynamic tracing of .NET and Go programs with uprobes: finds where in which file a function's
/// code is, places the probes, shows the calls, and cleans up.
#[derive(Parser, Debug)]
#[command(
    name = "netprobe",
    version,
    about,
    propagate_version = true,
    after_long_help = SPEC_AND_FILTER_GRAMMAR
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the functions/methods of a file with address, size and file offset.
    Symbols(SymbolsArgs),
    /// Print the uprobe offset of each method of an image mapped in a process
    /// (what a calc-offsets.py over a crossgen map file prints, right on .NET 8 too).
    Offsets(OffsetsArgs),
    /// Print one line per hit: time, pid/tid, command, function, arguments or return value.
    #[command(after_long_help = SPEC_AND_FILTER_GRAMMAR)]
    Trace(LiveArgs),
    /// Count calls per function (like bcc funccount).
    #[command(after_long_help = SPEC_AND_FILTER_GRAMMAR)]
    Count {
        #[command(flatten)]
        live: LiveArgs,
        /// Print (and reset) the counts every interval instead of once at the end.
        #[arg(long, value_parser = parse_duration)]
        interval: Option<Duration>,
        /// With --stack: write the stacks in Brendan Gregg's folded format
        /// (`main;a;b COUNT`, root first) to FILE, or to stdout without FILE, for flame graph
        /// tools (flamegraph.pl, inferno-flamegraph).
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
        folded: Option<PathBuf>,
        /// With --folded: each frame as `function (file:line)` where the binary's debug info
        /// gives its source line.
        #[arg(long, requires = "folded")]
        folded_lines: bool,
        /// With --folded: keep each frame no symbol names as `[unknown] (IMAGE+0xOFF)`, instead
        /// of one `[IMAGE]` frame (e.g. `[libcoreclr.so]`) per run of such frames in an image.
        #[arg(long, requires = "folded")]
        unknown_addrs: bool,
        #[command(flatten)]
        metrics: MetricsArgs,
    },
    /// Time calls per function: log2 histogram and p50/p90/p99/max (like bcc funclatency).
    #[command(after_long_help = SPEC_AND_FILTER_GRAMMAR)]
    Latency {
        #[command(flatten)]
        live: LiveArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
    },
    /// Sample on-CPU user stacks (perf_event) and name every frame: top functions, folded
    /// stacks, a flame graph SVG.
    Profile(commands::profile::ProfileArgs),
    /// Persistent probes for perf and bpftrace (they stay until `probe remove`).
    Probe {
        #[command(subcommand)]
        action: ProbeAction,
    },
    /// Remove probes and instances left by netprobe processes that no longer run.
    Clean,
    /// List processes: container, kind (.NET runtime, tiering and ReadyToRun images; Go version
    /// and ABI; native) and whether netprobe can probe them.
    Ps(PsArgs),
    /// Print a shell completion script (e.g. `netprobe completions bash > /etc/bash_completion.d/netprobe`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the man page in roff (`netprobe man | man -l -`), or write one page per command
    /// into a directory.
    Man {
        /// Write netprobe.1 and netprobe-COMMAND.1 pages into this directory instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Trace a known function of netprobe itself end to end and explain each step (needs root).
    Demo,
    /// (internal) the demo's target process.
    #[command(hide = true, name = "demo-target")]
    DemoTarget {
        #[arg(long, default_value_t = crate::demo::DEMO_CALLS)]
        calls: i32,
    },
}

/// Where and how long to trace (shared by trace, count, latency).
#[derive(clap::Args, Debug)]
pub struct LiveArgs {
    /// Probe specs: [p:|r:][IMAGE:]PATTERN|IMAGE:0xOFFSET [ARG...], e.g. './app:add s32 s32',
    /// 'r:./app:add s32', 'libc.so.6:puts string' (grammar: PROBE SPECS below, in --help).
    #[arg(required = true)]
    pub probes: Vec<String>,
    /// Trace this process (repeatable); patterns without IMAGE search its mapped files.
    #[arg(short = 'p', long = "pid")]
    pub pids: Vec<u32>,
    #[command(flatten)]
    pub containers: ContainerArgs,
    /// Start this command (split like a shell does) and trace it from its first instruction.
    #[arg(short = 'c', long = "command")]
    pub command: Option<String>,
    /// With -c: run the command as this user (name or uid), with its groups from the user
    /// database and its HOME, USER and LOGNAME, like `sudo -u`; netprobe drops the command's
    /// privileges after placing the probes, right before it runs.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// Stop after this long (e.g. 10s, 500ms, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many events (trace: hits; count: calls; latency: completed calls).
    #[arg(long)]
    pub max_events: Option<u64>,
    /// Print the uprobe_events lines, perf probe commands and a bpftrace program; place nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Per-CPU ring buffer size in KiB (default 8192).
    #[arg(long)]
    pub buffer_kb: Option<u64>,
    /// Use uretprobes for returns of Go functions too, instead of one probe per RET instruction.
    /// DANGEROUS: a Go program dies if a goroutine stack moves while a probed call runs.
    #[arg(long)]
    pub force_uretprobe: bool,
    /// .NET, with -c: run the command with DOTNET_TieredCompilation=0 and
    /// COMPlus_TieredCompilation=0, so its ReadyToRun code is never replaced by JIT code and every
    /// call hits the probes.
    #[arg(long)]
    pub keep_r2r: bool,
    /// Place a raw IMAGE:0xOFFSET probe even where the probe-safety gate refuses it (not an
    /// instruction boundary of the function around it, outside executable code, a uretprobe
    /// inside a function), with a warning. DANGEROUS: a probe inside an instruction corrupts the
    /// target's code.
    #[arg(long)]
    pub unsafe_offset: bool,
    /// Keep each entry probe on the function's first instruction (after Go's stack check).
    /// By default an entry probe whose first instruction the kernel single-steps (~12 µs a
    /// hit) moves to the first instruction it emulates (push, nop, jmp: ~1.5 µs) when that
    /// changes neither the calls counted nor the arguments read; --dry-run shows each choice.
    #[arg(long)]
    pub exact_entry: bool,
    /// trace: print the user call stack under each hit; count: count calls per distinct stack
    /// (like bcc stackcount). The kernel walks the frame pointers.
    #[arg(long)]
    pub stack: bool,
    /// With --stack: show at most the N innermost frames.
    #[arg(long, value_name = "N")]
    pub stack_depth: Option<usize>,
    /// With --stack on a .NET 8+ process given with -p or --container: leave its perf map as it
    /// is. By default netprobe turns the runtime's perf map on through its diagnostics socket to
    /// name JIT-compiled frames, and off again when the session ends.
    #[arg(long, requires = "stack")]
    pub no_perf_map: bool,
    /// With --stack: show each .NET method's code tier after its name in text and folded stacks
    /// (`System.String.Replace(string, string) [tier1]`); by default a method reads the same at
    /// every tier (JSON frames always carry `tier`).
    #[arg(long, requires = "stack")]
    pub tiers: bool,
    /// With -p, -c or --container: the most the session may cost its targets, as a share of
    /// one CPU (e.g. 1%). netprobe estimates each probe's cost from its hit rate and what a hit
    /// costs on this machine (measured once, then cached); every second, the probes of the
    /// functions that take the session over the budget are removed, dearest first, each said on
    /// stderr, and the session goes on without them.
    #[arg(long, value_name = "PCT", value_parser = parse_cpu_percent)]
    pub max_overhead: Option<f64>,
}

/// Prometheus metrics of a `count` or `latency` session.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct MetricsArgs {
    /// Also serve the counts (latency: and a duration histogram) as Prometheus metrics on
    /// http://ADDR:PORT/metrics (e.g. 127.0.0.1:9464, or the one address Prometheus scrapes),
    /// until stopped (Ctrl-C, SIGTERM, --duration) or the targets exit; the text output stays as
    /// it is.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// With --metrics: export at most N series (label sets); hits of new label sets beyond it
    /// are counted in netprobe_dropped_series_total instead.
    #[arg(long, value_name = "N", default_value_t = crate::sinks::metrics::DEFAULT_MAX_SERIES)]
    pub metrics_max_series: usize,
    /// With --metrics: serve HTTPS and/or require basic authentication as FILE says. FILE is the
    /// web configuration file of the Prometheus exporter toolkit (--web.config.file of
    /// node_exporter and other exporters): tls_server_config (cert_file, key_file,
    /// client_auth_type, client_ca_file, min_version, max_version) and basic_auth_users (user:
    /// bcrypt hash); other keys are refused by name.
    #[arg(long, value_name = "FILE")]
    pub metrics_web_config: Option<PathBuf>,
}

/// Which hits to keep, tested by the kernel before a hit reaches the ring buffer.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Keep only hits for which EXPR holds: comparisons of arguments (by name, or arg0, arg1, ...;
    /// ret on returns), $tid or $comm with constants (== != < <= > >=; strings: == != and ~ glob),
    /// joined by && || ! and parentheses, e.g. 'arg0 > 5 && name ~ "tmp*"' (grammar: FILTERS
    /// below, in --help).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Keep only hits of this thread (repeatable).
    #[arg(long = "tid", value_name = "TID")]
    pub tids: Vec<u32>,
    /// Keep only hits of tasks with this name (exact; the kernel's 15-byte task name).
    #[arg(long, value_name = "NAME")]
    pub comm: Option<String>,
}

impl FilterArgs {
    pub fn options(&self) -> crate::session::FilterOptions {
        crate::session::FilterOptions {
            filter: self.filter.clone(),
            tids: self.tids.clone(),
            comm: self.comm.clone(),
        }
    }
}

impl LiveArgs {
    pub(super) fn options(
        self,
        interval: Option<Duration>,
        folded: Option<PathBuf>,
    ) -> LiveOptions {
        self.options_with(interval, folded, MetricsArgs::default())
    }

    pub(super) fn options_with(
        self,
        interval: Option<Duration>,
        folded: Option<PathBuf>,
        metrics: MetricsArgs,
    ) -> LiveOptions {
        LiveOptions {
            specs: self.probes,
            pids: self.pids,
            container: self.containers.selection(),
            filter: self.filter.options(),
            command: self.command,
            user: self.user,
            json: self.json,
            duration: self.duration,
            max_events: self.max_events,
            interval,
            dry_run: self.dry_run,
            buffer_kb: self.buffer_kb,
            force_uretprobe: self.force_uretprobe,
            keep_r2r: self.keep_r2r,
            gate: crate::gate::GateOptions {
                unsafe_offset: self.unsafe_offset,
                exact_entry: self.exact_entry,
            },
            stack: self.stack,
            stack_depth: self.stack_depth,
            no_perf_map: self.no_perf_map,
            tiers: self.tiers,
            folded,
            folded_lines: false,
            unknown_addrs: false,
            metrics: metrics.metrics,
            metrics_max_series: metrics.metrics_max_series,
            metrics_web_config: metrics.metrics_web_config,
            max_overhead: self.max_overhead,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ProbeAction {
    /// Add probes (entry, or return for r: specs) to a group (default netprobe_persist).
    #[command(after_long_help = SPEC_AND_FILTER_GRAMMAR)]
    Add {
        #[arg(required = true)]
        probes: Vec<String>,
        #[arg(short = 'p', long = "pid")]
        pids: Vec<u32>,
        #[command(flatten)]
        containers: Box<ContainerArgs>,
        #[command(flatten)]
        filter: FilterArgs,
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        dry_run: bool,
        /// Uretprobes for returns of Go functions too (see `trace --force-uretprobe`).
        #[arg(long)]
        force_uretprobe: bool,
        /// Place a raw IMAGE:0xOFFSET probe the probe-safety gate refuses (see `trace
        /// --unsafe-offset`).
        #[arg(long)]
        unsafe_offset: bool,
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

#[derive(clap::Args, Debug)]
pub struct SymbolsArgs {
    /// ELF executable or library, .NET assembly, .NET single-file bundle, or an assembly inside a
    /// bundle named as BUNDLE/NAME.dll.
    pub file: PathBuf,
    /// Only names matching this (exact name, glob like 'main*', or Type::Method).
    pub pattern: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// For a .NET single-file bundle: list the bundled files (offset, size, compressed size,
    /// type, whether probe-able) instead of functions.
    #[arg(long)]
    pub files: bool,
    /// List the parameters of the functions PATTERN names, from the file's DWARF: type,
    /// location where the entry probe goes, and how `trace` reads each one with no ARG typed
    /// (like `perf probe --vars`).
    #[arg(long, requires = "pattern", conflicts_with = "files")]
    pub vars: bool,
}

#[derive(clap::Args, Debug)]
pub struct PsArgs {
    /// One JSON object per process and line instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct OffsetsArgs {
    /// The process whose maps place the image.
    pub pid: u32,
    /// The mapped image: full path, file name, or short name (`System.Console`, `c`).
    pub image: String,
    /// Only methods matching this (exact, glob, or Type::Method).
    pub pattern: Option<String>,
    /// A crossgen /CreatePerfMap map file for IMAGE (`ADDR SIZE NAME`, addresses are RVAs);
    /// without it, the symbols come from IMAGE itself.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Read the maps from FILE instead of /proc/PID/maps (a recorded copy).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Explain the layout first: image base, executable mapping, formula.
    #[arg(long)]
    pub explain: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}
