//! What the commands print: trace lines (text or JSON), call counts (bcc funccount), latency
//! histograms (bcc funclatency).

use crate::backend::Lost;
use crate::plan::{FunctionId, Hit, ProbePlan, Role, Value};
use crate::runner::{Flow, Sink};
use hdrhistogram::Histogram;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// Maps a tid to its process id, cached: `/proc/TID/status` (Tgid), else the kernel's
/// `saved_tgids` table (kept for exited tasks while `options/record-tgid` is on).
#[derive(Debug, Default)]
pub struct TaskInfo {
    tgid: HashMap<u32, Option<u32>>,
    saved_tgids: Option<HashMap<u32, u32>>,
    tracefs_root: Option<std::path::PathBuf>,
    /// Inside a pid namespace: kernel ids → ours (hits carry the kernel's).
    translation: Option<crate::pidns::PidMap>,
}

impl TaskInfo {
    pub fn new(tracefs_root: Option<std::path::PathBuf>) -> TaskInfo {
        TaskInfo {
            tracefs_root,
            ..TaskInfo::default()
        }
    }

    /// Hits carry the kernel's ids; show `map`'s ids (our pid namespace's) instead.
    pub fn set_translation(&mut self, map: Option<crate::pidns::PidMap>) {
        self.translation = map;
    }

    /// The thread id to show for the kernel's `tid`: ours inside a pid namespace when known,
    /// else `tid` itself.
    pub fn display_tid(&self, tid: u32) -> u32 {
        self.translation
            .as_ref()
            .and_then(|m| m.local(tid))
            .map_or(tid, |(_, t)| t)
    }

    /// The process id of thread `tid` (a kernel id), in the ids netprobe shows; `None` when it
    /// cannot be found out (inside a pid namespace: a thread created after tracing started).
    pub fn pid_of(&mut self, tid: u32) -> Option<u32> {
        if let Some(map) = &self.translation {
            return map.local(tid).map(|(p, _)| p);
        }
        if let Some(p) = self.tgid.get(&tid) {
            return *p;
        }
        let from_proc = std::fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            });
        let p = from_proc.or_else(|| {
            if self.saved_tgids.is_none() {
                let text = self
                    .tracefs_root
                    .as_ref()
                    .and_then(|r| std::fs::read_to_string(r.join("saved_tgids")).ok())
                    .unwrap_or_default();
                self.saved_tgids = Some(
                    text.lines()
                        .filter_map(|l| {
                            let (a, b) = l.split_once(' ')?;
                            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
                        })
                        .collect(),
                );
            }
            self.saved_tgids.as_ref()?.get(&tid).copied()
        });
        self.tgid.insert(tid, p);
        p
    }
}

/// Text or JSON lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

fn flow_of(r: std::io::Result<()>) -> Flow {
    match r {
        Ok(()) => Flow::Continue,
        // EPIPE and any other write error: nobody reads what we print anymore.
        Err(_) => Flow::OutputClosed,
    }
}

/// `netprobe trace`: one line per hit.
pub struct TracePrinter<W: Write> {
    pub out: W,
    pub format: Format,
    /// CLOCK_MONOTONIC ns at the session's start; times print relative to it.
    pub start_ns: u64,
    pub max_events: Option<u64>,
    pub printed: u64,
    pub tasks: TaskInfo,
}

/// The text of one argument list: `a=1, b=0x2, s="x"`.
fn args_text(args: &[(String, Value)]) -> String {
    args.iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl<W: Write> TracePrinter<W> {
    pub fn header(&mut self) -> std::io::Result<()> {
        if self.format == Format::Text {
            writeln!(
                self.out,
                "{:>12} {:>15} {:<16} EVENT",
                "TIME(s)", "PID/TID", "COMM"
            )?;
            self.out.flush()?;
        }
        Ok(())
    }

    fn line(&mut self, plan: &ProbePlan, hit: &Hit) -> std::io::Result<()> {
        let f = plan.function(hit.function);
        let pid = self.tasks.pid_of(hit.tid);
        let tid = self.tasks.display_tid(hit.tid);
        let rel = hit.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9;
        let comm = hit.comm.clone().unwrap_or_else(|| "?".into());
        match self.format {
            Format::Text => {
                let pidtid = format!(
                    "{}/{}",
                    pid.map_or_else(|| "?".to_string(), |p| p.to_string()),
                    tid
                );
                let event = match hit.role {
                    Role::Entry => format!("-> {}({})", f.name, args_text(&hit.args)),
                    // A return without a value (void, or one no register holds) prints none.
                    Role::Return => match hit.args.iter().find(|(n, _)| n == "ret") {
                        Some((_, v)) => format!("<- {} = {v}", f.name),
                        None => format!("<- {}", f.name),
                    },
                };
                writeln!(self.out, "{rel:>12.6} {pidtid:>15} {comm:<16} {event}")?;
            }
            Format::Json => {
                let mut obj = json!({
                    "time_s": (rel * 1e6).round() / 1e6,
                    "mono_ns": hit.ts_ns,
                    "pid": pid,
                    "tid": tid,
                    "comm": comm,
                    "function": f.name,
                    "image": f.image,
                    "event": hit.role,
                });
                match hit.role {
                    Role::Entry => {
                        let args: serde_json::Map<String, serde_json::Value> = hit
                            .args
                            .iter()
                            .map(|(n, v)| (n.clone(), serde_json::to_value(v).unwrap_or_default()))
                            .collect();
                        obj["args"] = serde_json::Value::Object(args);
                    }
                    Role::Return => {
                        if let Some((_, v)) = hit.args.iter().find(|(n, _)| n == "ret") {
                            obj["retval"] = serde_json::to_value(v).unwrap_or_default();
                        }
                    }
                }
                writeln!(self.out, "{obj}")?;
            }
        }
        // Flushed once per event-loop turn (`idle`), not per line: at 100k hits/s a write(2) per
        // line cost more CPU than everything else netprobe does.
        Ok(())
    }
}

impl<W: Write> Sink for TracePrinter<W> {
    fn idle(&mut self, _plan: &ProbePlan) {
        let _ = self.out.flush();
    }

    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        if self.max_events.is_some_and(|m| self.printed >= m) {
            return Flow::Enough;
        }
        let r = self.line(plan, &hit);
        self.printed += 1;
        match flow_of(r) {
            Flow::Continue if self.max_events.is_some_and(|m| self.printed >= m) => Flow::Enough,
            f => f,
        }
    }
}

/// A warning line for lost events (stderr), or `None` when nothing was lost.
pub fn lost_warning(lost: Lost) -> Option<String> {
    if !lost.any() {
        return None;
    }
    Some(if lost.counted > 0 {
        format!(
            "WARNING: {} hit(s) were lost (ring buffer full); the output is INCOMPLETE. Use a larger --buffer-kb or fewer probes.",
            lost.counted
        )
    } else {
        "WARNING: some hits were lost (the kernel did not say how many); the output is INCOMPLETE. Use a larger --buffer-kb or fewer probes.".to_string()
    })
}

/// `netprobe count`: calls per function (entry hits; return hits for return-only probes).
#[derive(Debug, Default)]
pub struct Counter {
    pub counts: BTreeMap<FunctionId, u64>,
    pub max_events: Option<u64>,
    pub total: u64,
}

impl Counter {
    /// Writes the table (text) or one JSON object; `elapsed_s` is the length of the counted span.
    pub fn report(
        &self,
        plan: &ProbePlan,
        format: Format,
        lost: Lost,
        elapsed_s: f64,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        match format {
            Format::Text => {
                writeln!(out, "{:<50} {:>12}", "FUNCTION", "CALLS")?;
                for f in &plan.functions {
                    let n = self.counts.get(&f.id).copied().unwrap_or(0);
                    writeln!(out, "{:<50} {n:>12}", f.name)?;
                }
                if lost.any() {
                    writeln!(out, "(INCOMPLETE: counts are lower bounds, hits were lost)")?;
                }
            }
            Format::Json => {
                let counts: serde_json::Map<String, serde_json::Value> = plan
                    .functions
                    .iter()
                    .map(|f| {
                        (
                            f.name.clone(),
                            json!(self.counts.get(&f.id).copied().unwrap_or(0)),
                        )
                    })
                    .collect();
                let obj = json!({
                    "elapsed_s": (elapsed_s * 1e3).round() / 1e3,
                    "counts": counts,
                    "lost": lost.counted,
                    "complete": !lost.any(),
                });
                writeln!(out, "{obj}")?;
            }
        }
        out.flush()
    }

    /// Whether `hit` counts as a call.
    fn counts_hit(plan: &ProbePlan, hit: &Hit) -> bool {
        hit.role == Role::Entry
            || !plan
                .probes
                .iter()
                .any(|p| p.function == hit.function && p.role == Role::Entry)
    }
}

impl Sink for Counter {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        if Counter::counts_hit(plan, &hit) {
            *self.counts.entry(hit.function).or_insert(0) += 1;
            self.total += 1;
            if self.max_events.is_some_and(|m| self.total >= m) {
                return Flow::Enough;
            }
        }
        Flow::Continue
    }
}

/// A counter that prints (and resets) every interval.
pub struct IntervalCounter<W: Write> {
    pub counter: Counter,
    pub out: W,
    pub format: Format,
    pub last_tick: std::time::Instant,
}

impl<W: Write> Sink for IntervalCounter<W> {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow {
        self.counter.hit(plan, hit)
    }
    fn tick(&mut self, plan: &ProbePlan, lost: Lost) -> Flow {
        let elapsed = self.last_tick.elapsed().as_secs_f64();
        self.last_tick = std::time::Instant::now();
        let r = self
            .counter
            .report(plan, self.format, lost, elapsed, &mut self.out);
        self.counter.counts.clear();
        flow_of(r)
    }
}

/// `netprobe latency`: pairs entries with returns and records durations.
#[derive(Debug, Default)]
pub struct Latency {
    /// (function, pairing key) → entry times of calls in progress (a stack: recursion).
    pub open: HashMap<(FunctionId, u64), Vec<u64>>,
    pub hist: BTreeMap<FunctionId, Histogram<u64>>,
    /// log2 buckets: index i counts durations in [2^i, 2^(i+1)) ns (0 in bucket 0).
    pub log2: BTreeMap<FunctionId, Vec<u64>>,
    /// Returns seen without an entry (the call began before the probes).
    pub unpaired_returns: u64,
    pub max_events: Option<u64>,
    pub total: u64,
}

impl Sink for Latency {
    fn hit(&mut self, _plan: &ProbePlan, hit: Hit) -> Flow {
        let key = (hit.function, hit.pair_key);
        match hit.role {
            Role::Entry => self.open.entry(key).or_default().push(hit.ts_ns),
            Role::Return => {
                let Some(start) = self.open.get_mut(&key).and_then(|v| v.pop()) else {
                    self.unpaired_returns += 1;
                    return Flow::Continue;
                };
                let d = hit.ts_ns.saturating_sub(start);
                let h = self.hist.entry(hit.function).or_insert_with(|| {
                    // 1 ns .. 1 hour at 3 significant digits; longer calls saturate at 1 hour.
                    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                        .expect("valid histogram bounds")
                });
                h.saturating_record(d);
                let b = self.log2.entry(hit.function).or_insert_with(|| vec![0; 64]);
                let idx = if d == 0 {
                    0
                } else {
                    63 - d.leading_zeros() as usize
                };
                b[idx] += 1;
                self.total += 1;
                if self.max_events.is_some_and(|m| self.total >= m) {
                    return Flow::Enough;
                }
            }
        }
        Flow::Continue
    }
}

fn fmt_ns(ns: u64) -> String {
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

impl Latency {
    /// Writes, per function, the log2 histogram (bcc funclatency layout) and percentiles.
    pub fn report(
        &self,
        plan: &ProbePlan,
        format: Format,
        lost: Lost,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        for f in &plan.functions {
            let Some(h) = self.hist.get(&f.id) else {
                match format {
                    Format::Text => writeln!(out, "{}: no completed calls", f.name)?,
                    Format::Json => writeln!(out, "{}", json!({"function": f.name, "count": 0}))?,
                }
                continue;
            };
            let buckets = self.log2.get(&f.id).cloned().unwrap_or_default();
            let (p50, p90, p99, max) = (
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.9),
                h.value_at_quantile(0.99),
                h.max(),
            );
            match format {
                Format::Text => {
                    writeln!(out, "Function = {} [{} calls]", f.name, h.len())?;
                    writeln!(out, "{:>24} : {:<8} distribution", "nsecs", "count")?;
                    let first = buckets.iter().position(|&c| c > 0).unwrap_or(0);
                    let last = buckets.iter().rposition(|&c| c > 0).unwrap_or(0);
                    let peak = buckets.iter().copied().max().unwrap_or(1).max(1);
                    for (i, &c) in buckets.iter().enumerate().take(last + 1).skip(first) {
                        let lo: u64 = if i == 0 { 0 } else { 1u64 << i };
                        let hi: u64 = (1u64 << (i + 1)) - 1;
                        let bar = "*".repeat(((c * 40) / peak) as usize);
                        writeln!(out, "{:>10} -> {:<10} : {c:<8} |{bar:<40}|", lo, hi)?;
                    }
                    writeln!(
                        out,
                        "p50 = {}   p90 = {}   p99 = {}   max = {}",
                        fmt_ns(p50),
                        fmt_ns(p90),
                        fmt_ns(p99),
                        fmt_ns(max)
                    )?;
                    writeln!(out)?;
                }
                Format::Json => {
                    let b: Vec<serde_json::Value> = buckets
                        .iter()
                        .enumerate()
                        .filter(|(_, &c)| c > 0)
                        .map(|(i, &c)| {
                            json!({"lo_ns": if i == 0 {0} else {1u64 << i}, "hi_ns": (1u64 << (i + 1)) - 1, "count": c})
                        })
                        .collect();
                    writeln!(
                        out,
                        "{}",
                        json!({
                            "function": f.name,
                            "count": h.len(),
                            "p50_ns": p50, "p90_ns": p90, "p99_ns": p99, "max_ns": max,
                            "buckets": b,
                            "lost": lost.counted,
                            "complete": !lost.any(),
                        })
                    )?;
                }
            }
        }
        if format == Format::Text {
            if self.unpaired_returns > 0 {
                writeln!(
                    out,
                    "({} return(s) without a recorded entry were left out: those calls began before the probes were placed)",
                    self.unpaired_returns
                )?;
            }
            if lost.any() {
                writeln!(out, "(INCOMPLETE: hits were lost; histograms miss calls)")?;
            }
        }
        out.flush()
    }
}
