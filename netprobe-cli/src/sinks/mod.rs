//! Where hits go. A [`Sink`] receives the decoded hits of a session (the event loop in
//! `crate::runner` calls it); what a sink prints goes through a [`Printer`], one per output
//! [`Format`], so no sink matches on the format itself:
//!
//! - [`trace::TracePrinter`]: one line per hit (`netprobe trace`);
//! - [`count::Counter`], [`count::IntervalCounter`]: calls per function (`netprobe count`, like
//!   bcc funccount);
//! - [`latency::Latency`]: durations of calls, log2 histogram and percentiles (`netprobe latency`,
//!   like bcc funclatency);
//! - [`text::TextPrinter`] and [`json::JsonPrinter`]: the two formats (JSON is one object a line,
//!   <https://jsonlines.org/>).
//!
//! A new output format is a new module with a type implementing [`Printer`], and a [`Format`]
//! variant that names it.

pub mod count;
pub mod json;
pub mod latency;
pub mod tasks;
pub mod text;
pub mod trace;

pub use count::{Counter, IntervalCounter};
pub use latency::Latency;
pub use tasks::TaskInfo;
pub use trace::TracePrinter;

use crate::plan::{Hit, ProbePlan, Role, Value};
use crate::session::Lost;
use std::io::{self, Write};

/// What a sink wants after a hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// The event limit is reached.
    Enough,
    /// The output is gone (EPIPE: `netprobe trace ... | head`).
    OutputClosed,
}

/// Receives hits, and interval ticks.
pub trait Sink {
    fn hit(&mut self, plan: &ProbePlan, hit: Hit) -> Flow;
    /// Called every `interval` with the lost count so far.
    fn tick(&mut self, _plan: &ProbePlan, _lost: Lost) -> Flow {
        Flow::Continue
    }
    /// Called on every turn of the event loop (at least every 200 ms), hits or not.
    fn idle(&mut self, _plan: &ProbePlan) {}
}

/// The flow after a write: any write error (EPIPE or other) means nobody reads what we print
/// anymore.
pub fn flow_of(r: io::Result<()>) -> Flow {
    match r {
        Ok(()) => Flow::Continue,
        Err(_) => Flow::OutputClosed,
    }
}

/// Text or JSON lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    /// The printer of this format (the one place that matches on it).
    pub fn printer(self) -> &'static dyn Printer {
        match self {
            Format::Text => &text::TextPrinter,
            Format::Json => &json::JsonPrinter,
        }
    }
}

/// One hit as a trace line shows it.
#[derive(Clone, Copy, Debug)]
pub struct TraceLine<'a> {
    /// Seconds since the session started.
    pub rel_s: f64,
    /// CLOCK_MONOTONIC time of the hit, in ns.
    pub mono_ns: u64,
    /// The process, in the ids netprobe shows; `None` when it cannot be found out.
    pub pid: Option<u32>,
    pub tid: u32,
    pub comm: &'a str,
    pub function: &'a str,
    pub image: &'a std::path::Path,
    pub role: Role,
    pub args: &'a [(String, Value)],
}

impl TraceLine<'_> {
    /// The return value of a return hit, when the probe fetched one (`ret`).
    pub fn retval(&self) -> Option<&Value> {
        self.args.iter().find(|(n, _)| n == "ret").map(|(_, v)| v)
    }
}

/// Calls per function over a span (`netprobe count`).
#[derive(Clone, Debug)]
pub struct CountReport<'a> {
    /// Function name and calls, in plan order.
    pub rows: Vec<(&'a str, u64)>,
    pub lost: Lost,
    /// Length of the counted span in seconds.
    pub elapsed_s: f64,
}

/// Durations of one function's completed calls.
#[derive(Clone, Debug)]
pub struct LatencyStats<'a> {
    pub calls: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// log2 buckets: index i counts durations in [2^i, 2^(i+1)) ns (see
    /// [`latency::bucket_bounds`]).
    pub log2: &'a [u64],
}

/// The latency report (`netprobe latency`): per function in plan order, `None` when no call
/// completed.
#[derive(Clone, Debug)]
pub struct LatencyReport<'a> {
    pub functions: Vec<(&'a str, Option<LatencyStats<'a>>)>,
    /// Returns seen without an entry (the call began before the probes).
    pub unpaired_returns: u64,
    pub lost: Lost,
}

/// One output format: how each sink's results are written.
pub trait Printer {
    /// What comes before the first trace line.
    fn trace_header(&self, out: &mut dyn Write) -> io::Result<()>;
    /// One trace line.
    fn trace_line(&self, out: &mut dyn Write, line: &TraceLine<'_>) -> io::Result<()>;
    /// A count report.
    fn counts(&self, out: &mut dyn Write, report: &CountReport<'_>) -> io::Result<()>;
    /// A latency report.
    fn latency(&self, out: &mut dyn Write, report: &LatencyReport<'_>) -> io::Result<()>;
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
