//! netprobe's uprobe events opened as perf events on the target tasks, so the kernel installs
//! their breakpoints in the targets' memory alone.
//!
//! Why this scopes: a uprobe consumer with a filter is asked, for every process that maps the
//! probed file, whether it wants the breakpoint there (`filter_chain` in
//! `kernel/events/uprobes.c`). A uprobe event enabled in a tracefs instance has no filter and is
//! installed in every such process; its hits are dropped after the trap when the instance's
//! `set_event_pid` does not list the task. A perf event opened on a task adds that task's memory
//! to the event's filter (`uprobe_perf_open` / `__uprobe_perf_filter` in
//! `kernel/trace/trace_uprobe.c`), and a uprobe event that only perf uses installs its
//! breakpoints only in memories the filter names: other processes never trap.
//!
//! Layout (the one `perf record -p` and `perf stat -p` use): every thread of every target gets
//! one event per kernel event, `inherit`ed so that the threads and processes it starts later are
//! recorded too (they inherit the event when they are cloned). Sampling events are opened per
//! (thread, CPU), because the kernel refuses to map the buffer of an inherited per-thread event
//! that is not bound to a CPU (`perf_mmap` in `kernel/events/core.c`); per CPU, a dummy event owns
//! a ring buffer and the probe events write into it (`PERF_EVENT_IOC_SET_OUTPUT`), so any kernel
//! event can be closed alone ([`TaskEvents::close_event`]). Counting events need
//! no buffer: one per thread on any CPU, read with `read(2)` (a parent event's count includes its
//! inherited children's, `perf_event_read_value`).

use crate::backend::perf_event::ring::Ring;
use crate::backend::perf_event::{open_error, open_event};
use crate::error::{Error, Result};
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, OwnedFd};

/// How the events record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recording {
    /// A record per hit into per-CPU ring buffers.
    Sampled {
        /// Each record carries the user call chain (`PERF_SAMPLE_CALLCHAIN`).
        callchain: bool,
        /// With `callchain`, bytes of the user stack each record copies with the user
        /// registers (`PERF_SAMPLE_REGS_USER | STACK_USER`), for unwinding without frame
        /// pointers; 0: none.
        stack_copy: u32,
        /// Data pages of each CPU's buffer (a power of two).
        data_pages: usize,
        /// Wake the reader when this many bytes are waiting (0: on every record).
        wakeup_bytes: u32,
    },
    /// A count per event and thread, no record.
    Counted,
}

/// One kernel event to open: its id (`common_type`, the `id` line of its tracefs `format`) and
/// the text of its filter (`--filter`), if any.
#[derive(Clone, Debug)]
pub struct EventSpec {
    pub id: u64,
    pub filter: Option<String>,
    /// The event's name and the places of its probes, for errors.
    pub name: String,
    pub location: String,
}

/// The `perf_event_attr` of a kernel event recorded as `how`; `track`: it also records its
/// task's mappings, forks and execs when stacks are recorded
/// ([`crate::backend::perf_event::sideband`]).
fn attr(
    id: u64,
    how: Recording,
    enable_on_exec: bool,
    track: bool,
) -> sys::bindings::perf_event_attr {
    let mut a = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: id,
        ..Default::default()
    };
    a.set_disabled(1);
    a.set_inherit(1);
    // Uprobe hits happen in user mode, which `exclude_kernel` keeps (`perf_tp_event_match` in
    // `kernel/events/core.c`); it spares the check for kernel access that
    // `kernel.perf_event_paranoid` >= 2 makes without CAP_PERFMON.
    a.set_exclude_kernel(1);
    a.set_enable_on_exec(u64::from(enable_on_exec));
    if let Recording::Sampled {
        callchain,
        stack_copy,
        wakeup_bytes,
        ..
    } = how
    {
        let mut sample = sys::bindings::PERF_SAMPLE_TID
            | sys::bindings::PERF_SAMPLE_TIME
            | sys::bindings::PERF_SAMPLE_RAW;
        if callchain {
            sample |= sys::bindings::PERF_SAMPLE_CALLCHAIN;
            a.set_exclude_callchain_kernel(1);
            if track {
                crate::backend::perf_event::sideband::track(&mut a);
            }
            if stack_copy > 0 {
                // The uprobe PMU's tracepoint events take the same sample bits as profile's.
                sample |=
                    sys::bindings::PERF_SAMPLE_REGS_USER | sys::bindings::PERF_SAMPLE_STACK_USER;
                a.sample_regs_user = netprobe_core::debuginfo::PERF_REGS_MASK;
                a.sample_stack_user = stack_copy;
            }
        }
        a.sample_type = sample as u64;
        // read(2) then gives the records the kernel dropped for lack of room, for the event and
        // its inherited children, whose output goes to the parent's buffer
        // (`__perf_output_begin`): exact even when no record follows to carry the count
        // (`PERF_RECORD_LOST` is written before the next record that fits). Linux 6.0+.
        a.read_format = sys::bindings::PERF_FORMAT_LOST as u64;
        a.__bindgen_anon_1.sample_period = 1;
        // Hit times on the clock every backend stamps them with (`crate::backend::monotonic_ns`).
        a.set_use_clockid(1);
        a.clockid = libc::CLOCK_MONOTONIC;
        if wakeup_bytes > 0 {
            a.set_watermark(1);
            a.__bindgen_anon_2.wakeup_watermark = wakeup_bytes;
        } else {
            a.__bindgen_anon_2.wakeup_events = 1;
        }
    }
    a
}

/// The perf events of a session's kernel events on its target tasks.
pub struct TaskEvents {
    how: Recording,
    /// Per CPU, the buffer every sampling event on that CPU writes to, mapped from its owner.
    rings: Vec<Ring>,
    /// Every probe event's descriptor, by kernel event (the index into the specs given to `open`), with
    /// the thread it was opened on.
    by_event: Vec<Vec<(u32, OwnedFd)>>,
    /// Threads with events.
    tids: Vec<u32>,
    /// Sampling events were opened with `PERF_FORMAT_LOST`.
    lost_format: bool,
    /// Data pages of each ring (fewer than asked when the kernel's locked-memory limit allowed
    /// no more, see [`map_ring`]).
    data_pages: usize,
}

impl std::fmt::Debug for TaskEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEvents")
            .field("how", &self.how)
            .field("rings", &self.rings.len())
            .field("tids", &self.tids)
            .finish()
    }
}

impl TaskEvents {
    /// Opens (disabled) every event of `specs` on every thread of `pids`, as `how` says, with
    /// each event's filter set before anything is recorded. Threads started while the list is
    /// read are caught by reading it again until it stops growing (threads started after their
    /// creator has its events inherit them). `enable_on_exec`: the events start when the target
    /// calls execve (a `-c` command held before its exec), else on [`TaskEvents::enable`].
    ///
    /// On error every descriptor opened so far is closed.
    pub fn open(
        specs: &[EventSpec],
        pids: &[u32],
        how: Recording,
        enable_on_exec: bool,
    ) -> Result<TaskEvents> {
        raise_open_file_limit();
        let cpus: Vec<i32> = match how {
            Recording::Sampled { .. } => crate::backend::perf_event::online_cpus()?,
            Recording::Counted => vec![-1],
        };
        let mut ev = TaskEvents {
            how,
            rings: Vec::new(),
            by_event: specs.iter().map(|_| Vec::new()).collect(),
            tids: Vec::new(),
            lost_format: matches!(how, Recording::Sampled { .. }),
            data_pages: match how {
                Recording::Sampled { data_pages, .. } => data_pages,
                Recording::Counted => 0,
            },
        };
        let mut ring_of_cpu: Vec<Option<usize>> = vec![None; cpus.len()];
        loop {
            let new: Vec<u32> = crate::backend::tracefs::instance::threads_of_processes(pids)
                .into_iter()
                .filter(|t| ev.tids.binary_search(t).is_err())
                .collect();
            if new.is_empty() {
                break;
            }
            for tid in new {
                for (e, spec) in specs.iter().enumerate() {
                    // The first kernel event's perf events also track the tasks' mappings (one
                    // per task and CPU: the kernel writes a task's mmap records through the
                    // events of its own context on the CPU it runs on).
                    let mut a = attr(spec.id, how, enable_on_exec, e == 0);
                    if !ev.lost_format {
                        a.read_format = 0;
                    }
                    for (c, &cpu) in cpus.iter().enumerate() {
                        let mut opened = open_event(&mut a, tid as libc::pid_t, cpu);
                        // A kernel before 6.0 knows no PERF_FORMAT_LOST: without it, what was
                        // lost is what PERF_RECORD_LOST records say.
                        if a.read_format != 0
                            && matches!(&opened, Err(e) if e.raw_os_error() == Some(libc::EINVAL))
                        {
                            a.read_format = 0;
                            ev.lost_format = false;
                            opened = open_event(&mut a, tid as libc::pid_t, cpu);
                        }
                        let fd = match opened {
                            Ok(fd) => fd,
                            Err(err) => match err.raw_os_error() {
                                // The thread exited since it was listed: nothing to record.
                                Some(libc::ESRCH) => continue,
                                Some(libc::EACCES | libc::EPERM | libc::EMFILE) => {
                                    return Err(open_error(tid, err))
                                }
                                // The kernel registers the event's uprobes on the first open:
                                // an offset it refuses fails here (`uprobe_register`).
                                _ => {
                                    return Err(Error::EnableFailed {
                                        event: spec.name.clone(),
                                        location: spec.location.clone(),
                                        reason: format!(
                                            "{err}: the offset is probably not the start of an instruction in an executable segment; check it with `netprobe offsets`"
                                        ),
                                    })
                                }
                            },
                        };
                        if let Some(filter) = &spec.filter {
                            set_filter(&fd, filter)?;
                        }
                        if let Recording::Sampled { .. } = how {
                            let r = match ring_of_cpu[c] {
                                Some(r) => r,
                                None => {
                                    let owner = ring_owner(tid, cpu)?;
                                    let ring = map_ring(owner, &mut ev.data_pages)?;
                                    ring_of_cpu[c] = Some(ev.rings.len());
                                    ev.rings.push(ring);
                                    ev.rings.len() - 1
                                }
                            };
                            // SAFETY: both are perf event fds of this process on one CPU.
                            let rc = unsafe {
                                sys::ioctls::SET_OUTPUT(
                                    fd.as_raw_fd(),
                                    ev.rings[r].fd().as_raw_fd(),
                                )
                            };
                            if rc != 0 {
                                return Err(Error::io(
                                    "PERF_EVENT_IOC_SET_OUTPUT",
                                    std::io::Error::last_os_error(),
                                ));
                            }
                        }
                        ev.by_event[e].push((tid, fd));
                    }
                }
                // A thread that exited before any event was opened is listed anyway, so the
                // loop ends.
                let at = ev.tids.partition_point(|&t| t < tid);
                ev.tids.insert(at, tid);
            }
        }
        if ev.by_event.iter().all(Vec::is_empty) {
            return Err(Error::usage(
                "no thread to trace: every target thread exited before its probes were placed",
            ));
        }
        Ok(ev)
    }

    /// Every probe event's descriptor (the ring owners record nothing).
    fn all_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.by_event.iter().flatten().map(|(_, fd)| fd)
    }

    /// Closes the perf events of kernel event `e` (an index into the specs given to `open`): the
    /// kernel takes its breakpoints out of the targets (waiting one grace period when they were
    /// its last perf events). Its records already written stay readable.
    pub fn close_event(&mut self, e: usize) {
        if let Some(fds) = self.by_event.get_mut(e) {
            drop(std::mem::take(fds));
        }
    }

    /// Starts recording (the events of threads started since they were opened too: the ioctl
    /// reaches each event's inherited children, `perf_event_for_each_child`).
    pub fn enable(&self) {
        for fd in self.all_fds() {
            // SAFETY: an ioctl without pointer arguments on our own perf event fd.
            unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
        }
    }

    /// Stops recording; records already written stay readable.
    pub fn disable(&self) {
        for fd in self.all_fds() {
            // SAFETY: as in `enable`.
            unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
        }
    }

    /// The descriptors to poll for waiting records.
    pub fn ring_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(Ring::fd)
    }

    /// How many CPU buffers there are.
    pub fn ring_count(&self) -> usize {
        self.rings.len()
    }

    /// Appends whole records of CPU buffer `i`, about `max` bytes, to `out`; whether more wait.
    pub fn drain_ring(&mut self, i: usize, out: &mut Vec<u8>, max: usize) -> bool {
        self.rings
            .get_mut(i)
            .is_some_and(|r| r.drain_upto(out, max))
    }

    /// Records the kernel dropped so far because a buffer was full, summed over every event
    /// (`PERF_FORMAT_LOST`: `{ u64 value; u64 lost; }`); `None` when a descriptor cannot say
    /// (a kernel before 6.0 refuses the format, and [`TaskEvents::open`] opened without it).
    pub fn lost(&self) -> Option<u64> {
        if !self.lost_format {
            return None;
        }
        let mut total = 0u64;
        for fd in self.all_fds() {
            let mut v = [0u64; 2];
            // SAFETY: reading 16 bytes into a [u64; 2] from our own perf event fd.
            let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 16) };
            if n != 16 {
                return None;
            }
            total = total.saturating_add(v[1]);
        }
        Some(total)
    }

    /// The count of each kernel event so far (counting events): the sum over the threads it was
    /// opened on and their inherited children. Descriptors that cannot be read add nothing.
    pub fn counts(&self) -> Vec<u64> {
        self.by_event
            .iter()
            .map(|fds| {
                fds.iter()
                    .map(|(_, fd)| {
                        let mut v = 0u64;
                        // SAFETY: reading 8 bytes into a u64 from our own perf event fd (no
                        // read_format flags: the value alone, perf_event_open(2)).
                        let n =
                            unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
                        if n == 8 {
                            v
                        } else {
                            0
                        }
                    })
                    .sum()
            })
            .collect()
    }

    /// Data pages of each CPU's buffer, as mapped.
    pub fn data_pages(&self) -> usize {
        self.data_pages
    }

    /// Threads the events were opened on.
    pub fn tids(&self) -> &[u32] {
        &self.tids
    }

    /// Closes every descriptor. The kernel takes an event's breakpoints out of the targets when
    /// its last perf event closes, waiting one grace period for that per kernel event
    /// (`__probe_event_disable` in `kernel/trace/trace_uprobe.c`) under `event_mutex`, so the
    /// waits add up whatever thread closes; the buffers and each kernel event's descriptors are
    /// still closed on threads of their own, so a wait does not hold up the others' unmapping.
    pub fn close(self) {
        let TaskEvents {
            rings, by_event, ..
        } = self;
        std::thread::scope(|s| {
            s.spawn(move || drop(rings));
            for fds in by_event {
                if !fds.is_empty() {
                    s.spawn(move || drop(fds));
                }
            }
        });
    }
}

/// Raises the soft limit of open files to the hard one: a sampled session holds a descriptor per
/// target thread, CPU and kernel event (`perf record` raises it the same way), and the usual soft
/// limit of 1,024 is a few dozen threads on a large host. What the hard limit does not allow
/// fails with EMFILE, named with its fix (`ulimit -n`).
fn raise_open_file_limit() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer, then the same struct back.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// The event that owns a CPU's ring buffer: a software `PERF_COUNT_SW_DUMMY` event (it records
/// nothing) on thread `tid` and `cpu`, so that every probe event writes into the ring through
/// `PERF_EVENT_IOC_SET_OUTPUT` and any of them can be closed alone (an owner cannot go before
/// the ring). The buffer outlives the thread: the events writing to it hold it.
fn ring_owner(tid: u32, cpu: i32) -> Result<OwnedFd> {
    let mut a = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: sys::bindings::PERF_COUNT_SW_DUMMY as u64,
        ..Default::default()
    };
    a.set_exclude_kernel(1);
    // The kernel refuses to mix clocks in one buffer (`perf_event_set_output`).
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    open_event(&mut a, tid as libc::pid_t, cpu).map_err(|e| open_error(tid, e))
}

/// Maps `fd`'s ring buffer with `*data_pages` data pages, or as many fewer (halving, down to 8)
/// as the kernel allows: without CAP_IPC_LOCK a user may lock `kernel.perf_event_mlock_kb` per
/// CPU plus `RLIMIT_MEMLOCK` in perf buffers (`perf_mmap` in kernel/events/core.c), 516 KiB by
/// default, and refuses more with EPERM. `*data_pages` becomes what was mapped, so every CPU's
/// ring gets the same size.
fn map_ring(fd: OwnedFd, data_pages: &mut usize) -> Result<Ring> {
    let mut fd = fd;
    loop {
        match Ring::try_map(fd, *data_pages) {
            Ok(ring) => return Ok(ring),
            Err((e, back)) if e.raw_os_error() == Some(libc::EPERM) && *data_pages > 8 => {
                *data_pages /= 2;
                fd = back;
            }
            Err((e, _)) => {
                return Err(Error::usage(format!(
                    "cannot map a {} KiB perf ring buffer ({e}): lower --buffer-kb, or raise `ulimit -l` or kernel.perf_event_mlock_kb",
                    *data_pages * page_size() / 1024
                )))
            }
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as usize
}

/// Sets the filter `text` (the syntax of a tracefs event `filter` file) on a perf event
/// (`PERF_EVENT_IOC_SET_FILTER`).
fn set_filter(fd: &OwnedFd, text: &str) -> Result<()> {
    let c = std::ffi::CString::new(text)
        .map_err(|_| Error::usage("a kernel filter cannot contain a NUL byte"))?;
    // SAFETY: a NUL-terminated string that outlives the call; the kernel copies it.
    let rc = unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut libc::c_char) };
    if rc != 0 {
        return Err(Error::usage(format!(
            "the kernel refused the filter `{text}` ({}); check it with --dry-run",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}
