//! `netprobe profile`: on-CPU user stacks of processes sampled by the kernel (perf_event), named
//! by the core symbolizer (ELF, Go pclntab with inlined frames, .NET ReadyToRun, the runtime's
//! perf map for JIT code, `[unknown] (image+0xOFF)` otherwise), aggregated into a [`Report`].
//!
//! The perf_event backend (`crate::backend::perf_event`) opens the samplers and reads their ring
//! buffers (the only unsafe code of profiling); [`report`] aggregates and prints;
//! `missed_caller` puts back the caller of a sample taken before its function made its frame;
//! `unwinding` chooses, per sample, between the user-space walk of the copied stack
//! ([`crate::stacks::Unwinder`]: CFI, Go pcsp, frame pointers) and the kernel's frame-pointer
//! chain. This module runs the recording loop.

mod missed_caller;
pub mod probed;
pub mod report;
mod unwinding;

use crate::backend::perf_event::drainer::Drainer;
use crate::backend::perf_event::record::{self, Record};
use crate::backend::perf_event::{Sampler, DEFAULT_STACK_BYTES, MAX_STACK_BYTES};
use crate::error::{Error, Result};
use crate::launch::{split_command, PausedChild};
use crate::run_as::RunAs;
use crate::signals::SignalPipe;
use crate::stacks::StackNamer as Namer;
use missed_caller::MissedCallers;
use netprobe_core::debuginfo::UnwoundBy;
use netprobe_core::maps::RecordedMaps;
pub use report::{FrameName, Report};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use unwinding::SampleUnwinder;

/// Sampling frequency when none is given: perf's `-F 99` of the usual recipes (not 100, so
/// sampling does not run in lockstep with timers).
pub const DEFAULT_FREQUENCY: u64 = 99;

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

    /// The equivalent `perf record` command line (what a perf sidecar runs: perf record, perf script, then folding).
    pub fn perf_record_command(&self) -> String {
        let mut cmd = format!("perf record -F {} -g", self.frequency);
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

/// Samples by process and stack (each address with the method that found it), named at the end.
#[derive(Default)]
struct RawStacks {
    stacks: HashMap<(u32, Vec<(u64, UnwoundBy)>), u64>,
    lost: u64,
    throttled: u64,
}

fn absorb(
    buf: &[u8],
    namer: &mut Namer,
    unwinder: &mut SampleUnwinder,
    callers: &mut MissedCallers,
    raw: &mut RawStacks,
    recorded: &RecordedMaps,
) {
    for r in record::decode(buf) {
        match r {
            Record::Sample {
                pid,
                ips,
                stack,
                regs,
                ..
            } if !ips.is_empty() => {
                let walked = unwinder.stack(pid, ips, &regs, &stack, namer, callers);
                let addrs: Vec<u64> = walked.iter().map(|w| w.0).collect();
                namer.learn(pid, &addrs);
                *raw.stacks.entry((pid, walked)).or_insert(0) += 1;
            }
            Record::Lost(n) => raw.lost += n,
            Record::Throttle => raw.throttled += 1,
            Record::Sideband(s) => s.apply(recorded),
            _ => {}
        }
    }
    namer.retry_unnamed(false);
}

/// How often the loop drains the ring buffers and names new addresses.
const TICK: Duration = Duration::from_millis(100);

/// Samples the targets until the duration ends, a stop signal comes, or every target exited.
/// A `-c` command still running at the end is terminated.
pub fn record(o: &ProfileOptions) -> Result<Profile> {
    o.check()?;
    let argv = o.command.as_deref().map(split_command).transpose()?;
    let (mut child, sampler) = match &argv {
        Some(argv) => {
            let mut child = PausedChild::spawn_with_env(argv, &[], o.user.as_ref())?;
            // Opened on the paused child; they start at its execve (enable_on_exec).
            let sampler = match Sampler::open(&[child.pid()], o.frequency, true, o.stack_bytes()) {
                Ok(s) => s,
                Err(e) => {
                    child.terminate();
                    return Err(e);
                }
            };
            (Some(child), sampler)
        }
        None => {
            let mut tids = Vec::new();
            for &pid in &o.pids {
                tids.extend(threads_of(pid)?);
            }
            let sampler = Sampler::open(&tids, o.frequency, false, o.stack_bytes())?;
            (None, sampler)
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
    let signals = SignalPipe::install()?;
    let start = Instant::now();
    match child.as_mut() {
        Some(c) => c.release()?,
        None => sampler.enable(),
    }
    let mut namer = Namer::new();
    namer.use_recorded_maps(Some(recorded.clone()));
    let mut callers = MissedCallers::default();
    let mut unwinder = SampleUnwinder::default();
    unwinder.use_recorded_maps(Some(recorded.clone()));
    let mut raw = RawStacks::default();
    let mut buf = Vec::new();
    let drainer = Drainer::start(sampler).map_err(|e| Error::Io {
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
        buf.clear();
        drainer.take(wait, &mut buf);
        absorb(
            &buf,
            &mut namer,
            &mut unwinder,
            &mut callers,
            &mut raw,
            &recorded,
        );
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
    buf.clear();
    drainer.finish(&mut buf);
    absorb(
        &buf,
        &mut namer,
        &mut unwinder,
        &mut callers,
        &mut raw,
        &recorded,
    );
    namer.retry_unnamed(true);
    if let Some(c) = child.as_mut() {
        c.terminate();
    }
    let mut report = Report {
        lost: raw.lost,
        throttled: raw.throttled,
        ..Report::default()
    };
    for ((pid, walked), n) in &raw.stacks {
        report.add(namer.stack_unwound(*pid, walked), *n);
    }
    Ok(Profile {
        report,
        notes: namer.take_notes(),
        elapsed,
        unwinding: unwinder.cost(),
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
