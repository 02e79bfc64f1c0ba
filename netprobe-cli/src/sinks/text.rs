//! The text format: aligned columns for people; trace lines like `perf script`, counts like bcc
//! funccount, latency histograms like bcc funclatency (`tools/funclatency.py` in iovisor/bcc).

use super::latency::bucket_bounds;
use super::stack::{ShownStack, StackCountReport};
use super::{CountReport, LatencyReport, Printer, TraceLine};
use crate::plan::{Role, Value};
use crate::printable::{printable, Printable};
use std::io::{self, Write};

/// Prints text.
#[derive(Clone, Copy, Debug, Default)]
pub struct TextPrinter;

/// The text of one argument list: `a=1, b=0x2, s="x"`.
fn args_text(args: &[(String, Value)]) -> String {
    args.iter()
        .map(|(n, v)| format!("{}={v}", Printable(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The frames of a hit's stack under its trace line, one a line, innermost first.
fn stack_lines(out: &mut dyn Write, s: &ShownStack) -> io::Result<()> {
    const INDENT: &str = "        ";
    if s.missing {
        return writeln!(out, "{INDENT}(no stack recorded)");
    }
    for f in &s.frames {
        // `--tiers`: a .NET frame's code tier after it (`Replace(string, string)+0x1c [tier1]`).
        let tier = match (&f.tier, s.tiers) {
            (Some(t), true) => format!(" [{t}]"),
            _ => String::new(),
        };
        match (&f.function, &f.image) {
            (Some(_), Some(img)) if !f.inlined => {
                let name = img.file_name().unwrap_or(img.as_os_str()).to_string_lossy();
                let (f, name) = (f.to_string(), Printable(&name));
                writeln!(out, "{INDENT}{}{tier} ({name})", printable(&f))?
            }
            _ => writeln!(out, "{INDENT}{}{tier}", printable(&f.to_string()))?,
        }
    }
    if let Some(cut) = s.cut {
        writeln!(out, "{INDENT}{}", cut.text(s.depth))?;
    }
    Ok(())
}

/// A duration with a unit that keeps it short: ns below 10 µs, µs below 10 ms, else ms.
fn fmt_ns(ns: u64) -> String {
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

impl Printer for TextPrinter {
    fn trace_header(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "{:>12} {:>15} {:<16} EVENT",
            "TIME(s)", "PID/TID", "COMM"
        )
    }

    fn trace_line(&self, out: &mut dyn Write, l: &TraceLine<'_>) -> io::Result<()> {
        let pidtid = format!(
            "{}/{}",
            l.pid.map_or_else(|| "?".to_string(), |p| p.to_string()),
            l.tid
        );
        let event = match l.role {
            Role::Entry => format!("-> {}({})", Printable(l.function), args_text(l.args)),
            // A return without a value (void, or one no register holds) prints none.
            Role::Return => match l.retval() {
                Some(v) => format!("<- {} = {v}", Printable(l.function)),
                None => format!("<- {}", Printable(l.function)),
            },
        };
        let place = l
            .place
            .map(|p| format!("  [{}]", Printable(&p.path())))
            .unwrap_or_default();
        writeln!(
            out,
            "{:>12.6} {pidtid:>15} {:<16} {event}{place}",
            l.rel_s,
            Printable(l.comm)
        )?;
        match l.stack {
            Some(s) => stack_lines(out, s),
            None => Ok(()),
        }
    }

    fn stack_counts(&self, out: &mut dyn Write, r: &StackCountReport) -> io::Result<()> {
        // bcc stackcount's layout (`tools/stackcount.py` in iovisor/bcc): the frames innermost
        // first, then the count, then a blank line; most frequent stack first.
        for s in &r.stacks {
            for f in &s.frames {
                let at = f
                    .source_line()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default();
                let inlined = if f.inlined { " (inlined)" } else { "" };
                writeln!(out, "  {}{inlined}{}", Printable(&f.name), Printable(&at))?;
            }
            if let Some(cut) = s.cut {
                writeln!(out, "  {}", cut.text(r.depth))?;
            }
            writeln!(out, "    {}", s.count)?;
            writeln!(out)?;
        }
        if r.without_stack > 0 {
            writeln!(
                out,
                "({} call(s) came without a stack record and are not counted above)",
                r.without_stack
            )?;
        }
        if r.lost.any() {
            writeln!(out, "(INCOMPLETE: counts are lower bounds, hits were lost)")?;
        }
        Ok(())
    }

    fn counts(&self, out: &mut dyn Write, r: &CountReport<'_>) -> io::Result<()> {
        writeln!(out, "{:<50} {:>12}", "FUNCTION", "CALLS")?;
        for (name, n) in &r.rows {
            writeln!(out, "{:<50} {n:>12}", Printable(name))?;
        }
        if !r.by_place.is_empty() {
            writeln!(out)?;
            writeln!(out, "{:<50} {:>12}  CONTAINER", "FUNCTION", "CALLS")?;
            for (place, rows) in &r.by_place {
                for (name, n) in rows {
                    writeln!(
                        out,
                        "{:<50} {n:>12}  {}",
                        Printable(name),
                        Printable(&place.path())
                    )?;
                }
            }
        }
        if r.lost.any() {
            writeln!(out, "(INCOMPLETE: counts are lower bounds, hits were lost)")?;
        }
        Ok(())
    }

    fn latency(&self, out: &mut dyn Write, r: &LatencyReport<'_>) -> io::Result<()> {
        for (name, place, stats) in &r.functions {
            let name = Printable(name);
            let at = place
                .as_ref()
                .map(|p| format!(" in {}", Printable(&p.path())))
                .unwrap_or_default();
            let Some(s) = stats else {
                writeln!(out, "{name}{at}: no completed calls")?;
                continue;
            };
            writeln!(out, "Function = {name}{at} [{} calls]", s.calls)?;
            writeln!(out, "{:>24} : {:<8} distribution", "nsecs", "count")?;
            let first = s.log2.iter().position(|&c| c > 0).unwrap_or(0);
            let last = s.log2.iter().rposition(|&c| c > 0).unwrap_or(0);
            let peak = s.log2.iter().copied().max().unwrap_or(1).max(1);
            for (i, &c) in s.log2.iter().enumerate().take(last + 1).skip(first) {
                let (lo, hi) = bucket_bounds(i);
                let bar = "*".repeat(((c * 40) / peak) as usize);
                writeln!(out, "{:>10} -> {:<10} : {c:<8} |{bar:<40}|", lo, hi)?;
            }
            writeln!(
                out,
                "p50 = {}   p90 = {}   p99 = {}   max = {}",
                fmt_ns(s.p50_ns),
                fmt_ns(s.p90_ns),
                fmt_ns(s.p99_ns),
                fmt_ns(s.max_ns)
            )?;
            writeln!(out)?;
        }
        if r.unpaired_returns > 0 {
            writeln!(
                out,
                "({} return(s) without a recorded entry were left out: those calls began before the probes were placed, or a --filter left their entries out)",
                r.unpaired_returns
            )?;
        }
        if r.lost.any() {
            writeln!(out, "(INCOMPLETE: hits were lost; histograms miss calls)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Lost;

    /// A function named with a terminal escape, hit by a process whose command name holds BEL:
    /// the trace line and the count table show both escaped, and each stays one line.
    #[test]
    fn names_from_the_target_are_printed_escaped() {
        let function = "np_e\u{1b}]0;t\u{7}\u{1b}[31m";
        let line = TraceLine {
            rel_s: 0.5,
            mono_ns: 0,
            pid: Some(42),
            tid: 42,
            comm: "evil\u{7}\n",
            function,
            image: std::path::Path::new("/x"),
            role: Role::Entry,
            args: &[],
            stack: None,
            place: None,
        };
        let mut out = Vec::new();
        TextPrinter.trace_line(&mut out, &line).unwrap();
        TextPrinter
            .counts(
                &mut out,
                &CountReport {
                    rows: vec![(function, 3)],
                    by_place: Vec::new(),
                    lost: Lost::default(),
                    elapsed_s: 1.0,
                },
            )
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        insta::assert_snapshot!(text, @r"
            0.500000           42/42 evil\x07\x0a     -> np_e\x1b]0;t\x07\x1b[31m()
        FUNCTION                                                  CALLS
        np_e\x1b]0;t\x07\x1b[31m                                      3
        ");
    }
}
