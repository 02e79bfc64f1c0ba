//! Resolution of what users type to file offsets.
//!
//! INTERIM: the lead's `netprobe_core::resolve` (`resolve_file`, `resolve_in_process`,
//! `ProbeTarget`) is the real implementation; until it is on `main`, this module offers the same
//! shape built from the core pieces already there (ELF symbol source, name matching, `/proc`
//! maps). When `netprobe_core::resolve` lands, this file becomes
//! `pub use netprobe_core::resolve::{resolve_file, resolve_in_process, ProbeTarget};`.

use netprobe_core::addr::FileOffset;
use netprobe_core::elf::ElfFile;
use netprobe_core::matching::Pattern;
use netprobe_core::normalize::MappedImage;
use netprobe_core::process::Process;
use netprobe_core::symbol::{Symbol, SymbolSource};
use netprobe_core::{Error, Result};
use std::path::{Path, PathBuf};

/// Where one probe goes (the shape of `netprobe_core::resolve::ProbeTarget`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeTarget {
    /// The file as the target process (or the user) names it.
    pub image: PathBuf,
    /// The path to write into `uprobe_events` (through `/proc/PID/root` for containers).
    pub probe_path: PathBuf,
    pub file_offset: FileOffset,
    pub symbol: Symbol,
}

/// The functions of the ELF file at `path` that `pattern` selects.
pub fn resolve_file(path: &Path, pattern: &str) -> Result<Vec<ProbeTarget>> {
    let pattern = Pattern::parse(pattern)?;
    let symbols = ElfFile::open(path)?.symbols()?;
    let targets: Vec<ProbeTarget> = pattern
        .select(&symbols)
        .into_iter()
        .filter_map(|s| {
            Some(ProbeTarget {
                image: path.to_path_buf(),
                probe_path: path.to_path_buf(),
                file_offset: s.file_offset?,
                symbol: s.clone(),
            })
        })
        .collect();
    if targets.is_empty() {
        return Err(Error::NoMatch {
            pattern: pattern.as_str().to_string(),
            image: path.display().to_string(),
            nearest: pattern.nearest(&symbols, 5),
        });
    }
    Ok(targets)
}

/// The functions `pattern` selects in process `pid`, in the mapped file `image` names (full path
/// or file name), or in every executable mapped file when `image` is `None`.
pub fn resolve_in_process(
    pid: u32,
    image: Option<&str>,
    pattern: &str,
) -> Result<Vec<ProbeTarget>> {
    let pattern = Pattern::parse(pattern)?;
    let process = Process::open(pid)?;
    let images = MappedImage::group(&process.maps()?);
    let candidates: Vec<&MappedImage> = match image {
        Some(spec) => {
            let found: Vec<&MappedImage> = images
                .iter()
                .filter(|i| {
                    i.path == Path::new(spec)
                        || i.path.file_name().and_then(|n| n.to_str()) == Some(spec)
                })
                .collect();
            if found.is_empty() {
                return Err(Error::ImageNotMapped {
                    pid,
                    image: spec.to_string(),
                    similar: vec![],
                });
            }
            found
        }
        None => images
            .iter()
            .filter(|i| i.exec_mappings().next().is_some())
            .collect(),
    };
    let mut targets = Vec::new();
    let mut seen = Vec::new();
    for img in candidates {
        let open = process.host_path(&img.path);
        let Ok(symbols) = ElfFile::open(&open).and_then(|f| f.symbols()) else {
            continue;
        };
        for s in pattern.select(&symbols) {
            let Some(off) = s.file_offset else { continue };
            if img.runtime_addr_of(off).is_none() {
                continue;
            }
            targets.push(ProbeTarget {
                image: img.path.clone(),
                probe_path: open.clone(),
                file_offset: off,
                symbol: s.clone(),
            });
        }
        seen.extend(symbols);
    }
    if targets.is_empty() {
        return Err(Error::NoMatch {
            pattern: pattern.as_str().to_string(),
            image: image.map_or_else(|| format!("process {pid}"), str::to_string),
            nearest: pattern.nearest(&seen, 5),
        });
    }
    Ok(targets)
}
