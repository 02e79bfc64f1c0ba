//! Debug information as a symbol source: DWARF (line tables, inlined frames, parameters) and
//! call-frame information (`.eh_frame`, `.debug_frame`) for unwinding without frame pointers,
//! read with gimli.
//!
//! Layout: [`sections`] reads the sections of one ELF file (inflating compressed ones) into
//! shared buffers every reader here uses;
//! [`params`] reads a function's formal parameters (names, types, locations at a probe point);
//! [`locate`] finds the file that holds an image's DWARF (the image, a build-id or debuglink
//! file, a debuginfod server); [`lines`] gives the source lines and inlined functions at an
//! address; [`unwind`] walks stacks by call-frame information (CFI, Go's pcsp, frame
//! pointers).

mod lines;
mod locate;
mod params;
mod sections;
mod unwind;

pub use lines::{LineFrame, Lines, SourceLine};
pub use locate::{
    build_id, build_id_path, debuglink, locate, plain_file_name, DebugOrigin, DebugSearch, Located,
    DEBUG_DIR,
};
pub use params::{
    cfa_at, find_function, params_at, prologue_end, Cfa, Field, FunctionDie, FunctionParams,
    FunctionQuery, Location, Param, ParamType, Piece, Place, FRAME_NOT_BUILT, MAX_PARAMS,
    MAX_TYPE_DEPTH,
};
pub use sections::{DebugSections, Reader, MAX_SECTION_BYTES};
pub use unwind::{
    frame_pointer_step, walk, CallFrameInfo, CfiMiss, CopiedStack, GoStackTable, ImageLookup,
    ImageUnwinder, Registers, StackMemory, UnwoundBy, Walk, WalkEnd, WalkLimits,
    GO_THIRD_ARGUMENT_INDEX, PERF_REGS_MASK, PERF_REGS_MASK_AARCH64, PERF_REGS_MASK_X86_64,
};
