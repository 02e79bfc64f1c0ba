//! Unwinding sampled or probed user stacks of live processes: the core's walker
//! (`netprobe_core::debuginfo::walk`) fed with each process's mappings, each mapped image's
//! call-frame information and Go table read once per file and shared by every process mapping
//! it.
//!
//! A process's maps are read on its first stack and again when a pc falls in no mapping (it
//! mapped something since; at most every [`MAPS_REFRESH_INTERVAL`]), as the symbolizer does.

use netprobe_core::debuginfo::{
    walk, CopiedStack, ImageUnwinder, Registers, UnwoundBy, Walk, WalkEnd, WalkLimits,
};
use netprobe_core::file_id::FileId;
use netprobe_core::maps::{MapPath, MapsEntry, RecordedMaps};
use netprobe_core::normalize::MappedImage;
use netprobe_core::process::Process;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Least time between two reads of one process's maps on misses.
const MAPS_REFRESH_INTERVAL: Duration = Duration::from_millis(20);

/// One process's executable file mappings.
struct ProcessMaps {
    /// `None`: gone, known from the mappings a session recorded.
    process: Option<Process>,
    /// The recorded images' open files, which the paths in `exec` name.
    _held: Vec<std::fs::File>,
    /// Executable file-backed mappings by ascending start, each with the image's path to open.
    exec: Vec<(MapsEntry, Option<PathBuf>)>,
    /// Per mapping start: the image's unwinder and bias, once looked up.
    resolved: HashMap<u64, Option<(Arc<ImageUnwinder>, u64)>>,
    read_at: Instant,
}

impl ProcessMaps {
    fn read(pid: u32, recorded: Option<&RecordedMaps>) -> Option<ProcessMaps> {
        let live = Process::open(pid).ok().and_then(|process| {
            let mut p = ProcessMaps {
                process: Some(process),
                _held: Vec::new(),
                exec: Vec::new(),
                resolved: HashMap::new(),
                read_at: Instant::now(),
            };
            p.refresh();
            (!p.exec.is_empty()).then_some(p)
        });
        // Gone, or a zombie whose maps read empty: the mappings the session recorded of it,
        // each file opened under its root only when it is the recorded file (as the symbolizer
        // names its frames: `RecordedView::open_images`).
        live.or_else(|| {
            let view = recorded?.view(pid)?;
            let opened = view.open_images(pid);
            let exec = view
                .maps
                .iter()
                .filter(|m| {
                    m.perms.exec && matches!(m.path, MapPath::File { .. }) && !m.path.is_memfd()
                })
                .map(|m| {
                    let i = opened
                        .images
                        .iter()
                        .position(|i| i.mappings.iter().any(|x| x.start == m.start));
                    let path = i.and_then(|i| opened.opened[i].as_ref().map(|(p, _)| p.clone()));
                    (m.clone(), path)
                })
                .collect();
            Some(ProcessMaps {
                process: None,
                _held: opened.held,
                exec,
                resolved: HashMap::new(),
                read_at: Instant::now(),
            })
        })
    }

    fn refresh(&mut self) {
        self.read_at = Instant::now();
        let Some(process) = &self.process else {
            return;
        };
        let Ok(mut maps) = process.maps() else {
            return;
        };
        maps.sort_by_key(|m| m.start);
        let images = MappedImage::group(&maps);
        self.exec = maps
            .iter()
            .filter(|m| {
                m.perms.exec && matches!(m.path, MapPath::File { .. }) && !m.path.is_memfd()
            })
            .map(|m| {
                let img = images
                    .iter()
                    .find(|i| i.mappings.iter().any(|x| x.start == m.start));
                let path = img.and_then(|i| netprobe_core::resolve::read_path(process, i).ok());
                (m.clone(), path)
            })
            .collect();
        self.resolved.clear();
    }

    fn mapping(&self, pc: u64) -> Option<usize> {
        let i = self
            .exec
            .partition_point(|(m, _)| m.start <= pc)
            .checked_sub(1)?;
        self.exec[i].0.contains(pc).then_some(i)
    }
}

/// Where the walk `frames` (innermost first) ends in the kernel's chain `kernel`: the index of
/// the walk's last address there, `None` when it is not there (or the walk found no caller).
/// In a recursion the same return address is in the chain many times: the one taken is where
/// most of the walk's frames before it agree with the chain's, then the one at the walk's own
/// depth (both walks are right through frames that keep frame pointers).
fn splice_point(frames: &[(u64, UnwoundBy)], kernel: &[u64]) -> Option<usize> {
    let n = frames.len();
    let last = frames.last().filter(|_| n > 1)?.0;
    kernel
        .iter()
        .enumerate()
        .skip(1)
        .filter(|&(_, &a)| a == last)
        .map(|(j, _)| {
            let agree = (0..=j.min(n - 1))
                .take_while(|&t| kernel[j - t] == frames[n - 1 - t].0)
                .count();
            (agree, std::cmp::Reverse(j.abs_diff(n - 1)), j)
        })
        .max()
        .map(|(_, _, j)| j)
}

/// Unwinds stacks of live processes, caching what it reads.
#[derive(Default)]
pub struct Unwinder {
    processes: HashMap<u32, Option<ProcessMaps>>,
    /// Per file identity (or path, when it cannot be stat'ed): its unwinder, `None` when it
    /// cannot be read as ELF.
    images: HashMap<(Option<FileId>, PathBuf), Option<Arc<ImageUnwinder>>>,
    limits: WalkLimits,
    /// What the session recorded of its processes' mappings, for processes gone before their
    /// stacks are unwound.
    recorded: Option<RecordedMaps>,
}

impl Unwinder {
    pub fn new() -> Unwinder {
        Unwinder::default()
    }

    /// Unwinds the stacks of processes gone by then with the mappings `recorded` holds.
    pub fn use_recorded_maps(&mut self, recorded: Option<RecordedMaps>) {
        self.recorded = recorded;
    }

    /// Walks the stack of a thread of `pid` whose registers are `regs` and whose stack from rsp
    /// up was copied into `stack`.
    pub fn unwind(&mut self, pid: u32, regs: Registers, stack: &[u8]) -> Walk {
        let copied = CopiedStack {
            base: regs.rsp().unwrap_or(0),
            bytes: stack,
        };
        let Unwinder {
            processes,
            images,
            limits,
            recorded,
        } = self;
        let maps = processes
            .entry(pid)
            .or_insert_with(|| ProcessMaps::read(pid, recorded.as_ref()));
        let mut lookup = |pc: u64| -> Option<(Arc<ImageUnwinder>, u64)> {
            let maps = maps.as_mut()?;
            let i = match maps.mapping(pc) {
                Some(i) => i,
                None if pc < 0x8000_0000_0000
                    && maps.read_at.elapsed() >= MAPS_REFRESH_INTERVAL =>
                {
                    maps.refresh();
                    maps.mapping(pc)?
                }
                None => return None,
            };
            let (m, path) = &maps.exec[i];
            if let Some(r) = maps.resolved.get(&m.start) {
                return r.clone();
            }
            let found = path.as_ref().and_then(|path| {
                let key = (FileId::of(path), path.clone());
                let image = images
                    .entry(key)
                    .or_insert_with(|| ImageUnwinder::open(path, None).ok().map(Arc::new))
                    .clone()?;
                let bias = image.bias(m.start, m.offset)?;
                Some((image, bias))
            });
            maps.resolved.insert(m.start, found.clone());
            found
        };
        walk(regs, &copied, &mut lookup, *limits)
    }

    /// The stack of a sample or hit of `pid`, innermost first, each address with the method
    /// that found it: the walk of the copied stack (`regs` in perf's order, `stack` from rsp
    /// up), continued by the kernel's frame-pointer chain `kernel` past the copy when the walk's
    /// last frame is in it (then the second value is true). `None` when there is nothing to
    /// walk (no registers or no stack) or the walk found no caller where the kernel did.
    pub fn stitched(
        &mut self,
        pid: u32,
        kernel: &[u64],
        regs: &[u64],
        stack: &[u8],
    ) -> Option<(Vec<(u64, UnwoundBy)>, bool)> {
        let regs = Registers::from_host_perf_regs(regs);
        if regs.rip().is_none() || regs.rsp().is_none() || stack.is_empty() {
            return None;
        }
        let walk = self.unwind(pid, regs, stack);
        let mut frames = walk.frames;
        // The innermost function has no call-frame information (.NET ReadyToRun and JIT code,
        // the vDSO): its caller was guessed from the frame pointer, which is the caller's
        // caller's frame at a function's first instructions. The kernel's chain is then no
        // worse, and for a probe hit it holds the caller the probe read from the stack itself
        // (the return address at entry), for a sample the one `MissedCallers` puts back: where
        // the two differ, the caller is the chain's.
        if let (Some(&(caller, UnwoundBy::Fp)), Some(&k)) = (frames.get(1), kernel.get(1)) {
            if caller != k {
                return None;
            }
        }
        let mut extended = false;
        if !matches!(walk.end, WalkEnd::Outermost | WalkEnd::MaxFrames) {
            if let Some(at) = splice_point(&frames, kernel) {
                extended = true;
                frames.extend(kernel[at + 1..].iter().map(|&a| (a, UnwoundBy::KernelFp)));
            }
        }
        (frames.len() > 1 || kernel.len() <= 1).then_some((frames, extended))
    }

    /// Forgets process `pid`'s maps (it exited, or exec'd); images stay cached.
    pub fn forget_process(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use UnwoundBy::{Cfi, Ip};

    #[test]
    fn a_recursion_is_spliced_at_the_walks_own_depth() {
        // main(0x10) -> r(0x20) x 5, the walk stopped after three frames of r.
        let kernel = [0x99, 0x20, 0x20, 0x20, 0x20, 0x20, 0x10];
        let walk = [(0x99, Ip), (0x20, Cfi), (0x20, Cfi), (0x20, Cfi)];
        assert_eq!(splice_point(&walk, &kernel), Some(3));
        // The kernel's chain skipped two frameless callers: the walk's last is found earlier.
        let kernel = [0x99, 0x30, 0x10];
        let walk = [(0x99, Ip), (0x40, Cfi), (0x50, Cfi), (0x30, Cfi)];
        assert_eq!(splice_point(&walk, &kernel), Some(1));
        assert_eq!(splice_point(&walk[..1], &kernel), None);
        assert_eq!(splice_point(&[(0x99, Ip), (0x77, Cfi)], &kernel), None);
    }
}
