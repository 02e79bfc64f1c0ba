//! Debug information as a symbol source: DWARF (line tables, inlined frames, parameters) and
//! call-frame information (`.eh_frame`, `.debug_frame`) for unwinding without frame pointers,
//! read with gimli.
//!
//! Layout: [`sections`] reads the sections of one ELF file (inflating compressed ones) into
//! shared buffers every reader here uses; `unwind` walks stacks by call-frame information.

mod sections;
mod unwind;

pub use sections::{DebugSections, Reader, MAX_SECTION_BYTES};
pub use unwind::{
    frame_pointer_step, walk, CallFrameInfo, CfiMiss, CopiedStack, GoStackTable, ImageLookup,
    ImageUnwinder, Registers, StackMemory, UnwoundBy, Walk, WalkEnd, WalkLimits,
    PERF_REGS_MASK_X86_64,
};
