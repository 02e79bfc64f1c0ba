//! Where aarch64 calling conventions put values at a probe.
//!
//! - C (and Rust `extern "C"`, C++): the Procedure Call Standard for the Arm 64-bit Architecture
//!   (AAPCS64, "Parameter passing"): integer and pointer arguments in x0..x7 (NGRN), then the
//!   stack from `[sp]` at entry, 8 bytes a slot on Linux (NSAA; `bl` puts the return address in
//!   x30, the link register, not on the stack); results in x0 (x1 for 16-byte values);
//!   floating-point arguments in v0..v7, which take no integer register. A fetch-arg cannot read
//!   a v register: the kernel's register table (`arch/arm64/kernel/ptrace.c`,
//!   `regoffset_table`) holds x0..x30, sp, pc and pstate only.
//! - .NET managed code on linux-arm64 (dotnet/runtime `docs/design/coreclr/botr/clr-abi.md`;
//!   `src/coreclr/vm/callingconvention.h`, `TransitionBlock::GetOffsetOfRetBuffArgReg`): AAPCS64
//!   with `this` in x0; a hidden return buffer goes in x8, so it shifts no argument.
//! - Go's register ABI (`ABIInternal`, arm64's default since Go 1.18, release notes of Go 1.18;
//!   Go `src/cmd/compile/abi-internal.md`, "arm64 architecture"): integer arguments and results in
//!   R0..R15, floats in F0..F15; the current goroutine in R28; R30 the link register, R29 the
//!   frame pointer. The stack layout ("Stack layout") keeps a return-PC word at `0(RSP)`, so
//!   stack words (ABI0, and register-ABI arguments that did not fit) start at `8(RSP)` as on
//!   amd64.
//! - `ret` branches to x30 and leaves sp alone: after a return the stack pointer is where it was
//!   at entry.

use crate::abi::Register;

/// AAPCS64 integer argument registers (x0..x7), in assignment order.
pub const INT_ARGUMENT_REGISTERS: &[Register] = Register::AARCH64.split_at(8).0;

/// AAPCS64 integer result registers, in order.
pub const RESULT_REGISTERS: [Register; 2] = [Register::X0, Register::X1];

/// AAPCS64 floating-point argument registers (v0..v7): they take no integer register.
pub const FLOAT_ARGUMENT_REGISTERS: usize = 8;

/// The integer argument/result registers of the Go register ABI on arm64 (R0..R15).
pub const GO_REGISTER_ORDER: &[Register] = Register::AARCH64.split_at(16).0;

/// The link register (x30): the return address at a function's entry.
pub const LINK_REGISTER: Register = Register::X30;

/// Floating-point argument and result registers as notes name them.
pub const FLOAT_REGISTERS: &str = "a SIMD&FP register (v0-v7)";
/// The floating-point result register as notes name it.
pub const FLOAT_RESULT: &str = "v0";
/// How far above the entry stack pointer the C convention's first stack argument is.
pub const FIRST_STACK_ARGUMENT: u64 = 0;
/// The current goroutine under Go's register ABI.
pub const GO_GOROUTINE: Register = Register::X28;
/// The first Go release whose default convention is the register ABI.
pub const GO_REGISTER_ABI_SINCE: (u32, u32) = (1, 18);
/// The register holding the return address at a function's first byte; `None`: the word at
/// the stack pointer.
pub const RETURN_ADDRESS_REGISTER: Option<Register> = Some(LINK_REGISTER);
/// How many bytes higher the stack pointer is after a return than at entry.
pub const SP_AFTER_RETURN: u64 = 0;
/// .NET's hidden return buffer register; `None`: it takes the next argument register.
pub const DOTNET_RETURN_BUFFER: Option<Register> = Some(Register::X8);
/// The frame pointer.
pub const FRAME_POINTER: Register = Register::X29;
