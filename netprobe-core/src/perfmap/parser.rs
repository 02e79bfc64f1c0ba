//! Parsers for the map files runtimes and crossgen write.
//!
//! - `ADDR SIZE NAME` lines: crossgen `/CreatePerfMap` files (`fixtures/recorded/mapfiles/crossgen-calculate-echo-value.map`:
//!   `0000000000021900 9 instance string [...]`) and the runtime's `/tmp/perf-PID.map` (the perf
//!   JIT interface, `tools/perf/Documentation/jit-interface.txt`: "START SIZE symbolname", hex).
//!   .NET Core 3.1 writes addresses as bare upper-case hex, .NET 8 with `0x` (recorded here in
//!   `fixtures/recorded/`); sizes are hex in both.
//! - `/tmp/perfinfo-PID.map` records `ImageLoad;PATH;{MVID};BASE;` (`fixtures/recorded/perfinfo/`;
//!   dotnet/runtime `src/coreclr/vm/perfinfo.cpp`):
//!   .NET 8 prints BASE as `0x7f...` and `(nil)` for IL-only images, 3.1 as `00007FE0A9B00000`
//!   and all zeros.

use super::types::{ImageLoad, MapLine};
use crate::addr::ImageBase;
use std::path::PathBuf;

/// A line that is not `ADDR SIZE NAME`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct MapFileError {
    /// 1-based line number.
    pub line: usize,
    pub what: &'static str,
}

/// Parses every `ADDR SIZE NAME` line; blank lines are skipped. A last line without its newline
/// is parsed too when complete; `Err` names the first malformed line.
///
/// A runtime appends to its perf map while we read it, so a reader of a live file should cut the
/// text after its last newline first ([`complete_lines`]).
pub fn parse_map_lines(text: &[u8]) -> Result<Vec<MapLine>, MapFileError> {
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .map(|(i, l)| parse_map_line(l).map_err(|what| MapFileError { line: i + 1, what }))
        .collect()
}

/// The text up to and including its last newline (drops a line still being written).
pub fn complete_lines(text: &[u8]) -> &[u8] {
    match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => &text[..=i],
        None => &[],
    }
}

/// Parses one `ADDR SIZE NAME` line (a trailing `\r` is ignored).
pub fn parse_map_line(line: &[u8]) -> Result<MapLine, &'static str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8")?;
    let text = text.trim_start();
    let (addr, rest) = text.split_once(' ').ok_or("missing size")?;
    let rest = rest.trim_start();
    let (size, name) = rest.split_once(' ').ok_or("missing name")?;
    let name = name.trim_start();
    if name.is_empty() {
        return Err("missing name");
    }
    Ok(MapLine {
        addr: parse_hex(addr).ok_or("bad address")?,
        size: parse_hex(size).ok_or("bad size")?,
        name: name.to_string(),
    })
}

/// Hex with or without `0x`/`0X`, any case, at most 16 digits.
fn parse_hex(s: &str) -> Option<u64> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The `ImageLoad` records of a perfinfo file, in order. Other record kinds and malformed lines
/// are skipped: the file is informational and the runtime may add record kinds.
pub fn parse_perfinfo(text: &[u8]) -> Vec<ImageLoad> {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let line = std::str::from_utf8(line).ok()?;
            let mut f = line.split(';');
            if f.next()? != "ImageLoad" {
                return None;
            }
            let path = f.next()?;
            let mvid = f.next()?;
            let base = f.next()?;
            let base = match base {
                "(nil)" => None,
                b => match parse_hex(b)? {
                    0 => None,
                    v => Some(ImageBase(v)),
                },
            };
            Some(ImageLoad {
                path: PathBuf::from(path),
                mvid: mvid.to_string(),
                base,
            })
        })
        .collect()
}
