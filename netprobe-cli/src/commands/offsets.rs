//! `netprobe offsets PID IMAGE [PATTERN] [--map FILE]`: the uprobe offset of each method of an
//! image mapped in a process, printed as a hand-run `calc-offsets.py` (crossgen map file +
//! `/proc/PID/maps` -> uprobe offsets) prints it (`offset: 1900 : NAME`), with the image base chosen right on .NET 8 (`normalize`).
//! `IMAGE` may name an assembly inside a mapped .NET single-file bundle
//! (`System.Private.CoreLib.dll`): offsets are then offsets in the bundle file.

use crate::cli::OffsetsArgs;
use crate::output::Out;
use anyhow::Context;
use netprobe_core::addr::{FileOffset, Rva};
use netprobe_core::dotnet::bundle::BundleEntry;
use netprobe_core::maps::{parse_maps, MapsEntry};
use netprobe_core::matching::Pattern;
use netprobe_core::normalize::{rva_to_file_offset_at, MappedImage};
use netprobe_core::perfmap::{MapFile, MapFileKind};
use netprobe_core::process::Process;
use netprobe_core::resolve::{find_bundled, find_image, open_path, place_symbols_at};
use netprobe_core::symbol::{Symbol, SymbolSource};
use netprobe_core::{image, Error};
use serde::Serialize;
use std::process::ExitCode;

#[derive(Serialize)]
struct OffsetLine<'a> {
    offset: FileOffset,
    name: &'a str,
    address: String,
    runtime_addr: Option<netprobe_core::addr::RuntimeAddr>,
}

pub fn run(args: &OffsetsArgs) -> anyhow::Result<ExitCode> {
    let maps: Vec<MapsEntry> = match &args.maps {
        Some(file) => {
            use netprobe_core::regular_file::{cap, read_capped};
            let text = read_capped(file, cap::MAPS_TEXT, "saved /proc/PID/maps")?;
            parse_maps(&text).map_err(|e| Error::malformed(file, e.to_string()))?
        }
        None => Process::open(args.pid)?.maps()?,
    };
    let images = MappedImage::group(&maps);
    let opener = |img: &MappedImage| -> netprobe_core::Result<std::path::PathBuf> {
        if args.maps.is_some() {
            Ok(img.path.clone()) // recorded maps: the file must be at its recorded path
        } else {
            open_path(&Process::open(args.pid)?, img)
        }
    };
    // The image itself, or an assembly inside a mapped single-file bundle.
    let (img, entry): (&MappedImage, Option<BundleEntry>) =
        match find_image(args.pid, &images, &args.image) {
            Ok(img) => (img, None),
            Err(e @ Error::ImageNotMapped { .. }) => {
                match find_bundled(&images, &opener, &args.image) {
                    Some((img, entry)) => (img, Some(entry)),
                    None => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
    let base = entry.as_ref().map_or(FileOffset(0), |e| e.offset);
    if img.exec_mappings().next().is_none() {
        return Err(Error::NoExecutableMapping {
            pid: args.pid,
            path: img.path.clone(),
        }
        .into());
    }
    let pattern = args.pattern.as_deref().map(Pattern::parse).transpose()?;
    let mut out = Out::new();
    if args.explain {
        // To stderr: stdout stays the listing (seed-compatible text, or JSON lines).
        for line in explain(img, entry.as_ref()) {
            crate::printable::eprint_line(&line);
        }
    }
    let placed = match &args.map {
        Some(map) => from_map_file(args, img, base, map, pattern.as_ref())?,
        None => {
            let path = opener(img)?;
            let (image, path) = match &entry {
                Some(e) => (path.join(&e.path), path),
                None => (path.clone(), path),
            };
            from_image(args, img, &path, &image, base, pattern.as_ref())?
        }
    };
    for (offset, sym) in &placed {
        if args.json {
            out.json(&OffsetLine {
                offset: *offset,
                name: &sym.name,
                address: sym.address.to_string(),
                runtime_addr: img.runtime_addr_of(*offset),
            })?;
        } else {
            out.line(&format!("offset: {:x} : {}", offset.0, sym.name))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn select(
    pattern: Option<&Pattern>,
    symbols: &[Symbol],
    image: &str,
) -> anyhow::Result<Vec<Symbol>> {
    let Some(p) = pattern else {
        return Ok(symbols.to_vec());
    };
    let chosen: Vec<Symbol> = p.select(symbols).into_iter().cloned().collect();
    if chosen.is_empty() {
        return Err(Error::NoMatch {
            pattern: p.as_str().to_string(),
            image: image.to_string(),
            nearest: p.nearest(symbols, 5),
        }
        .into());
    }
    Ok(chosen)
}

/// Crossgen map lines (RVAs) placed by the live maps.
fn from_map_file(
    args: &OffsetsArgs,
    img: &MappedImage,
    base: FileOffset,
    map: &std::path::Path,
    pattern: Option<&Pattern>,
) -> anyhow::Result<Vec<(FileOffset, Symbol)>> {
    let file = MapFile::open(map, MapFileKind::Crossgen)?;
    let symbols = select(pattern, &file.symbols()?, &map.display().to_string())?;
    let mut placed = Vec::new();
    let mut missing = 0usize;
    for sym in symbols {
        let rva = Rva(sym.address.value());
        match rva_to_file_offset_at(img, rva, base) {
            Some((off, _)) => placed.push((off, sym)),
            None => {
                missing += 1;
                crate::printable::eprint_line(&format!(
                    "netprobe: note: {}: RVA {rva} is not in an executable mapping of {}; skipped",
                    sym.name,
                    img.path.display()
                ));
            }
        }
    }
    if placed.is_empty() && missing > 0 {
        anyhow::bail!(
            "no method of {} lies in an executable mapping of {} in process {}: is the map file for this image (compare the image's MVID)?",
            map.display(),
            img.path.display(),
            args.pid
        );
    }
    Ok(placed)
}

/// The image's own symbols (ELF tables, ReadyToRun) placed and cross-checked by the live maps.
/// `image` is the file opened at `path`, or a bundled assembly's member path of the bundle at
/// `path` whose bytes start at `base` in it.
fn from_image(
    args: &OffsetsArgs,
    img: &MappedImage,
    path: &std::path::Path,
    image: &std::path::Path,
    base: FileOffset,
    pattern: Option<&Pattern>,
) -> anyhow::Result<Vec<(FileOffset, Symbol)>> {
    let symbols = image::load_symbols(image)
        .with_context(|| format!("reading the symbols of {}", image.display()))?;
    let chosen = select(pattern, &symbols, &args.image)?;
    let targets = place_symbols_at(img, path, image, base, &chosen)?;
    let mut placed: Vec<(FileOffset, Symbol)> = targets
        .into_iter()
        .map(|t| (t.file_offset, t.symbol))
        .collect();
    placed.sort_by_key(|(o, _)| *o);
    Ok(placed)
}

/// The offset formula for RVAs of the image based at `base` whose code `exec` maps.
fn formula(exec: &MapsEntry, base: netprobe_core::addr::ImageBase) -> String {
    let delta = exec.start as i128 - base.0 as i128 - exec.offset as i128;
    format!(
        "offset = rva - (exec_start {:#x} - image_base {base}) + exec_file_offset {:#x} = rva {} {:#x}",
        exec.start,
        exec.offset,
        if delta < 0 { '+' } else { '-' },
        delta.unsigned_abs()
    )
}

/// The layout of `img` and the formula netprobe applies, as lines for a person; for an assembly
/// inside a single-file bundle (`entry`), the formula for its own code.
fn explain(img: &MappedImage, entry: Option<&BundleEntry>) -> Vec<String> {
    let mut out = Vec::new();
    out.push(format!(
        "image: {}{} (device {:02x}:{:02x}, inode {})",
        img.path.display(),
        if img.deleted { " (deleted)" } else { "" },
        img.dev.major,
        img.dev.minor,
        img.inode
    ));
    for m in &img.mappings {
        out.push(format!(
            "  mapping {:x}-{:x} {} at file offset {:#x}",
            m.start,
            m.end,
            m.perms.as_str(),
            m.offset
        ));
    }
    let lowest = img.lowest_mapping();
    let start = entry.map_or(FileOffset(0), |e| e.offset);
    let end = entry.map_or(u64::MAX, |e| e.offset.0.saturating_add(e.size));
    if let Some(e) = entry {
        out.push(format!(
            "{} is bundled at file offset {start} ({} bytes): its image base is where the page holding that offset is mapped, plus {:#x}",
            e.path,
            e.size,
            start.0 & 0xfff
        ));
    }
    for exec in img
        .exec_mappings()
        .filter(|m| m.offset >= start.0 & !0xfff && m.offset < end)
    {
        match img.image_base_at(exec, start) {
            Some(base) if entry.is_some() => {
                out.push(format!("image base {base}"));
                out.push(formula(exec, base));
            }
            Some(base) => {
                out.push(format!(
                    "image base {base} (the private read-only mapping at file offset 0 below the code)"
                ));
                if let Some(l) = lowest.filter(|l| l.start != base.0) {
                    out.push(format!(
                        "  not the lowest mapping {:#x} ({}): the seeds' formula would use that and be off by {:#x}",
                        l.start,
                        l.perms.as_str(),
                        base.0 - l.start
                    ));
                }
                out.push(formula(exec, base));
            }
            None => out.push(format!(
                "no image base for the executable mapping at {:#x}: no private read-only mapping at file offset 0 below it",
                exec.start
            )),
        }
    }
    out
}
