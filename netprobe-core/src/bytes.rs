//! The bytes of a file being parsed ([`FileBytes`]: memory-mapped, guarded against the file
//! shrinking under the mapping), and the one set of bounds-checked little-endian readers every parser of untrusted
//! bytes in netprobe uses (ELF, Go pclntab and build info, PE/ECMA-335, ReadyToRun, bundles).
//!
//! Out of bounds, every reader returns `None`: when any requested byte lies outside the slice,
//! when an offset does not fit in `usize`, or when an offset computation overflows. None of them
//! panics. Offsets are accepted as `usize`, `u32`, `u64` or a literal ([`Offset`]), as the formats store them.
//! All multi-byte reads are little-endian (x86-64 ELF, PE/COFF, Go's tables on amd64).

use crate::error::{Error, Result};
use crate::guarded_map::GuardedMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// A whole file's contents. Parsers borrow from it (zero-copy); nothing is copied for mapped
/// files.
///
/// Cloning a mapped file shares the mapping (no second `mmap`); cloning owned bytes copies them.
#[derive(Clone)]
pub enum FileBytes {
    /// Mapped read-only, guarded against the file shrinking under the mapping
    /// ([`crate::guarded_map`]): a read past the new end gives zeros, and
    /// [`FileBytes::check_unchanged`] then reports the change.
    Mapped(Arc<GuardedMap>),
    /// Read into memory (empty files, or bytes handed in by tests).
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Opens `path` without blocking, refuses anything but a regular file
    /// ([`crate::regular_file::open`]: a FIFO, a device, a directory or a socket is refused
    /// before one byte is read) and maps it. Errors are [`Error::NotRegularFile`],
    /// [`Error::PermissionDenied`] or [`Error::Io`] naming the path.
    pub fn open(path: &Path) -> Result<FileBytes> {
        let (file, _) = crate::regular_file::open(path)?;
        FileBytes::from_file(file, path)
    }

    /// The bytes of an already open `file` (opened by whatever means: `openat2`, a
    /// `/proc/PID/map_files` link), named `path` in errors. Checks the open descriptor is a
    /// regular file ([`crate::regular_file::check`]) and maps it whole; an empty file is empty
    /// bytes.
    pub fn from_file(file: std::fs::File, path: &Path) -> Result<FileBytes> {
        let meta = crate::regular_file::check(&file, path)?;
        let len = usize::try_from(meta.len())
            .map_err(|_| Error::malformed(path, "the file does not fit in memory"))?;
        if len == 0 {
            return Ok(FileBytes::Owned(Vec::new()));
        }
        GuardedMap::new(&file, 0, len)
            .map(|m| FileBytes::Mapped(Arc::new(m)))
            .map_err(|e| Error::io(path, e))
    }

    /// Maps `len` bytes of `path` from `offset` (a bundled file inside a single-file bundle),
    /// read-only and without copying. [`Error::Malformed`] when the range is not inside the
    /// file; other errors as [`FileBytes::open`].
    pub fn open_range(path: &Path, offset: u64, len: u64) -> Result<FileBytes> {
        let (file, meta) = crate::regular_file::open(path)?;
        if offset.checked_add(len).is_none_or(|end| end > meta.len()) {
            return Err(Error::malformed(
                path,
                format!("{len} bytes at {offset:#x} lie past the end of the file"),
            ));
        }
        let len_usize = usize::try_from(len)
            .map_err(|_| Error::malformed(path, format!("{len} bytes do not fit in memory")))?;
        if len_usize == 0 {
            return Ok(FileBytes::Owned(Vec::new()));
        }
        GuardedMap::new(&file, offset, len_usize)
            .map(|m| FileBytes::Mapped(Arc::new(m)))
            .map_err(|e| Error::io(path, e))
    }

    /// `Ok` unless the file shrank under the mapping while it was read (some read hit a page the
    /// file no longer had and got zeros): then [`Error::ChangedWhileRead`] naming `path`.
    /// Whoever parsed or scanned the bytes calls this before using what it found.
    pub fn check_unchanged(&self, path: &Path) -> Result<()> {
        match self {
            FileBytes::Mapped(m) if m.changed() => Err(Error::ChangedWhileRead {
                path: path.to_path_buf(),
            }),
            _ => Ok(()),
        }
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m.bytes(),
            FileBytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len())
    }
}

/// An offset or length as a file format stores it; converts to `usize` or says it cannot.
pub trait Offset: Copy {
    /// The value as a `usize`; `None` when it does not fit.
    fn index(self) -> Option<usize>;
}

impl Offset for usize {
    fn index(self) -> Option<usize> {
        Some(self)
    }
}

impl Offset for u64 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl Offset for u32 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

/// For integer literals (`u32_at(data, 4)`), which Rust types as `i32`: negative is `None`.
impl Offset for i32 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

/// `len` bytes at `offset`; `None` when any of them lies outside `data`.
pub fn slice(data: &[u8], offset: impl Offset, len: impl Offset) -> Option<&[u8]> {
    let start = offset.index()?;
    data.get(start..start.checked_add(len.index()?)?)
}

/// Everything from `offset` to the end (empty at the end); `None` when `offset` is past the end.
pub fn tail(data: &[u8], offset: impl Offset) -> Option<&[u8]> {
    data.get(offset.index()?..)
}

/// The `N` bytes at `offset` as an array; `None` when any lies outside `data`.
fn array<const N: usize>(data: &[u8], offset: impl Offset) -> Option<[u8; N]> {
    slice(data, offset, N)?.try_into().ok()
}

/// The byte at `offset`; `None` outside `data`.
pub fn u8_at(data: &[u8], offset: impl Offset) -> Option<u8> {
    data.get(offset.index()?).copied()
}

/// The little-endian `u16` at `offset`; `None` unless all 2 bytes are inside `data`.
pub fn u16_at(data: &[u8], offset: impl Offset) -> Option<u16> {
    array(data, offset).map(u16::from_le_bytes)
}

/// The little-endian `u32` at `offset`; `None` unless all 4 bytes are inside `data`.
pub fn u32_at(data: &[u8], offset: impl Offset) -> Option<u32> {
    array(data, offset).map(u32::from_le_bytes)
}

/// The little-endian `u64` at `offset`; `None` unless all 8 bytes are inside `data`.
pub fn u64_at(data: &[u8], offset: impl Offset) -> Option<u64> {
    array(data, offset).map(u64::from_le_bytes)
}

/// An unsigned little-endian word of `size` bytes (4 or 8, a pointer of a 32- or 64-bit
/// target) at `offset`, widened to `u64`; `None` for any other size or when out of bounds.
pub fn word_at(data: &[u8], offset: impl Offset, size: u8) -> Option<u64> {
    match size {
        4 => u32_at(data, offset).map(u64::from),
        8 => u64_at(data, offset),
        _ => None,
    }
}

/// The NUL-terminated byte string starting at `offset` (without the NUL); `None` when `offset`
/// is outside `data` or no NUL follows inside it. Not checked for UTF-8: callers decide.
pub fn cstr_at(data: &[u8], offset: impl Offset) -> Option<&[u8]> {
    let rest = tail(data, offset)?;
    let end = memchr::memchr(0, rest)?;
    rest.get(..end)
}

/// An unsigned LEB128 varint as Go's `encoding/binary.Uvarint` writes it, at the front of
/// `data`: `(value, bytes consumed)`. `None` when it is truncated or does not fit in 64 bits.
#[inline(always)]
pub fn uvarint(data: &[u8]) -> Option<(u64, usize)> {
    // Most values of a pc-value table fit in one byte.
    if let Some(&b) = data.first().filter(|&&b| b < 0x80) {
        return Some((u64::from(b), 1));
    }
    let mut value: u64 = 0;
    for (i, &b) in data.iter().enumerate().take(10) {
        let shift = 7 * i as u32;
        let low = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None; // more than 64 bits
        }
        value |= low << shift;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The decimal digits of `v`, as `{v}` formats them, written at the end of `buf`; returns them
/// (for text put together by hand, without the formatting machinery).
pub fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[at..];
        }
    }
}

/// A `usize` from a `u32` file field (lossless on the 64-bit targets netprobe supports).
pub fn us(v: u32) -> usize {
    v as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_stay_inside() {
        let d = [1u8, 2, 3, 4, 0, 5];
        assert_eq!(u16_at(&d, 0usize), Some(0x0201));
        assert_eq!(u32_at(&d, 0usize), Some(0x0403_0201));
        assert_eq!(u32_at(&d, 3usize), None);
        assert_eq!(u64_at(&d, 0usize), None);
        assert_eq!(slice(&d, usize::MAX, 2usize), None);
        assert_eq!(slice(&d, u64::MAX, 2u64), None);
        assert_eq!(cstr_at(&d, 2usize), Some(&[3u8, 4][..]));
        assert_eq!(cstr_at(&d, 5usize), None);
        assert_eq!(cstr_at(&d, 9usize), None);
        assert_eq!(tail(&d, 6usize), Some(&[][..]));
        assert_eq!(tail(&d, 7usize), None);
    }

    #[test]
    fn words_of_either_size() {
        let d = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(u32_at(&d, 4u64), Some(2));
        assert_eq!(u32_at(&d, 5u64), None);
        assert_eq!(u64_at(&d, 0u64), Some(0x2_0000_0001));
        assert_eq!(u64_at(&d, 1u64), None);
        assert_eq!(word_at(&d, 0u64, 4), Some(1));
        assert_eq!(word_at(&d, 0u64, 8), Some(0x2_0000_0001));
        assert_eq!(word_at(&d, 0u64, 3), None);
        assert_eq!(cstr_at(b"ab\0cd", 0u64), Some(&b"ab"[..]));
        assert_eq!(cstr_at(b"ab\0cd", 3u64), None);
    }

    #[test]
    fn uvarint_like_go() {
        assert_eq!(uvarint(&[0x05]), Some((5, 1)));
        assert_eq!(uvarint(&[0xac, 0x02]), Some((300, 2)));
        assert_eq!(uvarint(&[0x80]), None);
        assert_eq!(uvarint(&[0xff; 10]), None);
        assert_eq!(
            uvarint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Some((u64::MAX, 10))
        );
    }

    proptest! {
        /// Any offset and length, however large: a read is `None` or exactly the bytes asked for.
        #[test]
        fn never_panics_and_agrees_with_get(data in proptest::collection::vec(any::<u8>(), 0..64),
                                            off in any::<u64>(), len in 0u64..80) {
            let got = slice(&data, off, len);
            let want = usize::try_from(off).ok().and_then(|o| {
                data.get(o..o.checked_add(usize::try_from(len).ok()?)?)
            });
            prop_assert_eq!(got, want);
            prop_assert_eq!(u32_at(&data, off).is_some(), slice(&data, off, 4u64).is_some());
            let _ = (u64_at(&data, off), word_at(&data, off, 8), cstr_at(&data, off), tail(&data, off));
        }
    }
}
