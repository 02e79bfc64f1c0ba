//! `netprobe profile`: arguments, and what the command prints and writes (summary table or JSON
//! on stdout, folded stacks, a flame graph SVG and a pprof profile to files).

use crate::commands::parse::parse_duration;
use crate::error::{Error, Result};
use crate::profile::{self, ProfileKind, ProfileOptions, Report};
use crate::run_as::RunAs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct ProfileArgs {
    /// Profile this process (repeatable): all its threads and those it starts later.
    #[arg(short = 'p', long = "pid")]
    pub pids: Vec<u32>,
    #[command(flatten)]
    pub containers: crate::commands::container_args::ContainerArgs,
    /// Start this command (split like a shell does) and profile it from its first instruction.
    #[arg(short = 'c', long = "command")]
    pub command: Option<String>,
    /// With -c: run the command as this user (name or uid), with its groups from the user
    /// database and its HOME, USER and LOGNAME, like `sudo -u`; netprobe drops the command's
    /// privileges after placing the probes, right before it runs.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    /// Stop after this long (e.g. 10s, 500ms, 2m); else at Ctrl-C or when the targets exit.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Samples per second of each thread on CPU.
    #[arg(short = 'F', long, default_value_t = profile::DEFAULT_FREQUENCY)]
    pub frequency: u64,
    /// Profile the time threads spend off the CPU (blocked on a lock, a file or socket, a sleep,
    /// or preempted), in microseconds, per stack; each stack ends in the wait's reason as the
    /// kernel gives it (`[off-cpu: futex]`, `[off-cpu: sleep]`, `[off-cpu: I/O read]`...).
    #[arg(long, conflicts_with = "wall")]
    pub off_cpu: bool,
    /// Profile on-CPU and off-CPU time together, in microseconds (each on-CPU sample stands for
    /// its period of CPU time): a flame graph of where the whole wall-clock time goes.
    #[arg(long)]
    pub wall: bool,
    /// With --off-cpu or --wall: take the stack of one switch off the CPU in N, weighing each
    /// as N, to bound the cost on targets that switch very often.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub off_cpu_every: u64,
    /// Count only what happens while this function runs (a probe spec, as for trace): its
    /// entry and return are probed in the targets, and samples and waits of a thread count
    /// only inside its calls (e.g. the on- and off-CPU time under one request handler).
    #[arg(long, value_name = "SPEC")]
    pub trigger: Option<String>,
    /// With --off-cpu or --wall on a Go program: show where its goroutines park (time.Sleep,
    /// channels, locks, network) under their own stacks, with the runtime's wait reasons,
    /// instead of its threads' waits. Probes runtime.gopark in the program: each park then
    /// costs it a probe hit and a stack copy (BENCHMARKS.md, "Off-CPU profiles").
    #[arg(long)]
    pub goroutines: bool,
    /// With --off-cpu or --wall: do not count waits shorter than this (e.g. 1ms).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub min_block: Option<Duration>,
    /// Bytes of user stack copied with each sample and unwound by call-frame information (a
    /// multiple of 8, at most 32768; as perf's --call-graph dwarf, 8192 by default). A stack deeper than
    /// the copy is finished by the kernel's frame-pointer chain where it can be.
    #[arg(long, value_name = "BYTES", default_value_t = crate::backend::perf_event::DEFAULT_STACK_BYTES)]
    pub stack_size: u32,
    /// Write the stacks in Brendan Gregg's folded format (`main;a;b COUNT`) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// With --folded: each frame as `function (file:line)` where the binary's debug info gives
    /// its source line.
    #[arg(long, requires = "folded")]
    pub folded_lines: bool,
    /// Keep each frame no symbol names as `[unknown] (IMAGE+0xOFF)` in the folded stacks, the
    /// flame graph and the table, instead of one `[IMAGE]` frame (e.g. `[libcoreclr.so]`) per
    /// run of such frames in an image. JSON always keeps every frame.
    #[arg(long)]
    pub unknown_addrs: bool,
    /// Show each .NET method's code tier after its name in the folded stacks, the flame graph and
    /// the table (`System.String.Replace(string, string) [tier1]`), so that its ReadyToRun,
    /// tier-0 and tier-1 code are apart; by default a method is one function at every tier
    /// (JSON frames always carry `tier`).
    #[arg(long)]
    pub tiers: bool,
    /// Write an interactive flame graph (SVG, made by inferno) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the profile as pprof's gzip'd protocol buffer (profile.proto) to FILE: for `go tool
    /// pprof`, Pyroscope, Parca, Grafana and speedscope. Samples are labelled with `pid` and
    /// `comm` (`go tool pprof -tagfocus comm=app`).
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Print the profile as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Functions in each part of the table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// On a .NET 8+ process given with -p or --container: leave its perf map as it is. By
    /// default netprobe turns the runtime's perf map on through its diagnostics socket to name
    /// JIT-compiled frames, and off again when the profile ends.
    #[arg(long)]
    pub no_perf_map: bool,
    /// Print the equivalent `perf record` command line; sample nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Renders folded lines as an inferno flame graph SVG, counts in `unit`.
pub fn flamegraph_svg(
    folded: &str,
    title: &str,
    unit: profile::Unit,
    out: impl Write,
) -> std::io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = unit.count_name().to_string();
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), out)
}

/// [`flamegraph_svg`] whose tooltips also name the source lines of each function (`lines`: a
/// function's lines as [`Report::lines_by_function`] gives them): `hot [app.c:12, app.c:14]
/// (75 samples, 75.00%)`. The boxes stay one per function, as in the folded lines.
pub fn flamegraph_svg_with_lines(
    folded: &str,
    title: &str,
    unit: profile::Unit,
    lines: &std::collections::HashMap<String, Vec<String>>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut svg = Vec::new();
    flamegraph_svg(folded, title, unit, &mut svg)?;
    let svg = String::from_utf8_lossy(&svg);
    // inferno writes each box's tooltip as `<title>NAME (N samples, P%)</title>`, NAME escaped
    // as XML text and without the folded `_[i]` suffix; the counts are the last ` (` part.
    let escaped: std::collections::HashMap<String, String> = lines
        .iter()
        .map(|(name, l)| {
            (
                xml_text(&crate::printable::printable(name).replace(';', ":")),
                xml_text(&l.join(", ")),
            )
        })
        .collect();
    let mut rest: &str = &svg;
    while let Some(at) = rest.find("<title>") {
        let (before, tail) = rest.split_at(at + "<title>".len());
        out.write_all(before.as_bytes())?;
        let end = tail.find("</title>").unwrap_or(tail.len());
        let text = &tail[..end];
        match text.rfind(" (") {
            Some(cut) if escaped.contains_key(&text[..cut]) => {
                let (name, counts) = text.split_at(cut);
                write!(out, "{name} [{}]{counts}", escaped[name])?;
            }
            _ => out.write_all(text.as_bytes())?,
        }
        rest = &tail[end..];
    }
    out.write_all(rest.as_bytes())
}

/// `s` escaped as quick-xml (which inferno writes with) escapes text.
fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
        .replace('"', "&quot;")
}

/// Writes a file through `what` as a new file renamed over `path` (never through a symlink
/// there: [`crate::output_file`]); errors name the file.
pub(crate) fn write_file(
    path: &Path,
    what: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    crate::output_file::replace_file(path, what).map_err(|e| Error::io(path, e))
}

/// The executable of each target: `/proc/PID/exe` of running ones, the `-c` command's program.
fn target_executables(o: &ProfileOptions) -> Result<Vec<PathBuf>> {
    match &o.command {
        Some(c) => {
            let argv = crate::launch::split_command(c)?;
            let program = argv
                .first()
                .ok_or_else(|| Error::usage("-c: empty command"))?;
            Ok(vec![crate::launch::find_program(program)?])
        }
        None => Ok(o
            .pids
            .iter()
            .map(|p| PathBuf::from(format!("/proc/{p}/exe")))
            .collect()),
    }
}

/// The probes a profile needs beside its samplers: `--trigger`'s function, and `runtime.gopark`
/// for `--goroutines` (every target must be a Go program). Started here, while netprobe has one thread (the feed's watchdog is
/// forked), on a `-c` command the feed then holds for the profile.
fn start_probes(a: &ProfileArgs, o: &ProfileOptions) -> Result<Option<profile::Probes>> {
    use crate::profile::probed::{go_abi_of, WaitReasons, GOPARK};
    use crate::session::{FeedTarget, ProbeFeed};
    let mut go = None;
    if o.kind != ProfileKind::OnCpu {
        let exes = target_executables(o)?;
        let abis: Vec<_> = exes.iter().map(|e| go_abi_of(e)).collect();
        if let (Some(exe), Some(Some(abi))) = (exes.first(), abis.first()) {
            if abis.iter().all(|x| x.as_ref() == Some(abi)) {
                go = Some((exe.clone(), *abi));
            }
        }
        if go.is_some() && !a.goroutines {
            crate::printable::eprint_line(
                "netprobe: note: a Go program: a goroutine parked by the Go scheduler leaves its thread idle in the scheduler (runtime.findRunnable); --goroutines shows where the goroutines park instead (it probes runtime.gopark, which costs the program per park)",
            );
            go = None;
        } else if go.is_none() && a.goroutines {
            return Err(Error::usage(
                "--goroutines needs every target to be a Go program: leave it out to see the threads' waits",
            ));
        }
    } else if a.goroutines {
        return Err(Error::usage(
            "--goroutines applies to off-CPU time: add --off-cpu or --wall",
        ));
    }
    let mut specs: Vec<String> = a.trigger.iter().cloned().collect();
    if go.is_some() {
        specs.push(GOPARK.to_string());
    }
    if specs.is_empty() {
        return Ok(None);
    }
    let target = match &o.command {
        Some(line) => FeedTarget::Command {
            line: line.clone(),
            user: a.user.clone(),
        },
        None => FeedTarget::Pids(o.pids.clone()),
    };
    let feed = ProbeFeed::start(target, &specs, go.is_some())?;
    let held_command = o
        .command
        .as_ref()
        .and_then(|_| feed.pids().first().copied());
    let gopark: Vec<_> = feed
        .plan()
        .functions
        .iter()
        .filter(|f| f.name == GOPARK)
        .map(|f| f.id)
        .collect();
    let go = go.map(|(exe, abi)| profile::GoView {
        gopark,
        reasons: WaitReasons::of_file(&exe),
        abi,
    });
    Ok(Some(profile::Probes {
        feed: Box::new(feed),
        held_command,
        go,
        trigger: a.trigger.is_some(),
    }))
}

/// User and system CPU seconds of this process so far (`getrusage(2)`, `RUSAGE_SELF`).
fn own_cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    ((t(u.ru_utime) + t(u.ru_stime)) * 1000.0).round() / 1000.0
}

/// Refuses an output file that could not be written, before anything is sampled.
fn check_output_files(a: &ProfileArgs) -> Result<()> {
    let files = [
        ("--folded", &a.folded),
        ("--svg", &a.svg),
        ("--pprof", &a.pprof),
    ];
    for (flag, path) in files {
        let Some(path) = path else { continue };
        if let Some(why) = crate::output_file::unwritable_reason(path) {
            return Err(Error::usage(format!("{flag} {}: {why}", path.display())));
        }
    }
    Ok(())
}

pub fn run(a: &ProfileArgs) -> Result<i32> {
    check_output_files(a)?;
    let mut pids = a.pids.clone();
    if let Some(c) = a.containers.clone().selection() {
        pids.extend(crate::session::container_pids(&c)?);
    }
    crate::run_as::check_user_with_command(a.user.as_deref(), a.command.as_deref())?;
    let o = ProfileOptions {
        pids,
        command: a.command.clone(),
        user: a.user.as_deref().map(RunAs::lookup).transpose()?,
        duration: a.duration,
        frequency: a.frequency,
        stack_size: a.stack_size,
        kind: match (a.off_cpu, a.wall) {
            (true, _) => ProfileKind::OffCpu,
            (_, true) => ProfileKind::Wall,
            _ => ProfileKind::OnCpu,
        },
        off_cpu_every: a.off_cpu_every,
        min_block: a.min_block.unwrap_or_default(),
    };
    if o.kind == ProfileKind::OnCpu && (a.off_cpu_every != 1 || a.min_block.is_some()) {
        return Err(Error::usage(
            "--off-cpu-every and --min-block apply to off-CPU time: add --off-cpu or --wall",
        ));
    }
    if a.dry_run {
        println!("{}", o.perf_record_command());
        return Ok(0);
    }
    let what = match &o.command {
        Some(c) => format!("'{c}'"),
        None => {
            let p: Vec<String> = o.pids.iter().map(u32::to_string).collect();
            format!("pid {}", p.join(","))
        }
    };
    let until = match o.duration {
        Some(d) => format!("for {:?}", d),
        None => "until Ctrl-C or exit".to_string(),
    };
    let how = match o.kind {
        ProfileKind::OnCpu => format!("on-CPU time at {} Hz", o.frequency),
        ProfileKind::OffCpu => "off-CPU time".to_string(),
        ProfileKind::Wall => format!("wall-clock time (on-CPU at {} Hz)", o.frequency),
    };
    // Probes first: a refused spec or option is the one line printed.
    let probes = start_probes(a, &o)?;
    // JIT names: turned on before sampling, off after the report is written (the perf map
    // names frames until then).
    let jit = super::jit_names::turn_on(&o.pids, a.no_perf_map);
    crate::printable::eprint_line(&format!("netprobe: profiling {what}: {how} {until}"));
    let code = report(a, &o, &what, &how, profile::record(&o, probes)?);
    jit.end();
    code
}

/// Prints and writes what the profile `p` found, as the options ask; the exit code.
fn report(
    a: &ProfileArgs,
    o: &ProfileOptions,
    what: &str,
    how: &str,
    p: profile::Profile,
) -> Result<i32> {
    for note in &p.notes {
        crate::printable::eprint_line(&format!("netprobe: note: {note}"));
    }
    let report: &Report = &p.report;
    if report.lost > 0 {
        let fix = match o.kind {
            ProfileKind::OnCpu => "lower --frequency",
            _ => "the waits whose records were lost are not counted: raise --off-cpu-every (one stack in N switches) or lower --stack-size",
        };
        crate::printable::eprint_line(&format!(
            "netprobe: warning: {} records were lost (ring buffer full): {fix}",
            report.lost
        ));
    }
    // What the folded lines, the flame graph and the table show; JSON keeps every frame.
    let collapsed = (!a.unknown_addrs).then(|| report.with_unnamed_runs_collapsed());
    let shown = collapsed.as_ref().unwrap_or(report);
    let tiered = a.tiers.then(|| shown.with_tiers_in_names());
    let shown = tiered.as_ref().unwrap_or(shown);
    let folded = shown.folded();
    if let Some(path) = &a.folded {
        let with_lines = a.folded_lines.then(|| shown.folded_with_lines());
        let text = with_lines.as_deref().unwrap_or(&folded);
        write_file(path, |w| w.write_all(text.as_bytes()))?;
    }
    if let Some(path) = &a.svg {
        if folded.is_empty() {
            crate::printable::eprint_line(&format!(
                "netprobe: no samples: {} not written",
                path.display()
            ));
        } else {
            let title = format!("netprobe profile {what}: {how}");
            let lines = shown.lines_by_function(3);
            write_file(path, |w| {
                flamegraph_svg_with_lines(&folded, &title, report.unit, &lines, w)
            })?;
        }
    }
    if let Some(path) = &a.pprof {
        let meta = profile::pprof::PprofMeta {
            kind: o.kind,
            period_ns: 1_000_000_000 / o.frequency.max(1),
            start: p.started,
            duration: p.elapsed,
            comment: format!("netprobe profile {what}: {how}"),
        };
        write_file(path, |w| profile::pprof::write(shown, &meta, w))?;
    }
    let mut out = std::io::stdout().lock();
    let r = if a.json {
        let mut v = report.json();
        v["elapsed_s"] = serde_json::json!(p.elapsed.as_secs_f64());
        v["unwinding"] = serde_json::json!({
            "walked": p.unwinding.walked,
            "extended_by_kernel_chain": p.unwinding.extended_by_kernel_chain,
            "kernel_chain_only": p.unwinding.kernel_chain_only,
            "per_sample_us": (p.unwinding.per_sample_us() * 100.0).round() / 100.0,
        });
        // What the profile cost netprobe itself: its CPU time (all its threads: the reader,
        // the drainer, a probe feed) and the events it handled per second.
        let secs = p.elapsed.as_secs_f64().max(1e-9);
        v["cost"] = serde_json::json!({
            "netprobe_cpu_s": own_cpu_seconds(),
            "waits_per_s": (report.switches as f64 / secs).round(),
            "samples_per_s": (report.cpu_samples.max(match report.unit {
                profile::Unit::Samples => report.samples(),
                profile::Unit::Microseconds => 0,
            }) as f64 / secs).round(),
        });
        writeln!(out, "{v}")
    } else {
        write!(out, "{}", report.table_showing(shown, a.top))
    };
    r.map_err(|e| Error::io("stdout", e))?;
    Ok(if report.lost > 0 { 3 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::FrameName;

    fn at(name: &str, file: &str, line: u32) -> FrameName {
        FrameName {
            file: Some(file.into()),
            line: Some(line),
            ..FrameName::named(name, false, false)
        }
    }

    #[test]
    fn flame_graph_tooltips_name_each_functions_lines_and_keep_the_counts() {
        let mut r = Report::default();
        let main = at("main", "/src/p.c", 40);
        r.add(vec![main.clone(), at("hot", "/src/p.c", 12)], 3);
        r.add(vec![main.clone(), at("hot", "/src/p.c", 14)], 1);
        r.add(vec![main, at("f<int>", "/src/t.h", 7)], 1);
        r.add(vec![FrameName::named("nolines", false, false)], 1);
        let lines = r.lines_by_function(3);
        assert_eq!(lines["hot"], ["/src/p.c:12", "/src/p.c:14"]);
        let mut svg = Vec::new();
        flamegraph_svg_with_lines(&r.folded(), "t", profile::Unit::Samples, &lines, &mut svg)
            .unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(
            svg.contains("<title>hot [/src/p.c:12, /src/p.c:14] (4 samples, 66.67%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>main [/src/p.c:40] (5 samples"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>f&lt;int&gt; [/src/t.h:7] (1 samples"),
            "{svg}"
        );
        assert!(svg.contains("<title>nolines (1 samples"), "{svg}");
        let json = r.json().to_string();
        assert!(
            json.contains(r#""file":"/src/p.c","function":"hot""#),
            "{json}"
        );
        assert!(json.contains(r#""line":12"#), "{json}");
        // The folded lines keep one box per function; --folded-lines names the lines.
        assert!(r.folded().contains("main;hot 4"));
        assert!(r
            .folded_with_lines()
            .contains("main (/src/p.c:40);hot (/src/p.c:12) 3"));
    }
}
