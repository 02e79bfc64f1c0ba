//! What a live command does with the hits of its probes.

/// The live command's mode: it decides which probes a spec gets (latency needs entry and
/// return, paired per call), whether arguments are read, and what is printed (and the body of the
/// `--dry-run` bpftrace program).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `trace`: one line per hit, with arguments.
    Trace,
    /// `count`: calls per function.
    Count,
    /// `latency`: entry and return paired per call, timed.
    Latency,
    /// `probe add`: persistent probes, no program reads them.
    Persist,
}

impl Mode {
    /// Whether entries and returns are paired into calls (by thread or goroutine).
    pub fn pairs_calls(self) -> bool {
        self == Mode::Latency
    }
}
