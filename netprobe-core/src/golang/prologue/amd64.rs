//! The stack-check prologue of Go functions on amd64.
//!
//! Why (see `mod.rs`): almost every Go function starts by comparing SP with the goroutine's stack guard and, when
//! the stack is too small, jumps to a block at its end that calls `runtime.morestack*` and then
//! jumps back to the function's *first byte*. A uprobe at the first byte therefore fires twice for
//! a call whose stack grows (Go `src/runtime/stack.go`, `newstack`: the retried call restarts
//! the function); a probe on the instruction after
//! the check's conditional jump fires once per call, and the arguments are still in their
//! registers (or stack slots) there because the check moves nothing.
//!
//! The shapes recognised, each from the Go linker's `stacksplit` (`cmd/internal/obj/x86/obj6.go`),
//! with `G` the register holding the current goroutine and `0x10(G)` its `stackguard0`:
//! 1. Small frames, Go 1.17+ (register ABI keeps g in R14):
//!    `cmp rsp, [r14+0x10]; jbe MORESTACK` (seen in every `main.*` of the Go 1.19 sample app).
//! 2. Frames above StackSmall (128 bytes), Go 1.17+: `lea r12, [rsp-N]; cmp r12, [r14+0x10];
//!    jbe MORESTACK` (`main.Recurse` with its 512-byte pad).
//! 3. Frames above StackBig (4096 bytes), Go 1.17+: `mov r12, rsp; sub r12, N; jb MORESTACK;
//!    cmp r12, [r14+0x10]; jbe MORESTACK` (`main.BigFrame` with its 64 KiB array): the extra
//!    `jb` guards against SP - N wrapping around.
//! 4. Before Go 1.17 g comes from thread-local storage: `mov rcx, fs:[-8]` (or, in PIE/shared
//!    builds, `mov rcx, [rip+tlsg]; mov rcx, fs:[rcx]`), then shapes 1-2 with RCX for R14 and
//!    `lea rax, [rsp-N]` (esbuild 0.8 built with Go 1.16, 0.7 with Go 1.15).
//! 5. Huge frames before Go 1.17: `mov rsi, [rcx+0x10]; cmp rsi, StackPreempt; je MORESTACK;
//!    lea rax, [rsp+StackGuard]; sub rax, rsi; cmp rax, N; jbe MORESTACK`: the guard is loaded
//!    instead of compared directly, so a load of `0x10(G)` counts like the compare.
//!
//! A shape counts only when its `jbe` goes forward to a block inside the function that calls
//! something and then jumps back to the entry (the morestack block). Functions marked
//! `//go:nosplit` (and small leaf functions the linker marks so) have no check: their probe point
//! is the entry, where a call is counted once anyway because nothing re-enters it.

use super::{code_from, BlockStep, GSource, StackCheck};
use crate::addr::VirtAddr;
use crate::arch::x86_64 as x86;
use iced_x86::{FlowControl, Instruction, Mnemonic, OpKind, Register};

/// How many instructions may precede the check's `jbe` (shape 5 has seven).
const MAX_PROLOGUE_INSTRUCTIONS: usize = 10;

/// Finds the stack-check prologue of the function whose code is `code` (exactly its bytes) and
/// whose first byte is at `entry`. `None` when the function has none (NOSPLIT) or its start is
/// not one of the shapes above.
pub(super) fn stack_check(code: &[u8], entry: VirtAddr) -> Option<StackCheck> {
    let end = entry.0.saturating_add(code.len() as u64);
    let mut g_regs: Vec<(Register, GSource)> = vec![(Register::R14, GSource::R14)];
    let mut guard_touched: Option<GSource> = None;
    for instr in x86::instructions(code, entry).take(MAX_PROLOGUE_INSTRUCTIONS) {
        if instr.is_invalid() {
            return None;
        }
        if let Some(source) = reads_stackguard(&instr, &g_regs) {
            guard_touched = Some(source);
            continue;
        }
        if let Some(reg) = loads_g_from_tls(&instr) {
            g_regs.push((reg, GSource::Tls));
            continue;
        }
        match instr.flow_control() {
            FlowControl::ConditionalBranch => {
                let target = instr.near_branch_target();
                if target <= instr.ip() || target >= end {
                    return None;
                }
                if instr.mnemonic() == Mnemonic::Jbe {
                    if let Some(g_source) = guard_touched {
                        if !is_morestack_block(code, entry, VirtAddr(target)) {
                            return None;
                        }
                        return Some(StackCheck {
                            g_source,
                            jbe: VirtAddr(instr.ip()),
                            morestack_block: VirtAddr(target),
                            after: VirtAddr(instr.next_ip()),
                        });
                    }
                }
                // Shape 3's underflow `jb` and shape 5's preempt `je` come before the compare.
            }
            FlowControl::Next if !writes_rsp(&instr) => {}
            _ => return None,
        }
    }
    None
}

/// `cmp REG, [G+0x10]` / `cmp [G+0x10], REG` or `mov REG, [G+0x10]` (also `0x18`,
/// `stackguard1`, which the assembler uses for code that may run on a C stack): the source of
/// G when `instr` is one.
fn reads_stackguard(instr: &Instruction, g_regs: &[(Register, GSource)]) -> Option<GSource> {
    if !matches!(instr.mnemonic(), Mnemonic::Cmp | Mnemonic::Mov) {
        return None;
    }
    let has_mem_operand = (0..instr.op_count()).any(|i| instr.op_kind(i) == OpKind::Memory);
    if !has_mem_operand
        || instr.memory_index() != Register::None
        || !matches!(instr.memory_displacement64(), 0x10 | 0x18)
    {
        return None;
    }
    if instr.mnemonic() == Mnemonic::Mov && instr.op0_kind() != OpKind::Register {
        return None; // a store, not a load of the guard
    }
    let base = instr.memory_base().full_register();
    g_regs.iter().find(|(r, _)| *r == base).map(|&(_, s)| s)
}

/// `mov REG, fs:[...]`: the TLS load of g (Go before 1.17, `runtime.tlsg` at `-8(FS)` or through
/// a register in PIE builds). Returns the loaded register.
fn loads_g_from_tls(instr: &Instruction) -> Option<Register> {
    (instr.mnemonic() == Mnemonic::Mov
        && instr.op0_kind() == OpKind::Register
        && instr.op1_kind() == OpKind::Memory
        && instr.memory_segment() == Register::FS)
        .then(|| instr.op0_register().full_register())
}

/// Whether `instr` changes RSP (push, pop, or RSP as the destination): the prologue is over
/// once the frame is being built.
fn writes_rsp(instr: &Instruction) -> bool {
    if matches!(
        instr.mnemonic(),
        Mnemonic::Push | Mnemonic::Pop | Mnemonic::Enter | Mnemonic::Leave
    ) {
        return true;
    }
    let compares = matches!(instr.mnemonic(), Mnemonic::Cmp | Mnemonic::Test);
    !compares
        && instr.op0_kind() == OpKind::Register
        && instr.op0_register().full_register() == Register::RSP
}

/// Whether the code at `block` is the morestack block (`call runtime.morestack_noctxt; jmp
/// entry`, with register spills around the call in Go 1.17+).
fn is_morestack_block(code: &[u8], entry: VirtAddr, block: VirtAddr) -> bool {
    let Some(rest) = code_from(code, entry, block) else {
        return false;
    };
    let steps = x86::instructions(rest, block).map(|instr| {
        if instr.is_invalid() {
            return BlockStep::Leaves;
        }
        match instr.flow_control() {
            FlowControl::Call => BlockStep::Call,
            FlowControl::UnconditionalBranch => BlockStep::Jump(Some(instr.near_branch_target())),
            FlowControl::Return | FlowControl::IndirectBranch | FlowControl::Interrupt => {
                BlockStep::Leaves
            }
            _ => BlockStep::Other,
        }
    });
    super::is_morestack_block(steps, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_probe_address(code: &[u8], entry: VirtAddr) -> VirtAddr {
        stack_check(code, entry).map_or(entry, |c| c.after)
    }

    /// Shape 1, as Go 1.19 compiles `main.Add3` (bytes from the sample app):
    /// cmp rsp,[r14+0x10]; jbe +N; ...; morestack block: call; jmp entry.
    fn small_frame() -> Vec<u8> {
        let mut c = vec![0x49, 0x3b, 0x66, 0x10]; // cmp rsp,[r14+0x10]
        c.extend([0x76, 0x05]); // jbe +5 -> 0x0b
        c.extend([0x48, 0x01, 0xd8]); // add rax,rbx
        c.extend([0x90, 0xc3]); // nop; ret
                                // 0x0b: mov [rsp+8],rax; call rel32; mov rax,[rsp+8]; jmp entry
        c.extend([0x48, 0x89, 0x44, 0x24, 0x08]);
        c.extend([0xe8, 0x00, 0x00, 0x00, 0x00]);
        c.extend([0x48, 0x8b, 0x44, 0x24, 0x08]);
        let jmp_at = c.len() as i64;
        let rel = -(jmp_at + 2);
        c.extend([0xeb, rel as u8]);
        c
    }

    #[test]
    fn small_frame_check_is_found() {
        let code = small_frame();
        let check = stack_check(&code, VirtAddr(0x1000)).unwrap();
        assert_eq!(check.g_source, GSource::R14);
        assert_eq!(check.jbe, VirtAddr(0x1004));
        assert_eq!(check.after, VirtAddr(0x1006));
        assert_eq!(check.morestack_block, VirtAddr(0x100b));
        assert_eq!(
            entry_probe_address(&code, VirtAddr(0x1000)),
            VirtAddr(0x1006)
        );
    }

    #[test]
    fn jbe_to_a_block_that_does_not_return_to_entry_is_not_a_check() {
        let mut code = small_frame();
        let last = code.len() - 1;
        code[last] = code[last].wrapping_add(1); // jmp lands one byte after the entry
        assert_eq!(stack_check(&code, VirtAddr(0x1000)), None);
        assert_eq!(
            entry_probe_address(&code, VirtAddr(0x1000)),
            VirtAddr(0x1000)
        );
    }

    #[test]
    fn nosplit_function_probes_at_entry() {
        // mov rax, rbx; ret
        let code = [0x48, 0x89, 0xd8, 0xc3];
        assert_eq!(stack_check(&code, VirtAddr(0x40)), None);
        assert_eq!(entry_probe_address(&code, VirtAddr(0x40)), VirtAddr(0x40));
    }

    #[test]
    fn tls_g_before_go_1_17() {
        // mov rcx, fs:[0xfffffffffffffff8]; cmp rsp,[rcx+0x10]; jbe +1; ret;
        // block: call rel32; jmp entry
        let mut c = vec![0x64, 0x48, 0x8b, 0x0c, 0x25, 0xf8, 0xff, 0xff, 0xff];
        c.extend([0x48, 0x3b, 0x61, 0x10]);
        c.extend([0x76, 0x01]);
        c.push(0xc3);
        c.extend([0xe8, 0, 0, 0, 0]);
        let rel = -(c.len() as i64 + 2);
        c.extend([0xeb, rel as u8]);
        let check = stack_check(&c, VirtAddr(0)).unwrap();
        assert_eq!(check.g_source, GSource::Tls);
        assert_eq!(check.after, VirtAddr(0x0f));
    }

    #[test]
    fn sp_change_ends_the_prologue() {
        // push rbp; cmp rsp,[r14+0x10]; jbe ... : the compare comes too late to be a prologue
        let mut c = vec![0x55];
        c.extend(small_frame());
        assert_eq!(stack_check(&c, VirtAddr(0)), None);
    }
}
