//! Where a Go binary's funcdata offsets count from: `moduledata.gofunc`, the link-time address of
//! the `go:func.*` symbol (`go.func.*` before Go 1.20; `runtime/symtab.go`, `moduledata`, and
//! `_func.funcdata`: "offsets from gofunc" since Go 1.18).
//!
//! The field's word index in `moduledata` moves between releases (Go 1.20 adds `covctrs`, later
//! releases `typedesclen`, `itaboffset`, `itabsize` before it), so it is not read at a fixed
//! index: candidates are the words of the located module data after `etext` (see
//! [`super::moduledata`]; found without symbols, so stripped binaries too); the first candidate whose
//! inline trees decode as inline trees ([`super::Pclntab::gofunc_plausible`]) is taken. No
//! candidate passes: `None`, and functions get no inlined frames rather than wrong ones.

use super::moduledata::{find_moduledata, LinkImage, TableFacts};
use super::GoBinary;
use crate::addr::VirtAddr;

/// Words of the module data searched after `etext` (the structure has about 40 words before
/// its slices of type links; `gofunc` is among the first 24 after `etext` in every release).
const WORDS_AFTER_ETEXT: u64 = 32;

/// `moduledata.gofunc` of `bin`; `None` when no candidate passes the inline-tree check.
pub fn go_func_base(bin: &GoBinary<'_>) -> Option<u64> {
    let bytes = bin.bytes();
    let segments = bin.segments();
    let read_at = |vaddr: u64| {
        let off = segments.file_offset(VirtAddr(vaddr))?;
        bytes.get(usize::try_from(off.0).ok()?..)
    };
    let table = bin.pclntab();
    let mut candidates: Vec<u64> = Vec::new();
    if let Some(vaddr) = bin.pclntab_location().vaddr {
        let image = LinkImage {
            segments: segments
                .0
                .iter()
                .filter_map(|s| Some((s.vaddr, crate::bytes::slice(bytes, s.offset, s.filesz)?)))
                .collect(),
            relative: Default::default(),
        };
        let h = table.header();
        let facts = TableFacts {
            vaddr: vaddr.0,
            ptr_size: h.ptr_size,
            nfunc: h.nfunc,
            funcname_offset: h.funcname_offset,
            pctab_offset: h.pctab_offset,
            functab_offset: h.functab_offset,
        };
        if let Some(md) = find_moduledata(&image, &facts) {
            let p = u64::from(h.ptr_size);
            // `etext` is word 23 (see `super::moduledata`).
            for w in 24..24 + WORDS_AFTER_ETEXT {
                if let Some(v) = md
                    .vaddr
                    .checked_add(w * p)
                    .and_then(|a| image.word(a, h.ptr_size))
                {
                    if v != 0 && segments.file_offset(VirtAddr(v)).is_some() {
                        candidates.push(v);
                    }
                }
            }
        }
    }
    candidates
        .into_iter()
        .find(|&g| table.gofunc_plausible(g, read_at))
}
