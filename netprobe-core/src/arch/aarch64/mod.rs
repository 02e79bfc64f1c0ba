//! The aarch64 rules: decoding one function (`decode.rs`: return sites, tail calls, instruction
//! boundaries, SP writes, direct branches) and which instructions the kernel's arm64 uprobes
//! simulate, single-step or reject (`uprobe_handling.rs`).
//!
//! The decoder is yaxpeax-arm (crates.io `yaxpeax-arm`, 0BSD): pure Rust, `no_std`-capable, a
//! decoder that returns an error for every word it does not know instead of panicking (its
//! authors fuzz it and test it against the Arm ARM's encodings), covering ARMv8.x A64 with the
//! pointer-authentication and BTI instructions compilers emit, and released in 2025. The
//! alternatives: `bad64` binds Binary Ninja's C decoder (a C build in the dependency tree, not
//! pure Rust); `disarm64` is pure Rust but young, with few users, and generates its tables from
//! binutils' opcode data. Only decoded opcodes and operands are classified here; no bit of an
//! instruction word is masked by hand.

pub mod calling_convention;
mod decode;
mod uprobe_handling;

pub use decode::{
    branch_target, decode, direct_branches, instruction_boundary, instructions, is_indirect_jump,
    is_return, scan, stack_pointer_written, writes_sp, Instruction, Word, INSTRUCTION_LEN,
};
pub use uprobe_handling::{
    exclusive_sequence_before, handling_of, is_bti, is_nop, kernel_handling, rejection,
    MAX_ATOMIC_CONTEXT,
};
