//! The symbolizer: (pid, runtime address) or (file, file offset) to frames.
//!
//! Caches: one [`ImageIndex`] per file version ([`FileId`]: the same file under two paths, e.g.
//! `/proc/PID/root/...` of two processes, is indexed once; a rewritten file is indexed anew), and
//! per process a snapshot of its maps, re-read when a user-space address falls in no mapping (the
//! process mapped something since; at most once per 20 ms), and its JIT names ([`JitNames`]), re-read when an address in
//! anonymous executable memory is not named and the files grew.

use super::index::ImageIndex;
use super::jit::JitNames;
use super::types::{Frame, SourceKind};
use crate::addr::{FileOffset, RuntimeAddr};
use crate::bytes::FileBytes;
use crate::debuginfo::DebugSearch;
use crate::error::Result;
use crate::file_id::FileId;
use crate::formulas;
use crate::maps::{MapPath, MapsEntry};
use crate::normalize::MappedImage;
use crate::process::Process;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One process as last seen.
struct ProcessView {
    process: Process,
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
    fn read(pid: u32) -> Result<ProcessView> {
        let process = Process::open(pid)?;
        let jit = JitNames::for_process(&process);
        let mut view = ProcessView {
            process,
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
        let mut maps = self.process.maps()?;
        maps.sort_by_key(|m| m.start);
        let images = MappedImage::group(&maps);
        // Each file once: a path that opens what the process maps (a file that no longer opens
        // as mapped is not read, and its frames stay unnamed).
        let opened: Vec<Option<(PathBuf, Option<FileId>)>> = images
            .iter()
            .map(|img| {
                let open = crate::resolve::read_path(&self.process, img).ok()?;
                let id = FileId::of(&open);
                Some((open, id))
            })
            .collect();
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
        Ok(())
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
    notes: Vec<String>,
    /// Image indexes built (for tests and benchmarks: the thousandth lookup builds none).
    builds: u64,
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer::default()
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
            std::collections::hash_map::Entry::Vacant(e) => e.insert(ProcessView::read(pid)?),
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
        let unknown = |image: Option<PathBuf>, file_offset: Option<FileOffset>| Frame {
            address: addr,
            image,
            file_offset,
            function: None,
            offset: None,
            source: SourceKind::Unknown,
            inlined: false,
            file: None,
            line: None,
            column: None,
        };
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
                Some(id) => self.index_of(id, &open, || DebugSearch::in_process(&process, &path)),
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
            }]);
        }
        if m.perms.exec && view.dotnet && !view.jit.available() && self.noted.insert(pid) {
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
