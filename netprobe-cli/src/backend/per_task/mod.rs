//! The backend for sessions scoped to processes (`-p`, `-c`, `--container`): the plan's probes
//! are defined as uprobe events in tracefs, as the [`super::tracefs`] backend defines them (the
//! same lines, multi-probe events, fetch-args and filters), but never enabled there; they are
//! opened as perf events on the target tasks instead ([`events`]), so their breakpoints are
//! installed in the targets' memory alone and another process that maps the same file runs at its
//! own speed (BENCHMARKS.md, "Tracing one process"). Host-wide sessions keep the tracefs backend.
//!
//! Two ways to record:
//! - sampled: a record per hit into per-CPU perf buffers, decoded with the event's tracefs
//!   `format` ([`sample`], then `tracefs::decode`), stacks from the perf call chain;
//! - counted in the kernel (`count` with nothing to read per hit: no stack, no event limit, at
//!   most [`MAX_COUNTED_PROBES`] probes): a counting perf event per probe (a filter on its tag
//!   where probes share a kernel event, with the user's `--filter`), read once per interval, no
//!   record per hit ([`Backend::read_counts`]).
//!
//! Nothing outlives the session by construction except the disabled definitions: the perf events
//! (and with them every breakpoint) go with their descriptors, however netprobe exits; the
//! definitions are removed by [`Backend::detach`], by the watchdog if netprobe is killed, or by
//! `netprobe clean`, and cost no process anything while they wait.

pub mod events;
mod owners;
pub mod sample;

use crate::backend::tracefs::decode;
use crate::backend::tracefs::events::{
    creation_order, event_formats_with, probe_defs_with, removal_lines, ProbeSlot,
    MAX_PROBES_PER_EVENT, PROBE_ID_FIELD,
};
use crate::backend::tracefs::format::EventFormat;
use crate::backend::tracefs::probe::{self, GroupName, ProbeDef, ProbeLine};
use crate::backend::tracefs::Tracefs;
use crate::backend::{Backend, Lost};
use crate::error::{Error, Result};
use crate::plan::{Hit, ProbePlan, StackCopy, UserStack};
use events::{EventSpec, Recording, TaskEvents};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

/// Bytes of records read from one CPU's buffer at a time (about 5,000 hits).
const CHUNK_BYTES: usize = 256 * 1024;

/// Pieces one read takes from each buffer at most before the event loop gets its turn again.
const MAX_CHUNKS_PER_READ: usize = 64;

/// Most probes counted in the kernel. Each has a counting perf event per thread with a filter on
/// its tag, and the kernel tests every filter of a kernel event's perf events at each hit of any
/// of its probes: measured here (two threads on `fast_tick`, libc's `str*` functions in the same
/// event), each further probe adds about 11 ns a hit (0.68 µs a hit alone, 0.75 µs with 8 probes,
/// 1.31 µs with 60), so past 16 a record per hit (~0.15 µs to write) is cheaper for the target,
/// and a larger plan is counted from records.
pub const MAX_COUNTED_PROBES: usize = 16;

/// Most probes of a session with `--max-overhead`: each gets a kernel event of its own, so that
/// taking one out takes its breakpoint out, and the kernel closes uprobe perf events one after
/// another, waiting a grace period for each (about 80 ms here): 16 detach in about 1.3 s.
pub const MAX_BUDGETED_PROBES: usize = 16;

/// How a per-task session records.
#[derive(Clone, Debug)]
pub struct TaskOptions {
    /// Group name of the definitions (`netprobe_<PID>` for the CLI).
    pub name: GroupName,
    /// Processes to record: all their threads, and what they start later.
    pub pids: Vec<u32>,
    /// Per-CPU buffer size (sampled).
    pub buffer_kb: u64,
    /// Wake the reader when a CPU buffer is this full (0: on any record).
    pub buffer_percent: u32,
    /// Record only from the targets' next execve on (a `-c` command held before its exec).
    pub enable_on_exec: bool,
    /// Count hits in the kernel instead of recording them (see the module's documentation).
    pub count_in_kernel: bool,
    /// Give each probe a kernel event of its own, so that any can be taken out alone
    /// ([`Backend::remove_probes`]; `--max-overhead`).
    pub probe_per_event: bool,
}

/// A session recording the plan's probes in the target tasks only.
#[derive(Debug)]
pub struct PerTaskSession {
    tracefs: Tracefs,
    options: TaskOptions,
    plan: ProbePlan,
    attached: bool,
    finished: bool,
    created: Vec<ProbeDef>,
    /// Per kernel event: its `common_type`, how its records name their probe, its format.
    formats: Vec<(u16, ProbeSlot, EventFormat)>,
    /// Per kernel event of a counted session: its probe and the count already handed out.
    counted: Vec<(usize, u64)>,
    /// Per kernel event: the probes it holds (in the order [`TaskEvents`] knows the events).
    event_probes: Vec<Vec<usize>>,
    events: Option<TaskEvents>,
    /// Records drained and not decoded yet, reused.
    scratch: Vec<u8>,
    /// Per CPU buffer, the hits decoded from it and not handed out yet (newer than the last
    /// watermark), in the buffer's order, which is time order.
    pending: Vec<std::collections::VecDeque<Hit>>,
    lost_records: u64,
    /// What the kernel said was lost when recording stopped (the events are closed after).
    lost_at_stop: u64,
    malformed: u64,
    /// Callchains the kernel cut at `kernel.perf_event_max_stack` entries.
    max_stack: usize,
    /// Per probe: the kernel's call chain already holds the caller under the probed instruction
    /// (see [`kernel_walk_has_caller`]).
    caller_in_chain: Vec<bool>,
    /// With stacks: the targets' mappings as the kernel announced them, so the frames of a
    /// process that exited before its hits were read are named all the same.
    recorded: netprobe_core::maps::RecordedMaps,
    /// Which process each record of a probe reached through two paths belongs to.
    owners: owners::ProbeOwners,
}

impl PerTaskSession {
    /// A session that records nothing yet: [`Backend::attach`] places a plan. Creates nothing.
    pub fn new(tracefs: &Tracefs, options: TaskOptions) -> PerTaskSession {
        let max_stack = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(127);
        PerTaskSession {
            tracefs: tracefs.clone(),
            options,
            plan: ProbePlan::default(),
            attached: false,
            finished: false,
            created: Vec::new(),
            formats: Vec::new(),
            counted: Vec::new(),
            event_probes: Vec::new(),
            events: None,
            scratch: Vec::new(),
            pending: Vec::new(),
            lost_records: 0,
            lost_at_stop: 0,
            malformed: 0,
            max_stack,
            caller_in_chain: Vec::new(),
            recorded: Default::default(),
            owners: Default::default(),
        }
    }

    /// The probe lines in effect.
    pub fn probes(&self) -> &[ProbeDef] {
        &self.created
    }

    /// Threads the probes were opened on (their later threads and children inherit them).
    pub fn tids(&self) -> &[u32] {
        self.events.as_ref().map_or(&[], |e| e.tids())
    }

    fn setup(&mut self) -> Result<()> {
        let per_event = if self.options.probe_per_event {
            1
        } else {
            MAX_PROBES_PER_EVENT
        };
        let group = self.options.name.clone();
        if self.plan.user_stacks {
            let newer = kernel_at_least(6, 12);
            self.caller_in_chain = crate::probe_bytes::instruction_bytes(&self.plan)
                .iter()
                .map(|b| newer && kernel_walk_has_caller(b))
                .collect();
            // Each target's root, and what a running one has mapped already (a command held
            // before its exec maps its program afterwards, announced by records).
            for &pid in &self.options.pids {
                if let Ok(p) = netprobe_core::process::Process::open(pid) {
                    let _ = self.recorded.track(&p, !self.options.enable_on_exec);
                }
            }
        }
        let defs = probe_defs_with(&self.plan, &group, per_event)?;
        let lines: Vec<ProbeLine> = creation_order(&defs)
            .into_iter()
            .map(ProbeLine::Add)
            .collect();
        let result = probe::append_lines(&self.tracefs, &lines);
        // Whatever got created (all, or those before a refused line) is ours to remove.
        let existing = probe::list_events(&self.tracefs, &group).unwrap_or_default();
        self.created = defs
            .iter()
            .filter(|d| existing.contains(d.event()))
            .cloned()
            .collect();
        result?;
        let mut specs = Vec::new();
        let place = |probe: usize| {
            defs.get(probe)
                .map(|d| format!("{}:{}", d.path().as_str(), d.offset()))
                .unwrap_or_default()
        };
        for (event, f, slot) in event_formats_with(&self.tracefs, &group, &self.plan, per_event)? {
            if self.options.count_in_kernel {
                // A counting perf event per probe: in a kernel event of several probes, each
                // counts its own through a filter on the probe's tag (`np_id`), so the probes
                // keep sharing one kernel event, and detaching waits one grace period per
                // kernel event, not per probe (the kernel closes uprobe perf events one after
                // another under `event_mutex`, about 80 ms each here).
                for &p in &event.probes {
                    let tag = event.tagged().then(|| format!("{PROBE_ID_FIELD} == {p}"));
                    let filter = match (&event.filter, tag) {
                        (Some(user), Some(tag)) => Some(format!("({user}) && {tag}")),
                        (user, tag) => tag.or_else(|| user.clone()),
                    };
                    specs.push(EventSpec {
                        id: u64::from(f.id),
                        filter,
                        name: event.name.to_string(),
                        location: place(p),
                    });
                    self.counted.push((p, 0));
                    self.event_probes.push(vec![p]);
                }
            } else {
                let members: Vec<String> = event.probes.iter().map(|&p| place(p)).collect();
                specs.push(EventSpec {
                    id: u64::from(f.id),
                    filter: event.filter.clone(),
                    name: event.name.to_string(),
                    location: if members.len() == 1 {
                        members[0].clone()
                    } else {
                        format!("one of {}", members.join(", "))
                    },
                });
                self.event_probes.push(event.probes.clone());
            }
            self.formats.push((f.id, slot, f));
        }
        let how = if self.options.count_in_kernel {
            Recording::Counted
        } else {
            let data_pages = data_pages(self.options.buffer_kb);
            Recording::Sampled {
                callchain: self.plan.user_stacks,
                stack_copy: if self.plan.user_stacks {
                    crate::backend::perf_event::HIT_STACK_BYTES
                } else {
                    0
                },
                data_pages,
                wakeup_bytes: (data_pages as u64
                    * page_size() as u64
                    * u64::from(self.options.buffer_percent.min(100))
                    / 100) as u32,
            }
        };
        let events =
            TaskEvents::open(&specs, &self.options.pids, how, self.options.enable_on_exec)?;
        if let Recording::Sampled { data_pages, .. } = how {
            if events.data_pages() < data_pages {
                crate::printable::eprint_line(&format!(
                    "netprobe: note: perf buffers of {} KiB per CPU instead of {} (the kernel's locked-memory limit without CAP_IPC_LOCK: kernel.perf_event_mlock_kb); hits may be lost at high rates",
                    events.data_pages() * page_size() / 1024,
                    data_pages * page_size() / 1024
                ));
            }
        }
        if !self.options.enable_on_exec {
            events.enable();
        }
        self.events = Some(events);
        Ok(())
    }

    /// Reads the records waiting now and hands out the hits older than `watermark` (all that is
    /// left when `None`) in time order across the CPUs' buffers; later ones may still be
    /// overtaken by another CPU's and wait for the next read. Returns how many were handed out.
    ///
    /// A backlog is read a piece at a time ([`CHUNK_BYTES`] of records per buffer), each buffer
    /// only while it is not ahead in time of another that still holds records, and the hits up to
    /// the time every buffer has been read past are handed out after each piece: what is decoded
    /// at once stays small (a stopped session's whole backlog, hundreds of MB of records after a
    /// burst, would otherwise be decoded in one go).
    fn read_records(
        &mut self,
        watermark: Option<u64>,
        sink: &mut dyn FnMut(&ProbePlan, Hit),
    ) -> u64 {
        let Some(rings) = self.events.as_ref().map(TaskEvents::ring_count) else {
            return 0;
        };
        if self.pending.len() < rings {
            self.pending.resize_with(rings, Default::default);
        }
        // Per buffer: `Some(t)` while it may hold more (t: the time of the last hit read from
        // it), `None` once read to its end.
        let mut frontier: Vec<Option<u64>> = vec![Some(0); rings];
        let mut delivered = 0;
        let mut chunks = 0;
        loop {
            let behind = frontier.iter().flatten().min().copied();
            for (i, front) in frontier.iter_mut().enumerate() {
                if front.is_none() || *front > behind {
                    continue;
                }
                self.scratch.clear();
                let more = match self.events.as_mut() {
                    Some(e) => e.drain_ring(i, &mut self.scratch, CHUNK_BYTES),
                    None => false,
                };
                let last = self.decode_scratch(i);
                *front = more.then(|| last.unwrap_or(front.unwrap_or(0)));
            }
            chunks += 1;
            let Some(cut) = frontier.iter().flatten().min().copied() else {
                break;
            };
            delivered += self.deliver(Some(watermark.map_or(cut, |w| cut.min(w))), sink);
            // Bounded: a busy buffer must not starve the signal check and the other work of
            // the event loop.
            if watermark.is_some() && chunks >= MAX_CHUNKS_PER_READ {
                return delivered;
            }
        }
        delivered + self.deliver(watermark, sink)
    }

    /// Decodes the records in `scratch`, read from CPU buffer `ring`, into its pending hits; the
    /// time of the last hit decoded.
    fn decode_scratch(&mut self, ring: usize) -> Option<u64> {
        let PerTaskSession {
            scratch,
            formats,
            plan,
            pending,
            lost_records,
            malformed,
            max_stack,
            caller_in_chain,
            recorded,
            owners,
            ..
        } = self;
        let mut last = None;
        let pending = pending.get_mut(ring)?;
        *malformed += sample::for_each(scratch, plan.user_stacks, |rec| match rec {
            sample::Record::Sample(s) => {
                let Some(id) = s.raw.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
                    return;
                };
                let Some((_, slot, format)) = formats.iter().find(|(fid, _, _)| *fid == id) else {
                    return;
                };
                let Some(probe) = slot.probe(s.raw) else {
                    return;
                };
                if !owners.keeps(s.pid, probe) {
                    return;
                }
                let Some(mut hit) = decode::decode(plan, probe, format, s.time, s.raw) else {
                    return;
                };
                // The record's `common_pid` is the kernel's id; perf's names the thread in our
                // pid namespace, where every id netprobe prints and looks up lives.
                if hit.pair_key == u64::from(hit.tid) {
                    hit.pair_key = u64::from(s.tid);
                }
                hit.tid = s.tid;
                hit.pid = Some(s.pid);
                if let Some(mut addrs) = s.callchain {
                    let full = addrs.len() >= *max_stack;
                    let ra = plan
                        .probes
                        .get(probe)
                        .filter(|_| !caller_in_chain.get(probe).copied().unwrap_or(false))
                        .and_then(|kp| decode::return_address(kp, format, s.raw))
                        .filter(|&ra| ra != 0);
                    if let (Some(ra), false) = (ra, addrs.is_empty()) {
                        addrs.insert(1, ra);
                    }
                    hit.user_stack = Some(UserStack {
                        pid: s.pid,
                        addrs,
                        kernel_limit: full,
                        copy: (!s.regs.is_empty() && !s.stack.is_empty()).then(|| StackCopy {
                            regs: s.regs,
                            stack: s.stack.to_vec(),
                        }),
                    });
                }
                last = Some(hit.ts_ns);
                pending.push_back(hit);
            }
            sample::Record::Lost(n) => *lost_records = lost_records.saturating_add(n),
            sample::Record::Sideband(s) => s.apply(recorded),
            sample::Record::Other => {}
        });
        last
    }

    /// Hands out the pending hits up to `watermark` (all when `None`), oldest first: a merge of
    /// the buffers' queues, each already in time order, taking the oldest head each time (equal
    /// times: the lower buffer first, each buffer's own order kept). Sorting the whole backlog
    /// instead, after every piece read, was the reader's largest cost at a million hits a
    /// second (its stable sort also allocated half the backlog each time).
    fn deliver(&mut self, watermark: Option<u64>, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> u64 {
        let limit = watermark.unwrap_or(u64::MAX);
        let mut n = 0;
        loop {
            let next = self
                .pending
                .iter()
                .enumerate()
                .filter_map(|(i, q)| q.front().map(|h| (h.ts_ns, i)))
                .filter(|&(ts, _)| ts <= limit)
                .min();
            let Some((_, i)) = next else {
                return n;
            };
            if let Some(hit) = self.pending[i].pop_front() {
                sink(&self.plan, hit);
                n += 1;
            }
        }
    }

    /// Removes the perf events and then the definitions; idempotent.
    fn teardown(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        if let Some(events) = self.events.take() {
            events.close();
        }
        let mut first_err = None;
        let removals: Vec<ProbeLine> = removal_lines(&self.created);
        // A definition whose last perf event is still being released can be busy for a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut left = removals;
        while !left.is_empty() {
            match probe::append_lines(&self.tracefs, &left) {
                Ok(()) => break,
                Err(e) => {
                    let still =
                        probe::list_events(&self.tracefs, &self.options.name).unwrap_or_default();
                    left = removal_lines(
                        &self
                            .created
                            .iter()
                            .filter(|d| still.contains(d.event()))
                            .cloned()
                            .collect::<Vec<_>>(),
                    );
                    if left.is_empty() {
                        break;
                    }
                    if Instant::now() >= deadline {
                        first_err = Some(e);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        self.finished = true;
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Whether the kernel's user call chain of a hit of a probe on the instruction `bytes` begins
/// with already holds the caller under the probed instruction. At a function's first instruction the frame-pointer
/// walk starts from the caller's frame and misses its return address; since Linux 6.12 perf adds
/// it, read at the stack pointer, when the probed instruction is `push %rbp` (`55`) or `endbr64`
/// (`f3 0f 1e fa`) (`is_uprobe_at_func_entry` in `arch/x86/events/core.c`). Elsewhere netprobe
/// puts the return address its probe read there. Bytes that could not be read say no.
fn kernel_walk_has_caller(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x55) || bytes.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa])
}

/// Whether the running kernel's release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// Data pages of a per-CPU buffer of about `buffer_kb` KiB: a power of two (perf_event_open(2)),
/// at least 8.
fn data_pages(buffer_kb: u64) -> usize {
    let pages = (buffer_kb.saturating_mul(1024) / page_size() as u64).max(8);
    let pages = usize::try_from(pages).unwrap_or(1 << 18).min(1 << 18);
    // The largest power of two not above it.
    1 << (usize::BITS - 1 - pages.leading_zeros())
}

impl Backend for PerTaskSession {
    fn attach(&mut self, plan: crate::gate::CheckedPlan) -> Result<()> {
        if self.attached {
            return Err(Error::Usage(format!(
                "session {} already records a plan; start another session",
                self.options.name
            )));
        }
        self.attached = true;
        self.plan = plan.into_inner();
        self.owners = owners::ProbeOwners::new(&self.plan);
        self.owners.learn(&self.options.pids);
        if let Err(e) = self.setup() {
            // Teardown errors are secondary to the one that stopped the start.
            let _ = self.teardown();
            return Err(e);
        }
        Ok(())
    }

    fn plan(&self) -> &ProbePlan {
        &self.plan
    }

    fn event_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.events
            .as_ref()
            .map(|e| e.ring_fds().map(|fd| fd.as_fd()).collect())
            .unwrap_or_default()
    }

    fn read(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<u64> {
        let watermark = crate::backend::monotonic_ns();
        Ok(self.read_records(Some(watermark), sink))
    }

    fn read_counts(&mut self, sink: &mut dyn FnMut(&ProbePlan, usize, u64)) -> Result<()> {
        let Some(events) = self.events.as_ref() else {
            return Ok(());
        };
        if self.counted.is_empty() {
            return Ok(());
        }
        for ((probe, seen), now) in self.counted.iter_mut().zip(events.counts()) {
            if now > *seen {
                sink(&self.plan, *probe, now - *seen);
                *seen = now;
            }
        }
        Ok(())
    }

    fn lost(&self) -> Lost {
        let kernel = self.events.as_ref().and_then(TaskEvents::lost).unwrap_or(0);
        Lost {
            counted: self.lost_records.max(kernel).max(self.lost_at_stop),
            unknown_amount: self.malformed > 0,
        }
    }

    fn stop(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<Lost> {
        if !self.attached || self.finished {
            return Ok(Lost::default());
        }
        if let Some(events) = &self.events {
            events.disable();
        }
        self.read_records(None, sink);
        let lost = Backend::lost(self);
        self.lost_at_stop = lost.counted;
        Ok(lost)
    }

    fn detach(&mut self) -> Result<()> {
        self.teardown()
    }

    fn exited_threads(&self) -> Option<Box<dyn crate::backend::ExitedThreads>> {
        Some(Box::new(
            crate::backend::tracefs::saved_tgids::SavedTgids::new(
                self.tracefs.root().to_path_buf(),
            ),
        ))
    }

    fn definitions(&self) -> Vec<String> {
        self.created.iter().map(|d| d.to_string()).collect()
    }

    fn recorded_maps(&self) -> Option<netprobe_core::maps::RecordedMaps> {
        self.plan.user_stacks.then(|| self.recorded.clone())
    }

    fn placed(&self) -> usize {
        self.created.len()
    }

    fn counts_in_kernel(&self) -> bool {
        self.options.count_in_kernel
    }

    fn remove_probes(&mut self, probes: &[usize]) -> Result<Vec<usize>> {
        let Some(events) = self.events.as_mut() else {
            return Ok(Vec::new());
        };
        let mut removed = Vec::new();
        for (e, members) in self.event_probes.iter().enumerate() {
            if members.iter().any(|p| probes.contains(p)) {
                events.close_event(e);
                removed.extend(members.iter().copied());
            }
        }
        removed.sort_unstable();
        removed.dedup();
        Ok(removed)
    }
}

impl Drop for PerTaskSession {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_adds_the_caller_at_push_rbp_and_endbr64_only() {
        assert!(kernel_walk_has_caller(&[0x55, 0x48, 0x89, 0xe5]));
        assert!(kernel_walk_has_caller(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55]));
        assert!(!kernel_walk_has_caller(&[0x48, 0x89, 0xf8]));
        assert!(!kernel_walk_has_caller(&[0xf3, 0x0f]));
        assert!(!kernel_walk_has_caller(&[]));
    }

    #[test]
    fn buffers_are_a_power_of_two_pages() {
        assert_eq!(data_pages(8192), 2048);
        assert_eq!(data_pages(1), 8);
        assert_eq!(data_pages(100), 16);
        assert_eq!(data_pages(u64::MAX), 1 << 18);
    }
}
