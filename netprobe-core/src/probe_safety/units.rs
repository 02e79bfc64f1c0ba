//! A function as one of a file's tables states it: ELF symbols, Go's pclntab, ReadyToRun's
//! RUNTIME_FUNCTIONS.

use crate::addr::FileOffset;
use crate::elf::parser::RawFunction;
use serde::Serialize;

/// Which table a function came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitSource {
    /// ELF `.symtab`/`.dynsym` (`STT_FUNC`, `STT_GNU_IFUNC`).
    ElfSymbol,
    /// Go's pclntab.
    Pclntab,
    /// A ReadyToRun RUNTIME_FUNCTIONS entry (a method body, funclet or cold part).
    RuntimeFunction,
}

impl UnitSource {
    pub(super) fn label(self) -> &'static str {
        match self {
            UnitSource::ElfSymbol => "ELF symbol table",
            UnitSource::Pclntab => "Go pclntab",
            UnitSource::RuntimeFunction => "ReadyToRun RUNTIME_FUNCTIONS",
        }
    }
}

/// A function as one of the file's tables states it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CodeUnit {
    /// Its name (`main.Fib`, `np_add`), or `RUNTIME_FUNCTION #N` for .NET code.
    pub name: String,
    pub source: UnitSource,
    /// Its first byte in the file's address space (ELF: link-time address; PE: RVA).
    pub address: u64,
    /// Its first byte in the file.
    pub start: FileOffset,
    /// Its extent in bytes; `None` when the table does not say (ELF size 0).
    pub size: Option<u64>,
}

impl CodeUnit {
    /// `main.Fib+0x12` for a file offset inside it.
    pub fn at(&self, off: FileOffset) -> String {
        match off.0.checked_sub(self.start.0) {
            Some(0) => self.name.clone(),
            Some(d) => format!("{}+{d:#x}", self.name),
            None => format!("{}-{:#x}", self.name, self.start.0 - off.0),
        }
    }
}

pub(super) fn elf_unit(s: &RawFunction, start: FileOffset) -> CodeUnit {
    CodeUnit {
        name: s.name.clone(),
        source: UnitSource::ElfSymbol,
        address: s.vaddr.0,
        start,
        size: (s.size > 0).then_some(s.size),
    }
}

pub(super) fn rf_unit(rfs: &[(u64, u64)], i: usize, start: FileOffset) -> CodeUnit {
    let (begin, end) = rfs[i];
    CodeUnit {
        name: format!("RUNTIME_FUNCTION #{i}"),
        source: UnitSource::RuntimeFunction,
        address: begin,
        start,
        size: Some(end.saturating_sub(begin)),
    }
}
