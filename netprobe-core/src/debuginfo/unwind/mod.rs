//! Unwinding user stacks without frame pointers: from a thread's registers and a copy of its
//! stack (what `perf record --call-graph dwarf` copies, `PERF_SAMPLE_REGS_USER` and
//! `PERF_SAMPLE_STACK_USER`, perf_event_open(2)), frame by frame with the best method each image
//! allows: a Go function's `pcsp` table, call-frame information (`.eh_frame`, `.eh_frame_hdr`,
//! `.debug_frame`; DWARF 5 §6.4, read with gimli), else the frame pointer.
//!
//! Layout: [`registers`] (a frame's registers in DWARF numbering, the copied stack),
//! [`perf_regs`] (the host's sampled registers into them), `cfi`
//! (one CFI step, rows cached per image), `go_pcsp` (one Go step), `image` (what one image
//! offers), `walk` (the walker and which method made each frame). Pure: the caller reads the
//! files and the process's maps; nothing here touches a process.

mod cfi;
mod go_pcsp;
mod image;
pub mod perf_regs;
mod registers;
mod walk;

pub use cfi::{CallFrameInfo, CfiMiss};
pub use go_pcsp::GoStackTable;
pub use image::ImageUnwinder;
pub use perf_regs::{
    GO_THIRD_ARGUMENT_INDEX, PERF_REGS_MASK, PERF_REGS_MASK_AARCH64, PERF_REGS_MASK_X86_64,
};
pub use registers::{CopiedStack, Registers, StackMemory};
pub use walk::{frame_pointer_step, walk, ImageLookup, UnwoundBy, Walk, WalkEnd, WalkLimits};

#[cfg(test)]
mod tests;
