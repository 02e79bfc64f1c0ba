//! Source lines and inlined functions at a code address, from DWARF: the line table
//! (`.debug_line`, DWARF 5 §6.2) gives the file and line of the instruction, and the
//! `DW_TAG_inlined_subroutine` entries under its function (§3.3.8) give the functions the compiler
//! inlined there, each with the line of its call site in the function around it.
//!
//! Read with the addr2line crate (<https://docs.rs/addr2line>), which parses a compilation unit's
//! line program and function entries only when an address inside that unit is first asked for,
//! and keeps them. The answer is what binutils' `addr2line -i -f` prints: innermost function
//! first, each with its location, the outermost being the function the code belongs to.
//!
//! The bytes come from a file the target controls. addr2line and gimli return errors on malformed
//! input; a panic inside them is caught ([`std::panic::catch_unwind`], as the ELF reader does) and
//! counts as "no lines here", never a crash of the tracer.

use super::sections::{DebugSections, Reader};
use std::sync::Mutex;

/// Where a frame's instruction is in the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    /// The file as the compiler named it, joined with its directory and the unit's compilation
    /// directory when those are given (as addr2line prints it).
    pub file: String,
    /// 1-based line; `None` where the line table gives 0 ("no line": compiler-generated code).
    pub line: Option<u32>,
    /// 1-based column; `None` where the table gives none or 0.
    pub column: Option<u32>,
}

/// One function running at an address, as DWARF names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineFrame {
    /// The function's linkage name (`DW_AT_linkage_name`, mangled as the symbol table spells
    /// it) or else its `DW_AT_name`; `None` when DWARF names none.
    pub function: Option<String>,
    pub location: Option<SourceLine>,
}

/// The line tables and inlined functions of one file's DWARF, parsed unit by unit on demand.
pub struct Lines {
    context: Mutex<addr2line::Context<Reader>>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lines")
    }
}

fn guarded<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .ok()
        .flatten()
}

impl Lines {
    /// The lines of `sections`' DWARF; `None` when it has no `.debug_info` or its unit headers
    /// do not read.
    pub fn new(sections: &DebugSections) -> Option<Lines> {
        if !sections.has_debug_info() {
            return None;
        }
        let dwarf = sections.dwarf();
        let context = guarded(|| addr2line::Context::from_dwarf(dwarf).ok())?;
        Some(Lines {
            context: Mutex::new(context),
        })
    }

    /// The functions running at link-time address `vaddr`, innermost first, the last being the
    /// function the code belongs to; empty when no unit covers the address or its entries do not
    /// read (a frame that errors ends the list: what was read before it stays).
    pub fn frames(&self, vaddr: u64) -> Vec<LineFrame> {
        let Ok(context) = self.context.lock() else {
            return Vec::new();
        };
        guarded(|| {
            let mut out = Vec::new();
            let Ok(mut iter) = context.find_frames(vaddr).skip_all_loads() else {
                return Some(out);
            };
            // A hostile file can nest inlined entries without end; no real program comes near.
            while out.len() < MAX_INLINE_DEPTH {
                let Ok(Some(frame)) = iter.next() else { break };
                let function = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.raw_name().ok())
                    .map(|n| n.into_owned());
                let location = frame.location.and_then(|l| {
                    Some(SourceLine {
                        file: l.file?.to_string(),
                        line: l.line.filter(|&n| n > 0),
                        column: l.column.filter(|&n| n > 0),
                    })
                });
                out.push(LineFrame { function, location });
            }
            Some(out)
        })
        .unwrap_or_default()
    }
}

/// Most inlined frames reported at one address.
const MAX_INLINE_DEPTH: usize = 256;
