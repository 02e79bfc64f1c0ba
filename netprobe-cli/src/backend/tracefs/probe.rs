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

use crate::backend::tracefs::fetch::FetchArg;
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use netprobe_core::addr::FileOffset;
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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

pub(super) fn invalid(what: &'static str, value: &str, why: impl Into<String>) -> Error {
    Error::InvalidProbe {
        what,
        value: value.to_string(),
        why: why.into(),
    }
}

pub(super) fn check_identifier(what: &'static str, s: &str, max: usize) -> Result<()> {
    let mut chars = s.chars();
    match chars.next() {
        None => return Err(invalid(what, s, "it is empty")),
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        Some(_) => {
            return Err(invalid(
                what,
                s,
                "it must start with a letter or '_' (kernel rule for event names)",
            ))
        }
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid(
            what,
            s,
            "only letters, digits and '_' are allowed (anything else could end the name or start another command)",
        ));
    }
    if s.len() > max {
        return Err(invalid(
            what,
            s,
            format!(
                "it is {} bytes long; the kernel allows at most {max}",
                s.len()
            ),
        ));
    }
    Ok(())
}

/// A validated tracefs group name (the `GRP` of `p:GRP/EVENT`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupName(String);

impl GroupName {
    /// Checks `name` against the rules above.
    pub fn new(name: &str) -> Result<GroupName> {
        check_identifier("group name", name, MAX_NAME_LEN)?;
        Ok(GroupName(name.to_string()))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated event name (the `EVENT` of `p:GRP/EVENT`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventName(String);

impl EventName {
    /// Checks `name` against the rules above.
    pub fn new(name: &str) -> Result<EventName> {
        check_identifier("event name", name, MAX_NAME_LEN)?;
        Ok(EventName(name.to_string()))
    }

    /// An event name made from arbitrary text (a function name such as `net/http.(*conn).serve`):
    /// every other character becomes `_`, a leading digit gets a `_` in front, and the result is
    /// cut to leave room for `suffix` (itself `[A-Za-z0-9_]`). Never fails for a valid suffix.
    pub fn sanitized(text: &str, suffix: &str) -> Result<EventName> {
        let mut s: String = text
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s.insert(0, '_');
        }
        let room = MAX_NAME_LEN.saturating_sub(suffix.len());
        s.truncate(room);
        s.push_str(suffix);
        EventName::new(&s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether the kernel's `isspace()` is true for byte `b`: the bytes `argv_split` (lib/argv_split.c)
/// splits the words of a `uprobe_events` line on. The kernel's ctype table (lib/ctype.c) marks
/// 0x09..=0x0D and 0x20 as space, and 0xA0 too (Latin-1 no-break space): so a UTF-8 path holding
/// `à` (0xC3 0xA0) or `Р` (0xD0 0xA0) would be cut in two although no character of it is
/// whitespace.
pub fn kernel_isspace(b: u8) -> bool {
    matches!(b, 0x09..=0x0d | 0x20 | 0xa0)
}

/// What in `text` would make the kernel end a word or a line inside it, described for a
/// message: a control character (C0, DEL, C1: a newline would end the line), or a byte the
/// kernel's `isspace()` is true for ([`kernel_isspace`]); `None` when there is none.
pub(super) fn kernel_split(text: &str) -> Option<String> {
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Some(format!("{c:?}"));
    }
    let (at, b) = text.bytes().enumerate().find(|&(_, b)| kernel_isspace(b))?;
    let start = (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    let c = text[start..].chars().next().unwrap_or(' ');
    Some(if c.len_utf8() == 1 {
        format!("{c:?}")
    } else {
        format!(
            "{c:?}, whose UTF-8 byte {b:#04x} the kernel's isspace() counts as a space (lib/ctype.c: 0xA0 is Latin-1's no-break space)"
        )
    })
}

/// A validated probe file path (the `PATH` of `PATH:OFFSET`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbePath(String);

impl ProbePath {
    /// Checks `path` against the rules above.
    pub fn new(path: &Path) -> Result<ProbePath> {
        let Some(s) = path.to_str() else {
            return Err(invalid(
                "probe path",
                &path.to_string_lossy(),
                "it is not valid UTF-8; use a symlink with a plain name",
            ));
        };
        if !s.starts_with('/') {
            return Err(invalid(
                "probe path",
                s,
                "it must be absolute (the kernel would resolve it against netprobe's working directory)",
            ));
        }
        if let Some(why) = kernel_split(s) {
            return Err(invalid(
                "probe path",
                s,
                format!(
                    "it contains {why}; uprobe_events splits lines and words on whitespace, so the kernel would misread it: use a symlink without whitespace"
                ),
            ));
        }
        if s.contains('#') {
            return Err(invalid(
                "probe path",
                s,
                "it contains '#', which starts a comment in a line written to uprobe_events (kernel/trace/trace.c, trace_parse_run_command), so the kernel would read a shorter path: use a symlink without '#'",
            ));
        }
        Ok(ProbePath(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn to_path_buf(&self) -> PathBuf {
        PathBuf::from(&self.0)
    }
}

/// Entry probe (`p:`) or return probe (`r:`, a uretprobe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `p:` fires when the instruction at the offset runs.
    Entry,
    /// `r:` fires when the function whose first instruction is at the offset returns.
    Return,
}

/// A probe definition, validated on construction; `Display` gives the exact line.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProbeDef {
    kind: ProbeKind,
    group: GroupName,
    event: EventName,
    path: ProbePath,
    offset: FileOffset,
    args: Vec<FetchArg>,
}

impl ProbeDef {
    /// Validates every part (see the module table). Errors name the refused value and why.
    pub fn new(
        kind: ProbeKind,
        group: GroupName,
        event: EventName,
        path: &Path,
        offset: FileOffset,
        args: Vec<FetchArg>,
    ) -> Result<ProbeDef> {
        let path = ProbePath::new(path)?;
        if args.len() > MAX_ARGS {
            return Err(invalid(
                "fetch-arg list",
                &format!("{} arguments", args.len()),
                format!("the kernel allows at most {MAX_ARGS}"),
            ));
        }
        for (i, a) in args.iter().enumerate() {
            a.validate()?;
            if args[..i].iter().any(|b| b.name == a.name) {
                return Err(invalid(
                    "fetch-arg name",
                    &a.name,
                    "it is used twice on one probe",
                ));
            }
        }
        Ok(ProbeDef {
            kind,
            group,
            event,
            path,
            offset,
            args,
        })
    }

    pub fn kind(&self) -> ProbeKind {
        self.kind
    }
    pub fn group(&self) -> &GroupName {
        &self.group
    }
    pub fn event(&self) -> &EventName {
        &self.event
    }
    pub fn path(&self) -> &ProbePath {
        &self.path
    }
    pub fn offset(&self) -> FileOffset {
        self.offset
    }
    pub fn args(&self) -> &[FetchArg] {
        &self.args
    }

    /// The removal line for this probe.
    pub fn removal(&self) -> ProbeLine {
        ProbeLine::Remove {
            group: self.group.clone(),
            event: self.event.clone(),
        }
    }
}

impl fmt::Display for ProbeDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = match self.kind {
            ProbeKind::Entry => 'p',
            ProbeKind::Return => 'r',
        };
        write!(
            f,
            "{k}:{}/{} {}:{:#x}",
            self.group,
            self.event,
            self.path.as_str(),
            self.offset.0
        )?;
        for a in &self.args {
            write!(f, " {}", a.render())?;
        }
        Ok(())
    }
}

/// One line for `uprobe_events`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProbeLine {
    Add(ProbeDef),
    /// `-:GROUP/EVENT`.
    Remove {
        group: GroupName,
        event: EventName,
    },
}

impl fmt::Display for ProbeLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeLine::Add(d) => d.fmt(f),
            ProbeLine::Remove { group, event } => write!(f, "-:{group}/{event}"),
        }
    }
}

/// Appends `lines` to `uprobe_events`, several per write (up to [`MAX_BATCH_BYTES`]).
///
/// On failure returns the kernel's reason for the first refused line ([`Error::ProbeRejected`]);
/// lines before it in the same write (and all earlier writes) have taken effect, lines after it
/// have not. Removal of a probe still enabled somewhere fails with EBUSY ([`Error::Busy`]).
pub fn append_lines(tracefs: &Tracefs, lines: &[ProbeLine]) -> Result<()> {
    let path = tracefs.path("uprobe_events");
    let mut file = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let mut batch = String::new();
    let mut batch_lines: Vec<&ProbeLine> = Vec::new();
    for line in lines {
        let text = format!("{line}\n");
        if !batch.is_empty() && batch.len() + text.len() > MAX_BATCH_BYTES {
            write_batch(tracefs, &mut file, &batch, &batch_lines)?;
            batch.clear();
            batch_lines.clear();
        }
        batch.push_str(&text);
        batch_lines.push(line);
    }
    if !batch.is_empty() {
        write_batch(tracefs, &mut file, &batch, &batch_lines)?;
    }
    Ok(())
}

fn write_batch(
    tracefs: &Tracefs,
    file: &mut std::fs::File,
    batch: &str,
    lines: &[&ProbeLine],
) -> Result<()> {
    // Right before the kernel looks the paths up: each must still name the file whose bytes the
    // offsets were computed from (a target could have put another file at a path it controls).
    let mut checked: Vec<&str> = Vec::new();
    for line in lines {
        if let ProbeLine::Add(def) = line {
            let path = def.path().as_str();
            if !checked.contains(&path) {
                netprobe_core::resolve::verify_probe_file(Path::new(path))?;
                checked.push(path);
            }
        }
    }
    // One write() per batch: write_all would retry the rest after a short write, but the kernel
    // either consumes everything or fails on a line.
    match file.write(batch.as_bytes()) {
        Ok(n) if n == batch.len() => Ok(()),
        Ok(n) => Err(Error::ProbeRejected {
            line: batch.lines().next().unwrap_or_default().to_string(),
            reason: format!(
                "short write to uprobe_events ({n} of {} bytes)",
                batch.len()
            ),
        }),
        Err(e) => Err(rejection(tracefs, lines, e)),
    }
}

/// Turns a failed write into an error naming the line and the kernel's reason.
fn rejection(tracefs: &Tracefs, lines: &[&ProbeLine], e: std::io::Error) -> Error {
    let path = tracefs.path("uprobe_events");
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => return Error::io(path, e),
        Some(libc::EBUSY) => {
            return Error::Busy {
                path,
                why: format!(
                    "a probe among `{}` is enabled or in use",
                    lines
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join("`, `")
                ),
                fix: "stop the perf/bpftrace/netprobe session using it, then retry".into(),
            }
        }
        _ => {}
    }
    let log = tracefs.read("error_log").unwrap_or_default();
    let entries = parse_error_log(&log);
    // The newest entry whose command is one of ours explains the failure.
    let ours = entries.iter().rev().find_map(|entry| {
        lines
            .iter()
            .find(|l| l.to_string() == entry.command)
            .map(|l| (l.to_string(), entry))
    });
    match ours {
        Some((line, entry)) => Error::ProbeRejected {
            line,
            reason: format!("{} ({e})", entry.message),
        },
        None => Error::ProbeRejected {
            line: lines
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join("; "),
            reason: match e.raw_os_error() {
                Some(libc::ENOENT) => format!(
                    "{e}: the file or probe does not exist (check the path, or that the probe was not already removed)"
                ),
                Some(libc::EEXIST) => format!("{e}: an event of that name already exists in the group"),
                _ => format!("{e} (no reason in error_log)"),
            },
        },
    }
}

/// One entry of tracefs `error_log`:
/// ```text
/// [  535.539872] trace_uprobe: error: Event name is too long
///   Command: p:grp/eeee... /tmp/np_t:0x1139
///                 ^
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLogEntry {
    /// `trace_uprobe`, `trace_kprobe`, `event filter parser`, ...
    pub location: String,
    pub message: String,
    pub command: String,
    /// Byte position of the caret within `command`, when present.
    pub caret: Option<usize>,
}

/// Parses `error_log` text (kernel `Documentation/trace/ftrace.rst`, "error_log"); lines that do
/// not fit the format are skipped, never an error.
pub fn parse_error_log(text: &str) -> Vec<ErrorLogEntry> {
    let mut out: Vec<ErrorLogEntry> = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix('[') else {
            continue;
        };
        let Some((_, rest)) = rest.split_once("] ") else {
            continue;
        };
        let Some((location, message)) = rest.split_once(": error: ") else {
            continue;
        };
        let mut entry = ErrorLogEntry {
            location: location.to_string(),
            message: message.trim_end().to_string(),
            command: String::new(),
            caret: None,
        };
        if let Some(cmd_line) = lines.peek().filter(|l| l.contains("Command: ")) {
            let prefix_len = cmd_line.find("Command: ").unwrap_or(0) + "Command: ".len();
            entry.command = cmd_line.get(prefix_len..).unwrap_or("").to_string();
            lines.next();
            if let Some(caret_line) = lines.peek().filter(|l| l.trim() == "^") {
                entry.caret = caret_line.find('^').and_then(|p| p.checked_sub(prefix_len));
                lines.next();
            }
        }
        out.push(entry);
    }
    out
}

/// The events of `group` currently defined, from `uprobe_events` (`p:GROUP/EVENT ...` lines).
pub fn list_events(tracefs: &Tracefs, group: &GroupName) -> Result<Vec<EventName>> {
    // A multi-probe event (several uprobes in one event) is listed once per uprobe; it is one
    // event, removed by one `-:GROUP/EVENT` line (a second one fails with ENOENT).
    let mut seen = std::collections::HashSet::new();
    Ok(list_all(tracefs)?
        .into_iter()
        .filter(|d| d.group == group.as_str())
        .filter(|d| seen.insert(d.event.clone()))
        .filter_map(|d| EventName::new(&d.event).ok())
        .collect())
}

/// One line of `uprobe_events` as the kernel prints it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedProbe {
    pub kind: char,
    pub group: String,
    pub event: String,
    /// The rest of the line: `PATH:0xOFFSET ARGS`.
    pub location: String,
}

/// Every probe in `uprobe_events` (all groups; read only).
pub fn list_all(tracefs: &Tracefs) -> Result<Vec<ListedProbe>> {
    Ok(parse_listing(&tracefs.read("uprobe_events")?))
}

/// Parses `uprobe_events` content; malformed lines are skipped.
pub fn parse_listing(text: &str) -> Vec<ListedProbe> {
    text.lines()
        .filter_map(|line| {
            let (head, location) = line.split_once(' ').unwrap_or((line, ""));
            let mut chars = head.chars();
            let kind = chars.next()?;
            let rest = chars.as_str().strip_prefix(':')?;
            let (group, event) = rest.split_once('/')?;
            Some(ListedProbe {
                kind,
                group: group.to_string(),
                event: event.to_string(),
                location: location.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tracefs::fetch::{ArrayElem, FetchType};
    use netprobe_core::abi::IntType;

    fn g() -> GroupName {
        GroupName::new("nptest_tracefs_unit").unwrap()
    }

    #[test]
    fn renders_entry_and_return_lines() {
        let d = ProbeDef::new(
            ProbeKind::Entry,
            g(),
            EventName::new("add").unwrap(),
            Path::new("/tmp/np t".trim_end_matches(" t")),
            FileOffset(0x1139),
            vec![
                FetchArg::new("a", "%di", FetchType::Int(IntType::S32)),
                FetchArg::new("s", "+0(%dx)", FetchType::String),
                FetchArg::new(
                    "chars",
                    "+12(%di)",
                    FetchType::Array {
                        elem: ArrayElem::U16,
                        len: 64,
                    },
                ),
            ],
        )
        .unwrap();
        assert_eq!(
            d.to_string(),
            "p:nptest_tracefs_unit/add /tmp/np:0x1139 a=%di:s32 s=+0(%dx):string chars=+12(%di):u16[64]"
        );
        let r = ProbeDef::new(
            ProbeKind::Return,
            g(),
            EventName::new("add_ret").unwrap(),
            Path::new("/bin/x"),
            FileOffset(16),
            vec![FetchArg::new(
                "ret",
                "$retval",
                FetchType::Int(IntType::X64),
            )],
        )
        .unwrap();
        assert_eq!(
            r.to_string(),
            "r:nptest_tracefs_unit/add_ret /bin/x:0x10 ret=$retval:x64"
        );
        assert_eq!(r.removal().to_string(), "-:nptest_tracefs_unit/add_ret");
    }

    #[test]
    fn refuses_line_injection_and_word_shifts() {
        for bad in [
            "/tmp/a\n-:other/ev",
            "/tmp/a b",
            "/tmp/a\tb",
            "relative/path",
            "/tmp/a\x07",
            "/tmp/a#b/app",
        ] {
            let e = ProbePath::new(Path::new(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidProbe { .. }), "{bad:?}: {e}");
        }
        for bad in ["a b", "a\n-:x/y", "a/b", "9abc", "", "ä", &"e".repeat(64)] {
            assert!(EventName::new(bad).is_err(), "{bad:?}");
            assert!(GroupName::new(bad).is_err(), "{bad:?}");
        }
        assert!(EventName::new(&"e".repeat(63)).is_ok());
        let arg = |n: &str, e: &str| {
            ProbeDef::new(
                ProbeKind::Entry,
                g(),
                EventName::new("x").unwrap(),
                Path::new("/bin/x"),
                FileOffset(0),
                vec![FetchArg::new(n, e, FetchType::Int(IntType::U64))],
            )
        };
        assert!(arg("a", "%di x=%si").is_err());
        assert!(arg("a", "%di\n-:g/e").is_err());
        assert!(arg("a b", "%di").is_err());
        assert!(arg("common_pid", "%di").is_err());
        assert!(arg(&"a".repeat(33), "%di").is_err());
        assert!(arg(&"a".repeat(32), "%di").is_ok());
        // 59 + ":u64" = 63 bytes is the longest body the kernel takes.
        assert!(arg("a", &format!("+{}(%di)", "0".repeat(53))).is_ok());
        assert!(arg("a", &format!("+{}(%di)", "0".repeat(54))).is_err());
    }

    /// The kernel splits a `uprobe_events` line on the bytes its `isspace()` is true for
    /// (lib/ctype.c), not on Unicode whitespace: 0xA0 inside a UTF-8 character splits the path,
    /// and a Unicode space whose bytes hold none of them does not.
    #[test]
    fn path_check_is_the_kernels_isspace_on_bytes() {
        for bad in [
            "/tmp/là/app",
            "/tmp/Р/app",
            "/tmp/a\u{a0}b/app",
            "/tmp/a\u{b}b",
        ] {
            let e = ProbePath::new(Path::new(bad)).unwrap_err().to_string();
            assert!(e.contains("uprobe_events splits"), "{bad:?}: {e}");
        }
        let e = ProbePath::new(Path::new("/tmp/là/app"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'à', whose UTF-8 byte 0xa0"), "{e}");
        for good in ["/tmp/a\u{3000}b/app", "/tmp/a\u{2003}b/app", "/tmp/ü/app"] {
            assert!(ProbePath::new(Path::new(good)).is_ok(), "{good:?}");
        }
        let spaces: Vec<u8> = (0..=255u8).filter(|&b| kernel_isspace(b)).collect();
        assert_eq!(spaces, [0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0xa0]);
    }

    #[test]
    fn sanitized_names_are_valid() {
        let e = EventName::sanitized("net/http.(*conn).serve", "_e0").unwrap();
        assert_eq!(e.as_str(), "net_http___conn__serve_e0");
        let e = EventName::sanitized("1x", "").unwrap();
        assert_eq!(e.as_str(), "_1x");
        let long = "x".repeat(200);
        assert_eq!(
            EventName::sanitized(&long, "_r12").unwrap().as_str().len(),
            63
        );
    }

    #[test]
    fn parses_error_log() {
        let log = "[  535.539872] trace_uprobe: error: Event name is too long\n  Command: p:g/eeee /tmp/np_t:0x1139\n              ^\n[  535.540064] trace_uprobe: error: Invalid register name\n  Command: p:g/ok /tmp/np_t:0x1139 a=%zz\n                                    ^\n";
        let e = parse_error_log(log);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].message, "Event name is too long");
        assert_eq!(e[0].location, "trace_uprobe");
        assert_eq!(e[0].command, "p:g/eeee /tmp/np_t:0x1139");
        assert_eq!(e[1].command, "p:g/ok /tmp/np_t:0x1139 a=%zz");
        assert_eq!(e[1].caret, Some(25));
        assert!(parse_error_log("garbage\n[x\n").is_empty());
    }

    #[test]
    fn parses_listing() {
        let l = parse_listing(
            "p:g1/add /tmp/np_t:0x0000000000001139 a=%di:s32\nr:g2/ret /x:0x10\nnonsense\n",
        );
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].group, "g1");
        assert_eq!(l[0].event, "add");
        assert_eq!(l[1].kind, 'r');
    }

    proptest::proptest! {
        #[test]
        fn no_validated_line_contains_a_newline(path in ".*", ev in ".*", expr in ".*") {
            let Ok(group) = GroupName::new("g") else { unreachable!() };
            if let Ok(event) = EventName::new(&ev) {
                if let Ok(d) = ProbeDef::new(ProbeKind::Entry, group, event, Path::new(&path), FileOffset(1), vec![FetchArg::new("a", expr, FetchType::Int(IntType::U64))]) {
                    let line = d.to_string();
                    proptest::prop_assert!(!line.contains('\n') && !line.contains('\r'));
                    // The kernel sees exactly 3 words: head, location, one argument.
                    let words = line.as_bytes().split(|&b| kernel_isspace(b)).filter(|w| !w.is_empty());
                    proptest::prop_assert_eq!(words.count(), 3);
                }
            }
        }

        #[test]
        fn error_log_parser_never_panics(s in ".*") {
            let _ = parse_error_log(&s);
            let _ = parse_listing(&s);
        }
    }
}
