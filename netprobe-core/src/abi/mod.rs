//! Language facts a probe planner needs, in terms no tracing backend owns: where a function's
//! arguments and results are ([`ArgLocation`]), which types users can ask for ([`ValueType`]),
//! and the calling conventions that map argument positions to locations
//! ([`CallingConvention`]: System V in [`sysv`], Go's register and stack ABIs in [`go`]); .NET
//! signatures to argument layouts, return sites and value types in [`dotnet`].
//!
//! A backend (the CLI's tracefs backend, later perf_event or BPF) renders these locations in its
//! own syntax.

pub mod dotnet;
pub mod go;
pub mod sysv;

use serde::Serialize;
use std::fmt;

/// An x86-64 general-purpose register (64-bit), named as in the kernel's `pt_regs`
/// (`arch/x86/include/asm/ptrace.h`) without the `r` prefix of the legacy eight: `ax`, `sp`, `r8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Register {
    Ax,
    Bx,
    Cx,
    Dx,
    Si,
    Di,
    Bp,
    Sp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
}

impl Register {
    pub const ALL: [Register; 16] = [
        Register::Ax,
        Register::Bx,
        Register::Cx,
        Register::Dx,
        Register::Si,
        Register::Di,
        Register::Bp,
        Register::Sp,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];

    /// `ax`, `bx`, ..., `r15`.
    pub fn name(self) -> &'static str {
        match self {
            Register::Ax => "ax",
            Register::Bx => "bx",
            Register::Cx => "cx",
            Register::Dx => "dx",
            Register::Si => "si",
            Register::Di => "di",
            Register::Bp => "bp",
            Register::Sp => "sp",
            Register::R8 => "r8",
            Register::R9 => "r9",
            Register::R10 => "r10",
            Register::R11 => "r11",
            Register::R12 => "r12",
            Register::R13 => "r13",
            Register::R14 => "r14",
            Register::R15 => "r15",
        }
    }

    /// The register named `name` (`ax`, `r14`; `rax` is accepted too).
    pub fn parse(name: &str) -> Option<Register> {
        let short = match name.strip_prefix('r') {
            Some(rest) if rest.len() == 2 && !rest.starts_with(|c: char| c.is_ascii_digit()) => {
                rest
            }
            _ => name,
        };
        Register::ALL.into_iter().find(|r| r.name() == short)
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a value is at a probe point.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgLocation {
    /// In a register.
    Register(Register),
    /// The 8-byte word at `offset` bytes above the stack pointer the call entered with (at the
    /// function's first byte `offset` 0 is the return address, so stack arguments start at 8;
    /// System V AMD64 ABI 3.2.3, Figure 3.4; Go `src/cmd/compile/abi-internal.md`). At a RET the
    /// stack pointer is back where it was at entry; after the return it is 8 bytes higher.
    EntryStack { offset: u64 },
    /// A function's (first) integer result as the kernel hands it to a return probe.
    ReturnValue,
    /// The memory at the address `base` holds, plus `offset`.
    Deref { base: Box<ArgLocation>, offset: i64 },
}

impl ArgLocation {
    /// The memory `offset` bytes past the address this location holds.
    pub fn deref(&self, offset: i64) -> ArgLocation {
        ArgLocation::Deref {
            base: Box::new(self.clone()),
            offset,
        }
    }

    /// Stack argument slot `slot` (0-based) at a function's entry: `8 + 8*slot` above the entry
    /// stack pointer.
    pub fn stack_slot(slot: usize) -> Option<ArgLocation> {
        let offset = u64::try_from(slot).ok()?.checked_mul(8)?.checked_add(8)?;
        Some(ArgLocation::EntryStack { offset })
    }
}

/// An integer type as users write it: unsigned, signed, or unsigned printed in hex, 8 to 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IntType {
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    X8,
    X16,
    X32,
    X64,
}

impl IntType {
    pub const ALL: [IntType; 12] = [
        IntType::U8,
        IntType::U16,
        IntType::U32,
        IntType::U64,
        IntType::S8,
        IntType::S16,
        IntType::S32,
        IntType::S64,
        IntType::X8,
        IntType::X16,
        IntType::X32,
        IntType::X64,
    ];

    /// `u8` ... `x64`.
    pub fn name(self) -> &'static str {
        match self {
            IntType::U8 => "u8",
            IntType::U16 => "u16",
            IntType::U32 => "u32",
            IntType::U64 => "u64",
            IntType::S8 => "s8",
            IntType::S16 => "s16",
            IntType::S32 => "s32",
            IntType::S64 => "s64",
            IntType::X8 => "x8",
            IntType::X16 => "x16",
            IntType::X32 => "x32",
            IntType::X64 => "x64",
        }
    }

    pub fn parse(s: &str) -> Option<IntType> {
        IntType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Width in bits.
    pub fn bits(self) -> u32 {
        match self {
            IntType::U8 | IntType::S8 | IntType::X8 => 8,
            IntType::U16 | IntType::S16 | IntType::X16 => 16,
            IntType::U32 | IntType::S32 | IntType::X32 => 32,
            IntType::U64 | IntType::S64 | IntType::X64 => 64,
        }
    }

    pub fn is_signed(self) -> bool {
        matches!(
            self,
            IntType::S8 | IntType::S16 | IntType::S32 | IntType::S64
        )
    }

    /// Whether values print in hex.
    pub fn is_hex(self) -> bool {
        matches!(
            self,
            IntType::X8 | IntType::X16 | IntType::X32 | IntType::X64
        )
    }
}

impl fmt::Display for IntType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The type of a logical argument (what users write after an argument's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// An integer: `u8`..`u64`, `s8`..`s64`, `x8`..`x64` (hex).
    Int(IntType),
    /// A NUL-terminated C string the argument points to.
    CString,
    /// A .NET `System.String` the argument points to: 8-byte MethodTable pointer, int32 length at
    /// +8, UTF-16 chars from +12 (dotnet/runtime `src/coreclr/vm/object.h`, `StringObject`).
    DotnetString,
    /// A Go string passed as two words, pointer then length (`src/runtime/string.go`,
    /// `stringStruct`).
    GoString,
}

/// How many elements of a string a probe reads at most (the kernel's fetch-arg array limit,
/// `MAX_ARRAY_LEN` in `kernel/trace/trace_probe.h`).
pub const STRING_PREFIX: u8 = 64;

impl ValueType {
    /// Parses a type as users write it: integer types, `string`/`str`, `utf16`/`dotnet`,
    /// `gostring`.
    pub fn parse(s: &str) -> Option<ValueType> {
        match s {
            "string" | "str" | "cstring" => Some(ValueType::CString),
            "utf16" | "dotnet_string" | "dnstring" => Some(ValueType::DotnetString),
            "gostring" | "go_string" => Some(ValueType::GoString),
            _ => IntType::parse(s).map(ValueType::Int),
        }
    }

    /// How many integer argument words (registers or stack slots) the type takes.
    pub fn words(self) -> usize {
        match self {
            ValueType::GoString => 2,
            _ => 1,
        }
    }

    pub fn label(self) -> String {
        match self {
            ValueType::Int(t) => t.name().into(),
            ValueType::CString => "string".into(),
            ValueType::DotnetString => "utf16".into(),
            ValueType::GoString => "gostring".into(),
        }
    }
}

/// Where integer arguments arrive, by position (x86_64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallingConvention {
    /// System V AMD64 (C, C++, Rust `extern "C"`, and .NET managed code on Linux, where `this`
    /// comes first): rdi, rsi, rdx, rcx, r8, r9; result in rax.
    SysV,
    /// Go's register ABI (Go 1.17+, `ABIInternal`): rax, rbx, rcx, rdi, rsi, r8, r9, r10, r11;
    /// results from rax on; the current goroutine in r14.
    GoRegAbi,
    /// Go's stack ABI (`ABI0`, every Go function before 1.17): argument word `i` at
    /// `8 + 8*i` above the entry stack pointer (and after the stack-check prologue, which moves
    /// nothing); results follow the arguments, so they end where the in/out area of `args_size`
    /// bytes ends (the pclntab's `args` field; `None` when the table does not say).
    GoStackAbi { args_size: Option<u32> },
}

impl CallingConvention {
    /// Integer argument registers in order; empty for the stack ABI.
    pub fn int_registers(self) -> &'static [Register] {
        match self {
            CallingConvention::SysV => &sysv::INT_ARGUMENT_REGISTERS,
            CallingConvention::GoRegAbi => &go::REGISTER_ORDER,
            CallingConvention::GoStackAbi { .. } => &[],
        }
    }

    /// How many integer argument words can be named by position (stack ABI: any number; 64 is
    /// far beyond what a probe holds anyway).
    pub fn arg_words(self) -> usize {
        match self {
            CallingConvention::GoStackAbi { .. } => 64,
            c => c.int_registers().len(),
        }
    }

    /// Where integer argument word `word` is at entry: a register, or for the stack ABI a stack
    /// word ([`go::GoAbi::arg`]); `None` past the registers.
    pub fn arg_word(self, word: usize) -> Option<ArgLocation> {
        match self {
            CallingConvention::GoStackAbi { .. } => go::GoAbi::Stack.arg(word),
            c => c
                .int_registers()
                .get(word)
                .map(|r| ArgLocation::Register(*r)),
        }
    }

    /// Where the words of a `words`-word result are at a return; `None` when they cannot be
    /// placed (stack ABI without the argument size, or a result larger than it).
    ///
    /// Register conventions: the result registers (Go: rax, rbx, ... like arguments,
    /// `abi-internal.md`; System V: rax, rdx). Stack ABI: the result is the last `words` words
    /// of the in/out area (one result: the results follow the arguments), which starts 8 bytes
    /// above the entry stack pointer.
    pub fn result_words(self, words: usize) -> Option<Vec<ArgLocation>> {
        match self {
            CallingConvention::SysV => Some(
                sysv::RESULT_REGISTERS
                    .iter()
                    .take(words)
                    .map(|r| ArgLocation::Register(*r))
                    .collect(),
            )
            .filter(|v: &Vec<ArgLocation>| v.len() == words),
            CallingConvention::GoRegAbi => (0..words)
                .map(|i| go::GoAbi::Register.result(i, 0))
                .collect(),
            CallingConvention::GoStackAbi { args_size } => {
                let area = u64::from(args_size?);
                let first = area.checked_sub(8 * words as u64)?;
                Some(
                    (0..words as u64)
                        .map(|i| ArgLocation::EntryStack {
                            offset: 8 + first + 8 * i,
                        })
                        .collect(),
                )
            }
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            CallingConvention::SysV => "System V",
            CallingConvention::GoRegAbi => "Go register ABI",
            CallingConvention::GoStackAbi { .. } => "Go stack ABI",
        }
    }

    /// Whether this is one of Go's conventions.
    pub fn is_go(self) -> bool {
        matches!(
            self,
            CallingConvention::GoRegAbi | CallingConvention::GoStackAbi { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in Register::ALL {
            assert_eq!(Register::parse(r.name()), Some(r));
        }
        assert_eq!(Register::parse("rax"), Some(Register::Ax));
        assert_eq!(Register::parse("r14"), Some(Register::R14));
        assert_eq!(Register::parse("xmm0"), None);
        for t in IntType::ALL {
            assert_eq!(IntType::parse(t.name()), Some(t));
            assert_eq!(ValueType::parse(t.name()), Some(ValueType::Int(t)));
        }
    }

    #[test]
    fn arg_types_parse() {
        assert_eq!(ValueType::parse("s32"), Some(ValueType::Int(IntType::S32)));
        assert_eq!(ValueType::parse("string"), Some(ValueType::CString));
        assert_eq!(ValueType::parse("utf16"), Some(ValueType::DotnetString));
        assert_eq!(ValueType::parse("u16[4]"), None);
        assert_eq!(ValueType::parse("nope"), None);
    }

    #[test]
    fn result_registers_by_convention() {
        let reg = |r| ArgLocation::Register(r);
        assert_eq!(
            CallingConvention::GoRegAbi.result_words(2),
            Some(vec![reg(Register::Ax), reg(Register::Bx)])
        );
        assert_eq!(
            CallingConvention::SysV.result_words(1),
            Some(vec![reg(Register::Ax)])
        );
        assert_eq!(CallingConvention::SysV.result_words(3), None);
    }

    /// Go before 1.17: `func Getenv(key string) string` has a 32-byte in/out area (key: ptr,
    /// len; result: ptr, len), as esbuild 0.8.57 (go1.16) compiles it: the body reads the key at
    /// 0x38/0x40(SP) after `sub rsp, 0x30` and stores the result at 0x48/0x50(SP).
    #[test]
    fn go_stack_abi_results_end_the_in_out_area() {
        let conv = CallingConvention::GoStackAbi {
            args_size: Some(32),
        };
        assert_eq!(
            conv.result_words(1),
            Some(vec![ArgLocation::EntryStack { offset: 32 }])
        );
        // A result larger than the area, or an unknown area, cannot be placed.
        assert_eq!(conv.result_words(5), None);
        let unknown = CallingConvention::GoStackAbi { args_size: None };
        assert_eq!(unknown.result_words(1), None);
        assert_eq!(
            unknown.arg_word(3),
            Some(ArgLocation::EntryStack { offset: 32 })
        );
    }
}
