//! The architecture a kernel-matrix guest runs, and what follows from it on this x86-64 host:
//! which QEMU system emulator boots it, its machine and console, the Debian architecture its
//! kernel and busybox come from, and the cross tools that build netprobe and the traced programs.
//!
//! aarch64 guests run under QEMU's `virt` board with `-cpu max` (TCG: every arm64 feature QEMU
//! emulates), the PL011 UART as console (`ttyAMA0`); QEMU's `-kernel` loads Debian's gzip'd arm64
//! `Image` directly (QEMU docs, "Arm System emulator", `virt`: "Booting a Linux kernel").

/// A guest architecture of the kernel matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestArch {
    /// The host's own architecture; guests boot under `qemu-system-x86_64`.
    X86_64,
    /// 64-bit Arm, under `qemu-system-aarch64 -M virt -cpu max` (TCG on this host).
    Aarch64,
}

impl GuestArch {
    /// The QEMU system emulator (and the Debian package that has it).
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            GuestArch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// QEMU's machine arguments before the common ones (memory, serial console, kernel).
    pub fn machine_args(self) -> &'static [&'static str] {
        match self {
            GuestArch::X86_64 => &["-accel", "tcg"],
            GuestArch::Aarch64 => &["-M", "virt", "-cpu", "max", "-accel", "tcg"],
        }
    }

    /// The kernel command line (serial console of the board, the initramfs's `/init`).
    pub fn cmdline(self) -> &'static str {
        match self {
            GuestArch::X86_64 => {
                "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=3 tsc=reliable"
            }
            GuestArch::Aarch64 => "console=ttyAMA0 rdinit=/init panic=-1 quiet loglevel=3",
        }
    }

    /// Debian's name of the architecture (`dpkg --print-architecture`).
    pub fn debian(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "amd64",
            GuestArch::Aarch64 => "arm64",
        }
    }

    /// Rust's target triple for netprobe built for this guest.
    pub fn rust_target(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64-unknown-linux-gnu",
            GuestArch::Aarch64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// The C compiler that builds the traced C programs (Debian `gcc-aarch64-linux-gnu` for arm64).
    pub fn cc(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "cc",
            GuestArch::Aarch64 => "aarch64-linux-gnu-gcc",
        }
    }

    /// `GOARCH` for the traced Go programs.
    pub fn goarch(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "amd64",
            GuestArch::Aarch64 => "arm64",
        }
    }
}
