//! Inlined calls: which functions the compiler inlined at each pc of a Go function, from the
//! function's inline tree (`FUNCDATA_InlTree`) and its inline-index pc-value table
//! (`PCDATA_InlTreeIndex`).
//!
//! Format sources (Go's `runtime/symtab.go`, `runtime/symtabinl.go` since 1.21, and
//! `cmd/internal/objabi/funcdata.go`):
//! - `_func` (1.18 layout, Go 1.18 and 1.19): `entryOff, nameOff, args, deferreturn, pcsp, pcfile,
//!   pcln, npcdata, cuOffset` (4 bytes each), then `funcID, flag, _, nfuncdata` (1 byte each): 40
//!   bytes; the 1.20 layout adds `startLine` (4 bytes) after `cuOffset`: 44 bytes. Then
//!   `npcdata` 4-byte pc-value table offsets (relative to `pctab`) and `nfuncdata` 4-byte funcdata
//!   offsets, relative to `moduledata.gofunc` (the `go:func.*` symbol); `^uint32(0)` is "none".
//! - `PCDATA_InlTreeIndex = 2`, `FUNCDATA_InlTree = 3`.
//! - `inlinedCall` (1.18 layout, 20 bytes): `parent int16, funcID uint8, _ byte, file int32,
//!   line int32, func_ int32 (name offset in funcnametab), parentPc int32`; (1.20 layout, 16 bytes):
//!   `funcID uint8, _ [3]byte, nameOff int32, parentPc int32, startLine int32`.
//! - The pc-value step (`runtime/symtab.go`, `step`/`pcvalue`): the value starts at -1; each
//!   entry is a zig-zag varint value delta and a varint pc delta (in quanta); a value holds from
//!   the previous pc up to the new one; a zero value delta after the first entry ends the table.
//!   The inline index at a pc is the tree node of the innermost inlined call running there (-1:
//!   none); a node's caller is the node the index table gives at the node's `parentPc`.
//!
//! Tables of the 1.2 and 1.16 layouts (Go before 1.18) store funcdata as absolute pointers and
//! are not decoded here: their functions get no inlined frames.

use super::parser::Pclntab;
use super::types::PclntabVersion;
use crate::addr::VirtAddr;
use crate::bytes;
use serde::Serialize;

/// `cmd/internal/objabi/funcdata.go`: `PCDATA_InlTreeIndex`.
const PCDATA_INL_TREE_INDEX: u64 = 2;
/// `cmd/internal/objabi/funcdata.go`: `FUNCDATA_InlTree`.
const FUNCDATA_INL_TREE: u64 = 3;
/// Deepest inlining chain followed (the compiler's own limit is far lower; this bounds a loop
/// over hostile bytes).
const MAX_DEPTH: usize = 64;

/// A pc range of a function in which inlined code runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InlineRange {
    pub start: VirtAddr,
    /// One past the last byte.
    pub end: VirtAddr,
    /// The inlined functions running there, innermost first; the outer function (the one the
    /// function table names) is not included.
    pub chain: Vec<String>,
}

/// Byte layout of the records this module reads, per table layout.
struct Layout {
    /// Offset of `nfuncdata` (1 byte) in `_func`.
    nfuncdata_at: u64,
    /// Size of `_func` before its pcdata offsets.
    header: u64,
    node_size: u64,
    node_name_at: u64,
    node_parent_pc_at: u64,
}

fn layout(v: PclntabVersion) -> Option<Layout> {
    match v {
        PclntabVersion::Go118 => Some(Layout {
            nfuncdata_at: 39,
            header: 40,
            node_size: 20,
            node_name_at: 12,
            node_parent_pc_at: 16,
        }),
        PclntabVersion::Go120 => Some(Layout {
            nfuncdata_at: 43,
            header: 44,
            node_size: 16,
            node_name_at: 4,
            node_parent_pc_at: 8,
        }),
        PclntabVersion::Go12 | PclntabVersion::Go116 => None,
    }
}

impl<'a> Pclntab<'a> {
    /// The runs of pc-value table `off` (relative to `pctab`) of a function of `len` code bytes:
    /// `(start, end, value)` with pcs as offsets from the entry. `None` when the table is missing
    /// (`off == 0`) or cut off.
    pub fn pc_value_runs(&self, off: u32, len: u64) -> Option<Vec<(u64, u64, i32)>> {
        if off == 0 {
            return None;
        }
        let mut p = bytes::tail(self.pctab(), u64::from(off))?;
        let quantum = u64::from(self.header().quantum);
        let (mut pc, mut val, mut first) = (0u64, -1i32, true);
        let mut runs = Vec::new();
        loop {
            let (uvdelta, n) = bytes::uvarint(p)?;
            if uvdelta == 0 && !first {
                return Some(runs);
            }
            p = p.get(n..)?;
            let uvdelta = u32::try_from(uvdelta).ok()?;
            // Zig-zag: `-(uvdelta & 1) ^ (uvdelta >> 1)`.
            let delta = ((uvdelta >> 1) as i32) ^ -((uvdelta & 1) as i32);
            val = val.wrapping_add(delta);
            let (pcdelta, n) = bytes::uvarint(p)?;
            p = p.get(n..)?;
            let next = pc.checked_add(pcdelta.checked_mul(quantum)?)?;
            if next > len {
                return None;
            }
            if next > pc {
                runs.push((pc, next, val));
            }
            pc = next;
            first = false;
        }
    }

    /// Every pc range of function `i` that runs inlined code, with the inlined functions
    /// innermost first. `gofunc` is the link-time address funcdata offsets count from
    /// (`moduledata.gofunc`); `read_at(vaddr)` gives the file's bytes from that address on.
    /// Empty when the function has no inline tree, the layout is older than 1.18, or the
    /// records are cut off (never a panic, whatever the bytes).
    pub fn inline_ranges<'f>(
        &self,
        i: u64,
        gofunc: u64,
        read_at: impl Fn(u64) -> Option<&'f [u8]>,
    ) -> Vec<InlineRange> {
        self.inline_ranges_opt(i, gofunc, read_at)
            .unwrap_or_default()
    }

    fn inline_ranges_opt<'f>(
        &self,
        i: u64,
        gofunc: u64,
        read_at: impl Fn(u64) -> Option<&'f [u8]>,
    ) -> Option<Vec<InlineRange>> {
        let l = layout(self.version())?;
        let f = self.function(i)?;
        let Some((tree_off, index_table, len)) = self.inline_tables(i, &l) else {
            return Some(Vec::new());
        };
        let tree_bytes = read_at(gofunc.checked_add(u64::from(tree_off))?)?;
        let runs = self.pc_value_runs(index_table, len)?;
        let value_at = |pc: u64| {
            runs.iter()
                .find(|&&(s, e, _)| pc >= s && pc < e)
                .map_or(-1, |r| r.2)
        };
        let mut out = Vec::new();
        for &(start, end, v) in &runs {
            if v < 0 {
                continue;
            }
            let mut chain = Vec::new();
            let mut node = v;
            while node >= 0 && chain.len() < MAX_DEPTH {
                let call = self.inline_node(tree_bytes, &l, node as u64)?;
                chain.push(call.0);
                node = value_at(u64::from(call.1));
            }
            out.push(InlineRange {
                start: VirtAddr(f.entry.0.checked_add(start)?),
                end: VirtAddr(f.entry.0.checked_add(end)?),
                chain,
            });
        }
        Some(out)
    }

    /// Node `k` of the inline tree whose bytes start at `tree`: (callee name, parentPc).
    fn inline_node(&self, tree: &[u8], l: &Layout, k: u64) -> Option<(String, u32)> {
        let at = k.checked_mul(l.node_size)?;
        let name_off = bytes::u32_at(tree, at.checked_add(l.node_name_at)?)?;
        let parent_pc = bytes::u32_at(tree, at.checked_add(l.node_parent_pc_at)?)?;
        let name = bytes::cstr_at(self.funcnametab(), u64::from(name_off))?;
        Some((String::from_utf8_lossy(name).into_owned(), parent_pc))
    }
}

impl Pclntab<'_> {
    /// Whether `gofunc` is the base funcdata offsets count from, judged by the inline trees it
    /// yields: over the first functions (up to 32) that have one, every node reached from the
    /// inline index table must name a function (its name offset at the start of a string in
    /// funcnametab) and give a call site inside the outer function. `false` when fewer than
    /// three functions have an inline tree to judge by, or any node fails.
    pub fn gofunc_plausible<'f>(
        &self,
        gofunc: u64,
        read_at: impl Fn(u64) -> Option<&'f [u8]>,
    ) -> bool {
        let Some(l) = layout(self.version()) else {
            return false;
        };
        let names = self.funcnametab();
        let mut judged = 0;
        for i in 0..self.len() {
            if judged >= 32 {
                break;
            }
            let Some((tree_off, index_table, len)) = self.inline_tables(i, &l) else {
                continue;
            };
            let Some(runs) = self.pc_value_runs(index_table, len) else {
                continue;
            };
            let Some(tree) = gofunc.checked_add(u64::from(tree_off)).and_then(&read_at) else {
                return false;
            };
            for &(_, _, v) in &runs {
                if v < 0 {
                    continue;
                }
                let at = u64::from(v as u32) * l.node_size;
                let (Some(name_off), Some(parent_pc)) = (
                    bytes::u32_at(tree, at + l.node_name_at),
                    bytes::u32_at(tree, at + l.node_parent_pc_at),
                ) else {
                    return false;
                };
                let starts_string = name_off == 0 || names.get(name_off as usize - 1) == Some(&0);
                let named =
                    bytes::cstr_at(names, u64::from(name_off)).is_some_and(|n| !n.is_empty());
                if !(starts_string && named && u64::from(parent_pc) < len) {
                    return false;
                }
            }
            judged += 1;
        }
        judged >= 3
    }

    /// Function `i`'s inline tree offset (from gofunc), inline index table offset (in pctab)
    /// and length in bytes; `None` when it has no inline tree.
    fn inline_tables(&self, i: u64, l: &Layout) -> Option<(u32, u32, u64)> {
        let f = self.function(i)?;
        let rec = self.func_record(i)?;
        let npcdata = u64::from(self.record_field(rec, 7)?);
        let nfuncdata = u64::from(*rec.get(usize::try_from(l.nfuncdata_at).ok()?)?);
        if npcdata <= PCDATA_INL_TREE_INDEX || nfuncdata <= FUNCDATA_INL_TREE {
            return None;
        }
        let index_table = bytes::u32_at(rec, l.header + 4 * PCDATA_INL_TREE_INDEX)?;
        let tree_off = bytes::u32_at(rec, l.header + 4 * npcdata + 4 * FUNCDATA_INL_TREE)?;
        if tree_off == u32::MAX || index_table == 0 {
            return None;
        }
        Some((tree_off, index_table, f.end.0.checked_sub(f.entry.0)?))
    }
}
