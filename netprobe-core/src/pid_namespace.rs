//! Pid namespaces, as `/proc` shows them (`namespaces(7)`, `pid_namespaces(7)`): which one a
//! process is in, and whether this process sees the kernel's global pids. Trace events and
//! perf records speak global pids; a netprobe inside a container knows only its namespace's.

/// The initial pid namespace's inode number, a kernel constant (`PROC_PID_INIT_INO`,
/// include/linux/proc_ns.h): a process that sees it as its own sees every process.
pub const INITIAL_PIDNS: u64 = 0xEFFF_FFFC;

/// The inode of `/proc/PID/ns/pid` (`/proc/self/ns/pid` for `None`); `None` when unreadable.
pub fn pidns_of(pid: Option<u32>) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let path = match pid {
        Some(p) => format!("/proc/{p}/ns/pid"),
        None => "/proc/self/ns/pid".to_string(),
    };
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// This process's pid namespace inode (0 when `/proc/self/ns/pid` is unreadable).
pub fn own_pidns() -> u64 {
    pidns_of(None).unwrap_or(0)
}

/// Whether this process sees the kernel's global pids (it is in the initial pid namespace).
pub fn sees_global_pids() -> bool {
    own_pidns() == INITIAL_PIDNS
}
