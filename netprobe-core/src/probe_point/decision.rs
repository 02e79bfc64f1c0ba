//! The decision for one entry probe: the instruction chosen, the one planned, and why a
//! planned point was kept.

use crate::abi::Register;
use crate::arch::x86_64::kernel_handling;
use crate::arch::{aarch64, KernelHandling};
use iced_x86::{Formatter, Instruction, IntelFormatter};
use serde::Serialize;
use std::fmt;
/// An instruction of the function, for reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct PointInstruction {
    /// Byte index from the function's first byte.
    pub offset: u64,
    /// Its mnemonic (`push`, `sub`, `endbr64`; aarch64 `stp`, `nop`).
    pub mnemonic: String,
    /// The whole instruction, x86-64 in Intel syntax (`push rbx`), aarch64 as yaxpeax-arm
    /// prints it (`stp x29, x30, [sp, #-0x10]!`).
    pub text: String,
    pub handling: KernelHandling,
}

impl PointInstruction {
    /// An x86-64 instruction decoded from `code` (the function from its first byte).
    pub(super) fn of_x86_64(instr: &Instruction, code: &[u8]) -> PointInstruction {
        let at = instr.ip() as usize;
        let bytes = code.get(at..).unwrap_or(&[]);
        let mut text = String::new();
        let mut fmt = IntelFormatter::new();
        fmt.options_mut().set_space_after_operand_separator(true);
        fmt.format(instr, &mut text);
        let mut mnemonic = String::new();
        fmt.format_mnemonic(instr, &mut mnemonic);
        PointInstruction {
            offset: instr.ip(),
            mnemonic,
            text,
            handling: kernel_handling(instr, bytes),
        }
    }

    /// An aarch64 instruction at byte index `offset` of the function.
    pub(super) fn of_aarch64(offset: u64, instr: &aarch64::Instruction) -> PointInstruction {
        let text = instr.to_string();
        PointInstruction {
            offset,
            mnemonic: text.split_whitespace().next().unwrap_or("").to_string(),
            text,
            handling: aarch64::kernel_handling(instr),
        }
    }

    /// `+0x4 (push, emulated: ~1.5 µs/hit)`.
    pub fn describe(&self) -> String {
        format!(
            "+{:#x} ({}, {}: {})",
            self.offset,
            self.mnemonic,
            self.handling.label(),
            self.handling.typical_cost()
        )
    }
}

/// Why an entry probe stays where it was planned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Kept {
    /// The planned instruction is already emulated or optimized (or the kernel refuses it, which
    /// no move repairs).
    AlreadyCheap,
    /// The run of skippable instructions ends (at `at`, with `what`, or at the function's end)
    /// before any instruction the kernel emulates.
    NotSkippable { at: Option<u64>, what: String },
    /// The planned instruction itself (`what`) is one a probe may not skip.
    EntryNotSkippable { what: String },
    /// The instruction at `target` inside the run is the target of the branch at `from`.
    BranchTarget { target: u64, from: u64 },
    /// The instruction at `target` inside the run is the target of a branch at file offset
    /// `from_file_offset`, outside the function (hand-written code that continues inside another
    /// function).
    BranchFromOutside { target: u64, from_file_offset: u64 },
    /// An indirect jump at `at`: it may land anywhere in the function.
    IndirectJump { at: u64 },
    /// Bytes at `at` do not decode (or the function's bytes are cut off).
    Undecodable { at: u64 },
    /// A skipped instruction at `at` writes `register`, which the probe reads.
    WritesFetched { at: u64, register: Register },
    /// A skipped instruction at `at` writes RSP or RBP (stack arguments, the return address and
    /// frame-pointer stack walks depend on them).
    WritesStackOrFrame { at: u64 },
    /// The probe reads something netprobe cannot analyse (a user's raw fetch-arg text).
    OpaqueFetch,
    /// The function's extent is unknown (no size in its table), so it cannot be decoded whole.
    UnknownExtent,
    /// The planned entry is not an instruction of the function.
    NotAnInstruction,
}

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kept::AlreadyCheap => write!(f, "its first instruction is already cheap"),
            Kept::NotSkippable { at: Some(at), what } => write!(
                f,
                "no instruction the kernel emulates comes before +{at:#x} ({what}), which a probe may not skip"
            ),
            Kept::EntryNotSkippable { what } => write!(
                f,
                "the probe may not skip {what} (only register-only instructions are skipped)"
            ),
            Kept::NotSkippable { at: None, .. } => {
                write!(f, "no emulated instruction before the function ends")
            }
            Kept::BranchTarget { target, from } => write!(
                f,
                "+{target:#x} is the target of the branch at +{from:#x}, so a moved probe would fire more than once per call"
            ),
            Kept::BranchFromOutside {
                target,
                from_file_offset,
            } => write!(
                f,
                "+{target:#x} is the target of a branch at file offset {from_file_offset:#x}, outside the function"
            ),
            Kept::IndirectJump { at } => write!(
                f,
                "the indirect jump at +{at:#x} may land anywhere in the function"
            ),
            Kept::Undecodable { at } => write!(f, "the bytes at +{at:#x} do not decode"),
            Kept::WritesFetched { at, register } => write!(
                f,
                "the instruction at +{at:#x} writes %{register}, which the probe reads"
            ),
            Kept::WritesStackOrFrame { at } => write!(
                f,
                "the instruction at +{at:#x} writes the stack or frame pointer"
            ),
            Kept::OpaqueFetch => write!(f, "the probe reads a raw fetch-arg"),
            Kept::UnknownExtent => write!(f, "the function's size is unknown"),
            Kept::NotAnInstruction => write!(f, "the entry is not an instruction boundary"),
        }
    }
}

/// The decision for one entry probe.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct EntryChoice {
    /// Where the probe goes (byte index from the function's first byte).
    pub chosen: PointInstruction,
    /// Where it was planned (the function's first byte, or Go's post-prologue point).
    pub planned: PointInstruction,
    /// Why the planned point was kept (`None` when the probe moved).
    pub kept: Option<Kept>,
}

impl EntryChoice {
    /// Whether the probe moved.
    pub fn moved(&self) -> bool {
        self.chosen.offset != self.planned.offset
    }
}
