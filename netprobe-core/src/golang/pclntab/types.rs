//! What the Go function table (`pclntab`) holds, as netprobe uses it.
//!
//! Format sources: Go's `debug/gosym/pclntab.go` (header words per version, `functab` field size,
//! `_func` field order, the pc-value step), `runtime/symtab.go` (`pcHeader`, `functab`, `_func`)
//! and the design note golang.org/s/go12symtab. Only what listing and probing need is decoded.

use crate::addr::VirtAddr;
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;

/// Layout of the table, told by its 4-byte magic (`debug/gosym/pclntab.go`: `go12magic` ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PclntabVersion {
    /// Go 1.2 to 1.15, magic `0xfffffffb`: header is magic, pad, quantum, ptrsize, nfunc; the
    /// function table follows at offset `8 + ptrsize` with pointer-sized absolute entry PCs; names
    /// and pc-value tables are addressed from the table's start.
    Go12,
    /// Go 1.16 and 1.17, magic `0xfffffffa`: the header holds eight words (nfunc, nfiles, then
    /// offsets of funcnametab, cutab, filetab, pctab, pclntab); entries are still absolute.
    Go116,
    /// Go 1.18 and 1.19, magic `0xfffffff0`: a `textStart` word is added after nfiles; `functab`
    /// fields shrink to 4 bytes and entries become offsets from textStart.
    Go118,
    /// Go 1.20 and later, magic `0xfffffff1`: same header and function table as 1.18 (the `_func`
    /// tail changed; names, entries and pc-value tables are read the same way).
    Go120,
}

impl PclntabVersion {
    /// The layout whose magic is `magic` (read little-endian); `None` for any other value.
    pub fn from_magic(magic: u32) -> Option<PclntabVersion> {
        match magic {
            0xffff_fffb => Some(PclntabVersion::Go12),
            0xffff_fffa => Some(PclntabVersion::Go116),
            0xffff_fff0 => Some(PclntabVersion::Go118),
            0xffff_fff1 => Some(PclntabVersion::Go120),
            _ => None,
        }
    }

    /// The magic number that opens a table of this layout.
    pub fn magic(self) -> u32 {
        match self {
            PclntabVersion::Go12 => 0xffff_fffb,
            PclntabVersion::Go116 => 0xffff_fffa,
            PclntabVersion::Go118 => 0xffff_fff0,
            PclntabVersion::Go120 => 0xffff_fff1,
        }
    }

    /// Every layout, oldest first.
    pub const ALL: [PclntabVersion; 4] = [
        PclntabVersion::Go12,
        PclntabVersion::Go116,
        PclntabVersion::Go118,
        PclntabVersion::Go120,
    ];

    /// The oldest Go release that writes this layout, as `(major, minor)`: what the table alone
    /// says about the compiler when `.go.buildinfo` is missing.
    pub fn oldest_go(self) -> (u32, u32) {
        match self {
            PclntabVersion::Go12 => (1, 2),
            PclntabVersion::Go116 => (1, 16),
            PclntabVersion::Go118 => (1, 18),
            PclntabVersion::Go120 => (1, 20),
        }
    }

    /// Whether function entries are 4-byte offsets from the header's `textStart` (1.18+) rather
    /// than absolute pointer-sized addresses.
    pub fn entries_are_text_offsets(self) -> bool {
        self >= PclntabVersion::Go118
    }
}

impl fmt::Display for PclntabVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = self.oldest_go();
        write!(f, "go{major}.{minor}")
    }
}

/// The table's header, decoded (`runtime/symtab.go`, `pcHeader`). Offsets are relative to the
/// table's first byte; for [`PclntabVersion::Go12`] only `nfunc` is in the header and the other
/// offsets are those the layout implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PclntabHeader {
    pub version: PclntabVersion,
    /// Instruction size quantum (1 on x86).
    pub quantum: u8,
    /// Pointer size in bytes (8 on x86-64).
    pub ptr_size: u8,
    /// Number of functions in the function table.
    pub nfunc: u64,
    /// Number of file names (1.16+; 0 for 1.2, whose file table counts itself).
    pub nfiles: u64,
    /// `textStart` as written in the file (1.18+): the address entry offsets are relative to.
    /// `None` before 1.18. The runtime's value is this after relocation; a PIE whose linker left
    /// the field zero carries the value in a relocation instead.
    pub text_start_field: Option<u64>,
    /// Offset of the function name strings.
    pub funcname_offset: u64,
    /// Offset of the pc-value tables (`pcsp`, `pcfile`, `pcln` offsets are relative to it).
    pub pctab_offset: u64,
    /// Offset of the function table (`functab`) and of the `_func` records, which are addressed
    /// relative to it (1.16+); for 1.2 the records are addressed from the table's start.
    pub functab_offset: u64,
}

/// One Go function from the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GoFunction<'a> {
    /// Name as the linker wrote it, e.g. `main.main`, `net/http.(*conn).serve`,
    /// `main.(*Calc).Add`, `main.Map[...]` (generic instantiations share one shape name).
    pub name: Cow<'a, str>,
    /// Link-time address of the first instruction.
    pub entry: VirtAddr,
    /// Address of the next function's entry (or the table's end for the last one): the function's
    /// bytes plus the alignment padding after them, as `debug/gosym` reports `Func.End`.
    pub end: VirtAddr,
    /// The exact length of the function's code, read from its `pcsp` table (the pc-value tables
    /// cover the code and stop at its last byte); `None` when that table is missing or malformed,
    /// in which case [`GoFunction::code_end`] falls back to `end`.
    pub code_size: Option<u64>,
    /// The `args` field of the function's `_func` record: bytes of the argument area on the
    /// caller's frame (`runtime/symtab.go`: "in/out args size"). Under the stack ABI (Go before
    /// 1.17) that is every argument and result word, results last; under the register ABI only
    /// what is passed on the stack. `None` when the record is cut off, or the field holds the
    /// runtime's "unknown" marker (negative, for some assembly functions).
    pub args_size: Option<u32>,
}

impl GoFunction<'_> {
    /// `end - entry`: code plus padding up to the next function.
    pub fn padded_size(&self) -> u64 {
        self.end.0.saturating_sub(self.entry.0)
    }

    /// The size a symbol table would give: the exact code length when known, else
    /// [`GoFunction::padded_size`].
    pub fn size(&self) -> u64 {
        self.code_size.unwrap_or_else(|| self.padded_size())
    }

    /// One past the function's last code byte (`entry + size()`).
    pub fn code_end(&self) -> VirtAddr {
        VirtAddr(self.entry.0.saturating_add(self.size()))
    }

    /// The same function with an owned name, free of the file's lifetime.
    pub fn into_owned(self) -> GoFunction<'static> {
        GoFunction {
            name: Cow::Owned(self.name.into_owned()),
            entry: self.entry,
            end: self.end,
            code_size: self.code_size,
            args_size: self.args_size,
        }
    }
}
