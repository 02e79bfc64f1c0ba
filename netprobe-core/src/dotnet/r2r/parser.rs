//! Reads the ReadyToRun header, its section list, RUNTIME_FUNCTIONS, and the entry-point records
//! of METHODDEF_ENTRYPOINTS and INSTANCE_METHOD_ENTRYPOINTS
//! (dotnet/runtime `docs/design/coreclr/botr/readytorun-format.md`).

use super::native_format::{decode_unsigned, NativeArray, NativeHashtable};
use super::types::{R2rHeader, R2rSection, RuntimeFunction, SIGNATURE};
use crate::bytes::{u16_at, u32_at, us};
use crate::dotnet::pe::{PeImage, MACHINE_AMD64, MACHINE_ARM64};

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
/// other targets begin and unwind).
///
/// An arm64 entry has no end: the function's length is in its unwind data (Microsoft, "ARM64
/// exception handling", `.pdata` and `.xdata` records; what R2RDump reads,
/// `ILCompiler.Reflection.ReadyToRun/Arm64/UnwindInfo.cs`): when the unwind word's low two bits
/// are 0 it is the RVA of an `.xdata` record whose first word holds `Function Length` in bits
/// 0..18, in 4-byte units; otherwise the word itself is packed unwind data with the length in
/// bits 2..13, also in 4-byte units. Where neither can be read the next entry's begin ends the
/// function (as for the other targets).
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
            .map(|(i, &(begin, unwind))| {
                let next = begins.get(i + 1).map_or(begin, |n| n.0);
                let end = match pe.machine {
                    MACHINE_ARM64 => arm64_function_length(pe, data, unwind)
                        .and_then(|len| begin.checked_add(len))
                        .unwrap_or(next),
                    _ => next,
                };
                RuntimeFunction { begin, end, unwind }
            })
            .collect())
    }
}

/// The length in bytes of an arm64 function from its RUNTIME_FUNCTION's unwind word (packed
/// unwind data, or the RVA of an `.xdata` record): see [`runtime_functions`].
fn arm64_function_length(pe: &PeImage, data: &[u8], unwind: u32) -> Option<u32> {
    let units = if unwind & 0b11 != 0 {
        (unwind >> 2) & 0x7ff
    } else {
        u32_at(pe.bytes_at(data, unwind, 4)?, 0)? & 0x3_ffff
    };
    Some(units * 4)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dotnet::pe::PeSection;

    /// An image whose one section maps RVA 0x1000.. to file offset 0, holding `bytes`.
    fn image(machine: u16, len: u32) -> PeImage {
        PeImage {
            machine,
            target_os: Some("linux"),
            preferred_image_base: 0,
            size_of_headers: 0x200,
            pe32_plus: true,
            sections: vec![PeSection {
                name: ".text".into(),
                virtual_address: 0x1000,
                virtual_size: len,
                pointer_to_raw_data: 0,
                size_of_raw_data: len,
                characteristics: 0x6000_0020,
            }],
            data_directories: Vec::new(),
        }
    }

    /// Three arm64 entries: an `.xdata` record (length 0x1c units = 0x70 bytes, plus epilog and
    /// code-word bits that are not the length), packed unwind data (length 5 units = 0x14 bytes),
    /// and an `.xdata` RVA outside the file (the next begin ends it, the last one is empty).
    #[test]
    fn arm64_lengths_come_from_the_unwind_data() {
        let mut bytes = vec![0u8; 0x40];
        let table = [
            (0x2000u32, 0x1030u32),
            (0x2080, (5 << 2) | 1),
            (0x20a0, 0x9000),
        ];
        for (i, (begin, unwind)) in table.iter().enumerate() {
            bytes[8 * i..8 * i + 4].copy_from_slice(&begin.to_le_bytes());
            bytes[8 * i + 4..8 * i + 8].copy_from_slice(&unwind.to_le_bytes());
        }
        let xdata: u32 = 0x1c | (1 << 21) | (3 << 27);
        bytes[0x30..0x34].copy_from_slice(&xdata.to_le_bytes());
        let section = R2rSection {
            kind: 0,
            rva: 0x1000,
            size: 24,
        };
        let pe = image(MACHINE_ARM64, 0x40);
        let ends: Vec<(u32, u32)> = runtime_functions(&pe, &bytes, section)
            .unwrap()
            .iter()
            .map(|f| (f.begin, f.end))
            .collect();
        assert_eq!(ends, [(0x2000, 0x2070), (0x2080, 0x2094), (0x20a0, 0x20a0)]);
        // Another non-x64 machine keeps the next-begin rule.
        let pe = image(crate::dotnet::pe::MACHINE_I386, 0x40);
        let ends: Vec<u32> = runtime_functions(&pe, &bytes, section)
            .unwrap()
            .iter()
            .map(|f| f.end)
            .collect();
        assert_eq!(ends, [0x2080, 0x20a0, 0x20a0]);
    }
}
