//! A live session: its own instance and group, the probes of a plan, the pid filter, reading and
//! decoding hits, and teardown that leaves nothing behind.
//!
//! Start order: instance (clock, buffer, overwrite off; made on a thread of its own while the
//! caller resolves the plan when it starts one with [`PreparingInstance`]), pid filter → probes
//! (one batch of appends) → event formats, and each event's `filter` in the instance (`--filter`, see
//! `filter.rs`) → per-CPU readers → enable each event in the instance. Teardown
//! (also on every error path, and from `Drop`): disable → drain → read lost counters → close the
//! readers → `-:GROUP/EVENT` for each probe → `rmdir` the instance.

mod preparing;
mod reading;

use preparing::prepare_instance;
pub use preparing::PreparingInstance;
use reading::Pending;

use crate::backend::tracefs::events::{
    creation_order, event_formats, probe_defs, removal_lines, ProbeSlot,
};
use crate::backend::tracefs::format::{EventFormat, PageLayout};
use crate::backend::tracefs::instance::{threads_of, threads_of_processes, Instance};
use crate::backend::tracefs::probe::{self, GroupName, ProbeDef, ProbeLine};
use crate::backend::tracefs::ringbuf::CpuReader;
use crate::backend::tracefs::Tracefs;
use crate::backend::PidMap;
use crate::backend::{Backend, Lost};
use crate::error::{Error, Result};
use crate::plan::{Hit, ProbePlan};
use std::os::fd::{AsFd, BorrowedFd};
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
    /// With stacks: every process's mappings as the kernel announces them, for naming the frames
    /// of a process gone before its hits are read (`None` when the kernel refused the events).
    host_mappings: Option<crate::backend::perf_event::host_mappings::HostMappings>,
}

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
            host_mappings: None,
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
            // Opened before the probes: a process's mappings precede its hits.
            self.host_mappings =
                crate::backend::perf_event::host_mappings::HostMappings::open().ok();
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
        self.host_mappings = None;
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
        let mut fds = self.reader_fds();
        if let Some(m) = &self.host_mappings {
            fds.extend(m.fds().map(|fd| fd.as_fd()));
        }
        fds
    }

    fn read(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<u64> {
        // The mappings first: those of a hit's process were announced before the hit.
        if let Some(m) = self.host_mappings.as_mut() {
            m.drain();
        }
        self.drain(sink)
    }

    fn lost(&self) -> Lost {
        Session::lost(self)
    }

    fn stop(&mut self, sink: &mut dyn FnMut(&ProbePlan, Hit)) -> Result<Lost> {
        if !self.attached || self.finished {
            return Ok(Lost::default());
        }
        if let Some(m) = self.host_mappings.as_mut() {
            m.drain();
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

    fn recorded_maps(&self) -> Option<netprobe_core::maps::RecordedMaps> {
        self.host_mappings.as_ref().map(|m| m.recorded())
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
