//! Where hits go. A [`Sink`] receives the decoded hits of a session (the event loop in
//! `crate::runner` calls it); what a sink prints goes through a [`Printer`], one per output
//! [`Format`], so no sink matches on the format itself:
//!
//! - [`trace::TracePrinter`]: one line per hit (`netprobe trace`);
//! - [`count::Counter`], [`count::IntervalCounter`]: calls per function (`netprobe count`, like
//!   bcc funccount);
//! - [`latency::Latency`]: durations of calls, log2 histogram and percentiles (`netprobe latency`,
//!   like bcc funclatency);
//! - `metrics::Exported` (feature `metrics`): a decorator that also exports the hits of `count`
//!   and `latency` as Prometheus metrics (`--metrics`), served by `metrics::http`;
//! - [`text::TextPrinter`] and [`json::JsonPrinter`]: the two formats (JSON is one object a line,
//!   <https://jsonlines.org/>).
//!
//! A new output format is a new module with a type implementing [`Printer`], and a [`Format`]
//! variant that names it.

pub mod count;
pub mod json;
pub mod latency;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod places;
pub mod stack;
pub mod stall;
pub mod tasks;
pub mod text;
pub mod trace;

pub use count::{Counter, IntervalCounter};
pub use latency::Latency;
pub use tasks::TaskInfo;
pub use trace::TracePrinter;

use crate::backend::Lost;
use crate::plan::{Hit, ProbePlan, Role, Value};
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
    /// `calls` more calls of probe `probe` (an index into [`ProbePlan::probes`]), counted in the
    /// kernel without a hit each (`crate::backend::Backend::read_counts`); only counting sinks
    /// take them.
    fn counted(&mut self, _plan: &ProbePlan, _probe: usize, _calls: u64) -> Flow {
        Flow::Continue
    }
    /// Called every `interval` with the lost count so far.
    fn tick(&mut self, _plan: &ProbePlan, _lost: Lost) -> Flow {
        Flow::Continue
    }
    /// Called on every turn of the event loop (at least every 200 ms), hits or not.
    fn idle(&mut self, _plan: &ProbePlan) {}
    /// Asked on every turn of the event loop, after [`Sink::idle`]: `true` ends the run with
    /// [`crate::runner::StopReason::Requested`], and what is still buffered is handed over as
    /// after any other stop. A sink that another thread stops (a flag it shares) says so here,
    /// since a session without hits never calls [`Sink::hit`].
    fn stop_requested(&self) -> bool {
        false
    }
    /// Called about once a second with what the backend lost so far (`--metrics` exports it).
    fn lost_so_far(&mut self, _plan: &ProbePlan, _lost: Lost) {}
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
    /// The user call stack under the hit (`trace --stack`); `None` when not recorded.
    pub stack: Option<&'a stack::ShownStack>,
    /// The process's container, pod and namespace; `None` on the host.
    pub place: Option<&'a places::Place>,
}

impl TraceLine<'_> {
    /// The return value of a return hit, when the probe fetched one (`ret`).
    pub fn retval(&self) -> Option<&Value> {
        self.args.iter().find(|(n, _)| n == "ret").map(|(_, v)| v)
    }
}

/// One container's calls per function.
pub type PlaceCounts<'a> = (std::rc::Rc<places::Place>, Vec<(&'a str, u64)>);

/// Calls per function over a span (`netprobe count`).
#[derive(Clone, Debug)]
pub struct CountReport<'a> {
    /// Function name and calls, in plan order.
    pub rows: Vec<(&'a str, u64)>,
    /// The same per container, for the hits of processes in containers (functions with calls
    /// only).
    pub by_place: Vec<PlaceCounts<'a>>,
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

/// A function's name, the container of its calls (`None`: the host), and their statistics
/// (`None` when no call completed).
pub type LatencyRow<'a> = (
    &'a str,
    Option<std::rc::Rc<places::Place>>,
    Option<LatencyStats<'a>>,
);

/// The latency report (`netprobe latency`): per function in plan order, `None` when no call
/// completed.
#[derive(Clone, Debug)]
pub struct LatencyReport<'a> {
    /// Per function (and container, where its process runs in one).
    pub functions: Vec<LatencyRow<'a>>,
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
    /// Calls per distinct stack (`count --stack`).
    fn stack_counts(&self, out: &mut dyn Write, report: &stack::StackCountReport)
        -> io::Result<()>;
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

/// A plan of entry-probed functions named `names` in `image`, for the sinks' tests.
#[cfg(test)]
pub(crate) fn test_plan(names: &[&str], image: &str) -> ProbePlan {
    use crate::plan::{FunctionPlan, PairingKey, Returns};
    use netprobe_core::addr::FileOffset;
    let mut p = ProbePlan::new(false);
    for (i, n) in names.iter().enumerate() {
        let at = FileOffset(0x10 + i as u64 * 0x40);
        p.add_function(FunctionPlan {
            name: n.to_string(),
            image: image.into(),
            probe_path: image.into(),
            function_offset: at,
            entry_offsets: vec![at],
            returns: Returns::None,
            convention: netprobe_core::abi::CallingConvention::SysV,
            args: vec![],
            ret: None,
            pairing: PairingKey::Thread,
            symbol: None,
        })
        .unwrap();
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report(rows: &[(String, u64)], counted: u64) -> CountReport<'_> {
        CountReport {
            rows: rows.iter().map(|(n, c)| (n.as_str(), *c)).collect(),
            by_place: Vec::new(),
            lost: Lost {
                counted,
                unknown_amount: false,
            },
            elapsed_s: 1.0,
        }
    }

    proptest! {
        /// Both formats say the same counts: JSON's object reads back to the rows, text has a
        /// line per row under its header (and one more when hits were lost).
        #[test]
        fn both_formats_carry_every_count(
            counts in proptest::collection::vec(any::<u64>(), 0..8),
            counted in 0u64..3,
        ) {
            let rows: Vec<(String, u64)> =
                counts.iter().enumerate().map(|(i, &c)| (format!("f{i}"), c)).collect();
            let r = report(&rows, counted);
            let mut json = Vec::new();
            Format::Json.printer().counts(&mut json, &r).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
            for (name, c) in &rows {
                prop_assert_eq!(v["counts"][name].as_u64(), Some(*c));
            }
            prop_assert_eq!(v["complete"].as_bool(), Some(counted == 0));
            let mut text = Vec::new();
            Format::Text.printer().counts(&mut text, &r).unwrap();
            let text = String::from_utf8(text).unwrap();
            prop_assert_eq!(text.lines().count(), 1 + rows.len() + usize::from(counted > 0));
            for ((name, c), line) in rows.iter().zip(text.lines().skip(1)) {
                let mut cols = line.split_whitespace();
                prop_assert_eq!(cols.next(), Some(name.as_str()));
                prop_assert_eq!(cols.next().map(str::to_string), Some(c.to_string()));
            }
        }
    }
}
