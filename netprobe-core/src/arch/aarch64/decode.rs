//! One aarch64 function decoded: A64 instructions are 4-byte little-endian words at 4-aligned
//! addresses (Arm ARM, "A64 instruction set encoding"), so the sweep is word by word and an
//! instruction boundary is a multiple of 4 from the function's first byte. Each word is decoded
//! with yaxpeax-arm (see `mod.rs` for why that crate); a word it does not decode (data in a Go
//! literal pool, padding, a corrupt file) is counted, and the gate refuses a probe on it. Nothing
//! here can panic on arbitrary bytes: a trailing part-word is an undecodable instruction, never
//! read past.

use crate::addr::VirtAddr;
use crate::arch::{Boundary, CodeScan};
use yaxpeax_arch::{Decoder, U8Reader};
use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode, Operand};

pub use yaxpeax_arm::armv8::a64::Instruction;

/// Bytes in an A64 instruction.
pub const INSTRUCTION_LEN: usize = 4;

/// One word of a function: where it is, and the instruction it decodes to (`None` when it does
/// not decode, or is cut off by the end of the code).
#[derive(Clone, Copy, Debug)]
pub struct Word {
    /// The word's address.
    pub address: u64,
    pub instruction: Option<Instruction>,
}

/// Decodes one instruction from the first 4 bytes of `bytes`; `None` when there are fewer or
/// they are no A64 instruction yaxpeax-arm knows.
pub fn decode(bytes: &[u8]) -> Option<Instruction> {
    let word = bytes.get(..INSTRUCTION_LEN)?;
    let mut reader = U8Reader::new(word);
    InstDecoder::default()
        .decode(&mut reader)
        .ok()
        .filter(|i| i.opcode != Opcode::Invalid)
}

/// The words of `code` decoded from `entry` on (4 bytes each; a trailing part-word comes out as
/// one undecodable word).
pub fn instructions(code: &[u8], entry: VirtAddr) -> impl Iterator<Item = Word> + '_ {
    code.chunks(INSTRUCTION_LEN)
        .enumerate()
        .map(move |(i, bytes)| Word {
            address: entry.0.wrapping_add((i * INSTRUCTION_LEN) as u64),
            instruction: decode(bytes),
        })
}

/// The target of a direct (PC-relative) branch or call at `address`: `B`, `BL`, `B.cond`,
/// `BC.cond`, `CBZ`, `CBNZ`, `TBZ`, `TBNZ`. `None` for any other instruction.
pub fn branch_target(instr: &Instruction, address: u64) -> Option<u64> {
    let direct = matches!(
        instr.opcode,
        Opcode::B
            | Opcode::BL
            | Opcode::Bcc(_)
            | Opcode::BCcc(_)
            | Opcode::CBZ
            | Opcode::CBNZ
            | Opcode::TBZ
            | Opcode::TBNZ
    );
    if !direct {
        return None;
    }
    instr.operands.iter().find_map(|o| match *o {
        Operand::PCOffset(off) => Some(address.wrapping_add_signed(off)),
        _ => None,
    })
}

/// A return: `RET` (to any register) and the pointer-authenticating `RETAA`, `RETAB` (and the
/// FEAT_PAuth_LR forms).
pub fn is_return(instr: &Instruction) -> bool {
    matches!(
        instr.opcode,
        Opcode::RET
            | Opcode::RETAA
            | Opcode::RETAB
            | Opcode::RETAASPPC
            | Opcode::RETABSPPC
            | Opcode::RETAASPPCR
            | Opcode::RETABSPPCR
    )
}

/// A branch to a register that is not a call or return: `BR` and the authenticating `BRAA`,
/// `BRAAZ`, `BRAB`, `BRABZ` (a jump table or computed goto may land anywhere).
pub fn is_indirect_jump(instr: &Instruction) -> bool {
    matches!(
        instr.opcode,
        Opcode::BR | Opcode::BRAA | Opcode::BRAAZ | Opcode::BRAB | Opcode::BRABZ
    )
}

/// Every return instruction and tail jump (`B` out of `[entry, entry + code.len())`) of one
/// function, and how many words do not decode.
pub fn scan(code: &[u8], entry: VirtAddr) -> CodeScan {
    let end = entry.0.saturating_add(code.len() as u64);
    let mut out = CodeScan::default();
    for w in instructions(code, entry) {
        let Some(instr) = w.instruction else {
            out.invalid += 1;
            continue;
        };
        if is_return(&instr) {
            out.rets.push(VirtAddr(w.address));
        } else if instr.opcode == Opcode::B {
            if let Some(target) = branch_target(&instr, w.address) {
                if target < entry.0 || target >= end {
                    out.tail_jumps.push(VirtAddr(w.address));
                }
            }
        }
    }
    out
}

/// Where `target` (a byte index into `code`, the function from its first byte) falls: on a
/// word that decodes ([`Boundary::Reached`]); 1-3 bytes into a word ([`Boundary::Inside`], the
/// word's start and 4); on a word that does not decode or is cut off
/// ([`Boundary::Undecodable`]). The end of the code is reached when it is a multiple of 4.
pub fn instruction_boundary(code: &[u8], target: usize) -> Boundary {
    let start = target - target % INSTRUCTION_LEN;
    if start != target {
        return if start + INSTRUCTION_LEN <= code.len() {
            Boundary::Inside {
                start,
                len: INSTRUCTION_LEN,
            }
        } else {
            Boundary::Undecodable { at: start }
        };
    }
    if target == code.len() {
        return Boundary::Reached;
    }
    match code.get(target..).and_then(decode) {
        Some(_) => Boundary::Reached,
        None => Boundary::Undecodable { at: target },
    }
}

/// Whether the instruction writes SP: a data-processing result to SP (`sub sp, sp, #N`,
/// `mov sp, x20`, both `RegisterOrSP` 31 as the destination), or a load/store that writes its
/// base register back when that base is SP (`stp x29, x30, [sp, #-16]!`, `ldp ... [sp], #16`;
/// Go's `MOVD.W R30, -N(RSP)`).
pub fn writes_sp(instr: &Instruction) -> bool {
    let to_sp = matches!(instr.operands[0], Operand::RegisterOrSP(_, 31));
    let stores = is_store(instr.opcode);
    let writeback = instr.operands.iter().any(|o| {
        matches!(
            o,
            Operand::RegPreIndex(31, _, true)
                | Operand::RegPostIndex(31, _)
                | Operand::RegPostIndexReg(31, _)
        )
    });
    (to_sp && !stores) || writeback
}

/// Stores, whose first operand is read, not written.
fn is_store(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        STR | STRB
            | STRH
            | STRW
            | STUR
            | STURB
            | STURH
            | STP
            | STNP
            | STTR
            | STTRB
            | STTRH
            | STLR
            | STLRB
            | STLRH
            | STLUR
            | STLURB
            | STLURH
    )
}

/// Whether any instruction that starts in `[entry, until)` may write SP ([`writes_sp`]), or a
/// word there does not decode, or the range runs past the code. `false` for an empty range.
pub fn stack_pointer_written(code: &[u8], entry: VirtAddr, until: VirtAddr) -> bool {
    for w in instructions(code, entry) {
        if w.address >= until.0 {
            return false;
        }
        match w.instruction {
            None => return true,
            Some(i) if writes_sp(&i) => return true,
            Some(_) => {}
        }
    }
    until.0 > entry.0.saturating_add(code.len() as u64)
}

/// Every direct branch or call of `code` (first word at `address`) as `(source, target)`.
pub fn direct_branches(code: &[u8], address: VirtAddr) -> Vec<(u64, u64)> {
    instructions(code, address)
        .filter_map(|w| Some((w.address, branch_target(&w.instruction?, w.address)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Little-endian bytes of A64 words, as `objdump -d` prints them.
    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    // Words from `aarch64-linux-gnu-objdump -d` of a GCC 12 -O2 build and a Go 1.27 arm64 build.
    const STP_FP_LR: u32 = 0xa9bf7bfd; // stp x29, x30, [sp, #-16]!
    const MOV_FP_SP: u32 = 0x910003fd; // mov x29, sp
    const LDP_FP_LR: u32 = 0xa8c17bfd; // ldp x29, x30, [sp], #16
    const RET: u32 = 0xd65f03c0; // ret
    const RETAA: u32 = 0xd65f0bff; // retaa
    const ADD_W0: u32 = 0x0b010000; // add w0, w0, w1
    const B_BACK: u32 = 0x17fffffc; // b .-16
    const B_FAR: u32 = 0x14000100; // b .+0x400
    const GO_LDR_G: u32 = 0xf9400b90; // ldr x16, [x28, #16]
    const GO_CMP: u32 = 0xeb3063ff; // cmp sp, x16
    const GO_STR_LR: u32 = 0xf81e0ffe; // str x30, [sp, #-32]!
    const SUB_SP: u32 = 0xd10083ff; // sub sp, sp, #0x20

    #[test]
    fn finds_returns_and_tail_jumps() {
        let code = words(&[
            STP_FP_LR, MOV_FP_SP, ADD_W0, LDP_FP_LR, RET, RETAA, B_FAR, B_BACK,
        ]);
        let s = scan(&code, VirtAddr(0x1000));
        assert_eq!(s.rets, vec![VirtAddr(0x1010), VirtAddr(0x1014)]);
        // `b .+0x400` leaves the 32-byte function; `b .-16` stays inside.
        assert_eq!(s.tail_jumps, vec![VirtAddr(0x1018)]);
        assert_eq!(s.invalid, 0);
    }

    #[test]
    fn boundaries_are_decodable_words() {
        let code = words(&[STP_FP_LR, MOV_FP_SP, RET]);
        assert_eq!(instruction_boundary(&code, 0), Boundary::Reached);
        assert_eq!(instruction_boundary(&code, 4), Boundary::Reached);
        assert_eq!(
            instruction_boundary(&code, 6),
            Boundary::Inside { start: 4, len: 4 }
        );
        assert_eq!(instruction_boundary(&code, 12), Boundary::Reached);
        // A word no A64 encoding uses (all zeros is `udf #0`, which decodes).
        let mut bad = code.clone();
        bad[4..8].copy_from_slice(&0xffff_ffffu32.to_le_bytes());
        assert_eq!(
            instruction_boundary(&bad, 4),
            Boundary::Undecodable { at: 4 }
        );
        assert_eq!(
            instruction_boundary(&code[..6], 4),
            Boundary::Undecodable { at: 4 }
        );
    }

    #[test]
    fn stack_pointer_writes_are_seen() {
        let code = words(&[GO_LDR_G, GO_CMP, 0x54000109, GO_STR_LR, SUB_SP, RET]);
        let at = |o: u64| VirtAddr(0x1000 + o);
        // The stack check loads, compares and branches: nothing written.
        assert!(!stack_pointer_written(&code, at(0), at(12)));
        // `str x30, [sp, #-32]!` writes SP back.
        assert!(stack_pointer_written(&code, at(0), at(16)));
        // `sub sp, sp, #0x20`, `stp ... [sp, #-16]!`, `ldp ... [sp], #16`.
        for w in [SUB_SP, STP_FP_LR, LDP_FP_LR] {
            assert!(writes_sp(&decode(&w.to_le_bytes()).unwrap()), "{w:#x}");
        }
        // `mov x29, sp` reads it; `str x0, [sp, #8]` does not write it back.
        for w in [MOV_FP_SP, 0xf90007e0] {
            assert!(!writes_sp(&decode(&w.to_le_bytes()).unwrap()), "{w:#x}");
        }
        // A range past the code is not vouched for.
        assert!(stack_pointer_written(&code[..8], at(0), at(12)));
    }

    #[test]
    fn direct_branches_are_pc_relative() {
        let code = words(&[ADD_W0, B_FAR, 0x94000002, 0x34000040, RET]);
        assert_eq!(
            direct_branches(&code, VirtAddr(0x2000)),
            // b .+0x400; bl .+8; cbz w0, .+8
            vec![(0x2004, 0x2404), (0x2008, 0x2010), (0x200c, 0x2014)]
        );
    }

    proptest! {
        /// Arbitrary bytes: no panic; every return or tail jump is a 4-aligned address of a
        /// whole word inside the function; a boundary answer stays inside the code.
        #[test]
        fn arbitrary_bytes_are_answered_within_bounds(code in proptest::collection::vec(any::<u8>(), 0..96), target in 0usize..100, entry in (0u64..1 << 40).prop_map(|e| e * 4)) {
            let s = scan(&code, VirtAddr(entry));
            for a in s.rets.iter().chain(&s.tail_jumps) {
                prop_assert!(a.0 >= entry && (a.0 - entry) % 4 == 0 && a.0 - entry + 4 <= code.len() as u64);
            }
            match instruction_boundary(&code, target) {
                Boundary::Reached => prop_assert!(target % 4 == 0 && target <= code.len()),
                Boundary::Inside { start, len } => prop_assert!(start % 4 == 0 && len == 4 && start < target && target < start + 4 && start + 4 <= code.len()),
                Boundary::Undecodable { at } => prop_assert!(at % 4 == 0 && at <= target),
            }
            let _ = stack_pointer_written(&code, VirtAddr(entry), VirtAddr(entry + target as u64));
            for (from, _) in direct_branches(&code, VirtAddr(entry)) {
                prop_assert!(from >= entry && (from - entry) % 4 == 0);
            }
        }

        /// Every 32-bit word: decoding and printing it never panics.
        #[test]
        fn any_word_decodes_or_not_without_panic(w in any::<u32>()) {
            if let Some(i) = decode(&w.to_le_bytes()) {
                let _ = i.to_string();
            }
        }
    }
}
