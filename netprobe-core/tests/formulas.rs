//! Invariants between the offset formulas, over generated layouts shaped like the loaders lay
//! files out.

use netprobe_core::addr::{FileOffset, ImageBase, RuntimeAddr, Rva, VirtAddr};
use netprobe_core::formulas;
use netprobe_core::maps::{Device, MapPath, MapsEntry, Perms};
use netprobe_core::normalize::{rva_to_file_offset, MappedImage};
use netprobe_core::perfmap::{parse_map_lines, parse_perfinfo};
use proptest::prelude::*;

const PAGE: u64 = 0x1000;

fn mapping(start: u64, len: u64, perms: &str, offset: u64) -> MapsEntry {
    let p = perms.as_bytes();
    MapsEntry {
        start,
        end: start + len,
        perms: Perms {
            read: p[0] == b'r',
            write: p[1] == b'w',
            exec: p[2] == b'x',
            shared: p[3] == b's',
        },
        offset,
        dev: Device { major: 8, minor: 1 },
        inode: 4242,
        path: MapPath::File {
            path: "/app/App.dll".into(),
            deleted: false,
        },
    }
}

/// A PE image mapped section by section as the runtime's loader does: headers at the image base
/// (file offset 0), each section at `base + VirtualAddress`, its file offset rounded down to a
/// page (so `VirtualAddress ≡ PointerToRawData (mod page)`, as mappable R2R images are laid out).
#[derive(Debug, Clone)]
struct PeLayout {
    base: u64,
    text_va: u64,
    text_raw: u64,
    text_size: u64,
    rva_in_text: u64,
    data_at_offset_zero: bool,
    whole_file_shared_below: bool,
}

prop_compose! {
    fn pe_layout()(base_page in 0x7f00_0000u64..0x7fff_0000,
                   text_page in 1u64..0x200,
                   raw_page in 0u64..0x100,
                   in_page in (0u64..PAGE / 16).prop_map(|x| x * 16),
                   text_size in 1u64..0x40000,
                   rva_frac in 0.0f64..1.0,
                   data_at_offset_zero: bool,
                   whole_file_shared_below: bool) -> PeLayout {
        let text_va = (text_page + 16) * PAGE + in_page;
        let text_raw = raw_page * PAGE + in_page;
        PeLayout {
            base: base_page * PAGE,
            text_va,
            text_raw,
            text_size,
            rva_in_text: text_va + ((text_size as f64 * rva_frac) as u64).min(text_size - 1),
            data_at_offset_zero,
            whole_file_shared_below,
        }
    }
}

impl PeLayout {
    fn maps(&self) -> Vec<MapsEntry> {
        let in_page = self.text_va % PAGE;
        let exec_start = self.base + self.text_va - in_page;
        let exec_len = (in_page + self.text_size).div_ceil(PAGE) * PAGE;
        let mut m = vec![mapping(self.base, PAGE, "r--p", 0)];
        if self.data_at_offset_zero {
            // `fixtures/recorded/maps/dotnet22-crossgen-sample-netcore-app.maps`'s `rw-p 00000000` line: a data section whose raw data starts in page 0.
            m.push(mapping(self.base + 8 * PAGE, PAGE, "rw-p", 0));
        }
        m.push(mapping(
            exec_start,
            exec_len,
            "r-xp",
            self.text_raw - in_page,
        ));
        if self.whole_file_shared_below {
            // .NET 8: the whole file again, shared, below the image.
            m.push(mapping(self.base - 0x4000_0000, 0x100 * PAGE, "r--s", 0));
        }
        m
    }
}

proptest! {
    /// The PE formula (`rva - VirtualAddress + PointerToRawData`) equals the live maps formula for
    /// an image laid out as the loader lays it, and netprobe finds the image base even with a
    /// writable offset-0 section or a shared whole-file mapping around.
    #[test]
    fn pe_formula_equals_live_maps_formula(l in pe_layout()) {
        let images = MappedImage::group(&l.maps());
        prop_assert_eq!(images.len(), 1);
        let img = &images[0];
        prop_assert_eq!(img.image_base(), Some(ImageBase(l.base)));
        let pe = formulas::pe_section(Rva(l.rva_in_text), l.text_va, l.text_raw).unwrap();
        let (live, addr) = rva_to_file_offset(img, Rva(l.rva_in_text)).unwrap();
        prop_assert_eq!(live, pe);
        prop_assert_eq!(addr, RuntimeAddr(l.base + l.rva_in_text));
    }

    /// The .NET crossgen-map formula (`formulas::dotnet_maps_offset`) equals normalization of
    /// `image_base + rva` when its "first section" is the image base; with .NET 8's shared mapping
    /// below, the lowest mapping (what the hand recipe takes) is not, and its result is wrong.
    #[test]
    fn dotnet_maps_formula_is_normalization_with_the_right_base(l in pe_layout()) {
        let maps = l.maps();
        let images = MappedImage::group(&maps);
        let img = &images[0];
        let exec = img.exec_mappings().next().unwrap();
        let (ours, _) = rva_to_file_offset(img, Rva(l.rva_in_text)).unwrap();
        let with_right_base = formulas::dotnet_maps_offset(
            Rva(l.rva_in_text), RuntimeAddr(exec.start), ImageBase(l.base), FileOffset(exec.offset));
        prop_assert_eq!(FileOffset::try_from(with_right_base).ok(), Some(ours));
        let lowest = img.lowest_mapping().unwrap();
        let with_lowest_mapping = formulas::dotnet_maps_offset(
            Rva(l.rva_in_text), RuntimeAddr(exec.start), ImageBase(lowest.start), FileOffset(exec.offset));
        if l.whole_file_shared_below {
            prop_assert_ne!(FileOffset::try_from(with_lowest_mapping).ok(), Some(ours));
        } else {
            prop_assert_eq!(FileOffset::try_from(with_lowest_mapping).ok(), Some(ours));
        }
    }

    /// Whenever `.text` lies inside its `PT_LOAD` (as linkers lay it out: the section's file offset
    /// keeps its distance from the segment's start), the segment and `.text` formulas agree for
    /// every address in `.text`.
    #[test]
    fn segment_and_text_formulas_agree_inside_text(
        p_vaddr_page in 0u64..0x10_0000, p_offset_page in 0u64..0x1000, in_page in 0u64..PAGE,
        filesz in 1u64..0x100_0000, text_start_frac in 0.0f64..1.0, text_len_frac in 0.0f64..1.0,
        at_frac in 0.0f64..1.0)
    {
        let p_vaddr = p_vaddr_page * PAGE + in_page;
        let p_offset = p_offset_page * PAGE + in_page;
        let text_rel = ((filesz as f64) * text_start_frac) as u64 % filesz;
        let text_len = 1 + (((filesz - text_rel) as f64 * text_len_frac) as u64).min(filesz - text_rel - 1);
        let text_addr = p_vaddr + text_rel;
        let text_offset = p_offset + text_rel;
        let vaddr = VirtAddr(text_addr + ((text_len as f64 * at_frac) as u64).min(text_len - 1));
        prop_assert_eq!(
            formulas::elf_segment(vaddr, p_vaddr, p_offset),
            formulas::text_section_offset(vaddr, text_addr, text_offset)
        );
    }

    #[test]
    fn map_file_parsers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_map_lines(&bytes);
        let _ = parse_perfinfo(&bytes);
    }

    #[test]
    fn map_lines_round_trip(lines in prop::collection::vec((any::<u64>(), any::<u64>(), "[!-~][ -~]{0,60}"), 0..20)) {
        let text: String = lines.iter().map(|(a, s, n)| format!("{a:016X} {s:x} {n}\n")).collect();
        let parsed = parse_map_lines(text.as_bytes()).unwrap();
        prop_assert_eq!(parsed.len(), lines.len());
        for (p, (a, s, n)) in parsed.iter().zip(&lines) {
            prop_assert_eq!((p.addr, p.size, p.name.as_str()), (*a, *s, n.as_str()));
        }
    }
}
