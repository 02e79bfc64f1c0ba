//! Types of the ELF symbol source.

use crate::addr::{FileOffset, VirtAddr};
use crate::elf::segments::LoadSegment;
use serde::Serialize;

/// A section header, reduced to what offset explanations need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SectionInfo {
    pub name: String,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
    pub executable: bool,
}

/// How the file offset of one address comes about, by every formula netprobe knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OffsetExplanation {
    pub vaddr: VirtAddr,
    /// The executable `PT_LOAD` holding the address; `None` when none does.
    pub segment: Option<LoadSegment>,
    /// `vaddr - p_vaddr + p_offset` over that segment: the offset netprobe uses.
    pub segment_offset: Option<FileOffset>,
    /// The section holding the address, if the file still has section headers.
    pub section: Option<SectionInfo>,
    /// The `.text` section formula `vaddr - text.addr + text.offset`; `None` without a `.text`.
    /// Differs from `segment_offset` when the code is outside `.text` and `.text` does not share
    /// its segment's (vaddr - offset) delta.
    pub text_section_offset: Option<FileOffset>,
}
