//! The System V AMD64 calling convention's integer registers (System V Application Binary
//! Interface, AMD64 Architecture Processor Supplement, 3.2.3 "Parameter Passing": INTEGER class
//! arguments in rdi, rsi, rdx, rcx, r8, r9; results in rax, rdx). .NET managed code on Linux x64
//! follows it too, `this` first (dotnet/runtime `docs/design/coreclr/botr/clr-abi.md`).

use super::Register;

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
