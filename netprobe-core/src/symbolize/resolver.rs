//! The symbolizer: (pid, runtime address) or (file, file offset) to frames.
//!
//! Caches: one [`ImageIndex`] per file version ([`FileId`]: the same file under two paths, e.g.
//! `/proc/PID/root/...` of two processes, is indexed once; a rewritten file is indexed anew), and
//! per process a snapshot of its maps, re-read when a user-space address falls in no mapping (the
//! process mapped something since; at most once per 20 ms), and its JIT names ([`JitNames`]), re-read when an address in
//! anonymous executable memory is not named and the files grew.
//!
//! A process whose maps are gone (it exited, or is a zombie whose maps read empty) is named from
//! the mappings a session recorded of it ([`RecordedMaps`], given with
//! [`Symbolizer::use_recorded_maps`]): each file opened under the process's root directory as
//! held from its start ([`crate::regular_file::open_in_root`]) and read only when it has the
//! recorded device and inode; netprobe then reads it through its own descriptor
//! (`/proc/self/fd/N`), so the path is resolved once.

use super::index::ImageIndex;
use super::jit::JitNames;
use super::types::{Frame, SourceKind};
use crate::addr::{FileOffset, RuntimeAddr};
use crate::bytes::FileBytes;
use crate::debuginfo::DebugSearch;
use crate::error::Result;
use crate::file_id::FileId;
use crate::formulas;
use crate::maps::{MapPath, MapsEntry, RecordedMaps, RecordedView};
use crate::normalize::MappedImage;
use crate::process::Process;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One process as last seen.
struct ProcessView {
    /// `None`: gone before it was first seen, known only from what was recorded of it.
    process: Option<Process>,
    pid: u32,
    /// What a session recorded of the process's mappings, for when its maps are gone.
    recorded: Option<RecordedMaps>,
    /// Files of recorded mappings, opened under the process's root and held so that
    /// `/proc/self/fd/N` keeps naming them.
    held: Vec<std::fs::File>,
    /// Mappings by ascending start.
    maps: Vec<MapsEntry>,
    /// Per mapping: where netprobe opens its file and that file's identity (`None` for
    /// non-file mappings; no identity when it cannot be stat'ed).
    open: Vec<Option<(PathBuf, Option<FileId>)>>,
    jit: JitNames,
    /// The index of the process's vDSO, read from its memory on first use (`None` inside when
    /// it cannot be read or parsed).
    vdso: Option<Option<Arc<ImageIndex>>>,
    /// The process runs the .NET runtime (maps `libcoreclr.so`).
    dotnet: bool,
    /// When the maps were last read.
    read_at: Instant,
}

/// Least time between two reads of one process's maps on misses: a burst of addresses in no
/// mapping (a stack walked into garbage) costs one read, not one per address.
const MAPS_REFRESH_INTERVAL: Duration = Duration::from_millis(20);

/// First address of the kernel half of the x86-64 address space: user code is never there, so
/// a miss there is no reason to read the maps again.
const KERNEL_HALF: u64 = 0x8000_0000_0000;

/// How frames in the vDSO name their image (as perf does).
const VDSO: &str = "[vdso]";

impl ProcessView {
    fn read(pid: u32, recorded: Option<&RecordedMaps>) -> Result<ProcessView> {
        let recorded = recorded.filter(|r| r.knows(pid)).cloned();
        let process = match Process::open(pid) {
            Ok(p) => Some(p),
            Err(crate::Error::NoSuchProcess { .. }) if recorded.is_some() => None,
            Err(e) => return Err(e),
        };
        let jit = process
            .as_ref()
            .map(JitNames::for_process)
            .unwrap_or_default();
        let mut view = ProcessView {
            process,
            pid,
            recorded,
            held: Vec::new(),
            maps: Vec::new(),
            open: Vec::new(),
            jit,
            vdso: None,
            dotnet: false,
            read_at: Instant::now(),
        };
        view.refresh_maps()?;
        Ok(view)
    }

    fn refresh_maps(&mut self) -> Result<()> {
        let live = match &self.process {
            Some(p) => p.maps(),
            None => Err(crate::Error::NoSuchProcess { pid: self.pid }),
        };
        // Gone, or a zombie (its maps read empty): what was recorded, when anything was.
        let recorded = match &live {
            Ok(maps) if !maps.is_empty() => None,
            _ => self.recorded.as_ref().and_then(|r| r.view(self.pid)),
        };
        if let Some(view) = recorded {
            return self.use_recorded(view);
        }
        let mut maps = live?;
        maps.sort_by_key(|m| m.start);
        let images = MappedImage::group(&maps);
        // Each file once: a path that opens what the process maps (a file that no longer opens
        // as mapped is not read, and its frames stay unnamed).
        let opened: Vec<Option<(PathBuf, Option<FileId>)>> = match &self.process {
            Some(process) => images
                .iter()
                .map(|img| {
                    let open = crate::resolve::read_path(process, img).ok()?;
                    let id = FileId::of(&open);
                    Some((open, id))
                })
                .collect(),
            None => vec![None; images.len()],
        };
        // Exiting while its maps were read: its files no longer open through it (its root and
        // map_files went with its memory), so what was recorded names them.
        if !images.is_empty() && opened.iter().all(Option::is_none) {
            if let Some(view) = self.recorded.as_ref().and_then(|r| r.view(self.pid)) {
                return self.use_recorded(view);
            }
        }
        self.set_maps(maps, &images, &opened);
        Ok(())
    }

    /// Takes the recorded mappings: each file opened under the recorded root and kept only
    /// when it is the recorded file (device and inode); a path that opens another file, or
    /// none, leaves that file's frames unnamed.
    fn use_recorded(&mut self, view: RecordedView) -> Result<()> {
        let opened = view.open_images(self.pid);
        self.set_maps(view.maps, &opened.images, &opened.opened);
        self.held = opened.held;
        Ok(())
    }

    fn set_maps(
        &mut self,
        maps: Vec<MapsEntry>,
        images: &[MappedImage],
        opened: &[Option<(PathBuf, Option<FileId>)>],
    ) {
        self.open = maps
            .iter()
            .map(|m| {
                let i = images
                    .iter()
                    .position(|i| i.mappings.iter().any(|x| x.start == m.start))?;
                opened[i].clone()
            })
            .collect();
        self.dotnet = maps
            .iter()
            .any(|m| m.file_name().is_some_and(|n| n == "libcoreclr.so"));
        self.maps = maps;
        self.read_at = Instant::now();
    }

    /// The index of the vDSO mapped at `m`: the kernel's own small ELF image, in no file, read
    /// from the process's memory once (the kernel maps it from offset 0 of the image,
    /// `arch/x86/entry/vdso/vma.c`, so a file offset is `addr - start` as for a file).
    fn vdso_index(&mut self, pid: u32, m: &MapsEntry) -> Option<Arc<ImageIndex>> {
        if self.vdso.is_none() {
            let read = || -> Option<ImageIndex> {
                use std::os::unix::fs::FileExt;
                let len = usize::try_from(m.end.checked_sub(m.start)?).ok()?;
                // The vDSO is a few pages; anything larger is not one.
                if len > 1 << 20 {
                    return None;
                }
                let mut bytes = vec![0u8; len];
                let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
                mem.read_exact_at(&mut bytes, m.start).ok()?;
                ImageIndex::from_bytes_with_lines(Path::new(VDSO), FileBytes::Owned(bytes)).ok()
            };
            self.vdso = Some(read().map(Arc::new));
        }
        self.vdso.clone().flatten()
    }

    fn mapping(&self, addr: u64) -> Option<usize> {
        let i = self
            .maps
            .partition_point(|m| m.start <= addr)
            .checked_sub(1)?;
        self.maps[i].contains(addr).then_some(i)
    }
}

/// Symbolizes addresses of live processes and offsets of files, caching what it parses.
#[derive(Default)]
pub struct Symbolizer {
    images: HashMap<FileId, Arc<ImageIndex>>,
    /// Identity of each path given to [`Symbolizer::symbolize_file`], stat'ed once.
    paths: HashMap<PathBuf, FileId>,
    /// The path and index of the last [`Symbolizer::symbolize_file`] (frames of one recording
    /// come mostly from a few images in a row: no hashing of the path for those).
    last_file: Option<(PathBuf, Arc<ImageIndex>)>,
    processes: HashMap<u32, ProcessView>,
    /// Processes already told about (see [`Symbolizer::take_notes`]).
    noted: HashSet<u32>,
    /// What a session recorded of its processes' mappings ([`Symbolizer::use_recorded_maps`]).
    recorded: Option<RecordedMaps>,
    notes: Vec<String>,
    /// Image indexes built (for tests and benchmarks: the thousandth lookup builds none).
    builds: u64,
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer::default()
    }

    /// Names the frames of processes whose maps are gone from `recorded`: the mappings a session
    /// recorded while they ran.
    pub fn use_recorded_maps(&mut self, recorded: RecordedMaps) {
        self.recorded = Some(recorded);
    }

    /// How many image indexes were built so far (each file version once).
    pub fn index_builds(&self) -> u64 {
        self.builds
    }

    /// The index of the file at `path` (as netprobe opens it), built on first use per
    /// [`FileId`]. A path is stat'ed the first time it is given; a file rewritten under the same
    /// path later is seen by a new `Symbolizer` (process lookups see it at the next maps refresh).
    pub fn image_index(&mut self, path: &Path) -> Result<Arc<ImageIndex>> {
        let id = match self.paths.get(path) {
            Some(id) => *id,
            None => {
                let id = FileId::of(path).ok_or_else(|| {
                    crate::Error::io(
                        path,
                        std::io::Error::new(std::io::ErrorKind::NotFound, "cannot stat the file"),
                    )
                })?;
                self.paths.insert(path.to_path_buf(), id);
                id
            }
        };
        self.index_of(id, path, || DebugSearch::host(path))
    }

    /// The index of the file `path` whose identity is `id`, built on first use; its debug file
    /// is looked for as `search` says.
    fn index_of(
        &mut self,
        id: FileId,
        path: &Path,
        search: impl FnOnce() -> DebugSearch,
    ) -> Result<Arc<ImageIndex>> {
        if let Some(i) = self.images.get(&id) {
            return Ok(i.clone());
        }
        let index = Arc::new(ImageIndex::build_searching(path, search())?);
        self.builds += 1;
        self.images.insert(id, index.clone());
        Ok(index)
    }

    /// The frames at file offset `off` of the file `path` (recorded data: an image and an offset
    /// in it). Inlined functions come first, innermost first; one [`SourceKind::Unknown`] frame
    /// when no table names the byte. Errors: the file's own (missing, not an object file,
    /// malformed headers).
    pub fn symbolize_file(&mut self, path: &Path, off: FileOffset) -> Result<Vec<Frame>> {
        let index = match &self.last_file {
            Some((p, index)) if p == path => index.clone(),
            _ => {
                let index = self.image_index(path)?;
                self.last_file = Some((path.to_path_buf(), index.clone()));
                index
            }
        };
        let (frames, note) = index.frames_noting(path, off, off.0);
        self.notes.extend(note);
        Ok(frames)
    }

    /// The frames at runtime address `addr` of process `pid` (a pid of netprobe's pid
    /// namespace): file-backed code through its file's index, anonymous executable memory
    /// through the runtime's perf map / jitdump. Unknown code gives one
    /// [`SourceKind::Unknown`] frame (`[unknown] (image+0xOFF)`), never a guess; an address in
    /// mapped memory that is not executable gives one [`SourceKind::NotCode`] frame, and the
    /// kernel's return-probe trampoline one [`SourceKind::ReturnProbeTrampoline`] frame.
    ///
    /// For a return address of a call stack (every frame but the innermost), pass the address
    /// minus one: the return address is the instruction after the call, which may already
    /// belong to the next inlined function or, after a call that does not return, to the next
    /// function (what perf and `runtime.CallersFrames` do too).
    ///
    /// Errors: [`crate::Error::NoSuchProcess`] when the process is gone before its maps were
    /// first read, [`crate::Error::PermissionDenied`] without access to them. A file that cannot
    /// be indexed gives an unknown frame, not an error.
    pub fn symbolize(&mut self, pid: u32, addr: u64) -> Result<Vec<Frame>> {
        let view = match self.processes.entry(pid) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(ProcessView::read(pid, self.recorded.as_ref())?)
            }
        };
        let i = match view.mapping(addr) {
            Some(i) => Some(i),
            // Mapped since the snapshot: read the maps again (a process that exited keeps its
            // last snapshot).
            None if addr < KERNEL_HALF && view.read_at.elapsed() >= MAPS_REFRESH_INTERVAL => {
                match view.refresh_maps() {
                    Ok(()) => view.mapping(addr),
                    Err(_) => None,
                }
            }
            None => None,
        };
        let unknown = |image, file_offset| Frame::unknown(addr, image, file_offset);
        let Some(i) = i else {
            return Ok(vec![unknown(None, None)]);
        };
        let m = &view.maps[i];
        if !m.perms.exec {
            return Ok(vec![Frame {
                source: SourceKind::NotCode,
                ..unknown(None, None)
            }]);
        }
        if matches!(&m.path, MapPath::Pseudo { name } if name == "uprobes") {
            return Ok(vec![Frame {
                source: SourceKind::ReturnProbeTrampoline,
                ..unknown(None, None)
            }]);
        }
        if matches!(&m.path, MapPath::Pseudo { name } if name == "vdso") {
            let m = m.clone();
            let off = formulas::normalize(RuntimeAddr(addr), m.start, m.offset);
            return Ok(match (view.vdso_index(pid, &m), off) {
                (Some(index), Some(off)) => index.frames(Path::new(VDSO), off, addr),
                (_, off) => vec![unknown(Some(PathBuf::from(VDSO)), off)],
            });
        }
        // .NET 8 maps its JIT code and stubs from a memfd (`/memfd:doublemapper`, the W^X
        // double mapping of `src/coreclr/minipal/Unix/doublemapping.cpp`): no file names it.
        let file = match (&m.path, &view.open[i]) {
            (MapPath::File { path, .. }, Some(open)) if !m.path.is_memfd() => Some((path, open)),
            _ => None,
        };
        if let Some((path, open)) = file {
            let Some(off) = formulas::normalize(RuntimeAddr(addr), m.start, m.offset) else {
                return Ok(vec![unknown(Some(path.clone()), None)]);
            };
            let (path, (open, id)) = (path.clone(), open.clone());
            let process = view.process.clone();
            let index = match id {
                // A gone process (known from recorded mappings) is searched in no root: its
                // image's own DWARF only.
                Some(id) => self.index_of(id, &open, || match &process {
                    Some(p) => DebugSearch::in_process(p, &path),
                    None => DebugSearch::image_only(),
                }),
                None => self.image_index(&open),
            };
            return Ok(match index {
                Ok(index) => {
                    let (frames, note) = index.frames_noting(&path, off, addr);
                    self.notes.extend(note);
                    frames
                }
                Err(_) => vec![unknown(Some(path), Some(off))],
            });
        }
        // Anonymous, memfd or pseudo memory: JIT code, if the runtime names it.
        if view.jit.lookup(addr).is_none() {
            view.jit.refresh();
        }
        if let Some((name, start)) = view.jit.lookup(addr) {
            return Ok(vec![Frame {
                address: addr,
                image: None,
                file_offset: None,
                function: Some(name.to_string()),
                offset: Some(addr - start),
                source: SourceKind::PerfMap,
                inlined: false,
                file: None,
                line: None,
                column: None,
                tier: None,
            }
            .managed()]);
        }
        if m.perms.exec
            && view.dotnet
            && !view.jit.available()
            && !super::note::is_explained(pid)
            && self.noted.insert(pid)
        {
            self.notes.push(super::note::jit_names_note(pid));
        }
        Ok(vec![unknown(None, None)])
    }

    /// Notes for the user gathered while symbolizing, each said once per process (e.g. how to
    /// get names for JIT-compiled .NET code); empties the list.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Forgets process `pid` (its maps and JIT names); image indexes stay cached.
    pub fn forget_process(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maps::{mmap_record_entry, Device, MmapRecord};
    use std::os::unix::fs::MetadataExt;

    /// A pid no process has (above the kernel's `PID_MAX_LIMIT` of 2^22).
    const GONE: u32 = 4_000_000_000;

    /// `np_probed`'s address in the `-no-pie` fixture (its runtime address), from `nm`.
    fn probed_address(bin: &Path) -> u64 {
        let out = std::process::Command::new("nm").arg(bin).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3 && f[2] == "np_probed")
                    .then(|| u64::from_str_radix(f[0], 16).unwrap())
            })
            .unwrap()
    }

    /// What the recorded mapping of `/app/NAME` (with `real`'s device and inode, at the
    /// fixture's own addresses) names `np_probed`'s address as, for a gone process whose root is
    /// `root`.
    fn name_under(root: &Path, name: &str, real: &Path) -> Option<String> {
        let meta = std::fs::metadata(real).unwrap();
        let maps = RecordedMaps::new();
        let dir = rustix::fs::open(
            root,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        maps.set_root(GONE, Some(dir));
        let rec = MmapRecord {
            addr: 0x40_0000,
            len: 0x10_0000,
            dev: Device::from_st_dev(meta.dev()),
            ino: meta.ino(),
            prot: 5,
            ..MmapRecord::default()
        };
        maps.mapped(
            GONE,
            1,
            mmap_record_entry(&rec, format!("/app/{name}").as_bytes()),
        );
        let mut s = Symbolizer::new();
        s.use_recorded_maps(maps);
        let frames = s.symbolize(GONE, probed_address(real)).unwrap();
        frames.last().unwrap().function.clone()
    }

    #[test]
    fn a_gone_process_is_named_from_its_recorded_file_and_only_from_that_file() {
        let bin = fixtures::CProgram::new("short_lived")
            .flags(&["-O0", "-fno-omit-frame-pointer", "-no-pie"])
            .build();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("app")).unwrap();
        // The recorded file itself (a hard link: same device and inode), when the target tree
        // is on the fixture's filesystem; else a copy stands for it.
        let real = root.join("app/p");
        if std::fs::hard_link(&bin, &real).is_err() {
            std::fs::copy(&bin, &real).unwrap();
        }
        assert_eq!(name_under(&root, "p", &real).as_deref(), Some("np_probed"));
        // Another file with the same bytes under the recorded path: not the recorded file.
        std::fs::copy(&bin, root.join("app/copy")).unwrap();
        assert_eq!(name_under(&root, "copy", &real), None);
        // A symlink to the file by its host path: resolved inside the root, where that path
        // names nothing; never followed onto the host.
        std::os::unix::fs::symlink(&real, root.join("app/link")).unwrap();
        assert_eq!(name_under(&root, "link", &real), None);
        // `..` stays in the root too.
        let up = format!("../../{}", real.strip_prefix("/").unwrap().display());
        assert_eq!(name_under(&root, &up, &real), None);
    }

    #[test]
    fn without_records_a_gone_process_is_an_error() {
        let mut s = Symbolizer::new();
        s.use_recorded_maps(RecordedMaps::new());
        assert!(matches!(
            s.symbolize(GONE, 0x40_1000),
            Err(crate::Error::NoSuchProcess { .. })
        ));
    }
}
