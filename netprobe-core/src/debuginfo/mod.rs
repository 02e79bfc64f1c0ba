//! Debug information as a symbol source: DWARF (line tables, inlined frames, parameters) and
//! call-frame information (`.eh_frame`, `.debug_frame`) for unwinding without frame pointers,
//! read with gimli.
//!
//! Layout: [`sections`] reads the sections of one ELF file (inflating compressed ones) into
//! shared buffers every reader here uses.

mod sections;

pub use sections::{DebugSections, Reader, MAX_SECTION_BYTES};
