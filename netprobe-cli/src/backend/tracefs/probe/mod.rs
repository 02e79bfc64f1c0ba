//! Probe attachment: the ONE place that builds, validates and writes `uprobe_events` lines.
//!
//! Line syntax (kernel `Documentation/trace/uprobetracer.rst`):
//! `p[:[GRP/]EVENT] PATH:OFFSET [FETCHARGS]` (uprobe), `r[:[GRP/]EVENT] PATH:OFFSET [FETCHARGS]`
//! (uretprobe), `-:[GRP/]EVENT` (remove). Every value placed into a line is checked here first,
//! because the kernel splits the written text into lines and each line into whitespace-separated
//! words: a value with a newline would run a second command, a value with a space would shift
//! the words. The rules and the case behind each:
//!
//! | rule | motivating case |
//! | --- | --- |
//! | group/event: `[A-Za-z_][A-Za-z0-9_]*` | kernel `is_good_name`; `p:g/a b PATH` creates event `a` on file `b` |
//! | group/event: at most 63 bytes | kernel MAX_EVENT_NAME_LEN 64 incl. NUL ("Event name is too long", verified here) |
//! | path: absolute, no byte the kernel's `isspace()` is true for (0x09-0x0D, 0x20, 0xA0: lib/ctype.c), no control characters | a path `x\n-:other/ev` would delete someone else's probe; `/a b` probes `/a` |
//! | path: valid UTF-8 | keeps lines printable in messages and dry-run output |
//! | fetch-arg name: C identifier, at most 32 bytes, unique, not `common_*`/`__probe_*` | kernel MAX_ARG_NAME_LEN 32 (33 rejected here); names clash with the event's own fields |
//! | fetch-arg expression: at most 63 bytes, no `isspace()` bytes/control characters | kernel MAX_ARGSTR_LEN 63 (64 gives E2BIG here); a space would start another argument |
//! | at most 128 fetch-args | kernel MAX_TRACE_ARGS |
//!
//! Writes: `O_WRONLY|O_APPEND` only (truncating `uprobe_events` deletes every probe on the
//! machine: `kernel/trace/trace_uprobe.c`, `probes_open` releases them all on O_TRUNC). Several lines go in one `write` (the kernel runs each
//! complete line of a write in turn, `trace_parse_run_command`); a batch stays below the kernel's
//! 4096-byte WRITE_BUFSIZE so that no line is split across its internal chunks. When a write fails,
//! the reason is read from `error_log` (the kernel logs the failing command and a caret there).
//!
//! The parts: the names and paths a line holds (`names.rs`), a probe definition and its line
//! (`line.rs`), writing lines (`write.rs`), and reading back the listing and `error_log`
//! (`read.rs`).

mod line;
mod names;
mod read;
mod write;

pub use line::{ProbeDef, ProbeKind, ProbeLine};
pub(super) use names::{check_identifier, invalid, kernel_split};
pub use names::{kernel_isspace, EventName, GroupName, ProbePath};
pub use read::{list_all, list_events, parse_error_log, parse_listing, ErrorLogEntry, ListedProbe};
pub use write::append_lines;

/// Longest group or event name the kernel accepts (MAX_EVENT_NAME_LEN 64, including the NUL).
pub const MAX_NAME_LEN: usize = 63;
/// Longest fetch-arg name (kernel MAX_ARG_NAME_LEN).
pub const MAX_ARG_NAME_LEN: usize = 32;
/// Longest fetch-arg body after `NAME=` (kernel MAX_ARGSTR_LEN).
pub const MAX_ARG_EXPR_LEN: usize = 63;
/// Most fetch-args on one probe (kernel MAX_TRACE_ARGS).
pub const MAX_ARGS: usize = 128;
/// Largest write netprobe makes to `uprobe_events` (kernel WRITE_BUFSIZE is 4096, incl. a NUL).
pub const MAX_BATCH_BYTES: usize = 4000;
