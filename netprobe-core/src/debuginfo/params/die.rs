//! Reading a DIE's attributes: references within a unit, strings, and what an out-of-line
//! instance leaves to its abstract instance (`DW_AT_abstract_origin`, `DW_AT_specification`;
//! DWARF 5 §3.3.8).

use crate::debuginfo::Reader;
use crate::error::{Error, Result};
use gimli::{AttributeValue, DebugInfoOffset, DebuggingInformationEntry, Unit, UnitOffset};
use std::path::Path;

/// How many `DW_AT_abstract_origin`/`DW_AT_specification` links are followed for a name or type.
const MAX_ORIGIN_LINKS: usize = 4;

pub(super) fn malformed(why: impl std::fmt::Display) -> Error {
    Error::malformed(Path::new("DWARF"), format!("{why}"))
}

/// The unit at `.debug_info` offset `offset`.
pub(super) fn unit_at(dwarf: &gimli::Dwarf<Reader>, offset: usize) -> Result<Unit<Reader>> {
    let header = dwarf
        .debug_info
        .header_from_offset(DebugInfoOffset(offset))
        .map_err(malformed)?;
    dwarf.unit(header).map_err(malformed)
}

/// `entry`'s attribute `at`, or the one of the DIE its `DW_AT_abstract_origin` or
/// `DW_AT_specification` names (within its unit), a few links deep.
pub(super) fn attr_followed(
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
    at: gimli::DwAt,
) -> Option<AttributeValue<Reader>> {
    if let Ok(Some(v)) = entry.attr_value(at) {
        return Some(v);
    }
    let mut link = origin(unit, entry)?;
    for _ in 0..MAX_ORIGIN_LINKS {
        let e = unit.entry(link).ok()?;
        if let Ok(Some(v)) = e.attr_value(at) {
            return Some(v);
        }
        link = origin(unit, &e)?;
    }
    None
}

/// The DIE `entry` refers to by `DW_AT_abstract_origin` or `DW_AT_specification`, when it is in
/// `unit`.
fn origin(
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
) -> Option<UnitOffset> {
    let v = entry
        .attr_value(gimli::DW_AT_abstract_origin)
        .ok()
        .flatten()
        .or_else(|| entry.attr_value(gimli::DW_AT_specification).ok().flatten())?;
    unit_ref(unit, v)
}

/// A reference attribute as an offset in `unit`.
pub(super) fn unit_ref(unit: &Unit<Reader>, v: AttributeValue<Reader>) -> Option<UnitOffset> {
    match v {
        AttributeValue::UnitRef(o) => Some(o),
        AttributeValue::DebugInfoRef(o) => o.to_unit_offset(&unit.header),
        _ => None,
    }
}

/// A string attribute (`DW_AT_name`), followed through origins.
pub(super) fn name_of(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    entry: &DebuggingInformationEntry<'_, '_, Reader>,
    at: gimli::DwAt,
) -> Option<String> {
    let v = attr_followed(unit, entry, at)?;
    let s = dwarf.attr_string(unit, v).ok()?;
    Some(String::from_utf8_lossy(&gimli::Reader::to_slice(&s).ok()?).into_owned())
}
