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
/// format:
/// - ELF: `.symtab`/`.dynsym`; for a Go binary the pclntab's functions first (they exist even when
///   the file is stripped, and carry Go's own names, `·` included), then the ELF functions at
///   addresses the pclntab does not name (cgo's C code);
/// - PE: the ReadyToRun header.
///
/// Errors: [`Error::NotAnObjectFile`], [`Error::Malformed`], I/O errors naming the path, and for
/// PE files the .NET-specific errors (IL-only assembly: not probe-able). A Go table that cannot be
/// read leaves the ELF tables as the only source; without them its error is returned.
pub fn load_symbols(path: &Path) -> Result<Vec<Symbol>> {
    let bytes = FileBytes::open(path)?;
    match sniff(&bytes) {
        Some(ImageFormat::Elf) => {
            let (go, go_error) = match crate::golang::GoBinary::parse(path, &bytes) {
                Ok(Some(bin)) => (bin.symbols().ok(), None),
                Ok(None) => (None, None),
                Err(e) => (None, Some(e)),
            };
            let elf = ElfFile::from_bytes(path, bytes)?.symbols()?;
            Ok(match go {
                // A Go table whose function addresses cannot be established (see
                // `golang::moduledata`) lists nothing; with no ELF functions either, its reason
                // is the answer.
                None if elf.is_empty() && go_error.is_some() => {
                    return Err(go_error.expect("checked"));
                }
                None => elf,
                Some(mut go) => {
                    let entries: std::collections::HashSet<u64> =
                        go.iter().map(|s| s.address.value()).collect();
                    go.extend(
                        elf.into_iter()
                            .filter(|s| !entries.contains(&s.address.value())),
                    );
                    go
                }
            })
        }
        Some(ImageFormat::Pe) => crate::dotnet::Assembly::from_bytes(path, bytes)?.symbols(),
        None => Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        }),
    }
}
