//! The format of an image, told by the file's first bytes, never by its name: `\x7fELF` (System V
//! gABI, `e_ident`) or `MZ` (PE/COFF: the DOS stub that every PE file, .NET assemblies included,
//! starts with). The one format sniffer: every parser and the symbol listing dispatch on it.

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

/// The format of the file at `path` by its first bytes ([`sniff`]; reads at most 4 bytes).
/// `Ok(None)` for any other or a shorter file; `Err` when it cannot be opened or read.
pub fn sniff_file(path: &Path) -> std::io::Result<Option<ImageFormat>> {
    use std::io::Read;
    let mut magic = Vec::with_capacity(4);
    // Opened without blocking, regular files only: a FIFO would block the open or the read.
    let (file, _) = crate::regular_file::open(path).map_err(std::io::Error::other)?;
    file.take(4).read_to_end(&mut magic)?;
    Ok(sniff(&magic))
}
