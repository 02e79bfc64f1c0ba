//! The instruction-set architectures netprobe knows, and how an image says which one it is.
//!
//! Every rule that depends on the machine (instruction decoding for the probe-safety gate,
//! return sites, argument registers, the Go stack-check prologue, register names in
//! `uprobe_events` fetch arguments, the profiler's sampled registers) is chosen by an [`Arch`]
//! read from the image itself, never from the host netprobe runs on: an aarch64 binary planned
//! on an x86-64 host gets aarch64 rules. An image of any other machine is refused, not guessed.

pub mod aarch64;
mod boundary;
mod code;
mod decoder;
mod relocation;
mod uprobe_handling;
pub mod x86_64;

pub use boundary::Boundary;
pub use code::CodeScan;
pub use relocation::{R_AARCH64_RELATIVE, R_X86_64_RELATIVE};
pub use uprobe_handling::KernelHandling;

use serde::Serialize;

/// `EM_X86_64` (System V gABI, `e_machine`; elf.h).
pub const EM_X86_64: u16 = 62;
/// `EM_AARCH64` (ELF for the Arm 64-bit Architecture, AAELF64 §5.1; elf.h).
pub const EM_AARCH64: u16 = 183;

/// The one-line refusal of an ELF file whose `e_machine` netprobe has no rules for (naming the
/// machine and what to do instead).
pub fn unsupported_elf_machine(e_machine: u16) -> String {
    let name = match e_machine {
        3 => "i386 (EM_386)".to_string(),
        8 => "MIPS (EM_MIPS)".to_string(),
        20 => "PowerPC (EM_PPC)".to_string(),
        21 => "PowerPC64 (EM_PPC64)".to_string(),
        22 => "s390 (EM_S390)".to_string(),
        40 => "32-bit Arm (EM_ARM)".to_string(),
        243 => "RISC-V (EM_RISCV)".to_string(),
        258 => "LoongArch (EM_LOONGARCH)".to_string(),
        m => format!("e_machine {m}"),
    };
    format!(
        "its machine is {name}, and netprobe has instruction rules for x86_64 and aarch64 only, so it cannot check where a probe may go; probe an x86_64 or aarch64 build of the program"
    )
}

/// An instruction-set architecture netprobe has rules for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// x86-64 (AMD64).
    X86_64,
    /// AArch64 (A64 instruction set; Linux `arm64`, Go `arm64`, .NET `linux-arm64`).
    Aarch64,
}

impl Arch {
    /// The architecture this netprobe was built for (where live probes go); `None` on any other.
    pub const fn host() -> Option<Arch> {
        if cfg!(target_arch = "x86_64") {
            Some(Arch::X86_64)
        } else if cfg!(target_arch = "aarch64") {
            Some(Arch::Aarch64)
        } else {
            None
        }
    }

    /// The architecture of an ELF file's `e_machine`; `None` for a machine netprobe has no rules
    /// for.
    pub const fn of_elf_machine(e_machine: u16) -> Option<Arch> {
        match e_machine {
            EM_X86_64 => Some(Arch::X86_64),
            EM_AARCH64 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The architecture of a PE/COFF `Machine` with any .NET OS override already removed
    /// (`PeImage::machine`: `IMAGE_FILE_MACHINE_AMD64` 0x8664, `IMAGE_FILE_MACHINE_ARM64`
    /// 0xAA64; a linux-arm64 ReadyToRun image stores 0xAA64 ^ 0x7B79, runtime
    /// `src/coreclr/inc/pedecoder.h`, `IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE`).
    pub const fn of_pe_machine(machine: u16) -> Option<Arch> {
        match machine {
            crate::dotnet::pe::MACHINE_AMD64 => Some(Arch::X86_64),
            crate::dotnet::pe::MACHINE_ARM64 => Some(Arch::Aarch64),
            _ => None,
        }
    }

    /// The name Linux (`uname -m`) gives the architecture.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_map_to_their_architecture() {
        assert_eq!(Arch::of_elf_machine(62), Some(Arch::X86_64));
        assert_eq!(Arch::of_elf_machine(183), Some(Arch::Aarch64));
        assert_eq!(
            Arch::of_elf_machine(243),
            None,
            "RISC-V is refused, not guessed"
        );
        assert_eq!(Arch::of_pe_machine(0x8664), Some(Arch::X86_64));
        assert_eq!(Arch::of_pe_machine(0xaa64), Some(Arch::Aarch64));
        assert_eq!(Arch::of_pe_machine(0x014c), None);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(Arch::host(), Some(Arch::X86_64));
        }
        assert_eq!(Arch::X86_64.relative_relocation(), 8);
        assert_eq!(Arch::Aarch64.relative_relocation(), 1027);
    }
}
