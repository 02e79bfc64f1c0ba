//! The decoding questions probe placement asks of an image's code, the same for every
//! architecture and answered by the decoder of the image's [`Arch`] (never the host's): where
//! linear decoding meets an offset, its return sites and tail jumps, whether the stack pointer is
//! written before a point, the direct branches of a stretch of code, and how the kernel's uprobes
//! handle the instruction at a point. The answers' types live beside this file ([`Boundary`],
//! [`CodeScan`], [`KernelHandling`]) so that each architecture's decoder names them without
//! naming this dispatch.

use super::{aarch64, x86_64, Arch, Boundary, CodeScan, KernelHandling};
use crate::addr::VirtAddr;

impl Arch {
    /// Where decoding `code` (this architecture's instructions) from its first byte meets
    /// `target`: x86-64 [`x86_64::instruction_boundary`], aarch64
    /// [`aarch64::instruction_boundary`]. Never reads outside `code`, never panics.
    pub fn instruction_boundary(self, code: &[u8], target: usize) -> Boundary {
        match self {
            Arch::X86_64 => x86_64::instruction_boundary(code, target),
            Arch::Aarch64 => aarch64::instruction_boundary(code, target),
        }
    }

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
