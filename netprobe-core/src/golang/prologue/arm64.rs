//! The stack-check prologue of Go functions on arm64 (why it matters: `mod.rs`).
//!
//! The shapes, from the Go assembler's `stacksplit` (`cmd/internal/obj/arm64/obj7.go`), with g
//! in R28 and `16(g)` its `stackguard0`, as `go tool objdump` prints them for the sample app built
//! with `GOARCH=arm64` by Go 1.21 and 1.27 (the words are `aarch64-linux-gnu-objdump`'s):
//! 1. Small frames: `MOVD 16(R28), R16` (`ldr x16, [x28, #16]`); `CMP R16, RSP`
//!    (`cmp sp, x16`); `BLS morestack` (`b.ls`).
//! 2. Frames above StackSmall: `MOVD 16(R28), R16; SUB $N, RSP, R17; CMP R16, R17; BLS
//!    morestack` (`main.Recurse`).
//! 3. Frames above StackBig: `MOVD 16(R28), R16; MOVD $N, R27; SUBS R27, RSP, R17; BCC
//!    morestack; CMP R16, R17; BLS morestack` (`main.BigFrame`): the `BCC` (`b.lo`) guards
//!    against SP - N wrapping around.
//!
//! Then comes the frame setup (`MOVD.W R30, -N(RSP)`, or `SUB $N, RSP, R20; STP (R29, R30),
//! -8(R20); MOVD R20, RSP`), which writes SP: the check is over before it. A shape counts only
//! when its `b.ls` goes forward to a block inside the function that calls something (`BL
//! runtime.morestack_noctxt`, after `MOVD R30, R3`) and then branches back to the entry.

use super::{code_from, BlockStep, GSource, StackCheck};
use crate::addr::VirtAddr;
use crate::arch::aarch64;
use yaxpeax_arm::armv8::a64::{Opcode, Operand};

/// How many instructions may precede the check's `b.ls` (shape 3 has five).
const MAX_PROLOGUE_INSTRUCTIONS: usize = 8;
/// The condition code `LS` (unsigned lower or same) of `B.cond` (Arm ARM, "Condition codes").
const COND_LS: u8 = 0b1001;
/// arm64 Go's g register.
const G: u16 = 28;

pub(super) fn stack_check(code: &[u8], entry: VirtAddr) -> Option<StackCheck> {
    let end = entry.0.saturating_add(code.len() as u64);
    let mut guard_loaded = false;
    for w in aarch64::instructions(code, entry).take(MAX_PROLOGUE_INSTRUCTIONS) {
        let instr = w.instruction?;
        if loads_stackguard(&instr) {
            guard_loaded = true;
            continue;
        }
        if let Some(target) = aarch64::branch_target(&instr, w.address) {
            if !matches!(instr.opcode, Opcode::Bcc(_)) || target <= w.address || target >= end {
                return None;
            }
            if instr.opcode == Opcode::Bcc(COND_LS) && guard_loaded {
                if !is_morestack_block(code, entry, VirtAddr(target)) {
                    return None;
                }
                return Some(StackCheck {
                    g_source: GSource::R28,
                    jbe: VirtAddr(w.address),
                    morestack_block: VirtAddr(target),
                    after: VirtAddr(w.address + aarch64::INSTRUCTION_LEN as u64),
                });
            }
            // Shape 3's underflow `b.lo` comes before the compare.
            continue;
        }
        if aarch64::writes_sp(&instr)
            || aarch64::is_return(&instr)
            || aarch64::is_indirect_jump(&instr)
            || matches!(instr.opcode, Opcode::BLR)
        {
            return None;
        }
    }
    None
}

/// `ldr xN, [x28, #16]` (or `#24`, `stackguard1`, which the assembler uses for code that may run
/// on a C stack).
fn loads_stackguard(instr: &aarch64::Instruction) -> bool {
    instr.opcode == Opcode::LDR
        && instr
            .operands
            .iter()
            .any(|o| matches!(o, Operand::RegPreIndex(G, 16 | 24, false)))
}

/// Whether the code at `block` is the morestack block: a `BL` and then a `B` back to `entry`.
fn is_morestack_block(code: &[u8], entry: VirtAddr, block: VirtAddr) -> bool {
    let Some(rest) = code_from(code, entry, block) else {
        return false;
    };
    let steps = aarch64::instructions(rest, block).map(|w| match w.instruction {
        None => BlockStep::Leaves,
        Some(instr) => match instr.opcode {
            Opcode::BL => BlockStep::Call,
            Opcode::B => BlockStep::Jump(aarch64::branch_target(&instr, w.address)),
            _ if aarch64::is_return(&instr) || aarch64::is_indirect_jump(&instr) => {
                BlockStep::Leaves
            }
            _ => BlockStep::Other,
        },
    });
    super::is_morestack_block(steps, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Shape 1 (`main.Add3`-like): ldr x16,[x28,#16]; cmp sp,x16; b.ls +5 words; str x30,[sp,#-16]!;
    /// add; ldr x30,[sp],#16; ret; then the morestack block: mov x3,x30; bl; b entry.
    fn small_frame() -> Vec<u8> {
        words(&[
            0xf9400b90, 0xeb3063ff, 0x540000a9, 0xf81f0ffe, 0x8b010000, 0xf84107fe, 0xd65f03c0,
            0xaa1e03e3, 0x97ffff00, 0x17fffff7,
        ])
    }

    #[test]
    fn small_frame_check_is_found() {
        let c = stack_check(&small_frame(), VirtAddr(0x1000)).unwrap();
        assert_eq!(c.g_source, GSource::R28);
        assert_eq!(c.jbe, VirtAddr(0x1008));
        assert_eq!(c.morestack_block, VirtAddr(0x101c));
        assert_eq!(c.after, VirtAddr(0x100c));
    }

    #[test]
    fn big_frame_check_with_its_underflow_branch_is_found() {
        // main.BigFrame, Go 1.27 (go tool objdump): ldr x16,[x28,#16]; mov x27,#65424;
        // subs x17,sp,x27; b.lo +34; cmp x17,x16; b.ls +32; sub x20,sp,#16; ...
        let mut w = vec![
            0xf9400b90, 0xd29ff21b, 0xeb3b63f1, 0x54000443, 0xeb10023f, 0x54000409, 0xd10043f4,
        ];
        w.resize(37, 0xd503201f); // nops up to the morestack block at word 37 (5 + 32)
        w.extend([0xf90007e0, 0xaa1e03e3, 0x97fa5b65, 0xf94007e0, 0x17ffffd7]);
        let c = stack_check(&words(&w), VirtAddr(0x1fb6e0)).unwrap();
        assert_eq!(c.jbe, VirtAddr(0x1fb6f4));
        assert_eq!(c.after, VirtAddr(0x1fb6f8));
        assert_eq!(c.morestack_block, VirtAddr(0x1fb774));
    }

    #[test]
    fn no_check_without_the_guard_load_or_a_block_that_returns_to_entry() {
        // NOSPLIT: add x0,x0,x1; ret.
        assert_eq!(
            stack_check(&words(&[0x8b010000, 0xd65f03c0]), VirtAddr(0)),
            None
        );
        // The block branches elsewhere.
        let mut code = small_frame();
        let n = code.len();
        code[n - 4..].copy_from_slice(&0x17fffff8u32.to_le_bytes());
        assert_eq!(stack_check(&code, VirtAddr(0x1000)), None);
        // Arbitrary bytes never panic.
        assert_eq!(stack_check(&[0xff; 7], VirtAddr(0)), None);
    }
}
