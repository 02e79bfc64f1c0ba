//! The per-image index: every named code range of one file, by file offset, sorted, so a lookup is
//! a binary search. Built once per file version ([`crate::file_id::FileId`]) from the existing
//! symbol sources: the Go function table and its inline trees ([`crate::golang`]), the ELF
//! tables ([`crate::elf::ElfFile`]), and ReadyToRun methods with their funclets
//! ([`crate::dotnet::Assembly::methods`]), also inside .NET single-file bundles.
//!
//! An ELF image's DWARF ([`crate::debuginfo::locate`]: its own, or a separate debug file) adds
//! the source line of each frame and the C, C++ and Rust functions inlined at an address
//! ([`crate::debuginfo::Lines`]). It is found and opened on the first lookup in the image, not
//! when the index is built, and kept with the index.

use super::types::{Frame, SourceKind};
use crate::addr::{FileOffset, VirtAddr};
use crate::bytes::FileBytes;
use crate::debuginfo::{DebugSearch, LineFrame, Lines};
use crate::dotnet::{Assembly, R2rMethod};
use crate::elf::segments::LoadSegments;
use crate::error::{Error, Result};
use crate::image::{sniff, ImageFormat};
use crate::symbol::SymbolSource;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A named range of code, in file offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    start: u64,
    end: u64,
    /// File offset of the function's first instruction (differs from `start` for funclets).
    entry: u64,
    name: u32,
    source: SourceKind,
    /// Index into `members` + 1 for code of a bundled assembly; 0 for the file itself.
    member: u32,
}

/// A range of a Go function where inlined code runs: the inlined functions, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InlineSpan {
    start: u64,
    end: u64,
    chain: Box<[u32]>,
}

/// The sorted code ranges of one file.
#[derive(Debug, Default)]
pub struct ImageIndex {
    ranges: Vec<Range>,
    inline: Vec<InlineSpan>,
    names: Vec<String>,
    /// Bundled assemblies' member paths (`BUNDLE/NAME.dll`).
    members: Vec<PathBuf>,
    /// The image's DWARF, looked for on the first lookup.
    debug: std::sync::Mutex<DebugState>,
}

/// An image's DWARF: not looked for yet, or what was found.
#[derive(Default)]
enum DebugState {
    /// Where to look: the image's bytes, its name, and the folders to search.
    Pending(FileBytes, PathBuf, DebugSearch),
    Ready(Option<Arc<ImageLines>>),
    /// No DWARF for this image's format.
    #[default]
    None,
}

impl std::fmt::Debug for DebugState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DebugState::Pending(..) => "Pending",
            DebugState::Ready(Some(_)) => "Ready",
            DebugState::Ready(None) | DebugState::None => "None",
        })
    }
}

/// The lines of one image and the segments that turn its file offsets into the link-time
/// addresses DWARF speaks of.
struct ImageLines {
    lines: Lines,
    segments: LoadSegments,
}

/// One named range found by [`ImageIndex::lookup`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexHit<'a> {
    pub function: &'a str,
    /// File offset of the function's first instruction.
    pub entry: FileOffset,
    /// Bytes from the entry (from the range's start for a funclet placed before its entry).
    pub offset: u64,
    pub source: SourceKind,
    /// The bundled assembly holding the code (`BUNDLE/NAME.dll`); `None` for the file itself.
    pub member: Option<&'a Path>,
    /// Inlined functions running at the offset, innermost first.
    pub inlined: Vec<&'a str>,
}

/// Collects ranges before sorting.
#[derive(Default)]
struct Builder {
    index: ImageIndex,
}

impl Builder {
    fn name(&mut self, name: &str) -> u32 {
        self.index.names.push(name.to_string());
        (self.index.names.len() - 1) as u32
    }

    fn push(
        &mut self,
        start: u64,
        size: u64,
        entry: u64,
        name: &str,
        source: SourceKind,
        member: u32,
    ) {
        let Some(end) = start.checked_add(size).filter(|_| size > 0) else {
            return;
        };
        let name = self.name(name);
        self.index.ranges.push(Range {
            start,
            end,
            entry,
            name,
            source,
            member,
        });
    }

    /// Main body and funclets of each method, shifted by `file_base` (a bundled assembly's entry
    /// offset; 0 for an assembly file).
    fn r2r(&mut self, methods: &[R2rMethod], file_base: FileOffset, member: u32) {
        for m in methods {
            let Some(entry) = m.file_offset.and_then(|o| o.0.checked_add(file_base.0)) else {
                continue;
            };
            self.push(entry, m.size, entry, &m.name, SourceKind::DotnetR2r, member);
            for c in &m.funclets {
                if let Some(at) = c.file_offset.and_then(|o| o.0.checked_add(file_base.0)) {
                    self.push(at, c.size, entry, &m.name, SourceKind::DotnetR2r, member);
                }
            }
        }
    }

    fn finish(mut self) -> ImageIndex {
        self.index.ranges = disjoint(
            std::mem::take(&mut self.index.ranges),
            |r| (r.start, r.end),
            |r, e| r.end = e,
        );
        self.index.inline = disjoint(
            std::mem::take(&mut self.index.inline),
            |s| (s.start, s.end),
            |s, e| s.end = e,
        );
        self.index
    }
}

/// Sorts ranges by start (stable: of ranges starting at the same byte the first pushed stays,
/// so the Go table beats the ELF tables and `.symtab` beats `.dynsym`), and cuts a range where
/// the next one starts, so that every byte has at most one range.
fn disjoint<T>(
    mut v: Vec<T>,
    span: impl Fn(&T) -> (u64, u64),
    set_end: impl Fn(&mut T, u64),
) -> Vec<T> {
    v.sort_by_key(|r| span(r).0);
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for r in v {
        let (start, _) = span(&r);
        if let Some(prev) = out.last_mut() {
            let (pstart, pend) = span(prev);
            if pstart == start {
                continue;
            }
            if pend > start {
                set_end(prev, start);
            }
        }
        out.push(r);
    }
    out
}

impl ImageIndex {
    /// Reads the file at `path` (opened from netprobe's mount namespace) and indexes every
    /// function its tables name. Errors: the file's own ([`Error::NotAnObjectFile`], I/O,
    /// [`Error::Malformed`] ELF headers); a PE file without ReadyToRun code gives an empty index
    /// (its code runs JIT-compiled, from anonymous memory).
    pub fn build(path: &Path) -> Result<ImageIndex> {
        ImageIndex::build_searching(path, DebugSearch::host(path))
    }

    /// [`ImageIndex::build`], looking for a separate debug file as `search` says (the image as
    /// its process names it, inside the process's root).
    pub fn build_searching(path: &Path, search: DebugSearch) -> Result<ImageIndex> {
        let bytes = FileBytes::open(path)?;
        let mut index = ImageIndex::from_bytes(path, bytes.clone())?;
        if sniff(&bytes) == Some(ImageFormat::Elf) {
            index.debug = DebugState::Pending(bytes, path.to_path_buf(), search).into();
        }
        Ok(index)
    }

    /// [`ImageIndex::from_bytes`] that also reads the image's own DWARF (code read from memory,
    /// as the vDSO: no file to look for a debug file beside).
    pub fn from_bytes_with_lines(path: &Path, bytes: FileBytes) -> Result<ImageIndex> {
        let mut index = ImageIndex::from_bytes(path, bytes.clone())?;
        if sniff(&bytes) == Some(ImageFormat::Elf) {
            index.debug =
                DebugState::Pending(bytes, path.to_path_buf(), DebugSearch::image_only()).into();
        }
        Ok(index)
    }

    /// The image's DWARF, looked for on the first call; the note [`crate::debuginfo::locate`]
    /// gives when it expected a debug file and found none (said by the first caller only).
    fn lines(&self) -> (Option<Arc<ImageLines>>, Option<String>) {
        let Ok(mut state) = self.debug.lock() else {
            return (None, None);
        };
        let mut note = None;
        if let DebugState::Pending(bytes, path, search) = &*state {
            let located = crate::debuginfo::locate(bytes, path, search);
            note = located.note;
            let segments = crate::elf::parser::ElfView::parse(path, bytes)
                .map(|v| LoadSegments::from_program_headers(&v.program_headers));
            let ready = match (located.found, segments) {
                (Some((sections, _)), Ok(segments)) => {
                    Lines::new(&sections).map(|lines| Arc::new(ImageLines { lines, segments }))
                }
                _ => None,
            };
            *state = DebugState::Ready(ready);
        }
        match &*state {
            DebugState::Ready(l) => (l.clone(), note),
            _ => (None, note),
        }
    }

    /// [`ImageIndex::frames`] and the note of a missing debug file, said on the image's first
    /// lookup only.
    pub fn frames_noting(
        &self,
        image: &Path,
        off: FileOffset,
        address: u64,
    ) -> (Vec<Frame>, Option<String>) {
        let (lines, note) = self.lines();
        (
            self.frames_with(lines.as_deref(), image, off, address),
            note,
        )
    }

    /// Indexes an image already read: `bytes` are the image's file contents and `path` names it
    /// (for a single-file bundle, the file at `path` is opened again for its manifest). Errors
    /// and results as [`ImageIndex::build`].
    pub fn from_bytes(path: &Path, bytes: FileBytes) -> Result<ImageIndex> {
        let mut b = Builder::default();
        match sniff(&bytes) {
            Some(ImageFormat::Elf) => {
                // A Go table that does not read leaves the ELF tables (as `image::load_symbols`).
                if let Ok(Some(go)) = crate::golang::GoBinary::parse(path, &bytes) {
                    go_ranges(&mut b, &go);
                }
                for s in crate::elf::ElfFile::from_bytes(path, bytes.clone())?.symbols()? {
                    let (Some(off), Some(size), Some(source)) =
                        (s.file_offset, s.size, SourceKind::of_origin(s.origin))
                    else {
                        continue;
                    };
                    b.push(off.0, size, off.0, &s.name, source, 0);
                }
                if let Ok(Some(bundle)) = crate::dotnet::bundle::Bundle::open(path) {
                    for (entry, asm) in bundle.mapped_assemblies() {
                        let Ok(methods) = asm.and_then(|a| a.methods()) else {
                            continue;
                        };
                        b.index.members.push(bundle.member_path(entry));
                        let member = b.index.members.len() as u32;
                        b.r2r(&methods, entry.offset, member);
                    }
                }
            }
            Some(ImageFormat::Pe) => {
                // A mapped file's clone shares the mapping.
                let asm = Assembly::from_bytes(path, bytes.clone())
                    .map(|a| a.with_sibling_opener(crate::image::cached::sibling_opener()));
                match asm.and_then(|a| a.methods()) {
                    Ok(methods) => b.r2r(&methods, FileOffset(0), 0),
                    Err(Error::IlOnly { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            None => {
                return Err(Error::NotAnObjectFile {
                    path: path.to_path_buf(),
                })
            }
        }
        // Names read from zeros where the file shrank under its mapping are not an index.
        bytes.check_unchanged(path)?;
        Ok(b.finish())
    }

    /// How many code ranges the index holds.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The function whose code holds file offset `off`, with the inlined functions running
    /// there; `None` when no table names that byte.
    pub fn lookup(&self, off: FileOffset) -> Option<IndexHit<'_>> {
        let i = self
            .ranges
            .partition_point(|r| r.start <= off.0)
            .checked_sub(1)?;
        let r = self.ranges[i];
        if off.0 >= r.end {
            return None;
        }
        let inlined = match self
            .inline
            .partition_point(|s| s.start <= off.0)
            .checked_sub(1)
        {
            Some(j) if off.0 < self.inline[j].end => self.inline[j]
                .chain
                .iter()
                .map(|&n| self.names[n as usize].as_str())
                .collect(),
            _ => Vec::new(),
        };
        Some(IndexHit {
            function: &self.names[r.name as usize],
            entry: FileOffset(r.entry),
            offset: off.0.checked_sub(r.entry).unwrap_or(off.0 - r.start),
            source: r.source,
            member: r
                .member
                .checked_sub(1)
                .map(|m| self.members[m as usize].as_path()),
            inlined,
        })
    }

    /// The frames for file offset `off` of the file `image` (as the caller names it), the
    /// address looked up being `address`: inlined functions first, then the function; one
    /// [`SourceKind::Unknown`] frame when no table names the byte.
    pub fn frames(&self, image: &Path, off: FileOffset, address: u64) -> Vec<Frame> {
        self.frames_noting(image, off, address).0
    }

    fn frames_with(
        &self,
        lines: Option<&ImageLines>,
        image: &Path,
        off: FileOffset,
        address: u64,
    ) -> Vec<Frame> {
        let Some(hit) = self.lookup(off) else {
            let unknown = Frame::unknown(address, Some(image.to_path_buf()), Some(off));
            // No symbol covers the address (a local function of a stripped library, e.g.
            // libc's `__libc_start_call_main`), but DWARF, maybe from its debug file, may name
            // the function and those inlined into it there, as gdb and addr2line do.
            let dwarf: Vec<LineFrame> = lines
                .and_then(|l| {
                    let v = l.segments.vaddr_of_file_offset(off)?;
                    Some(l.lines.frames(v.0))
                })
                .unwrap_or_default();
            if dwarf.last().is_none_or(|d| d.function.is_none()) {
                return vec![unknown];
            }
            let last = dwarf.len() - 1;
            return dwarf
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    Frame {
                        function: d.function.clone(),
                        source: SourceKind::Dwarf,
                        inlined: i < last,
                        ..unknown.clone()
                    }
                    .at(d.location.as_ref())
                })
                .collect();
        };
        let dwarf: Vec<LineFrame> = match (lines, hit.member) {
            (Some(l), None) => l
                .segments
                .vaddr_of_file_offset(off)
                .map(|v| l.lines.frames(v.0))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let image = hit.member.unwrap_or(image);
        let frame = |function: &str, offset: Option<u64>, inlined: bool| {
            Frame {
                address,
                image: Some(image.to_path_buf()),
                file_offset: Some(off),
                function: Some(function.to_string()),
                offset,
                source: hit.source,
                inlined,
                file: None,
                line: None,
                column: None,
                tier: None,
            }
            .managed()
        };
        let loc = |f: &LineFrame| f.location.clone();
        if hit.source == SourceKind::GoPclntab || dwarf.is_empty() {
            // Go keeps its function table's names and inline trees; DWARF gives the lines. Both
            // list the same functions innermost first when they agree; when they do not, only
            // the innermost line (the line table's row for the address itself) is certain.
            let mut out: Vec<Frame> = hit.inlined.iter().map(|n| frame(n, None, true)).collect();
            out.push(frame(hit.function, Some(hit.offset), false));
            if dwarf.len() == out.len() {
                for (f, d) in out.iter_mut().zip(&dwarf) {
                    *f = f.clone().at(loc(d).as_ref());
                }
            } else if let (Some(f), Some(d)) = (out.first_mut(), dwarf.first()) {
                *f = f.clone().at(loc(d).as_ref());
            }
            return out;
        }
        // C, C++, Rust: the inlined functions DWARF lists, then the symbol table's function
        // with the line DWARF gives the outermost frame.
        let (outer, inlined) = dwarf.split_last().expect("not empty");
        let mut out: Vec<Frame> = inlined
            .iter()
            .map(|d| {
                Frame {
                    function: d.function.clone(),
                    source: SourceKind::Dwarf,
                    ..frame("", None, true)
                }
                .at(loc(d).as_ref())
            })
            .collect();
        out.push(frame(hit.function, Some(hit.offset), false).at(loc(outer).as_ref()));
        out
    }
}

/// Every Go function (exact code size) and, when the funcdata base is found, its inlined spans.
fn go_ranges(b: &mut Builder, go: &crate::golang::GoBinary<'_>) {
    let segments = go.segments();
    let bytes = go.bytes();
    let table = go.pclntab();
    let gofunc = crate::golang::gofunc::go_func_base(go);
    let read_at = |vaddr: u64| {
        let off = segments.file_offset(VirtAddr(vaddr))?;
        bytes.get(usize::try_from(off.0).ok()?..)
    };
    let mut names: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    for i in 0..table.len() {
        let Some(f) = table.function(i) else { continue };
        let Some(entry) = segments.code_file_offset(f.entry) else {
            continue;
        };
        b.push(
            entry.0,
            f.size(),
            entry.0,
            &f.name,
            SourceKind::GoPclntab,
            0,
        );
        let Some(gofunc) = gofunc else { continue };
        for span in table.inline_ranges(i, gofunc, read_at) {
            let Some(start) = span
                .start
                .0
                .checked_sub(f.entry.0)
                .and_then(|d| entry.0.checked_add(d))
            else {
                continue;
            };
            let len = span.end.0.saturating_sub(span.start.0);
            let chain: Box<[u32]> = span
                .chain
                .iter()
                .map(|n| match names.get(n) {
                    Some(&k) => k,
                    None => {
                        let k = b.name(n);
                        names.insert(n.clone(), k);
                        k
                    }
                })
                .collect();
            b.index.inline.push(InlineSpan {
                start,
                end: start + len,
                chain,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn built(ranges: &[(u64, u64)]) -> ImageIndex {
        let mut b = Builder::default();
        for (i, &(start, size)) in ranges.iter().enumerate() {
            b.push(
                start,
                size,
                start,
                &format!("f{i}"),
                SourceKind::ElfSymtab,
                0,
            );
        }
        b.finish()
    }

    #[test]
    fn same_start_keeps_the_first_pushed_and_a_later_start_cuts_the_earlier() {
        let idx = built(&[(0x100, 0x10), (0x100, 0x40), (0x108, 0x10), (0x200, 0)]);
        let name = |off| {
            idx.lookup(FileOffset(off))
                .map(|h| (h.function.to_string(), h.offset))
        };
        assert_eq!(name(0x100), Some(("f0".into(), 0)));
        assert_eq!(name(0x107), Some(("f0".into(), 7)));
        assert_eq!(name(0x108), Some(("f2".into(), 0)));
        assert_eq!(name(0x117), Some(("f2".into(), 0xf)));
        assert_eq!(name(0x118), None);
        assert_eq!(name(0xff), None);
        // A symbol without a size names nothing (its extent is unknown).
        assert_eq!(name(0x200), None);
    }

    proptest! {
        /// Whatever the ranges: a hit lies inside a pushed range that starts at the hit's
        /// entry, its offset is the distance from there, and no byte outside every pushed range
        /// is named.
        #[test]
        fn lookups_stay_inside_pushed_ranges(
            ranges in proptest::collection::vec((0u64..0x400, 0u64..0x80), 0..40),
            probes in proptest::collection::vec(0u64..0x500, 1..64),
        ) {
            let idx = built(&ranges);
            for off in probes {
                match idx.lookup(FileOffset(off)) {
                    Some(hit) => {
                        let i: usize = hit.function[1..].parse().unwrap();
                        let (start, size) = ranges[i];
                        prop_assert_eq!(hit.entry.0, start);
                        prop_assert!(off >= start && off < start + size);
                        prop_assert_eq!(hit.offset, off - start);
                    }
                    // Unnamed only where every range holding the byte was cut short by a
                    // range starting after it (nested symbols: the inner one wins from its
                    // start on, the outer one's tail is not named) or shadowed by one pushed
                    // before it at the same start (the first source pushed wins).
                    None => prop_assert!(
                        ranges.iter().enumerate()
                            .filter(|&(_, &(s, z))| off >= s && off < s + z)
                            .all(|(i, &(s, _))| {
                                ranges.iter().any(|&(t, z)| z > 0 && t > s && t <= off)
                                    || ranges[..i].iter().any(|&(t, z)| z > 0 && t == s)
                            }),
                        "offset {:#x} is in a pushed range but unnamed", off
                    ),
                }
            }
        }
    }
}
