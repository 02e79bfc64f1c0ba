//! `netprobe trace`: one line per hit, in the chosen format.

use super::{flow_of, Flow, Format, Sink, TaskInfo, TraceLine};
use crate::plan::{Hit, ProbePlan};
use std::io::Write;

/// `netprobe trace`: one line per hit.
pub struct TracePrinter<W: Write> {
    pub out: W,
    pub format: Format,
    /// CLOCK_MONOTONIC ns at the session's start; times print relative to it.
    pub start_ns: u64,
    pub max_events: Option<u64>,
    pub printed: u64,
    pub tasks: TaskInfo,
    /// `--stack`: name and print the user stack under each hit.
    pub stacks: Option<super::stack::StackShow>,
    /// Where each process runs (container, pod, namespace), for the lines of hits in containers.
    pub places: super::places::Places,
}

impl<W: Write> TracePrinter<W> {
    /// One line per hit into `out`, times relative to `start_ns` (CLOCK_MONOTONIC), processes
    /// named by `tasks`; no event limit, no stacks.
    pub fn new(out: W, format: Format, tasks: TaskInfo, start_ns: u64) -> TracePrinter<W> {
        TracePrinter {
            out,
            format,
            start_ns,
            max_events: None,
            printed: 0,
            tasks,
            stacks: None,
            places: Default::default(),
        }
    }

    /// Writes what comes before the first line (the text format's column titles).
    pub fn header(&mut self) -> std::io::Result<()> {
        self.format.printer().trace_header(&mut self.out)?;
        self.out.flush()
    }

    fn line(&mut self, plan: &ProbePlan, hit: &Hit) -> std::io::Result<()> {
        let f = plan.function(hit.function);
        let pid = self.tasks.process_of(hit);
        let stack = match self.stacks.as_mut() {
            Some(s) => {
                let naming = super::stack::naming_pid(&mut self.tasks, hit);
                Some(s.show(naming, hit))
            }
            None => None,
        };
        let place = pid.and_then(|p| self.places.of(p));
        let line = TraceLine {
            rel_s: hit.ts_ns.saturating_sub(self.start_ns) as f64 / 1e9,
            mono_ns: hit.ts_ns,
            pid,
            tid: self.tasks.display_tid(hit.tid),
            comm: hit.comm.as_deref().unwrap_or("?"),
            function: &f.name,
            image: &f.image,
            role: hit.role,
            args: &hit.args,
            stack: stack.as_ref(),
            place: place.as_deref(),
        };
        // Flushed once per event-loop turn (`idle`), not per line: at 100k hits/s a write(2) per
        // line cost more CPU than everything else netprobe does.
        self.format.printer().trace_line(&mut self.out, &line)
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
