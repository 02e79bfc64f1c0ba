//! Sampling on-CPU user stacks with `perf_event_open(2)` for `netprobe profile`: the second
//! event source next to [`super::tracefs`]. It samples instead of probing, so it is not a
//! [`super::Backend`] (which places a plan's probes); it is the one module of profiling that makes
//! system calls and touches the kernel's ring buffers. Everything it reads leaves as plain bytes
//! and is decoded by the bounds-checked [`record`] module.
//!
//! Layout (perf_event_open(2) and the kernel's `tools/perf/design.txt`): one software
//! `PERF_COUNT_SW_CPU_CLOCK` event per (thread, CPU), so it works in VMs without a PMU, sampling
//! at a frequency with `PERF_SAMPLE_IP | TID | TIME | CALLCHAIN | REGS_USER | STACK_USER`, user
//! stacks only (`exclude_kernel`, `exclude_callchain_kernel`; the kernel walks the frame
//! pointers, and the user registers and the top of the stack, [`DEFAULT_STACK_BYTES`] unless
//! asked otherwise, come along so the stack can be unwound without frame pointers, as
//! `perf record --call-graph dwarf` does). Per CPU
//! the first event owns a ring buffer and the others send theirs to it
//! (`PERF_EVENT_IOC_SET_OUTPUT`). Events are `inherit`ed, so threads (and processes) the targets
//! start later are sampled into the same buffers; the kernel refuses `mmap` of an inherited
//! per-thread event that is not bound to one CPU (`perf_mmap` in `kernel/events/core.c`), hence
//! one event per CPU. Each also records its task's mappings, forks and execs ([`sideband`]), so
//! a process gone before its samples are named is named from what it had mapped; host-wide
//! sessions get the same from one system-wide event per CPU ([`host_mappings`]).

pub mod drainer;
mod fields;
pub mod host_mappings;
pub mod record;
pub mod ring;
pub mod sideband;

use ring::Ring;

use crate::error::{Error, Result};
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Least data pages of each CPU's ring buffer (a power of two): 512 KiB, drained every 100 ms.
const MIN_DATA_PAGES: usize = 128;

/// Samples each CPU's ring buffer holds at least (sized by [`data_pages`]).
const MIN_SAMPLES_PER_RING: u64 = 64;

/// Most data pages per CPU ring (16 MiB).
const MAX_DATA_PAGES: usize = 4096;

/// Bytes of the user stack copied with each sample, from RSP up, unless `--stack-size` says
/// otherwise: perf's `--call-graph dwarf` default. A copy that ends before the outermost frame
/// ends the unwinding there (the kernel's frame-pointer chain then extends it where it can).
/// A multiple of 8 as `perf_event_open(2)` requires.
pub const DEFAULT_STACK_BYTES: u32 = 8 * 1024;

/// Bytes of the user stack each `trace --stack` / `count --stack` hit copies (per-task
/// sessions): 8 KiB, perf's `--call-graph dwarf` default; a hit copies it whatever the rate, so
/// less than a profile's sample.
pub const HIT_STACK_BYTES: u32 = 8 * 1024;

/// Largest stack copy: a sample record's size is a u16 (`struct perf_event_header`), so the
/// kernel refuses more than about 64 KiB with the rest of the record (`perf_sample_ustack_size`
/// in kernel/events/core.c); 32 KiB leaves room for the callchain and registers.
pub const MAX_STACK_BYTES: u32 = 32 * 1024;

/// Data pages per CPU ring for samples at `frequency` Hz carrying `stack_bytes` of stack: room
/// for what two threads on one CPU sample in two of the reader's 100 ms ticks (at least
/// [`MIN_SAMPLES_PER_RING`]), a power of two from [`MIN_DATA_PAGES`] to [`MAX_DATA_PAGES`].
/// At 1999 Hz with 8 KiB stacks: 8 MiB per CPU.
fn data_pages(stack_bytes: u32, frequency: u64) -> usize {
    let samples = (frequency * 2 * 2 / 10).max(MIN_SAMPLES_PER_RING);
    let bytes = (u64::from(stack_bytes) + 2048).saturating_mul(samples);
    usize::try_from(bytes / 4096)
        .unwrap_or(MAX_DATA_PAGES)
        .next_power_of_two()
        .clamp(MIN_DATA_PAGES, MAX_DATA_PAGES)
}

/// What a [`Sampler`] samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// On-CPU stacks at about this many samples per second of CPU time (the kernel adjusts the
    /// period to keep the rate: `freq` mode, `perf record -F`).
    CpuFrequency(u64),
    /// On-CPU stacks every this many nanoseconds of CPU time exactly (`perf record -c` of
    /// `cpu-clock`): each sample stands for the same time, so samples can be weighed against
    /// off-CPU time.
    CpuPeriod(u64),
    /// The stack of every `n`th time a thread leaves the CPU (the software
    /// `PERF_COUNT_SW_CONTEXT_SWITCHES` event, counted and sampled in the task's context at
    /// `perf_event_task_sched_out`, include/linux/perf_event.h), with the kernel's part of the
    /// callchain (where it blocked), and a `PERF_RECORD_SWITCH` each time it is switched in or
    /// out (`context_switch`), so the time until it runs again can be measured. The event
    /// fires in kernel mode, so it cannot exclude the kernel (`perf_exclude_event`): it needs
    /// kernel.perf_event_paranoid at most 1 or CAP_PERFMON.
    Switches { every: u64 },
}

impl Sampling {
    /// Samples a ring should hold per 100 ms tick, for sizing it ([`data_pages`]).
    fn rate_hint(self) -> u64 {
        match self {
            Sampling::CpuFrequency(f) => f,
            Sampling::CpuPeriod(ns) => 1_000_000_000 / ns.max(1),
            // Switches come as fast as the targets block: size for the largest rings.
            Sampling::Switches { .. } => 100_000,
        }
    }
}

/// The `perf_event_attr` of a user-stack sampler of `sampling` copying `stack_bytes` of the
/// stack and the registers an unwinder needs
/// ([`netprobe_core::debuginfo::PERF_REGS_MASK`]); `track`: it also records its task's
/// mappings (one event per task and CPU must, and only one: [`sideband`]).
fn sampler_attr(
    sampling: Sampling,
    enable_on_exec: bool,
    stack_bytes: u32,
    track: bool,
) -> sys::bindings::perf_event_attr {
    let mut a = sys::bindings::perf_event_attr {
        type_: sys::bindings::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: sys::bindings::PERF_COUNT_SW_CPU_CLOCK as u64,
        sample_type: (sys::bindings::PERF_SAMPLE_IP
            | sys::bindings::PERF_SAMPLE_TID
            | sys::bindings::PERF_SAMPLE_TIME
            | sys::bindings::PERF_SAMPLE_CALLCHAIN
            | sys::bindings::PERF_SAMPLE_REGS_USER
            | sys::bindings::PERF_SAMPLE_STACK_USER) as u64,
        sample_regs_user: netprobe_core::debuginfo::PERF_REGS_MASK,
        sample_stack_user: stack_bytes,
        ..Default::default()
    };
    a.set_exclude_kernel(1);
    a.set_exclude_callchain_kernel(1);
    match sampling {
        Sampling::CpuFrequency(f) => {
            a.__bindgen_anon_1.sample_freq = f;
            a.set_freq(1);
        }
        Sampling::CpuPeriod(ns) => a.__bindgen_anon_1.sample_period = ns,
        Sampling::Switches { every } => {
            a.config = sys::bindings::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
            a.__bindgen_anon_1.sample_period = every.max(1);
            a.set_exclude_kernel(0);
            a.set_exclude_callchain_kernel(0);
            a.set_context_switch(1);
            // The switch records end in the `TID | TIME` sample id.
            a.set_sample_id_all(1);
        }
    }
    // Times on CLOCK_MONOTONIC, the clock of netprobe's probe hits and of `Instant`, so
    // samples, switches and hits of one profile can be ordered together.
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_disabled(1);
    a.set_inherit(1);
    a.set_exclude_hv(1);
    a.set_enable_on_exec(u64::from(enable_on_exec));
    if track {
        sideband::track(&mut a);
    }
    a
}

/// `perf_event_open(2)` of `attr` for thread `tid` (0: this one) on `cpu` (-1: any), the
/// descriptor close-on-exec.
pub fn open_event(
    attr: &mut sys::bindings::perf_event_attr,
    tid: i32,
    cpu: i32,
) -> std::io::Result<OwnedFd> {
    // SAFETY: `attr` is a fully initialized perf_event_attr (its `size` is its own size; every
    // pointer it carries, such as a uprobe PMU event's path, outlives the call, which copies
    // what it needs).
    let fd = unsafe {
        sys::perf_event_open(
            attr,
            tid,
            cpu,
            -1,
            sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The CPUs the kernel lists as online (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
pub fn online_cpus() -> Result<Vec<i32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    Ok(parse_cpu_list(&text))
}

/// Parses a kernel CPU list (`0-3,6`); malformed parts are skipped.
pub fn parse_cpu_list(text: &str) -> Vec<i32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    cpus.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => cpus.extend(part.parse::<i32>().ok()),
        }
    }
    cpus
}

/// Samplers on a set of threads: one ring buffer per CPU.
pub struct Sampler {
    sampling: Sampling,
    rings: Vec<Ring>,
    /// Events that write into another event's ring.
    redirected: Vec<OwnedFd>,
}

impl Sampler {
    /// Opens (disabled) samplers of `sampling` on every thread in `tids` on every online CPU,
    /// copying `stack_bytes` of each sampled user stack (a multiple of 8, at most
    /// [`MAX_STACK_BYTES`]). `enable_on_exec`: the events start when the thread calls execve (a
    /// command held before its exec), else on [`Sampler::enable`]. `track`: the events also
    /// record the tasks' mappings ([`sideband`]); of samplers on the same tasks, one must.
    pub fn open(
        tids: &[u32],
        sampling: Sampling,
        enable_on_exec: bool,
        stack_bytes: u32,
        track: bool,
    ) -> Result<Sampler> {
        let cpus = online_cpus()?;
        let stack_bytes = (stack_bytes.min(MAX_STACK_BYTES) / 8) * 8;
        let pages = data_pages(stack_bytes, sampling.rate_hint());
        let mut attr = sampler_attr(sampling, enable_on_exec, stack_bytes, track);
        let mut rings: Vec<Option<Ring>> = cpus.iter().map(|_| None).collect();
        let mut redirected = Vec::new();
        let mut opened = 0usize;
        for &tid in tids {
            for (i, &cpu) in cpus.iter().enumerate() {
                let fd = match open_event(&mut attr, tid as libc::pid_t, cpu) {
                    Ok(fd) => fd,
                    // The thread exited since it was listed: nothing to sample.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                    Err(e) => return Err(sampler_open_error(tid, e, sampling)),
                };
                opened += 1;
                match &rings[i] {
                    None => {
                        rings[i] = Some(Ring::map(fd, pages).map_err(|e| {
                            Error::usage(format!(
                                "cannot map the perf ring buffer ({e}): raise `ulimit -l` or kernel.perf_event_mlock_kb"
                            ))
                        })?)
                    }
                    Some(ring) => {
                        // SAFETY: both are perf event fds of this process on the same CPU.
                        let rc = unsafe {
                            sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), ring.fd().as_raw_fd())
                        };
                        if rc != 0 {
                            return Err(Error::io(
                                "PERF_EVENT_IOC_SET_OUTPUT",
                                std::io::Error::last_os_error(),
                            ));
                        }
                        redirected.push(fd);
                    }
                }
            }
        }
        if opened == 0 {
            return Err(Error::usage(
                "no thread to profile: every target thread exited before sampling started",
            ));
        }
        Ok(Sampler {
            sampling,
            rings: rings.into_iter().flatten().collect(),
            redirected,
        })
    }

    /// What it samples.
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    fn fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(|r| r.fd()).chain(&self.redirected)
    }

    /// Starts sampling.
    pub fn enable(&self) {
        for fd in self.fds() {
            // SAFETY: an ioctl without pointer arguments on our own perf event fd.
            unsafe { sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
        }
    }

    /// Stops sampling (records already written stay readable).
    pub fn disable(&self) {
        for fd in self.fds() {
            // SAFETY: an ioctl without pointer arguments on our own perf event fd.
            unsafe { sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
        }
    }

    /// Appends the records of every CPU's buffer to `out` (whole records, CPU after CPU).
    pub fn drain(&mut self, out: &mut Vec<u8>) {
        for ring in &mut self.rings {
            ring.drain(out);
        }
    }
}

/// [`open_error`] of a sampler: a context-switch event counts in kernel mode, which
/// kernel.perf_event_paranoid 2 refuses to unprivileged users
/// (Documentation/admin-guide/perf-security.rst), so its refusal says so.
fn sampler_open_error(tid: u32, err: std::io::Error, sampling: Sampling) -> Error {
    let refused = matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM));
    if refused && matches!(sampling, Sampling::Switches { .. }) {
        return Error::usage(format!(
            "perf_event_open of a context-switch event on thread {tid} failed ({err}): off-CPU profiles count switches in the kernel: run netprobe as root, or grant it CAP_PERFMON (and CAP_SYS_PTRACE for another user's threads)"
        ));
    }
    open_error(tid, err)
}

pub(crate) fn open_error(tid: u32, err: std::io::Error) -> Error {
    let fix = match err.raw_os_error() {
        // perf_event_open(2): a thread of another user needs ptrace read access (CAP_SYS_PTRACE,
        // which also lets netprobe read its maps to name the frames); CAP_PERFMON passes the
        // perf_event_paranoid checks (Documentation/admin-guide/perf-security.rst).
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "another user's thread needs CAP_SYS_PTRACE (to open it and name its frames), or CAP_PERFMON above kernel.perf_event_paranoid: run netprobe as root, or grant it CAP_SYS_PTRACE"
        }
        Some(libc::ENOENT) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            "this kernel has no software perf events (CONFIG_PERF_EVENTS)"
        }
        Some(libc::EMFILE) => "raise the open-files limit (`ulimit -n`)",
        _ => "see perf_event_open(2)",
    };
    Error::usage(format!(
        "perf_event_open on thread {tid} failed ({err}): {fix}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(parse_cpu_list("0-1\n"), vec![0, 1]);
        assert_eq!(parse_cpu_list("0-3,6,8-9"), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert_eq!(parse_cpu_list("x,2-a,5"), vec![5]);
    }
}
