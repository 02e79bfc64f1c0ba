//! The goroutine view of off-CPU time in a Go program: a goroutine parked by the Go scheduler
//! (`time.Sleep`, a channel, a mutex, network I/O) leaves no thread blocked, since its thread
//! goes on to run other goroutines or sleeps in the scheduler with no goroutine at all. So the
//! thread view shows scheduler frames where the program waits. Netprobe instead probes
//! `runtime.gopark` (where every goroutine parks: Go's `src/runtime/proc.go`) at entry, with the
//! user stack copied (the goroutine's own frames: `time.Sleep` under `main.worker`), and at each
//! RET (netprobe's Go return probes: breakpoints on the RET instructions, since a uretprobe
//! breaks goroutine stack moves; `crate::lang::go`). The entry and the return of one park are
//! paired by the goroutine (R14, the pair key under the register ABI), whichever thread resumes
//! it: the interval between them is a [`ParkedInterval`], named by `gopark`'s `reason` argument
//! ([`super::WaitReasons`]).
//!
//! `reason` is `gopark`'s third argument: in RCX under the register ABI (Go 1.17+: arguments in
//! RAX, RBX, RCX, ...; `gopark(unlockf, lock, reason, traceReason, traceskip)` since Go 1.21,
//! `traceEv` in the fourth place before), read from the registers the entry hit's stack copy
//! carries. Under the stack ABI (before 1.17) it is the byte at 24(SP) at entry (after the return
//! address, `unlockf` and `lock`), read from the copied stack; the pair key is then the thread,
//! so a goroutine resumed on another thread is not paired and its park closes at the end.
//!
//! [`is_scheduler_idle`] says whether a thread's off-CPU stack is an M with no goroutine (so the
//! goroutine view can leave it out: the goroutines' waits are in the parked intervals instead).

use super::wait_reason::WaitReasons;
use crate::plan::{Hit, Role, UserStack};
use netprobe_core::abi::go::GoAbi;
use std::collections::HashMap;
use std::path::Path;

/// The function every goroutine parks in.
pub const GOPARK: &str = "runtime.gopark";

/// The probe spec of `runtime.gopark` in the Go executable `exe` (entry and return probes are
/// placed by a session that pairs calls).
pub fn gopark_spec(exe: &Path) -> String {
    format!("{}:{GOPARK}", exe.display())
}

/// The calling convention of the Go binary at `path`; `None` when it is not a readable Go binary.
pub fn go_abi_of(path: &Path) -> Option<GoAbi> {
    let bytes = netprobe_core::bytes::FileBytes::open(path).ok()?;
    let go = netprobe_core::golang::GoBinary::parse(path, &bytes).ok()??;
    Some(go.abi())
}

/// One park of a goroutine: from `gopark`'s entry to its return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedInterval {
    pub pid: u32,
    /// The thread that ran the goroutine when it parked.
    pub tid_at_entry: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub from_ns: u64,
    pub to_ns: u64,
    /// The goroutine's stack at `gopark`'s entry, innermost first (`runtime.gopark` itself).
    pub stack: UserStack,
    /// The wait reason as the runtime names it (`sleep`, `chan receive`), or `waitReason N`.
    pub reason: String,
    /// The goroutine (the pair key: `g` under the register ABI, the thread under the stack ABI).
    pub goroutine: u64,
}

/// Pairs `runtime.gopark` entry and return hits into [`ParkedInterval`]s.
#[derive(Debug)]
pub struct GoParks {
    reasons: WaitReasons,
    abi: GoAbi,
    /// Open parks by (process, goroutine).
    open: HashMap<(u32, u64), ParkedInterval>,
    closed: Vec<ParkedInterval>,
}

impl GoParks {
    /// Pairs the parks of a program whose wait reasons are `reasons` and whose convention is
    /// `abi` ([`go_abi_of`]).
    pub fn new(reasons: WaitReasons, abi: GoAbi) -> GoParks {
        GoParks {
            reasons,
            abi,
            open: HashMap::new(),
            closed: Vec::new(),
        }
    }

    /// Takes `hits` of `runtime.gopark` (entries with stacks, and returns), in time order per
    /// goroutine. A return without an entry (parked before the probes) is ignored; a second
    /// entry of one goroutine replaces the first (its return was lost).
    pub fn absorb(&mut self, hits: impl IntoIterator<Item = Hit>) {
        for h in hits {
            let pid = h.pid.or(h.user_stack.as_ref().map(|s| s.pid)).unwrap_or(0);
            let key = (pid, h.pair_key);
            match h.role {
                Role::Entry => {
                    let reason = self.reason_of(&h);
                    self.open.insert(
                        key,
                        ParkedInterval {
                            pid,
                            tid_at_entry: h.tid,
                            from_ns: h.ts_ns,
                            to_ns: h.ts_ns,
                            stack: h.user_stack.unwrap_or_default(),
                            reason,
                            goroutine: h.pair_key,
                        },
                    );
                }
                Role::Return => {
                    if let Some(mut p) = self.open.remove(&key) {
                        p.to_ns = h.ts_ns.max(p.from_ns);
                        self.closed.push(p);
                    }
                }
            }
        }
    }

    /// The parks closed so far, handed over once.
    pub fn take_closed(&mut self) -> Vec<ParkedInterval> {
        std::mem::take(&mut self.closed)
    }

    /// Every park not yet taken; those still open (the goroutine still parked) close at
    /// `end_ns`, in order of their start.
    pub fn finish(mut self, end_ns: u64) -> Vec<ParkedInterval> {
        let mut out = std::mem::take(&mut self.closed);
        out.extend(self.open.into_values().map(|mut p| {
            p.to_ns = end_ns.max(p.from_ns);
            p
        }));
        out.sort_by_key(|p| (p.from_ns, p.tid_at_entry));
        out
    }

    /// The wait reason of an entry hit, from its copied registers or stack.
    fn reason_of(&self, h: &Hit) -> String {
        let copy = h.user_stack.as_ref().and_then(|s| s.copy.as_ref());
        let value = copy.and_then(|c| match self.abi {
            // The third integer argument register: CX on amd64, R2 on arm64, in the host's
            // perf register order (netprobe_core::debuginfo::PERF_REGS_MASK).
            GoAbi::Register => c
                .regs
                .get(netprobe_core::debuginfo::GO_THIRD_ARGUMENT_INDEX)
                .map(|&cx| cx as u8),
            GoAbi::Stack => c.stack.get(STACK_ABI_REASON_OFFSET).copied(),
        });
        match value {
            Some(v) => self.reasons.name(v),
            None => "waitReason ?".to_string(),
        }
    }
}

/// `reason`'s offset from SP at `gopark`'s entry under the stack ABI: after the return address,
/// `unlockf` and `lock`.
const STACK_ABI_REASON_OFFSET: usize = 24;

/// Frames of the Go scheduler's own loop: an M (thread) whose off-CPU stack holds one of these
/// and no frame outside the runtime runs no goroutine (Go's `src/runtime/proc.go`: `schedule`
/// finds no work, `stopm` parks the M on its note, `notesleep` sleeps in a futex; `sysmon` and
/// `templateThread` are Ms without a P).
pub const SCHEDULER_IDLE_FRAMES: [&str; 9] = [
    "runtime.schedule",
    "runtime.findRunnable",
    "runtime.findrunnable",
    "runtime.stopm",
    "runtime.mPark",
    "runtime.notesleep",
    "runtime.stoplockedm",
    "runtime.sysmon",
    "runtime.templateThread",
];

/// Whether a thread's off-CPU user stack (frame names, innermost first, as the profile names
/// them; an inlined frame is one entry) is a Go scheduler idle stack: an M with no goroutine.
/// Frames outside `runtime.` (and the `[unknown]` and kernel-reason frames a profile adds) make
/// it a goroutine's wait, which is kept.
pub fn is_scheduler_idle<S: AsRef<str>>(frames: &[S]) -> bool {
    let mut idle = false;
    for f in frames {
        let f = f.as_ref();
        let name = f.split_whitespace().next().unwrap_or(f);
        if SCHEDULER_IDLE_FRAMES.contains(&name) {
            idle = true;
        } else if !name.starts_with("runtime.")
            && !name.starts_with('[')
            && !name.starts_with("runtime/internal/")
            && !name.starts_with("internal/runtime/")
        {
            return false;
        }
    }
    idle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FunctionId, StackCopy};

    fn hit(role: Role, ts: u64, tid: u32, g: u64, cx: Option<u64>) -> Hit {
        Hit {
            ts_ns: ts,
            tid,
            pid: Some(7),
            probe: 0,
            function: FunctionId(0),
            role,
            args: vec![],
            pair_key: g,
            comm: None,
            user_stack: cx.map(|cx| UserStack {
                pid: 7,
                addrs: vec![0x401000, 0x402000],
                kernel_limit: false,
                copy: Some(StackCopy {
                    regs: vec![0, 0, cx, 0],
                    stack: vec![],
                }),
            }),
        }
    }

    #[test]
    fn parks_pair_by_goroutine_across_threads() {
        let mut parks = GoParks::new(WaitReasons::default(), GoAbi::Register);
        parks.absorb([
            hit(Role::Return, 5, 1, 0xa, None), // parked before the probes: ignored
            hit(Role::Entry, 10, 1, 0xa, Some(0x113)),
            hit(Role::Entry, 12, 2, 0xb, Some(7)),
            hit(Role::Return, 30, 3, 0xa, None),
        ]);
        let closed = parks.take_closed();
        assert_eq!(closed.len(), 1);
        assert_eq!(
            (closed[0].from_ns, closed[0].to_ns, closed[0].tid_at_entry),
            (10, 30, 1)
        );
        // The low byte of RCX: 0x113 is reason 0x13.
        assert_eq!(closed[0].reason, "waitReason 19");
        let rest = parks.finish(50);
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].from_ns, rest[0].to_ns, rest[0].goroutine),
            (12, 50, 0xb)
        );
    }

    #[test]
    fn idle_ms_are_told_from_goroutine_waits() {
        assert!(is_scheduler_idle(&[
            "[futex]",
            "runtime.futex",
            "runtime.futexsleep",
            "runtime.notesleep",
            "runtime.mPark",
            "runtime.stopm",
            "runtime.findRunnable",
            "runtime.schedule",
            "runtime.park_m",
            "runtime.mcall",
        ]));
        assert!(is_scheduler_idle(&[
            "runtime.usleep",
            "runtime.sysmon",
            "runtime.mstart1"
        ]));
        // A goroutine blocked in a system call is a wait of the program.
        assert!(!is_scheduler_idle(&[
            "syscall.Syscall",
            "os.(*File).Read",
            "main.readLoop"
        ]));
        // A goroutine's frames on the stack: not idle.
        assert!(!is_scheduler_idle(&[
            "runtime.schedule",
            "runtime.gopark",
            "main.worker"
        ]));
        assert!(!is_scheduler_idle::<&str>(&[]));
    }
}
