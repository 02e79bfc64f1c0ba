//! The words of a probe line the kernel reads as names and paths: [`GroupName`], [`EventName`]
//! (kernel `is_good_name`, at most [`MAX_NAME_LEN`] bytes) and [`ProbePath`] (absolute, UTF-8,
//! nothing the kernel's `isspace()` is true for, no control character, no `#`), each checked
//! on construction so no value can end a word or a line (`super`'s table of rules).

use super::MAX_NAME_LEN;
use crate::error::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};

pub(in crate::backend::tracefs) fn invalid(
    what: &'static str,
    value: &str,
    why: impl Into<String>,
) -> Error {
    Error::InvalidProbe {
        what,
        value: value.to_string(),
        why: why.into(),
    }
}

pub(in crate::backend::tracefs) fn check_identifier(
    what: &'static str,
    s: &str,
    max: usize,
) -> Result<()> {
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
pub(in crate::backend::tracefs) fn kernel_split(text: &str) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
