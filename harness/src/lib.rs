//! The harness: netprobe end to end under Docker (the sample apps with a netprobe sidecar in their
//! PID namespace) and per kernel version (Debian kernels under QEMU/TCG, plus the host kernel).
//!
//! - [`owner`]: names of containers/images, and who owns them (for cleanup).
//! - [`rootfs`]: deterministic root file systems → tar (`docker import`) or newc cpio (initramfs).
//! - [`command`]: the client programs and daemon scripts, run alike.
//! - [`docker`]: the engine through `/usr/bin/docker`; guards that remove what a run made.
//! - [`images`]: the images' contents (.NET app, Go app, sidecar, fixture programs).
//! - [`checks`]: THE table of kernel-matrix checks and how netprobe's output is judged.
//! - [`docker_checks`]: the table of Docker checks (sample apps, sidecar and host vantage).
//! - [`runtimes`]: containerd (`ctr`) and Podman: image archives, labelled containers, guards.
//! - [`containers`]: the app + sidecar scenario on testcontainers (privileged, else minimal caps).
//! - [`kernels`], [`matrix`], [`report`]: the kernel matrix and its table.
//! - [`guest_arch`]: what a guest's architecture decides (QEMU board, console, cross tools).
//! - [`arm64_guest`]: the arm64 guest's initramfs and shell agent, judged on the host.

pub mod arm64_guest;
pub mod binaries;
pub mod checks;
pub mod command;
pub mod containers;
pub mod docker;
pub mod docker_checks;
pub mod guest_arch;
pub mod images;
pub mod kernels;
pub mod matrix;
pub mod oracle;
pub mod owner;
pub mod report;
pub mod rootfs;
pub mod runtimes;
