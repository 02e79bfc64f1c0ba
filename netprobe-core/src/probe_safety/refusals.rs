//! Why the gate refuses a probe, and the one-line texts that say it (naming the function and
//! the offset around it).

use super::units::CodeUnit;
use crate::addr::{FileOffset, Rva};
use crate::arch::Arch;
use std::fmt;

/// Why the gate refuses a probe. `Display` is the reason, for a one-line message that names the
/// function and the offset around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The file cannot be read as ELF or PE (or at all).
    Unreadable(String),
    /// No executable segment (ELF `PT_LOAD` with `PF_X`, file-backed part) or executable section
    /// (PE `IMAGE_SCN_MEM_EXECUTE`) holds the offset.
    NotExecutable { format: &'static str },
    /// No function of the file's tables starts at the planned entry.
    NoFunctionAtEntry { entry: FileOffset },
    /// The offset lies outside the function's extent.
    OutsideFunction { unit: CodeUnit },
    /// Decoding the function from its start gives an instruction that covers the offset.
    NotInstructionBoundary {
        unit: CodeUnit,
        instruction: FileOffset,
        len: usize,
    },
    /// Decoding from the function's start meets bytes that are no instruction of the file's
    /// architecture before it reaches the offset (aarch64: the word at the offset itself).
    Undecodable {
        unit: CodeUnit,
        at: FileOffset,
        arch: Arch,
    },
    /// Go: the pclntab maps the probe's address to another function (or none).
    PclntabMismatch {
        address: u64,
        planned: String,
        found: Option<String>,
    },
    /// Go, .NET: the bytes between the previous function's end and the entry are not the
    /// linker's padding, so the entry is not where a function's code begins.
    EntryNotAfterPadding {
        unit: CodeUnit,
        at: FileOffset,
        byte: u8,
    },
    /// Go: most entries of the whole table are not preceded by the linker's padding: the table
    /// is read with a wrong text start (or is corrupt), so none of its addresses is trusted.
    PclntabMisaligned { failed: usize, checked: usize },
    /// .NET: no RUNTIME_FUNCTION begins at the method's entry.
    NoRuntimeFunction { rva: Rva },
    /// ELF: the symbol's address lies outside the section it is defined in, or that section is
    /// not executable.
    SymbolOutsideSection {
        unit: CodeUnit,
        section: String,
        executable: bool,
    },
    /// A uretprobe that is not on a function's first byte.
    UretprobeNotAtEntry { unit: CodeUnit },
    /// The file is of a machine netprobe has no instruction rules for (the whole reason, naming
    /// the machine and the fix).
    UnsupportedMachine(String),
    /// aarch64: the kernel's uprobes reject the instruction at the offset
    /// (`arch/arm64/kernel/probes/decode-insn.c`: `INSN_REJECTED`), `why` says which kind.
    KernelRejects {
        unit: CodeUnit,
        at: FileOffset,
        instruction: String,
        why: &'static str,
    },
    /// aarch64: the offset lies between a load-exclusive at `load` and its store-exclusive: the
    /// breakpoint clears the exclusive monitor, so the store fails on every retry.
    InsideExclusiveSequence {
        unit: CodeUnit,
        at: FileOffset,
        load: FileOffset,
    },
}

impl Refusal {
    /// Whether `--unsafe-offset` may override this refusal of a raw `IMAGE:0xOFFSET` probe: the
    /// checks the user may know better than the tables (the offset's instruction boundary, its
    /// segment, a uretprobe's position). Refusals of planned probes are never overridden.
    pub fn overridable(&self) -> bool {
        matches!(
            self,
            Refusal::NotExecutable { .. }
                | Refusal::NotInstructionBoundary { .. }
                | Refusal::Undecodable { .. }
                | Refusal::UretprobeNotAtEntry { .. }
                | Refusal::OutsideFunction { .. }
        )
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unreadable(e) => write!(f, "the file cannot be checked: {e}"),
            Refusal::NotExecutable { format } => write!(
                f,
                "it lies in no executable {format} of the file, so it is not code"
            ),
            Refusal::NoFunctionAtEntry { entry } => write!(
                f,
                "no function of the file's tables starts at the planned entry {entry}"
            ),
            Refusal::OutsideFunction { unit } => match unit.size {
                Some(z) => write!(
                    f,
                    "it lies outside {} (file offsets {}..{:#x}, from the {})",
                    unit.name,
                    unit.start,
                    unit.start.0.saturating_add(z),
                    unit.source.label()
                ),
                None => write!(f, "it lies before {} ({})", unit.name, unit.start),
            },
            Refusal::NotInstructionBoundary {
                unit,
                instruction,
                len,
            } => write!(
                f,
                "it is not an instruction boundary: decoding {} from its start ({}) gives a {len}-byte instruction at {} ({}) that covers it",
                unit.name,
                unit.start,
                instruction,
                unit.at(*instruction)
            ),
            Refusal::Undecodable { unit, at, arch } => write!(
                f,
                "the bytes at {at} ({}) do not decode as {} instructions, so it cannot be shown to be an instruction boundary",
                unit.at(*at),
                arch
            ),
            Refusal::PclntabMismatch {
                address,
                planned,
                found,
            } => match found {
                Some(other) => write!(
                    f,
                    "the Go pclntab maps its address {address:#x} to {other}, not to {planned}"
                ),
                None => write!(
                    f,
                    "the Go pclntab maps its address {address:#x} to no function (planned for {planned})"
                ),
            },
            Refusal::EntryNotAfterPadding { unit, at, byte } => write!(
                f,
                "the {} says {} starts at {}, but the byte {byte:#04x} at {at} before it is neither the previous function's code nor the linker's padding, so that entry is not where code begins",
                unit.source.label(),
                unit.name,
                unit.start
            ),
            Refusal::PclntabMisaligned { failed, checked } => write!(
                f,
                "the Go pclntab's entries do not line up with the code ({failed} of {checked} function entries are not preceded by the linker's padding), so its text start is wrong or the table is corrupt, and none of its addresses is trusted"
            ),
            Refusal::NoRuntimeFunction { rva } => write!(
                f,
                "no RUNTIME_FUNCTION of the ReadyToRun image begins at the method's entry (RVA {rva})"
            ),
            Refusal::SymbolOutsideSection {
                unit,
                section,
                executable,
            } => {
                if *executable {
                    write!(
                        f,
                        "the symbol {} at {:#x} lies outside its own section {section}",
                        unit.name, unit.address
                    )
                } else {
                    write!(
                        f,
                        "the symbol {} lies in section {section}, which is not executable",
                        unit.name
                    )
                }
            }
            Refusal::UnsupportedMachine(why) => write!(f, "{why}"),
            Refusal::KernelRejects {
                unit,
                at,
                instruction,
                why,
            } => write!(
                f,
                "the instruction there, `{instruction}` at {at} ({}), is {why}: the kernel's arm64 uprobes reject it (arch/arm64/kernel/probes/decode-insn.c), so no probe can go there; probe the instruction before or after it",
                unit.at(*at)
            ),
            Refusal::InsideExclusiveSequence { unit, at, load } => write!(
                f,
                "it lies inside the exclusive sequence that starts with the load-exclusive at {load} ({}): a breakpoint at {at} clears the exclusive monitor, so the store-exclusive would fail on every retry and the program would spin forever; probe before the load-exclusive or after the store-exclusive",
                unit.at(*load)
            ),
            Refusal::UretprobeNotAtEntry { unit } => write!(
                f,
                "a uretprobe must sit on a function's first byte (it replaces the return address at the top of the stack when it fires), and {} is not",
                unit.at(unit.start)
            ),
        }
    }
}
