//! A live process seen through `/proc/PID` (`proc(5)`): its maps, its files (through
//! `/proc/PID/root`, so a process in a container is read in its own mount namespace), its
//! environment. Reads only.

use crate::error::{Error, Result};
use crate::maps::{parse_maps, MapsEntry};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A process, by pid, under a procfs mount (normally `/proc`).
#[derive(Clone, Debug)]
pub struct Process {
    pid: u32,
    dir: PathBuf,
}

impl Process {
    /// The process `pid` under `/proc`. Returns [`Error::NoSuchProcess`] when `/proc/PID` does not
    /// exist (not running, or not in this pid namespace).
    pub fn open(pid: u32) -> Result<Process> {
        Process::open_in(Path::new("/proc"), pid)
    }

    /// The process `pid` under another procfs mount (e.g. a container's `/proc`).
    pub fn open_in(procfs: &Path, pid: u32) -> Result<Process> {
        let dir = procfs.join(pid.to_string());
        match std::fs::symlink_metadata(&dir) {
            Ok(_) => Ok(Process { pid, dir }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::NoSuchProcess { pid }),
            Err(e) => Err(Error::io(&dir, e)),
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `Ok` when the process runs user-space code that a uprobe can hit. Errors:
    /// [`Error::KernelThread`] (`PF_KTHREAD` in the flags of `/proc/PID/stat`,
    /// `include/linux/sched.h`), [`Error::Exited`] (state `Z` or `X`: exited, not yet reaped by
    /// its parent; `proc(5)`), [`Error::NoSuchProcess`] when it is gone.
    pub fn check_runs_user_code(&self) -> Result<()> {
        let stat = self.read("stat")?;
        let Some((comm, flags)) = parse_stat(&stat) else {
            return Err(Error::malformed(
                self.dir.join("stat"),
                "no command name in parentheses",
            ));
        };
        let rest = after_comm(&stat);
        let mut fields = rest.split_ascii_whitespace();
        let state = fields.next().unwrap_or("");
        let parent = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if flags & PF_KTHREAD != 0 {
            return Err(Error::KernelThread {
                pid: self.pid,
                comm,
            });
        }
        if state == "Z" || state == "X" {
            // A main thread that called `pthread_exit` is a zombie while the other threads run
            // on; the kernel released its view of the memory map (`/proc/PID/maps` reads empty,
            // `exe` is gone), so the process cannot be read through its pid (fixture
            // `leader_exits.c`).
            let threads = self.threads_running();
            if threads > 0 {
                return Err(Error::MainThreadExited {
                    pid: self.pid,
                    comm,
                    threads,
                });
            }
            return Err(Error::Exited {
                pid: self.pid,
                comm,
                parent,
            });
        }
        Ok(())
    }

    /// Threads of the process other than its main one that have not exited (state neither `Z`
    /// nor `X` in `/proc/PID/task/TID/stat`); 0 when the task list cannot be read.
    pub fn threads_running(&self) -> usize {
        let Ok(tasks) = std::fs::read_dir(self.dir.join("task")) else {
            return 0;
        };
        tasks
            .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&tid| tid != self.pid)
            .filter(|tid| {
                let stat = std::fs::read(self.dir.join(format!("task/{tid}/stat")));
                stat.ok().is_some_and(|s| {
                    let rest = after_comm(&s);
                    let state = rest.split_ascii_whitespace().next();
                    state.is_some_and(|f| f != "Z" && f != "X")
                })
            })
            .count()
    }

    /// `/proc/PID`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn read(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.dir.join(name);
        std::fs::read(&path).map_err(|e| self.classify(&path, e))
    }

    /// A vanished `/proc/PID/...` entry means the process exited under us.
    fn classify(&self, path: &Path, e: io::Error) -> Error {
        if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc_esrch()) {
            Error::NoSuchProcess { pid: self.pid }
        } else {
            Error::io(path, e)
        }
    }

    /// Parsed `/proc/PID/maps`. Errors: [`Error::NoSuchProcess`] if it exited,
    /// [`Error::PermissionDenied`] without ptrace access, [`Error::Malformed`] if unparseable.
    pub fn maps(&self) -> Result<Vec<MapsEntry>> {
        let text = self.read("maps")?;
        parse_maps(&text).map_err(|e| Error::malformed(self.dir.join("maps"), e.to_string()))
    }

    /// The command name (`/proc/PID/comm`, without the newline).
    pub fn comm(&self) -> Result<String> {
        let mut c = String::from_utf8_lossy(&self.read("comm")?).into_owned();
        while c.ends_with('\n') {
            c.pop();
        }
        Ok(c)
    }

    /// The environment (`/proc/PID/environ`) as `(name, value)` pairs, in order. Entries without
    /// `=` are returned with an empty value. Empty when the process is a zombie or a kernel thread.
    pub fn environ(&self) -> Result<Vec<(OsString, OsString)>> {
        let raw = self.read("environ")?;
        Ok(raw
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| match e.iter().position(|&b| b == b'=') {
                Some(eq) => (
                    OsString::from_vec(e[..eq].to_vec()),
                    OsString::from_vec(e[eq + 1..].to_vec()),
                ),
                None => (OsString::from_vec(e.to_vec()), OsString::new()),
            })
            .collect())
    }

    /// `/proc/PID/root`: the process's root directory, which opens files in its mount namespace.
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// Whether the process sees files exactly as we do: the same mount namespace
    /// (`/proc/PID/ns/mnt`, `namespaces(7)`) and the same root directory (device and inode), so
    /// paths from its maps can be opened as they are. `false` when either differs (container,
    /// chroot, `unshare -m`) or cannot be compared (no permission): then its files are opened
    /// through `/proc/PID/root`, which is right in every case. The root directory alone is not
    /// enough: a process in another mount namespace usually has the same `/` inode but other
    /// mounts below it.
    pub fn shares_our_root(&self) -> bool {
        let same = |a: std::io::Result<std::fs::Metadata>,
                    b: std::io::Result<std::fs::Metadata>| {
            matches!((a, b), (Ok(x), Ok(y)) if x.dev() == y.dev() && x.ino() == y.ino())
        };
        same(
            std::fs::metadata(self.dir.join("ns/mnt")),
            std::fs::metadata("/proc/self/ns/mnt"),
        ) && same(std::fs::metadata(self.root()), std::fs::metadata("/"))
    }

    /// The path at which *we* open a file that the process knows as `path`: `path` itself when we
    /// share its root, else `/proc/PID/root/<path>` (works for a container's files from the host or
    /// from a sidecar in its pid namespace; proc(5), `/proc/pid/root`).
    pub fn host_path(&self, path: &Path) -> PathBuf {
        if self.shares_our_root() {
            path.to_path_buf()
        } else {
            let rel = path.strip_prefix("/").unwrap_or(path);
            self.root().join(rel)
        }
    }

    /// Opens, read-only, the regular file `path` names as the process sees it: resolved inside
    /// the process's root directory (`openat2(2)` with `RESOLVE_IN_ROOT` on `/proc/PID/root`), so
    /// an absolute symlink or `..` in the process's files stays inside its root instead of
    /// reaching netprobe's (the host's) files, and with `RESOLVE_NO_MAGICLINKS`, so no
    /// `/proc/...` link on the way leaves it either. For paths a target names (its argv, its
    /// environment, files beside them): `/proc/PID/root/PATH` would follow such symlinks from
    /// netprobe's own root. Opened with `O_NONBLOCK` (a FIFO put there cannot block the open) and
    /// refused unless it is a regular file. Errors: [`Error::Io`] naming `/proc/PID/root` and the
    /// path, [`Error::NoSuchProcess`] when the process is gone.
    pub fn open_in_root(&self, path: &Path) -> Result<std::fs::File> {
        use rustix::fs::{Mode, OFlags};
        let shown = self.root().join(path.strip_prefix("/").unwrap_or(path));
        let root = rustix::fs::open(
            self.root(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.classify(&self.root(), e.into()))?;
        crate::regular_file::open_in_root(&root, path, &shown)
    }

    /// The folder `path` names as the process sees it, opened inside its root with the rules of
    /// [`open_in_root`] (no symlink or `..` leaves the root). The descriptor keeps naming that
    /// folder after the process exits (a `-c` command's perf map is read after it ended), and
    /// files in it are opened with [`crate::regular_file::open_at`], which follows no symlink.
    ///
    /// [`open_in_root`]: Process::open_in_root
    pub fn open_dir_in_root(&self, path: &Path) -> Result<std::os::fd::OwnedFd> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let shown = self.root().join(path.strip_prefix("/").unwrap_or(path));
        let root = rustix::fs::open(
            self.root(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.classify(&self.root(), e.into()))?;
        rustix::fs::openat2(
            &root,
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| Error::io(&shown, e.into()))
    }

    /// The bytes of the regular file `path` names as the process sees it ([`open_in_root`]),
    /// at most `cap` of them (read as `what`): a larger file is refused
    /// ([`crate::regular_file::read_open_capped`]) rather than read without bound.
    ///
    /// [`open_in_root`]: Process::open_in_root
    pub fn read_in_root(&self, path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>> {
        let shown = self.root().join(path.strip_prefix("/").unwrap_or(path));
        let file = self.open_in_root(path)?;
        crate::regular_file::read_open_capped(file, &shown, cap, what)
    }

    /// When the process started, in clock ticks after boot (`starttime`, the 22nd field of
    /// `/proc/PID/stat`, `proc(5)`): with the pid, it names one process across pid reuse.
    pub fn start_time(&self) -> Result<u64> {
        let stat = self.read("stat")?;
        // After the comm: state is field 3, so starttime (22) is the 20th after it.
        after_comm(&stat)
            .split_ascii_whitespace()
            .nth(19)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| Error::malformed(self.dir.join("stat"), "no starttime field"))
    }

    /// `/proc/PID/map_files/START-END`: a link to the file behind one mapping that opens even when
    /// the file was deleted or replaced after it was mapped (`proc(5)`, map_files; needs
    /// CAP_SYS_ADMIN).
    pub fn map_file(&self, start: u64, end: u64) -> PathBuf {
        self.dir
            .join("map_files")
            .join(format!("{start:x}-{end:x}"))
    }

    /// The thread ids (`/proc/PID/task/*`) at this moment.
    pub fn threads(&self) -> Result<Vec<u32>> {
        let dir = self.dir.join("task");
        let rd = std::fs::read_dir(&dir).map_err(|e| self.classify(&dir, e))?;
        let mut tids: Vec<u32> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                std::str::from_utf8(e.file_name().as_bytes())
                    .ok()?
                    .parse()
                    .ok()
            })
            .collect();
        tids.sort_unstable();
        Ok(tids)
    }
}

/// The fields of a `/proc/PID/stat` (or `task/TID/stat`) text after the command name, from the
/// state on (`proc(5)`; the name may hold spaces and parentheses, so it ends at the LAST `)`);
/// everything when there is no `)`.
fn after_comm(stat: &[u8]) -> String {
    let close = stat.iter().rposition(|&b| b == b')').map_or(0, |c| c + 1);
    String::from_utf8_lossy(stat.get(close..).unwrap_or_default()).into_owned()
}

fn libc_esrch() -> i32 {
    3 // ESRCH on Linux (asm-generic/errno-base.h)
}

/// `PF_KTHREAD` in the `flags` field of `/proc/PID/stat` (`include/linux/sched.h`): a kernel
/// thread, which has no user code to probe.
pub(crate) const PF_KTHREAD: u64 = 0x0020_0000;

/// `comm` and `flags` from `/proc/PID/stat` (`proc(5)`: `pid (comm) state ppid ... flags` with
/// flags the 9th field). The comm may hold spaces and parentheses, so it ends at the LAST `)`.
pub fn parse_stat(stat: &[u8]) -> Option<(String, u64)> {
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let comm = String::from_utf8_lossy(stat.get(open + 1..close)?).into_owned();
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    // After the comm: state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8) flags(9).
    let flags = rest.split_ascii_whitespace().nth(6)?.parse().ok()?;
    Some((comm, flags))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_code_kernel_threads_and_zombies() {
        Process::open(std::process::id())
            .unwrap()
            .check_runs_user_code()
            .unwrap();
        // Pid 2 is kthreadd in the initial pid namespace (not inside a container).
        if std::fs::read_to_string("/proc/2/comm").is_ok_and(|c| c.trim() == "kthreadd") {
            let e = Process::open(2)
                .unwrap()
                .check_runs_user_code()
                .unwrap_err();
            assert!(matches!(e, Error::KernelThread { pid: 2, .. }), "{e}");
        }
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let p = Process::open(child.id()).unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let e = loop {
            match p.check_runs_user_code() {
                Err(e) => break e,
                Ok(()) if std::time::Instant::now() > end => panic!("never a zombie"),
                Ok(()) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        };
        assert!(
            matches!(e, Error::Exited { pid, parent, .. } if pid == child.id() && parent == std::process::id()),
            "{e}"
        );
        child.wait().unwrap();
    }

    /// A main thread that exited while another thread runs: the process is not a zombie, and
    /// the error says what is left to do.
    #[test]
    fn main_thread_exited_while_another_runs() {
        let headless = fixtures::live::Headless::start().unwrap();
        let p = Process::open(headless.pid()).unwrap();
        assert_eq!(p.threads_running(), 1);
        let e = p.check_runs_user_code().unwrap_err();
        assert!(
            matches!(e, Error::MainThreadExited { pid, threads: 1, .. } if pid == headless.pid()),
            "{e}"
        );
    }

    /// A procfs laid out by hand: `<dir>/1/root` is a plain folder standing for a process's root.
    fn fake_process_root() -> (tempfile::TempDir, Process, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("1/root");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::create_dir_all(root.join("app")).unwrap();
        let p = Process::open_in(dir.path(), 1).unwrap();
        (dir, p, root)
    }

    #[test]
    fn paths_a_target_names_resolve_inside_its_root() {
        let (dir, p, root) = fake_process_root();
        let host_file = dir.path().join("host-secret");
        std::fs::write(&host_file, b"host").unwrap();
        std::fs::write(root.join("etc/config"), b"inside").unwrap();
        // An absolute symlink and a `..` walk both stay inside the root.
        std::os::unix::fs::symlink(&host_file, root.join("app/abs")).unwrap();
        std::os::unix::fs::symlink("/etc/config", root.join("app/to-config")).unwrap();
        std::os::unix::fs::symlink("../../../../host-secret", root.join("app/up")).unwrap();
        assert_eq!(
            p.read_in_root(Path::new("/app/to-config"), 100, "test file")
                .unwrap(),
            b"inside"
        );
        for hostile in ["/app/abs", "/app/up", "/../../host-secret"] {
            let e = p.read_in_root(Path::new(hostile), 100, "test file");
            assert!(
                !matches!(&e, Ok(b) if b == b"host"),
                "{hostile} reached a file outside the root"
            );
        }
    }

    #[test]
    fn only_regular_files_are_read_and_only_up_to_the_cap() {
        let (_dir, p, root) = fake_process_root();
        let fifo = root.join("app/fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // Refused at once (a blocking open or read would hang this test).
        let e = p
            .read_in_root(Path::new("/app/fifo"), 100, "test file")
            .unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = p
            .read_in_root(Path::new("/app"), 100, "test file")
            .unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        std::fs::write(root.join("app/big"), vec![b'x'; 101]).unwrap();
        let e = p
            .read_in_root(Path::new("/app/big"), 100, "test file")
            .unwrap_err();
        assert!(e.to_string().contains("more than 100 bytes"), "{e}");
        assert_eq!(
            p.read_in_root(Path::new("/app/big"), 101, "test file")
                .unwrap()
                .len(),
            101
        );
    }
}
