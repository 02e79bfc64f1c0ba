//! What one image offers an unwinder: its call-frame information, its Go function table, and
//! the segments that turn a runtime address into the link-time one both are keyed by.

use super::cfi::CallFrameInfo;
use super::go_pcsp::GoStackTable;
use crate::bytes::FileBytes;
use crate::debuginfo::DebugSections;
use crate::elf::parser::ElfView;
use crate::elf::LoadSegments;
use crate::error::Result;
use std::path::Path;

/// The unwinding facts of one ELF image, read once and shared by every process mapping it.
#[derive(Debug)]
pub struct ImageUnwinder {
    pub cfi: Option<CallFrameInfo>,
    pub go: Option<GoStackTable>,
    segments: LoadSegments,
}

impl ImageUnwinder {
    /// Reads the image at `path`; `debug_file`: a separate debug file of the same build, whose
    /// `.debug_frame` is used when the image has none.
    pub fn open(path: &Path, debug_file: Option<&DebugSections>) -> Result<ImageUnwinder> {
        ImageUnwinder::from_bytes(path, FileBytes::open(path)?, debug_file)
    }

    /// The same from the image's bytes (`path` names it in errors). Errors: not an ELF file,
    /// malformed headers.
    pub fn from_bytes(
        path: &Path,
        bytes: FileBytes,
        debug_file: Option<&DebugSections>,
    ) -> Result<ImageUnwinder> {
        let segments =
            LoadSegments::from_program_headers(&ElfView::parse(path, &bytes)?.program_headers);
        let sections = DebugSections::parse(path, &bytes)?;
        let cfi = CallFrameInfo::new(&sections, debug_file);
        let go = GoStackTable::new(path, bytes);
        Ok(ImageUnwinder { cfi, go, segments })
    }

    /// `runtime address - link-time address` for the image's executable mapping that starts at
    /// `map_start` from file offset `map_offset`: through the executable `PT_LOAD` whose pages
    /// hold that offset (the kernel maps `p_offset` rounded down to a page at `p_vaddr` rounded
    /// down, `elf_map` in fs/binfmt_elf.c, and the gABI makes `p_offset` and `p_vaddr` equal
    /// modulo the page size, so runtime = map_start + (file offset - map_offset), file offset =
    /// p_offset + (vaddr - p_vaddr)). Linkers such as lld give each segment its own
    /// offset-to-address distance, so the segment must be the mapping's own. Wrapping: a two's-
    /// complement difference (0 for a non-PIE executable).
    pub fn bias(&self, map_start: u64, map_offset: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        let holds = |s: &&crate::elf::LoadSegment| {
            map_offset >= s.offset & !(PAGE - 1)
                && map_offset < s.offset.saturating_add(s.filesz.max(1))
        };
        let seg = self
            .segments
            .0
            .iter()
            .filter(|s| s.executable)
            .find(holds)
            .or_else(|| self.segments.0.iter().find(holds))?;
        Some(
            map_start
                .wrapping_sub(map_offset)
                .wrapping_add(seg.offset)
                .wrapping_sub(seg.vaddr),
        )
    }
}
