//! Where x86-64 calling conventions put values at a probe.
//!
//! - C (and Rust `extern "C"`, C++): the System V Application Binary Interface, AMD64
//!   Architecture Processor Supplement, 3.2.3 "Parameter Passing": INTEGER class arguments in
//!   rdi, rsi, rdx, rcx, r8, r9, then the stack from `8(%rsp)` at entry (`0(%rsp)` is the return
//!   address `call` pushed, Figure 3.4); results in rax, rdx; float arguments in xmm0..xmm7,
//!   which take no integer register. .NET managed code on Linux x64 follows it too, `this`
//!   first, a hidden return buffer as the next integer argument (dotnet/runtime
//!   `docs/design/coreclr/botr/clr-abi.md`).
//! - Go's register ABI (`ABIInternal`, the default since Go 1.17; Go
//!   `src/cmd/compile/abi-internal.md`, "amd64 architecture"): integer arguments and results in
//!   RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11; the current goroutine in R14.
//! - The frame pointer is rbp; `ret` pops the return address, so after a return the stack
//!   pointer is 8 bytes above the entry's.

use crate::abi::{ArchConventions, Register, ReturnAddress};
use crate::arch::Arch;

/// INTEGER-class argument registers, in assignment order.
pub const INT_ARGUMENT_REGISTERS: [Register; 6] = [
    Register::Di,
    Register::Si,
    Register::Dx,
    Register::Cx,
    Register::R8,
    Register::R9,
];

/// INTEGER-class result registers, in order.
pub const RESULT_REGISTERS: [Register; 2] = [Register::Ax, Register::Dx];

/// Float argument registers (xmm0..xmm7): they take no integer register.
pub const FLOAT_ARGUMENT_REGISTERS: usize = 8;

/// The integer argument/result registers of the Go register ABI on amd64, in assignment order.
pub const GO_REGISTER_ORDER: [Register; 9] = [
    Register::Ax,
    Register::Bx,
    Register::Cx,
    Register::Di,
    Register::Si,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
];

/// x86-64's conventions.
pub const CONVENTIONS: ArchConventions = ArchConventions {
    arch: Arch::X86_64,
    c_arguments: &INT_ARGUMENT_REGISTERS,
    c_results: &RESULT_REGISTERS,
    c_float_arguments: FLOAT_ARGUMENT_REGISTERS,
    float_registers: "an XMM register",
    float_result: "XMM0",
    c_first_stack_argument: 8,
    go_arguments: &GO_REGISTER_ORDER,
    go_goroutine: Register::R14,
    go_register_abi_since: (1, 17),
    return_address: ReturnAddress::StackTop,
    sp_after_return: 8,
    dotnet_return_buffer: None,
    frame_pointer: Register::Bp,
};
