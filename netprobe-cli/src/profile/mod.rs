//! `netprobe profile`: user stacks of processes, on the CPU (sampled by the kernel through
//! perf_event), off it ([`off_cpu`]: the time from leaving the CPU to running again, under the
//! stack the thread left with and why it left), or both in one unit (`--wall`), named by the
//! core symbolizer (ELF, Go pclntab with inlined frames, .NET ReadyToRun, the runtime's perf map
//! for JIT code, `[unknown] (image+0xOFF)` otherwise), aggregated into a [`Report`].
//!
//! The perf_event backend (`crate::backend::perf_event`) opens the samplers and reads their ring
//! buffers (the only unsafe code of profiling); [`report`] aggregates and prints; [`pprof`]
//! writes the report as pprof's protocol buffer;
//! `missed_caller` puts back the caller of a sample taken before its function made its frame;
//! `unwinding` chooses, per sample, between the user-space walk of the copied stack
//! ([`crate::stacks::Unwinder`]: CFI, Go pcsp, frame pointers) and the kernel's frame-pointer
//! chain. This module runs the recording loop.

mod absorb;
mod missed_caller;
pub mod off_cpu;
pub mod pprof;
pub mod probed;
pub mod report;
mod unwinding;

use crate::backend::perf_event::drainer::Drainer;
use crate::backend::perf_event::{Sampler, Sampling, DEFAULT_STACK_BYTES, MAX_STACK_BYTES};
use crate::error::{Error, Result};
use crate::launch::{split_command, PausedChild};
use crate::plan::{FunctionId, Hit};
use crate::run_as::RunAs;
use crate::signals::SignalPipe;
use crate::stacks::StackNamer as Namer;
use absorb::{Absorber, HeldCounts, RawStacks};
use missed_caller::MissedCallers;
use netprobe_core::maps::RecordedMaps;
use off_cpu::BlockReason;
use off_cpu::SwitchPairing;
use probed::{is_scheduler_idle, GoParks, HitFeed, ParkedInterval, WaitReasons, Windows};
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
    /// When sampling started.
    pub started: std::time::SystemTime,
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
    /// script, then folding; off the CPU, the same events as netprobe's, whose waits `perf
    /// script --show-switch-events` lists).
    pub fn perf_record_command(&self) -> String {
        let mut cmd = match self.kind {
            ProfileKind::OnCpu => format!("perf record -F {} -g", self.frequency),
            ProfileKind::OffCpu => format!(
                "perf record -e context-switches/period={}/ --switch-events -g",
                self.off_cpu_every.max(1)
            ),
            ProfileKind::Wall => format!(
                "perf record -e cpu-clock/period={}/ -e context-switches/period={}/ --switch-events -g",
                self.period_ns(),
                self.off_cpu_every.max(1)
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

/// Probes placed beside a profile by the caller (a layer above: `crate::session::ProbeFeed`):
/// `--trigger`'s function, and `runtime.gopark` for the Go goroutine view.
pub struct Probes {
    pub feed: Box<dyn HitFeed>,
    /// The feed started the `-c` command and holds it before its first instruction: the
    /// profile opens its events on this pid and lets it run ([`HitFeed::release`]).
    pub held_command: Option<u32>,
    /// Functions of the feed's plan that are `runtime.gopark`, with the program's wait reason
    /// names and calling convention: the goroutine view.
    pub go: Option<GoView>,
    /// Whether the feed's other functions are a `--trigger`: only time under them is counted.
    pub trigger: bool,
}

/// The goroutine view of a Go target's off-CPU time ([`probed::GoParks`]).
pub struct GoView {
    pub gopark: Vec<FunctionId>,
    pub reasons: WaitReasons,
    pub abi: netprobe_core::abi::go::GoAbi,
}

/// What a profile started and must let run and end.
enum Started {
    Pids,
    Child(PausedChild),
    HeldByFeed,
}

/// Samples the targets until the duration ends, a stop signal comes, or every target exited.
/// A `-c` command still running at the end is terminated. `probes`: hits of probes placed
/// beside the profile (`--trigger`, the Go goroutine view), started by the caller.
pub fn record(o: &ProfileOptions, mut probes: Option<Probes>) -> Result<Profile> {
    o.check()?;
    let argv = o.command.as_deref().map(split_command).transpose()?;
    let held = probes.as_ref().and_then(|p| p.held_command);
    let (mut started, samplers, pids) = match (&argv, held) {
        (Some(_), Some(pid)) => (
            Started::HeldByFeed,
            open_samplers(o, &[pid], true)?,
            vec![pid],
        ),
        (Some(argv), None) => {
            let mut child = PausedChild::spawn_with_env(argv, &[], o.user.as_ref())?;
            // Opened on the paused child; they start at its execve (enable_on_exec).
            let samplers = match open_samplers(o, &[child.pid()], true) {
                Ok(s) => s,
                Err(e) => {
                    child.terminate();
                    return Err(e);
                }
            };
            let pid = child.pid();
            (Started::Child(child), samplers, vec![pid])
        }
        (None, _) => {
            let mut tids = Vec::new();
            for &pid in &o.pids {
                tids.extend(threads_of(pid)?);
            }
            (
                Started::Pids,
                open_samplers(o, &tids, false)?,
                o.pids.clone(),
            )
        }
    };
    // The targets' roots (and a running one's mappings), then what the kernel announces: frames
    // of a process gone before its samples are named come from these.
    let recorded = RecordedMaps::new();
    let running = matches!(started, Started::Pids);
    for &pid in &pids {
        if let Ok(p) = netprobe_core::process::Process::open(pid) {
            let _ = recorded.track(&p, running);
        }
    }
    let kinds: Vec<Sampling> = samplers.iter().map(Sampler::sampling).collect();
    let signals = SignalPipe::install()?;
    let start = Instant::now();
    let wall_start = std::time::SystemTime::now();
    let start_ns = crate::backend::monotonic_ns();
    match &mut started {
        Started::Child(c) => c.release()?,
        Started::HeldByFeed => {
            if let Some(p) = probes.as_mut() {
                p.feed.release();
            }
        }
        Started::Pids => samplers.iter().for_each(Sampler::enable),
    }
    let mut namer = Namer::new();
    namer.use_recorded_maps(Some(recorded.clone()));
    let mut unwinder = SampleUnwinder::default();
    unwinder.use_recorded_maps(Some(recorded.clone()));
    let trigger = probes.as_ref().is_some_and(|p| p.trigger);
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
        held: trigger.then(HeldCounts::default),
        commands: Default::default(),
        places: Default::default(),
        placer: crate::sinks::places::Places::default().learn(&o.pids),
    };
    let mut hits = HitRouter::new(probes.as_ref());
    // Chunks as drained, each with its sampler's index; a sampler's chunks of one turn are
    // read together (the switches' records are ordered by time across its rings).
    let absorb = |absorber: &mut Absorber, chunks: &[(usize, Vec<u8>)]| {
        for (i, kind) in kinds.iter().enumerate() {
            let mine: Vec<&[u8]> = chunks
                .iter()
                .filter(|(s, _)| *s == i)
                .map(|(_, c)| c.as_slice())
                .collect();
            match kind {
                Sampling::Switches { .. } => absorber.switches(&mine),
                _ => mine.iter().for_each(|c| absorber.on_cpu(c)),
            }
        }
    };
    let mut chunks: Vec<(usize, Vec<u8>)> = Vec::new();
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
        drainer.take(wait, &mut chunks);
        absorb(&mut absorber, &chunks);
        for (_, c) in chunks.drain(..) {
            drainer.recycle(c);
        }
        if let Some(p) = &probes {
            let mut got = Vec::new();
            p.feed.take(&mut got);
            absorber.parks(hits.route(got), (start_ns, u64::MAX));
        }
        let gone = match &mut started {
            Started::Child(c) => c.try_wait().is_some(),
            Started::HeldByFeed => !probes.as_ref().is_some_and(|p| p.feed.running()),
            Started::Pids => o
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
    let mut rest = Vec::new();
    drainer.finish(&mut rest);
    absorb(&mut absorber, &rest);
    absorber.finish_waits(end_ns);
    if let Some(p) = probes.take() {
        let rest = p.feed.finish()?;
        absorber.parks(hits.route(rest), (start_ns, end_ns));
        absorber.parks(hits.finish_parks(end_ns), (start_ns, end_ns));
        absorber.apply_windows(&hits.windows(end_ns));
    }
    absorber.namer.retry_unnamed(true);
    if let Started::Child(c) = &mut started {
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
        process_labels: process_labels(absorber.commands, absorber.places),
        ..Report::default()
    };
    let mut notes = Vec::new();
    let mut idle_us = 0;
    for ((pid, walked, reason), n) in &raw.stacks {
        let mut stack = absorber.namer.stack_unwound(*pid, walked);
        if let Some(reason) = reason {
            // The goroutine view: a Go thread idle in the scheduler carries no goroutine (the
            // goroutines' waits are their parks).
            let names: Vec<&str> = stack.iter().map(|f| f.name.as_str()).collect();
            if hits.go_view()
                && !matches!(reason, BlockReason::GoPark(_))
                && is_scheduler_idle(&names)
            {
                idle_us += n;
                continue;
            }
            stack.push(FrameName::named(&off_cpu::leaf_name(reason), false, false));
        }
        report.add_in(*pid, stack, *n);
    }
    if hits.go_view() {
        notes.push(format!(
            "Go goroutine view: {} parks of goroutines (runtime.gopark) counted under their own stacks; {:.1} ms of Go threads idle in the scheduler left out (without --goroutines the threads show instead)",
            raw.parks,
            idle_us as f64 / 1e3
        ));
    }
    if raw.stale > 0 {
        notes.push(format!(
            "{} waits off the CPU were left out: their switch-in records were lost to a full ring (see the warning)",
            raw.stale
        ));
    }
    notes.extend(absorber.namer.take_notes());
    Ok(Profile {
        report,
        notes,
        elapsed,
        started: wall_start,
        unwinding: absorber.unwinder.cost(),
    })
}

/// Routes a feed's hits: `runtime.gopark`'s to the goroutine view's pairing, the rest to the
/// trigger's windows.
struct HitRouter {
    gopark: Vec<FunctionId>,
    go_view: bool,
    parks: Option<GoParks>,
    trigger: Vec<Hit>,
}

impl HitRouter {
    fn new(probes: Option<&Probes>) -> HitRouter {
        let go = probes.and_then(|p| p.go.as_ref());
        HitRouter {
            gopark: go.map(|g| g.gopark.clone()).unwrap_or_default(),
            go_view: go.is_some(),
            parks: go.map(|g| GoParks::new(g.reasons.clone(), g.abi)),
            trigger: Vec::new(),
        }
    }

    fn go_view(&self) -> bool {
        self.go_view
    }

    /// Takes `hits`; the parks they close.
    fn route(&mut self, hits: Vec<Hit>) -> Vec<ParkedInterval> {
        let (parks, trigger): (Vec<Hit>, Vec<Hit>) = hits
            .into_iter()
            .partition(|h| self.gopark.contains(&h.function));
        self.trigger.extend(trigger);
        match &mut self.parks {
            Some(p) => {
                p.absorb(parks);
                p.take_closed()
            }
            None => Vec::new(),
        }
    }

    /// The parks still open at `end_ns`, closed there.
    fn finish_parks(&mut self, end_ns: u64) -> Vec<ParkedInterval> {
        self.parks
            .take()
            .map(|p| p.finish(end_ns))
            .unwrap_or_default()
    }

    /// The trigger's windows (none: an empty set, so nothing is counted, when there is a
    /// trigger that never ran; no trigger at all never asks).
    fn windows(&self, end_ns: u64) -> Windows {
        Windows::from_hits(&self.trigger, end_ns)
    }
}

/// The labels of each profiled process (pprof's sample labels): its command name, and where it
/// runs in a container, the `container`, `pod` and `namespace` Kubernetes tools use.
fn process_labels(
    commands: std::collections::HashMap<u32, Option<String>>,
    mut places: std::collections::HashMap<u32, Option<std::rc::Rc<crate::sinks::places::Place>>>,
) -> std::collections::BTreeMap<u32, Vec<(String, String)>> {
    commands
        .into_iter()
        .map(|(pid, comm)| {
            let mut labels: Vec<(String, String)> =
                comm.map(|c| ("comm".to_string(), c)).into_iter().collect();
            if let Some(p) = places.remove(&pid).flatten() {
                labels.push(("container".into(), p.container.clone()));
                if let (Some(pod), Some(ns)) = (&p.pod, &p.namespace) {
                    labels.push(("pod".into(), pod.clone()));
                    labels.push(("namespace".into(), ns.clone()));
                }
            }
            (pid, labels)
        })
        .filter(|(_, labels)| !labels.is_empty())
        .collect()
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
        let o = ProfileOptions {
            pids: vec![7],
            frequency: 99,
            kind: ProfileKind::Wall,
            ..Default::default()
        };
        assert_eq!(
            o.perf_record_command(),
            "perf record -e cpu-clock/period=10101010/ -e context-switches/period=1/ --switch-events -g -p 7"
        );
    }
}
