//! The one interface every symbol source (ELF tables, map files, ReadyToRun, Go pclntab) yields.
//!
//! A [`Symbol`] answers the question every later step asks: "which function is this, and at which
//! byte of which file does its first instruction live?". Sources fill in what they know; what they
//! cannot know is `None`, never a guess.

use crate::addr::{FileOffset, RuntimeAddr, Rva, VirtAddr};
use serde::Serialize;
use std::fmt;

/// What kind of code a symbol names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolKind {
    /// A native function (ELF `STT_FUNC`).
    Function,
    /// A GNU indirect function (`STT_GNU_IFUNC`): the symbol's address is the *resolver*, which
    /// runs once at load time and returns the implementation; a probe here fires at bind time,
    /// not on calls.
    Ifunc,
    /// A .NET managed method with precompiled (ReadyToRun / crossgen) code.
    ManagedMethod,
    /// A Go function from the pclntab.
    GoFunction,
}

/// Where a symbol came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SymbolOrigin {
    /// ELF `.symtab`.
    ElfSymtab,
    /// ELF `.dynsym`.
    ElfDynsym,
    /// A crossgen `/CreatePerfMap` map file (`ADDR SIZE NAME`, addresses are RVAs).
    CrossgenMap,
    /// The runtime's `/tmp/perf-PID.map` (`ADDR SIZE NAME`, addresses are runtime addresses).
    PerfMap,
    /// The ReadyToRun header of a PE image.
    ReadyToRun,
    /// Go's `.gopclntab` function table.
    GoPclntab,
}

impl SymbolOrigin {
    /// Short human name, as printed in listings.
    pub fn label(self) -> &'static str {
        match self {
            SymbolOrigin::ElfSymtab => "symtab",
            SymbolOrigin::ElfDynsym => "dynsym",
            SymbolOrigin::CrossgenMap => "crossgen-map",
            SymbolOrigin::PerfMap => "perf-map",
            SymbolOrigin::ReadyToRun => "r2r",
            SymbolOrigin::GoPclntab => "gopclntab",
        }
    }
}

/// A symbol's address, in the address space its source speaks of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "space", content = "value", rename_all = "snake_case")]
pub enum Address {
    /// Link-time virtual address in an ELF file.
    Virt(VirtAddr),
    /// Relative virtual address in a PE image (R2R, crossgen map files).
    Rva(Rva),
    /// Address in a live process (runtime perf maps).
    Runtime(RuntimeAddr),
}

impl Address {
    /// The raw number, whatever the space.
    pub fn value(self) -> u64 {
        match self {
            Address::Virt(a) => a.0,
            Address::Rva(a) => a.0,
            Address::Runtime(a) => a.0,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.value())
    }
}

/// One probe-able function or method.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Symbol {
    /// The name as users read it: ELF names as in the table (versioned `name@@V` kept), .NET names
    /// in crossgen's map format `[instance] RET [Assembly] Namespace.Type::Method(ARGS)`, Go names as
    /// in the pclntab (`net/http.(*conn).serve`).
    pub name: String,
    pub kind: SymbolKind,
    pub origin: SymbolOrigin,
    pub address: Address,
    /// Size of the code in bytes; `None` when the source does not say (ELF size 0, some maps).
    pub size: Option<u64>,
    /// Byte offset of the first instruction in the file; `None` when the code is not file-backed
    /// (JIT code from `/tmp/perf-PID.map`) or the source cannot place it (address outside every
    /// loadable segment / section).
    pub file_offset: Option<FileOffset>,
}

/// Anything that can list the symbols of one image.
pub trait SymbolSource {
    /// Every function/method the source knows, in the source's own order.
    fn symbols(&self) -> crate::Result<Vec<Symbol>>;
}
