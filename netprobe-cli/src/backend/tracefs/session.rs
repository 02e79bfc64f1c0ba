//! A live session: its own instance and group, the probes of a plan, the pid filter, reading and
//! decoding hits, and teardown that leaves nothing behind.
//!
//! Start order: instance (clock, buffer, overwrite off; made on a thread of its own while the
//! caller resolves the plan when it starts one with [`PreparingInstance`]), pid filter → probes
//! (one batch of appends) → event formats, and each event's `filter` in the instance (`--filter`, see
//! `filter.rs`) → per-CPU readers → enable each event in the instance. Teardown
//! (also on every error path, and from `Drop`): disable → drain → read lost counters → close the
//! readers → `-:GROUP/EVENT` for each probe → `rmdir` the instance.

use crate::backend::tracefs::decode;
use crate::backend::tracefs::events::{
    creation_order, event_formats, probe_defs, removal_lines, ProbeSlot,
};
use crate::backend::tracefs::format::{EventFormat, PageLayout};
use crate::backend::tracefs::instance::{threads_of, threads_of_processes, Instance};
use crate::backend::tracefs::probe::{self, GroupName, ProbeDef, ProbeLine};
use crate::backend::tracefs::ringbuf::{parse_page, CpuReader, Missed};
use crate::backend::tracefs::Tracefs;
use crate::backend::PidMap;
use crate::backend::{Backend, Lost};
use crate::error::{Error, Result};
use crate::plan::{Hit, ProbePlan, UserStack};
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// How a session records.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Group and instance name (`netprobe_<PID>` for the CLI).
    pub name: GroupName,
    /// Processes to record (all their threads, and with `follow_forks` their children);
    /// `None` records every process that hits the probes.
    pub pids: Option<Vec<u32>>,
    /// Tasks the filtered ones fork or clone join the filter (`options/event-fork`).
    pub follow_forks: bool,
    /// Per-CPU ring buffer size.
    pub buffer_kb: u64,
    /// Wake the reader when a CPU buffer is this full (0: on any data).
    pub buffer_percent: u32,
}

impl SessionOptions {
    pub fn new(name: GroupName) -> SessionOptions {
        SessionOptions {
            name,
            pids: None,
            follow_forks: true,
            buffer_kb: 8192,
            buffer_percent: 0,
        }
    }
}

/// A running session.
#[derive(Debug)]
pub struct Session {
    tracefs: Tracefs,
    group: GroupName,
    options: SessionOptions,
    /// A plan was given to [`Backend::attach`] (placed or, on error, removed again).
    attached: bool,
    instance: Option<Instance>,
    /// The instance made in the background for this session, until `setup` takes it.
    preparing: Option<PreparingInstance>,
    created: Vec<ProbeDef>,
    plan: ProbePlan,
    /// Event id (`common_type`) → (which probe, format).
    /// A session has few events (one per 2,048 probes of a signature), so a scan beats hashing
    /// on every record.
    formats: Vec<(u16, ProbeSlot, EventFormat)>,
    readers: Vec<CpuReader>,
    layout: PageLayout,
    enabled: bool,
    missed_unknown: bool,
    missed_in_pages: u64,
    malformed_pages: u64,
    /// Hits read but not yet handed out (newer than the last watermark).
    pending: Vec<Pending>,
    /// Reads of the buffers so far (see [`Pending::read_in`]).
    reads: u64,
    /// Hits read so far (see [`Pending::seq`]).
    read_seq: u64,
    /// The kernel's `ftrace/user_stack` event, when the plan records user stacks.
    user_stack_format: Option<EventFormat>,
    finished: bool,
    /// Inside a pid namespace: the kernel's ids of the target threads (see `pidns`).
    pid_map: Option<PidMap>,
}

/// A hit read from the buffers and not handed out yet.
#[derive(Debug)]
struct Pending {
    hit: Hit,
    /// The return address the probe read at the stack pointer, to put under the probed
    /// instruction when the stack record comes (`ProbePlan::record_user_stacks`).
    return_address: Option<u64>,
    /// The plan records stacks and this hit's has not come yet.
    awaiting_stack: bool,
    /// The read that found it: the kernel writes a hit's stack record right after the hit, so a
    /// stack not found in the same read comes in the next one.
    read_in: u64,
    /// Its place in the order hits were read (equal times keep it, see `deliver`).
    seq: u64,
}

/// Creates the instance of a session with `opts` and sets what does not depend on its plan: the
/// clock, overwrite off, the buffer size and wake-up threshold, `record-tgid`. The kernel makes
/// this slow (`trace_clock` waits for an RCU grace period before it resets the buffers, and the
/// buffers are allocated: 30-60 ms here, BENCHMARKS.md, "Time until a probe is live"), hence
/// [`PreparingInstance`]. On error, an instance it created is removed.
fn prepare_instance(tracefs: &Tracefs, opts: &SessionOptions) -> Result<Instance> {
    let inst = Instance::create(tracefs, &opts.name)?;
    let set = || -> Result<()> {
        inst.set_clock("mono")?;
        inst.set_overwrite(false)?;
        inst.set_buffer_size_kb(opts.buffer_kb)?;
        inst.set_buffer_percent(opts.buffer_percent)?;
        // The kernel then keeps a tid → tgid table (`saved_tgids`) that outlives short processes;
        // best effort: output falls back to /proc.
        let _ = inst.write("options/record-tgid", "1");
        Ok(())
    };
    match set() {
        Ok(()) => Ok(inst),
        Err(e) => {
            // The error that stopped the start matters more than a failed removal.
            let _ = crate::backend::tracefs::instance::remove_dir(inst.dir());
            Err(e)
        }
    }
}

/// A session's instance being created and set up on a thread of its own
/// (`prepare_instance`), so that the kernel's waits overlap the caller's work (resolving the
/// plan). [`Session::start_prepared`] takes it over; dropped before that, it waits for the
/// thread and removes the instance it made, so nothing is left whatever stops the caller.
#[derive(Debug)]
pub struct PreparingInstance {
    state: Option<Preparing>,
}

#[derive(Debug)]
enum Preparing {
    Thread(std::thread::JoinHandle<Result<Instance>>),
    /// No thread could be started: made in place.
    Made(Result<Instance>),
}

impl PreparingInstance {
    /// Starts creating the instance of a session with `opts` (`opts.pids` is not used: the pid
    /// filter is set when the session starts). Errors are reported when the session starts
    /// ([`Session::start_prepared`]).
    pub fn begin(tracefs: &Tracefs, opts: &SessionOptions) -> PreparingInstance {
        let state = match std::thread::Builder::new()
            .name("netprobe-inst".into())
            .spawn({
                let (tracefs, opts) = (tracefs.clone(), opts.clone());
                move || prepare_instance(&tracefs, &opts)
            }) {
            Ok(thread) => Preparing::Thread(thread),
            Err(_) => Preparing::Made(prepare_instance(tracefs, opts)),
        };
        PreparingInstance { state: Some(state) }
    }

    /// The instance once it is ready; the error that stopped it otherwise (nothing left).
    fn finish(mut self) -> Result<Instance> {
        match self.state.take() {
            Some(Preparing::Thread(t)) => match t.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Some(Preparing::Made(result)) => result,
            None => Err(Error::Usage(
                "internal: the instance was taken twice".into(),
            )),
        }
    }
}

impl Drop for PreparingInstance {
    fn drop(&mut self) {
        let made = match self.state.take() {
            Some(Preparing::Thread(t)) => t.join().ok(),
            Some(Preparing::Made(result)) => Some(result),
            None => None,
        };
        if let Some(Ok(inst)) = made {
            let _ = inst.remove();
        }
    }
}

/// Pages read from each CPU's buffer before the hits decoded from them are handed out (64 pages:
/// a few thousand hits, a few hundred KiB decoded).
const PAGES_PER_CHUNK: usize = 64;

/// Chunks one [`Session::drain`] reads at most (4,096 pages per CPU in all).
const MAX_CHUNKS_PER_DRAIN: usize = 64;

impl Session {
    /// A session that records nothing yet: [`Backend::attach`] places a plan. Creates nothing.
    pub fn new(tracefs: &Tracefs, opts: &SessionOptions) -> Session {
        Session {
            tracefs: tracefs.clone(),
            group: opts.name.clone(),
            options: opts.clone(),
            attached: false,
            instance: None,
            preparing: None,
            created: Vec::new(),
            plan: ProbePlan::default(),
            formats: Vec::new(),
            readers: Vec::new(),
            layout: PageLayout::X86_64,
            enabled: false,
            missed_unknown: false,
            missed_in_pages: 0,
            malformed_pages: 0,
            pending: Vec::new(),
            reads: 0,
            read_seq: 0,
            user_stack_format: None,
            finished: false,
            pid_map: None,
        }
    }

    /// Places the plan's probes and starts recording ([`Session::new`], then
    /// [`Backend::attach`]). On error, everything created so far is removed before returning.
    ///
    /// Takes only a plan the probe-safety gate approved (`crate::gate`).
    pub fn start(
        tracefs: &Tracefs,
        opts: &SessionOptions,
        plan: crate::gate::CheckedPlan,
    ) -> Result<Session> {
        let mut s = Session::new(tracefs, opts);
        s.attach(plan)?;
        Ok(s)
    }

    /// [`Session::start`] with the instance `preparing` creates for `opts` (in the background
    /// while the caller resolved the plan). An instance it made is this session's from then on:
    /// removed with it, or on error.
    pub fn start_prepared(
        tracefs: &Tracefs,
        opts: &SessionOptions,
        plan: crate::gate::CheckedPlan,
        preparing: PreparingInstance,
    ) -> Result<Session> {
        let mut s = Session::new(tracefs, opts);
        s.preparing = Some(preparing);
        s.attach(plan)?;
        Ok(s)
    }

    fn setup(&mut self, opts: &SessionOptions, defs: Vec<ProbeDef>) -> Result<()> {
        let inst = match self.preparing.take() {
            Some(p) => p.finish()?,
            None => prepare_instance(&self.tracefs, opts)?,
        };
        self.instance = Some(inst);
        let inst = self.instance.as_ref().expect("just set");
        if let Some(pids) = &opts.pids {
            inst.set_event_fork(opts.follow_forks)?;
            if netprobe_core::pid_namespace::sees_global_pids() {
                filter_pids(inst, pids)?;
            } else {
                // set_event_pid holds the kernel's global pids, which our namespace cannot name.
                let map = crate::backend::tracefs::pidns::calibrate(inst, pids)?;
                inst.set_event_pids(&map.globals())?;
                self.pid_map = Some(map);
            }
        }
        if self.plan.user_stacks {
            // The kernel then writes a `user_stack` record after each event of the instance,
            // into the same per-CPU buffer (kernel `Documentation/trace/ftrace.rst`, "trace
            // options", `userstacktrace`).
            self.user_stack_format = Some(EventFormat::parse(
                &self.tracefs.read("events/ftrace/user_stack/format")?,
            )?);
            inst.write("options/userstacktrace", "1")?;
        }
        let lines: Vec<ProbeLine> = creation_order(&defs)
            .into_iter()
            .map(ProbeLine::Add)
            .collect();
        let result = probe::append_lines(&self.tracefs, &lines);
        // Whatever got created (all, or those before a refused line) is ours to remove.
        let existing = probe::list_events(&self.tracefs, &self.group).unwrap_or_default();
        self.created = defs
            .iter()
            .filter(|d| existing.contains(d.event()))
            .cloned()
            .collect();
        result?;
        for (event, f, slot) in event_formats(&self.tracefs, &self.group, &self.plan)? {
            // Before the event is enabled, so no unfiltered hit is ever recorded.
            if let Some(filter) = &event.filter {
                super::filter::set_instance_filter(inst, &self.group, &event.name, filter)?;
            }
            self.formats.push((f.id, slot, f));
        }
        let subbuf = inst
            .read("buffer_subbuf_size_kb")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map(|kb| kb * 1024);
        self.layout = PageLayout::parse(&self.tracefs.read("events/header_page")?, subbuf)?;
        for cpu in inst.cpus()? {
            self.readers
                .push(CpuReader::open(inst.dir(), cpu, self.layout.page_size)?);
        }
        self.enabled = true;
        let mut enabled = std::collections::HashSet::new();
        for d in &defs {
            if !enabled.insert(d.event().clone()) {
                continue; // a shared event: enabled with its first probe
            }
            if let Err(e) = inst.enable_event(&self.group, d.event(), true) {
                let members: Vec<String> = defs
                    .iter()
                    .filter(|o| o.event() == d.event())
                    .map(|o| format!("{}:{}", o.path().as_str(), o.offset()))
                    .collect();
                return Err(match e {
                    Error::Io { source, .. } => Error::EnableFailed {
                        event: d.event().to_string(),
                        location: if members.len() == 1 {
                            members[0].clone()
                        } else {
                            format!("one of {}", members.join(", "))
                        },
                        reason: format!(
                            "{source}: the offset is probably not the start of an instruction in an executable segment; check it with `netprobe offsets`"
                        ),
                    },
                    e => e,
                });
            }
        }
        Ok(())
    }

    pub fn plan(&self) -> &ProbePlan {
        &self.plan
    }

    pub fn group(&self) -> &GroupName {
        &self.group
    }

    /// The probe lines in effect.
    pub fn probes(&self) -> &[ProbeDef] {
        &self.created
    }

    /// Descriptors to poll for readable data.
    pub fn reader_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.readers.iter().map(|r| r.fd()).collect()
    }

    /// Reads every page available now from every CPU and hands the decoded hits to `sink` in time
    /// order across CPUs. Returns the number of hits handed out.
    ///
    /// Each CPU has its own buffer, so a thread that migrates can leave its entry on one CPU and
    /// its return on another; hits newer than the moment this call started are held back until the
    /// next call (or [`Session::finish`]), when every CPU has been read past them.
    ///
    /// A backlog is read and handed out in chunks of at most [`PAGES_PER_CHUNK`] pages per CPU,
    /// so the hits decoded at once (about 200 bytes each) stay few: decoding a whole ring
    /// buffer's backlog in one go (after netprobe was kept off the CPU for seconds) raised the
    /// resident memory by tens of MB, which the allocator kept.
    pub fn drain(&mut self, sink: impl FnMut(&ProbePlan, Hit)) -> Result<u64> {
        let watermark = crate::backend::monotonic_ns();
        self.read_in_chunks(Some(watermark), sink)
    }

    /// Reads the CPUs' buffers a chunk at a time and hands out, after each chunk, the hits up to
    /// the time every CPU has been read past (and not past `watermark`; all that is left at the
    /// end when it is `None`, after reading every buffer to its end). A CPU whose hits read so
    /// far reach further in time than another's waits for it, so what is held back stays about
    /// a chunk. Returns the number of hits handed out.
    fn read_in_chunks(
        &mut self,
        watermark: Option<u64>,
        mut sink: impl FnMut(&ProbePlan, Hit),
    ) -> Result<u64> {
        // Per CPU: `Some(t)` while it has more (t: just before the last hit read from it),
        // `None` once read to its end.
        let mut frontier: Vec<Option<u64>> = vec![Some(0); self.readers.len()];
        let mut delivered = 0;
        let mut chunks = 0;
        loop {
            self.read_chunk(&mut frontier)?;
            chunks += 1;
            let cut = frontier.iter().flatten().min().copied();
            let Some(cut) = cut else { break };
            delivered += self.deliver(Some(watermark.map_or(cut, |w| cut.min(w))), &mut sink);
            // Bounded: a busy CPU must not starve the others or the signal check.
            if watermark.is_some() && chunks >= MAX_CHUNKS_PER_DRAIN {
                return Ok(delivered);
            }
        }
        delivered += self.deliver(watermark, sink);
        Ok(delivered)
    }

    /// Reads at most [`PAGES_PER_CHUNK`] pages from each CPU that still has some and is not
    /// ahead of another in time (see [`Session::read_in_chunks`]), updating `frontier`.
    fn read_chunk(&mut self, frontier: &mut [Option<u64>]) -> Result<()> {
        self.reads += 1;
        let behind = frontier.iter().flatten().min().copied();
        let layout = self.layout;
        // Disjoint borrows: each page is decoded straight from the reader's page buffer, with no
        // copy of its records (at ~1M hits/s a copy per record was the reader's largest cost).
        let Session {
            readers,
            formats,
            plan,
            pending,
            user_stack_format,
            missed_in_pages,
            missed_unknown,
            malformed_pages,
            reads,
            read_seq,
            ..
        } = self;
        let stack_id = user_stack_format.as_ref().map(|f| f.id);
        for (r, front) in readers.iter_mut().zip(frontier.iter_mut()) {
            if front.is_none() || *front > behind {
                continue;
            }
            let before = pending.len();
            let mut pages = 0;
            while pages < PAGES_PER_CHUNK {
                let Some(page) = r.read_page()? else { break };
                pages += 1;
                let summary = parse_page(&layout, page, |rec| {
                    let (ts, data) = (rec.ts, rec.data);
                    let Some(id) = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
                        return;
                    };
                    if Some(id) == stack_id {
                        if let Some(rec) = user_stack_format
                            .as_ref()
                            .and_then(|f| decode::user_stack(f, data))
                        {
                            attach_stack(pending, rec);
                        }
                        return;
                    }
                    let Some((_, slot, format)) = formats.iter().find(|(fid, _, _)| *fid == id)
                    else {
                        return;
                    };
                    let Some(probe) = slot.probe(data) else {
                        return;
                    };
                    if let Some(hit) = decode::decode(plan, probe, format, ts, data) {
                        let return_address = plan
                            .probes
                            .get(probe)
                            .and_then(|kp| decode::return_address(kp, format, data));
                        pending.push(Pending {
                            hit,
                            return_address,
                            awaiting_stack: plan.user_stacks,
                            read_in: *reads,
                            seq: *read_seq,
                        });
                        *read_seq += 1;
                    }
                });
                match summary {
                    Ok(s) => match s.missed {
                        Missed::None => {}
                        Missed::Count(c) => *missed_in_pages += c,
                        Missed::Unknown => *missed_unknown = true,
                    },
                    Err(_) => *malformed_pages += 1,
                }
            }
            *front = (pages == PAGES_PER_CHUNK).then(|| match pending.get(before..) {
                Some([.., p]) => p.hit.ts_ns.saturating_sub(1),
                // No hit in a whole chunk: keep the CPU's place.
                _ => front.unwrap_or(0),
            });
        }
        Ok(())
    }

    /// Hands out pending hits up to `watermark` (all when `None`), oldest first.
    ///
    /// A hit whose stack record was not read yet waits for one more read (the kernel writes it
    /// just after the hit, so it can miss the read that found the hit).
    fn deliver(&mut self, watermark: Option<u64>, mut sink: impl FnMut(&ProbePlan, Hit)) -> u64 {
        // Equal times keep their reading order; an unstable sort allocates nothing (the stable
        // sort's buffer of half the backlog, fresh on every read, cost a page fault per page).
        self.pending.sort_unstable_by_key(|p| (p.hit.ts_ns, p.seq));
        let cut = match watermark {
            Some(w) => {
                let by_time = self.pending.partition_point(|p| p.hit.ts_ns <= w);
                let reads = self.reads;
                self.pending[..by_time]
                    .iter()
                    .position(|p| p.awaiting_stack && p.read_in == reads)
                    .unwrap_or(by_time)
            }
            None => self.pending.len(),
        };
        for p in self.pending.drain(..cut) {
            sink(&self.plan, p.hit);
        }
        cut as u64
    }

    /// Stops recording (new hits are no longer stored; those in the buffers can still be drained).
    pub fn disable(&mut self) -> Result<()> {
        if self.enabled {
            if let Some(inst) = &self.instance {
                inst.enable_group(&self.group, false)?;
            }
            self.enabled = false;
        }
        Ok(())
    }

    /// Events lost so far (ring buffer full, or pages that did not parse).
    pub fn lost(&self) -> Lost {
        let mut counted = 0u64;
        if let Some(inst) = &self.instance {
            for r in &self.readers {
                if let Ok(s) = inst.cpu_stats(r.cpu) {
                    counted = counted.saturating_add(s.lost());
                }
            }
        }
        Lost {
            counted: counted.max(self.missed_in_pages),
            unknown_amount: (self.missed_unknown && counted == 0) || self.malformed_pages > 0,
        }
    }

    /// Stops, drains into `sink`, and removes everything. Returns the lost-event count.
    pub fn finish(mut self, sink: impl FnMut(&ProbePlan, Hit)) -> Result<Lost> {
        let lost = self.stop_and_drain(sink)?;
        self.teardown()?;
        Ok(lost)
    }

    /// Stops recording and delivers every hit still buffered; returns what was lost. The probes
    /// stay registered (but record nothing) until [`Session::close`] or drop: results can be
    /// printed before the slow part of the teardown (disabling uprobe events costs the kernel a
    /// synchronization per event).
    pub fn stop_and_drain(&mut self, sink: impl FnMut(&ProbePlan, Hit)) -> Result<Lost> {
        match &self.instance {
            Some(inst) => inst.set_tracing_on(false)?,
            None => self.disable()?,
        }
        self.read_in_chunks(None, sink)?;
        Ok(self.lost())
    }

    /// Inside a pid namespace, the kernel ids of the target threads that hits carry, mapped to
    /// ours; `None` where netprobe sees the kernel's ids directly.
    pub fn pid_map(&self) -> Option<&PidMap> {
        self.pid_map.as_ref()
    }

    /// Disables and removes the probes and the instance.
    pub fn close(mut self) -> Result<()> {
        self.teardown()
    }

    /// Removes probes and instance; idempotent.
    fn teardown(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.readers.clear();
        // Removing the instance disables every event enabled in it and then waits for one grace
        // period for all of them (`event_trace_del_tracer` in kernel/trace/trace_events.c):
        // disabling the events first would wait for another one (~120 ms here, per event of at
        // most 2,048 probes). When it cannot go yet (a file of it still open), the events are
        // disabled one by one as before, and it is removed after the probes.
        if let Some(inst) = &self.instance {
            if crate::backend::tracefs::instance::remove_dir(inst.dir()).is_ok() {
                self.instance = None;
                self.enabled = false;
            }
        }
        let mut first_err = self.disable().err();
        let removals: Vec<ProbeLine> = removal_lines(&self.created);
        // A probe still referenced by a dying reader can be busy for a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match probe::append_lines(&self.tracefs, &removals) {
                Ok(()) => break,
                Err(e) => {
                    // Retry only what is still there.
                    let left = probe::list_events(&self.tracefs, &self.group).unwrap_or_default();
                    if left.is_empty() {
                        break;
                    }
                    if Instant::now() >= deadline {
                        first_err.get_or_insert(e);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    let still: Vec<ProbeLine> = removal_lines(
                        &self
                            .created
                            .iter()
                            .filter(|d| left.contains(d.event()))
                            .cloned()
                            .collect::<Vec<_>>(),
                    );
                    if let Err(e) = probe::append_lines(&self.tracefs, &still) {
                        if Instant::now() >= deadline {
                            first_err.get_or_insert(e);
                            break;
                        }
                    } else {
                        break;
                    }
                }
            }
        }
        if let Some(inst) = self.instance.take() {
            let dir = inst.dir().to_path_buf();
            let deadline = Instant::now() + Duration::from_secs(2);
            loop {
                match crate::backend::tracefs::instance::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e @ Error::Busy { .. }) if Instant::now() < deadline => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => {
                        first_err.get_or_insert(e);
                        break;
                    }
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

impl Backend for Session {
    fn attach(&mut self, plan: crate::gate::CheckedPlan) -> Result<()> {
        if self.attached {
            return Err(Error::Usage(format!(
                "session {} already records a plan; start another session",
                self.group
            )));
        }
        self.attached = true;
        self.plan = plan.into_inner();
        let opts = self.options.clone();
        let result = probe_defs(&self.plan, &opts.name).and_then(|defs| self.setup(&opts, defs));
        if let Err(e) = result {
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
        self.reader_fds()
    }

    fn read(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<u64> {
        self.drain(sink)
    }

    fn lost(&self) -> Lost {
        Session::lost(self)
    }

    fn stop(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<Lost> {
        if !self.attached || self.finished {
            return Ok(Lost::default());
        }
        self.stop_and_drain(sink)
    }

    fn detach(&mut self) -> Result<()> {
        self.teardown()
    }

    fn placed(&self) -> usize {
        self.created.len()
    }

    fn pid_map(&self) -> Option<&PidMap> {
        self.pid_map.as_ref()
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
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Gives the stack of `rec` to the latest hit of its thread still waiting for one: the kernel
/// writes it right after that hit in the same CPU's buffer (`ftrace_trace_userstack`, called
/// from `trace_buffer_unlock_commit_regs` in `kernel/trace/trace.c`). Restores the caller the
/// walk misses at a function's entry or RET (`ProbePlan::record_user_stacks`).
fn attach_stack(pending: &mut [Pending], rec: decode::UserStackRecord) {
    let Some(p) = pending
        .iter_mut()
        .rev()
        .find(|p| p.awaiting_stack && p.hit.tid == rec.tid)
    else {
        return;
    };
    p.awaiting_stack = false;
    p.hit.user_stack = Some(merge_stack(rec, p.return_address));
}

/// The user stack from a `user_stack` record and the return address the probe read at the stack
/// pointer: that address goes under the probed instruction, always.
///
/// The probe reads it only where the walk cannot have it (see `ProbePlan::record_user_stacks`):
/// the kernel's walk starts at the base pointer, which there still names the caller's frame, so
/// its first return address is the caller's caller's. Comparing values cannot tell: in a direct
/// recursion every frame returns to the same address (a C `rec(d)` calling `rec(d - 1)`, probed
/// at its first byte with `userstacktrace` on, records `rec, main+…, libc` for `rec(2)` called
/// by `rec(3)`, which `main` called: the `rec(3)` frame is missing though its return address
/// equals the next one's).
fn merge_stack(rec: decode::UserStackRecord, return_address: Option<u64>) -> UserStack {
    let mut addrs = rec.addrs;
    if let Some(ra) = return_address.filter(|&ra| ra != 0) {
        if !addrs.is_empty() {
            addrs.insert(1, ra);
        }
    }
    UserStack {
        pid: rec.pid,
        addrs,
        kernel_limit: rec.full,
    }
}

/// Puts every thread of `pids` into the instance's pid filter. Threads created while we list them
/// are caught by a second pass (with event-fork on, threads created after their parent is in the
/// filter join it by themselves).
fn filter_pids(inst: &Instance, pids: &[u32]) -> Result<()> {
    let mut tids = threads_of_processes(pids);
    inst.set_event_pids(&tids)?;
    for _ in 0..3 {
        let mut new: Vec<u32> = pids
            .iter()
            .flat_map(|&p| threads_of(p))
            .filter(|t| !tids.contains(t))
            .collect();
        if new.is_empty() {
            break;
        }
        new.sort_unstable();
        new.dedup();
        inst.add_event_pids(&new)?;
        tids.extend(new);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FunctionId, Role};

    fn record(tid: u32, addrs: &[u64], full: bool) -> decode::UserStackRecord {
        decode::UserStackRecord {
            tid,
            pid: 7,
            addrs: addrs.to_vec(),
            full,
        }
    }

    fn pending(tid: u32, ra: Option<u64>) -> Pending {
        Pending {
            hit: Hit {
                ts_ns: 0,
                tid,
                pid: None,
                probe: 0,
                function: FunctionId(0),
                role: Role::Entry,
                args: vec![],
                pair_key: 0,
                comm: None,
                user_stack: None,
            },
            return_address: ra,
            awaiting_stack: true,
            read_in: 1,
            seq: 0,
        }
    }

    /// The caller the walk missed goes under the probed instruction, even when it returns to the
    /// same address as the next frame.
    #[test]
    fn the_return_address_restores_the_missed_caller() {
        let s = merge_stack(record(1, &[0x1139, 0x1176, 0x11c1], false), Some(0x115d));
        assert_eq!(s.addrs, vec![0x1139, 0x115d, 0x1176, 0x11c1]);
        // A direct recursion: the caller returns where its own caller does, and is restored too.
        let s = merge_stack(record(1, &[0x1139, 0x115d, 0x1176], true), Some(0x115d));
        assert_eq!(s.addrs, vec![0x1139, 0x115d, 0x115d, 0x1176]);
        assert!(s.kernel_limit);
        let s = merge_stack(record(1, &[0x1139, 0x1176], false), None);
        assert_eq!(s.addrs, vec![0x1139, 0x1176]);
    }

    /// A stack record goes to the latest hit of its thread still waiting for one.
    #[test]
    fn stacks_attach_to_the_latest_waiting_hit_of_their_thread() {
        let mut p = vec![pending(1, None), pending(2, None), pending(1, Some(0x50))];
        attach_stack(&mut p, record(1, &[0x10, 0x20], false));
        assert_eq!(
            p[2].hit.user_stack.as_ref().unwrap().addrs,
            vec![0x10, 0x50, 0x20]
        );
        assert!(p[0].hit.user_stack.is_none() && p[1].hit.user_stack.is_none());
        attach_stack(&mut p, record(1, &[0x11], false));
        assert_eq!(p[0].hit.user_stack.as_ref().unwrap().addrs, vec![0x11]);
        // No waiting hit of that thread: dropped.
        attach_stack(&mut p, record(9, &[0x12], false));
        assert!(p[1].hit.user_stack.is_none());
    }
}
