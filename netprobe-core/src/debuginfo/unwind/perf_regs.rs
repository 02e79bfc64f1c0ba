//! The user registers a perf_event sample (or a probe hit with `sample_regs_user`) carries, per
//! architecture of the HOST: sampling is live, so the registers are the kernel's own
//! architecture's, chosen at build time (`cfg(target_arch)`), unlike the probe rules, which are
//! the image's.
//!
//! - x86-64: `enum perf_event_x86_regs` (`arch/x86/include/uapi/asm/perf_regs.h`): AX 0 .. DI 5,
//!   BP 6, SP 7, IP 8, R8 16 .. R15 23; the segment registers are left out (the kernel refuses
//!   DS..GS for 64-bit tasks).
//! - aarch64: `enum perf_event_arm64_regs` (`arch/arm64/include/uapi/asm/perf_regs.h`): X0 0 ..
//!   X28 28, X29 29 (the frame pointer), LR 30, SP 31, PC 32.
//!
//! [`Registers`] keeps each frame's registers in x86-64's DWARF columns (the CFI rules the
//! unwinder follows are x86-64's); on aarch64 the frame pointer, stack pointer and instruction
//! address land in the columns of the same roles, which is what the frame-pointer walk reads
//! (an aarch64 frame record is `[x29]` the caller's x29, `[x29 + 8]` the saved LR, AAPCS64
//! "The Frame Pointer", the layout of x86-64's `[rbp]`, `[rbp + 8]`).

use super::registers::{Registers, RA, RBP, RSP};

/// The perf register mask an unwinder needs on x86-64: AX..DI, BP, SP, IP, R8..R15.
pub const PERF_REGS_MASK_X86_64: u64 = 0x1ff | (0xff << 16);

/// The perf register mask on aarch64: X0..X28, X29 (fp), LR, SP, PC.
pub const PERF_REGS_MASK_AARCH64: u64 = (1 << 33) - 1;

/// `PERF_REG_ARM64_X29`, `_LR`, `_SP`, `_PC`.
const ARM64_X29: u32 = 29;
const ARM64_SP: u32 = 31;
const ARM64_PC: u32 = 32;

/// The mask of the host netprobe was built for (x86-64's elsewhere, where nothing samples).
#[cfg(target_arch = "aarch64")]
pub const PERF_REGS_MASK: u64 = PERF_REGS_MASK_AARCH64;
/// The mask of the host netprobe was built for (x86-64's elsewhere, where nothing samples).
#[cfg(not(target_arch = "aarch64"))]
pub const PERF_REGS_MASK: u64 = PERF_REGS_MASK_X86_64;

/// The index, among a sample's registers in [`PERF_REGS_MASK`] order, of the third integer
/// argument register of Go's register ABI: CX on amd64 (perf index 2), R2 on arm64 (perf X2,
/// index 2). Both masks start with contiguous registers 0..=8, so it is 2 on either.
pub const GO_THIRD_ARGUMENT_INDEX: usize = 2;

impl Registers {
    /// Registers from the host's perf user-register dump, `values` in [`PERF_REGS_MASK`] order.
    pub fn from_host_perf_regs(values: &[u64]) -> Registers {
        if cfg!(target_arch = "aarch64") {
            Registers::from_perf_regs_aarch64(PERF_REGS_MASK_AARCH64, values)
        } else {
            Registers::from_perf_regs(PERF_REGS_MASK_X86_64, values)
        }
    }

    /// Registers from perf's aarch64 user-register dump (`values` in the ascending bit order of
    /// `mask`): x29, sp and pc in the columns of the frame pointer, stack pointer and
    /// instruction address; the others are not tracked.
    pub fn from_perf_regs_aarch64(mask: u64, values: &[u64]) -> Registers {
        Registers::from_perf_values(mask, values, |bit| match bit {
            ARM64_X29 => Some(RBP),
            ARM64_SP => Some(RSP),
            ARM64_PC => Some(RA),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aarch64_frame_registers_land_in_their_roles() {
        let values: Vec<u64> = (0..33).map(|i| 1000 + i).collect();
        let r = Registers::from_perf_regs_aarch64(PERF_REGS_MASK_AARCH64, &values);
        assert_eq!(r.rbp(), Some(1029));
        assert_eq!(r.rsp(), Some(1031));
        assert_eq!(r.rip(), Some(1032));
        assert_eq!(r.get(0), None, "x0 is no x86 column");
        assert_eq!(PERF_REGS_MASK_AARCH64.count_ones(), 33);
        // Cut short: what is missing stays unknown.
        let r = Registers::from_perf_regs_aarch64(PERF_REGS_MASK_AARCH64, &values[..31]);
        assert_eq!((r.rbp(), r.rsp()), (Some(1029), None));
    }

    #[test]
    fn the_go_third_argument_is_index_2_in_either_mask() {
        for mask in [PERF_REGS_MASK_X86_64, PERF_REGS_MASK_AARCH64] {
            assert_eq!(mask & 0b111, 0b111);
        }
        assert_eq!(GO_THIRD_ARGUMENT_INDEX, 2);
    }
}
