//! The bytes of an assembly file: memory-mapped when opened from disk (only the pages the readers
//! touch are faulted in: about a third of CoreLib), or owned when handed over as a `Vec`.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::os::unix::io::AsRawFd;

pub(crate) enum FileBytes {
    Owned(Vec<u8>),
    /// A private read-only mapping of the whole file.
    Mapped {
        ptr: *const u8,
        len: usize,
    },
}

// SAFETY: the mapping is read-only and private; no one writes through it, so sharing the
// pointer across threads is as safe as sharing a `&[u8]`.
unsafe impl Send for FileBytes {}
unsafe impl Sync for FileBytes {}

impl FileBytes {
    /// Maps `file` read-only; falls back to reading it when it is empty or cannot be mapped
    /// (pipes, some special files).
    ///
    /// Like every reader of a memory-mapped file (blazesym, object), this assumes the file is not
    /// truncated while the assembly is alive: framework and app assemblies are not rewritten in
    /// place (a rewrite replaces the inode).
    pub(crate) fn open(mut file: File) -> io::Result<FileBytes> {
        let len = file.metadata()?.len();
        if len > 0 && len <= isize::MAX as u64 {
            // SAFETY: mapping a valid fd read-only and private with the file's length; the result
            // is checked against MAP_FAILED before use and unmapped exactly once in Drop.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len as usize,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                return Ok(FileBytes::Mapped {
                    ptr: ptr as *const u8,
                    len: len as usize,
                });
            }
        }
        let mut v = Vec::new();
        file.read_to_end(&mut v)?;
        Ok(FileBytes::Owned(v))
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            // SAFETY: ptr/len describe a live mapping of `len` readable bytes (see `open`).
            FileBytes::Mapped { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        if let FileBytes::Mapped { ptr, len } = self {
            // SAFETY: unmapping the mapping created in `open`, once.
            unsafe {
                libc::munmap(*ptr as *mut libc::c_void, *len);
            }
        }
    }
}
