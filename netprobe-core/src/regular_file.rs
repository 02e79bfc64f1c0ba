//! Opening a file that a target controls: without blocking, regular files only, and read with a
//! cap on its size.
//!
//! netprobe runs as root and opens paths that other users choose (a process's mapped files, the
//! `--runtimeconfig` of its command line, its perf maps). Such a path may name a FIFO (`open(2)`
//! of a FIFO for reading blocks until a writer appears, and a read then waits for data), a
//! character device (`/dev/zero` never ends), a directory or a socket. So every such file is
//! opened with `O_NONBLOCK | O_NOCTTY` (open(2): `O_NONBLOCK` makes the open of a FIFO return at
//! once, `O_NOCTTY` keeps a terminal from becoming netprobe's controlling terminal; std adds
//! `O_CLOEXEC`), the open descriptor is `fstat`ed (fstat(2), not the path, so a file swapped in
//! between is not missed), and anything but a regular file is refused before one byte is read.
//! Reads of regular files stop at a cap chosen per kind of file ([`read_capped`]).

use crate::error::{Error, Result};
use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Opens `path` read-only without blocking and checks it is a regular file ([`check`]).
/// Errors: [`Error::NotRegularFile`], or the open error naming the path.
pub fn open(path: &Path) -> Result<(File, Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::io(path, e))?;
    let meta = check(&file, path)?;
    Ok((file, meta))
}

/// The metadata of the open `file` (fstat of the descriptor) when it is a regular file;
/// [`Error::NotRegularFile`] naming `path` and what it is otherwise.
pub fn check(file: &File, path: &Path) -> Result<Metadata> {
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    let ty = meta.file_type();
    if ty.is_file() {
        return Ok(meta);
    }
    let kind = if ty.is_fifo() {
        "FIFO (named pipe)"
    } else if ty.is_char_device() {
        "character device"
    } else if ty.is_block_device() {
        "block device"
    } else if ty.is_dir() {
        "directory"
    } else if ty.is_socket() {
        "socket"
    } else {
        "special file"
    };
    Err(Error::NotRegularFile {
        path: path.to_path_buf(),
        kind,
    })
}

/// Opens the file `name` in the open folder `dir` read-only, without blocking and without
/// following a symlink at `name` (`O_NOFOLLOW`: a symlink the target put there is refused, not
/// followed to a file outside), and checks it is a regular file ([`check`]); `shown` names it in
/// errors. `name` must be one path component.
pub fn open_at(dir: &std::os::fd::OwnedFd, name: &str, shown: &Path) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    if name.contains('/') || name == ".." {
        return Err(Error::io(
            shown,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"),
        ));
    }
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| Error::io(shown, e.into()))?;
    let file = File::from(fd);
    check(&file, shown)?;
    Ok(file)
}

/// Opens, read-only, the regular file `path` names as seen from the open root directory `root`:
/// resolved inside it (`openat2(2)` with `RESOLVE_IN_ROOT`: an absolute symlink or `..` stays
/// inside it) and with `RESOLVE_NO_MAGICLINKS` (no `/proc/...` link on the way leaves it), without
/// blocking, and refused unless it is a regular file ([`check`]); `shown` names it in errors.
pub fn open_in_root(root: &std::os::fd::OwnedFd, path: &Path, shown: &Path) -> Result<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let fd = rustix::fs::openat2(
        root,
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| Error::io(shown, e.into()))?;
    let file = File::from(fd);
    check(&file, shown)?;
    Ok(file)
}

/// Caps on the files netprobe reads whole, by kind. Each is far above what the runtime or a
/// tool writes, and low enough that a hostile file costs at most that much memory.
pub mod cap {
    /// A `runtimeconfig.json`: the .NET host's own are under 1 KiB (framework name, version,
    /// a few properties).
    pub const RUNTIMECONFIG_JSON: u64 = 1 << 20;
    /// A Docker `config.v2.json` (a container's whole configuration, environment included).
    pub const DOCKER_CONFIG_JSON: u64 = 16 << 20;
    /// A perf map (`/tmp/perf-PID.map`, a crossgen map): one ~100-byte line per JIT-compiled or
    /// precompiled method; a process with millions of methods stays well under this.
    pub const PERF_MAP: u64 = 512 << 20;
    /// A jitdump (`/tmp/jit-PID.dump`): the perf map's records plus each method's code bytes.
    pub const JITDUMP: u64 = 1 << 30;
    /// A `/proc/PID/maps` saved to a file (`netprobe offsets --maps FILE`): one line per mapping,
    /// at most `vm.max_map_count` (65,530 by default) lines of at most a few KiB.
    pub const MAPS_TEXT: u64 = 256 << 20;
    /// A shared library read whole for its version string (`libcoreclr.so` is ~7 MB).
    pub const LIBRARY: u64 = 1 << 30;
}

/// The bytes of the regular file at `path` ([`open`]), at most `cap` of them; past the cap,
/// [`Error::TooLarge`] naming the file and `what` it was read as. The size `fstat` gives is
/// checked first, and the read itself stops one byte past the cap (a file growing while read, or
/// a procfs-like file claiming size 0, cannot make it read more).
pub fn read_capped(path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>> {
    let (file, _) = open(path)?;
    read_open_capped(file, path, cap, what)
}

/// [`read_capped`] of a file already opened and checked (by [`open`], or inside a process's root
/// by [`crate::process::Process::open_in_root`]); `path` names it in errors.
pub fn read_open_capped(file: File, path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>> {
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    let too_large = || Error::TooLarge {
        path: path.to_path_buf(),
        what,
        cap,
    };
    if meta.len() > cap {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let err = read_capped(&fifo, 10, "test file").unwrap_err().to_string();
        assert!(err.contains("FIFO"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn devices_and_directories_are_refused_by_kind() {
        let err = read_capped(Path::new("/dev/zero"), 10, "test file").unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = read_capped(dir.path(), 10, "test file").unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
    }

    #[test]
    fn the_cap_is_a_one_line_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_capped(&f, 10, "test file").unwrap(), b"0123456789");
        let err = read_capped(&f, 9, "test file").unwrap_err().to_string();
        assert!(err.contains("more than 9 bytes"), "{err}");
        // procfs files claim size 0: the read itself stops at the cap.
        let err = read_capped(Path::new("/proc/self/maps"), 9, "maps")
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 9 bytes"), "{err}");
    }
}
