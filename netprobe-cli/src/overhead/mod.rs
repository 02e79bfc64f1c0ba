//! What a session costs the processes it traces, and a budget for it (`--max-overhead PCT`).
//!
//! A uprobe hit costs the process that makes it a trap, and a record when the session reads one
//! per hit; the kernel charges that time to the process. netprobe knows each probe's hit rate
//! (from the hits it reads, or the counts the kernel keeps) and what a hit costs on this machine
//! for the instruction the probe traps on ([`calibration`]), so it can say what a session costs
//! its targets, as a share of one CPU, while it runs ([`meter::OverheadMeter`]), and take out
//! the probes of the functions that would exceed a budget instead of slowing a service
//! unnoticed. No peer says this: perf, bpftrace and bcc leave the cost to be guessed.

pub mod calibration;
pub mod meter;

pub use calibration::{hit_costs, HitCosts};
pub use meter::{Estimate, OverheadMeter};

use crate::plan::{ProbeKind, ProbePlan};
use netprobe_core::probe_point::{handling_of, KernelHandling};

/// How the kernel handles the instruction each probe of `plan` traps on
/// ([`crate::probe_bytes`]). Bytes that cannot be read count as single-stepped, the dearer case.
pub fn probe_handling(plan: &ProbePlan) -> Vec<KernelHandling> {
    crate::probe_bytes::instruction_bytes(plan)
        .iter()
        .map(|b| match b.as_slice() {
            [] => KernelHandling::SingleStepped,
            b => handling_of(b),
        })
        .collect()
}

/// Nanoseconds each hit of each probe of `plan` costs its process: its trap (`handling`, one per
/// probe), a record when the session writes one per hit (`records`), and for a uretprobe the
/// second trap at the return (the kernel's trampoline, `handle_trampoline` in
/// kernel/events/uprobes.c: an emulated-sized trap).
pub fn probe_costs(
    plan: &ProbePlan,
    handling: &[KernelHandling],
    costs: &HitCosts,
    records: bool,
) -> Vec<f64> {
    plan.probes
        .iter()
        .zip(handling)
        .map(|(p, &h)| {
            let mut ns = costs.per_hit_ns(h, records);
            if p.kind == ProbeKind::UretProbe {
                ns += costs.emulated_ns;
            }
            ns
        })
        .collect()
}
