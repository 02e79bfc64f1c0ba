//! The DWARF and call-frame sections of one ELF file, as gimli reads them.
//!
//! Only the sections the debug-info readers use are kept: the `.debug_*` sections of DWARF 2-5
//! (gimli's `SectionId` names them), `.eh_frame` and `.eh_frame_hdr` (the call-frame information
//! every x86-64 ELF carries for exception unwinding, System V x86-64 psABI §4.2.4 and the LSB's
//! "Exception Frames"), and the addresses of `.text` and `.got` that `.eh_frame` pointer
//! encodings are relative to. Each is copied into a shared buffer once, so readers own what they
//! read and hold no borrow of the file.
//!
//! Compressed sections are inflated: `SHF_COMPRESSED` with an `Elf64_Chdr` of `ELFCOMPRESS_ZLIB`
//! (gABI "Section Compression"; what `objcopy --compress-debug-sections` and Debian's `dh_strip`
//! write) and the older `.zdebug_*` form (`"ZLIB"`, a big-endian 8-byte size, a zlib stream).
//! Anything else (zstd, a size over [`MAX_SECTION_BYTES`], a stream that ends early) leaves the
//! section out, and [`DebugSections::skipped`] says which and why: a reader then works with less,
//! never with bytes it guessed.

use crate::elf::parser::ElfView;
use crate::error::{Error, Result};
use gimli::{EndianArcSlice, LittleEndian, SectionId};
use goblin::elf::section_header::SHT_NOBITS;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// How every debug-info reader sees section bytes: shared, little-endian (x86-64 and aarch64).
pub type Reader = EndianArcSlice<LittleEndian>;

/// Largest section inflated (a hostile header can claim any size).
pub const MAX_SECTION_BYTES: u64 = 1 << 31;

/// `SHF_COMPRESSED` (gABI).
const SHF_COMPRESSED: u64 = 0x800;
/// `ELFCOMPRESS_ZLIB` (gABI).
const ELFCOMPRESS_ZLIB: u32 = 1;

/// One kept section.
#[derive(Clone, Debug)]
struct Section {
    data: Arc<[u8]>,
    /// `sh_addr`: where the section is when the file is loaded at its link-time addresses.
    address: u64,
}

/// The kept sections of one ELF file.
#[derive(Clone, Debug, Default)]
pub struct DebugSections {
    sections: HashMap<&'static str, Section>,
    skipped: Vec<(String, String)>,
}

/// The names kept besides DWARF's own.
const CALL_FRAME: [&str; 4] = [".eh_frame", ".eh_frame_hdr", ".text", ".got"];

/// The `&'static` name for a kept section, `None` for a section no reader uses.
fn kept_name(name: &str) -> Option<&'static str> {
    let plain = name.strip_prefix(".zdebug_").map(|rest| (rest, true));
    let dwarf = |n: &str| {
        DWARF_SECTIONS
            .iter()
            .find(|id| id.name() == n)
            .map(|id| id.name())
    };
    match plain {
        Some((rest, _)) => dwarf(&format!(".debug_{rest}")),
        None => dwarf(name).or_else(|| CALL_FRAME.iter().copied().find(|n| *n == name)),
    }
}

/// The DWARF sections gimli reads (`.debug_frame` included: some toolchains put call-frame
/// information only there).
const DWARF_SECTIONS: [SectionId; 17] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugFrame,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugLoc,
    SectionId::DebugLocLists,
    SectionId::DebugMacinfo,
    SectionId::DebugMacro,
    SectionId::DebugPubNames,
    SectionId::DebugPubTypes,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
];

impl DebugSections {
    /// Reads the kept sections of the ELF file `bytes` (named `path` in errors). Errors: not
    /// an ELF file, malformed headers, a big-endian file.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<DebugSections> {
        let view = ElfView::parse(path, bytes)?;
        if !view.ctx.is_little_endian() {
            return Err(Error::malformed(
                path,
                "big-endian ELF: netprobe reads debug info of little-endian images only",
            ));
        }
        let mut out = DebugSections::default();
        for sh in &view.section_headers {
            let Some(name) = view.section_name(sh) else {
                continue;
            };
            let Some(kept) = kept_name(name) else {
                continue;
            };
            if out.sections.contains_key(kept) {
                continue;
            }
            if sh.sh_type == SHT_NOBITS {
                // A stripped or debug-only file keeps the header with no contents: nothing to read.
                continue;
            }
            let Some(raw) = view.section_bytes(sh) else {
                out.skip(name, "its range lies outside the file");
                continue;
            };
            let data = if sh.sh_flags & SHF_COMPRESSED != 0 {
                inflate_chdr(raw)
            } else if name.starts_with(".zdebug_") {
                inflate_zdebug(raw)
            } else {
                Ok(raw.to_vec())
            };
            match data {
                Ok(d) => {
                    out.sections.insert(
                        kept,
                        Section {
                            data: d.into(),
                            address: sh.sh_addr,
                        },
                    );
                }
                Err(why) => out.skip(name, why),
            }
        }
        Ok(out)
    }

    /// These sections (a separate debug file's), with each section they lack taken from
    /// `image` (the file the debug file was split from): a debug file keeps DWARF and leaves
    /// `.eh_frame`, `.text` and `.got` without contents (`objcopy --only-keep-debug`), so call
    /// frames and their base addresses come from the image.
    pub fn completed_by(mut self, image: &DebugSections) -> DebugSections {
        for (name, section) in &image.sections {
            let empty = self.sections.get(name).is_none_or(|s| s.data.is_empty());
            if empty {
                self.sections.insert(name, section.clone());
            }
        }
        self
    }

    fn skip(&mut self, name: &str, why: impl Into<String>) {
        self.skipped.push((name.to_string(), why.into()));
    }

    /// Sections present but left out, each with the reason.
    pub fn skipped(&self) -> &[(String, String)] {
        &self.skipped
    }

    /// The file has DWARF debugging information (`.debug_info` with contents).
    pub fn has_debug_info(&self) -> bool {
        self.sections
            .get(".debug_info")
            .is_some_and(|s| !s.data.is_empty())
    }

    /// A section's bytes (empty when absent) as a gimli reader.
    pub fn reader(&self, name: &str) -> Reader {
        let data = self
            .sections
            .get(name)
            .map_or_else(|| Arc::<[u8]>::from(Vec::new()), |s| s.data.clone());
        EndianArcSlice::new(data, LittleEndian)
    }

    /// A section's link-time address, `None` when absent.
    pub fn address(&self, name: &str) -> Option<u64> {
        self.sections.get(name).map(|s| s.address)
    }

    /// The section is present with contents.
    pub fn has(&self, name: &str) -> bool {
        self.sections.get(name).is_some_and(|s| !s.data.is_empty())
    }

    /// The DWARF sections as one `gimli::Dwarf` (absent sections read as empty).
    pub fn dwarf(&self) -> gimli::Dwarf<Reader> {
        let load = |id: SectionId| -> std::result::Result<Reader, std::convert::Infallible> {
            Ok(self.reader(id.name()))
        };
        // The loader cannot fail: absent sections are empty readers.
        match gimli::Dwarf::load(load) {
            Ok(d) => d,
            Err(never) => match never {},
        }
    }

    /// The sections with `name` holding `data` instead (tests of hostile bytes).
    #[cfg(test)]
    pub(crate) fn with_section(mut self, name: &'static str, data: Vec<u8>) -> DebugSections {
        self.sections.insert(
            name,
            Section {
                data: data.into(),
                address: 0,
            },
        );
        self
    }

    /// `.eh_frame` with the base addresses its pointer encodings use (`DW_EH_PE_pcrel`,
    /// `textrel`, `datarel`); `None` when the file has none.
    pub fn eh_frame(&self) -> Option<(gimli::EhFrame<Reader>, gimli::BaseAddresses)> {
        if !self.has(".eh_frame") {
            return None;
        }
        let mut bases =
            gimli::BaseAddresses::default().set_eh_frame(self.address(".eh_frame").unwrap_or(0));
        if let Some(a) = self.address(".eh_frame_hdr") {
            bases = bases.set_eh_frame_hdr(a);
        }
        if let Some(a) = self.address(".text") {
            bases = bases.set_text(a);
        }
        if let Some(a) = self.address(".got") {
            bases = bases.set_got(a);
        }
        Some((gimli::EhFrame::from(self.reader(".eh_frame")), bases))
    }

    /// `.eh_frame_hdr` (its binary-search table finds a pc's FDE without a scan); `None` when
    /// the file has none.
    pub fn eh_frame_hdr(&self) -> Option<gimli::EhFrameHdr<Reader>> {
        self.has(".eh_frame_hdr")
            .then(|| gimli::EhFrameHdr::from(self.reader(".eh_frame_hdr")))
    }

    /// `.debug_frame`; `None` when the file has none.
    pub fn debug_frame(&self) -> Option<gimli::DebugFrame<Reader>> {
        self.has(".debug_frame")
            .then(|| gimli::DebugFrame::from(self.reader(".debug_frame")))
    }
}

/// Inflates a zlib stream to exactly `size` bytes.
fn inflate(stream: &[u8], size: u64) -> std::result::Result<Vec<u8>, String> {
    if size > MAX_SECTION_BYTES {
        return Err(format!(
            "its uncompressed size {size} is over the {MAX_SECTION_BYTES}-byte limit"
        ));
    }
    let len = usize::try_from(size).map_err(|_| "its size does not fit in memory".to_string())?;
    let mut out = Vec::with_capacity(len.min(stream.len().saturating_mul(16)));
    flate2::read::ZlibDecoder::new(stream)
        .take(size)
        .read_to_end(&mut out)
        .map_err(|e| format!("its zlib stream is corrupt: {e}"))?;
    if out.len() != len {
        return Err(format!(
            "its zlib stream holds {} bytes, its header says {size}",
            out.len()
        ));
    }
    Ok(out)
}

/// A `SHF_COMPRESSED` section: `Elf64_Chdr { u32 ch_type; u32 ch_reserved; u64 ch_size;
/// u64 ch_addralign; }` then the stream.
fn inflate_chdr(raw: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let ch_type = crate::bytes::u32_at(raw, 0usize).ok_or("its header is cut short")?;
    let size = crate::bytes::u64_at(raw, 8usize).ok_or("its header is cut short")?;
    if ch_type != ELFCOMPRESS_ZLIB {
        return Err(format!(
            "it is compressed with ch_type {ch_type} (netprobe inflates zlib only; rebuild with --compress-debug-sections=zlib)"
        ));
    }
    inflate(raw.get(24..).unwrap_or_default(), size)
}

/// A `.zdebug_*` section: `"ZLIB"`, a big-endian u64 size, the stream.
fn inflate_zdebug(raw: &[u8]) -> std::result::Result<Vec<u8>, String> {
    if raw.get(..4) != Some(b"ZLIB") {
        return Err("it lacks the ZLIB magic of a .zdebug section".into());
    }
    let size = raw
        .get(4..12)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or("its header is cut short")?;
    inflate(raw.get(12..).unwrap_or_default(), size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zlib_sections_inflate_to_their_stated_size_and_lies_are_refused() {
        use std::io::Write;
        let body = b"abcdefgh".repeat(100);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&body).unwrap();
        let stream = z.finish().unwrap();
        let mut chdr = Vec::new();
        chdr.extend_from_slice(&ELFCOMPRESS_ZLIB.to_le_bytes());
        chdr.extend_from_slice(&0u32.to_le_bytes());
        chdr.extend_from_slice(&(body.len() as u64).to_le_bytes());
        chdr.extend_from_slice(&1u64.to_le_bytes());
        chdr.extend_from_slice(&stream);
        assert_eq!(inflate_chdr(&chdr).unwrap(), body);
        let mut zdebug = b"ZLIB".to_vec();
        zdebug.extend_from_slice(&(body.len() as u64).to_be_bytes());
        zdebug.extend_from_slice(&stream);
        assert_eq!(inflate_zdebug(&zdebug).unwrap(), body);
        // A header claiming more than the stream holds, or a huge size, or zstd.
        let mut lying = chdr.clone();
        lying[8..16].copy_from_slice(&(body.len() as u64 + 1).to_le_bytes());
        assert!(inflate_chdr(&lying).unwrap_err().contains("says"));
        lying[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(inflate_chdr(&lying).unwrap_err().contains("limit"));
        let mut zstd = chdr.clone();
        zstd[0..4].copy_from_slice(&2u32.to_le_bytes());
        assert!(inflate_chdr(&zstd).unwrap_err().contains("zlib only"));
        assert!(inflate_chdr(&chdr[..10]).is_err());
    }

    #[test]
    fn the_test_binary_itself_has_call_frames_and_dwarf() {
        let exe = std::env::current_exe().unwrap();
        let bytes = std::fs::read(&exe).unwrap();
        let s = DebugSections::parse(&exe, &bytes).unwrap();
        assert!(s.eh_frame().is_some());
        assert!(s.has_debug_info());
        let dwarf = s.dwarf();
        assert!(dwarf.units().next().unwrap().is_some());
    }
}
