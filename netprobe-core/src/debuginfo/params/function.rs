//! Finding a function's subprogram DIE and its formal parameters, and where its prologue ends.

use super::die::{attr_followed, malformed, name_of, unit_at};
use super::location::{evaluate, frame_base, Cfa};
use super::types::{resolve_type, ParamType, TypeUnits};
use super::{Param, MAX_PARAMS};
use crate::debuginfo::Reader;
use crate::error::Result;
use gimli::{AttributeValue, DebuggingInformationEntry, Unit, UnitOffset};

/// Which function to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionQuery<'a> {
    /// By `DW_AT_name` or `DW_AT_linkage_name` (the symbol name).
    Name(&'a str),
    /// By its entry address (link-time, as the symbol table gives it).
    Entry(u64),
}

/// A concrete (out-of-line) subprogram: its name, code range and where its DIE is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionDie {
    pub name: String,
    /// The first instruction's address.
    pub entry: u64,
    /// One past the last byte of the range that starts at `entry`.
    pub end: u64,
    /// The unit's offset in `.debug_info`.
    unit: usize,
    /// The DIE's offset in its unit.
    die: usize,
}

/// The entry address and end of a subprogram's code, when it has code.
fn code_range(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
) -> Option<(u64, u64)> {
    let low = match entry.attr_value(gimli::DW_AT_low_pc).ok()? {
        Some(AttributeValue::Addr(a)) => Some(a),
        Some(AttributeValue::DebugAddrIndex(i)) => dwarf.address(unit, i).ok(),
        _ => None,
    };
    if let Some(low) = low {
        let high = match entry.attr_value(gimli::DW_AT_high_pc).ok()? {
            Some(AttributeValue::Addr(a)) => a,
            Some(AttributeValue::Udata(n)) => low.checked_add(n)?,
            Some(AttributeValue::DebugAddrIndex(i)) => dwarf.address(unit, i).ok()?,
            _ => low.checked_add(1)?,
        };
        return Some((low, high));
    }
    // DW_AT_ranges: the range holding DW_AT_entry_pc, else the first one.
    let entry_pc = match entry.attr_value(gimli::DW_AT_entry_pc).ok()? {
        Some(AttributeValue::Addr(a)) => Some(a),
        _ => None,
    };
    let mut ranges = dwarf.die_ranges(unit, entry).ok()?;
    let mut first = None;
    for _ in 0..1024 {
        let Ok(Some(r)) = ranges.next() else { break };
        if entry_pc.is_some_and(|pc| r.begin <= pc && pc < r.end) {
            return Some((entry_pc?, r.end));
        }
        first.get_or_insert((r.begin, r.end));
    }
    first
}

/// Finds the concrete subprogram `query` names in `dwarf`. `Ok(None)` when no unit describes it
/// (no DWARF for it: stripped, or built without `-g`).
pub fn find_function(
    dwarf: &gimli::Dwarf<Reader>,
    query: FunctionQuery<'_>,
) -> Result<Option<FunctionDie>> {
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(malformed)? {
        let Some(unit_offset) = header.offset().as_debug_info_offset() else {
            continue;
        };
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        if let FunctionQuery::Entry(pc) = query {
            if !unit_may_hold(dwarf, &unit, pc) {
                continue;
            }
        }
        let mut cursor = unit.entries();
        while let Ok(Some((_, entry))) = cursor.next_dfs() {
            if entry.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let Some((low, high)) = code_range(dwarf, &unit, entry) else {
                continue;
            };
            let name = name_of(dwarf, &unit, entry, gimli::DW_AT_name);
            let hit = match query {
                FunctionQuery::Entry(pc) => low == pc,
                FunctionQuery::Name(n) => {
                    name.as_deref() == Some(n)
                        || name_of(dwarf, &unit, entry, gimli::DW_AT_linkage_name).as_deref()
                            == Some(n)
                }
            };
            if hit {
                return Ok(Some(FunctionDie {
                    name: name.unwrap_or_else(|| format!("{low:#x}")),
                    entry: low,
                    end: high,
                    unit: unit_offset.0,
                    die: entry.offset().0,
                }));
            }
        }
    }
    Ok(None)
}

/// Whether `unit`'s address ranges cover `pc` (or cannot be read: then it is searched).
fn unit_may_hold(dwarf: &gimli::Dwarf<Reader>, unit: &Unit<Reader>, pc: u64) -> bool {
    let Ok(mut ranges) = dwarf.unit_ranges(unit) else {
        return true;
    };
    let mut any = false;
    for _ in 0..65536 {
        match ranges.next() {
            Ok(Some(r)) => {
                any = true;
                if r.begin <= pc && pc < r.end {
                    return true;
                }
            }
            Ok(None) => break,
            Err(_) => return true,
        }
    }
    !any
}

/// The formal parameters of `function` (Go's results, `DW_AT_variable_parameter`, left out),
/// their locations evaluated at `pc` with the CFA there.
pub(super) fn read_params(
    dwarf: &gimli::Dwarf<Reader>,
    function: &FunctionDie,
    pc: u64,
    cfa: Option<Cfa>,
) -> Result<Vec<Param>> {
    let unit = std::rc::Rc::new(unit_at(dwarf, function.unit)?);
    let units = TypeUnits::new(dwarf);
    let mut tree = unit
        .entries_tree(Some(UnitOffset(function.die)))
        .map_err(malformed)?;
    let root = tree.root().map_err(malformed)?;
    let base = frame_base(dwarf, &unit, root.entry(), pc, function.entry, cfa);
    let mut children = root.children();
    let mut out = Vec::new();
    while let Some(child) = children.next().map_err(malformed)? {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_formal_parameter {
            continue;
        }
        if out.len() == MAX_PARAMS {
            break;
        }
        if matches!(
            e.attr_value(gimli::DW_AT_variable_parameter),
            Ok(Some(AttributeValue::Flag(true)))
        ) {
            continue;
        }
        let name = name_of(dwarf, &unit, e, gimli::DW_AT_name)
            .unwrap_or_else(|| format!("arg{}", out.len()));
        let ty = attr_followed(&unit, e, gimli::DW_AT_type)
            .and_then(|v| units.target(&unit, v))
            .map(|(u, t)| resolve_type(&units, &u, t))
            .unwrap_or(ParamType::Other {
                name: "?".into(),
                why: "no type".into(),
            });
        let location = evaluate(dwarf, &unit, e, pc, &base);
        out.push(Param { name, ty, location });
    }
    Ok(out)
}

/// Where `function`'s prologue ends, the way gdb and `perf probe` find it from the line table
/// (gdb `skip_prologue_using_sal`): the first row flagged `prologue_end` (LLVM writes it), else
/// the second statement row inside the function (GCC starts a new row at the first statement
/// after the prologue). `None` when the line table has no such row.
pub fn prologue_end(dwarf: &gimli::Dwarf<Reader>, function: &FunctionDie) -> Result<Option<u64>> {
    let unit = unit_at(dwarf, function.unit)?;
    let Some(program) = unit.line_program.clone() else {
        return Ok(None);
    };
    let mut rows = program.rows();
    let mut first_line = None;
    let mut second = None;
    let mut steps = 0usize;
    while let Some((_, row)) = rows.next_row().map_err(malformed)? {
        steps += 1;
        if steps > 4_000_000 {
            break;
        }
        let a = row.address();
        if row.end_sequence() || a < function.entry || a >= function.end {
            continue;
        }
        if row.prologue_end() && a > function.entry {
            return Ok(Some(a));
        }
        if !row.is_stmt() {
            continue;
        }
        match first_line {
            None if a == function.entry => first_line = Some(row.line()),
            Some(l) if a > function.entry && row.line() != l && second.is_none() => {
                second = Some(a)
            }
            _ => {}
        }
    }
    Ok(second)
}
