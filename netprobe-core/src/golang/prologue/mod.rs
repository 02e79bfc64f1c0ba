//! The stack-check prologue of Go functions, and the probe point after it, by the binary's
//! architecture: amd64 in `amd64.rs`, arm64 in `arm64.rs`.
//!
//! Why: almost every Go function starts by comparing SP with the goroutine's stack guard and, when
//! the stack is too small, jumps to a block at its end that calls `runtime.morestack*` and then
//! jumps back to the function's *first byte*. A uprobe at the first byte therefore fires twice for
//! a call whose stack grows (Go `src/runtime/stack.go`, `newstack`: the retried call restarts the
//! function); a probe on the instruction after the check's conditional jump fires once per call,
//! and the arguments are still in their registers (or stack slots) there because the check moves
//! nothing. Functions marked `//go:nosplit` (and small leaf functions the linker marks so) have no
//! check: their probe point is the entry, where a call is counted once anyway.

mod amd64;
mod arm64;

use crate::addr::VirtAddr;
use crate::arch::Arch;
use serde::Serialize;

/// Where the goroutine pointer came from in a recognised stack check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GSource {
    /// R14, the amd64 register ABI's g register (Go 1.17+).
    R14,
    /// Loaded from thread-local storage through FS (amd64 Go before 1.17, and ABI0 assembly
    /// since).
    Tls,
    /// R28, where arm64 Go keeps g in every release and ABI (`cmd/compile/abi-internal.md`,
    /// "arm64 architecture").
    R28,
}

/// A recognised stack-check prologue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StackCheck {
    pub g_source: GSource,
    /// Address of the conditional jump to the morestack block that ends the check (amd64
    /// `jbe`, arm64 `b.ls`).
    pub jbe: VirtAddr,
    /// Address of the morestack block (the jump's target).
    pub morestack_block: VirtAddr,
    /// The first instruction after the check: where an entry probe counts each call once.
    pub after: VirtAddr,
}

/// Finds the stack-check prologue of the function of architecture `arch` whose code is `code`
/// (exactly its bytes) and whose first byte is at `entry`. `None` when the function has none
/// (NOSPLIT) or its start is not one of the shapes the architecture's file lists.
pub fn stack_check(arch: Arch, code: &[u8], entry: VirtAddr) -> Option<StackCheck> {
    match arch {
        Arch::X86_64 => amd64::stack_check(code, entry),
        Arch::Aarch64 => arm64::stack_check(code, entry),
    }
}

/// The address where an entry probe counts each call once: after the stack check when there is
/// one, else the entry itself.
pub fn entry_probe_address(arch: Arch, code: &[u8], entry: VirtAddr) -> VirtAddr {
    stack_check(arch, code, entry).map_or(entry, |c| c.after)
}

/// How many instructions the morestack block may have before its jump back to the entry (it
/// spills and reloads up to nine argument registers around the call in Go 1.17+, on amd64 and
/// arm64 alike).
const MAX_MORESTACK_BLOCK: usize = 48;

/// One instruction of a candidate morestack block, as [`is_morestack_block`] sees it.
enum BlockStep {
    /// A direct call (amd64 `call`, arm64 `BL`).
    Call,
    /// A direct unconditional jump, and where it lands (`None`: not a direct target).
    Jump(Option<u64>),
    /// A return, an indirect jump, a trap, or bytes that do not decode: not the block.
    Leaves,
    /// Anything else (the register spills and reloads around the call).
    Other,
}

/// The bytes of `code` (a function whose first byte is at `entry`) from `at` on; `None` when
/// `at` is not inside it.
fn code_from(code: &[u8], entry: VirtAddr, at: VirtAddr) -> Option<&[u8]> {
    at.0.checked_sub(entry.0)
        .and_then(|off| usize::try_from(off).ok())
        .and_then(|off| code.get(off..))
}

/// Whether a block calls something and then jumps back to `entry`, within
/// [`MAX_MORESTACK_BLOCK`] instructions: the morestack block (`call runtime.morestack_noctxt;
/// jmp entry`, Go `src/cmd/internal/obj/x86/obj6.go` and `obj/arm64/obj7.go`, `stacksplit`).
fn is_morestack_block(steps: impl Iterator<Item = BlockStep>, entry: VirtAddr) -> bool {
    let mut called = false;
    for step in steps.take(MAX_MORESTACK_BLOCK) {
        match step {
            BlockStep::Call => called = true,
            BlockStep::Jump(target) => return called && target == Some(entry.0),
            BlockStep::Leaves => return false,
            BlockStep::Other => {}
        }
    }
    false
}
