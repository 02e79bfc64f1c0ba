//! The programs the harness ships into images and initramfs archives.

use crate::guest_arch::GuestArch;
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The release `netprobe` binary: `$NETPROBE_BIN` when set, otherwise built here with
/// `cargo build --release -p netprobe-cli --bin netprobe` (a no-op when up to date).
///
/// Building from inside `cargo test` is safe: cargo locks each profile's folder separately, and
/// tests run in the dev profile while this builds into `target/release/`.
pub fn netprobe_release() -> Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_netprobe_release().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build_netprobe_release() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("NETPROBE_BIN") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("NETPROBE_BIN={} is not a file", p.display());
        }
        return Ok(p);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(fixtures::workspace_root())
        .args([
            "build",
            "--release",
            "-p",
            "netprobe-cli",
            "--bin",
            "netprobe",
        ])
        .status()
        .context("running cargo build --release for netprobe")?;
    if !status.success() {
        bail!("cargo build --release -p netprobe-cli failed ({status})");
    }
    let bin = fixtures::build::target_dir().join("release/netprobe");
    if !bin.is_file() {
        bail!("cargo built netprobe but {} is missing", bin.display());
    }
    Ok(bin)
}

/// `netprobe` built for `arch` (aarch64: the Rust target `aarch64-unknown-linux-gnu` from rustup,
/// linked by `aarch64-linux-gnu-gcc` from Debian `gcc-aarch64-linux-gnu`), statically linked
/// (`-C target-feature=+crt-static`: glibc's static libc.a from the cross toolchain), so the
/// initramfs needs no loader or libraries. `$NETPROBE_BIN_AARCH64` when set. Built in the `guest`
/// profile (the workspace Cargo.toml) into `$NETPROBE_CACHE/aarch64-target/`, so that the
/// dependencies are built once per machine, not once per clone (docs/arm64.md has the times).
///
/// The target's flags go through `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`, which leaves the host
/// profile's fingerprints (and so its build) alone.
pub fn netprobe_cross(arch: GuestArch) -> Result<PathBuf> {
    if arch == GuestArch::X86_64 {
        return netprobe_release();
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| build_netprobe_aarch64().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build_netprobe_aarch64() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("NETPROBE_BIN_AARCH64") {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("NETPROBE_BIN_AARCH64={} is not a file", p.display());
        }
        return Ok(p);
    }
    let arch = GuestArch::Aarch64;
    let triple = arch.rust_target();
    let cc = arch.cc();
    let env_triple = triple.replace('-', "_");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // A target dir of its own in the cache: a clean clone rebuilds only the workspace's crates,
    // not the dependencies (several minutes for aarch64 on two cores).
    let target_dir = fixtures::cache_dir().join("aarch64-target");
    let status = Command::new(&cargo)
        .current_dir(fixtures::workspace_root())
        .env("CARGO_TARGET_DIR", &target_dir)
        .env(
            format!("CARGO_TARGET_{}_LINKER", env_triple.to_uppercase()),
            cc,
        )
        .env(
            format!("CARGO_TARGET_{}_RUSTFLAGS", env_triple.to_uppercase()),
            "-C target-feature=+crt-static",
        )
        // ring and mimalloc compile C: the cc crate reads CC_<triple> and AR_<triple>.
        .env(format!("CC_{env_triple}"), cc)
        .env(format!("AR_{env_triple}"), "aarch64-linux-gnu-ar")
        .args([
            "build",
            "--locked",
            "--profile",
            "guest",
            "--target",
            triple,
        ])
        .args(["-p", "netprobe-cli", "--bin", "netprobe"])
        .status()
        .context("running cargo build --profile guest --target aarch64-unknown-linux-gnu")?;
    if !status.success() {
        bail!(
            "cargo build --profile guest --target {triple} -p netprobe-cli failed ({status}); needs \
             `rustup target add {triple}` and `apt-get install gcc-aarch64-linux-gnu`"
        );
    }
    let bin = target_dir.join(format!("{triple}/guest/netprobe"));
    if !bin.is_file() {
        bail!("cargo built netprobe but {} is missing", bin.display());
    }
    Ok(bin)
}

/// True when `netprobe <sub> --help` succeeds, i.e. the binary has that subcommand.
pub fn has_subcommand(netprobe: &std::path::Path, sub: &str) -> bool {
    Command::new(netprobe)
        .args([sub, "--help"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The subcommands of `netprobe` listed in `netprobe --help` ("Commands:" section of clap).
pub fn subcommands(netprobe: &std::path::Path) -> Vec<String> {
    let Ok(out) = Command::new(netprobe).arg("--help").output() else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut in_commands = false;
    let mut subs = Vec::new();
    for line in text.lines() {
        if line.trim_end() == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            if let Some(name) = line.split_whitespace().next() {
                if name != "help" {
                    subs.push(name.to_string());
                }
            }
        }
    }
    subs
}

/// The test prerequisite "the release netprobe has subcommand `sub`" for the subcommands a check
/// may need; `None` for a name netprobe always has. Shared by the Docker and kernel-matrix tests.
pub fn subcommand_need(sub: &str) -> Option<fixtures::e2e::Need> {
    let check: fn() -> std::result::Result<(), String> = match sub {
        "trace" => || has_sub("trace"),
        "count" => || has_sub("count"),
        "latency" => || has_sub("latency"),
        "demo" => || has_sub("demo"),
        "offsets" => || has_sub("offsets"),
        _ => return None,
    };
    Some(fixtures::e2e::Need::Check(check))
}

fn has_sub(sub: &str) -> std::result::Result<(), String> {
    let bin = netprobe_release().map_err(|e| format!("{e:#}"))?;
    if has_subcommand(&bin, sub) {
        Ok(())
    } else {
        Err(format!(
            "netprobe has no `{sub}` subcommand: build it from this tree"
        ))
    }
}
