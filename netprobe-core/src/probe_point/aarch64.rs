//! The cheapest equivalent entry point on aarch64: the rules of `mod.rs`, with the kernel's arm64
//! uprobes as `crate::arch::aarch64`'s `uprobe_handling.rs` describes them. The kernel simulates
//! only branches, `ADR`/`ADRP` and (6.13+) `NOP`; it single-steps everything a function starts
//! with in practice (`stp x29, x30, [sp, #-N]!` from GCC and Clang, `ldr x16, [x28, #16]` from
//! Go, `paciasp` and `bti c` from hardened builds). So a probe moves only past `NOP` and `BTI`
//! (they touch no register and no memory: rules 3 and 4 hold for them whatever the probe reads)
//! onto a simulated instruction right after them (`-fpatchable-function-entry` NOPs before a
//! branch or `ADRP`, say), and only when no branch of the function lands in between and nothing
//! in it is undecodable or an indirect jump (`BR`: rules 1 and 2).

use super::decision::{EntryChoice, Kept, PointInstruction};
use super::{not_an_instruction, FetchedState, KernelHandling};
use crate::addr::VirtAddr;
use crate::arch::aarch64;

/// Rule 3 on aarch64: `NOP` and the `BTI` hints.
fn skippable(instr: &aarch64::Instruction) -> bool {
    aarch64::is_nop(instr) || aarch64::is_bti(instr)
}

/// [`super::cheapest_entry`] for aarch64 code.
pub(super) fn cheapest_entry(code: &[u8], entry: u64, fetched: &FetchedState) -> EntryChoice {
    let Some(first) = usize::try_from(entry)
        .ok()
        .filter(|e| e % aarch64::INSTRUCTION_LEN == 0)
        .and_then(|e| code.get(e..))
        .and_then(aarch64::decode)
    else {
        return not_an_instruction(entry);
    };
    let planned = PointInstruction::of_aarch64(entry, &first);
    let keep = |why: Kept| EntryChoice {
        chosen: planned.clone(),
        planned: planned.clone(),
        kept: Some(why),
    };
    if planned.handling != KernelHandling::SingleStepped {
        return keep(Kept::AlreadyCheap);
    }
    if fetched.opaque {
        return keep(Kept::OpaqueFetch);
    }
    let rest = code.get(entry as usize..).unwrap_or(&[]);
    let mut chosen = None;
    for w in aarch64::instructions(rest, VirtAddr(entry)) {
        let Some(instr) = w.instruction else {
            return keep(Kept::Undecodable { at: w.address });
        };
        let here = PointInstruction::of_aarch64(w.address, &instr);
        let first = w.address == entry;
        if !first && here.handling.cheap() {
            chosen = Some(here);
            break;
        }
        if !skippable(&instr) {
            return keep(if first {
                Kept::EntryNotSkippable { what: here.text }
            } else {
                Kept::NotSkippable {
                    at: Some(w.address),
                    what: here.text,
                }
            });
        }
    }
    let Some(chosen) = chosen else {
        return keep(Kept::NotSkippable {
            at: None,
            what: String::new(),
        });
    };
    for w in aarch64::instructions(code, VirtAddr(0)) {
        let Some(instr) = w.instruction else {
            return keep(Kept::Undecodable { at: w.address });
        };
        if aarch64::is_indirect_jump(&instr) {
            return keep(Kept::IndirectJump { at: w.address });
        }
        if let Some(target) = aarch64::branch_target(&instr, w.address) {
            if target > entry && target <= chosen.offset {
                return keep(Kept::BranchTarget {
                    target,
                    from: w.address,
                });
            }
        }
    }
    EntryChoice {
        chosen,
        planned,
        kept: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Register;
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
                prop_assert!(c.chosen.offset % 4 == 0 && (c.chosen.offset as usize) + 4 <= code.len());
            } else {
                prop_assert_eq!(c.chosen.offset, entry);
            }
        }
    }
}
