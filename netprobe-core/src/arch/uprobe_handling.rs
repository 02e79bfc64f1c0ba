//! How the kernel handles a uprobe on an instruction, in terms common to the architectures: the
//! x86-64 rules are in [`super::x86_64::kernel_handling`], the aarch64 ones in
//! [`super::aarch64::kernel_handling`].

use serde::Serialize;

/// How the kernel handles a uprobe on an instruction (Linux `arch/x86/kernel/uprobes.c`,
/// `arch/arm64/kernel/probes/decode-insn.c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelHandling {
    /// A 5-byte NOP (`0f 1f 44 00 00`): the kernel may replace the trap with a call into a
    /// trampoline (`can_optimize`); measured ~0.95 µs a hit here.
    Optimized,
    /// Emulated in the trap handler (x86-64 `branch_xol_ops`, `push_xol_ops`: ~1.5 µs a hit;
    /// aarch64 `INSN_GOOD_NO_SLOT`, the `simulate_*` handlers of `simulate-insn.c`).
    Emulated,
    /// Executed out of line under single-step (x86-64 `default_xol_ops`: ~12 µs a hit;
    /// aarch64 `INSN_GOOD`).
    SingleStepped,
    /// Refused by the kernel (x86-64 `is_prefix_bad`, a `0x66`-prefixed branch; aarch64
    /// `INSN_REJECTED`): no probe can go there.
    Refused,
}

impl KernelHandling {
    /// `emulated`, `single-stepped`, ...
    pub fn label(self) -> &'static str {
        match self {
            KernelHandling::Optimized => "optimized",
            KernelHandling::Emulated => "emulated",
            KernelHandling::SingleStepped => "single-stepped",
            KernelHandling::Refused => "refused by the kernel",
        }
    }

    /// The typical cost of a hit on this machine kind (Linux 6.18, measured in BENCHMARKS.md).
    pub fn typical_cost(self) -> &'static str {
        match self {
            KernelHandling::Optimized => "~1 µs/hit",
            KernelHandling::Emulated => "~1.5 µs/hit",
            KernelHandling::SingleStepped => "~12 µs/hit",
            KernelHandling::Refused => "no probe",
        }
    }

    /// Emulated or optimized: no second trap.
    pub fn cheap(self) -> bool {
        matches!(self, KernelHandling::Optimized | KernelHandling::Emulated)
    }
}
