//! Parser and renderer for `/proc/PID/maps`.
//!
//! Format (`proc(5)`; kernel `fs/proc/task_mmu.c`, `show_vma_header_prefix`):
//! `START-END PERMS OFFSET MAJOR:MINOR INODE [PADDING NAME]`, all numbers lower-case hex except the
//! decimal inode; the name is padded to column 73 and printed with `seq_file_path(..., "\n")`, which
//! escapes a newline in the name as `\012`; an unlinked file gets ` (deleted)` appended; a mapping
//! without a name ends right after the inode and one space.
//!
//! Input is bytes, not `str`: file names need not be UTF-8. Every malformed line is an error with
//! its line number; nothing panics.

use super::types::{Device, MapPath, MapsEntry, Perms};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// A line of maps text that is not in the kernel's format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct MapsParseError {
    /// 1-based line number.
    pub line: usize,
    /// Which field is wrong.
    pub what: &'static str,
}

/// Parses a whole maps file. Empty lines are skipped. Returns the first malformed line's error.
pub fn parse_maps(text: &[u8]) -> Result<Vec<MapsEntry>, MapsParseError> {
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| parse_line(l).map_err(|what| MapsParseError { line: i + 1, what }))
        .collect()
}

/// Parses one maps line (without its newline). `Err` names the malformed field.
pub fn parse_line(line: &[u8]) -> Result<MapsEntry, &'static str> {
    let mut rest = line;
    let range = next_field(&mut rest).ok_or("missing address range")?;
    let dash = range
        .iter()
        .position(|&b| b == b'-')
        .ok_or("address range has no '-'")?;
    let start = parse_hex(&range[..dash]).ok_or("bad start address")?;
    let end = parse_hex(&range[dash + 1..]).ok_or("bad end address")?;
    if end < start {
        return Err("end address below start address");
    }
    let perms = parse_perms(next_field(&mut rest).ok_or("missing permissions")?)?;
    let offset = parse_hex(next_field(&mut rest).ok_or("missing offset")?).ok_or("bad offset")?;
    let dev_field = next_field(&mut rest).ok_or("missing device")?;
    let colon = dev_field
        .iter()
        .position(|&b| b == b':')
        .ok_or("device has no ':'")?;
    let major = parse_hex(&dev_field[..colon])
        .and_then(|v| u32::try_from(v).ok())
        .ok_or("bad device major")?;
    let minor = parse_hex(&dev_field[colon + 1..])
        .and_then(|v| u32::try_from(v).ok())
        .ok_or("bad device minor")?;
    let inode = parse_dec(next_field(&mut rest).ok_or("missing inode")?).ok_or("bad inode")?;
    let path = parse_name(rest);
    Ok(MapsEntry {
        start,
        end,
        perms,
        offset,
        dev: Device { major, minor },
        inode,
        path,
    })
}

/// Takes the next space-separated field (skipping leading spaces), leaving `rest` just after it.
fn next_field<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let s = *rest;
    let begin = s.iter().position(|&b| b != b' ')?;
    let s = &s[begin..];
    let len = s.iter().position(|&b| b == b' ').unwrap_or(s.len());
    let (field, tail) = s.split_at(len);
    *rest = tail;
    Some(field)
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let s = std::str::from_utf8(s).ok()?;
    u64::from_str_radix(s, 16).ok()
}

fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn parse_perms(s: &[u8]) -> Result<Perms, &'static str> {
    let [r, w, x, p] = s else {
        return Err("permissions are not 4 characters");
    };
    let flag = |c: u8, on: u8| match c {
        b'-' => Ok(false),
        c if c == on => Ok(true),
        _ => Err("bad permission character"),
    };
    Ok(Perms {
        read: flag(*r, b'r')?,
        write: flag(*w, b'w')?,
        exec: flag(*x, b'x')?,
        shared: match p {
            b's' => true,
            b'p' => false,
            _ => return Err("bad sharing flag (want 'p' or 's')"),
        },
    })
}

const DELETED: &[u8] = b" (deleted)";

fn parse_name(rest: &[u8]) -> MapPath {
    let begin = match rest.iter().position(|&b| b != b' ') {
        Some(b) => b,
        None => return MapPath::Anonymous,
    };
    let name = &rest[begin..];
    if name.len() >= 2 && name[0] == b'[' && name[name.len() - 1] == b']' {
        return MapPath::Pseudo {
            name: String::from_utf8_lossy(&name[1..name.len() - 1]).into_owned(),
        };
    }
    let (name, deleted) = match name.strip_suffix(DELETED) {
        Some(n) => (n, true),
        None => (name, false),
    };
    MapPath::File {
        path: PathBuf::from(OsString::from_vec(unescape_newlines(name))),
        deleted,
    }
}

/// `seq_file_path(m, file, "\n")` writes `\n` as the octal escape `\012`; undo that.
fn unescape_newlines(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        if name[i..].starts_with(b"\\012") {
            out.push(b'\n');
            i += 4;
        } else {
            out.push(name[i]);
            i += 1;
        }
    }
    out
}

/// Renders entries exactly as the kernel prints them (see the module doc), one line each.
pub fn render_maps(entries: &[MapsEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        render_line(e, &mut out);
        out.push(b'\n');
    }
    out
}

/// Renders one entry without its newline.
pub fn render_line(e: &MapsEntry, out: &mut Vec<u8>) {
    let mut head = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        head,
        "{:08x}-{:08x} {} {:08x} {:02x}:{:02x} {} ",
        e.start,
        e.end,
        e.perms.as_str(),
        e.offset,
        e.dev.major,
        e.dev.minor,
        e.inode
    );
    let line_start = out.len();
    out.extend_from_slice(head.as_bytes());
    let name: Vec<u8> = match &e.path {
        MapPath::Anonymous => return,
        MapPath::Pseudo { name } => format!("[{name}]").into_bytes(),
        MapPath::File { path, deleted } => {
            let mut n = Vec::new();
            for &b in path.as_os_str().as_bytes() {
                if b == b'\n' {
                    n.extend_from_slice(b"\\012");
                } else {
                    n.push(b);
                }
            }
            if *deleted {
                n.extend_from_slice(DELETED);
            }
            n
        }
    };
    // seq_setwidth(m, 25 + sizeof(void *) * 6 - 1) then seq_pad(m, ' '): pad the line to 72
    // columns, then one more space, then the name.
    let written = out.len() - line_start;
    if written < 72 {
        out.resize(out.len() + (72 - written), b' ');
    }
    out.push(b' ');
    out.extend_from_slice(&name);
}
