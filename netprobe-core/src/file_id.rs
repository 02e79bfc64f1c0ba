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

/// The device and inode the kernel maps for `path`, as `/proc/PID/maps` shows them. For a file on
/// a stacked file system this is the file underneath: overlayfs, the root of every container,
/// maps the real file (`ovl_mmap` in the kernel's `fs/overlayfs/file.c`), and uprobes sit on that
/// same real inode (`uprobe_register` is given `d_real_inode`, `kernel/trace/trace_uprobe.c`).
/// Two containers of one image reach one such file through two overlay mounts whose `st_dev`
/// differ; here they agree, which tells that one breakpoint serves both. Found by mapping one page
/// of the file and reading this process's own maps line for it. `None` for what is not a
/// non-empty regular file, or cannot be opened or mapped.
pub fn inode_as_mapped(path: &Path) -> Option<(crate::maps::Device, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: a FIFO put where a file was expected must not hang the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    let page = crate::guarded_map::GuardedMap::new(&file, 0, 4096.min(meta.len() as usize)).ok()?;
    let at = page.bytes().as_ptr() as u64;
    let maps = std::fs::read("/proc/self/maps");
    drop(page);
    let entries = crate::maps::parse_maps(&maps.ok()?).ok()?;
    let e = entries.iter().find(|e| e.start == at)?;
    Some((e.dev, e.inode))
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
    fn the_mapped_inode_is_the_file_stat_names_on_a_plain_file_system() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let m = std::fs::metadata(&exe).unwrap();
        let (dev, ino) = inode_as_mapped(&exe).unwrap();
        // On overlayfs (a container) st_dev is the overlay's, the mapped device the layer's.
        if std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|t| !t.contains(" overlay ")) {
            assert_eq!(dev, crate::maps::Device::from_st_dev(m.dev()));
        }
        assert_eq!(ino, m.ino());
        assert_eq!(inode_as_mapped(Path::new("/nonexistent")), None);
        assert_eq!(
            inode_as_mapped(Path::new("/proc/self")),
            None,
            "a directory"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(inode_as_mapped(&empty), None);
    }

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
