//! Every offset formula netprobe knows, each in one place with its source.
//!
//! A uprobe is placed at a *file offset* (kernel `Documentation/trace/uprobetracer.rst`:
//! `p[:[GRP/]EVENT] PATH:OFFSET`). Symbol sources speak of link-time virtual addresses (ELF),
//! relative virtual addresses (PE) or runtime addresses (a live process); these functions turn each
//! into a file offset. They are pure arithmetic: choosing *which* segment, section or mapping to
//! use is the caller's job (`elf::resolver`, `normalize`), and is where the seeds go wrong.

use crate::addr::{FileOffset, ImageBase, RuntimeAddr, Rva, VirtAddr};

/// The ELF segment formula: `offset = vaddr - p_vaddr + p_offset`, over the loadable segment
/// (`PT_LOAD`) that contains `vaddr`. This is how the loader maps a file (System V gABI,
/// "Program Header": a segment's bytes at file offset `p_offset` appear at `p_vaddr`), so it holds
/// for any code in any section of that segment (`fixtures/recorded/readelf/` and the `--section-start` fixture in
/// `netprobe-cli/tests/cli_offline.rs` show it).
///
/// Returns `None` when `vaddr` lies below `p_vaddr` or the sum overflows; the caller must also
/// check that `vaddr < p_vaddr + p_filesz`.
pub fn elf_segment(vaddr: VirtAddr, p_vaddr: u64, p_offset: u64) -> Option<FileOffset> {
    vaddr
        .0
        .checked_sub(p_vaddr)?
        .checked_add(p_offset)
        .map(FileOffset)
}

/// The inverse of [`elf_segment`]: the link-time virtual address of the byte at file offset `off`,
/// `vaddr = off - p_offset + p_vaddr`, over the `PT_LOAD` segment whose file bytes are
/// `[p_offset, p_offset + p_filesz)` (System V gABI, "Program Header": those bytes are mapped at
/// `p_vaddr`; the tail up to `p_memsz` is zero-filled and has no file offset).
///
/// Guarded: `None` when `off` lies outside the segment's file bytes (below `p_offset`, or at or
/// past `p_offset + p_filesz`) or the sum overflows; never a wrapped address.
pub fn elf_segment_inverse(
    off: FileOffset,
    p_vaddr: u64,
    p_offset: u64,
    p_filesz: u64,
) -> Option<VirtAddr> {
    let into = off.0.checked_sub(p_offset)?;
    if into >= p_filesz {
        return None;
    }
    p_vaddr.checked_add(into).map(VirtAddr)
}

/// The `.text` section formula: `offset(fn) = va(fn) - va(.text) + offset(.text)`, with both
/// `.text` values read from `readelf -S` (the hand-written Go recipe netprobe replaces, as used on
/// kube-controller-manager: `fixtures/recorded/readelf/`).
///
/// Kept only to explain differences: it is right when the function lies inside `.text`, and wrong
/// for code in any other executable section (`__managedcode` of NativeAOT, a section placed with
/// `--section-start`): the kernel accepts such a probe but enabling it fails with EINVAL
/// (`kernel/events/uprobes.c`). Returns `None` where the arithmetic would go negative.
pub fn text_section_offset(
    vaddr: VirtAddr,
    text_addr: u64,
    text_offset: u64,
) -> Option<FileOffset> {
    vaddr
        .0
        .checked_sub(text_addr)?
        .checked_add(text_offset)
        .map(FileOffset)
}

/// The PE section formula: `offset = rva - VirtualAddress + PointerToRawData`, over the section
/// whose `[VirtualAddress, VirtualAddress + VirtualSize)` contains `rva` (PE/COFF specification,
/// "Section Table"; ECMA-335 II.25.3). `None` when `rva` is below the section or the sum overflows.
pub fn pe_section(rva: Rva, virtual_address: u64, pointer_to_raw_data: u64) -> Option<FileOffset> {
    rva.0
        .checked_sub(virtual_address)?
        .checked_add(pointer_to_raw_data)
        .map(FileOffset)
}

/// The .NET crossgen-map formula (the hand-written recipe netprobe replaces: an RVA from a crossgen
/// `/CreatePerfMap` map file, turned into an offset with `/proc/PID/maps` arithmetic):
/// `MethodAddress - (ExeSectionStartAddress - FirstSectionStartAddress) + SectionOffset`,
/// i.e. `rva - (exec_start - image_base) + exec_file_offset`.
///
/// It is [`normalize`] applied to `image_base + rva`, which is right only when `image_base` really
/// is where file offset 0 is mapped. The recipe takes the *lowest* mapping of the file as the base;
/// on .NET 8 that is a whole-file `r--s` mapping below the image, and the result goes negative
/// (`fixtures/recorded/maps/net8-sleep.maps`). So this returns the signed value, exactly as the recipe computes it;
/// use [`FileOffset::try_from`] on it to get an offset or learn that there is none.
pub fn dotnet_maps_offset(
    method: Rva,
    exec_start: RuntimeAddr,
    image_base: ImageBase,
    exec_file_offset: FileOffset,
) -> i128 {
    method.0 as i128 - (exec_start.0 as i128 - image_base.0 as i128) + exec_file_offset.0 as i128
}

/// Normalization (blazesym's word): the file offset of a runtime address inside a file-backed
/// mapping, `addr - map.start + map.offset` (`proc(5)`: the offset field is "the offset into the
/// file" at which the mapping starts). `None` when `addr` is below the mapping or the sum overflows;
/// the caller must check `addr < map.end`.
pub fn normalize(addr: RuntimeAddr, map_start: u64, map_offset: u64) -> Option<FileOffset> {
    addr.0
        .checked_sub(map_start)?
        .checked_add(map_offset)
        .map(FileOffset)
}

impl TryFrom<i128> for FileOffset {
    type Error = std::num::TryFromIntError;

    /// A signed formula result as a file offset; fails when negative or above `u64::MAX`.
    fn try_from(value: i128) -> Result<Self, Self::Error> {
        u64::try_from(value).map(FileOffset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `calculateEchoValue` of the .NET Core 2.2 crossgen sample app
    /// (`fixtures/recorded/maps/dotnet22-crossgen-sample-netcore-app.maps`):
    /// `0x21900 - (0x7ff03c8c0000 - 0x7ff03c8a0000) + 0x0000 = 0x1900`.
    #[test]
    fn crossgen_sample_app_example() {
        let v = dotnet_maps_offset(
            Rva(0x21900),
            RuntimeAddr(0x7ff0_3c8c_0000),
            ImageBase(0x7ff0_3c8a_0000),
            FileOffset(0),
        );
        assert_eq!(v, 0x1900);
    }

    /// `syncDeployment` of kube-controller-manager (`fixtures/recorded/readelf/`):
    /// `0x6794c0 - 0x401a50 + 0x1a50 = 0x2794c0`.
    #[test]
    fn kube_controller_manager_example() {
        assert_eq!(
            text_section_offset(VirtAddr(0x6794c0), 0x401a50, 0x1a50),
            Some(FileOffset(0x2794c0))
        );
    }

    #[test]
    fn segment_inverse_round_trips_and_stays_inside() {
        let (p_vaddr, p_offset, p_filesz) = (0x401000, 0x1000, 0x2000);
        let off = elf_segment(VirtAddr(0x401a50), p_vaddr, p_offset).unwrap();
        assert_eq!(
            elf_segment_inverse(off, p_vaddr, p_offset, p_filesz),
            Some(VirtAddr(0x401a50))
        );
        assert_eq!(
            elf_segment_inverse(FileOffset(0xfff), p_vaddr, p_offset, p_filesz),
            None
        );
        assert_eq!(
            elf_segment_inverse(FileOffset(0x3000), p_vaddr, p_offset, p_filesz),
            None
        );
        assert_eq!(
            elf_segment_inverse(FileOffset(0x2fff), p_vaddr, p_offset, p_filesz),
            Some(VirtAddr(0x402fff))
        );
        assert_eq!(
            elf_segment_inverse(FileOffset(u64::MAX), u64::MAX, 0, u64::MAX),
            None
        );
    }

    proptest::proptest! {
        /// Any segment and offset: the inverse is `None` or an address the forward formula
        /// maps back to the same offset.
        #[test]
        fn segment_inverse_is_an_inverse(off in proptest::prelude::any::<u64>(),
                                         p_vaddr in proptest::prelude::any::<u64>(),
                                         p_offset in proptest::prelude::any::<u64>(),
                                         p_filesz in proptest::prelude::any::<u64>()) {
            if let Some(v) = elf_segment_inverse(FileOffset(off), p_vaddr, p_offset, p_filesz) {
                proptest::prop_assert_eq!(elf_segment(v, p_vaddr, p_offset), Some(FileOffset(off)));
                proptest::prop_assert!(off >= p_offset && off - p_offset < p_filesz);
            }
        }
    }

    #[test]
    fn below_the_base_is_none_not_a_wrap() {
        assert_eq!(elf_segment(VirtAddr(0x10), 0x400000, 0), None);
        assert_eq!(pe_section(Rva(0x10), 0x1000, 0x400), None);
        assert_eq!(normalize(RuntimeAddr(0x10), 0x1000, 0), None);
        assert!(FileOffset::try_from(-1i128).is_err());
    }
}
