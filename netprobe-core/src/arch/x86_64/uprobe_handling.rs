//! How the kernel handles a uprobe on an x86-64 instruction: emulated, single-stepped out of
//! line, optimized, or refused (Linux `arch/x86/kernel/uprobes.c`, `arch_uprobe_analyze_insn`,
//! quoted in detail in `crate::probe_point`'s docs).

use super::decode::instructions;
use crate::addr::VirtAddr;
use crate::arch::KernelHandling;
use iced_x86::{Code, FlowControl, Instruction, Mnemonic, OpKind};

/// How the kernel handles a uprobe on the instruction `bytes` start with (x86-64); `Refused`
/// for bytes that do not decode.
pub fn handling_of(bytes: &[u8]) -> KernelHandling {
    match instructions(bytes, VirtAddr(0)).next() {
        Some(i) => kernel_handling(&i, bytes),
        None => KernelHandling::Refused,
    }
}

/// Which instruction `instr` (whose bytes are `bytes`) is to the kernel's uprobe code.
pub fn kernel_handling(instr: &Instruction, bytes: &[u8]) -> KernelHandling {
    if instr.is_invalid() {
        return KernelHandling::Refused;
    }
    let prefixes = &bytes[..prefix_len(bytes).min(bytes.len())];
    // `is_prefix_bad`: es, cs, ss, ds, lock.
    if prefixes
        .iter()
        .any(|&b| matches!(b, 0x26 | 0x2e | 0x36 | 0x3e | 0xf0))
    {
        return KernelHandling::Refused;
    }
    if is_nop(instr) {
        if bytes.get(..instr.len()) == Some(&[0x0f, 0x1f, 0x44, 0x00, 0x00][..]) {
            return KernelHandling::Optimized;
        }
        return KernelHandling::Emulated;
    }
    let relative_branch = matches!(
        instr.code(),
        Code::Jmp_rel8_64 | Code::Jmp_rel32_64 | Code::Call_rel32_64
    ) || instr.flow_control() == FlowControl::ConditionalBranch
        && matches!(instr.op0_kind(), OpKind::NearBranch64)
        && !matches!(
            instr.mnemonic(),
            Mnemonic::Loop | Mnemonic::Loope | Mnemonic::Loopne | Mnemonic::Jrcxz | Mnemonic::Jecxz
        );
    if relative_branch {
        // "reject any branch insns with such prefix" (0x66).
        if prefixes.contains(&0x66) {
            return KernelHandling::Refused;
        }
        return KernelHandling::Emulated;
    }
    // push r64: one byte, or `41` + one byte (r8-r15); no other prefix.
    let push = match bytes {
        [b, ..] if (0x50..=0x57).contains(b) && instr.len() == 1 => true,
        [0x41, b, ..] if (0x50..=0x57).contains(b) && instr.len() == 2 => true,
        _ => false,
    };
    if push {
        return KernelHandling::Emulated;
    }
    KernelHandling::SingleStepped
}

/// Legacy and REX prefix bytes at the start of an encoding.
fn prefix_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|&&b| {
            matches!(
                b,
                0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3
            ) || (0x40..=0x4f).contains(&b)
        })
        .count()
}

/// The kernel's `insn_is_nop` NOPs: `90` (with or without `66`, not `41 90`, which is
/// `xchg r8, rax`) and the `0f 1f /0` multi-byte forms.
pub fn is_nop(instr: &Instruction) -> bool {
    matches!(
        instr.code(),
        Code::Nopw | Code::Nopd | Code::Nopq | Code::Nop_rm16 | Code::Nop_rm32 | Code::Nop_rm64
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handling_of_decodes_the_first_instruction() {
        assert_eq!(
            handling_of(&[0x55, 0x48, 0x89, 0xe5]),
            KernelHandling::Emulated
        );
        assert_eq!(
            handling_of(&[0x48, 0x89, 0xf8, 0xc3]),
            KernelHandling::SingleStepped
        );
        assert_eq!(
            handling_of(&[0x0f, 0x1f, 0x44, 0x00, 0x00]),
            KernelHandling::Optimized
        );
        assert_eq!(handling_of(&[]), KernelHandling::Refused);
    }

    #[test]
    fn kernel_handling_by_encoding() {
        let h = |bytes: &[u8]| {
            let i = instructions(bytes, VirtAddr(0)).next().unwrap();
            kernel_handling(&i, bytes)
        };
        assert_eq!(h(&[0x90]), KernelHandling::Emulated);
        assert_eq!(h(&[0x41, 0x90]), KernelHandling::SingleStepped); // xchg r8, rax
        assert_eq!(h(&[0x41, 0x57]), KernelHandling::Emulated); // push r15
        assert_eq!(h(&[0x48, 0x50]), KernelHandling::SingleStepped); // REX.W push
        assert_eq!(h(&[0xeb, 0x00]), KernelHandling::Emulated);
        assert_eq!(h(&[0x0f, 0x84, 0, 0, 0, 0]), KernelHandling::Emulated);
        assert_eq!(h(&[0x66, 0xe9, 0, 0]), KernelHandling::Refused);
        assert_eq!(h(&[0xe2, 0x00]), KernelHandling::SingleStepped); // loop
        assert_eq!(h(&[0xf0, 0x48, 0x01, 0x07]), KernelHandling::Refused); // lock add
        assert_eq!(h(&[0xf3, 0x0f, 0x1e, 0xfa]), KernelHandling::SingleStepped); // endbr64
        assert_eq!(h(&[0xc3]), KernelHandling::SingleStepped);
    }
}
