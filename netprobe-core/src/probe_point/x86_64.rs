//! x86-64 instructions as the rules see them: rule 3's allow-list is `skippable.rs`, rule 4
//! reads the registers each instruction writes (iced-x86's `InstructionInfoFactory`), and the
//! kernel's handling is `crate::arch::x86_64`'s `uprobe_handling.rs`.

use super::decision::{EntryChoice, Kept, PointInstruction};
use super::skippable::{iced_register, skippable};
use super::walk::{cheapest_entry_over, Blocker, FlowStep, RunStep};
use super::FetchedState;
use crate::addr::VirtAddr;
use crate::arch::x86_64 as x86;
use iced_x86::{FlowControl, Instruction, InstructionInfoFactory, OpAccess, OpKind};

/// [`super::cheapest_entry`] for x86-64 code.
pub(super) fn cheapest_entry(code: &[u8], entry: u64, fetched: &FetchedState) -> EntryChoice {
    let rest = usize::try_from(entry)
        .ok()
        .and_then(|e| code.get(e..))
        .unwrap_or(&[]);
    let planned = x86::instructions(rest, VirtAddr(entry))
        .next()
        .filter(|i| !i.is_invalid())
        .map(|i| PointInstruction::of_x86_64(&i, code));
    let forbidden: Vec<iced_x86::Register> = fetched
        .registers
        .iter()
        .map(|&r| iced_register(r))
        .collect();
    let mut factory = InstructionInfoFactory::new();
    let run = x86::instructions(rest, VirtAddr(entry)).map(|instr| {
        if instr.is_invalid() {
            return RunStep::Undecodable { at: instr.ip() };
        }
        let blocks = if skippable(&instr) {
            writes(&mut factory, &instr, &forbidden, fetched).map(Blocker::Writes)
        } else {
            Some(Blocker::NotSkippable)
        };
        RunStep::Instruction {
            here: PointInstruction::of_x86_64(&instr, code),
            blocks,
        }
    });
    let function = x86::instructions(code, VirtAddr(0)).map(|i| FlowStep {
        at: i.ip(),
        decoded: !i.is_invalid(),
        indirect_jump: i.flow_control() == FlowControl::IndirectBranch,
        direct_target: direct_target(&i),
    });
    cheapest_entry_over(entry, planned, fetched, run, function)
}

/// Rule 4: what `instr` writes that the probe must see unchanged, RSP or RBP first, then the
/// first register the probe fetches (`forbidden`, in the order of `fetched.registers`).
fn writes(
    factory: &mut InstructionInfoFactory,
    instr: &Instruction,
    forbidden: &[iced_x86::Register],
    fetched: &FetchedState,
) -> Option<Kept> {
    for used in factory.info(instr).used_registers() {
        if matches!(
            used.access(),
            OpAccess::Read | OpAccess::CondRead | OpAccess::None | OpAccess::NoMemAccess
        ) {
            continue;
        }
        let full = used.register().full_register();
        if full == iced_x86::Register::RSP || full == iced_x86::Register::RBP {
            return Some(Kept::WritesStackOrFrame { at: instr.ip() });
        }
        if let Some(pos) = forbidden.iter().position(|r| *r == full) {
            return Some(Kept::WritesFetched {
                at: instr.ip(),
                register: fetched.registers[pos],
            });
        }
    }
    None
}

/// Where a direct (near) branch, jump or call lands.
fn direct_target(i: &Instruction) -> Option<u64> {
    let branches = matches!(
        i.flow_control(),
        FlowControl::UnconditionalBranch
            | FlowControl::ConditionalBranch
            | FlowControl::Call
            | FlowControl::XbeginXabortXend
    );
    let near = matches!(
        i.op0_kind(),
        OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
    );
    (branches && near).then(|| i.near_branch_target())
}
