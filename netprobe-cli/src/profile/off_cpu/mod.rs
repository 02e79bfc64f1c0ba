//! Off-CPU time: how long each thread of the targets waited between leaving the CPU and running
//! again, under the user stack it left with and the reason the kernel gives.
//!
//! The kernel tells three things per switch ([`crate::backend::perf_event::Sampling::Switches`]):
//! a sample when the thread leaves (its user registers and stack, and the kernel's callchain:
//! where it blocked), then a `PERF_RECORD_SWITCH` out (flagged when it was preempted while
//! runnable) and, when it runs again, a `PERF_RECORD_SWITCH` in. [`pairing`] matches them per
//! thread into intervals; [`reason`] names the wait from the kernel frames (bcc's `offcputime`
//! and the OpenTelemetry profiler take the same two points, from the `sched_switch`
//! tracepoint, in BPF).

mod pairing;
mod reason;

pub use pairing::{Blocked, SwitchPairing};
pub use reason::{leaf_name, BlockReason};
