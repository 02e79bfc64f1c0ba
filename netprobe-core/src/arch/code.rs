//! What decoding one function's code tells probe placement, the same questions for every
//! architecture, answered by the image's [`Arch`] (never the host's): its return sites and tail
//! jumps, whether the stack pointer is written before a point, the direct branches of a stretch of
//! code, and how the kernel's uprobes handle the instruction at a point.

use super::{aarch64, x86_64, Arch, KernelHandling};
use crate::addr::VirtAddr;
use serde::Serialize;

/// What a sweep over one function found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CodeScan {
    /// Address of every return instruction in the function, ascending (x86-64 `RET`, `C3`,
    /// `C2 iw`; aarch64 `RET`, `RETAA`, `RETAB`). A uprobe on each one replaces a uretprobe: it
    /// fires on every return path with the return value in its register.
    pub rets: Vec<VirtAddr>,
    /// Direct unconditional jumps whose target lies outside the function (x86-64 `JMP`,
    /// aarch64 `B`): tail calls (Go emits them in wrappers). A return through one of them
    /// passes no return instruction of this function.
    pub tail_jumps: Vec<VirtAddr>,
    /// Instructions that failed to decode (0 for real code; an aarch64 Go function's literal
    /// pool may add some).
    pub invalid: usize,
}

impl Arch {
    /// Decodes `code` (the bytes of one function whose first byte is at `entry`) and lists its
    /// return instructions and tail jumps. Every address reported lies in
    /// `[entry, entry + code.len())` with the whole instruction inside it.
    pub fn scan(self, code: &[u8], entry: VirtAddr) -> CodeScan {
        match self {
            Arch::X86_64 => x86_64::scan(code, entry),
            Arch::Aarch64 => aarch64::scan(code, entry),
        }
    }

    /// Whether any instruction that starts in `[entry, until)` may write the stack pointer (or
    /// a word there does not decode, or the range runs past `code`). `false` for an empty range.
    /// Used to check that a probe placed at `until` sees the stack pointer a function was
    /// entered with (Go's stack ABI reads arguments relative to it).
    pub fn stack_pointer_written(self, code: &[u8], entry: VirtAddr, until: VirtAddr) -> bool {
        match self {
            Arch::X86_64 => x86_64::stack_pointer_written(code, entry, until),
            Arch::Aarch64 => aarch64::stack_pointer_written(code, entry, until),
        }
    }

    /// Every direct branch or call of `code` (whose first byte is at `address`), as
    /// `(source, target)` addresses, in code order. A linear sweep: data inside code may add
    /// spurious ones.
    pub fn direct_branches(self, code: &[u8], address: VirtAddr) -> Vec<(u64, u64)> {
        match self {
            Arch::X86_64 => x86_64::direct_branches(code, address),
            Arch::Aarch64 => aarch64::direct_branches(code, address),
        }
    }

    /// How the kernel's uprobes handle the instruction `bytes` start with; `Refused` for bytes
    /// that do not decode.
    pub fn handling_of(self, bytes: &[u8]) -> KernelHandling {
        match self {
            Arch::X86_64 => x86_64::handling_of(bytes),
            Arch::Aarch64 => aarch64::handling_of(bytes),
        }
    }
}
