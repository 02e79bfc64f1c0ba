//! The programs a kernel-matrix check traces: C fixtures built by `fixtures::CProgram` and Go
//! fixtures built static, on the host, so the guest runs the very same bytes. For an arm64 guest
//! they are cross-built: C with `aarch64-linux-gnu-gcc`, Go with `GOARCH=arm64` by the newest
//! fetched toolchain (`scripts/fetch-go-toolchains.sh`).

use crate::guest_arch::GuestArch;
use std::path::PathBuf;
use std::process::Command;

/// A program a check traces. Each is built on the host (and copied into the initramfs under
/// `/fixtures/<key>`), so the guest runs the very same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `fixtures/c/<source>.c` built with `flags` by `fixtures::CProgram`.
    C {
        /// File name under `/fixtures` in the guest.
        key: &'static str,
        /// Source name (without `.c`).
        source: &'static str,
        /// Compiler flags (`-static` or `-static-pie`: the guest has no loader for others).
        flags: &'static [&'static str],
        /// The architecture it is built for.
        arch: GuestArch,
    },
    /// `fixtures/go/<dir>` built with `CGO_ENABLED=0 go build` (static).
    Go {
        /// File name under `/fixtures` in the guest.
        key: &'static str,
        /// Folder under `fixtures/go/`.
        dir: &'static str,
        /// The architecture it is built for.
        arch: GuestArch,
        /// Linked with `-ldflags=-s -w` (no symbol table, no DWARF: pclntab only).
        stripped: bool,
    },
}

impl Target {
    /// `fixtures/c/harness_calls.c` built with `flags` for `arch`, as `/fixtures/<key>`.
    pub const fn harness_calls_c(
        key: &'static str,
        flags: &'static [&'static str],
        arch: GuestArch,
    ) -> Target {
        Target::C {
            key,
            source: "harness_calls",
            flags,
            arch,
        }
    }

    /// `fixtures/go/harness_calls` built static for `arch` (`stripped`: pclntab only), as
    /// `/fixtures/<key>`.
    pub const fn harness_calls_go(key: &'static str, arch: GuestArch, stripped: bool) -> Target {
        Target::Go {
            key,
            dir: "harness_calls",
            arch,
            stripped,
        }
    }
}

/// The Go release that cross-builds the arm64 targets (the newest of `fixtures::go`'s matrix).
pub const CROSS_GO: &str = "1.27.3";

impl Target {
    /// The file name of the built program under `/fixtures` in the guest.
    pub fn key(&self) -> &'static str {
        match self {
            Target::C { key, .. } | Target::Go { key, .. } => key,
        }
    }

    /// Builds the program on the host and returns its path. Errors say what is missing.
    pub fn build(&self) -> Result<PathBuf, String> {
        match self {
            Target::C {
                source,
                flags,
                arch: GuestArch::Aarch64,
                ..
            } => cross_c(source, flags),
            Target::C { source, flags, .. } => {
                let prog = fixtures::CProgram::new(source).flags(flags);
                std::panic::catch_unwind(|| prog.build())
                    .map_err(|_| format!("building fixtures/c/{source}.c {flags:?} failed (see the compiler output above)"))
            }
            Target::Go {
                key,
                dir,
                arch,
                stripped,
            } => build_go(key, dir, *arch, *stripped),
        }
    }
}

/// Builds `fixtures/c/<source>.c` for aarch64 with `aarch64-linux-gnu-gcc` (Debian
/// `gcc-aarch64-linux-gnu`) into `<target>/fixtures-bin/` (`fixtures::CProgram` with `CC` set).
fn cross_c(source: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let cc = GuestArch::Aarch64.cc();
    let runs = Command::new(cc).arg("--version").output();
    if !runs.is_ok_and(|o| o.status.success()) {
        return Err(format!(
            "{cc} is missing: apt-get install gcc-aarch64-linux-gnu"
        ));
    }
    let prog = fixtures::CProgram::new(source).flags(flags).compiler(cc);
    std::panic::catch_unwind(|| prog.build()).map_err(|_| {
        format!("building fixtures/c/{source}.c with {cc} {flags:?} failed (see the compiler output above)")
    })
}

/// Builds `fixtures/go/<dir>` into `<target>/fixtures-bin/<key>` (static, CGO off): the host's
/// `go` for x86-64, the fetched [`CROSS_GO`] with `GOARCH=arm64` for aarch64.
fn build_go(key: &str, dir: &str, arch: GuestArch, stripped: bool) -> Result<PathBuf, String> {
    let src = fixtures::workspace_root().join("fixtures/go").join(dir);
    let out_dir = fixtures::build::target_dir().join("fixtures-bin");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let out = out_dir.join(key);
    let tmp = fixtures::build::unique_tmp(&out_dir, key);
    let go = match arch {
        GuestArch::X86_64 => PathBuf::from("go"),
        GuestArch::Aarch64 => {
            let go = fixtures::go::toolchain_go(CROSS_GO);
            if !go.is_file() {
                return Err(format!(
                    "{} is missing: scripts/fetch-go-toolchains.sh {CROSS_GO}",
                    go.display()
                ));
            }
            go
        }
    };
    let mut cmd = Command::new(&go);
    if arch == GuestArch::Aarch64 {
        // The fetched toolchain's own root, never a GOROOT or GOTOOLCHAIN from the environment.
        if let Some(root) = go.parent().and_then(|b| b.parent()) {
            cmd.env("GOROOT", root).env("GOTOOLCHAIN", "local");
        }
    }
    let ldflags: &[&str] = if stripped { &["-ldflags=-s -w"] } else { &[] };
    let res = cmd
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .env("GOARCH", arch.goarch())
        .args(["build", "-trimpath"])
        .args(ldflags)
        .arg("-o")
        .arg(&tmp)
        .arg(".")
        .output()
        .map_err(|e| {
            format!(
                "running {} build (apt-get install golang-go): {e}",
                go.display()
            )
        })?;
    if !res.status.success() {
        return Err(format!(
            "go build in {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&res.stderr).trim()
        ));
    }
    fixtures::build::put_in_place(&tmp, &out);
    Ok(out)
}
