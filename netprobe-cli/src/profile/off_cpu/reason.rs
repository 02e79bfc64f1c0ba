//! Why a thread left the CPU, from the kernel's part of the callchain taken as it left and
//! the switch record's preemption flag: the leaf frame an off-CPU stack ends in.
//!
//! The system call is the outermost kernel frame named `__x64_sys_NAME` / `__ia32_sys_NAME`
//! / `__se_sys_NAME` / `__do_sys_NAME` (the syscall wrappers of
//! arch/x86/include/asm/syscall_wrapper.h) or `ksys_NAME` (the helper a wrapper tail-calls:
//! `read` reaches the scheduler as `ksys_read` -> `vfs_read` -> `anon_pipe_read`, the wrapper
//! gone from the chain), else the function that waits names it ([`WAITERS`]). The kind of wait follows from it (nanosleep: a
//! sleep, futex: a lock or condition) or from the frames under it: `io_schedule` (the task
//! waits for block I/O, kernel/sched/core.c) is I/O whatever the call. A preempted thread was
//! runnable: its time is CPU contention, not waiting. Without kernel symbols only that flag
//! is known.

use netprobe_core::kallsyms::KernelSymbols;

/// What a thread was waiting for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BlockReason {
    /// Preempted while runnable: waiting for a CPU.
    Preempted,
    /// nanosleep / clock_nanosleep.
    Sleep,
    /// A futex wait (mutexes, condition variables, Monitor.Wait, Go's idle threads).
    Futex,
    /// Waiting for a file, pipe or socket (`read`, `poll`, `epoll_wait`...), or block I/O
    /// (`io_schedule`); the system call when there is one.
    Io(Option<String>),
    /// Any other system call (wait4, ...).
    Syscall(String),
    /// A page fault's wait (reading a page in).
    PageFault,
    /// Blocked in the kernel for no reason named above (or kernel symbols hidden).
    Other,
}

/// System calls that wait for a file, pipe or socket to be ready or to transfer.
const IO_SYSCALLS: &[&str] = &[
    "read",
    "readv",
    "pread64",
    "preadv",
    "preadv2",
    "write",
    "writev",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "accept",
    "accept4",
    "connect",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "io_getevents",
    "io_pgetevents",
    "io_uring_enter",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "splice",
    "sendfile64",
    "openat",
    "open",
    "close",
];

/// Kernel functions that wait, and the system call they wait for, where no syscall frame
/// is in the chain (prefix match, innermost first).
const WAITERS: &[(&str, &str)] = &[
    ("do_nanosleep", "nanosleep"),
    ("futex_wait", "futex"),
    ("__futex_wait", "futex"),
    ("anon_pipe_read", "read"),
    ("pipe_read", "read"),
    ("pipe_write", "write"),
    ("anon_pipe_write", "write"),
    ("ep_poll", "epoll_wait"),
    ("do_sys_poll", "poll"),
    ("do_select", "select"),
    ("do_wait", "wait4"),
];

impl BlockReason {
    /// The reason for the kernel frames `kernel_ips` (innermost first) of a thread that left
    /// the CPU, `preempted` as its switch record says.
    pub fn of(kernel_ips: &[u64], preempted: bool, symbols: &KernelSymbols) -> BlockReason {
        if preempted {
            return BlockReason::Preempted;
        }
        let names: Vec<&str> = kernel_ips.iter().filter_map(|&a| symbols.name(a)).collect();
        let syscall = names
            .iter()
            .rev()
            .find_map(|n| syscall_name(n))
            .or_else(|| {
                names.iter().find_map(|n| {
                    WAITERS
                        .iter()
                        .find(|(f, _)| n.starts_with(f))
                        .map(|(_, s)| *s)
                })
            });
        let io_wait = names.iter().any(|n| n.starts_with("io_schedule"));
        match syscall {
            Some("nanosleep" | "clock_nanosleep") => BlockReason::Sleep,
            Some("futex" | "futex_waitv") => BlockReason::Futex,
            Some(s) if io_wait || IO_SYSCALLS.contains(&s) => BlockReason::Io(Some(s.into())),
            Some(s) => BlockReason::Syscall(s.into()),
            None if names.iter().any(|n| n.contains("page_fault")) => BlockReason::PageFault,
            None if io_wait => BlockReason::Io(None),
            None => BlockReason::Other,
        }
    }
}

/// `NAME` of a syscall wrapper's symbol.
fn syscall_name(symbol: &str) -> Option<&str> {
    [
        "__x64_sys_",
        "__ia32_sys_",
        "__se_sys_",
        "__do_sys_",
        "ksys_",
    ]
    .iter()
    .find_map(|p| symbol.strip_prefix(p))
    .filter(|n| !n.is_empty())
}

/// The leaf frame of an off-CPU stack: `[off-cpu: sleep]`, `[off-cpu: futex]`,
/// `[off-cpu: I/O read]`, `[off-cpu: wait4]`, `[off-cpu: preempted]`...
pub fn leaf_name(reason: &BlockReason) -> String {
    let what = match reason {
        BlockReason::Preempted => "preempted".to_string(),
        BlockReason::Sleep => "sleep".to_string(),
        BlockReason::Futex => "futex".to_string(),
        BlockReason::Io(Some(s)) => format!("I/O {s}"),
        BlockReason::Io(None) => "I/O".to_string(),
        BlockReason::Syscall(s) => s.clone(),
        BlockReason::PageFault => "page fault".to_string(),
        BlockReason::Other => "blocked".to_string(),
    };
    format!("[off-cpu: {what}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> KernelSymbols {
        KernelSymbols::parse(
            "ffffffff81000000 T __schedule\n\
             ffffffff81000100 T schedule\n\
             ffffffff81000200 T io_schedule\n\
             ffffffff81000300 t do_nanosleep\n\
             ffffffff81000400 T __x64_sys_clock_nanosleep\n\
             ffffffff81000500 T futex_wait_queue\n\
             ffffffff81000600 T __x64_sys_futex\n\
             ffffffff81000700 T pipe_read\n\
             ffffffff81000800 T __x64_sys_read\n\
             ffffffff81000900 T __x64_sys_wait4\n\
             ffffffff81000a00 T exc_page_fault\n\
             ffffffff81000b00 T do_syscall_64\n\
             ffffffff81000c00 T anon_pipe_read\n\
             ffffffff81000d00 T ksys_write\n\
             ffffffff81000e00 T futex_wait\n",
        )
    }

    #[test]
    fn the_system_call_names_the_wait() {
        let k = symbols();
        let of = |ips: &[u64]| BlockReason::of(ips, false, &k);
        let sched = 0xffffffff81000010;
        let entry = 0xffffffff81000b10;
        assert_eq!(
            of(&[sched, 0xffffffff81000310, 0xffffffff81000410, entry]),
            BlockReason::Sleep
        );
        assert_eq!(
            of(&[sched, 0xffffffff81000510, 0xffffffff81000610, entry]),
            BlockReason::Futex
        );
        assert_eq!(
            of(&[sched, 0xffffffff81000710, 0xffffffff81000810, entry]),
            BlockReason::Io(Some("read".into()))
        );
        assert_eq!(
            of(&[sched, 0xffffffff81000910, entry]),
            BlockReason::Syscall("wait4".into())
        );
        assert_eq!(
            of(&[sched, 0xffffffff81000210, 0xffffffff81000a10]),
            BlockReason::PageFault
        );
        assert_eq!(of(&[sched, 0xffffffff81000210]), BlockReason::Io(None));
        assert_eq!(of(&[]), BlockReason::Other);
        // A wrapper tail-called away: the ksys_ helper, or the waiting function, names it.
        assert_eq!(
            of(&[sched, 0xffffffff81000c10, 0xffffffff81000d10, entry]),
            BlockReason::Io(Some("write".into()))
        );
        assert_eq!(
            of(&[sched, 0xffffffff81000c10, entry]),
            BlockReason::Io(Some("read".into()))
        );
        assert_eq!(of(&[sched, 0xffffffff81000e10, entry]), BlockReason::Futex);
        assert_eq!(BlockReason::of(&[sched], true, &k), BlockReason::Preempted);
        assert_eq!(
            BlockReason::of(
                &[sched, 0xffffffff81000410],
                false,
                &KernelSymbols::default()
            ),
            BlockReason::Other
        );
    }

    #[test]
    fn leaf_frames_read_as_the_wait() {
        assert_eq!(
            leaf_name(&BlockReason::Io(Some("read".into()))),
            "[off-cpu: I/O read]"
        );
        assert_eq!(leaf_name(&BlockReason::Sleep), "[off-cpu: sleep]");
        assert_eq!(leaf_name(&BlockReason::Preempted), "[off-cpu: preempted]");
    }
}
