//! The programs a kernel-matrix check traces: C fixtures built by `fixtures::CProgram` and Go
//! fixtures built static, on the host, so the guest runs the very same bytes.

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
    },
    /// `fixtures/go/<dir>` built with `CGO_ENABLED=0 go build` (static).
    Go {
        /// File name under `/fixtures` in the guest.
        key: &'static str,
        /// Folder under `fixtures/go/`.
        dir: &'static str,
    },
}

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
            Target::C { source, flags, .. } => {
                let prog = fixtures::CProgram::new(source).flags(flags);
                std::panic::catch_unwind(|| prog.build())
                    .map_err(|_| format!("building fixtures/c/{source}.c {flags:?} failed (see the compiler output above)"))
            }
            Target::Go { key, dir } => build_go(key, dir),
        }
    }
}

/// Builds `fixtures/go/<dir>` into `<target>/fixtures-bin/<key>` (static, CGO off).
fn build_go(key: &str, dir: &str) -> Result<PathBuf, String> {
    let src = fixtures::workspace_root().join("fixtures/go").join(dir);
    let out_dir = fixtures::build::target_dir().join("fixtures-bin");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let out = out_dir.join(key);
    let tmp = fixtures::build::unique_tmp(&out_dir, key);
    let res = Command::new("go")
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .env("GOFLAGS", "-mod=mod")
        .args(["build", "-trimpath", "-o"])
        .arg(&tmp)
        .arg(".")
        .output()
        .map_err(|e| format!("running go build (apt-get install golang-go): {e}"))?;
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
