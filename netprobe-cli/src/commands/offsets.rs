//! `netprobe offsets PID IMAGE [PATTERN] [--map FILE]`: the uprobe offset of each method of an
//! image mapped in a process, printed as seed 001's `calc-offsets.py` prints it
//! (`offset: 1900 : NAME`), with the image base chosen right on .NET 8 (`normalize`).

use crate::cli::OffsetsArgs;
use crate::output::Out;
use anyhow::Context;
use netprobe_core::addr::{FileOffset, Rva};
use netprobe_core::maps::{parse_maps, MapsEntry};
use netprobe_core::matching::Pattern;
use netprobe_core::normalize::{rva_to_file_offset, MappedImage};
use netprobe_core::perfmap::{MapFile, MapFileKind};
use netprobe_core::process::Process;
use netprobe_core::resolve::{find_image, open_path, place_symbols};
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
            let text = std::fs::read(file).map_err(|e| Error::io(file, e))?;
            parse_maps(&text).map_err(|e| Error::malformed(file, e.to_string()))?
        }
        None => Process::open(args.pid)?.maps()?,
    };
    let images = MappedImage::group(&maps);
    let img = find_image(args.pid, &images, &args.image)?;
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
        for line in explain(img) {
            eprintln!("{line}");
        }
    }
    let placed = match &args.map {
        Some(map) => from_map_file(args, img, map, pattern.as_ref())?,
        None => from_image(args, img, pattern.as_ref())?,
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
    map: &std::path::Path,
    pattern: Option<&Pattern>,
) -> anyhow::Result<Vec<(FileOffset, Symbol)>> {
    let file = MapFile::open(map, MapFileKind::Crossgen)?;
    let symbols = select(pattern, &file.symbols()?, &map.display().to_string())?;
    let mut placed = Vec::new();
    let mut missing = 0usize;
    for sym in symbols {
        let rva = Rva(sym.address.value());
        match rva_to_file_offset(img, rva) {
            Some((off, _)) => placed.push((off, sym)),
            None => {
                missing += 1;
                eprintln!(
                    "netprobe: note: {}: RVA {rva} is not in an executable mapping of {}; skipped",
                    sym.name,
                    img.path.display()
                );
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
fn from_image(
    args: &OffsetsArgs,
    img: &MappedImage,
    pattern: Option<&Pattern>,
) -> anyhow::Result<Vec<(FileOffset, Symbol)>> {
    let path = if args.maps.is_some() {
        img.path.clone() // recorded maps: the file must be at its recorded path
    } else {
        open_path(&Process::open(args.pid)?, img)
    };
    let symbols = image::load_symbols(&path)
        .with_context(|| format!("reading the symbols of {}", img.path.display()))?;
    let chosen = select(pattern, &symbols, &args.image)?;
    let targets = place_symbols(img, &path, &chosen)?;
    let mut placed: Vec<(FileOffset, Symbol)> = targets
        .into_iter()
        .map(|t| (t.file_offset, t.symbol))
        .collect();
    placed.sort_by_key(|(o, _)| *o);
    Ok(placed)
}

/// The layout of `img` and the formula netprobe applies, as lines for a person.
fn explain(img: &MappedImage) -> Vec<String> {
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
    for exec in img.exec_mappings() {
        match img.image_base_for(exec) {
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
                let delta = exec.start as i128 - base.0 as i128 - exec.offset as i128;
                out.push(format!(
                    "offset = rva - (exec_start {:#x} - image_base {base}) + exec_file_offset {:#x} = rva {} {:#x}",
                    exec.start,
                    exec.offset,
                    if delta < 0 { '+' } else { '-' },
                    delta.unsigned_abs()
                ));
            }
            None => out.push(format!(
                "no image base for the executable mapping at {:#x}: no private read-only mapping at file offset 0 below it",
                exec.start
            )),
        }
    }
    out
}
