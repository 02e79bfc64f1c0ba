//! Which A64 instructions the kernel's arm64 uprobes can run, from Linux
//! `arch/arm64/kernel/probes/decode-insn.c` (`arm_probe_decode_insn`,
//! `aarch64_insn_is_steppable`), `simulate-insn.c` and `uprobes.c` (`arch_uprobe_analyze_insn`),
//! over the kernels netprobe supports (6.1 to 6.18):
//!
//! | instructions | the kernel | since |
//! |---|---|---|
//! | `B`, `BL`, `B.cond`, `CBZ`/`CBNZ`, `TBZ`/`TBNZ`, `BR`, `BLR`, `RET`, `ADR`, `ADRP` | simulates (`INSN_GOOD_NO_SLOT`) | all |
//! | `NOP` | simulates (`simulate_nop`) | 6.13 ("Simulate nop instruction for better uprobe performance"); single-stepped before |
//! | `LDR`/`LDRSW`/`PRFM` (literal) | rejects (`aarch64_insn_uses_literal`) | 6.12 removed the uprobe simulation, which read the literal at the user address from the kernel; stable kernels took the fix |
//! | load/store exclusive (`LDXR`, `LDAXR`, `STXR`, `STLXR`, pairs, bytes, halves) | rejects (`aarch64_insn_is_exclusive`) | all |
//! | exception generating (`SVC`, `HVC`, `SMC`, `BRK`, `HLT`, `DCPS*`), `ERET*`, `DRPS` | rejects | all |
//! | authenticated branches (`RETAA`/`RETAB`, `BRAA`.., `BLRAA`..), `BC.cond` | rejects: branches are not steppable and only plain `BR`/`BLR`/`RET` are simulated | all |
//! | `MSR`, `MRS` (but a read of DAIF, which user code has no use for: netprobe rejects every `MRS`) | rejects | all |
//! | `HINT`s other than `NOP`, the PAC hints (`PACIASP`, `AUTIASP`, ..) and `BTI` (`YIELD`, `WFE`, `WFI`, `SEV`, ..) | rejects (`aarch64_insn_is_steppable_hint`) | all |
//! | everything else (`STP x29, x30, [sp, #-16]!`, `LDR x16, [x28, #16]`, `PACIASP`, `BTI`, arithmetic, loads and stores) | single-steps a copy out of line (`INSN_GOOD`) | all |
//!
//! A rejected instruction fails the probe's registration (`-EINVAL` from `arch_uprobe_analyze_insn`
//! when the uprobe is installed), so the gate refuses it up front. The kernel also checks nothing
//! of *where* a uprobe lands in an exclusive sequence (its `is_probed_address_atomic` is for
//! kprobes only), yet the breakpoint's exception return clears the exclusive monitor: a probe
//! between `LDXR` and its `STXR` makes the store fail on every retry, and the target spins
//! forever. [`exclusive_sequence_before`] finds such a point the way the kprobe check does.
//! `UDF` (permanently undefined) is not code, and is refused too.

use super::decode::{instructions, Instruction};
use crate::addr::VirtAddr;
use crate::arch::KernelHandling;
use yaxpeax_arm::armv8::a64::{Opcode, Operand};

/// How many instructions back [`exclusive_sequence_before`] looks (the kernel's
/// `MAX_ATOMIC_CONTEXT_SIZE`, `arch/arm64/include/asm/probes.h`).
pub const MAX_ATOMIC_CONTEXT: usize = 16;

/// Why the kernel rejects an instruction, for a refusal's text; `None` when it does not.
pub fn rejection(instr: &Instruction) -> Option<&'static str> {
    use Opcode::*;
    let uses_literal = matches!(instr.opcode, LDR | LDRSW | PRFM)
        && instr
            .operands
            .iter()
            .any(|o| matches!(o, Operand::PCOffset(_)));
    if uses_literal {
        return Some("a load of a PC-relative literal, which cannot run from the kernel's out-of-line slot and which uprobes no longer simulate");
    }
    Some(match instr.opcode {
        LDXR | LDXRB | LDXRH | LDXP | LDAXR | LDAXRB | LDAXRH | LDAXP | STXR | STXRB | STXRH
        | STXP | STLXR | STLXRB | STLXRH | STLXP => {
            "an exclusive load or store, whose sequence single-stepping breaks"
        }
        SVC | HVC | SMC | BRK | HLT | DCPS1 | DCPS2 | DCPS3 => {
            "an exception-generating instruction"
        }
        ERET | ERETAA | ERETAB | DRPS => "an exception return",
        RETAA | RETAB | RETAASPPC | RETABSPPC | RETAASPPCR | RETABSPPCR | BRAA | BRAAZ | BRAB
        | BRABZ | BLRAA | BLRAAZ | BLRAB | BLRABZ | BCcc(_) => {
            "a branch uprobes neither single-step nor simulate (pointer-authenticating, or BC.cond)"
        }
        MSR | MRS => "a system-register access, which single-stepping cannot run faithfully",
        HINT if !steppable_hint(instr) => {
            "a hint instruction (YIELD, WFE, WFI, SEV, ...) the kernel does not single-step"
        }
        UDF => "a permanently undefined instruction (UDF), not code",
        _ => return None,
    })
}

/// `HINT`s the kernel single-steps (`aarch64_insn_is_steppable_hint`): NOP and the BTI hints
/// (the PAC hints decode as their own opcodes, `PACIASP`, ..).
fn steppable_hint(instr: &Instruction) -> bool {
    let number = match (instr.operands[0], instr.operands[1]) {
        (Operand::ControlReg(crm), Operand::Immediate(op2)) => (crm << 3) | (op2 as u16 & 7),
        _ => return false,
    };
    // NOP is 0; BTI, BTI c, BTI j, BTI jc are 32, 34, 36, 38.
    number == 0 || matches!(number, 32 | 34 | 36 | 38)
}

/// Whether the instruction is `NOP` (`HINT #0`).
pub fn is_nop(instr: &Instruction) -> bool {
    instr.opcode == Opcode::HINT && {
        matches!(
            (instr.operands[0], instr.operands[1]),
            (Operand::ControlReg(0), Operand::Immediate(0))
        )
    }
}

/// Whether the instruction is one of the `BTI` hints (`HINT #32`, `#34`, `#36`, `#38`).
pub fn is_bti(instr: &Instruction) -> bool {
    instr.opcode == Opcode::HINT && steppable_hint(instr) && !is_nop(instr)
}

/// How the kernel's uprobes handle `instr` (the table in the module docs; NOP as 6.13+ does).
pub fn kernel_handling(instr: &Instruction) -> KernelHandling {
    use Opcode::*;
    if rejection(instr).is_some() {
        return KernelHandling::Refused;
    }
    let simulated = matches!(
        instr.opcode,
        B | BL | Bcc(_) | CBZ | CBNZ | TBZ | TBNZ | BR | BLR | RET | ADR | ADRP
    ) || is_nop(instr);
    if simulated {
        KernelHandling::Emulated
    } else {
        KernelHandling::SingleStepped
    }
}

/// How the kernel handles a uprobe on the instruction `bytes` start with; `Refused` for bytes
/// that do not decode.
pub fn handling_of(bytes: &[u8]) -> KernelHandling {
    super::decode::decode(bytes).map_or(KernelHandling::Refused, |i| kernel_handling(&i))
}

/// The byte index of the exclusive load that opens a sequence `target` lies in, when one does:
/// walking back from the word before `target` (to the function's start `code[0]`, at most
/// [`MAX_ATOMIC_CONTEXT`] words), a store-exclusive ends the search (the sequence closed), a
/// load-exclusive finds it (the kernel's `is_probed_address_atomic`, applied to uprobes).
pub fn exclusive_sequence_before(code: &[u8], target: usize) -> Option<usize> {
    use Opcode::*;
    let words = target / super::decode::INSTRUCTION_LEN;
    let from = words.saturating_sub(MAX_ATOMIC_CONTEXT);
    let window = code.get(from * 4..words * 4)?;
    let decoded: Vec<_> = instructions(window, VirtAddr(0)).collect();
    for w in decoded.iter().rev() {
        match w.instruction.map(|i| i.opcode) {
            Some(STXR | STXRB | STXRH | STXP | STLXR | STLXRB | STLXRH | STLXP) => return None,
            Some(LDXR | LDXRB | LDXRH | LDXP | LDAXR | LDAXRB | LDAXRH | LDAXP) => {
                return Some(from * 4 + w.address as usize)
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::aarch64::decode::decode;

    fn handling(w: u32) -> KernelHandling {
        handling_of(&w.to_le_bytes())
    }

    #[test]
    fn kernel_handling_of_real_words() {
        // Words as `aarch64-linux-gnu-objdump -d` prints them.
        assert_eq!(handling(0xd65f03c0), KernelHandling::Emulated); // ret
        assert_eq!(handling(0x94000002), KernelHandling::Emulated); // bl
        assert_eq!(handling(0x54000109), KernelHandling::Emulated); // b.ls
        assert_eq!(handling(0xb0000080), KernelHandling::Emulated); // adrp x0, ...
        assert_eq!(handling(0xd503201f), KernelHandling::Emulated); // nop
        assert_eq!(handling(0xa9bf7bfd), KernelHandling::SingleStepped); // stp x29, x30, [sp, #-16]!
        assert_eq!(handling(0xf9400b90), KernelHandling::SingleStepped); // ldr x16, [x28, #16]
        assert_eq!(handling(0xd503233f), KernelHandling::SingleStepped); // paciasp
        assert_eq!(handling(0xd503245f), KernelHandling::SingleStepped); // bti c
        assert_eq!(handling(0xc85f7c20), KernelHandling::Refused); // ldxr x0, [x1]
        assert_eq!(handling(0xc802fc20), KernelHandling::Refused); // stlxr w2, x0, [x1]
        assert_eq!(handling(0xd4000001), KernelHandling::Refused); // svc #0
        assert_eq!(handling(0xd4200000), KernelHandling::Refused); // brk #0
        assert_eq!(handling(0xd65f0bff), KernelHandling::Refused); // retaa
        assert_eq!(handling(0xd53bd040), KernelHandling::Refused); // mrs x0, tpidr_el0
        assert_eq!(handling(0x58000040), KernelHandling::Refused); // ldr x0, .+8 (literal)
        assert_eq!(handling(0xd503203f), KernelHandling::Refused); // yield
        assert_eq!(handling(0x00000000), KernelHandling::Refused); // udf #0
        assert_eq!(handling_of(&[0xc0, 0x03]), KernelHandling::Refused);
    }

    #[test]
    fn nop_is_hint_zero() {
        assert!(is_nop(&decode(&0xd503201fu32.to_le_bytes()).unwrap()));
        assert!(!is_nop(&decode(&0xd503245fu32.to_le_bytes()).unwrap()));
    }

    #[test]
    fn points_inside_an_exclusive_sequence_are_found() {
        // retry: ldaxr x2, [x0]; add x2, x2, #1; stlxr w3, x2, [x0]; cbnz w3, retry; ret
        let code: Vec<u8> = [
            0xc85ffc02u32,
            0x91000442,
            0xc803fc02,
            0x35ffffa3,
            0xd65f03c0,
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
        assert_eq!(exclusive_sequence_before(&code, 0), None);
        assert_eq!(exclusive_sequence_before(&code, 4), Some(0));
        assert_eq!(exclusive_sequence_before(&code, 8), Some(0));
        assert_eq!(exclusive_sequence_before(&code, 12), None);
        assert_eq!(exclusive_sequence_before(&code, 16), None);
        assert_eq!(exclusive_sequence_before(&code, 400), None);
    }
}
