//! Types of `/proc/PID/maps` entries (`proc(5)`, "/proc/pid/maps").

use serde::Serialize;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Access permissions of a mapping: the `rwxp` / `rwxs` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Perms {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// `s` (shared) rather than `p` (private, copy-on-write).
    pub shared: bool,
}

impl Perms {
    /// The four-character column as the kernel prints it.
    pub fn as_str(&self) -> String {
        [
            if self.read { 'r' } else { '-' },
            if self.write { 'w' } else { '-' },
            if self.exec { 'x' } else { '-' },
            if self.shared { 's' } else { 'p' },
        ]
        .iter()
        .collect()
    }
}

/// The device column `major:minor` (hexadecimal in the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Device {
    pub major: u32,
    pub minor: u32,
}

impl Device {
    /// A `st_dev` number (stat(2)) as the major:minor pair `/proc/PID/maps` prints (glibc's
    /// `gnu_dev_major` and `gnu_dev_minor` encoding).
    pub fn from_st_dev(dev: u64) -> Device {
        Device {
            major: (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32,
            minor: ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32,
        }
    }
}

impl std::fmt::Display for Device {
    /// As `/proc/PID/maps` prints it: hexadecimal `major:minor` (fs/proc/task_mmu.c).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x}:{:02x}", self.major, self.minor)
    }
}

/// What a mapping maps.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MapPath {
    /// No name: anonymous memory (heap arenas, JIT code, thread stacks...).
    Anonymous,
    /// A bracketed kernel name: `[heap]`, `[stack]`, `[vdso]`, `[vvar]`, `[vsyscall]`,
    /// `[anon:NAME]`, `[stack:TID]`. Stored without the brackets.
    Pseudo { name: String },
    /// A file. `deleted` is set when the kernel appended ` (deleted)` (the file was unlinked or
    /// replaced after it was mapped; `memfd:` files always show it). Newlines in the name, which
    /// the kernel prints as `\012`, are decoded.
    File {
        #[serde(serialize_with = "serialize_path_lossy")]
        path: PathBuf,
        deleted: bool,
    },
}

fn serialize_path_lossy<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string_lossy())
}

impl MapPath {
    /// The file path for file mappings; `None` for anonymous and pseudo mappings.
    pub fn file(&self) -> Option<&Path> {
        match self {
            MapPath::File { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Whether this is a `memfd_create(2)` file (`/memfd:NAME (deleted)`).
    pub fn is_memfd(&self) -> bool {
        match self {
            MapPath::File { path, .. } => path.as_os_str().as_bytes().starts_with(b"/memfd:"),
            _ => false,
        }
    }
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MapsEntry {
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    pub perms: Perms,
    /// Offset into the file at which the mapping starts (0 for anonymous mappings). Full 64 bits.
    pub offset: u64,
    pub dev: Device,
    pub inode: u64,
    pub path: MapPath,
}

impl MapsEntry {
    /// Whether `addr` lies in `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    /// Size in bytes (`end - start`, 0 for a malformed entry with `end < start`).
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the mapping is empty (`end <= start`).
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// The file name (last path component) of a file mapping; `None` otherwise.
    pub fn file_name(&self) -> Option<&OsStr> {
        self.path.file().and_then(Path::file_name)
    }

    /// The identity of the mapped file: (device, inode); `None` for non-file mappings.
    pub fn file_id(&self) -> Option<(Device, u64)> {
        match self.path {
            MapPath::File { .. } => Some((self.dev, self.inode)),
            _ => None,
        }
    }
}
