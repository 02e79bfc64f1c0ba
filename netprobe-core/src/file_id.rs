//! Which file a path names, for caches: two paths of the same file (a bind mount,
//! `/proc/PID/root/...`) give the same [`FileId`]; a file replaced or rewritten on disk gives a
//! new one, so nothing parsed from the old contents is reused for the new.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The identity of one version of a file: device and inode (see stat(2)), with size and
/// modification time so a file rewritten in place counts as another file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

impl FileId {
    /// The identity of the file `path` names (symlinks followed); `None` when it cannot be
    /// stat'ed (missing, no permission).
    pub fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path)
            .ok()
            .map(|m| FileId::from_metadata(&m))
    }

    /// The identity described by metadata already read.
    pub fn from_metadata(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

impl std::fmt::Display for FileId {
    /// `device:inode fe:00 1234, 5678 bytes`, the device as `/proc/PID/maps` prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "device:inode {} {}, {} bytes",
            crate::maps::Device::from_st_dev(self.dev),
            self.ino,
            self.size
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_file_under_two_paths_is_one_id_and_a_rewrite_is_another() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"one").unwrap();
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let first = FileId::of(&a).unwrap();
        assert_eq!(Some(first), FileId::of(&b));
        std::fs::write(&a, b"longer").unwrap();
        assert_ne!(Some(first), FileId::of(&a));
        assert_eq!(None, FileId::of(&dir.path().join("missing")));
    }
}
