//! netprobe-core: the offset engine.
//!
//! Answers one question for every later step: *at which byte of which file must a uprobe go?*
//! Pure but for `ipc`: it reads files and `/proc`, and never writes anything or touches the
//! kernel's tracing.
//!
//! Layout (after blazesym): one folder per symbol source (`elf/`, `perfmap/`, `dotnet/`,
//! `golang/`), each split into `parser.rs` / `resolver.rs` / `types.rs`; address-to-file-offset
//! normalization is its own module (`normalize`), and every offset formula lives in `formulas`
//! with its source cited. Untrusted bytes are read only through `bytes` (bounds-checked, the one
//! `unsafe` mmap) and ELF headers only through `elf::parser::ElfView` (panic-guarded). The
//! parsers take bytes and know no cache; `image::cached`, above them, parses each part of an
//! image once per run through a `cache::ImageCache` (passed in, or the process-wide one), and
//! every path-based entry point goes through it. The one module with effects outside this
//! process is `ipc` (sockets to the Docker engine and to .NET runtimes).

#![deny(unsafe_code)]

pub mod abi;
pub mod addr;
pub mod arch;
pub mod bytes;
pub mod cache;
pub mod capabilities;
pub mod containers;
pub mod debuginfo;
pub mod dotnet;
pub mod elf;
pub mod error;
pub mod file_id;
pub mod formulas;
pub mod golang;
pub(crate) mod guarded_map;
pub mod image;
pub mod innermost_frame;
pub mod inventory;
pub mod ipc;
pub mod kallsyms;
pub mod maps;
pub mod matching;
pub mod name_budget;
pub mod normalize;
pub(crate) mod parallel;
pub mod perfmap;
pub mod pid_namespace;
pub mod probe_point;
pub mod probe_safety;
pub mod process;
pub mod regular_file;
pub mod resolve;
pub mod symbol;
pub mod symbolize;

pub use error::{Error, Result};
