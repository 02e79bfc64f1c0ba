//! Reads a single-file bundle's manifest from the app host file (bounds-checked; never panics
//! on hostile bytes).
//!
//! Layout (dotnet/runtime `src/native/corehost/bundle/header.cpp`, `file_entry.cpp`,
//! `src/installer/managed/Microsoft.NET.HostModel/Bundle/Manifest.cs`), little-endian:
//! - somewhere in the app host: `i64 header_offset` followed by [`SIGNATURE`];
//! - at `header_offset`: `u32 major, u32 minor, i32 file_count`, the bundle id as a
//!   `BinaryWriter` string (7-bit encoded length, then UTF-8), and from major 2 on
//!   `i64 deps_offset, i64 deps_size, i64 runtimeconfig_offset, i64 runtimeconfig_size,
//!   u64 flags`;
//! - then `file_count` entries: `i64 offset, i64 size`, from major 6 on `i64 compressed_size`,
//!   `u8 type`, the relative path as a `BinaryWriter` string.

use super::types::{
    BundleEntry, BundleFileType, BundleHeader, BundleLocation, BundleManifest,
    KNOWN_MAJOR_VERSIONS, SIGNATURE,
};
use crate::addr::FileOffset;
use crate::bytes::{slice, u32_at, u64_at, u8_at};

/// Longest relative path accepted (the host reads paths into `pal::string_t` without a limit;
/// this only stops a corrupt length from claiming the rest of the file).
const MAX_PATH_BYTES: usize = 4096;

/// Where the bundle header starts, from the offset stored before the signature; `None` when
/// the signature is absent or no occurrence of it carries a plausible offset: 0 (a plain app
/// host, not a bundle), or one outside the part of the file after the signature (the bundler
/// appends the files and then the manifest to the app host: `Bundler.GenerateBundle` in
/// `Microsoft.NET.HostModel`). The signature's bytes also occur as a constant in programs that
/// look for bundles (netprobe itself), with arbitrary bytes before them: those are no bundles,
/// and a bundle whose manifest would lie past the end of the file is read as none either.
pub fn header_offset(data: &[u8]) -> Option<u64> {
    memchr::memmem::find_iter(data, &SIGNATURE).find_map(|sig| {
        let off = u64_at(data, sig.checked_sub(8)?)?;
        (off > sig as u64 && off < data.len() as u64).then_some(off)
    })
}

/// A `BinaryWriter` string at `pos` (7-bit encoded length, UTF-8 bytes); returns the string
/// and the position after it.
fn read_string(data: &[u8], pos: usize) -> Result<(String, usize), String> {
    let mut len: u64 = 0;
    let mut p = pos;
    for shift in (0..35).step_by(7) {
        let b = u8_at(data, p).ok_or("string length cut short")?;
        p += 1;
        len |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            let len = usize::try_from(len).map_err(|_| "string length overflows")?;
            if len > MAX_PATH_BYTES {
                return Err(format!("string of {len} bytes"));
            }
            let bytes = slice(data, p, len).ok_or("string cut short")?;
            let s = std::str::from_utf8(bytes).map_err(|_| "string is not UTF-8")?;
            return Ok((s.to_string(), p + len));
        }
    }
    Err("string length uses more than 5 bytes".into())
}

/// An `i64` that must not be negative.
fn read_size(data: &[u8], pos: usize, what: &str) -> Result<u64, String> {
    let v = u64_at(data, pos).ok_or_else(|| format!("{what} cut short"))?;
    if v > i64::MAX as u64 {
        return Err(format!("{what} is negative"));
    }
    Ok(v)
}

/// Parses the manifest of the bundle in `data`. `Ok(None)` when `data` is not a bundle (no
/// signature, or a zero header offset); `Err(what)` when it is one but the header is cut
/// short, inconsistent, or of a format version netprobe does not know.
pub fn parse(data: &[u8]) -> Result<Option<BundleManifest>, ParseError> {
    let Some(header_offset) = header_offset(data) else {
        return Ok(None);
    };
    parse_at(data, header_offset).map(Some)
}

/// Parses the manifest whose header starts at `header_offset` (see [`parse`]).
pub fn parse_at(data: &[u8], header_offset: u64) -> Result<BundleManifest, ParseError> {
    parse_checked(data, header_offset)
}

/// Why a manifest could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// A format version netprobe does not know (see [`KNOWN_MAJOR_VERSIONS`]).
    UnknownVersion { major: u32, minor: u32 },
    /// Cut short or inconsistent: what is wrong.
    Malformed(String),
}

impl From<String> for ParseError {
    fn from(s: String) -> ParseError {
        ParseError::Malformed(s)
    }
}

impl From<&str> for ParseError {
    fn from(s: &str) -> ParseError {
        ParseError::Malformed(s.to_string())
    }
}

fn parse_checked(data: &[u8], header_offset: u64) -> Result<BundleManifest, ParseError> {
    let start = usize::try_from(header_offset).map_err(|_| "header offset overflows")?;
    let fixed = slice(data, start, 12)
        .ok_or_else(|| format!("bundle header offset {header_offset:#x} lies outside the file"))?;
    let major_version = u32_at(fixed, 0).unwrap_or(0);
    let minor_version = u32_at(fixed, 4).unwrap_or(0);
    let file_count = u32_at(fixed, 8).unwrap_or(0) as i32;
    if !KNOWN_MAJOR_VERSIONS.contains(&major_version) || minor_version != 0 {
        return Err(ParseError::UnknownVersion {
            major: major_version,
            minor: minor_version,
        });
    }
    if file_count <= 0 {
        return Err(format!("bundle header claims {file_count} files").into());
    }
    let (bundle_id, mut pos) =
        read_string(data, start + 12).map_err(|e| format!("bundle id: {e}"))?;
    let mut deps_json = None;
    let mut runtimeconfig_json = None;
    let mut flags = 0;
    if major_version >= 2 {
        let loc = |at: usize, what: &str| -> Result<Option<BundleLocation>, String> {
            let offset = read_size(data, at, what)?;
            let size = read_size(data, at + 8, what)?;
            Ok((offset != 0).then_some(BundleLocation {
                offset: FileOffset(offset),
                size,
            }))
        };
        deps_json = loc(pos, "deps.json location")?;
        runtimeconfig_json = loc(pos + 16, "runtimeconfig.json location")?;
        flags = u64_at(data, pos + 32).ok_or("header flags cut short")?;
        pos += 40;
    }
    // Each entry takes at least 18 bytes: never reserve more than the file could hold.
    let mut entries = Vec::with_capacity((file_count as usize).min(data.len() / 18));
    for i in 0..file_count {
        let what = |f: &str| format!("entry {i}: {f}");
        let offset = read_size(data, pos, &what("offset"))?;
        let size = read_size(data, pos + 8, &what("size"))?;
        pos += 16;
        let mut compressed_size = 0;
        if major_version >= 6 {
            compressed_size = read_size(data, pos, &what("compressed size"))?;
            pos += 8;
        }
        let type_byte = u8_at(data, pos).ok_or_else(|| what("type cut short"))?;
        pos += 1;
        let file_type = BundleFileType::from_byte(type_byte)
            .ok_or_else(|| what(&format!("unknown file type {type_byte}")))?;
        let (path, next) = read_string(data, pos).map_err(|e| what(&format!("path: {e}")))?;
        pos = next;
        let entry = BundleEntry {
            offset: FileOffset(offset),
            size,
            compressed_size,
            file_type,
            path,
        };
        // file_entry_t::is_valid (file_entry.cpp): a positive offset; and the stored bytes must
        // lie inside the file, before the header that follows them.
        let end = offset.checked_add(entry.stored_size());
        if offset == 0 || end.is_none_or(|e| e > header_offset) {
            return Err(ParseError::Malformed(what(&format!(
                "{} at {offset:#x} with {} bytes lies outside the bundled data (header at {header_offset:#x})",
                entry.path,
                entry.stored_size()
            ))));
        }
        entries.push(entry);
    }
    Ok(BundleManifest {
        header: BundleHeader {
            offset: FileOffset(header_offset),
            major_version,
            minor_version,
            bundle_id,
            deps_json,
            runtimeconfig_json,
            flags,
        },
        entries,
    })
}
