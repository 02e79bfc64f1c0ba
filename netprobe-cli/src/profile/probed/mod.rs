//! The probe-driven parts of `netprobe profile`: what happens under a probed function
//! (`--trigger`), and where Go goroutines park.
//!
//! - [`Windows`] (`windows`): the spans threads spend inside a function, from its entry and
//!   return hits, to weigh samples and off-CPU intervals by.
//! - [`GoParks`] (`go_parks`): `runtime.gopark` entries and returns paired by goroutine into
//!   [`ParkedInterval`]s with the goroutine's stack and its wait reason; [`is_scheduler_idle`]
//!   tells an idle M's off-CPU stack.
//! - [`WaitReasons`] (`wait_reason`): the wait reason names read from the Go binary.
//! - [`HitFeed`]: what profiling takes hits from. The session layer's
//!   `crate::session::ProbeFeed` implements it (a tracing session on a thread of its own); the
//!   profile, a layer below sessions (ARCHITECTURE.md, "Layers"), names only this trait.

mod go_parks;
mod wait_reason;
mod windows;

pub use go_parks::{
    go_abi_of, gopark_spec, is_scheduler_idle, GoParks, ParkedInterval, GOPARK,
    SCHEDULER_IDLE_FRAMES,
};
pub use wait_reason::{WaitReasons, MAX_NAME, WAIT_REASON_STRINGS};
pub use windows::{WindowEvent, Windows};

use crate::plan::Hit;

/// A source of probe hits running beside a profile: the hits so far on demand, then all that
/// is left when it stops (its probes removed).
pub trait HitFeed: Send {
    /// Moves the hits received so far into `out`, without waiting.
    fn take(&self, out: &mut Vec<Hit>);
    /// Lets a command the feed holds before its first instruction run.
    fn release(&mut self);
    /// Whether it still records (its session ends by itself when its targets exit).
    fn running(&self) -> bool;
    /// Stops recording, removes every probe, and returns the hits not yet taken.
    fn finish(self: Box<Self>) -> crate::Result<Vec<Hit>>;
}
