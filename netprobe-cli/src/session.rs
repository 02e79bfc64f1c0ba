//! A live session: its own instance and group, the probes of a plan, the pid filter, reading and
//! decoding hits, and teardown that leaves nothing behind.
//!
//! Start order: instance (clock, buffer, overwrite off, pid filter) → probes (one batch of
//! appends) → event formats → per-CPU readers → enable each event in the instance. Teardown
//! (also on every error path, and from `Drop`): disable → drain → read lost counters → close the
//! readers → `-:GROUP/EVENT` for each probe → `rmdir` the instance.

use crate::error::{Error, Result};
use crate::pidns::PidMap;
use crate::plan::{Hit, ProbeKind as PlanKind, ProbePlan, Role};
use crate::tracefs::format::{EventFormat, PageLayout};
use crate::tracefs::instance::{threads_of, Instance};
use crate::tracefs::probe::{self, EventName, GroupName, ProbeDef, ProbeKind, ProbeLine};
use crate::tracefs::ringbuf::{parse_page, CpuReader, Missed};
use crate::tracefs::Tracefs;
use std::collections::HashMap;
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

/// Events the kernel lost, and how sure we are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lost {
    /// Sum of `overrun`, `commit overrun` and `dropped events` over all CPUs.
    pub counted: u64,
    /// A page said events were lost without saying how many.
    pub unknown_amount: bool,
}

impl Lost {
    pub fn any(&self) -> bool {
        self.counted > 0 || self.unknown_amount
    }
}

/// A running session.
#[derive(Debug)]
pub struct Session {
    tracefs: Tracefs,
    group: GroupName,
    instance: Option<Instance>,
    created: Vec<ProbeDef>,
    plan: ProbePlan,
    /// Event id (`common_type`) → (probe index, format).
    formats: HashMap<u16, (usize, EventFormat)>,
    readers: Vec<CpuReader>,
    layout: PageLayout,
    enabled: bool,
    missed_unknown: bool,
    missed_in_pages: u64,
    malformed_pages: u64,
    /// Hits read but not yet handed out (newer than the last watermark).
    pending: Vec<Hit>,
    finished: bool,
    /// Inside a pid namespace: the kernel's ids of the target threads (see `pidns`).
    pid_map: Option<PidMap>,
}

/// The event name of probe `index` of the plan: `<function>_e<index>` / `_r<index>`.
pub fn event_name(plan: &ProbePlan, index: usize) -> Result<EventName> {
    let p = &plan.probes[index];
    let f = plan.function(p.function);
    let tag = match p.role {
        Role::Entry => 'e',
        Role::Return => 'r',
    };
    let base = f.symbol.as_deref().unwrap_or(&f.name);
    EventName::sanitized(base, &format!("_{tag}{index}"))
}

/// The `uprobe_events` lines of a plan in group `group`.
pub fn probe_defs(plan: &ProbePlan, group: &GroupName) -> Result<Vec<ProbeDef>> {
    (0..plan.probes.len())
        .map(|i| {
            let p = &plan.probes[i];
            ProbeDef::new(
                match p.kind {
                    PlanKind::Entry => ProbeKind::Entry,
                    PlanKind::UretProbe => ProbeKind::Return,
                },
                group.clone(),
                event_name(plan, i)?,
                &p.path,
                p.offset,
                p.fetchargs.clone(),
            )
        })
        .collect()
}

impl Session {
    /// Places the plan's probes and starts recording. On error, everything created so far is
    /// removed before returning.
    pub fn start(tracefs: &Tracefs, opts: &SessionOptions, plan: ProbePlan) -> Result<Session> {
        let defs = probe_defs(&plan, &opts.name)?;
        let mut s = Session {
            tracefs: tracefs.clone(),
            group: opts.name.clone(),
            instance: None,
            created: Vec::new(),
            plan,
            formats: HashMap::new(),
            readers: Vec::new(),
            layout: PageLayout::X86_64,
            enabled: false,
            missed_unknown: false,
            missed_in_pages: 0,
            malformed_pages: 0,
            pending: Vec::new(),
            finished: false,
            pid_map: None,
        };
        match s.setup(opts, defs) {
            Ok(()) => Ok(s),
            Err(e) => {
                // Teardown errors are secondary to the one that stopped the start.
                let _ = s.teardown();
                Err(e)
            }
        }
    }

    fn setup(&mut self, opts: &SessionOptions, defs: Vec<ProbeDef>) -> Result<()> {
        let inst = Instance::create(&self.tracefs, &opts.name)?;
        self.instance = Some(inst);
        let inst = self.instance.as_ref().expect("just set");
        inst.set_clock("mono")?;
        inst.set_overwrite(false)?;
        inst.set_buffer_size_kb(opts.buffer_kb)?;
        inst.set_buffer_percent(opts.buffer_percent)?;
        // The kernel then keeps a tid → tgid table (`saved_tgids`) that outlives short processes;
        // best effort: output falls back to /proc.
        let _ = inst.write("options/record-tgid", "1");
        if let Some(pids) = &opts.pids {
            inst.set_event_fork(opts.follow_forks)?;
            if crate::pidns::sees_global_pids() {
                filter_pids(inst, pids)?;
            } else {
                // set_event_pid holds the kernel's global pids, which our namespace cannot name.
                let map = crate::pidns::calibrate(inst, pids)?;
                inst.set_event_pids(&map.globals())?;
                self.pid_map = Some(map);
            }
        }
        let lines: Vec<ProbeLine> = defs.iter().cloned().map(ProbeLine::Add).collect();
        let result = probe::append_lines(&self.tracefs, &lines);
        // Whatever got created (all, or those before a refused line) is ours to remove.
        let existing = probe::list_events(&self.tracefs, &self.group).unwrap_or_default();
        self.created = defs
            .iter()
            .filter(|d| existing.contains(d.event()))
            .cloned()
            .collect();
        result?;
        for (i, d) in defs.iter().enumerate() {
            let text = self.tracefs.read(
                std::path::Path::new("events")
                    .join(self.group.as_str())
                    .join(d.event().as_str())
                    .join("format"),
            )?;
            let f = EventFormat::parse(&text)?;
            self.formats.insert(f.id, (i, f));
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
        for d in &defs {
            if let Err(e) = inst.enable_event(&self.group, d.event(), true) {
                return Err(match e {
                    Error::Io { source, .. } => Error::EnableFailed {
                        event: d.event().to_string(),
                        location: format!("{}:{}", d.path().as_str(), d.offset()),
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
    pub fn drain(&mut self, sink: impl FnMut(&ProbePlan, Hit)) -> Result<u64> {
        let watermark = monotonic_ns();
        self.read_all()?;
        Ok(self.deliver(Some(watermark), sink))
    }

    fn read_all(&mut self) -> Result<()> {
        let layout = self.layout;
        for r in &mut self.readers {
            // Bounded: a busy CPU must not starve the others or the signal check.
            for _ in 0..4096 {
                let Some(page) = r.read_page()? else { break };
                let mut records = Vec::new();
                let summary = parse_page(&layout, page, |rec| {
                    records.push((rec.ts, rec.data.to_vec()))
                });
                match summary {
                    Ok(s) => match s.missed {
                        Missed::None => {}
                        Missed::Count(c) => self.missed_in_pages += c,
                        Missed::Unknown => self.missed_unknown = true,
                    },
                    Err(_) => self.malformed_pages += 1,
                }
                for (ts, data) in records {
                    let Some(id) = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
                        continue;
                    };
                    let Some((probe, format)) = self.formats.get(&id) else {
                        continue;
                    };
                    if let Some(hit) = self.plan.decode(*probe, format, ts, &data) {
                        self.pending.push(hit);
                    }
                }
            }
        }
        Ok(())
    }

    /// Hands out pending hits up to `watermark` (all when `None`), oldest first.
    fn deliver(&mut self, watermark: Option<u64>, mut sink: impl FnMut(&ProbePlan, Hit)) -> u64 {
        self.pending.sort_by_key(|h| h.ts_ns);
        let cut = match watermark {
            Some(w) => self.pending.partition_point(|h| h.ts_ns <= w),
            None => self.pending.len(),
        };
        let ready: Vec<Hit> = self.pending.drain(..cut).collect();
        let n = ready.len() as u64;
        for hit in ready {
            sink(&self.plan, hit);
        }
        n
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
        self.read_all()?;
        self.deliver(None, sink);
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
        let mut first_err = self.disable().err();
        self.readers.clear();
        let removals: Vec<ProbeLine> = self.created.iter().map(|d| d.removal()).collect();
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
                    let still: Vec<ProbeLine> = self
                        .created
                        .iter()
                        .filter(|d| left.contains(d.event()))
                        .map(|d| d.removal())
                        .collect();
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
                match crate::tracefs::instance::remove_dir(&dir) {
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

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Puts every thread of `pids` into the instance's pid filter. Threads created while we list them
/// are caught by a second pass (with event-fork on, threads created after their parent is in the
/// filter join it by themselves).
fn filter_pids(inst: &Instance, pids: &[u32]) -> Result<()> {
    let mut tids: Vec<u32> = pids
        .iter()
        .flat_map(|&p| {
            let t = threads_of(p);
            if t.is_empty() {
                vec![p]
            } else {
                t
            }
        })
        .collect();
    tids.sort_unstable();
    tids.dedup();
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

/// CLOCK_MONOTONIC now, in nanoseconds (the clock of the instance's `mono` trace clock).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}
