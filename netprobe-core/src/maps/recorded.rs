//! Mappings as the kernel announced them while a session ran, kept for processes whose
//! `/proc/PID/maps` is gone by the time their stacks are named (a process that exits within
//! milliseconds of its hits).
//!
//! The way perf names the frames of `perf record`'s workloads: `PERF_RECORD_MMAP2` records (one
//! per executable mapping, with the file's device, inode and path as the mapping process names
//! it; `perf_event_mmap` in `kernel/events/core.c`), `PERF_RECORD_FORK` (a child starts with its
//! parent's mappings, `thread__fork` in perf's `tools/perf/util/thread.c`) and the exec flag of
//! `PERF_RECORD_COMM` (an exec drops every earlier mapping), with `/proc/PID/maps` read at the
//! start for processes already running. Entries keep their record's time: a lookup takes, per
//! address, the newest mapping since the process's last exec, so records read out of order
//! across CPU buffers give the same answer.
//!
//! A record's path is bytes the target chose; it is only ever opened under the process's root
//! directory, held open from when the process ran ([`RecordedMaps::track`],
//! [`RecordedMaps::root_from_proc`]; a child starts with its parent's), and only read when the
//! file opened has the record's device and inode (see
//! `crate::symbolize::resolver`). Bounded: at most [`MAX_PROCESSES`] processes and
//! [`MAX_MAPPINGS`] mappings each are kept (the oldest go first).

use super::types::{Device, MapPath, MapsEntry, Perms};
use crate::process::Process;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// Most processes whose mappings are kept (a session following a shell that starts a command a
/// second keeps the last hour's).
pub const MAX_PROCESSES: usize = 4096;
/// Most mappings kept per process (`vm.max_map_count` is 65,530 of every kind; executable ones
/// are a few hundred in a large program).
pub const MAX_MAPPINGS: usize = 4096;

/// What one process mapped, by record time.
#[derive(Clone, Debug, Default)]
struct ProcessMaps {
    /// The process's root directory, opened while it ran (`None`: not known; then the root of
    /// the session's first target is used).
    root: Option<Arc<OwnedFd>>,
    /// (time, mapping) in arrival order.
    maps: Vec<(u64, MapsEntry)>,
    /// Time of the last exec seen (0: none).
    exec_at: u64,
    /// Time of the last record, for eviction.
    touched: u64,
    /// Its root could not be opened: its files are opened under none.
    rootless: bool,
}

#[derive(Debug, Default)]
struct Inner {
    procs: HashMap<u32, ProcessMaps>,
    /// The root of the first process tracked, for processes whose own is unknown.
    default_root: Option<Arc<OwnedFd>>,
}

/// A process's mappings as recorded, newest first per address, with the root its paths are
/// opened in.
#[derive(Clone, Debug, Default)]
pub struct RecordedView {
    /// Sorted by start, not overlapping (where records overlap, the newer wins).
    pub maps: Vec<MapsEntry>,
    pub root: Option<Arc<OwnedFd>>,
}

/// The images of a [`RecordedView`], each opened as the module docs say.
pub struct OpenedImages {
    /// The mappings grouped per file.
    pub images: Vec<crate::normalize::MappedImage>,
    /// Per image: a path that opens it (`/proc/self/fd/N` of a file in `held`) and its
    /// identity; `None` when it is not the recorded file or does not open.
    pub opened: Vec<Option<(std::path::PathBuf, Option<crate::file_id::FileId>)>>,
    /// The open files the paths name: keep them as long as the paths are used.
    pub held: Vec<std::fs::File>,
}

impl RecordedView {
    /// Opens each image of these mappings under the recorded root (process `pid`'s, named
    /// `/proc/PID/root/...` in errors), keeping only a regular file with the recorded device and
    /// inode: a path that opens another file, or none, or a deleted or memfd mapping, gives
    /// `None` for that image. Without a root nothing is opened.
    pub fn open_images(&self, pid: u32) -> OpenedImages {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let images = crate::normalize::MappedImage::group(&self.maps);
        let mut held = Vec::new();
        let opened = images
            .iter()
            .map(|img| {
                let root = self.root.as_ref()?;
                if img.deleted || img.inode == 0 || img.mappings.iter().any(|m| m.path.is_memfd()) {
                    return None;
                }
                let shown = std::path::Path::new("/proc")
                    .join(pid.to_string())
                    .join("root")
                    .join(img.path.strip_prefix("/").unwrap_or(&img.path));
                let file = crate::regular_file::open_in_root(root, &img.path, &shown).ok()?;
                let meta = file.metadata().ok()?;
                if (Device::from_st_dev(meta.dev()), meta.ino()) != (img.dev, img.inode) {
                    return None;
                }
                let open = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                held.push(file);
                Some((open, Some(crate::file_id::FileId::from_metadata(&meta))))
            })
            .collect();
        OpenedImages {
            images,
            opened,
            held,
        }
    }
}

/// The mappings of a session's processes, shared between the backend that reads the records and
/// the symbolizer that names frames (a cheap clone of one shared store).
#[derive(Clone, Debug, Default)]
pub struct RecordedMaps(Arc<Mutex<Inner>>);

impl RecordedMaps {
    pub fn new() -> RecordedMaps {
        RecordedMaps::default()
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves consistent data (every change is one
        // push or assignment).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts keeping `process`'s mappings: its root directory opened now (`O_PATH`), and with
    /// `with_maps` its executable mappings from `/proc/PID/maps` as of time 0 (for a process
    /// already running; a command held before its exec has none worth keeping). Errors are those
    /// of reading the maps; the root is kept either way when it opens.
    pub fn track(&self, process: &Process, with_maps: bool) -> crate::Result<()> {
        let root = open_root(&process.root()).map(Arc::new);
        let maps = if with_maps {
            process.maps()
        } else {
            Ok(Vec::new())
        };
        let mut inner = self.inner();
        if inner.default_root.is_none() {
            inner.default_root = root.clone();
        }
        let entry = inner.procs.entry(process.pid()).or_default();
        if root.is_some() {
            entry.root = root;
        }
        for m in maps?.into_iter().filter(|m| m.perms.exec) {
            push(entry, 0, m);
        }
        Ok(())
    }

    /// Opens process `pid`'s files under `root` (a folder opened with `O_PATH`, e.g. its
    /// `/proc/PID/root` opened while it ran); `None`: under no root, so its files are not opened
    /// (the session's first target's root is not taken in its place either).
    pub fn set_root(&self, pid: u32, root: Option<OwnedFd>) {
        let mut inner = self.inner();
        evict(&mut inner, pid);
        let p = inner.procs.entry(pid).or_default();
        p.root = root.map(Arc::new);
        p.rootless = p.root.is_none();
    }

    /// Takes process `pid`'s root directory as it is now (`/proc/PID/root`) when it can still
    /// be opened; whether it could (a gone process keeps the root it had).
    pub fn root_from_proc(&self, pid: u32) -> bool {
        let root = Process::open(pid).ok().and_then(|p| open_root(&p.root()));
        let opened = root.is_some();
        if opened {
            self.set_root(pid, root);
        }
        opened
    }

    /// Whether process `pid` has a root of its own to open its files under.
    pub fn has_root(&self, pid: u32) -> bool {
        self.inner()
            .procs
            .get(&pid)
            .is_some_and(|p| p.root.is_some())
    }

    /// The kernel announced `entry` mapped in process `pid` at `time`.
    pub fn mapped(&self, pid: u32, time: u64, entry: MapsEntry) {
        let mut inner = self.inner();
        evict(&mut inner, pid);
        let p = inner.procs.entry(pid).or_default();
        if time >= p.exec_at {
            push(p, time, entry);
        }
    }

    /// Process `child` was forked from `parent` at `time`: it starts with the parent's mappings
    /// and root.
    pub fn forked(&self, parent: u32, child: u32, time: u64) {
        let mut inner = self.inner();
        evict(&mut inner, child);
        let Some(from) = inner.procs.get(&parent) else {
            return;
        };
        let (root, rootless, maps) = (from.root.clone(), from.rootless, from.maps.clone());
        let p = inner.procs.entry(child).or_default();
        if p.root.is_none() {
            p.root = root;
            p.rootless = rootless;
        }
        // Mapped before the fork; the child's own records (none before its first instruction)
        // come after.
        // (An exec of the child read first dropped them already.)
        let exec_at = p.exec_at;
        for (t, m) in maps
            .into_iter()
            .filter(|(t, _)| *t <= time && *t >= exec_at)
        {
            push(p, t, m);
        }
    }

    /// Process `pid` called execve at `time`: what it mapped before is gone.
    pub fn exec(&self, pid: u32, time: u64) {
        let mut inner = self.inner();
        evict(&mut inner, pid);
        let p = inner.procs.entry(pid).or_default();
        p.exec_at = p.exec_at.max(time);
        let at = p.exec_at;
        p.maps.retain(|(t, _)| *t >= at);
        p.touched = p.touched.max(time);
    }

    /// Whether anything is kept of process `pid`.
    pub fn knows(&self, pid: u32) -> bool {
        self.inner().procs.contains_key(&pid)
    }

    /// Process `pid`'s mappings as recorded (newest wins where they overlap), with its root;
    /// `None` when nothing was recorded of it.
    pub fn view(&self, pid: u32) -> Option<RecordedView> {
        let inner = self.inner();
        let p = inner.procs.get(&pid)?;
        let mut by_age: Vec<&(u64, MapsEntry)> = p.maps.iter().collect();
        // Newest first; equal times keep arrival order reversed (the later record wins).
        by_age.reverse();
        by_age.sort_by_key(|e| std::cmp::Reverse(e.0));
        let mut maps: Vec<MapsEntry> = Vec::new();
        for (_, m) in by_age {
            if m.is_empty() {
                continue;
            }
            // The parts of `m` no newer mapping covers.
            let mut pieces = vec![(m.start, m.end)];
            for n in &maps {
                pieces = pieces
                    .into_iter()
                    .flat_map(|(s, e)| {
                        if n.end <= s || n.start >= e {
                            vec![(s, e)]
                        } else {
                            [(s, n.start.max(s)), (n.end.min(e), e)]
                                .into_iter()
                                .filter(|(a, b)| a < b)
                                .collect()
                        }
                    })
                    .collect();
            }
            for (s, e) in pieces {
                maps.push(MapsEntry {
                    start: s,
                    end: e,
                    offset: m.offset.saturating_add(s - m.start),
                    ..m.clone()
                });
            }
        }
        maps.sort_by_key(|m| m.start);
        Some(RecordedView {
            maps,
            root: match p.rootless {
                true => None,
                false => p.root.clone().or_else(|| inner.default_root.clone()),
            },
        })
    }
}

/// The numbers of a `PERF_RECORD_MMAP2` record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmapRecord {
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    pub dev: Device,
    pub ino: u64,
    /// `PROT_*` bits.
    pub prot: u32,
    /// `MAP_*` bits.
    pub flags: u32,
}

/// One mapping as a `PERF_RECORD_MMAP2` record describes it (`struct perf_record_mmap2`:
/// `addr`, `len`, `pgoff`, `maj`, `min`, `ino`, `prot`, `flags`, `filename`). `filename` is the
/// record's bytes up to its first NUL: a path (`d_path`, ` (deleted)` appended to an unlinked
/// file's, nothing escaped), a bracketed kernel name (`[vdso]`, `[heap]`), or `//anon`
/// (`perf_event_mmap_event` in `kernel/events/core.c`). Any bytes give an entry; a name that is
/// no absolute path names no file.
pub fn mmap_record_entry(r: &MmapRecord, filename: &[u8]) -> MapsEntry {
    use std::os::unix::ffi::OsStringExt;
    let MmapRecord {
        addr,
        len,
        pgoff,
        dev,
        ino,
        prot,
        flags,
    } = *r;
    let name = filename.split(|&b| b == 0).next().unwrap_or_default();
    let path = if name.is_empty() || name == b"//anon" {
        MapPath::Anonymous
    } else if name.len() >= 2 && name[0] == b'[' && name[name.len() - 1] == b']' {
        MapPath::Pseudo {
            name: String::from_utf8_lossy(&name[1..name.len() - 1]).into_owned(),
        }
    } else if name[0] == b'/' {
        let (path, deleted) = match name.strip_suffix(b" (deleted)") {
            Some(p) => (p, true),
            None => (name, false),
        };
        MapPath::File {
            path: std::ffi::OsString::from_vec(path.to_vec()).into(),
            deleted,
        }
    } else {
        MapPath::Pseudo {
            name: String::from_utf8_lossy(name).into_owned(),
        }
    };
    MapsEntry {
        start: addr,
        end: addr.saturating_add(len),
        perms: Perms {
            read: prot & 1 != 0,
            write: prot & 2 != 0,
            exec: prot & 4 != 0,
            shared: flags & 1 != 0,
        },
        offset: pgoff,
        dev,
        inode: ino,
        path,
    }
}

/// The folder `path` opened with `O_PATH` (a root to resolve paths under), if it opens.
fn open_root(path: &std::path::Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    if path.as_os_str().is_empty() {
        return None;
    }
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// Appends a mapping, dropping the oldest past [`MAX_MAPPINGS`] and an exact repeat of the last.
fn push(p: &mut ProcessMaps, time: u64, m: MapsEntry) {
    if p.maps.last().is_some_and(|(_, last)| *last == m) {
        return;
    }
    if p.maps.len() >= MAX_MAPPINGS {
        p.maps.remove(0);
    }
    p.maps.push((time, m));
    p.touched = p.touched.max(time);
}

/// Makes room for process `pid` when [`MAX_PROCESSES`] others are kept: the one whose last
/// record is oldest goes.
fn evict(inner: &mut Inner, pid: u32) {
    if inner.procs.len() < MAX_PROCESSES || inner.procs.contains_key(&pid) {
        return;
    }
    if let Some(old) = inner
        .procs
        .iter()
        .min_by_key(|(_, p)| p.touched)
        .map(|(pid, _)| *pid)
    {
        inner.procs.remove(&old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(start: u64, end: u64, name: &str, ino: u64) -> MapsEntry {
        let r = MmapRecord {
            addr: start,
            len: end - start,
            dev: Device { major: 8, minor: 1 },
            ino,
            prot: 5,
            flags: 2,
            ..MmapRecord::default()
        };
        mmap_record_entry(&r, name.as_bytes())
    }

    #[test]
    fn record_names_become_paths_pseudo_names_or_anonymous_memory() {
        let e = file(0x1000, 0x2000, "/usr/lib/libc.so.6 (deleted)", 7);
        assert_eq!(
            e.path,
            MapPath::File {
                path: "/usr/lib/libc.so.6".into(),
                deleted: true
            }
        );
        assert!(e.perms.exec && e.perms.read && !e.perms.write && !e.perms.shared);
        assert_eq!(
            file(1, 2, "[vdso]", 0).path,
            MapPath::Pseudo {
                name: "vdso".into()
            }
        );
        assert_eq!(file(1, 2, "//anon", 0).path, MapPath::Anonymous);
        assert_eq!(file(1, 2, "", 0).path, MapPath::Anonymous);
        assert!(file(1, 2, "relative\0/x", 0).path.file().is_none());
    }

    #[test]
    fn exec_drops_older_mappings_fork_copies_them_and_newer_ones_win() {
        let r = RecordedMaps::new();
        r.mapped(10, 5, file(0x1000, 0x3000, "/old", 1));
        r.exec(10, 6);
        // Read late from another CPU's buffer: older than the exec, dropped.
        r.mapped(10, 4, file(0x5000, 0x6000, "/stale", 2));
        r.mapped(10, 7, file(0x1000, 0x4000, "/a", 3));
        r.mapped(10, 8, file(0x2000, 0x3000, "/b", 4));
        let v = r.view(10).unwrap();
        let got: Vec<(u64, u64, u64, u64)> = v
            .maps
            .iter()
            .map(|m| (m.start, m.end, m.offset, m.inode))
            .collect();
        assert_eq!(
            got,
            vec![
                (0x1000, 0x2000, 0, 3),
                (0x2000, 0x3000, 0, 4),
                (0x3000, 0x4000, 0x2000, 3)
            ]
        );
        r.forked(10, 11, 9);
        assert_eq!(r.view(11).unwrap().maps, v.maps);
        // The child's exec read before its fork: the parent's mappings are not its own.
        r.exec(12, 20);
        r.forked(10, 12, 15);
        assert!(r.view(12).unwrap().maps.is_empty());
        assert!(r.view(13).is_none());
    }

    #[test]
    fn memory_is_bounded() {
        let r = RecordedMaps::new();
        for i in 0..(MAX_MAPPINGS as u64 + 10) {
            r.mapped(1, i, file(i * 0x1000, i * 0x1000 + 0x1000, "/f", i));
        }
        assert_eq!(r.view(1).unwrap().maps.len(), MAX_MAPPINGS);
        for pid in 0..(MAX_PROCESSES as u32 + 10) {
            r.mapped(pid + 100, u64::from(pid), file(0x1000, 0x2000, "/f", 1));
        }
        assert_eq!(r.inner().procs.len(), MAX_PROCESSES);
    }

    proptest! {
        #[test]
        fn a_view_is_sorted_and_never_overlaps(
            recs in proptest::collection::vec((0u64..64, 1u64..16, 0u64..100, any::<u8>()), 0..40),
            name in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let r = RecordedMaps::new();
            for (start, len, time, ino) in recs {
                let rec = MmapRecord { addr: start * 0x1000, len: len * 0x1000, ino: u64::from(ino), prot: 4, ..MmapRecord::default() };
                let e = mmap_record_entry(&rec, &name);
                r.mapped(1, time, e);
            }
            if let Some(v) = r.view(1) {
                for w in v.maps.windows(2) {
                    prop_assert!(w[0].end <= w[1].start);
                }
                prop_assert!(v.maps.iter().all(|m| m.start < m.end));
            }
        }
    }
}
