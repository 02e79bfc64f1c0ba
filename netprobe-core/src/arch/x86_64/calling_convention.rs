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

use crate::abi::Register;

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

/// Floating-point argument and result registers as notes name them.
pub const FLOAT_REGISTERS: &str = "an XMM register";
/// The floating-point result register as notes name it.
pub const FLOAT_RESULT: &str = "XMM0";
/// How far above the entry stack pointer the C convention's first stack argument is.
pub const FIRST_STACK_ARGUMENT: u64 = 8;
/// The current goroutine under Go's register ABI.
pub const GO_GOROUTINE: Register = Register::R14;
/// The first Go release whose default convention is the register ABI.
pub const GO_REGISTER_ABI_SINCE: (u32, u32) = (1, 17);
/// The register holding the return address at a function's first byte; `None`: the word at
/// the stack pointer.
pub const RETURN_ADDRESS_REGISTER: Option<Register> = None;
/// How many bytes higher the stack pointer is after a return than at entry.
pub const SP_AFTER_RETURN: u64 = 8;
/// .NET's hidden return buffer register; `None`: it takes the next argument register.
pub const DOTNET_RETURN_BUFFER: Option<Register> = None;
/// The frame pointer.
pub const FRAME_POINTER: Register = Register::Bp;
