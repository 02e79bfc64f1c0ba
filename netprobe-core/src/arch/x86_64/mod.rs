//! The x86-64 rules: decoding one function with iced-x86 (`decode.rs`: RETs, tail jumps,
//! instruction boundaries, RSP writes, direct branches) and how the kernel's uprobes handle each
//! instruction (`uprobe_handling.rs`, Linux `arch/x86/kernel/uprobes.c`).

pub mod calling_convention;
mod decode;
mod uprobe_handling;

pub use decode::{
    direct_branches, instruction_boundary, instructions, ret_addresses, scan,
    stack_pointer_written, writes_register,
};
pub use uprobe_handling::{handling_of, is_nop, kernel_handling};
