//! What one architecture's calling conventions say about where values are, as data: each
//! architecture's values live beside its other rules (`crate::arch::x86_64::calling_convention`,
//! `crate::arch::aarch64::calling_convention`, with their sources), and
//! [`ArchConventions::of`] picks them by the image's [`Arch`], never by the host's.

use super::{ArgLocation, Register};
use crate::arch::Arch;

/// Where the calling conventions of one architecture put integer arguments, results, the
/// return address and the goroutine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchConventions {
    pub arch: Arch,
    /// The C convention's integer/pointer argument registers, in assignment order (System V
    /// AMD64: rdi..r9; AAPCS64: x0..x7). .NET managed code on Linux uses them too, `this` first.
    pub c_arguments: &'static [Register],
    /// The C convention's integer result registers, in order.
    pub c_results: &'static [Register],
    /// How many floating-point argument registers the C convention has (they take no integer
    /// register; a fetch-arg can read none of them).
    pub c_float_arguments: usize,
    /// How those registers are named in notes (`an XMM register`).
    pub float_registers: &'static str,
    /// The register a floating-point result is in, as notes name it (`XMM0`).
    pub float_result: &'static str,
    /// How far above the entry stack pointer the C convention's first stack argument is: 8 on
    /// x86-64 (the `call` pushed the return address), 0 on aarch64 (the return address is in the
    /// link register).
    pub c_first_stack_argument: u64,
    /// Go's register ABI (`ABIInternal`): integer argument and result registers, in order.
    pub go_arguments: &'static [Register],
    /// The register holding the current goroutine under Go's register ABI.
    pub go_goroutine: Register,
    /// The first Go release (major, minor) whose default convention is the register ABI.
    pub go_register_abi_since: (u32, u32),
    /// Where a function's return address is at its first byte (and on a RET instruction).
    pub return_address: ReturnAddress,
    /// How many bytes higher the stack pointer is after a return than at entry (where a
    /// uretprobe fires): x86-64's `ret` pops the return address, aarch64's does not move SP.
    pub sp_after_return: u64,
    /// The register of the hidden return buffer of .NET managed code when it has one of its own;
    /// `None` when the buffer takes the next integer argument register (and shifts the rest).
    pub dotnet_return_buffer: Option<Register>,
    /// The frame pointer register.
    pub frame_pointer: Register,
}

/// Where a function's return address is at its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnAddress {
    /// The word at the stack pointer (x86-64's `call` pushed it).
    StackTop,
    /// A register (aarch64's `bl` wrote it to the link register).
    Register(Register),
}

impl ArchConventions {
    /// The conventions of `arch`.
    pub fn of(arch: Arch) -> &'static ArchConventions {
        match arch {
            Arch::X86_64 => &X86_64,
            Arch::Aarch64 => &AARCH64,
        }
    }

    /// The register the integer result of a C function is in at a return.
    pub fn return_value(&self) -> Register {
        self.c_results[0]
    }

    /// Where the return address is at a function's first byte, as a location.
    pub fn return_address_location(&self) -> ArgLocation {
        match self.return_address {
            ReturnAddress::StackTop => ArgLocation::EntryStack { offset: 0 },
            ReturnAddress::Register(r) => ArgLocation::Register(r),
        }
    }

    /// Stack argument slot `slot` (0-based, 8 bytes each) of the C convention at a function's
    /// entry.
    pub fn c_stack_slot(&self, slot: usize) -> Option<ArgLocation> {
        stack_slot(self.c_first_stack_argument, slot)
    }
}

/// x86-64's conventions, from `crate::arch::x86_64::calling_convention`.
const X86_64: ArchConventions = ArchConventions {
    arch: Arch::X86_64,
    c_arguments: &crate::arch::x86_64::calling_convention::INT_ARGUMENT_REGISTERS,
    c_results: &crate::arch::x86_64::calling_convention::RESULT_REGISTERS,
    c_float_arguments: crate::arch::x86_64::calling_convention::FLOAT_ARGUMENT_REGISTERS,
    float_registers: crate::arch::x86_64::calling_convention::FLOAT_REGISTERS,
    float_result: crate::arch::x86_64::calling_convention::FLOAT_RESULT,
    c_first_stack_argument: crate::arch::x86_64::calling_convention::FIRST_STACK_ARGUMENT,
    go_arguments: &crate::arch::x86_64::calling_convention::GO_REGISTER_ORDER,
    go_goroutine: crate::arch::x86_64::calling_convention::GO_GOROUTINE,
    go_register_abi_since: crate::arch::x86_64::calling_convention::GO_REGISTER_ABI_SINCE,
    return_address: match crate::arch::x86_64::calling_convention::RETURN_ADDRESS_REGISTER {
        Some(r) => ReturnAddress::Register(r),
        None => ReturnAddress::StackTop,
    },
    sp_after_return: crate::arch::x86_64::calling_convention::SP_AFTER_RETURN,
    dotnet_return_buffer: crate::arch::x86_64::calling_convention::DOTNET_RETURN_BUFFER,
    frame_pointer: crate::arch::x86_64::calling_convention::FRAME_POINTER,
};

/// aarch64's conventions, from `crate::arch::aarch64::calling_convention`.
const AARCH64: ArchConventions = ArchConventions {
    arch: Arch::Aarch64,
    c_arguments: crate::arch::aarch64::calling_convention::INT_ARGUMENT_REGISTERS,
    c_results: &crate::arch::aarch64::calling_convention::RESULT_REGISTERS,
    c_float_arguments: crate::arch::aarch64::calling_convention::FLOAT_ARGUMENT_REGISTERS,
    float_registers: crate::arch::aarch64::calling_convention::FLOAT_REGISTERS,
    float_result: crate::arch::aarch64::calling_convention::FLOAT_RESULT,
    c_first_stack_argument: crate::arch::aarch64::calling_convention::FIRST_STACK_ARGUMENT,
    go_arguments: crate::arch::aarch64::calling_convention::GO_REGISTER_ORDER,
    go_goroutine: crate::arch::aarch64::calling_convention::GO_GOROUTINE,
    go_register_abi_since: crate::arch::aarch64::calling_convention::GO_REGISTER_ABI_SINCE,
    return_address: match crate::arch::aarch64::calling_convention::RETURN_ADDRESS_REGISTER {
        Some(r) => ReturnAddress::Register(r),
        None => ReturnAddress::StackTop,
    },
    sp_after_return: crate::arch::aarch64::calling_convention::SP_AFTER_RETURN,
    dotnet_return_buffer: crate::arch::aarch64::calling_convention::DOTNET_RETURN_BUFFER,
    frame_pointer: crate::arch::aarch64::calling_convention::FRAME_POINTER,
};

/// Go's stack words (every architecture Go runs on keeps a return-PC word at `0(SP)` at entry:
/// the pushed return address on amd64, the caller's saved link register slot on arm64,
/// `abi-internal.md` "Stack layout"): word `slot` at `8 + 8*slot` above the entry SP.
pub fn go_stack_slot(slot: usize) -> Option<ArgLocation> {
    stack_slot(8, slot)
}

fn stack_slot(first: u64, slot: usize) -> Option<ArgLocation> {
    let offset = u64::try_from(slot)
        .ok()?
        .checked_mul(8)?
        .checked_add(first)?;
    Some(ArgLocation::EntryStack { offset })
}
