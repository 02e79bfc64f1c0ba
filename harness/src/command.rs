//! The client programs the harness drives (`docker`, `ctr`, `podman`) and the scripts that start
//! their daemons, run the same way: a failure carries the command and its stderr.

use anyhow::{bail, Context, Result};
use std::process::{Command, Output};

/// The stdout of `out`, the output of `program args`; an error naming the command, its exit
/// status and its stderr when it failed.
pub fn stdout_of(out: Output, program: &str, args: &[&str]) -> Result<String> {
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the project's `script` (`scripts/docker-up.sh`, `scripts/containerd-up.sh`) unless
/// `answers()`; an error saying that `what` could not be started when the script fails.
pub fn start_unless(answers: impl Fn() -> bool, script: &str, what: &str) -> Result<()> {
    if answers() {
        return Ok(());
    }
    let script = fixtures::workspace_root().join(script);
    let status = Command::new("bash")
        .arg(&script)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} could not start {what}", script.display());
    }
    Ok(())
}
