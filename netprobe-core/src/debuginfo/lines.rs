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
    context: Mutex<Checked>,
}

/// The addr2line context, each compilation unit's address ranges, and per unit asked about (by
/// its `.debug_info` offset) whether its entries nest shallowly enough to read their inlined
/// functions.
struct Checked {
    context: addr2line::Context<Reader>,
    dwarf: gimli::Dwarf<Reader>,
    /// `(begin, end, unit offset)`, sorted by begin.
    spans: Vec<(u64, u64, usize)>,
    shallow: std::collections::HashMap<usize, bool>,
}

/// Every unit's address ranges (its root entry's `DW_AT_low_pc`/`high_pc` or `DW_AT_ranges`),
/// as addr2line reads them to find a unit; units that do not read are left out.
fn unit_spans(dwarf: &gimli::Dwarf<Reader>) -> Vec<(u64, u64, usize)> {
    let mut spans = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Some(offset) = header.offset().as_debug_info_offset() else {
            continue;
        };
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let Ok(mut ranges) = dwarf.unit_ranges(&unit) else {
            continue;
        };
        while let Ok(Some(r)) = ranges.next() {
            if r.begin < r.end {
                spans.push((r.begin, r.end, offset.0));
            }
        }
    }
    spans.sort_unstable();
    spans
}

impl Checked {
    /// Every unit covering `vaddr` nests shallowly (each unit checked once).
    fn shallow_at(&mut self, vaddr: u64) -> bool {
        let end = self.spans.partition_point(|s| s.0 <= vaddr);
        let units: Vec<usize> = self.spans[..end]
            .iter()
            .filter(|s| vaddr < s.1)
            .map(|s| s.2)
            .collect();
        units.into_iter().all(|off| {
            let dwarf = &self.dwarf;
            *self.shallow.entry(off).or_insert_with(|| {
                let header = dwarf
                    .debug_info
                    .header_from_offset(gimli::DebugInfoOffset(off));
                match header.and_then(|h| dwarf.unit(h)) {
                    Ok(unit) => nests_shallowly(&unit),
                    Err(_) => false,
                }
            })
        })
    }
}

/// Deepest entry nesting read for inlined functions. addr2line reads nested
/// `DW_TAG_inlined_subroutine` entries recursively, so a hostile unit nesting them without end
/// would exhaust the stack; compilers nest a few dozen deep. A deeper unit gives its line only.
const MAX_ENTRY_DEPTH: isize = 1024;

/// The unit's entries nest at most [`MAX_ENTRY_DEPTH`] deep and read (one pass over its
/// abbreviation codes and attributes, no allocation).
fn nests_shallowly(unit: &gimli::Unit<Reader>) -> bool {
    let Ok(mut entries) = unit.entries_raw(None) else {
        return false;
    };
    while !entries.is_empty() {
        if entries.next_depth() > MAX_ENTRY_DEPTH {
            return false;
        }
        match entries.read_abbreviation() {
            Ok(Some(abbrev)) => {
                if entries.skip_attributes(abbrev.attributes()).is_err() {
                    return false;
                }
            }
            Ok(None) => {}
            Err(_) => return false,
        }
    }
    true
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
        let (context, spans) = guarded(|| {
            let spans = unit_spans(&dwarf);
            Some((
                addr2line::Context::from_dwarf(sections.dwarf()).ok()?,
                spans,
            ))
        })?;
        Some(Lines {
            context: Mutex::new(Checked {
                context,
                dwarf,
                spans,
                shallow: Default::default(),
            }),
        })
    }

    /// The functions running at link-time address `vaddr`, innermost first, the last being the
    /// function the code belongs to; empty when no unit covers the address or its entries do not
    /// read (a frame that errors ends the list: what was read before it stays).
    pub fn frames(&self, vaddr: u64) -> Vec<LineFrame> {
        let Ok(mut checked) = self.context.lock() else {
            return Vec::new();
        };
        guarded(|| {
            let mut out = Vec::new();
            let shallow = checked.shallow_at(vaddr);
            let context = &checked.context;
            if !shallow {
                let location = context.find_location(vaddr).ok().flatten();
                out.push(LineFrame {
                    function: None,
                    location: location.and_then(|l| source_line(&l)),
                });
                return Some(out);
            }
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
                let location = frame.location.as_ref().and_then(source_line);
                out.push(LineFrame { function, location });
            }
            Some(out)
        })
        .unwrap_or_default()
    }
}

fn source_line(l: &addr2line::Location<'_>) -> Option<SourceLine> {
    Some(SourceLine {
        file: l.file?.to_string(),
        line: l.line.filter(|&n| n > 0),
        column: l.column.filter(|&n| n > 0),
    })
}

/// Most inlined frames reported at one address.
const MAX_INLINE_DEPTH: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::Reader as _;
    use proptest::prelude::*;

    /// The DWARF of this test binary, read once.
    fn own() -> &'static DebugSections {
        static OWN: std::sync::OnceLock<DebugSections> = std::sync::OnceLock::new();
        OWN.get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            DebugSections::parse(&exe, &std::fs::read(&exe).unwrap()).unwrap()
        })
    }

    /// The test binary's DWARF with `.debug_info` cut after the units in its first 256 KiB, and
    /// at least its first unit whatever its size (the link order decides which crate's unit
    /// comes first), so each proptest case parses a few unit headers, not thousands; read once.
    fn base() -> &'static DebugSections {
        static BASE: std::sync::OnceLock<DebugSections> = std::sync::OnceLock::new();
        BASE.get_or_init(|| {
            let dwarf = own().dwarf();
            let mut units = dwarf.units();
            let mut end = 0;
            while let Ok(Some(h)) = units.next() {
                let off = h.offset().as_debug_info_offset().unwrap().0;
                let next = off + h.length_including_self();
                if next > 256 << 10 && end > 0 {
                    break;
                }
                end = next;
            }
            let info = own().reader(".debug_info");
            let info = info.to_slice().unwrap();
            own()
                .clone()
                .with_section(".debug_info", info[..end].to_vec())
        })
    }

    /// Addresses of rows with a file and line in [`base`]'s units, with that location; read
    /// once.
    fn rows() -> &'static [(u64, String, u32)] {
        static ROWS: std::sync::OnceLock<Vec<(u64, String, u32)>> = std::sync::OnceLock::new();
        ROWS.get_or_init(|| {
            let lines = Lines::new(base()).unwrap();
            let guard = lines.context.lock().unwrap();
            let ctx = &guard.context;
            // From `.text` on: the linker leaves the rows of functions it dropped at address 0.
            let text = own().address(".text").unwrap();
            ctx.find_location_range(text, u64::MAX)
                .unwrap()
                .filter_map(|(a, _, l)| Some((a, l.file?.to_string(), l.line.filter(|&n| n > 0)?)))
                .step_by(7)
                .take(16)
                .collect()
        })
    }

    #[test]
    fn the_test_binary_has_its_line_table_rows_lines() {
        let lines = Lines::new(base()).unwrap();
        assert!(rows().len() >= 8);
        for (a, file, line) in rows() {
            let frames = lines.frames(*a);
            let inner = frames.first().unwrap_or_else(|| panic!("{a:#x}: no frame"));
            let loc = inner.location.as_ref().expect("a row has a location");
            assert_eq!((&loc.file, loc.line), (file, Some(*line)), "{a:#x}");
        }
    }

    /// A DWARF 4 unit at 0x1000..0x1100: a function with `depth` inlined subroutines nested
    /// in each other, all covering the whole range.
    fn nested(depth: usize) -> DebugSections {
        const ADDR: u8 = 0x01; // DW_FORM_addr
        const DATA8: u8 = 0x07; // DW_FORM_data8
        let mut abbrev = Vec::new();
        // code, tag (compile_unit, subprogram, inlined_subroutine), children, low_pc, high_pc.
        for (code, tag) in [(1u8, 0x11u8), (2, 0x2e), (3, 0x1d)] {
            abbrev.extend_from_slice(&[code, tag, 1, 0x11, ADDR, 0x12, DATA8, 0, 0]);
        }
        abbrev.push(0);
        let mut dies = Vec::new();
        let mut die = |code: u8| {
            dies.push(code);
            dies.extend_from_slice(&0x1000u64.to_le_bytes());
            dies.extend_from_slice(&0x100u64.to_le_bytes());
        };
        die(1);
        die(2);
        for _ in 0..depth {
            die(3);
        }
        dies.extend(std::iter::repeat_n(0u8, depth + 2));
        let mut info = Vec::new();
        info.extend_from_slice(&((dies.len() + 7) as u32).to_le_bytes());
        info.extend_from_slice(&4u16.to_le_bytes());
        info.extend_from_slice(&0u32.to_le_bytes());
        info.push(8);
        info.extend_from_slice(&dies);
        DebugSections::default()
            .with_section(".debug_info", info)
            .with_section(".debug_abbrev", abbrev)
    }

    #[test]
    fn inlined_functions_nested_without_end_are_not_read() {
        // Read: a function and its ten nested inlined functions.
        let lines = Lines::new(&nested(10)).unwrap();
        assert_eq!(lines.frames(0x1010).len(), 11);
        // A hundred thousand deep would exhaust the stack of addr2line's recursive reader: the
        // unit is checked first and gives no function.
        let lines = Lines::new(&nested(100_000)).unwrap();
        let frames = lines.frames(0x1010);
        assert!(frames.len() <= 1 && frames.iter().all(|f| f.function.is_none()));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
        /// Flipped and cut `.debug_info`, `.debug_abbrev`, `.debug_line` or `.debug_str` bytes
        /// give fewer frames or none, in bounded time, never a panic (the catch in `guarded` is
        /// the second guard: gimli and addr2line return errors first).
        #[test]
        fn corrupt_dwarf_gives_no_lines_not_a_panic(
            which in 0usize..4,
            keep in 1usize..(256 << 10),
            flips in proptest::collection::vec((any::<u32>(), any::<u8>()), 1..32),
        ) {
            let name = [".debug_info", ".debug_abbrev", ".debug_line", ".debug_str"][which];
            let mut data = base().reader(name).to_slice().unwrap().into_owned();
            data.truncate(keep);
            for (at, b) in flips {
                if !data.is_empty() {
                    let i = at as usize % data.len();
                    data[i] ^= b | 1;
                }
            }
            let hostile = base().clone().with_section(name, data);
            let addrs: Vec<u64> = rows().iter().map(|r| r.0).collect();
            if let Some(lines) = Lines::new(&hostile) {
                for a in addrs {
                    prop_assert!(lines.frames(a).len() <= MAX_INLINE_DEPTH);
                }
            }
        }
    }
}
