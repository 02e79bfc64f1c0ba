//! The x86-64 instructions an entry probe may be moved past (rules 3 and 4 of `mod.rs`'s docs): an
//! allow-list of register-only instructions, and the registers they write.

use crate::abi::Register;
use crate::arch::x86_64::is_nop;
use iced_x86::{Instruction, Mnemonic, OpKind};
/// The x86-64 register `r`'s 64-bit iced register.
pub(super) fn iced_register(r: Register) -> iced_x86::Register {
    use iced_x86::Register as I;
    match r {
        Register::Ax => I::RAX,
        Register::Bx => I::RBX,
        Register::Cx => I::RCX,
        Register::Dx => I::RDX,
        Register::Si => I::RSI,
        Register::Di => I::RDI,
        Register::Bp => I::RBP,
        Register::Sp => I::RSP,
        Register::R8 => I::R8,
        Register::R9 => I::R9,
        Register::R10 => I::R10,
        Register::R11 => I::R11,
        Register::R12 => I::R12,
        Register::R13 => I::R13,
        Register::R14 => I::R14,
        Register::R15 => I::R15,
        // aarch64's registers are in no x86 instruction (the x86 rules never see an aarch64
        // plan: the gate picks rules by the image's architecture).
        _ => I::None,
    }
}

/// Mnemonics a probe may skip when every operand is a general-purpose register or an
/// immediate (rule 3), plus `lea`, whose memory operand is only an address computation.
pub(super) fn skippable_mnemonic(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Endbr64
            | Endbr32
            | Nop
            | Mov
            | Movzx
            | Movsx
            | Movsxd
            | Lea
            | Xor
            | Add
            | Sub
            | And
            | Or
            | Cmp
            | Test
            | Inc
            | Dec
            | Neg
            | Not
            | Imul
            | Shl
            | Shr
            | Sar
    )
}

/// Whether rule 3 lets a probe skip `instr`: an allowed mnemonic, no memory access, only
/// general-purpose registers and immediates.
pub(super) fn skippable(instr: &Instruction) -> bool {
    if !skippable_mnemonic(instr.mnemonic()) {
        return false;
    }
    let nop_or_lea = is_nop(instr) || instr.mnemonic() == Mnemonic::Lea;
    (0..instr.op_count()).all(|i| match instr.op_kind(i) {
        OpKind::Register => instr.op_register(i).is_gpr(),
        OpKind::Memory => nop_or_lea,
        OpKind::Immediate8
        | OpKind::Immediate8_2nd
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => true,
        _ => false,
    })
}
