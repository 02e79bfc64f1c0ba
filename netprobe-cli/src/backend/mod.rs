//! Tracing backends: what places a plan's probes in the kernel and reads their hits back.
//!
//! The engine plans backend-neutral probes (`crate::plan`: functions, probe points, values at
//! [`netprobe_core::abi::ArgLocation`]s), has the probe-safety gate check them
//! (`crate::gate::CheckedPlan`), and hands them to a [`Backend`]; the event loop
//! (`crate::runner`) polls the backend's descriptors and reads decoded [`Hit`]s into a sink.
//!
//! [`perf_event`] is the kernel's other event source: sampled on-CPU user stacks for
//! `netprobe profile` (samples, not probe hits, so it stands beside the trait rather than behind
//! it).
//!
//! [`tracefs`] is the first backend: uprobes through `uprobe_events`, a tracefs instance of its
//! own and its per-CPU ring buffers. A new backend (perf_event, BPF) is a new module here that
//! implements [`Backend`]; it refuses what it cannot place (a user's raw tracefs fetch-arg text,
//! [`crate::plan::FetchValue::Backend`], is tracefs's own).

mod exited_threads;
pub mod per_task;
pub mod perf_event;
mod pid_map;
pub mod tracefs;

pub use exited_threads::ExitedThreads;
pub use pid_map::PidMap;

use crate::error::Result;
use crate::gate::CheckedPlan;
use crate::plan::{Hit, ProbePlan};
use std::os::fd::BorrowedFd;

/// Events the kernel lost, and how sure we are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Sum of `overrun`, `commit overrun` and `dropped events` over all CPUs.
    pub counted: u64,
    /// A page said events were lost without saying how many.
    pub unknown_amount: bool,
}

impl Lost {
    pub fn any(&self) -> bool {
        self.counted > 0 || self.unknown_amount
    }
}

/// A live recording of one plan's probes.
///
/// Lifecycle: [`Backend::attach`] once, then any number of [`Backend::read`]s (after polling
/// [`Backend::event_fds`]), [`Backend::stop`] to end recording and get what is still buffered,
/// and [`Backend::detach`], which removes everything the backend created. Dropping a backend
/// must detach too, so an error path leaves nothing behind.
pub trait Backend {
    /// Places every probe of `plan` and starts recording. `Ok(())` when all are placed and
    /// enabled. On `Err` nothing the call created is left behind (every probe and buffer is
    /// removed before it returns) and the error names the probe and the reason. Attaching a
    /// second plan to a backend that holds one is an error.
    fn attach(&mut self, plan: CheckedPlan) -> Result<()>;

    /// The attached plan (an empty plan before [`Backend::attach`]).
    fn plan(&self) -> &ProbePlan;

    /// Descriptors that become readable (`POLLIN`) when hits are waiting; empty when not
    /// attached or after [`Backend::detach`].
    fn event_fds(&self) -> Vec<BorrowedFd<'_>>;

    /// Reads what is available now and hands the decoded hits to `sink`, oldest first. Returns
    /// how many were handed out: `Ok(0)` when nothing was waiting (or nothing is attached). Hits
    /// that may still be overtaken by older ones of another buffer are held back until the next
    /// call or [`Backend::stop`]. Records that do not decode are skipped and counted in
    /// [`Backend::lost`]; `Err` only when reading itself fails.
    fn read(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<u64>;

    /// Hits lost so far (buffers full, records that did not decode); zero when not attached.
    fn lost(&self) -> Lost;

    /// Stops recording, hands every hit still buffered to `sink` and returns what was lost in
    /// the whole recording. The probes stay placed (recording nothing) until
    /// [`Backend::detach`]. `Ok(Lost::default())` when nothing is attached.
    fn stop(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<Lost>;

    /// Removes every probe and buffer the backend created; idempotent (`Ok(())` when nothing is
    /// left). On `Err`, everything that could be removed is, and the error names the first
    /// failure (what is left is what `netprobe clean` and the watchdog remove).
    fn detach(&mut self) -> Result<()>;

    /// Hands `sink` the calls each probe made since the last call, for a backend that counts
    /// in the kernel instead of recording hits (`sink(plan, probe, calls)`); nothing otherwise.
    fn read_counts(&mut self, _sink: &mut dyn FnMut(&ProbePlan, usize, u64)) -> Result<()> {
        Ok(())
    }

    /// Takes out the probes `probes` (indexes into the plan's probes) while the session goes on:
    /// their breakpoints leave the targets. Returns every probe taken out, which may be more than
    /// asked when probes share a kernel event (all of an event go together). A backend that
    /// cannot refuses with the reason.
    fn remove_probes(&mut self, _probes: &[usize]) -> Result<Vec<usize>> {
        Err(crate::error::Error::usage(
            "this session cannot take out single probes while it runs",
        ))
    }

    /// Whether the session counts calls in the kernel ([`Backend::read_counts`]) instead of
    /// recording a hit each.
    fn counts_in_kernel(&self) -> bool {
        false
    }

    /// The kernel probe definitions in effect (a shared kernel event counts each of its probes).
    fn placed(&self) -> usize;

    /// Inside a pid namespace, the kernel's ids of the target threads that hits carry, mapped to
    /// ours; `None` where hits carry ids of netprobe's own namespace.
    fn pid_map(&self) -> Option<&PidMap> {
        None
    }

    /// Where the process of a thread that exited before its hits were read is still known
    /// (tracefs: `saved_tgids`); `None` when nowhere but `/proc`.
    fn exited_threads(&self) -> Option<Box<dyn ExitedThreads>> {
        None
    }

    /// The kernel probe definitions the session placed, as the kernel was given them (tracefs:
    /// `uprobe_events` lines), for a reader who wants to see them.
    fn definitions(&self) -> Vec<String> {
        Vec::new()
    }

    /// The targets' mappings as the kernel announced them while the session ran, for naming
    /// the frames of a process whose maps are gone by then; `None` where the backend records
    /// none.
    fn recorded_maps(&self) -> Option<netprobe_core::maps::RecordedMaps> {
        None
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock every backend stamps hits with (tracefs: the
/// instance's `mono` trace clock), so hit times and the engine's own times compare.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
