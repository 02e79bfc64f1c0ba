//! Reads the ReadyToRun header, its section list, RUNTIME_FUNCTIONS, and the entry-point records
//! of METHODDEF_ENTRYPOINTS and INSTANCE_METHOD_ENTRYPOINTS
//! (dotnet/runtime `docs/design/coreclr/botr/readytorun-format.md`).

use super::native_format::{decode_unsigned, NativeArray, NativeHashtable};
use super::types::{R2rHeader, R2rSection, RuntimeFunction, SIGNATURE};
use crate::bytes::{u16_at, u32_at, us};
use crate::dotnet::pe::{PeImage, MACHINE_AMD64};

pub use super::versions::{MAX_MAJOR, MIN_MAJOR};

/// Parses the READYTORUN_HEADER at `rva`. `Err(what)` when it is outside the file, has the
/// wrong signature, or its section list is cut short.
pub fn parse_header(pe: &PeImage, data: &[u8], rva: u32) -> Result<R2rHeader, String> {
    let h = pe
        .bytes_at(data, rva, 16)
        .ok_or("ReadyToRun header outside the file")?;
    let sig = u32_at(h, 0).unwrap_or(0);
    if sig != SIGNATURE {
        return Err(format!(
            "ManagedNativeHeader signature {sig:#x} is not RTR (an NGen image or corrupt)"
        ));
    }
    let major_version = u16_at(h, 4).unwrap_or(0);
    let minor_version = u16_at(h, 6).unwrap_or(0);
    let flags = u32_at(h, 8).unwrap_or(0);
    let n = u32_at(h, 12).unwrap_or(0);
    if n > 1024 {
        return Err(format!("ReadyToRun header claims {n} sections"));
    }
    let sections = parse_sections(
        pe,
        data,
        rva.checked_add(16).ok_or("header RVA overflows")?,
        n,
    )?;
    Ok(R2rHeader {
        rva,
        major_version,
        minor_version,
        flags,
        sections,
    })
}

/// Reads `n` READYTORUN_SECTION records at `rva` (also used for component assemblies' core
/// headers).
pub fn parse_sections(
    pe: &PeImage,
    data: &[u8],
    rva: u32,
    n: u32,
) -> Result<Vec<R2rSection>, String> {
    let raw = pe
        .bytes_at(
            data,
            rva,
            n.checked_mul(12).ok_or("section count overflows")?,
        )
        .ok_or("ReadyToRun section list cut short")?;
    Ok((0..us(n))
        .map(|i| R2rSection {
            kind: u32_at(raw, 12 * i).unwrap_or(0),
            rva: u32_at(raw, 12 * i + 4).unwrap_or(0),
            size: u32_at(raw, 12 * i + 8).unwrap_or(0),
        })
        .collect())
}

/// The RUNTIME_FUNCTIONS table (readytorun-format.md: x64 entries are begin, end, unwind RVA;
/// other targets begin and unwind, so the end is the next entry's begin).
pub fn runtime_functions(
    pe: &PeImage,
    data: &[u8],
    section: R2rSection,
) -> Result<Vec<RuntimeFunction>, String> {
    let raw = pe
        .bytes_at(data, section.rva, section.size)
        .ok_or("RUNTIME_FUNCTIONS section outside the file")?;
    if pe.machine == MACHINE_AMD64 {
        Ok(raw
            .chunks_exact(12)
            .map(|c| RuntimeFunction {
                begin: u32_at(c, 0).unwrap_or(0),
                end: u32_at(c, 4).unwrap_or(0),
                unwind: u32_at(c, 8).unwrap_or(0),
            })
            .collect())
    } else {
        let begins: Vec<(u32, u32)> = raw
            .chunks_exact(8)
            .map(|c| (u32_at(c, 0).unwrap_or(0), u32_at(c, 4).unwrap_or(0)))
            .collect();
        Ok(begins
            .iter()
            .enumerate()
            .map(|(i, &(begin, unwind))| RuntimeFunction {
                begin,
                end: begins.get(i + 1).map_or(begin, |n| n.0),
                unwind,
            })
            .collect())
    }
}

/// The file offset of a section's first byte, for the NativeFormat readers (they address the
/// whole file).
pub fn section_file_pos(pe: &PeImage, section: R2rSection) -> Option<usize> {
    let off = pe.rva_to_file_offset(crate::addr::Rva(section.rva.into()))?;
    usize::try_from(off.0).ok()
}

/// An entry-point record at `pos` (readytorun-format.md "MethodDefEntryPoints"): the
/// RUNTIME_FUNCTIONS index shifted left by 1, bit 0 = a fixup list follows (then bit 1 = the
/// list is reached through a backwards offset, and the index is shifted by 2). Returns
/// `(runtime function index, has fixups)`; `None` when cut short.
pub fn entry_point(data: &[u8], pos: usize) -> Option<(u32, bool)> {
    let (id, _) = decode_unsigned(data, pos)?;
    if id & 1 != 0 {
        Some((id >> 2, true))
    } else {
        Some((id >> 1, false))
    }
}

/// Every `(MethodDef rid, runtime function index, has fixups)` of a METHODDEF_ENTRYPOINTS
/// section. `Err(what)` when the array header is malformed; absent elements are skipped.
pub fn method_def_entry_points(
    pe: &PeImage,
    data: &[u8],
    section: R2rSection,
) -> Result<Vec<(u32, u32, bool)>, String> {
    let pos = section_file_pos(pe, section).ok_or("METHODDEF_ENTRYPOINTS outside the file")?;
    let arr = NativeArray::parse(data, pos).ok_or("METHODDEF_ENTRYPOINTS header malformed")?;
    let mut out = Vec::new();
    for i in 0..arr.len() {
        if let Some(p) = arr.get(data, i) {
            let (rf, fix) = entry_point(data, p).ok_or("method entry point cut short")?;
            out.push((i + 1, rf, fix));
        }
    }
    Ok(out)
}

/// Positions of every INSTANCE_METHOD_ENTRYPOINTS entry's signature.
pub fn instance_entry_positions(
    pe: &PeImage,
    data: &[u8],
    section: R2rSection,
) -> Result<Vec<usize>, String> {
    let pos =
        section_file_pos(pe, section).ok_or("INSTANCE_METHOD_ENTRYPOINTS outside the file")?;
    let end = pos.saturating_add(us(section.size));
    let table = NativeHashtable::parse(data, pos, end)
        .ok_or("INSTANCE_METHOD_ENTRYPOINTS header malformed")?;
    Ok(table.entries(data)?.into_iter().map(|(_, p)| p).collect())
}
