//! Where a Go function's arguments and results are at a probe, by calling convention.
//!
//! Sources: Go's internal ABI specification (`src/cmd/compile/abi-internal.md`): under the
//! register ABI (`ABIInternal`) integer arguments and results take the architecture's integer
//! registers in order ("amd64 architecture": RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11; "arm64
//! architecture": R0..R15), one word each (a string takes two consecutive words: pointer,
//! length; a slice three; an interface two); a method's receiver is the first argument. The
//! register ABI is the default on amd64 since Go 1.17 (release notes of Go 1.17, "Compiler") and
//! on arm64 since Go 1.18 (release notes of Go 1.18, "Compiler"). Before, every argument and
//! result lived on the stack: at function entry `0(SP)` is the return-PC word and argument word
//! `i` is at `8 + 8*i(SP)`, results follow the arguments (`ABI0`, `doc/asm.html`; the arm64
//! "Stack layout" keeps that word too). The registers of each architecture are in
//! `crate::arch::{x86_64, aarch64}::calling_convention`.
//!
//! Both hold at the function's first byte *and* at the point after the stack-check prologue
//! (the prologue only compares SP with the goroutine's stack guard; it moves nothing), and at every
//! RET (SP is back at the return address). Measured on Go 1.19.

use super::{go_stack_slot, ArchConventions, ArgLocation};
use crate::arch::Arch;
use crate::golang::GoVersion;
use serde::Serialize;
use std::fmt;

/// A Go calling convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GoAbi {
    /// `ABIInternal` with register assignment (Go 1.17+ on amd64, 1.18+ on arm64).
    Register,
    /// The stack-based `ABI0` (every Go function before).
    Stack,
}

/// The convention of a binary built by `version` for `arch`.
pub fn abi_for(version: &GoVersion, arch: Arch) -> GoAbi {
    let (major, minor) = ArchConventions::of(arch).go_register_abi_since;
    if version.at_least(major, minor) {
        GoAbi::Register
    } else {
        GoAbi::Stack
    }
}

impl GoAbi {
    /// Where integer argument word `word` (0-based; the receiver is word 0 of a method; a string
    /// argument occupies two words, pointer then length) is at entry on `arch`, after the
    /// prologue, and unchanged until the function first writes it.
    ///
    /// Register ABI: the word's register while there is one; `None` beyond, because a word that
    /// does not fit in registers makes its whole argument stack-assigned, at an offset that
    /// depends on the signature. Stack ABI: `SP + 8 + 8*word` for any word.
    pub fn arg(self, arch: Arch, word: usize) -> Option<ArgLocation> {
        match self {
            GoAbi::Register => ArchConventions::of(arch)
                .go_arguments
                .get(word)
                .map(|&r| ArgLocation::Register(r)),
            GoAbi::Stack => go_stack_slot(word),
        }
    }

    /// Where result word `word` is at a RET instruction. Register ABI: results are assigned to
    /// registers from the first again, like arguments. Stack ABI: results follow the
    /// `arg_words` argument words on the caller's frame, at `SP + 8 + 8*(arg_words + word)`.
    pub fn result(self, arch: Arch, word: usize, arg_words: usize) -> Option<ArgLocation> {
        match self {
            GoAbi::Register => self.arg(arch, word),
            GoAbi::Stack => go_stack_slot(arg_words.checked_add(word)?),
        }
    }

    /// How many integer words fit in registers on `arch` (amd64 9, arm64 16; the stack ABI 0).
    pub fn register_words(self, arch: Arch) -> usize {
        match self {
            GoAbi::Register => ArchConventions::of(arch).go_arguments.len(),
            GoAbi::Stack => 0,
        }
    }
}

impl fmt::Display for GoAbi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoAbi::Register => "register ABI (ABIInternal: go1.17+ on amd64, go1.18+ on arm64)",
            GoAbi::Stack => "stack ABI (ABI0: before go1.17 on amd64, go1.18 on arm64)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Register;

    #[test]
    fn version_and_architecture_pick_the_convention() {
        let amd64 = Arch::X86_64;
        assert_eq!(abi_for(&GoVersion::new(1, 16, 15), amd64), GoAbi::Stack);
        assert_eq!(abi_for(&GoVersion::new(1, 17, 0), amd64), GoAbi::Register);
        assert_eq!(
            abi_for(&GoVersion::parse("go1.19.8").unwrap(), amd64),
            GoAbi::Register
        );
        // arm64 kept ABI0 for one more release.
        let arm64 = Arch::Aarch64;
        assert_eq!(abi_for(&GoVersion::new(1, 17, 13), arm64), GoAbi::Stack);
        assert_eq!(abi_for(&GoVersion::new(1, 18, 0), arm64), GoAbi::Register);
    }

    fn names(arch: Arch, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| match GoAbi::Register.arg(arch, i).unwrap() {
                ArgLocation::Register(r) => r.name().to_string(),
                l => panic!("{l:?}"),
            })
            .collect()
    }

    #[test]
    fn register_order_is_the_go_internal_abi() {
        assert_eq!(
            names(Arch::X86_64, 9),
            ["ax", "bx", "cx", "di", "si", "r8", "r9", "r10", "r11"]
        );
        assert_eq!(GoAbi::Register.arg(Arch::X86_64, 9), None);
        assert_eq!(
            GoAbi::Register.result(Arch::X86_64, 0, 3),
            Some(ArgLocation::Register(Register::Ax))
        );
        assert_eq!(GoAbi::Register.register_words(Arch::X86_64), 9);
    }

    /// `abi-internal.md`, "arm64 architecture": R0 – R15 for integer arguments and results.
    #[test]
    fn arm64_register_order_is_r0_to_r15() {
        let expected: Vec<String> = (0..16).map(|i| format!("x{i}")).collect();
        assert_eq!(names(Arch::Aarch64, 16), expected);
        assert_eq!(GoAbi::Register.arg(Arch::Aarch64, 16), None);
        assert_eq!(
            GoAbi::Register.result(Arch::Aarch64, 1, 5),
            Some(ArgLocation::Register(Register::X1))
        );
        assert_eq!(
            ArchConventions::of(Arch::Aarch64).go_goroutine,
            Register::X28
        );
    }

    #[test]
    fn stack_abi_counts_from_sp_plus_8() {
        let sp = |offset| Some(ArgLocation::EntryStack { offset });
        for arch in [Arch::X86_64, Arch::Aarch64] {
            assert_eq!(GoAbi::Stack.arg(arch, 0), sp(8));
            assert_eq!(GoAbi::Stack.arg(arch, 2), sp(24));
            // func Add3(a, b, c int) int: the result follows three argument words.
            assert_eq!(GoAbi::Stack.result(arch, 0, 3), sp(32));
            assert_eq!(GoAbi::Stack.arg(arch, usize::MAX), None);
        }
    }
}
