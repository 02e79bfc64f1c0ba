//! Opening any image netprobe can probe, and choosing its symbol sources.
//!
//! The format is told by the file's first bytes, never by its name: `\x7fELF` (System V gABI,
//! `e_ident`) or `MZ` (PE/COFF: the DOS stub that every PE file, .NET assemblies included, starts
//! with).

use crate::bytes::FileBytes;
use crate::elf::ElfFile;
use crate::error::{Error, Result};
use crate::symbol::{Symbol, SymbolSource};
use serde::Serialize;
use std::path::Path;

/// The object-file formats netprobe reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    Elf,
    Pe,
}

/// The format of `bytes`, by magic; `None` for anything else.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x7fELF") {
        Some(ImageFormat::Elf)
    } else if bytes.starts_with(b"MZ") {
        Some(ImageFormat::Pe)
    } else {
        None
    }
}

/// Every probe-able function or method of the file at `path`, from the best sources for its
/// format: ELF `.symtab`/`.dynsym`; PE: the ReadyToRun header.
///
/// Errors: [`Error::NotAnObjectFile`], [`Error::Malformed`], I/O errors naming the path, and for
/// PE files the .NET-specific errors (IL-only assembly: not probe-able).
pub fn load_symbols(path: &Path) -> Result<Vec<Symbol>> {
    let bytes = FileBytes::open(path)?;
    match sniff(&bytes) {
        Some(ImageFormat::Elf) => ElfFile::from_bytes(path, bytes)?.symbols(),
        Some(ImageFormat::Pe) => Err(Error::Unsupported(format!(
            "{}: reading .NET ReadyToRun images is not built yet; pass a crossgen map with --map",
            path.display()
        ))),
        None => Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        }),
    }
}
