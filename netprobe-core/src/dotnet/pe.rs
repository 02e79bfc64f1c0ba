//! The PE/COFF envelope of a .NET assembly: headers, section table, data directories, the CLI
//! header, and the export table (composite ReadyToRun images export `RTR_HEADER`).
//!
//! Formats: Microsoft PE/COFF specification ("MS-DOS stub", "COFF File Header", "Optional Header",
//! "Section Table", "The .edata Section"); ECMA-335 II.25 (CLI header, II.25.3.3). Written for
//! untrusted input: every read is bounds-checked and a malformed file gives `Err(what)`.

use crate::addr::{FileOffset, Rva};
use crate::bytes::{cstr_at, slice, u16_at, u32_at, u64_at, us};
use crate::formulas;
use serde::Serialize;

/// `IMAGE_FILE_MACHINE_AMD64` (PE/COFF "Machine Types").
pub const MACHINE_AMD64: u16 = 0x8664;
/// `IMAGE_FILE_MACHINE_ARM64`.
pub const MACHINE_ARM64: u16 = 0xaa64;
/// `IMAGE_FILE_MACHINE_I386`.
pub const MACHINE_I386: u16 = 0x014c;

/// ReadyToRun images for a non-Windows OS xor the machine with an OS constant
/// (`IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE` in dotnet/runtime `src/coreclr/inc/pedecoder.h`).
const OS_OVERRIDES: [(u16, &str); 5] = [
    (0x7b79, "linux"),
    (0x4644, "apple"),
    (0xadc4, "freebsd"),
    (0x1993, "netbsd"),
    (0x1992, "sunos"),
];

/// One data directory entry (`IMAGE_DATA_DIRECTORY`): an RVA and a size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DataDirectory {
    pub rva: u32,
    pub size: u32,
}

impl DataDirectory {
    pub(crate) fn read(data: &[u8], offset: usize) -> Option<DataDirectory> {
        Some(DataDirectory {
            rva: u32_at(data, offset)?,
            size: u32_at(data, offset.checked_add(4)?)?,
        })
    }

    /// Whether the entry is absent (RVA 0).
    pub fn is_empty(&self) -> bool {
        self.rva == 0
    }
}

/// One section header (`IMAGE_SECTION_HEADER`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PeSection {
    /// Section name (up to 8 bytes, NUL padding removed, lossy UTF-8).
    pub name: String,
    pub virtual_address: u32,
    pub virtual_size: u32,
    pub pointer_to_raw_data: u32,
    pub size_of_raw_data: u32,
    /// `IMAGE_SCN_*` flags; [`PeSection::is_executable`] tests `IMAGE_SCN_MEM_EXECUTE`.
    pub characteristics: u32,
}

impl PeSection {
    /// Whether the loader maps this section executable (`IMAGE_SCN_MEM_EXECUTE`, 0x20000000).
    pub fn is_executable(&self) -> bool {
        self.characteristics & 0x2000_0000 != 0
    }

    /// The size the section occupies in memory: `VirtualSize`, or `SizeOfRawData` when the
    /// linker left `VirtualSize` 0 (PE/COFF "Section Table").
    pub fn memory_size(&self) -> u32 {
        if self.virtual_size == 0 {
            self.size_of_raw_data
        } else {
            self.virtual_size
        }
    }

    /// Whether `rva` lies inside the section in memory.
    pub fn contains(&self, rva: Rva) -> bool {
        rva.0 >= u64::from(self.virtual_address)
            && rva.0 < u64::from(self.virtual_address) + u64::from(self.memory_size())
    }
}

/// The parsed PE headers of an image.
#[derive(Clone, Debug, Serialize)]
pub struct PeImage {
    /// COFF `Machine` with any OS override removed (e.g. [`MACHINE_AMD64`]).
    pub machine: u16,
    /// The OS a ReadyToRun image was compiled for when its machine carries an override
    /// (`"linux"`, ...); `None` for a plain (Windows or IL-only) machine value.
    pub target_os: Option<&'static str>,
    /// Optional header `ImageBase` (the preferred base; the runtime may map elsewhere).
    pub preferred_image_base: u64,
    /// `SizeOfHeaders`: RVAs below it are the headers, mapped 1:1 from file offset 0.
    pub size_of_headers: u32,
    /// `true` for PE32+ (64-bit optional header).
    pub pe32_plus: bool,
    pub sections: Vec<PeSection>,
    /// All data directories, in order (index 0 = export, 14 = CLI header).
    pub data_directories: Vec<DataDirectory>,
}

/// Data directory index of the export table.
pub const DIR_EXPORT: usize = 0;
/// Data directory index of the CLI header (`IMAGE_DIRECTORY_ENTRY_COM_DESCRIPTOR`).
pub const DIR_CLI_HEADER: usize = 14;

impl PeImage {
    /// Parses the headers. `Err(what)` names the first structure that is missing or cut short;
    /// a file that does not start with `MZ` + `PE\0\0` gives `Err("not a PE file")`.
    pub fn parse(data: &[u8]) -> Result<PeImage, String> {
        if crate::image::format::sniff(data) != Some(crate::image::format::ImageFormat::Pe) {
            return Err("not a PE file".into());
        }
        let pe = us(u32_at(data, 0x3c).ok_or("DOS header cut short")?);
        if slice(data, pe, 4) != Some(b"PE\0\0") {
            return Err("not a PE file".into());
        }
        let coff = pe + 4;
        let raw_machine = u16_at(data, coff).ok_or("COFF header cut short")?;
        let n_sections = u16_at(data, coff + 2).ok_or("COFF header cut short")?;
        let opt_size = u16_at(data, coff + 16).ok_or("COFF header cut short")?;
        let opt = coff + 20;
        let magic = u16_at(data, opt).ok_or("optional header cut short")?;
        let (pe32_plus, base, n_dirs_at, dirs_at) = match magic {
            0x20b => (true, u64_at(data, opt + 24), opt + 108, opt + 112),
            0x10b => (
                false,
                u32_at(data, opt + 28).map(u64::from),
                opt + 92,
                opt + 96,
            ),
            _ => {
                return Err(format!(
                    "optional header magic {magic:#x} is neither PE32 nor PE32+"
                ))
            }
        };
        let preferred_image_base = base.ok_or("optional header cut short")?;
        let size_of_headers = u32_at(data, opt + 60).ok_or("optional header cut short")?;
        let n_dirs = u32_at(data, n_dirs_at).ok_or("optional header cut short")?;
        // Only as many directories as fit in the declared optional header (PE/COFF: the count
        // is "not fixed"; a corrupt count must not make us read section headers as directories).
        let dirs_room = (opt + usize::from(opt_size)).saturating_sub(dirs_at) / 8;
        let n_dirs = us(n_dirs).min(dirs_room).min(16);
        let mut data_directories = Vec::with_capacity(n_dirs);
        for i in 0..n_dirs {
            data_directories.push(
                DataDirectory::read(data, dirs_at + 8 * i).ok_or("data directories cut short")?,
            );
        }
        let sections_at = opt + usize::from(opt_size);
        let mut sections = Vec::with_capacity(usize::from(n_sections));
        for i in 0..usize::from(n_sections) {
            let h = sections_at + 40 * i;
            let raw = slice(data, h, 40).ok_or("section table cut short")?;
            let name_bytes = &raw[..8];
            let name_len = name_bytes.iter().position(|&b| b == 0).unwrap_or(8);
            let f = |o: usize| u32_at(raw, o).unwrap_or(0);
            sections.push(PeSection {
                name: String::from_utf8_lossy(&name_bytes[..name_len]).into_owned(),
                virtual_size: f(8),
                virtual_address: f(12),
                size_of_raw_data: f(16),
                pointer_to_raw_data: f(20),
                characteristics: f(36),
            });
        }
        let (machine, target_os) = split_machine(raw_machine);
        Ok(PeImage {
            machine,
            target_os,
            preferred_image_base,
            size_of_headers,
            pe32_plus,
            sections,
            data_directories,
        })
    }

    /// Data directory `index`; `None` when the image declares fewer directories or it is empty.
    pub fn directory(&self, index: usize) -> Option<DataDirectory> {
        self.data_directories
            .get(index)
            .copied()
            .filter(|d| !d.is_empty())
    }

    /// The section whose memory range holds `rva`; `None` when no section does (headers or
    /// outside the image).
    pub fn section_of(&self, rva: Rva) -> Option<&PeSection> {
        self.sections.iter().find(|s| s.contains(rva))
    }

    /// The file offset of `rva`, via [`formulas::pe_section`] over the section that contains it.
    /// RVAs inside the headers map 1:1. Returns `None` when `rva` lies in no section, or in the
    /// part of a section the file does not hold (beyond `SizeOfRawData`, zero-filled at load).
    pub fn rva_to_file_offset(&self, rva: Rva) -> Option<FileOffset> {
        if rva.0 < u64::from(self.size_of_headers) && self.section_of(rva).is_none() {
            return Some(FileOffset(rva.0));
        }
        let s = self.section_of(rva)?;
        if rva.0 - u64::from(s.virtual_address) >= u64::from(s.size_of_raw_data) {
            return None;
        }
        formulas::pe_section(rva, s.virtual_address.into(), s.pointer_to_raw_data.into())
    }

    /// `len` bytes of the file at `rva`; `None` when they are not all file-backed inside one
    /// section (or the headers).
    pub fn bytes_at<'d>(&self, data: &'d [u8], rva: u32, len: u32) -> Option<&'d [u8]> {
        let start = self.rva_to_file_offset(Rva(rva.into()))?;
        if len > 0 {
            let last = u64::from(rva).checked_add(u64::from(len) - 1)?;
            let end = self.rva_to_file_offset(Rva(last))?;
            if end.0.checked_sub(start.0)? != u64::from(len) - 1 {
                return None;
            }
        }
        slice(data, usize::try_from(start.0).ok()?, us(len))
    }

    /// The bytes from `rva` to the end of its section's file data (for variable-length
    /// structures whose size is not known up front); `None` when `rva` is not file-backed.
    pub fn tail_at<'d>(&self, data: &'d [u8], rva: u32) -> Option<&'d [u8]> {
        let start = self.rva_to_file_offset(Rva(rva.into()))?;
        let end = match self.section_of(Rva(rva.into())) {
            Some(s) => u64::from(s.pointer_to_raw_data) + u64::from(s.size_of_raw_data),
            None => u64::from(self.size_of_headers),
        };
        data.get(usize::try_from(start.0).ok()?..usize::try_from(end).ok()?.min(data.len()))
    }

    /// The RVA of the export named `name` (PE/COFF "Export Directory Table", "Export Name
    /// Pointer Table", "Export Ordinal Table"). `None` when there is no export table, no such
    /// name, or the table is malformed.
    pub fn export_rva(&self, data: &[u8], name: &str) -> Option<u32> {
        let dir = self.directory(DIR_EXPORT)?;
        let edt = self.bytes_at(data, dir.rva, 40)?;
        let n_funcs = u32_at(edt, 20)?;
        let n_names = u32_at(edt, 24)?;
        let funcs = u32_at(edt, 28)?;
        let names = u32_at(edt, 32)?;
        let ordinals = u32_at(edt, 36)?;
        for i in 0..n_names.min(1 << 16) {
            let name_rva = u32_at(self.bytes_at(data, names.checked_add(4 * i)?, 4)?, 0)?;
            let name_bytes = cstr_at(self.tail_at(data, name_rva)?, 0)?;
            if name_bytes == name.as_bytes() {
                let ord = u16_at(self.bytes_at(data, ordinals.checked_add(2 * i)?, 2)?, 0)?;
                if u32::from(ord) >= n_funcs {
                    return None;
                }
                return u32_at(
                    self.bytes_at(data, funcs.checked_add(4 * u32::from(ord))?, 4)?,
                    0,
                );
            }
        }
        None
    }
}

fn split_machine(raw: u16) -> (u16, Option<&'static str>) {
    for (xor, os) in OS_OVERRIDES {
        let m = raw ^ xor;
        if matches!(m, MACHINE_AMD64 | MACHINE_ARM64 | MACHINE_I386 | 0x01c4) {
            return (m, Some(os));
        }
    }
    (raw, None)
}

/// The CLI header (ECMA-335 II.25.3.3), the fields netprobe uses.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CliHeader {
    pub metadata: DataDirectory,
    /// `COMIMAGE_FLAGS_*`; bit 0x4 (`COMIMAGE_FLAGS_IL_LIBRARY`) marks a ReadyToRun image
    /// (readytorun-format.md, "PE Headers and CLI Headers").
    pub flags: u32,
    /// `ManagedNativeHeader`: the READYTORUN_HEADER of a ReadyToRun image.
    pub managed_native_header: DataDirectory,
}

impl CliHeader {
    /// Reads the CLI header the PE's directory 14 points to. `Ok(None)` when the image has no
    /// CLI header (not a .NET assembly); `Err(what)` when it is there but cut short.
    pub fn parse(pe: &PeImage, data: &[u8]) -> Result<Option<CliHeader>, String> {
        let Some(dir) = pe.directory(DIR_CLI_HEADER) else {
            return Ok(None);
        };
        let h = pe
            .bytes_at(data, dir.rva, 72)
            .ok_or("CLI header outside the file")?;
        let d = |o| DataDirectory::read(h, o).ok_or("CLI header cut short");
        Ok(Some(CliHeader {
            metadata: d(8)?,
            flags: u32_at(h, 16).ok_or("CLI header cut short")?,
            managed_native_header: d(64)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;

    /// A linux-arm64 ReadyToRun image stores 0xAA64 ^ 0x7B79 (= 0xD11D); a linux-x64 one
    /// 0x8664 ^ 0x7B79; an IL-only assembly built for arm64 the plain 0xAA64.
    #[test]
    fn os_bits_come_off_the_machine() {
        assert_eq!(
            split_machine(0xaa64 ^ 0x7b79),
            (MACHINE_ARM64, Some("linux"))
        );
        assert_eq!(0xaa64 ^ 0x7b79, 0xd11d);
        assert_eq!(
            split_machine(0x8664 ^ 0x7b79),
            (MACHINE_AMD64, Some("linux"))
        );
        assert_eq!(
            split_machine(0xaa64 ^ 0x4644),
            (MACHINE_ARM64, Some("apple"))
        );
        assert_eq!(split_machine(MACHINE_ARM64), (MACHINE_ARM64, None));
        assert_eq!(split_machine(MACHINE_I386), (MACHINE_I386, None));
        let (linux_arm64, _) = split_machine(0xd11d);
        assert_eq!(Arch::of_pe_machine(linux_arm64), Some(Arch::Aarch64));
    }
}
