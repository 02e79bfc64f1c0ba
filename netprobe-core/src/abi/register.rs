//! The general-purpose registers a probe can read, of every architecture netprobe has rules for,
//! named as the kernel's uprobe fetch-args name them (`Documentation/trace/uprobetracer.rst`,
//! "`%REG`: fetch register REG"; the names are each architecture's
//! `regs_query_register_offset` table).
//!
//! - x86-64: `arch/x86/kernel/ptrace.c`, `regoffset_table`: `ax`, `bx`, ..., `r15`, named as in
//!   `pt_regs` without the `r` prefix of the legacy eight.
//! - aarch64: `arch/arm64/kernel/ptrace.c`, `regoffset_table`: `x0` .. `x30`, `sp`, `pc`,
//!   `pstate`. The SIMD/floating-point registers (`v0` .. `v31`) are not in the table, so a
//!   fetch-arg cannot read them (the kernel answers "Invalid register name").
//!
//! The stack pointer is one variant, [`Register::Sp`], named `sp` on both.

use crate::arch::Arch;
use serde::Serialize;
use std::fmt;

/// A 64-bit general-purpose register of x86-64 (`Ax` .. `R15`) or aarch64 (`X0` .. `X30`), or
/// the stack pointer of either.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Register {
    Ax,
    Bx,
    Cx,
    Dx,
    Si,
    Di,
    Bp,
    /// The stack pointer: `rsp` on x86-64, `sp` on aarch64.
    Sp,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    X0,
    X1,
    X2,
    X3,
    X4,
    X5,
    X6,
    X7,
    X8,
    X9,
    X10,
    X11,
    X12,
    X13,
    X14,
    X15,
    X16,
    X17,
    X18,
    X19,
    X20,
    X21,
    X22,
    X23,
    X24,
    X25,
    X26,
    X27,
    X28,
    X29,
    X30,
}

impl Register {
    /// The x86-64 registers.
    pub const X86_64: [Register; 16] = [
        Register::Ax,
        Register::Bx,
        Register::Cx,
        Register::Dx,
        Register::Si,
        Register::Di,
        Register::Bp,
        Register::Sp,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ];

    /// The aarch64 registers: `x0` .. `x30` (`x29` the frame pointer, `x30` the link register),
    /// then `sp`.
    pub const AARCH64: [Register; 32] = [
        Register::X0,
        Register::X1,
        Register::X2,
        Register::X3,
        Register::X4,
        Register::X5,
        Register::X6,
        Register::X7,
        Register::X8,
        Register::X9,
        Register::X10,
        Register::X11,
        Register::X12,
        Register::X13,
        Register::X14,
        Register::X15,
        Register::X16,
        Register::X17,
        Register::X18,
        Register::X19,
        Register::X20,
        Register::X21,
        Register::X22,
        Register::X23,
        Register::X24,
        Register::X25,
        Register::X26,
        Register::X27,
        Register::X28,
        Register::X29,
        Register::X30,
        Register::Sp,
    ];

    /// The registers of `arch`.
    pub fn of(arch: Arch) -> &'static [Register] {
        match arch {
            Arch::X86_64 => &Register::X86_64,
            Arch::Aarch64 => &Register::AARCH64,
        }
    }

    /// Whether `arch` has this register (the stack pointer: both).
    pub fn is_of(self, arch: Arch) -> bool {
        Register::of(arch).contains(&self)
    }

    /// The name a fetch-arg gives it: `ax`, ..., `r15`, `x0`, ..., `x30`, `sp`.
    pub fn name(self) -> &'static str {
        match self {
            Register::Ax => "ax",
            Register::Bx => "bx",
            Register::Cx => "cx",
            Register::Dx => "dx",
            Register::Si => "si",
            Register::Di => "di",
            Register::Bp => "bp",
            Register::Sp => "sp",
            Register::R8 => "r8",
            Register::R9 => "r9",
            Register::R10 => "r10",
            Register::R11 => "r11",
            Register::R12 => "r12",
            Register::R13 => "r13",
            Register::R14 => "r14",
            Register::R15 => "r15",
            Register::X0 => "x0",
            Register::X1 => "x1",
            Register::X2 => "x2",
            Register::X3 => "x3",
            Register::X4 => "x4",
            Register::X5 => "x5",
            Register::X6 => "x6",
            Register::X7 => "x7",
            Register::X8 => "x8",
            Register::X9 => "x9",
            Register::X10 => "x10",
            Register::X11 => "x11",
            Register::X12 => "x12",
            Register::X13 => "x13",
            Register::X14 => "x14",
            Register::X15 => "x15",
            Register::X16 => "x16",
            Register::X17 => "x17",
            Register::X18 => "x18",
            Register::X19 => "x19",
            Register::X20 => "x20",
            Register::X21 => "x21",
            Register::X22 => "x22",
            Register::X23 => "x23",
            Register::X24 => "x24",
            Register::X25 => "x25",
            Register::X26 => "x26",
            Register::X27 => "x27",
            Register::X28 => "x28",
            Register::X29 => "x29",
            Register::X30 => "x30",
        }
    }

    /// The x86-64 register named `name` (`ax`, `r14`; `rax` is accepted too).
    pub fn parse(name: &str) -> Option<Register> {
        let short = match name.strip_prefix('r') {
            Some(rest) if rest.len() == 2 && !rest.starts_with(|c: char| c.is_ascii_digit()) => {
                rest
            }
            _ => name,
        };
        Register::X86_64.into_iter().find(|r| r.name() == short)
    }

    /// The register of `arch` named `name` as a fetch-arg names it (`x0`, `sp`); x86-64 also
    /// takes `rax` ([`Register::parse`]).
    pub fn parse_for(arch: Arch, name: &str) -> Option<Register> {
        match arch {
            Arch::X86_64 => Register::parse(name),
            Arch::Aarch64 => Register::AARCH64.into_iter().find(|r| r.name() == name),
        }
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_per_architecture() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            for &r in Register::of(arch) {
                assert_eq!(Register::parse_for(arch, r.name()), Some(r), "{arch} {r}");
                assert!(r.is_of(arch));
            }
        }
        assert_eq!(Register::parse("rax"), Some(Register::Ax));
        assert_eq!(Register::parse("r14"), Some(Register::R14));
        assert_eq!(Register::parse("xmm0"), None);
        assert_eq!(Register::parse("x0"), None);
        assert_eq!(Register::parse_for(Arch::Aarch64, "x31"), None);
        assert_eq!(Register::parse_for(Arch::Aarch64, "v0"), None);
        assert_eq!(Register::parse_for(Arch::Aarch64, "di"), None);
        // Only the stack pointer is shared.
        let shared: Vec<Register> = Register::X86_64
            .into_iter()
            .filter(|r| r.is_of(Arch::Aarch64))
            .collect();
        assert_eq!(shared, [Register::Sp]);
    }
}
