//! The cheapest equivalent entry point on aarch64: the rules of `mod.rs`, with the kernel's arm64
//! uprobes as `crate::arch::aarch64`'s `uprobe_handling.rs` describes them. The kernel simulates
//! only branches, `ADR`/`ADRP` and (6.13+) `NOP`; it single-steps everything a function starts
//! with in practice (`stp x29, x30, [sp, #-N]!` from GCC and Clang, `ldr x16, [x28, #16]` from
//! Go, `paciasp` and `bti c` from hardened builds). So a probe moves only past `NOP` and `BTI`
//! (they touch no register and no memory: rules 3 and 4 hold for them whatever the probe reads)
//! onto a simulated instruction right after them (`-fpatchable-function-entry` NOPs before a
//! branch or `ADRP`, say), and only when no branch of the function lands in between and nothing
//! in it is undecodable or an indirect jump (`BR`: rules 1 and 2).

use super::decision::{EntryChoice, PointInstruction};
use super::walk::{cheapest_entry_over, Blocker, FlowStep, RunStep};
use super::FetchedState;
use crate::addr::VirtAddr;
use crate::arch::aarch64;

/// Rule 3 on aarch64: `NOP` and the `BTI` hints. They write nothing, so rule 4 holds for them.
fn skippable(instr: &aarch64::Instruction) -> bool {
    aarch64::is_nop(instr) || aarch64::is_bti(instr)
}

/// [`super::cheapest_entry`] for aarch64 code: a planned point off the 4-byte word grid is no
/// instruction.
pub(super) fn cheapest_entry(code: &[u8], entry: u64, fetched: &FetchedState) -> EntryChoice {
    let rest = usize::try_from(entry)
        .ok()
        .filter(|e| e % aarch64::INSTRUCTION_LEN == 0)
        .and_then(|e| code.get(e..));
    let planned = rest
        .and_then(aarch64::decode)
        .map(|first| PointInstruction::of_aarch64(entry, &first));
    let run =
        aarch64::instructions(rest.unwrap_or(&[]), VirtAddr(entry)).map(|w| match w.instruction {
            None => RunStep::Undecodable { at: w.address },
            Some(instr) => RunStep::Instruction {
                here: PointInstruction::of_aarch64(w.address, &instr),
                blocks: (!skippable(&instr)).then_some(Blocker::NotSkippable),
            },
        });
    let function = aarch64::instructions(code, VirtAddr(0)).map(|w| FlowStep {
        at: w.address,
        decoded: w.instruction.is_some(),
        indirect_jump: w
            .instruction
            .as_ref()
            .is_some_and(aarch64::is_indirect_jump),
        direct_target: w
            .instruction
            .as_ref()
            .and_then(|i| aarch64::branch_target(i, w.address)),
    });
    cheapest_entry_over(entry, planned, fetched, run, function)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Register;
    use crate::probe_point::{Kept, KernelHandling};
    use proptest::prelude::*;

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
    const NOP: u32 = 0xd503201f;
    const BTI_C: u32 = 0xd503245f;
    const ADRP: u32 = 0xb0000080; // adrp x0, ...
    const STP: u32 = 0xa9bf7bfd; // stp x29, x30, [sp, #-16]!
    const RET: u32 = 0xd65f03c0;

    #[test]
    fn moves_past_nops_to_a_simulated_instruction() {
        let code = words(&[BTI_C, ADRP, STP, RET]);
        let c = cheapest_entry(&code, 0, &FetchedState::default());
        assert_eq!(c.kept, None);
        assert_eq!(c.chosen.offset, 4);
        assert_eq!(c.chosen.mnemonic, "adrp");
        assert_eq!(c.chosen.handling, KernelHandling::Emulated);
        assert_eq!(c.planned.handling, KernelHandling::SingleStepped);
        // A NOP after the BTI is simulated (Linux 6.13+) and chosen itself.
        let c = cheapest_entry(&words(&[BTI_C, NOP, STP, RET]), 0, &FetchedState::default());
        assert_eq!((c.chosen.offset, c.chosen.text.as_str()), (4, "nop"));
    }

    #[test]
    fn a_frame_push_keeps_the_entry() {
        let code = words(&[STP, ADRP, RET]);
        let c = cheapest_entry(&code, 0, &FetchedState::default());
        assert_eq!(c.chosen.offset, 0);
        assert!(
            matches!(c.kept, Some(Kept::EntryNotSkippable { .. })),
            "{c:?}"
        );
        // A simulated first instruction stays.
        let c = cheapest_entry(&words(&[NOP, RET]), 0, &FetchedState::default());
        assert_eq!(c.kept, Some(Kept::AlreadyCheap));
        // An offset off the word grid is no instruction.
        let c = cheapest_entry(&words(&[NOP, RET]), 2, &FetchedState::default());
        assert_eq!(c.kept, Some(Kept::NotAnInstruction));
    }

    #[test]
    fn a_branch_into_the_run_keeps_the_entry() {
        // bti c; adrp; add; cbz w0, .-8 (to the adrp); ret
        let code = words(&[BTI_C, ADRP, 0x0b010000, 0x34ffffc0, RET]);
        let c = cheapest_entry(
            &code,
            0,
            &FetchedState {
                registers: vec![Register::Di],
                opaque: false,
            },
        );
        assert_eq!(
            c.kept,
            Some(Kept::BranchTarget {
                target: 4,
                from: 12
            })
        );
    }

    proptest! {
        /// Arbitrary bytes: never a panic, and the point chosen is a 4-aligned decodable word
        /// at or after the planned one, inside the code.
        #[test]
        fn arbitrary_code_gives_a_word_boundary(code in proptest::collection::vec(any::<u8>(), 0..64), entry in 0u64..64) {
            let c = cheapest_entry(&code, entry, &FetchedState::default());
            prop_assert!(c.chosen.offset >= entry);
            if c.kept.is_none() {
                prop_assert!(c.chosen.offset.is_multiple_of(4) && (c.chosen.offset as usize) + 4 <= code.len());
            } else {
                prop_assert_eq!(c.chosen.offset, entry);
            }
        }
    }
}
