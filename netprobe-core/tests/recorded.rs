//! The offset engine on recorded inputs (`fixtures/recorded/`, see its README): the seeds' own
//! worked examples, and .NET 8 / .NET Core 3.1 process maps whose image bases the runtime itself
//! reported in `/tmp/perfinfo-PID.map`.

use fixtures::recorded;
use netprobe_core::addr::{FileOffset, ImageBase, RuntimeAddr, Rva, VirtAddr};
use netprobe_core::formulas;
use netprobe_core::maps::parse_maps;
use netprobe_core::normalize::{rva_to_file_offset, MappedImage};
use netprobe_core::perfmap::{parse_map_lines, parse_perfinfo};
use serde::Serialize;

fn images(maps_file: &str) -> Vec<MappedImage> {
    MappedImage::group(&parse_maps(&std::fs::read(recorded(maps_file)).unwrap()).unwrap())
}

fn image<'a>(images: &'a [MappedImage], name: &str) -> &'a MappedImage {
    images
        .iter()
        .find(|i| i.path.file_name().unwrap() == name)
        .unwrap_or_else(|| panic!("{name} not in the recording"))
}

/// What a snapshot shows of one image: the base netprobe picks, what the seeds would pick, and
/// the offset of one RVA by both.
#[derive(Serialize)]
struct Layout {
    image: String,
    image_base: Option<ImageBase>,
    seed_first_section: RuntimeAddr,
    seed_first_section_perms: String,
    exec_start: RuntimeAddr,
    exec_file_offset: FileOffset,
    rva: Rva,
    netprobe_offset: Option<FileOffset>,
    seed_formula: String,
}

fn layout(img: &MappedImage, rva: Rva) -> Layout {
    let exec = img.exec_mappings().next().unwrap();
    let lowest = img.lowest_mapping().unwrap();
    let seed = formulas::dotnet_maps_offset(
        rva,
        RuntimeAddr(exec.start),
        ImageBase(lowest.start),
        FileOffset(exec.offset),
    );
    Layout {
        image: img.path.display().to_string(),
        image_base: img.image_base(),
        seed_first_section: RuntimeAddr(lowest.start),
        seed_first_section_perms: lowest.perms.as_str(),
        exec_start: RuntimeAddr(exec.start),
        exec_file_offset: FileOffset(exec.offset),
        rva,
        netprobe_offset: rva_to_file_offset(img, rva).map(|(o, _)| o),
        seed_formula: if seed < 0 {
            format!("-{:#x}", -seed)
        } else {
            format!("{seed:#x}")
        },
    }
}

/// The .NET Core 2.2 crossgen sample app's `calculateEchoValue`, by the crossgen-map recipe:
/// `0x21900 - (0x7ff03c8c0000 - 0x7ff03c8a0000) + 0x0000 = 0x1900`.
#[test]
fn crossgen_sample_app_calculate_echo_value_is_0x1900() {
    let imgs = images("maps/dotnet22-crossgen-sample-netcore-app.maps");
    let img = image(&imgs, "sample-netcore-app.ni.exe");
    let line = &parse_map_lines(
        &std::fs::read(recorded("mapfiles/crossgen-calculate-echo-value.map")).unwrap(),
    )
    .unwrap()[0];
    assert!(line
        .name
        .ends_with("EchoProvider::calculateEchoValue(string)"));
    assert_eq!(img.image_base(), Some(ImageBase(0x7ff0_3c8a_0000)));
    let (off, addr) = rva_to_file_offset(img, Rva(line.addr)).unwrap();
    assert_eq!(off, FileOffset(0x1900));
    assert_eq!(addr, RuntimeAddr(0x7ff0_3c8c_1900));
    insta::assert_json_snapshot!("crossgen_sample_app_layout", layout(img, Rva(line.addr)));
}

/// The `calc-offsets.py` listing (crossgen map file + `/proc/PID/maps` -> uprobe offsets) of the
/// same app, line for line, from the map file behind it.
#[test]
fn calc_offsets_listing_reproduced_line_for_line() {
    let imgs = images("maps/dotnet22-crossgen-sample-netcore-app.maps");
    let img = image(&imgs, "sample-netcore-app.ni.exe");
    let lines = parse_map_lines(
        &std::fs::read(recorded(
            "mapfiles/crossgen-sample-netcore-app-reconstructed.map",
        ))
        .unwrap(),
    )
    .unwrap();
    let ours: String = lines
        .iter()
        .map(|l| {
            let (off, _) = rva_to_file_offset(img, Rva(l.addr)).unwrap();
            format!("offset: {:x} : {}\n", off.0, l.name)
        })
        .collect();
    let expected =
        std::fs::read_to_string(recorded("mapfiles/calc-offsets-listing.expected")).unwrap();
    assert_eq!(ours, expected);
}

/// System.Console.dll under the crossgen-map recipe: exec section 0x21000 above the first section, at file offset
/// 0x1000, so `probe = method - 0x21000 + 0x1000`.
#[test]
fn system_console_layout() {
    let imgs = images("maps/dotnet-system-console.maps");
    let img = image(&imgs, "System.Console.dll");
    assert_eq!(img.image_base(), Some(ImageBase(0x7f7e_0388_0000)));
    let rva = Rva(0x21000 + 0x5920);
    assert_eq!(
        rva_to_file_offset(img, rva).unwrap().0,
        FileOffset(0x1000 + 0x5920)
    );
    insta::assert_json_snapshot!("system_console_layout", layout(img, rva));
}

/// The Go `.text` formula on kube-controller-manager: `.text` at 0x401a50 / 0x1a50, `syncDeployment` at 0x6794c0 → 0x2794c0; the same by
/// normalizing the runtime address over the `r-xp` mapping (a non-PIE binary runs at its link
/// addresses).
#[test]
fn kube_controller_manager_sync_deployment_is_0x2794c0() {
    let sections =
        std::fs::read_to_string(recorded("readelf/kube-controller-manager.sections")).unwrap();
    let f: Vec<&str> = sections.split_whitespace().collect();
    assert_eq!(f[1], ".text");
    let (text_addr, text_off) = (
        u64::from_str_radix(f[3], 16).unwrap(),
        u64::from_str_radix(f[4], 16).unwrap(),
    );
    let objdump =
        std::fs::read_to_string(recorded("readelf/kube-controller-manager.objdump-t")).unwrap();
    let vaddr =
        VirtAddr(u64::from_str_radix(objdump.split_whitespace().next().unwrap(), 16).unwrap());
    assert_eq!(
        formulas::text_section_offset(vaddr, text_addr, text_off),
        Some(FileOffset(0x2794c0))
    );
    let imgs = images("maps/kube-controller-manager.maps");
    let img = image(&imgs, "kube-controller-manager");
    assert_eq!(
        img.file_offset_of(RuntimeAddr(vaddr.0)),
        Some(FileOffset(0x2794c0))
    );
}

/// The runtime's own word: for every image the .NET 8 runtime reports in perfinfo, the image base
/// netprobe picks from the maps is the one the runtime reports. The seeds' "first section" is the
/// shared whole-file mapping instead, and their formula goes negative.
#[test]
fn net8_image_bases_match_perfinfo_and_seed_formula_goes_negative() {
    check_bases_against_perfinfo("maps/net8-sleep.maps", "perfinfo/net8-sleep.perfinfo");
    let imgs = images("maps/net8-sleep.maps");
    let img = image(&imgs, "System.Private.CoreLib.dll");
    let lowest = img.lowest_mapping().unwrap();
    assert!(
        lowest.perms.shared,
        "the lowest CoreLib mapping is the r--s one"
    );
    // An RVA 0x1000 into the executable mapping.
    let exec = img.exec_mappings().next().unwrap();
    let rva = Rva(exec.start - img.image_base().unwrap().0 + 0x1000);
    let l = layout(img, rva);
    assert!(l.seed_formula.starts_with('-'), "{}", l.seed_formula);
    assert_eq!(l.netprobe_offset, Some(FileOffset(exec.offset + 0x1000)));
    insta::assert_json_snapshot!("net8_corelib_layout", l);
}

/// .NET Core 3.1 has no `r--s` mapping: the seeds' lowest mapping is the image base and both
/// formulas agree; perfinfo prints bases as bare upper-case hex.
#[test]
fn net31_image_bases_match_perfinfo_and_seed_formula_agrees() {
    check_bases_against_perfinfo("maps/net31-sleep.maps", "perfinfo/net31-sleep.perfinfo");
    let imgs = images("maps/net31-sleep.maps");
    let img = image(&imgs, "System.Private.CoreLib.dll");
    let exec = img.exec_mappings().next().unwrap();
    let rva = Rva(exec.start - img.image_base().unwrap().0 + 0x1000);
    let l = layout(img, rva);
    assert_eq!(Some(FileOffset(l.seed_formula_value())), l.netprobe_offset);
    insta::assert_json_snapshot!("net31_corelib_layout", l);
}

impl Layout {
    fn seed_formula_value(&self) -> u64 {
        u64::from_str_radix(self.seed_formula.trim_start_matches("0x"), 16).unwrap()
    }
}

fn check_bases_against_perfinfo(maps: &str, perfinfo: &str) {
    let imgs = images(maps);
    let loads = parse_perfinfo(&std::fs::read(recorded(perfinfo)).unwrap());
    let with_base: Vec<_> = loads.iter().filter(|l| l.base.is_some()).collect();
    assert!(!with_base.is_empty());
    for load in with_base {
        let img = imgs
            .iter()
            .find(|i| i.path == load.path)
            .unwrap_or_else(|| panic!("{} not mapped", load.path.display()));
        assert_eq!(img.image_base(), load.base, "{}", load.path.display());
    }
    // IL-only images: the runtime reports no base.
    assert!(loads.iter().any(|l| l.base.is_none()));
}
