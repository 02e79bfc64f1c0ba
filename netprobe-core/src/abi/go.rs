//! Where a Go function's arguments and results are at a probe, by calling convention.
//!
//! Sources: Go's internal ABI specification (`src/cmd/compile/abi-internal.md`, "amd64
//! architecture"): integer arguments and results in RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11, in
//! that order, one word each (a string takes two consecutive words: pointer, length; a slice three;
//! an interface two); a method's receiver is the first argument. The register ABI is the default
//! on amd64 since Go 1.17 (release notes of Go 1.17, "Compiler"). Before, every argument and result
//! lived on the stack: at function entry `0(SP)` is the return address and argument word `i` is at
//! `8 + 8*i(SP)`, results follow the arguments (`ABI0`, `doc/asm.html`).
//!
//! Both hold at the function's first byte *and* at the point after the stack-check prologue
//! (the prologue only compares SP with the goroutine's stack guard; it moves nothing), and at every
//! RET (SP is back at the return address). Measured on Go 1.19.

use super::{ArgLocation, Register};
use crate::golang::GoVersion;
use serde::Serialize;
use std::fmt;

/// The integer argument/result registers of the Go register ABI on amd64, in assignment order.
pub const REGISTER_ORDER: [Register; 9] = [
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

/// The register holding the current goroutine (`g`) under the register ABI, at entry and at
/// every RET (`abi-internal.md`, "amd64 architecture": R14 is the current goroutine).
pub const GOROUTINE_REGISTER: Register = Register::R14;

/// A Go calling convention on amd64.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GoAbi {
    /// `ABIInternal` with register assignment (Go 1.17+ on amd64).
    Register,
    /// The stack-based `ABI0` (every Go function before 1.17).
    Stack,
}

/// The convention of a binary built by `version` (Go 1.17 switched amd64 to registers).
pub fn abi_for(version: &GoVersion) -> GoAbi {
    if version.at_least(1, 17) {
        GoAbi::Register
    } else {
        GoAbi::Stack
    }
}

impl GoAbi {
    /// Where integer argument word `word` (0-based; the receiver is word 0 of a method; a string
    /// argument occupies two words, pointer then length) is at entry, after the prologue, and
    /// unchanged until the function first writes it.
    ///
    /// Register ABI: the word's register for `word < 9`; `None` beyond, because a word that does
    /// not fit in registers makes its whole argument stack-assigned, at an offset that depends on
    /// the signature. Stack ABI: `SP + 8 + 8*word` for any word.
    pub fn arg(self, word: usize) -> Option<ArgLocation> {
        match self {
            GoAbi::Register => REGISTER_ORDER.get(word).map(|&r| ArgLocation::Register(r)),
            GoAbi::Stack => ArgLocation::stack_slot(word),
        }
    }

    /// Where result word `word` is at a RET instruction. Register ABI: results are assigned to
    /// registers from RAX again, like arguments. Stack ABI: results follow the `arg_words`
    /// argument words on the caller's frame, at `SP + 8 + 8*(arg_words + word)`.
    pub fn result(self, word: usize, arg_words: usize) -> Option<ArgLocation> {
        match self {
            GoAbi::Register => REGISTER_ORDER.get(word).map(|&r| ArgLocation::Register(r)),
            GoAbi::Stack => ArgLocation::stack_slot(arg_words.checked_add(word)?),
        }
    }

    /// How many integer words fit in registers (9 for the register ABI, 0 for the stack ABI).
    pub fn register_words(self) -> usize {
        match self {
            GoAbi::Register => REGISTER_ORDER.len(),
            GoAbi::Stack => 0,
        }
    }
}

impl fmt::Display for GoAbi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GoAbi::Register => "register ABI (go1.17+)",
            GoAbi::Stack => "stack ABI (before go1.17)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_picks_the_convention() {
        assert_eq!(abi_for(&GoVersion::new(1, 16, 15)), GoAbi::Stack);
        assert_eq!(abi_for(&GoVersion::new(1, 17, 0)), GoAbi::Register);
        assert_eq!(
            abi_for(&GoVersion::parse("go1.19.8").unwrap()),
            GoAbi::Register
        );
    }

    #[test]
    fn register_order_is_the_go_internal_abi() {
        let names: Vec<String> = (0..9)
            .map(|i| match GoAbi::Register.arg(i).unwrap() {
                ArgLocation::Register(r) => r.name().to_string(),
                l => panic!("{l:?}"),
            })
            .collect();
        assert_eq!(
            names,
            ["ax", "bx", "cx", "di", "si", "r8", "r9", "r10", "r11"]
        );
        assert_eq!(GoAbi::Register.arg(9), None);
        assert_eq!(
            GoAbi::Register.result(0, 3),
            Some(ArgLocation::Register(Register::Ax))
        );
    }

    #[test]
    fn stack_abi_counts_from_sp_plus_8() {
        let sp = |offset| Some(ArgLocation::EntryStack { offset });
        assert_eq!(GoAbi::Stack.arg(0), sp(8));
        assert_eq!(GoAbi::Stack.arg(2), sp(24));
        // func Add3(a, b, c int) int: the result follows three argument words.
        assert_eq!(GoAbi::Stack.result(0, 3), sp(32));
        assert_eq!(GoAbi::Stack.arg(usize::MAX), None);
    }
}
