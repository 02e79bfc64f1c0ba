//! What a profile's records go through as they are read: each sample's user stack walked
//! ([`SampleUnwinder`]) and learnt by the namer; on-CPU samples counted (or weighed by their
//! period, `--wall`); off the CPU, the sample taken as a thread leaves held until its
//! switch-in says how long it waited ([`SwitchPairing`]), then counted in microseconds under
//! that stack and the wait's reason ([`BlockReason`]).

use super::missed_caller::MissedCallers;
use super::off_cpu::{BlockReason, Blocked, SwitchPairing};
use super::unwinding::SampleUnwinder;
use crate::backend::perf_event::record::{self, Record};
use crate::stacks::StackNamer as Namer;
use netprobe_core::debuginfo::UnwoundBy;
use netprobe_core::kallsyms::KernelSymbols;
use netprobe_core::maps::RecordedMaps;
use std::collections::HashMap;

/// A stack as recorded: the process, each address with the method that found it, and the
/// leaf an off-CPU wait ends in.
pub type RawStack = (u32, Vec<(u64, UnwoundBy)>, Option<BlockReason>);

/// Counts by stack, named at the end.
#[derive(Default)]
pub struct RawStacks {
    pub stacks: HashMap<RawStack, u64>,
    pub lost: u64,
    pub throttled: u64,
    pub switches: u64,
    pub cpu_samples: u64,
}

/// What a thread left the CPU with: its process, its walked user stack, the kernel's frames.
pub struct LeftWith {
    pid: u32,
    walked: Vec<(u64, UnwoundBy)>,
    kernel_ips: Vec<u64>,
}

/// What the records of one profile go through: naming, unwinding and, off the CPU, pairing.
pub struct Absorber {
    pub namer: Namer,
    pub unwinder: SampleUnwinder,
    pub callers: MissedCallers,
    pub raw: RawStacks,
    pub recorded: RecordedMaps,
    pub pairing: SwitchPairing<LeftWith>,
    pub kernel: Option<KernelSymbols>,
    /// Microseconds one on-CPU sample stands for (0: count samples).
    pub sample_us: u64,
    pub every: u64,
    pub min_block_ns: u64,
}

impl Absorber {
    /// The user stack of one sample, walked and learnt by the namer.
    fn walk(
        &mut self,
        pid: u32,
        ips: Vec<u64>,
        regs: &[u64],
        stack: &[u8],
    ) -> Vec<(u64, UnwoundBy)> {
        let walked = self
            .unwinder
            .stack(pid, ips, regs, stack, &mut self.namer, &mut self.callers);
        let addrs: Vec<u64> = walked.iter().map(|w| w.0).collect();
        self.namer.learn(pid, &addrs);
        walked
    }

    /// The records of an on-CPU sampler.
    pub fn on_cpu(&mut self, buf: &[u8]) {
        for r in record::decode(buf) {
            match r {
                Record::Sample {
                    pid,
                    ips,
                    stack,
                    regs,
                    ..
                } if !ips.is_empty() => {
                    let walked = self.walk(pid, ips, &regs, &stack);
                    self.raw.cpu_samples += 1;
                    *self.raw.stacks.entry((pid, walked, None)).or_insert(0) +=
                        self.sample_us.max(1);
                }
                other => self.common(other),
            }
        }
        self.namer.retry_unnamed(false);
    }

    /// The records of a context-switch sampler, in time order (they come CPU after CPU).
    pub fn switches(&mut self, buf: &[u8]) {
        let mut records = record::decode(buf);
        records.sort_by_key(|r| match r {
            Record::Sample { time, .. } | Record::Switch { time, .. } => *time,
            _ => 0,
        });
        for r in records {
            match r {
                Record::Sample {
                    pid,
                    tid,
                    time,
                    ips,
                    kernel_ips,
                    stack,
                    regs,
                } if !ips.is_empty() => {
                    let walked = self.walk(pid, ips, &regs, &stack);
                    let left_with = LeftWith {
                        pid,
                        walked,
                        kernel_ips,
                    };
                    self.pairing.left(tid, time, left_with);
                }
                Record::Switch {
                    tid,
                    time,
                    out: true,
                    preempted,
                    ..
                } => self.pairing.switched_out(tid, time, preempted),
                Record::Switch {
                    tid,
                    time,
                    out: false,
                    ..
                } => {
                    if let Some(b) = self.pairing.switched_in(tid, time) {
                        self.add_wait(b);
                    }
                }
                other => self.common(other),
            }
        }
        self.namer.retry_unnamed(false);
    }

    /// One finished wait, weighed in microseconds (times the sampling ratio).
    fn add_wait(&mut self, b: Blocked<LeftWith>) {
        if b.ns < self.min_block_ns {
            return;
        }
        let LeftWith {
            pid,
            walked,
            kernel_ips,
        } = b.left_with;
        let kernel = self.kernel.get_or_insert_with(KernelSymbols::load);
        let reason = BlockReason::of(&kernel_ips, b.preempted, kernel);
        self.raw.switches += 1;
        *self
            .raw
            .stacks
            .entry((pid, walked, Some(reason)))
            .or_insert(0) += (b.ns / 1000).saturating_mul(self.every);
    }

    fn common(&mut self, r: Record) {
        match r {
            Record::Lost(n) => self.raw.lost += n,
            Record::Throttle => self.raw.throttled += 1,
            Record::Sideband(s) => s.apply(&self.recorded),
            _ => {}
        }
    }

    /// Closes the waits still open at `end` (CLOCK_MONOTONIC ns).
    pub fn finish_waits(&mut self, end: u64) {
        for b in std::mem::take(&mut self.pairing).finish(end) {
            self.add_wait(b);
        }
    }
}
