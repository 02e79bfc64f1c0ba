//! The relocation type of a "relative" dynamic relocation per architecture: the word at
//! `r_offset` becomes the load base plus `r_addend` (`B + A`). Position-independent images keep
//! their pointers this way (a Go PIE's `pcHeader.textStart` before Go 1.26, the module data's
//! pointers, a NativeAOT library's `__modules` slot, .NET's contract descriptor), and the
//! addend is the pointer's link-time value, which the readers take when the stored word is 0.
//!
//! Sources: System V x86-64 psABI, table "Relocation Types" (`R_X86_64_RELATIVE` = 8); ELF for
//! the Arm 64-bit Architecture (AAELF64), "Dynamic relocations" (`R_AARCH64_RELATIVE` = 1027);
//! both in glibc's `elf.h`.

use super::Arch;

/// `R_X86_64_RELATIVE` (System V x86-64 psABI).
pub const R_X86_64_RELATIVE: u32 = 8;
/// `R_AARCH64_RELATIVE` (AAELF64, "Dynamic relocations").
pub const R_AARCH64_RELATIVE: u32 = 1027;

impl Arch {
    /// The `r_type` of this architecture's relative relocation (`B + A`).
    pub const fn relative_relocation(self) -> u32 {
        match self {
            Arch::X86_64 => R_X86_64_RELATIVE,
            Arch::Aarch64 => R_AARCH64_RELATIVE,
        }
    }
}
