//! What a backend hands back: a decoded [`Hit`] (which probe, which function, entry or return,
//! the thread, the named argument values), its user call stack when recorded, and [`Value`], a
//! decoded value as the text and JSON printers show it.

use super::{FunctionId, Role};
use serde::Serialize;
use std::fmt;

/// A decoded hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// CLOCK_MONOTONIC nanoseconds (the instance's `mono` trace clock).
    pub ts_ns: u64,
    /// The thread that hit the probe (`common_pid` is the kernel's task pid, i.e. the tid).
    pub tid: u32,
    /// Its process, in netprobe's pid namespace, when the backend records it (the per-task
    /// backend: perf's `PERF_SAMPLE_TID`); `None` where sinks look it up
    /// (`crate::sinks::TaskInfo::process_of`).
    pub pid: Option<u32>,
    /// Index into [`ProbePlan::probes`].
    pub probe: usize,
    pub function: FunctionId,
    pub role: Role,
    pub args: Vec<(String, Value)>,
    /// The latency pairing key: the tid, or the fetched register.
    pub pair_key: u64,
    pub comm: Option<String>,
    /// The user call stack, when the plan records them ([`ProbePlan::record_user_stacks`]).
    pub user_stack: Option<UserStack>,
}

/// The user call stack under a hit, as the kernel walked it: runtime addresses of the thread's
/// process, innermost first (the probed instruction, then each return address).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct UserStack {
    /// The process (the kernel's pid, like [`Hit::tid`]).
    pub pid: u32,
    pub addrs: Vec<u64>,
    /// The kernel's walk filled every entry it records, so the stack may go on above the last
    /// one (it stores at most a fixed number of entries per hit).
    pub kernel_limit: bool,
    /// The thread's user registers and the top of its stack at the hit, when the backend
    /// copied them: the stack is then unwound in user space (`crate::stacks::Unwinder`).
    pub copy: Option<StackCopy>,
}

/// Registers (perf's order on the host, `netprobe_core::debuginfo::PERF_REGS_MASK`) and the
/// stack bytes from rsp up, as a hit's perf record carried them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackCopy {
    pub regs: Vec<u64>,
    pub stack: Vec<u8>,
}

/// A decoded argument value.
///
/// JSON: integers as numbers, hex values as `"0x..."` strings, strings as strings (a cut string
/// as `{"text": ..., "truncated": true, "length": N}`), a fault as `null`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Signed(i64),
    Unsigned(u64),
    /// Printed as `0x...`.
    Hex(u64),
    /// A string; `truncated` when only its first part was fetched (kernel array limit of 64).
    Str {
        text: String,
        truncated: bool,
        /// The full length as the object says (.NET/Go strings), when known.
        length: Option<i64>,
    },
    /// The elements of a raw array fetch-arg, printed like the kernel prints them (`{1,2,3}`).
    List(Vec<u64>),
    /// The kernel could not read the memory (bad pointer, paged out), or the field is missing.
    Fault,
}

impl Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Value::Signed(v) => s.serialize_i64(*v),
            Value::Unsigned(v) => s.serialize_u64(*v),
            Value::Hex(v) => s.serialize_str(&format!("{v:#x}")),
            Value::Str {
                text,
                truncated: false,
                ..
            } => s.serialize_str(text),
            Value::Str { text, length, .. } => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("text", text)?;
                m.serialize_entry("truncated", &true)?;
                m.serialize_entry("length", length)?;
                m.end()
            }
            Value::List(items) => items.serialize(s),
            Value::Fault => s.serialize_none(),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Signed(v) => write!(f, "{v}"),
            Value::Unsigned(v) => write!(f, "{v}"),
            Value::Hex(v) => write!(f, "{v:#x}"),
            Value::Str {
                text,
                truncated,
                length,
            } => {
                write!(f, "{text:?}")?;
                if *truncated {
                    match length {
                        Some(n) => write!(f, "...(cut at 64 of {n})")?,
                        None => write!(f, "...(cut)")?,
                    }
                }
                Ok(())
            }
            Value::List(items) => {
                write!(f, "{{")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ",")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, "}}")
            }
            Value::Fault => write!(f, "(fault)"),
        }
    }
}
