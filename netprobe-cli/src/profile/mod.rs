//! `netprobe profile`: user stacks of processes, on the CPU (sampled by the kernel through
//! perf_event), off it ([`off_cpu`]: the time from leaving the CPU to running again, under the
//! stack the thread left with and why it left), or both in one unit (`--wall`), named by the
//! core symbolizer (ELF, Go pclntab with inlined frames, .NET ReadyToRun, the runtime's perf map
//! for JIT code, `[unknown] (image+0xOFF)` otherwise), aggregated into a [`Report`].
//!
//! The perf_event backend (`crate::backend::perf_event`) opens the samplers and reads their ring
//! buffers (the only unsafe code of profiling); [`report`] aggregates and prints;
//! `missed_caller` puts back the caller of a sample taken before its function made its frame;
//! `unwinding` chooses, per sample, between the user-space walk of the copied stack
//! ([`crate::stacks::Unwinder`]: CFI, Go pcsp, frame pointers) and the kernel's frame-pointer
//! chain. This module runs the recording loop.

mod absorb;
mod missed_caller;
pub mod off_cpu;
pub mod report;
mod unwinding;

use crate::backend::perf_event::drainer::Drainer;
use crate::backend::perf_event::{Sampler, Sampling, DEFAULT_STACK_BYTES, MAX_STACK_BYTES};
use crate::error::{Error, Result};
use crate::launch::{split_command, PausedChild};
use crate::run_as::RunAs;
use crate::signals::SignalPipe;
use crate::stacks::StackNamer as Namer;
use absorb::{Absorber, RawStacks};
use missed_caller::MissedCallers;
use netprobe_core::maps::RecordedMaps;
use off_cpu::SwitchPairing;
pub use report::{FrameName, Report, Unit};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use unwinding::SampleUnwinder;

/// Sampling frequency when none is given: perf's `-F 99` of the usual recipes (not 100, so
/// sampling does not run in lockstep with timers).
pub const DEFAULT_FREQUENCY: u64 = 99;

/// Which time a profile counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProfileKind {
    /// Time on the CPU, sampled.
    #[default]
    OnCpu,
    /// Time off the CPU (blocked or preempted), measured per wait (`--off-cpu`).
    OffCpu,
    /// Both, in microseconds (`--wall`): each on-CPU sample stands for its sampling period.
    Wall,
}

/// What to profile and how.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    /// Running processes (all their threads, and threads they start later).
    pub pids: Vec<u32>,
    /// A command to start and profile from its first instruction (split like a shell does).
    pub command: Option<String>,
    /// `--user`: the user the command runs as, looked up before anything starts.
    pub user: Option<RunAs>,
    /// Stop after this long (else at Ctrl-C, or when the targets exit).
    pub duration: Option<Duration>,
    /// Samples per second per thread on CPU.
    pub frequency: u64,
    /// Bytes of user stack copied with each sample for unwinding (`--stack-size`); 0: the
    /// default, [`crate::backend::perf_event::DEFAULT_STACK_BYTES`].
    pub stack_size: u32,
    /// On-CPU, off-CPU or both.
    pub kind: ProfileKind,
    /// Off-CPU: take the stack of one switch in this many per thread (0 or 1: every switch),
    /// each weighed as this many (`--off-cpu-every`), to bound the cost at high switch rates.
    pub off_cpu_every: u64,
    /// Off-CPU: waits shorter than this are not counted (`--min-block`, bcc's `-m`).
    pub min_block: Duration,
}

/// A finished profile.
#[derive(Debug)]
pub struct Profile {
    pub report: Report,
    /// Things to tell the user once (e.g. how to get names of JIT-compiled .NET code).
    pub notes: Vec<String>,
    pub elapsed: Duration,
    /// What unwinding the copied stacks cost (`--json`'s `unwinding`; BENCHMARKS.md).
    pub unwinding: unwinding::UnwindCost,
}

impl ProfileOptions {
    fn check(&self) -> Result<()> {
        if self.command.is_some() && !self.pids.is_empty() {
            return Err(Error::usage("use either -p or -c, not both"));
        }
        if self.command.is_none() && self.pids.is_empty() {
            return Err(Error::usage(
                "nothing to profile: give -p PID (repeatable) or -c 'CMD ARGS'",
            ));
        }
        let max = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(100_000);
        if self.frequency == 0 || self.frequency > max {
            return Err(Error::usage(format!(
                "--frequency {} is out of range: give 1 to {max} Hz (kernel.perf_event_max_sample_rate)",
                self.frequency
            )));
        }
        if self.off_cpu_every > 1_000_000 {
            return Err(Error::usage(format!(
                "--off-cpu-every {} is out of range: give 1 to 1000000",
                self.off_cpu_every
            )));
        }
        if !self.stack_size.is_multiple_of(8) || self.stack_size > MAX_STACK_BYTES {
            return Err(Error::usage(format!(
                "--stack-size {} is out of range: give a multiple of 8 up to {MAX_STACK_BYTES}",
                self.stack_size
            )));
        }
        Ok(())
    }

    fn stack_bytes(&self) -> u32 {
        match self.stack_size {
            0 => DEFAULT_STACK_BYTES,
            n => n,
        }
    }

    /// The samplers a profile of this kind opens (the first also records the mappings).
    fn samplings(&self) -> Vec<Sampling> {
        let switches = Sampling::Switches {
            every: self.off_cpu_every.max(1),
        };
        match self.kind {
            ProfileKind::OnCpu => vec![Sampling::CpuFrequency(self.frequency)],
            ProfileKind::OffCpu => vec![switches],
            ProfileKind::Wall => vec![Sampling::CpuPeriod(self.period_ns()), switches],
        }
    }

    /// The CPU time each on-CPU sample of a wall profile stands for.
    fn period_ns(&self) -> u64 {
        1_000_000_000 / self.frequency.max(1)
    }

    /// The equivalent `perf record` command line (what a perf sidecar runs: perf record, perf
    /// script, then folding; off the CPU, `perf record -e sched:sched_switch` and perf's
    /// `sched timehist` give the waits).
    pub fn perf_record_command(&self) -> String {
        let mut cmd = match self.kind {
            ProfileKind::OnCpu => format!("perf record -F {} -g", self.frequency),
            ProfileKind::OffCpu => "perf record -e sched:sched_switch --switch-events -g".into(),
            ProfileKind::Wall => format!(
                "perf record -e cpu-clock -c {} -e sched:sched_switch --switch-events -g",
                self.period_ns()
            ),
        };
        if !self.pids.is_empty() {
            let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
            cmd += &format!(" -p {}", pids.join(","));
            if let Some(d) = self.duration {
                cmd += &format!(" -- sleep {}", d.as_secs_f64());
            }
        } else if let Some(c) = &self.command {
            cmd += &format!(" -- {c}");
        }
        cmd
    }
}

/// The threads of process `pid` (`/proc/PID/task`).
fn threads_of(pid: u32) -> Result<Vec<u32>> {
    let dir = format!("/proc/{pid}/task");
    let entries = std::fs::read_dir(&dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::from(netprobe_core::Error::NoSuchProcess { pid }),
        _ => Error::io(&dir, e),
    })?;
    Ok(entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect())
}

/// How often the loop drains the ring buffers and names new addresses.
const TICK: Duration = Duration::from_millis(100);

/// Opens one sampler per kind of `o` on `tids` (the first records the mappings).
fn open_samplers(o: &ProfileOptions, tids: &[u32], enable_on_exec: bool) -> Result<Vec<Sampler>> {
    o.samplings()
        .into_iter()
        .enumerate()
        .map(|(i, sampling)| Sampler::open(tids, sampling, enable_on_exec, o.stack_bytes(), i == 0))
        .collect()
}

/// Samples the targets until the duration ends, a stop signal comes, or every target exited.
/// A `-c` command still running at the end is terminated.
pub fn record(o: &ProfileOptions) -> Result<Profile> {
    o.check()?;
    let argv = o.command.as_deref().map(split_command).transpose()?;
    let (mut child, samplers) = match &argv {
        Some(argv) => {
            let mut child = PausedChild::spawn_with_env(argv, &[], o.user.as_ref())?;
            // Opened on the paused child; they start at its execve (enable_on_exec).
            let samplers = match open_samplers(o, &[child.pid()], true) {
                Ok(s) => s,
                Err(e) => {
                    child.terminate();
                    return Err(e);
                }
            };
            (Some(child), samplers)
        }
        None => {
            let mut tids = Vec::new();
            for &pid in &o.pids {
                tids.extend(threads_of(pid)?);
            }
            (None, open_samplers(o, &tids, false)?)
        }
    };
    // The targets' roots (and a running one's mappings), then what the kernel announces: frames
    // of a process gone before its samples are named come from these.
    let recorded = RecordedMaps::new();
    let pids = child.as_ref().map_or(o.pids.clone(), |c| vec![c.pid()]);
    for pid in pids {
        if let Ok(p) = netprobe_core::process::Process::open(pid) {
            let _ = recorded.track(&p, child.is_none());
        }
    }
    let kinds: Vec<Sampling> = samplers.iter().map(Sampler::sampling).collect();
    let signals = SignalPipe::install()?;
    let start = Instant::now();
    match child.as_mut() {
        Some(c) => c.release()?,
        None => samplers.iter().for_each(Sampler::enable),
    }
    let mut namer = Namer::new();
    namer.use_recorded_maps(Some(recorded.clone()));
    let mut unwinder = SampleUnwinder::default();
    unwinder.use_recorded_maps(Some(recorded.clone()));
    let mut absorber = Absorber {
        namer,
        unwinder,
        callers: MissedCallers::default(),
        raw: RawStacks::default(),
        recorded: recorded.clone(),
        pairing: SwitchPairing::default(),
        kernel: None,
        sample_us: match o.kind {
            ProfileKind::Wall => o.period_ns() / 1000,
            _ => 0,
        },
        every: o.off_cpu_every.max(1),
        min_block_ns: o.min_block.as_nanos().min(u128::from(u64::MAX)) as u64,
    };
    let absorb = |absorber: &mut Absorber, bufs: &mut [Vec<u8>]| {
        for (kind, buf) in kinds.iter().zip(bufs.iter_mut()) {
            match kind {
                Sampling::Switches { .. } => absorber.switches(buf),
                _ => absorber.on_cpu(buf),
            }
            buf.clear();
        }
    };
    let mut bufs: Vec<Vec<u8>> = kinds.iter().map(|_| Vec::new()).collect();
    let drainer = Drainer::start(samplers).map_err(|e| Error::Io {
        path: "netprobe-drain thread".into(),
        source: e,
    })?;
    loop {
        let left = o.duration.map(|d| d.saturating_sub(start.elapsed()));
        if left == Some(Duration::ZERO) || signals.received().is_some() {
            break;
        }
        let wait = left.map_or(TICK, |l| l.min(TICK));
        let mut pfd = libc::pollfd {
            fd: signals.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, polled without waiting.
        unsafe { libc::poll(&mut pfd, 1, 0) };
        drainer.take(wait, &mut bufs);
        absorb(&mut absorber, &mut bufs);
        let gone = match child.as_mut() {
            Some(c) => c.try_wait().is_some(),
            None => o
                .pids
                .iter()
                .all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()),
        };
        if gone {
            break;
        }
    }
    let elapsed = start.elapsed();
    let end_ns = crate::backend::monotonic_ns();
    drainer.finish(&mut bufs);
    absorb(&mut absorber, &mut bufs);
    absorber.finish_waits(end_ns);
    absorber.namer.retry_unnamed(true);
    if let Some(c) = child.as_mut() {
        c.terminate();
    }
    let raw = absorber.raw;
    let mut report = Report {
        unit: match o.kind {
            ProfileKind::OnCpu => Unit::Samples,
            _ => Unit::Microseconds,
        },
        lost: raw.lost,
        throttled: raw.throttled,
        switches: raw.switches,
        cpu_samples: raw.cpu_samples,
        ..Report::default()
    };
    for ((pid, walked, reason), n) in &raw.stacks {
        let mut stack = absorber.namer.stack_unwound(*pid, walked);
        if let Some(reason) = reason {
            stack.push(FrameName::named(&off_cpu::leaf_name(reason), false, false));
        }
        report.add(stack, *n);
    }
    Ok(Profile {
        report,
        notes: absorber.namer.take_notes(),
        elapsed,
        unwinding: absorber.unwinder.cost(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_prints_the_perf_record_equivalent() {
        let o = ProfileOptions {
            pids: vec![12, 34],
            duration: Some(Duration::from_secs(10)),
            frequency: 99,
            ..Default::default()
        };
        assert_eq!(
            o.perf_record_command(),
            "perf record -F 99 -g -p 12,34 -- sleep 10"
        );
        let o = ProfileOptions {
            command: Some("./app serve".into()),
            frequency: 997,
            ..Default::default()
        };
        assert_eq!(
            o.perf_record_command(),
            "perf record -F 997 -g -- ./app serve"
        );
    }
}
