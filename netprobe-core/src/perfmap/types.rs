//! Types of the map-file symbol sources.

use crate::addr::ImageBase;
use serde::Serialize;
use std::path::PathBuf;

/// One `ADDR SIZE NAME` line of a crossgen map file or a runtime perf map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MapLine {
    /// RVA in a crossgen map file; runtime address in `/tmp/perf-PID.map`.
    pub addr: u64,
    pub size: u64,
    /// Everything after the size, as written (names contain spaces).
    pub name: String,
}

/// What the addresses of a map file mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapFileKind {
    /// crossgen `/CreatePerfMap` output: addresses are RVAs in the native image
    /// (`fixtures/recorded/mapfiles/crossgen-calculate-echo-value.map`).
    Crossgen,
    /// The runtime's `/tmp/perf-PID.map`: runtime addresses of JIT code and stubs.
    Runtime,
}

/// An `ImageLoad` record of `/tmp/perfinfo-PID.map`: where the runtime loaded an assembly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageLoad {
    pub path: PathBuf,
    /// The module version id, as printed (`{...}`).
    pub mvid: String,
    /// The image base; `None` for IL-only images (`.NET 8` prints `(nil)`, 3.1 prints zeros),
    /// which the runtime does not map as an image.
    pub base: Option<ImageBase>,
}
