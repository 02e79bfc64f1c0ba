//! Which stack a sample gets: the user-space walk of its copied stack, or the kernel's
//! frame-pointer chain, decided per sample and per frame.
//!
//! The walk ([`crate::stacks::Unwinder`]) is the one that is right without frame pointers: it
//! follows each image's call-frame information (or Go's pcsp table) and falls back to the frame
//! pointer per frame only where neither covers the pc. The kernel's chain
//! (`PERF_SAMPLE_CALLCHAIN`) is right only where every frame keeps a frame pointer, and nothing
//! in it says where that fails: a frame-pointer chain through Debian's libc or a Rust release
//! build still ends cleanly at `_start`, with the frameless callers silently skipped (the chain
//! jumps from the leaf to the last frame that saved rbp). So "the chain reached the thread's
//! start" cannot tell a right chain from a wrong one, and the walk is taken for every sample
//! that carries registers and a stack. The kernel chain is kept for what the walk cannot see:
//! past the end of the copied stack (a deep recursion beyond `--stack-size`), where it is
//! spliced on after the walk's last frame when that frame is in it, and for samples without
//! registers (the kernel copies none from some contexts), where it gets the missed caller back
//! as before. Cost, measured (BENCHMARKS.md, "Unwinding"): a few microseconds per sample once
//! each image's rows are cached, against the profile's 99 samples per second per thread.

use super::missed_caller::MissedCallers;
use crate::stacks::{StackNamer, Unwinder};
use netprobe_core::debuginfo::UnwoundBy;
use serde::Serialize;
use std::time::Instant;

/// What unwinding cost over a profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct UnwindCost {
    /// Samples walked in user space.
    pub walked: u64,
    /// Of those, samples whose walk the kernel's chain extended past the copied stack.
    pub extended_by_kernel_chain: u64,
    /// Samples that kept the kernel's chain (no registers or stack to walk).
    pub kernel_chain_only: u64,
    /// Time spent walking, in nanoseconds.
    pub walk_ns: u64,
}

impl UnwindCost {
    /// Mean walking time per walked sample, in microseconds.
    pub fn per_sample_us(&self) -> f64 {
        self.walk_ns as f64 / 1e3 / self.walked.max(1) as f64
    }
}

/// Unwinds the samples of one profile.
#[derive(Default)]
pub struct SampleUnwinder {
    unwinder: Unwinder,
    cost: UnwindCost,
}

impl SampleUnwinder {
    /// Unwinds the samples of processes gone by then from the mappings the profile recorded.
    pub fn use_recorded_maps(&mut self, recorded: Option<netprobe_core::maps::RecordedMaps>) {
        self.unwinder.use_recorded_maps(recorded);
    }

    /// The stack of one sample of `pid`, innermost first, each address with the method that
    /// found it: `kernel` is the kernel's frame-pointer chain (`kernel[0]` the sampled ip),
    /// `regs` and `stack` what `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER` carried.
    pub fn stack(
        &mut self,
        pid: u32,
        mut kernel: Vec<u64>,
        regs: &[u64],
        stack: &[u8],
        namer: &mut StackNamer,
        callers: &mut MissedCallers,
    ) -> Vec<(u64, UnwoundBy)> {
        let started = Instant::now();
        let walked = self.unwinder.stitched(pid, &kernel, regs, stack);
        if !regs.is_empty() && !stack.is_empty() {
            self.cost.walk_ns += started.elapsed().as_nanos() as u64;
            self.cost.walked += 1;
        }
        if let Some((frames, extended)) = walked {
            self.cost.extended_by_kernel_chain += u64::from(extended);
            return frames;
        }
        self.cost.kernel_chain_only += 1;
        let before = kernel.len();
        callers.restore(pid, &mut kernel, stack, namer);
        let restored = kernel.len() > before;
        kernel
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                let by = match i {
                    0 => UnwoundBy::Ip,
                    1 if restored => UnwoundBy::MissedCaller,
                    _ => UnwoundBy::KernelFp,
                };
                (a, by)
            })
            .collect()
    }

    /// What unwinding cost so far.
    pub fn cost(&self) -> UnwindCost {
        self.cost
    }
}
