//! The bytes of a file being parsed: memory-mapped when possible, read otherwise.

use crate::error::{Error, Result};
use std::ops::Deref;
use std::path::Path;

/// A whole file's contents. Parsers borrow from it (zero-copy); nothing is copied for mapped
/// files.
pub enum FileBytes {
    /// Mapped read-only. Like every memory-mapped reader (ripgrep, blazesym), this assumes the file
    /// is not truncated while we read it; executables and libraries in use are not.
    Mapped(memmap2::Mmap),
    /// Read into memory (non-regular files, empty files, or bytes handed in by tests).
    Owned(Vec<u8>),
}

impl FileBytes {
    /// Opens `path` and maps it (or reads it when it cannot be mapped). Errors are
    /// [`Error::PermissionDenied`] or [`Error::Io`] naming the path.
    pub fn open(path: &Path) -> Result<FileBytes> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: read-only private mapping of a regular file; see the `Mapped` doc for the
            // truncation caveat every mmap-based reader shares.
            if let Ok(map) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(FileBytes::Mapped(map));
            }
        }
        std::fs::read(path)
            .map(FileBytes::Owned)
            .map_err(|e| Error::io(path, e))
    }

    /// Maps `len` bytes of `path` from `offset` (a bundled file inside a single-file bundle),
    /// read-only and without copying. [`Error::Malformed`] when the range is not inside the
    /// file; I/O errors as [`FileBytes::open`].
    pub fn open_range(path: &Path, offset: u64, len: u64) -> Result<FileBytes> {
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let file_len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if offset.checked_add(len).is_none_or(|end| end > file_len) {
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
        // SAFETY: read-only private mapping of a range of a regular file checked to lie inside
        // it (memmap2 aligns the offset to a page and hides the difference); same truncation
        // caveat as `open`.
        unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len_usize)
                .map(&file)
        }
        .map(FileBytes::Mapped)
        .map_err(|e| Error::io(path, e))
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(m) => m,
            FileBytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileBytes({} bytes)", self.len())
    }
}
