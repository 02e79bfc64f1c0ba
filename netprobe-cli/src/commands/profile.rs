//! `netprobe profile`: arguments, and what the command prints and writes (summary table or JSON
//! on stdout, folded stacks and a flame graph SVG to files).

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
    /// Profile the processes of this Docker container (name or id), as if each were given with -p.
    #[arg(long, value_name = "NAME|ID")]
    pub container: Option<String>,
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
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub off_cpu_every: u64,
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
    /// Write an interactive flame graph (SVG, made by inferno) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Print the profile as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Functions in each part of the table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
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

pub fn run(a: &ProfileArgs) -> Result<i32> {
    let mut pids = a.pids.clone();
    if let Some(c) = &a.container {
        pids.extend(crate::session::container_pids(c)?);
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
    crate::printable::eprint_line(&format!("netprobe: profiling {what}: {how} {until}"));
    let p = profile::record(&o)?;
    for note in &p.notes {
        crate::printable::eprint_line(&format!("netprobe: note: {note}"));
    }
    let report: &Report = &p.report;
    if report.lost > 0 {
        let fix = match o.kind {
            ProfileKind::OnCpu => "lower --frequency",
            _ => "the off-CPU time is undercounted: raise --off-cpu-every or lower --stack-size",
        };
        crate::printable::eprint_line(&format!(
            "netprobe: warning: {} records were lost (ring buffer full): {fix}",
            report.lost
        ));
    }
    let folded = report.folded();
    if let Some(path) = &a.folded {
        let with_lines = a.folded_lines.then(|| report.folded_with_lines());
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
            let lines = report.lines_by_function(3);
            write_file(path, |w| {
                flamegraph_svg_with_lines(&folded, &title, report.unit, &lines, w)
            })?;
        }
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
        writeln!(out, "{v}")
    } else {
        write!(out, "{}", report.table(a.top))
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
