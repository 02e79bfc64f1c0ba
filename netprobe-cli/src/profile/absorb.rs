//! What a profile's records go through as they are read: each sample's user stack walked
//! ([`SampleUnwinder`]) and learnt by the namer; on-CPU samples counted (or weighed by their
//! period, `--wall`); off the CPU, the sample taken as a thread leaves held until its
//! switch-in says how long it waited ([`SwitchPairing`]), then counted in microseconds under
//! that stack and the wait's reason ([`BlockReason`]).

use super::missed_caller::MissedCallers;
use super::off_cpu::{BlockReason, Blocked, SwitchPairing};
use super::probed::{ParkedInterval, Windows};
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
    pub parks: u64,
    pub cpu_samples: u64,
    /// Waits dropped because their switch-in record was lost.
    pub stale: u64,
}

/// Time counted but held, with its thread and times, until `--trigger`'s windows are known.
struct Held {
    tid: u32,
    from_ns: u64,
    to_ns: u64,
    stack: u32,
    /// An on-CPU sample's weight (counted when its time is in a window), or 0 for a wait
    /// (counted for the part of it in a window).
    sample: u64,
    /// Waits this one stands for (`--off-cpu-every`).
    scale: u64,
}

/// Counts held for `--trigger` (stacks interned: a wait repeats its stack often).
#[derive(Default)]
pub struct HeldCounts {
    ids: HashMap<RawStack, u32>,
    stacks: Vec<RawStack>,
    held: Vec<Held>,
}

impl HeldCounts {
    fn hold(&mut self, key: RawStack, tid: u32, span: (u64, u64), sample: u64, scale: u64) {
        let next = self.stacks.len() as u32;
        let stack = *self.ids.entry(key.clone()).or_insert_with(|| {
            self.stacks.push(key);
            next
        });
        self.held.push(Held {
            tid,
            from_ns: span.0,
            to_ns: span.1,
            stack,
            sample,
            scale,
        });
    }
}

/// What a thread left the CPU with: its process, its walked user stack, the kernel's frames.
pub struct LeftWith {
    pid: u32,
    walked: Vec<(u64, UnwoundBy)>,
    kernel_ips: Vec<u64>,
    since: u64,
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
    /// With `--trigger`: everything counted is held here until the windows are known.
    pub held: Option<HeldCounts>,
    /// Each counted process's name (`/proc/PID/comm`), read at its first count while it runs;
    /// `None` when it was gone already.
    pub commands: HashMap<u32, Option<String>>,
    /// Each counted process's container, pod and namespace, found at its first count.
    pub places: HashMap<u32, Option<std::rc::Rc<crate::sinks::places::Place>>>,
    pub placer: crate::sinks::places::Places,
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
                    tid,
                    time,
                    ips,
                    stack,
                    regs,
                    ..
                } if !ips.is_empty() => {
                    let walked = self.walk(pid, ips, &regs, stack);
                    self.raw.cpu_samples += 1;
                    let weight = self.sample_us.max(1);
                    self.count((pid, walked, None), tid, (time, time), weight, 1);
                }
                other => self.common(other),
            }
        }
        self.namer.retry_unnamed(false);
    }

    /// The records of a context-switch sampler's chunks, in time order (they come CPU after
    /// CPU, drain after drain).
    pub fn switches(&mut self, chunks: &[&[u8]]) {
        let mut records: Vec<Record> = chunks.iter().flat_map(|c| record::decode(c)).collect();
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
                    let walked = self.walk(pid, ips, &regs, stack);
                    let left_with = LeftWith {
                        pid,
                        walked,
                        kernel_ips,
                        since: time,
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
            since,
        } = b.left_with;
        let kernel = self.kernel.get_or_insert_with(KernelSymbols::load);
        let reason = BlockReason::of(&kernel_ips, b.preempted, kernel);
        self.raw.switches += 1;
        let every = self.every;
        self.count(
            (pid, walked, Some(reason)),
            b.tid,
            (since, since + b.ns),
            0,
            every,
        );
    }

    /// Goroutines' parks (the Go view): each under the goroutine's own stack, walked as a
    /// sample's, and the runtime's reason, counted for the thread that ran it when it parked,
    /// for the part within `profiled` (CLOCK_MONOTONIC ns: the probes record from before the
    /// samplers start to after they stop).
    pub fn parks(&mut self, parks: Vec<ParkedInterval>, profiled: (u64, u64)) {
        for mut p in parks {
            p.from_ns = p.from_ns.max(profiled.0);
            p.to_ns = p.to_ns.min(profiled.1);
            if p.to_ns <= p.from_ns {
                continue;
            }
            let ns = p.to_ns - p.from_ns;
            if ns < self.min_block_ns || p.stack.addrs.is_empty() {
                continue;
            }
            let (regs, stack) = p.stack.copy.map(|c| (c.regs, c.stack)).unwrap_or_default();
            let walked = self.walk(p.pid, p.stack.addrs, &regs, &stack);
            self.raw.parks += 1;
            let key = (p.pid, walked, Some(BlockReason::GoPark(p.reason)));
            // Every park is recorded (no sampling ratio): each stands for itself.
            self.count(key, p.tid_at_entry, (p.from_ns, p.to_ns), 0, 1);
        }
        self.namer.retry_unnamed(false);
    }

    /// Counts `sample` microseconds (an on-CPU sample at `span.0`), or the wait over `span`
    /// (`sample` 0) standing for `scale` waits, under `key` for thread `tid`; held with
    /// `--trigger`.
    fn count(&mut self, key: RawStack, tid: u32, span: (u64, u64), sample: u64, scale: u64) {
        let weight = match sample {
            0 => ((span.1 - span.0) / 1000).saturating_mul(scale),
            n => n,
        };
        let pid = key.0;
        self.commands.entry(pid).or_insert_with(|| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            Some(comm.trim_end_matches('\n').to_string())
        });
        let placer = &mut self.placer;
        self.places.entry(pid).or_insert_with(|| placer.of(pid));
        match &mut self.held {
            Some(h) => h.hold(key, tid, span, sample, scale),
            None => *self.raw.stacks.entry(key).or_insert(0) += weight,
        }
    }

    /// Counts what was held for the part inside `windows` (`--trigger`): an on-CPU sample whose
    /// time is in a window of its thread, the part of a wait that overlaps one.
    pub fn apply_windows(&mut self, windows: &Windows) {
        let Some(h) = self.held.take() else { return };
        for e in h.held {
            let weight = match e.sample {
                0 => (windows.overlap_ns(e.tid, e.from_ns, e.to_ns) / 1000).saturating_mul(e.scale),
                n if windows.contains(e.tid, e.from_ns) => n,
                _ => 0,
            };
            if weight > 0 {
                *self
                    .raw
                    .stacks
                    .entry(h.stacks[e.stack as usize].clone())
                    .or_insert(0) += weight;
            }
        }
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
        let pairing = std::mem::take(&mut self.pairing);
        self.raw.stale = pairing.stale;
        for b in pairing.finish(end) {
            self.add_wait(b);
        }
    }
}
