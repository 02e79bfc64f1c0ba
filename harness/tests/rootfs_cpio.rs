//! The newc cpio writer of `harness::rootfs` checked against a tool we did not write: busybox
//! `cpio -t` lists what it wrote (the initramfs of every kernel-matrix row is such an archive).
//! busybox is a prerequisite (scripts/install-prereqs.sh installs busybox-static): under CI=true
//! its absence fails the test; outside CI the test is skipped, loudly, and counted as skipped.

use fixtures::e2e::{self, err, Need};
use harness::rootfs::Rootfs;
use std::io::Write;
use std::process::{Command, Stdio};

fn main() {
    e2e::run(vec![e2e::trial(
        "newc_headers_match_busybox_cpio_listing",
        &[Need::Check(busybox_runs)],
        newc_headers_match_busybox_cpio_listing,
    )]);
}

/// busybox has no `--version`; `--help` exits 0.
fn busybox_runs() -> Result<(), String> {
    match Command::new("busybox").arg("--help").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "needs `busybox`: `busybox --help` exited with {}",
            out.status
        )),
        Err(e) => Err(format!(
            "needs `busybox` ({e}): apt-get install busybox-static (scripts/install-prereqs.sh)"
        )),
    }
}

fn newc_headers_match_busybox_cpio_listing() -> Result<(), String> {
    let mut r = Rootfs::new();
    r.bytes("hello", "/etc/motd", 0o644).map_err(err)?;
    r.symlink("/etc/motd", "/motd").map_err(err)?;
    let mut a = Vec::new();
    r.write_newc(&mut a).map_err(err)?;
    let mut child = Command::new("busybox")
        .args(["cpio", "-t"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    child.stdin.take().unwrap().write_all(&a).map_err(err)?;
    let out = child.wait_with_output().map_err(err)?;
    if !out.status.success() {
        return Err(format!("busybox cpio -t failed: {out:?}"));
    }
    let listed = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> = listed.lines().collect();
    if listed != ["etc", "etc/motd", "motd"] {
        return Err(format!("busybox cpio -t listed {listed:?}"));
    }
    Ok(())
}
