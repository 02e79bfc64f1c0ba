//! The rules of the module documentation applied to one architecture's instructions: the walk
//! along the run from the planned point (rules 3 and 4, then the first cheap instruction), then
//! the sweep of the whole function (rules 1 and 2). Each architecture turns its decoder's
//! instructions into [`RunStep`]s and [`FlowStep`]s (`x86_64.rs`, `aarch64.rs`); the decisions
//! are made here, once.

use super::decision::{EntryChoice, Kept, PointInstruction};
use super::{FetchedState, KernelHandling};

/// One instruction of the straight-line run from the planned point, as rules 3 and 4 see it.
pub(super) enum RunStep {
    /// Bytes at `at` (a byte index into the function) that do not decode.
    Undecodable { at: u64 },
    /// A decoded instruction, and why a probe may not move past it (`None`: it may).
    Instruction {
        here: PointInstruction,
        blocks: Option<Blocker>,
    },
}

/// Why a probe may not move past an instruction of the run.
pub(super) enum Blocker {
    /// It is not on the architecture's list of harmless instructions (rule 3).
    NotSkippable,
    /// It writes what the probe reads, the stack pointer or the frame pointer (rule 4).
    Writes(Kept),
}

/// One instruction of the whole function, as rules 1 and 2 see it.
pub(super) struct FlowStep {
    /// Byte index into the function.
    pub at: u64,
    /// Whether the bytes at `at` decode.
    pub decoded: bool,
    /// An indirect jump (x86-64 `jmp rax`, aarch64 `BR`): it may land anywhere.
    pub indirect_jump: bool,
    /// Where a direct branch or call lands, as a byte index into the function.
    pub direct_target: Option<u64>,
}

/// The entry point that reads no instruction: kept, for a planned point that does not decode.
fn not_an_instruction(entry: u64) -> EntryChoice {
    let planned = PointInstruction {
        offset: entry,
        mnemonic: "?".into(),
        text: "?".into(),
        handling: KernelHandling::Refused,
    };
    EntryChoice {
        chosen: planned.clone(),
        planned,
        kept: Some(Kept::NotAnInstruction),
    }
}

/// The cheapest entry point equivalent to `entry`: `planned` is the instruction there (`None`:
/// it does not decode), `run` the instructions from it on, `function` the whole function's from
/// its first byte. Both are iterated lazily and only as far as a decision needs: most planned
/// instructions are already cheap, and most runs end at once (a store, `sub rsp`), so the
/// function is then never decoded whole (whole-program sessions probe tens of thousands).
pub(super) fn cheapest_entry_over(
    entry: u64,
    planned: Option<PointInstruction>,
    fetched: &FetchedState,
    run: impl Iterator<Item = RunStep>,
    function: impl Iterator<Item = FlowStep>,
) -> EntryChoice {
    let Some(planned) = planned else {
        return not_an_instruction(entry);
    };
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
    // Rules 3 and 4 along the run, up to the first cheap instruction after the planned one.
    let mut chosen = None;
    for step in run {
        let (here, blocks) = match step {
            RunStep::Undecodable { at } => return keep(Kept::Undecodable { at }),
            RunStep::Instruction { here, blocks } => (here, blocks),
        };
        let first = here.offset == entry;
        if !first && here.handling.cheap() {
            chosen = Some(here);
            break;
        }
        match blocks {
            None => {}
            Some(Blocker::NotSkippable) if first => {
                return keep(Kept::EntryNotSkippable { what: here.text })
            }
            Some(Blocker::NotSkippable) => {
                return keep(Kept::NotSkippable {
                    at: Some(here.offset),
                    what: here.text,
                })
            }
            Some(Blocker::Writes(why)) => return keep(why),
        }
    }
    let Some(chosen) = chosen else {
        return keep(Kept::NotSkippable {
            at: None,
            what: String::new(),
        });
    };
    // Rules 1 and 2 over the whole function: the entry is one of its instructions, nothing is
    // undecodable, no indirect jump, no direct branch into (entry, chosen].
    let mut boundary = false;
    for step in function {
        boundary |= step.at == entry;
        if !step.decoded {
            return keep(Kept::Undecodable { at: step.at });
        }
        if step.indirect_jump {
            return keep(Kept::IndirectJump { at: step.at });
        }
        if let Some(target) = step.direct_target {
            if target > entry && target <= chosen.offset {
                return keep(Kept::BranchTarget {
                    target,
                    from: step.at,
                });
            }
        }
    }
    if !boundary {
        return not_an_instruction(entry);
    }
    EntryChoice {
        chosen,
        planned,
        kept: None,
    }
}
