//! What netprobe reads back from tracefs about probes: the `uprobe_events` listing (every
//! group's probes, for `clean` and `probe list`) and `error_log` entries (the kernel's reason for
//! a refused line). Both parsers skip what does not fit and never fail.

use super::{EventName, GroupName};
use crate::backend::tracefs::Tracefs;
use crate::error::Result;

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
        fn error_log_parser_never_panics(s in ".*") {
            let _ = parse_error_log(&s);
            let _ = parse_listing(&s);
        }
    }
}
