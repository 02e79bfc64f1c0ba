//! Loadable segments (`PT_LOAD`) of an ELF file, and the file offset of code inside them.

use crate::addr::{FileOffset, VirtAddr};
use crate::formulas;
use goblin::elf::program_header::{ProgramHeader, PF_X, PT_LOAD};
use goblin::elf::Elf;
use serde::Serialize;

/// One `PT_LOAD` program header, reduced to what offset computation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LoadSegment {
    pub vaddr: u64,
    pub memsz: u64,
    pub offset: u64,
    pub filesz: u64,
    pub executable: bool,
}

impl LoadSegment {
    /// Whether `vaddr` lies in the part of the segment that is backed by file bytes
    /// (`[p_vaddr, p_vaddr + p_filesz)`; the `.bss`-like tail up to `p_memsz` has no file offset).
    pub fn contains_file_backed(&self, vaddr: VirtAddr) -> bool {
        vaddr.0 >= self.vaddr && vaddr.0 - self.vaddr < self.filesz
    }
}

/// All `PT_LOAD` segments of one ELF file, in program-header order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LoadSegments(pub Vec<LoadSegment>);

impl LoadSegments {
    /// Collects the `PT_LOAD` headers of a parsed file.
    pub fn from_elf(elf: &Elf<'_>) -> LoadSegments {
        LoadSegments::from_program_headers(&elf.program_headers)
    }

    /// Collects the `PT_LOAD` headers among `headers`.
    pub fn from_program_headers(headers: &[ProgramHeader]) -> LoadSegments {
        LoadSegments(
            headers
                .iter()
                .filter(|ph| ph.p_type == PT_LOAD)
                .map(|ph| LoadSegment {
                    vaddr: ph.p_vaddr,
                    memsz: ph.p_memsz,
                    offset: ph.p_offset,
                    filesz: ph.p_filesz,
                    executable: ph.p_flags & PF_X != 0,
                })
                .collect(),
        )
    }

    /// The executable segment whose file-backed bytes contain `vaddr`; `None` when no executable
    /// segment does (data symbol, `.bss`, or an address outside the file).
    pub fn executable_containing(&self, vaddr: VirtAddr) -> Option<&LoadSegment> {
        self.0
            .iter()
            .find(|s| s.executable && s.contains_file_backed(vaddr))
    }

    /// File offset of code at `vaddr` by the segment formula ([`formulas::elf_segment`]) over the
    /// executable `PT_LOAD` that holds it; `None` when no executable segment holds it.
    pub fn code_file_offset(&self, vaddr: VirtAddr) -> Option<FileOffset> {
        let seg = self.executable_containing(vaddr)?;
        formulas::elf_segment(vaddr, seg.vaddr, seg.offset)
    }

    /// Link-time address of the byte at file offset `off` ([`formulas::elf_segment_inverse`]) over
    /// the first `PT_LOAD` whose file bytes hold it, executable or not; `None` when none does.
    pub fn vaddr_of_file_offset(&self, off: FileOffset) -> Option<VirtAddr> {
        self.0
            .iter()
            .find_map(|s| formulas::elf_segment_inverse(off, s.vaddr, s.offset, s.filesz))
    }

    /// [`LoadSegments::vaddr_of_file_offset`] over the executable segments only: the address of
    /// code at `off`; `None` when no executable segment holds it.
    pub fn code_vaddr_of_file_offset(&self, off: FileOffset) -> Option<VirtAddr> {
        self.0
            .iter()
            .filter(|s| s.executable)
            .find_map(|s| formulas::elf_segment_inverse(off, s.vaddr, s.offset, s.filesz))
    }

    /// File offset of any file-backed byte at `vaddr` (code or data), over whichever `PT_LOAD`
    /// holds it; `None` when none does.
    pub fn file_offset(&self, vaddr: VirtAddr) -> Option<FileOffset> {
        let seg = self.0.iter().find(|s| s.contains_file_backed(vaddr))?;
        formulas::elf_segment(vaddr, seg.vaddr, seg.offset)
    }
}
