//! A frame's registers and the stack bytes an unwinder reads.
//!
//! Registers are numbered as DWARF numbers them on x86-64 (System V x86-64 psABI, §3.6.2,
//! "DWARF Register Number Mapping": 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp,
//! 8-15 r8-r15, 16 the return address), so call-frame rules index them directly.

/// DWARF register number of rbp.
pub const RBP: u16 = 6;
/// DWARF register number of rsp.
pub const RSP: u16 = 7;
/// DWARF register number of the return address column (the caller's rip).
pub const RA: u16 = 16;
/// Registers tracked: the sixteen general registers and the return address.
pub const REGISTER_COUNT: usize = 17;

/// The registers of one frame, each known or not (a rule that cannot be followed, or a register
/// the sample did not carry, leaves it unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Registers {
    values: [Option<u64>; REGISTER_COUNT],
}

impl Registers {
    /// Registers with rip (as the return-address column), rsp and rbp known.
    pub fn new(rip: u64, rsp: u64, rbp: u64) -> Registers {
        let mut r = Registers::default();
        r.set(RA, Some(rip));
        r.set(RSP, Some(rsp));
        r.set(RBP, Some(rbp));
        r
    }

    /// Register `n` (DWARF number); `None` when unknown or not tracked.
    pub fn get(&self, n: u16) -> Option<u64> {
        self.values.get(usize::from(n)).copied().flatten()
    }

    /// Sets register `n` (DWARF number); untracked numbers are ignored.
    pub fn set(&mut self, n: u16, v: Option<u64>) {
        if let Some(slot) = self.values.get_mut(usize::from(n)) {
            *slot = v;
        }
    }

    /// The frame's instruction address.
    pub fn rip(&self) -> Option<u64> {
        self.get(RA)
    }

    pub fn rsp(&self) -> Option<u64> {
        self.get(RSP)
    }

    pub fn rbp(&self) -> Option<u64> {
        self.get(RBP)
    }

    /// Registers from perf's x86 user-register dump: `values` in the ascending bit order of
    /// `mask` (`enum perf_event_x86_regs`, arch/x86/include/uapi/asm/perf_regs.h: AX 0, BX 1,
    /// CX 2, DX 3, SI 4, DI 5, BP 6, SP 7, IP 8, ..., R8 16 .. R15 23).
    pub fn from_perf_regs(mask: u64, values: &[u64]) -> Registers {
        // perf register number -> DWARF number (`None`: not a register DWARF unwinds with).
        fn dwarf_of(perf: u32) -> Option<u16> {
            Some(match perf {
                0 => 0,
                1 => 3,
                2 => 2,
                3 => 1,
                4 => 4,
                5 => 5,
                6 => RBP,
                7 => RSP,
                8 => RA,
                16..=23 => 8 + (perf as u16 - 16),
                _ => return None,
            })
        }
        Registers::from_perf_values(mask, values, dwarf_of)
    }

    /// Registers from a perf user-register dump, `values` in the ascending bit order of `mask`,
    /// each perf register `bit` into the column `column_of(bit)` (`None`: not tracked).
    pub(super) fn from_perf_values(
        mask: u64,
        values: &[u64],
        column_of: impl Fn(u32) -> Option<u16>,
    ) -> Registers {
        let mut r = Registers::default();
        let mut next = values.iter();
        for bit in 0..64u32 {
            if mask & (1 << bit) == 0 {
                continue;
            }
            let Some(&v) = next.next() else { break };
            if let Some(n) = column_of(bit) {
                r.set(n, Some(v));
            }
        }
        r
    }
}

/// Memory an unwinder reads: the stack as copied at the sample or the hit.
pub trait StackMemory {
    /// The 8 bytes at `addr`; `None` outside what was copied.
    fn read_u64(&self, addr: u64) -> Option<u64>;
}

/// The user stack as the kernel copied it (`PERF_SAMPLE_STACK_USER`): `bytes` from address `base`
/// (the sampled rsp) up.
#[derive(Clone, Copy, Debug)]
pub struct CopiedStack<'a> {
    pub base: u64,
    pub bytes: &'a [u8],
}

impl StackMemory for CopiedStack<'_> {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let b = self.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::unwind::perf_regs::PERF_REGS_MASK_X86_64;

    #[test]
    fn perf_registers_land_in_their_dwarf_columns() {
        let values: Vec<u64> = (0..17).map(|i| 100 + i).collect();
        let r = Registers::from_perf_regs(PERF_REGS_MASK_X86_64, &values);
        assert_eq!(r.get(0), Some(100)); // AX
        assert_eq!(r.get(3), Some(101)); // BX
        assert_eq!(r.get(1), Some(103)); // DX
        assert_eq!(r.rbp(), Some(106));
        assert_eq!(r.rsp(), Some(107));
        assert_eq!(r.rip(), Some(108));
        assert_eq!(r.get(8), Some(109)); // R8
        assert_eq!(r.get(15), Some(116)); // R15
                                          // Fewer values than the mask names: the rest stay unknown.
        let r = Registers::from_perf_regs(PERF_REGS_MASK_X86_64, &values[..7]);
        assert_eq!(r.rsp(), None);
    }

    #[test]
    fn the_copied_stack_reads_only_inside_itself() {
        let bytes: Vec<u8> = (0..16).collect();
        let s = CopiedStack {
            base: 0x1000,
            bytes: &bytes,
        };
        assert_eq!(s.read_u64(0x1000), Some(0x0706_0504_0302_0100));
        assert_eq!(s.read_u64(0x1008), Some(0x0f0e_0d0c_0b0a_0908));
        assert_eq!(s.read_u64(0x1009), None);
        assert_eq!(s.read_u64(0xff8), None);
        assert_eq!(s.read_u64(u64::MAX), None);
    }
}
