//! Map files: crossgen `/CreatePerfMap` output, the runtime's `/tmp/perf-PID.map`, and the
//! image-load records of `/tmp/perfinfo-PID.map`.

pub mod jitdump;
pub mod parser;
pub mod types;

pub use parser::{complete_lines, parse_map_line, parse_map_lines, parse_perfinfo, MapFileError};
pub use types::{ImageLoad, MapFileKind, MapLine};

use crate::addr::{RuntimeAddr, Rva};
use crate::error::{Error, Result};
use crate::symbol::{Address, Symbol, SymbolKind, SymbolOrigin, SymbolSource};
use std::path::{Path, PathBuf};

/// A map file read from disk, as a symbol source.
#[derive(Clone, Debug)]
pub struct MapFile {
    pub path: PathBuf,
    pub kind: MapFileKind,
    pub lines: Vec<MapLine>,
}

impl MapFile {
    /// Reads and parses `path`. A runtime perf map is cut after its last newline (the runtime may
    /// be writing it). Errors name the file and the first malformed line.
    pub fn open(path: &Path, kind: MapFileKind) -> Result<MapFile> {
        let text =
            crate::regular_file::read_capped(path, crate::regular_file::cap::PERF_MAP, "perf map")?;
        let text = match kind {
            MapFileKind::Runtime => complete_lines(&text),
            MapFileKind::Crossgen => &text[..],
        };
        let lines = parse_map_lines(text).map_err(|e| {
            Error::malformed(
                path,
                format!("map file {e}: expected `ADDR SIZE NAME` in hex"),
            )
        })?;
        Ok(MapFile {
            path: path.to_path_buf(),
            kind,
            lines,
        })
    }
}

impl SymbolSource for MapFile {
    /// One [`SymbolKind::ManagedMethod`] per line. Crossgen lines carry RVAs and runtime lines
    /// runtime addresses; neither says where the code is in a file, so `file_offset` is `None`
    /// (the live maps or the PE headers supply it).
    fn symbols(&self) -> Result<Vec<Symbol>> {
        Ok(self
            .lines
            .iter()
            .map(|l| Symbol {
                name: l.name.clone(),
                kind: SymbolKind::ManagedMethod,
                origin: match self.kind {
                    MapFileKind::Crossgen => SymbolOrigin::CrossgenMap,
                    MapFileKind::Runtime => SymbolOrigin::PerfMap,
                },
                address: match self.kind {
                    MapFileKind::Crossgen => Address::Rva(Rva(l.addr)),
                    MapFileKind::Runtime => Address::Runtime(RuntimeAddr(l.addr)),
                },
                size: (l.size != 0).then_some(l.size),
                file_offset: None,
            })
            .collect())
    }
}
