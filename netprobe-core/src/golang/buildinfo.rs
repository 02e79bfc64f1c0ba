//! `.go.buildinfo`: the Go version and the module information the linker embeds (Go 1.13+).
//!
//! Format (Go's `debug/buildinfo/buildinfo.go`, `cmd/link/internal/ld/data.go` `buildinfo`):
//! a 32-byte header, 16-byte aligned: the 14-byte magic `"\xff Go buildinf:"`, the pointer size
//! (byte 14) and a flags byte (15: bit 0 big-endian, bit 1 "strings inline").
//! - Go 1.18+ (inline): after the header, two strings, each a uvarint length then the bytes:
//!   the version (`go1.19.8`), then the module info.
//! - Before 1.18 (pointers): at offset 16 and `16 + ptrsize`, the addresses of two Go string
//!   headers `{data pointer, length}` in the binary's data; those point at the bytes.
//!
//! The module info is framed by two 16-byte sentinels and is tab-separated lines: `path` (main
//! package), `mod` (main module path, version, sum), `dep`, `=>`, `build` (settings).

use crate::addr::VirtAddr;
use crate::bytes;
use crate::elf::LoadSegments;
use serde::Serialize;
use std::fmt;

/// The 14-byte magic that opens the build-info blob.
pub const MAGIC: &[u8; 14] = b"\xff Go buildinf:";

/// Longest version or module string accepted (Go's reader rejects anything over 1 MiB too).
const MAX_STRING: u64 = 1 << 20;

/// A Go release as `go version` prints it, parsed for comparisons.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct GoVersion {
    /// The string as embedded, e.g. `go1.19.8`, `go1.21rc2`, `devel go1.22-abc Tue ...`.
    pub raw: String,
    pub major: u32,
    pub minor: u32,
    /// Patch release (0 when absent, as in `go1.20` or `go1.21rc2`).
    pub patch: u32,
}

impl GoVersion {
    /// Parses the first `goMAJOR.MINOR[.PATCH]` in `raw` (so `devel go1.22-abc ...` reads as
    /// 1.22.0); `None` when there is none.
    pub fn parse(raw: &str) -> Option<GoVersion> {
        let at = raw.find("go1.").or_else(|| raw.find("go2."))?;
        let rest = &raw[at + 2..];
        let mut parts = rest.splitn(3, '.');
        let major = leading_number(parts.next()?)?;
        let minor = leading_number(parts.next()?)?;
        let patch = parts.next().and_then(leading_number).unwrap_or(0);
        Some(GoVersion {
            raw: raw.to_string(),
            major,
            minor,
            patch,
        })
    }

    /// A version from numbers (for tests and for the pclntab's lower bound).
    pub fn new(major: u32, minor: u32, patch: u32) -> GoVersion {
        GoVersion {
            raw: format!("go{major}.{minor}.{patch}"),
            major,
            minor,
            patch,
        }
    }

    /// Whether this release is at least `major.minor`.
    pub fn at_least(&self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

impl fmt::Display for GoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

fn leading_number(s: &str) -> Option<u32> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    s.get(..digits)?.parse().ok()
}

/// What `.go.buildinfo` says about a binary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BuildInfo {
    /// The Go version string as embedded (`go1.19.8`).
    pub go_version: String,
    /// Main package path (`path` line), e.g. `netprobe.example/sampleapp` or
    /// `github.com/docker/docker/cmd/dockerd`; `None` when the binary has no module info.
    pub main_package: Option<String>,
    /// Main module path (`mod` line); `None` outside module mode (`go build file.go`) or when
    /// there is no module info.
    pub main_module: Option<String>,
    /// Main module version (`(devel)` for local builds); `None` as for `main_module`.
    pub main_module_version: Option<String>,
    /// The module info text, sentinels removed (empty when absent).
    pub mod_info: String,
}

impl BuildInfo {
    /// Parses the blob that starts at `blob[0]` (the magic). `file` and `segments` resolve the
    /// pre-1.18 pointers (virtual addresses) to file bytes; they are unused for 1.18+.
    ///
    /// Returns `None` when the magic is absent, the header or a string is cut off, a pointer
    /// leads outside the file, the version is empty, or the blob is big-endian.
    pub fn parse(blob: &[u8], file: &[u8], segments: &LoadSegments) -> Option<BuildInfo> {
        if blob.get(..MAGIC.len())? != MAGIC {
            return None;
        }
        let ptr_size = *blob.get(14)?;
        let flags = *blob.get(15)?;
        if flags & 1 != 0 {
            return None; // big-endian: not an x86 binary
        }
        let (version, mod_info) = if flags & 2 != 0 {
            let rest = blob.get(32..)?;
            let (version, rest) = inline_string(rest)?;
            let (mod_info, _) = inline_string(rest)?;
            (version.to_vec(), mod_info.to_vec())
        } else {
            let p = u64::from(ptr_size);
            let version_ptr = bytes::word_at(blob, 16, ptr_size)?;
            let mod_ptr = bytes::word_at(blob, 16 + p, ptr_size)?;
            let version = pointed_string(file, segments, version_ptr, ptr_size)?;
            let mod_info = pointed_string(file, segments, mod_ptr, ptr_size).unwrap_or_default();
            (version.to_vec(), mod_info.to_vec())
        };
        let go_version = String::from_utf8(version).ok()?;
        if go_version.is_empty() {
            return None;
        }
        let mod_info = String::from_utf8_lossy(&strip_sentinels(&mod_info)).into_owned();
        let mut info = BuildInfo {
            go_version,
            main_package: None,
            main_module: None,
            main_module_version: None,
            mod_info,
        };
        for line in info.mod_info.lines() {
            let mut fields = line.split('\t');
            match fields.next() {
                Some("path") => info.main_package = fields.next().map(str::to_string),
                Some("mod") => {
                    info.main_module = fields.next().map(str::to_string);
                    info.main_module_version = fields.next().map(str::to_string);
                }
                _ => {}
            }
        }
        Some(info)
    }

    /// The version, parsed; `None` when the string names no `goX.Y` release.
    pub fn version(&self) -> Option<GoVersion> {
        GoVersion::parse(&self.go_version)
    }

    /// Finds the blob in `file`: the `.go.buildinfo` section when `section` gives its file range,
    /// else the first 16-byte-aligned magic anywhere in the file (the linker aligns it so).
    /// Returns the bytes from the magic to the end of the file; `None` when there is no magic.
    pub fn locate(file: &[u8], section: Option<(u64, u64)>) -> Option<&[u8]> {
        if let Some((off, size)) = section {
            if let Some(sec) = bytes::slice(file, off, size) {
                if sec.starts_with(MAGIC) {
                    return bytes::tail(file, off);
                }
            }
        }
        memchr::memmem::find_iter(file, MAGIC)
            .find(|at| at % 16 == 0)
            .and_then(|at| file.get(at..))
    }
}

/// A uvarint-length-prefixed string at the front of `data`, and what follows it.
fn inline_string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, n) = bytes::uvarint(data)?;
    if len > MAX_STRING {
        return None;
    }
    let rest = data.get(n..)?;
    let len = usize::try_from(len).ok()?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// The bytes of the Go string whose header `{ptr, len}` lives at virtual address `header_addr`.
fn pointed_string<'f>(
    file: &'f [u8],
    segments: &LoadSegments,
    header_addr: u64,
    ptr_size: u8,
) -> Option<&'f [u8]> {
    let header_off = segments.file_offset(VirtAddr(header_addr))?.0;
    let data_addr = bytes::word_at(file, header_off, ptr_size)?;
    let len = bytes::word_at(file, header_off.checked_add(u64::from(ptr_size))?, ptr_size)?;
    if len > MAX_STRING {
        return None;
    }
    if len == 0 {
        return Some(&[]);
    }
    let data_off = segments.file_offset(VirtAddr(data_addr))?.0;
    bytes::slice(file, data_off, len)
}

/// Module info is framed by 16-byte sentinels (`cmd/go/internal/modload`, infoStart/infoEnd);
/// Go's reader strips them when the text is at least 33 bytes and byte `len-17` is a newline,
/// and otherwise treats the module info as absent.
fn strip_sentinels(mod_info: &[u8]) -> Vec<u8> {
    let n = mod_info.len();
    if n >= 33 && mod_info.get(n - 17) == Some(&b'\n') {
        mod_info.get(16..n - 16).unwrap_or_default().to_vec()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        let v = GoVersion::parse("go1.19.8").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 19, 8));
        let v = GoVersion::parse("go1.20").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 20, 0));
        let v = GoVersion::parse("go1.21rc2").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (1, 21, 0));
        let v = GoVersion::parse("devel go1.22-4a7f3ac8eb Tue Nov 1 +0000").unwrap();
        assert_eq!((v.major, v.minor), (1, 22));
        assert!(GoVersion::parse("gccgo").is_none());
        assert!(v.at_least(1, 17) && !v.at_least(1, 23));
    }

    fn sentinel_wrap(text: &str) -> Vec<u8> {
        let mut v = vec![0x30u8; 16];
        v.extend_from_slice(text.as_bytes());
        v.extend_from_slice(&[0xf9u8; 16]);
        v
    }

    fn inline_blob(version: &str, mod_info: &[u8]) -> Vec<u8> {
        let mut blob = MAGIC.to_vec();
        blob.push(8);
        blob.push(2);
        blob.resize(32, 0);
        blob.push(version.len() as u8);
        blob.extend_from_slice(version.as_bytes());
        let mut len = mod_info.len();
        while len >= 0x80 {
            blob.push((len as u8) | 0x80);
            len >>= 7;
        }
        blob.push(len as u8);
        blob.extend_from_slice(mod_info);
        blob
    }

    #[test]
    fn inline_format_with_module() {
        let mod_info = sentinel_wrap(
            "path\tnetprobe.example/sampleapp\nmod\tnetprobe.example/sampleapp\t(devel)\t\nbuild\t-compiler=gc\n",
        );
        let blob = inline_blob("go1.19.8", &mod_info);
        let info = BuildInfo::parse(&blob, &blob, &LoadSegments::default()).unwrap();
        assert_eq!(info.go_version, "go1.19.8");
        assert_eq!(
            info.main_package.as_deref(),
            Some("netprobe.example/sampleapp")
        );
        assert_eq!(
            info.main_module.as_deref(),
            Some("netprobe.example/sampleapp")
        );
        assert_eq!(info.main_module_version.as_deref(), Some("(devel)"));
    }

    #[test]
    fn inline_format_without_module_info() {
        let blob = inline_blob("go1.20.4", b"");
        let info = BuildInfo::parse(&blob, &blob, &LoadSegments::default()).unwrap();
        assert_eq!(info.go_version, "go1.20.4");
        assert_eq!(info.main_module, None);
    }

    #[test]
    fn rejects_big_endian_and_cut_blobs() {
        let mut blob = inline_blob("go1.20.4", b"");
        blob[15] |= 1;
        assert!(BuildInfo::parse(&blob, &blob, &LoadSegments::default()).is_none());
        let blob = inline_blob("go1.20.4", b"");
        assert!(BuildInfo::parse(&blob[..36], &blob, &LoadSegments::default()).is_none());
    }
}
