//! Language facts a probe planner needs, in terms no tracing backend owns: where a function's
//! arguments and results are ([`ArgLocation`]), which types users can ask for ([`ValueType`]),
//! and the calling conventions that map argument positions to locations
//! ([`CallingConvention`]: the C convention of each architecture, Go's register and stack ABIs
//! in [`go`]); .NET signatures to argument layouts, return sites and value types in [`dotnet`].
//!
//! Which registers a convention uses depends on the image's architecture: each architecture's
//! values are in `crate::arch::{x86_64, aarch64}::calling_convention` ([`ArchConventions`]), and
//! every convention here carries the [`Arch`] it is of, read from the image, never the host's.
//! The registers themselves, of every architecture, are [`Register`].
//!
//! A backend (the CLI's tracefs backend, later perf_event or BPF) renders these locations in its
//! own syntax.

mod conventions;
pub mod dotnet;
pub mod go;
mod register;

pub use conventions::{go_stack_slot, ArchConventions, ReturnAddress};
pub use register::Register;

use crate::arch::Arch;
use serde::Serialize;
use std::fmt;

/// Where a value is at a probe point.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgLocation {
    /// In a register.
    Register(Register),
    /// The 8-byte word at `offset` bytes above the stack pointer the call entered with. On
    /// x86-64 `offset` 0 is the return address at the function's first byte, so stack arguments
    /// start at 8 (System V AMD64 ABI 3.2.3, Figure 3.4); on aarch64 C stack arguments start at
    /// 0 (AAPCS64: the return address is in x30); Go's start at 8 on both
    /// (`src/cmd/compile/abi-internal.md`). At a RET the stack pointer is back where it was at
    /// entry; after the return it is [`ArchConventions::sp_after_return`] bytes higher.
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

    /// The registers this location reads (a stack word reads the stack pointer; the return
    /// value, `arch`'s result register), outermost first.
    pub fn registers(&self, arch: Arch) -> Vec<Register> {
        match self {
            ArgLocation::Register(r) => vec![*r],
            ArgLocation::EntryStack { .. } => vec![Register::Sp],
            ArgLocation::ReturnValue => vec![ArchConventions::of(arch).return_value()],
            ArgLocation::Deref { base, .. } => base.registers(arch),
        }
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

/// Where integer arguments arrive, by position, on the image's architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallingConvention {
    /// System V AMD64, x86-64's C convention (C, C++, Rust `extern "C"`, and .NET managed code on
    /// Linux x64, where `this` comes first): rdi, rsi, rdx, rcx, r8, r9, then the stack; result
    /// in rax.
    SysV,
    /// AAPCS64, aarch64's C convention (and .NET managed code on linux-arm64, `this` first):
    /// x0..x7, then the stack; result in x0.
    Aapcs64,
    /// Go's register ABI (`ABIInternal`; amd64 since Go 1.17: rax, rbx, rcx, rdi, rsi, r8..r11,
    /// goroutine in r14; arm64 since Go 1.18: R0..R15, goroutine in R28); results from the first
    /// register on.
    GoRegAbi { arch: Arch },
    /// Go's stack ABI (`ABI0`, every Go function before the register ABI): argument word `i` at
    /// `8 + 8*i` above the entry stack pointer (and after the stack-check prologue, which moves
    /// nothing); results follow the arguments, so they end where the in/out area of `args_size`
    /// bytes ends (the pclntab's `args` field; `None` when the table does not say).
    GoStackAbi { arch: Arch, args_size: Option<u32> },
}

impl CallingConvention {
    /// The C convention of `arch` (System V AMD64, AAPCS64).
    pub fn native(arch: Arch) -> CallingConvention {
        match arch {
            Arch::X86_64 => CallingConvention::SysV,
            Arch::Aarch64 => CallingConvention::Aapcs64,
        }
    }

    /// The architecture the convention is of.
    pub fn arch(self) -> Arch {
        match self {
            CallingConvention::SysV => Arch::X86_64,
            CallingConvention::Aapcs64 => Arch::Aarch64,
            CallingConvention::GoRegAbi { arch } | CallingConvention::GoStackAbi { arch, .. } => {
                arch
            }
        }
    }

    /// Its architecture's register rules.
    pub fn conventions(self) -> &'static ArchConventions {
        ArchConventions::of(self.arch())
    }

    /// Integer argument registers in order; empty for the stack ABI.
    pub fn int_registers(self) -> &'static [Register] {
        match self {
            CallingConvention::SysV | CallingConvention::Aapcs64 => self.conventions().c_arguments,
            CallingConvention::GoRegAbi { .. } => self.conventions().go_arguments,
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
    /// word ([`go_stack_slot`]); `None` past the registers.
    pub fn arg_word(self, word: usize) -> Option<ArgLocation> {
        match self {
            CallingConvention::GoStackAbi { .. } => go_stack_slot(word),
            c => c
                .int_registers()
                .get(word)
                .map(|r| ArgLocation::Register(*r)),
        }
    }

    /// Where stack argument slot `slot` (0-based, 8 bytes each) of a register convention is at
    /// entry: the C conventions from their first stack argument
    /// ([`ArchConventions::c_first_stack_argument`]), Go's from 8.
    pub fn stack_slot(self, slot: usize) -> Option<ArgLocation> {
        match self {
            CallingConvention::SysV | CallingConvention::Aapcs64 => {
                self.conventions().c_stack_slot(slot)
            }
            CallingConvention::GoRegAbi { .. } | CallingConvention::GoStackAbi { .. } => {
                go_stack_slot(slot)
            }
        }
    }

    /// Where the words of a `words`-word result are at a return; `None` when they cannot be
    /// placed (stack ABI without the argument size, or a result larger than it).
    ///
    /// Register conventions: the result registers (Go: the argument registers again,
    /// `abi-internal.md`; System V: rax, rdx; AAPCS64: x0, x1). Stack ABI: the result is the
    /// last `words` words of the in/out area (one result: the results follow the arguments),
    /// which starts 8 bytes above the entry stack pointer.
    pub fn result_words(self, words: usize) -> Option<Vec<ArgLocation>> {
        let registers = match self {
            CallingConvention::SysV | CallingConvention::Aapcs64 => self.conventions().c_results,
            CallingConvention::GoRegAbi { .. } => self.conventions().go_arguments,
            CallingConvention::GoStackAbi { args_size, .. } => {
                let area = u64::from(args_size?);
                let first = area.checked_sub(8 * words as u64)?;
                return Some(
                    (0..words as u64)
                        .map(|i| ArgLocation::EntryStack {
                            offset: 8 + first + 8 * i,
                        })
                        .collect(),
                );
            }
        };
        Some(
            registers
                .iter()
                .take(words)
                .map(|r| ArgLocation::Register(*r))
                .collect(),
        )
        .filter(|v: &Vec<ArgLocation>| v.len() == words)
    }

    pub fn label(self) -> &'static str {
        match self {
            CallingConvention::SysV => "System V",
            CallingConvention::Aapcs64 => "AAPCS64",
            CallingConvention::GoRegAbi { .. } => "Go register ABI",
            CallingConvention::GoStackAbi { .. } => "Go stack ABI",
        }
    }

    /// Whether this is one of Go's conventions.
    pub fn is_go(self) -> bool {
        matches!(
            self,
            CallingConvention::GoRegAbi { .. } | CallingConvention::GoStackAbi { .. }
        )
    }

    /// Whether this is an architecture's C convention.
    pub fn is_native(self) -> bool {
        matches!(self, CallingConvention::SysV | CallingConvention::Aapcs64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_round_trip() {
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
            CallingConvention::GoRegAbi { arch: Arch::X86_64 }.result_words(2),
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
            arch: Arch::X86_64,
            args_size: Some(32),
        };
        assert_eq!(
            conv.result_words(1),
            Some(vec![ArgLocation::EntryStack { offset: 32 }])
        );
        // A result larger than the area, or an unknown area, cannot be placed.
        assert_eq!(conv.result_words(5), None);
        let unknown = CallingConvention::GoStackAbi {
            arch: Arch::X86_64,
            args_size: None,
        };
        assert_eq!(unknown.result_words(1), None);
        assert_eq!(
            unknown.arg_word(3),
            Some(ArgLocation::EntryStack { offset: 32 })
        );
    }
}
