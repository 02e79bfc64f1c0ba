//! Parses a Go function table (`pclntab`) from the bytes that start with its header.
//!
//! Zero-copy: a [`Pclntab`] borrows the file's bytes and decodes a function only when asked.
//! Every read is bounds-checked; malformed tables give an error or skip the broken function,
//! never a panic (checked by proptest over arbitrary and mutated bytes).
//!
//! Layout facts (Go's `debug/gosym/pclntab.go`, `parsePclnTab`, `funcTab`, `funcData`; and
//! `runtime/symtab.go`, `pcHeader`/`_func`):
//! - bytes 0..4 magic, 4..6 zero, 6 pc quantum, 7 pointer size; then pointer-sized words.
//! - 1.2: word 0 = nfunc; the function table starts right after it (`8 + ptrsize`).
//! - 1.16: words nfunc, nfiles, funcnametab, cutab, filetab, pctab, functab offsets.
//! - 1.18/1.20: words nfunc, nfiles, textStart, funcnametab, cutab, filetab, pctab, functab.
//! - The function table is `nfunc` pairs (entry, `_func` offset) and one final entry (the end of
//!   the last function): pointer-sized absolute addresses before 1.18, 4-byte offsets from
//!   textStart since.
//! - A `_func` record starts with the entry (pointer-sized before 1.18, a 4-byte offset since),
//!   followed by 4-byte fields: nameOff, args, deferreturn, pcsp, pcfile, pcln, ...
//!   `_func` offsets are relative to the function table (1.16+) or the whole table (1.2); name
//!   offsets to funcnametab (1.16+) or the whole table; pc-value offsets to pctab (1.16+) or the
//!   whole table.

use super::types::{GoFunction, PclntabHeader, PclntabVersion};
use crate::addr::VirtAddr;
use crate::bytes;
use std::borrow::Cow;
use std::fmt;

/// Why bytes are not a usable function table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PclntabError(pub String);

impl fmt::Display for PclntabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn bad(what: impl Into<String>) -> PclntabError {
    PclntabError(what.into())
}

/// A parsed, validated function table borrowing the file's bytes.
#[derive(Clone, Debug)]
pub struct Pclntab<'a> {
    data: &'a [u8],
    header: PclntabHeader,
    /// Address that 1.18+ entry offsets are relative to; 0 before 1.18 (entries are absolute).
    text_start: u64,
    /// Bytes of the function table: `2 * nfunc + 1` fields of `field_size` bytes.
    functab: &'a [u8],
    field_size: u8,
    /// Base of `_func` record offsets.
    funcdata: &'a [u8],
    /// Base of name offsets.
    funcnametab: &'a [u8],
    /// Base of pc-value table offsets.
    pctab: &'a [u8],
}

impl<'a> Pclntab<'a> {
    /// Parses the table that begins at `data[0]` (`data` may run past its end, e.g. to the end of
    /// the containing section).
    ///
    /// Returns an error when the header is not a known little-endian layout, a count or offset
    /// points outside `data`, the entries are not sorted, or the first/last `_func` records do
    /// not repeat their table entries (the check that tells a real table from a stray magic).
    pub fn parse(data: &'a [u8]) -> Result<Pclntab<'a>, PclntabError> {
        let table = Pclntab::parse_header(data)?;
        table.validate()?;
        Ok(table)
    }

    /// [`Pclntab::parse`] of a table that was parsed (and validated) before, from the same
    /// bytes: the header is read again, the O(functions) walk of [`Pclntab::validate`] is not.
    /// For callers that look up one pc at a time and cannot keep the borrowing table (the
    /// stack walker, once per frame). Lookups stay bounds-checked: bytes changed since the
    /// first parse give wrong answers, never a panic.
    pub fn parse_validated(data: &'a [u8]) -> Result<Pclntab<'a>, PclntabError> {
        Pclntab::parse_header(data)
    }

    /// The header's layout, counts and offsets, each checked against `data`.
    fn parse_header(data: &'a [u8]) -> Result<Pclntab<'a>, PclntabError> {
        let magic = bytes::u32_at(data, 0).ok_or_else(|| bad("shorter than a pclntab header"))?;
        let version = PclntabVersion::from_magic(magic)
            .ok_or_else(|| bad(format!("unknown pclntab magic {magic:#x}")))?;
        let pad = bytes::slice(data, 4, 4).ok_or_else(|| bad("shorter than a pclntab header"))?;
        let (quantum, ptr_size) = (pad[2], pad[3]);
        if pad[0] != 0 || pad[1] != 0 {
            return Err(bad("pclntab header padding is not zero"));
        }
        if !matches!(quantum, 1 | 2 | 4) {
            return Err(bad(format!(
                "pclntab pc quantum {quantum} is not 1, 2 or 4"
            )));
        }
        if !matches!(ptr_size, 4 | 8) {
            return Err(bad(format!(
                "pclntab pointer size {ptr_size} is not 4 or 8"
            )));
        }
        let p = u64::from(ptr_size);
        let word = |i: u64| -> Result<u64, PclntabError> {
            bytes::word_at(data, 8 + i * p, ptr_size)
                .ok_or_else(|| bad("pclntab header is cut off"))
        };
        let len = data.len() as u64;
        let nfunc = word(0)?;
        let (nfiles, text_start_field, funcname_offset, pctab_offset, functab_offset) =
            match version {
                PclntabVersion::Go12 => (0, None, 0, 0, 8 + p),
                PclntabVersion::Go116 => {
                    let (fnames, cu, files, pcs, ftab) =
                        (word(2)?, word(3)?, word(4)?, word(5)?, word(6)?);
                    check_order(8 + 7 * p, &[fnames, cu, files, pcs, ftab], len)?;
                    (word(1)?, None, fnames, pcs, ftab)
                }
                PclntabVersion::Go118 | PclntabVersion::Go120 => {
                    let (fnames, cu, files, pcs, ftab) =
                        (word(3)?, word(4)?, word(5)?, word(6)?, word(7)?);
                    check_order(8 + 8 * p, &[fnames, cu, files, pcs, ftab], len)?;
                    (word(1)?, Some(word(2)?), fnames, pcs, ftab)
                }
            };
        let field_size = if version.entries_are_text_offsets() {
            4
        } else {
            ptr_size
        };
        if nfunc == 0 {
            return Err(bad("pclntab lists no functions"));
        }
        let functab_len = nfunc
            .checked_mul(2)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(u64::from(field_size)))
            .ok_or_else(|| bad(format!("pclntab function count {nfunc} is implausible")))?;
        let functab = bytes::slice(data, functab_offset, functab_len).ok_or_else(|| {
            bad(format!(
                "pclntab function table ({nfunc} functions) runs past the end of the table"
            ))
        })?;
        let funcdata = match version {
            PclntabVersion::Go12 => data,
            _ => bytes::tail(data, functab_offset).unwrap_or_default(),
        };
        let header = PclntabHeader {
            version,
            quantum,
            ptr_size,
            nfunc,
            nfiles,
            text_start_field,
            funcname_offset,
            pctab_offset,
            functab_offset,
        };
        let table = Pclntab {
            data,
            header,
            text_start: text_start_field.unwrap_or(0),
            functab,
            field_size,
            funcdata,
            funcnametab: bytes::tail(data, funcname_offset).unwrap_or_default(),
            pctab: bytes::tail(data, pctab_offset).unwrap_or_default(),
        };
        Ok(table)
    }

    /// Sorted entries, and the first and last `_func` records agreeing with the table. Entry
    /// checks are on the raw fields so they do not depend on textStart.
    fn validate(&self) -> Result<(), PclntabError> {
        let n = self.header.nfunc;
        let mut prev = 0u64;
        for i in 0..=n {
            let e = self
                .raw_field(2 * i)
                .ok_or_else(|| bad("pclntab function table is cut off"))?;
            if e < prev {
                return Err(bad(format!(
                    "pclntab entries are not sorted (function {i} of {n})"
                )));
            }
            prev = e;
        }
        for i in [0, n - 1] {
            let raw_entry = self.raw_field(2 * i);
            let record_entry = self.func_record(i).and_then(|rec| self.record_entry(rec));
            if raw_entry.is_none() || raw_entry != record_entry {
                return Err(bad(format!(
                    "pclntab function {i} does not repeat its entry in its record"
                )));
            }
        }
        Ok(())
    }

    /// The header as decoded.
    pub fn header(&self) -> &PclntabHeader {
        &self.header
    }

    /// The table's layout version.
    pub fn version(&self) -> PclntabVersion {
        self.header.version
    }

    /// The table's bytes (from its first byte to the end of what the caller passed).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The pc-value tables (`pcsp`, `pcfile`, `pcln`, pcdata offsets are relative to it).
    pub(crate) fn pctab(&self) -> &'a [u8] {
        self.pctab
    }

    /// The function name strings (name offsets are relative to it).
    pub(crate) fn funcnametab(&self) -> &'a [u8] {
        self.funcnametab
    }

    /// Number of functions in the table.
    pub fn len(&self) -> u64 {
        self.header.nfunc
    }

    /// Always false for a parsed table (one with no functions is rejected); for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.header.nfunc == 0
    }

    /// The address 1.18+ entry offsets are relative to (0 before 1.18, where entries are
    /// absolute).
    pub fn text_start(&self) -> u64 {
        self.text_start
    }

    /// The same table with entries relative to `text_start` instead of the header's field (1.18+;
    /// ignored before). For a PIE whose header field was left for the dynamic loader to fill in.
    pub fn with_text_start(mut self, text_start: u64) -> Pclntab<'a> {
        if self.header.version.entries_are_text_offsets() {
            self.text_start = text_start;
        }
        self
    }

    fn raw_field(&self, index: u64) -> Option<u64> {
        let off = index.checked_mul(u64::from(self.field_size))?;
        bytes::word_at(self.functab, off, self.field_size)
    }

    /// Entry address of table slot `i` (`i == len()` gives the end of the last function).
    pub fn entry(&self, i: u64) -> Option<VirtAddr> {
        let raw = self.raw_field(i.checked_mul(2)?)?;
        if self.header.version.entries_are_text_offsets() {
            self.text_start.checked_add(raw).map(VirtAddr)
        } else {
            Some(VirtAddr(raw))
        }
    }

    /// The end of the last function (the table's final entry).
    pub fn end_of_text(&self) -> Option<VirtAddr> {
        self.entry(self.header.nfunc)
    }

    /// Where the table states function `i`'s entry, as offsets from the table's first byte: its
    /// function-table slot and the first field of its `_func` record (`runtime/symtab.go`:
    /// `functab.entryoff`, `_func.entryOff`; absolute `uintptr`s before Go 1.18), and the size
    /// of each field in bytes. `None` when `i` is out of range or its record lies outside the
    /// table.
    pub fn entry_fields(&self, i: u64) -> Option<([u64; 2], usize)> {
        if i >= self.header.nfunc {
            return None;
        }
        let field = u64::from(self.field_size);
        let slot = self
            .header
            .functab_offset
            .checked_add(i.checked_mul(2 * field)?)?;
        let records = match self.header.version {
            PclntabVersion::Go12 => 0,
            _ => self.header.functab_offset,
        };
        let record = records.checked_add(self.raw_field(i.checked_mul(2)?.checked_add(1)?)?)?;
        self.func_record(i)?;
        Some(([slot, record], usize::from(self.field_size)))
    }

    /// The `_func` record of function `i`, from its first byte on.
    pub(crate) fn func_record(&self, i: u64) -> Option<&'a [u8]> {
        let off = self.raw_field(i.checked_mul(2)?.checked_add(1)?)?;
        bytes::tail(self.funcdata, off)
    }

    /// The raw entry field of a `_func` record (offset from textStart for 1.18+).
    fn record_entry(&self, rec: &[u8]) -> Option<u64> {
        let size = if self.header.version.entries_are_text_offsets() {
            4
        } else {
            self.header.ptr_size
        };
        bytes::word_at(rec, 0, size)
    }

    /// 4-byte field `n` (n >= 1) of a `_func` record (`debug/gosym`, `funcData.field`).
    pub(crate) fn record_field(&self, rec: &[u8], n: u64) -> Option<u32> {
        let first = if self.header.version.entries_are_text_offsets() {
            4
        } else {
            u64::from(self.header.ptr_size)
        };
        bytes::u32_at(rec, first + (n - 1) * 4)
    }

    /// Function `i` of the table; `None` when `i >= len()` or its entries, record or name are
    /// outside the table.
    pub fn function(&self, i: u64) -> Option<GoFunction<'a>> {
        if i >= self.header.nfunc {
            return None;
        }
        let entry = self.entry(i)?;
        let end = self.entry(i + 1)?;
        let rec = self.func_record(i)?;
        let name = self.record_name(rec)?;
        let code_size = self
            .record_field(rec, 4)
            .and_then(|pcsp| self.pc_table_span(pcsp, end.0.saturating_sub(entry.0)));
        // Field 2 is `args` in every layout; negative values (`ArgsSizeUnknown`, -0x80000000)
        // mark assembly functions without a declared frame.
        let args_size = self
            .record_field(rec, 2)
            .filter(|&a| i32::try_from(a).is_ok());
        Some(GoFunction {
            name,
            entry,
            end,
            code_size,
            args_size,
        })
    }

    /// The name of function `i` alone (what [`Pclntab::function`] names it), without decoding
    /// its entry, size or frame: for filtering the table by name first. `None` when `i >= len()`
    /// or its record or name is outside the table.
    pub fn function_name(&self, i: u64) -> Option<Cow<'a, str>> {
        if i >= self.header.nfunc {
            return None;
        }
        self.record_name(self.func_record(i)?)
    }

    /// The bytes of [`Pclntab::function_name`], not checked as UTF-8 (`None` in the same cases).
    pub fn function_name_bytes(&self, i: u64) -> Option<&'a [u8]> {
        if i >= self.header.nfunc {
            return None;
        }
        self.record_name_bytes(self.func_record(i)?)
    }

    /// The bytes of the name a `_func` record points to in the function name table (field 1,
    /// `nameOff`), up to its NUL.
    fn record_name_bytes(&self, rec: &[u8]) -> Option<&'a [u8]> {
        let name_off = self.record_field(rec, 1)?;
        bytes::cstr_at(self.funcnametab, u64::from(name_off))
    }

    /// [`Pclntab::record_name_bytes`] as text (invalid UTF-8 replaced by U+FFFD).
    fn record_name(&self, rec: &[u8]) -> Option<Cow<'a, str>> {
        let name_bytes = self.record_name_bytes(rec)?;
        Some(match std::str::from_utf8(name_bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => Cow::Owned(String::from_utf8_lossy(name_bytes).into_owned()),
        })
    }

    /// Every function that decodes, in table order (sorted by entry).
    pub fn functions(&self) -> impl Iterator<Item = GoFunction<'a>> + '_ {
        (0..self.header.nfunc).filter_map(move |i| self.function(i))
    }

    /// Index of the function whose `[entry, end)` holds `pc`; `None` outside the table.
    pub fn find_index(&self, pc: VirtAddr) -> Option<u64> {
        let n = self.header.nfunc;
        if pc < self.entry(0)? || pc >= self.entry(n)? {
            return None;
        }
        // First slot whose entry is > pc, minus one (entries are sorted; checked in parse).
        let (mut lo, mut hi) = (0u64, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)? <= pc {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    /// How many bytes of code a pc-value table at `off` (relative to pctab) covers: Go's
    /// `pcvalue` walk (`debug/gosym`, `LineTable.step`): pairs of varints (value delta, pc delta
    /// in quanta) until a zero value delta after the first pair. `None` when the table is missing
    /// (`off == 0`), cut off, or covers more than `limit` bytes.
    fn pc_table_span(&self, off: u32, limit: u64) -> Option<u64> {
        if off == 0 {
            return None;
        }
        let mut p = bytes::tail(self.pctab, u64::from(off))?;
        let quantum = u64::from(self.header.quantum);
        let mut pc: u64 = 0;
        let mut first = true;
        loop {
            let (value_delta, n) = bytes::uvarint(p)?;
            p = p.get(n..)?;
            if value_delta == 0 && !first {
                return Some(pc);
            }
            let (pc_delta, n) = bytes::uvarint(p)?;
            p = p.get(n..)?;
            pc = pc.checked_add(pc_delta.checked_mul(quantum)?)?;
            if pc > limit || value_delta > u64::from(u32::MAX) {
                return None;
            }
            first = false;
        }
    }
}

/// Offsets of the 1.16+ header must be ascending (the linker writes funcnametab, cutab, filetab,
/// pctab, functab in that order after the header) and inside the table.
fn check_order(header_len: u64, offsets: &[u64], len: u64) -> Result<(), PclntabError> {
    let mut prev = header_len;
    for &off in offsets {
        if off < prev || off > len {
            return Err(bad(format!(
                "pclntab header offset {off:#x} is out of order or past the table's {len:#x} bytes"
            )));
        }
        prev = off;
    }
    Ok(())
}

/// File positions where a little-endian x86-64 table (quantum 1, pointer size 8) of any known
/// layout may start: a magic followed by `00 00 01 08`. The four magics differ only in their first
/// byte (`fb`, `fa`, `f0`, `f1`, then `ff ff ff`), so one pass finds the common seven bytes and
/// checks the byte before. Candidates only; [`Pclntab::parse`] decides.
pub fn magic_candidates(bytes: &[u8]) -> Vec<usize> {
    magic_candidates_iter(bytes).collect()
}

/// [`magic_candidates`], found lazily: a caller that stops at the first table it accepts does not
/// search the rest of the file.
pub fn magic_candidates_iter(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    const COMMON: [u8; 7] = [0xff, 0xff, 0xff, 0, 0, 1, 8];
    memchr::memmem::find_iter(bytes, &COMMON)
        .filter_map(|at| at.checked_sub(1))
        .filter(|&start| {
            bytes.get(start).is_some_and(|&b| {
                PclntabVersion::ALL
                    .iter()
                    .any(|v| v.magic().to_le_bytes()[0] == b)
            })
        })
}
