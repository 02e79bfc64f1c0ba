//! The kernel matrix: Debian kernel images booted under QEMU/TCG with an initramfs that runs
//! netprobe's own end-to-end checks ([`crate::checks::KERNEL_CHECKS`]), plus the same checks run
//! directly on the host's kernel (its image is not available to boot).
//!
//! Facts relied on (checked by `scripts/harness.sh kernels` on each run): Debian kernel packages
//! download with `apt-get download`; `dpkg-deb` unpacks `/boot/vmlinuz-*`; nested KVM does not
//! work here, so QEMU runs with `-accel tcg`; a busybox-static initramfs boots in seconds.
//! Downloads are cached under `$NETPROBE_CACHE/kernels/` and never committed.

use crate::checks::{self, CheckResult, KERNEL_CHECKS};
use crate::guest_arch::GuestArch;
use crate::rootfs::Rootfs;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A kernel line of the matrix.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    /// Row name, also what `--kernel` takes.
    pub name: &'static str,
    /// The Debian meta package whose dependency is the newest image of this line (with
    /// `:arch` for a foreign architecture, which `dpkg --add-architecture` made known to apt).
    pub meta_package: &'static str,
    /// The architecture the kernel is built for, and so the guest's.
    pub arch: GuestArch,
}

/// The Debian kernel lines in the matrix (the host kernel is added as the row "host").
pub const KERNELS: &[KernelSpec] = &[
    // bookworm's own line (bookworm and bookworm-security).
    KernelSpec {
        name: "debian-6.1",
        meta_package: "linux-image-amd64",
        arch: GuestArch::X86_64,
    },
    // bookworm-security carries the 6.12 line; scripts/kernel-apt-sources.sh adds
    // bookworm-backports when a machine's apt sources lack it.
    KernelSpec {
        name: "debian-6.12",
        meta_package: "linux-image-6.12-amd64",
        arch: GuestArch::X86_64,
    },
    // The same 6.12 line built for arm64, booted under qemu-system-aarch64 (TCG); its checks are
    // `checks::ARM64_CHECKS`, run by a shell agent (crate::arm64_guest).
    KernelSpec {
        name: "debian-6.12-arm64",
        meta_package: "linux-image-6.12-arm64:arm64",
        arch: GuestArch::Aarch64,
    },
];

/// Name of the row for the host's own kernel.
pub const HOST: &str = "host";

/// A kernel image ready to boot.
#[derive(Clone, Debug)]
pub struct KernelImage {
    /// The Debian package it came from (`linux-image-6.1.0-56-amd64`).
    pub package: String,
    /// Its version (`6.1.176-1`).
    pub version: String,
    /// The bzImage.
    pub vmlinuz: PathBuf,
    /// The kernel's build configuration (`/boot/config-*`), if the package has one.
    pub config: Option<PathBuf>,
}

fn kernels_dir() -> PathBuf {
    fixtures::cache_dir().join("kernels")
}

fn run_text(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The concrete image package and candidate version behind `meta` (`apt-cache depends/show`).
pub fn resolve_package(meta: &str) -> Result<(String, String)> {
    let deps = run_text(Command::new("apt-cache").args(["depends", meta]))?;
    let package = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && !p.contains('<'))
        .with_context(|| format!("{meta} names no linux-image package"))?
        .to_string();
    let version = resolve_version(&package)?;
    Ok((package, version))
}

/// The candidate version of `package` (`apt-cache show --no-all-versions`).
pub fn resolve_version(package: &str) -> Result<String> {
    let show = run_text(Command::new("apt-cache").args(["show", "--no-all-versions", package]))?;
    show.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
        .with_context(|| format!("apt-cache show {package} gives no version"))
}

/// Runs `scripts/kernel-apt-sources.sh` (adds bookworm-backports to apt's sources when absent,
/// then `apt-get update`).
fn add_apt_sources() -> Result<()> {
    let script = fixtures::workspace_root().join("scripts/kernel-apt-sources.sh");
    let status = Command::new("bash").arg(&script).status()?;
    if !status.success() {
        bail!("{} failed", script.display());
    }
    Ok(())
}

/// The image of `spec`: from the cache when there, else downloaded with `apt-get download` and
/// unpacked. Offline, the newest cached image of the line is used (with a note on stderr).
pub fn fetch(spec: &KernelSpec) -> Result<KernelImage> {
    let dir = kernels_dir();
    std::fs::create_dir_all(&dir)?;
    let latest_link = dir.join(spec.name);
    let resolved = resolve_package(spec.meta_package).or_else(|first| {
        add_apt_sources()
            .and_then(|_| resolve_package(spec.meta_package))
            .map_err(|_| first)
    });
    let (package, version) = match resolved {
        Ok(pv) => pv,
        Err(e) => {
            if let Ok(img) = cached(&latest_link) {
                eprintln!(
                    "kernels: {}: apt cannot resolve {} ({e:#}); using the cached {} {}",
                    spec.name, spec.meta_package, img.package, img.version
                );
                return Ok(img);
            }
            return Err(e);
        }
    };
    // A foreign architecture's package is named `NAME:ARCH`; the folder takes `NAME_ARCH`.
    let img_dir = dir.join(format!("{}_{version}", package.replace(':', "_")));
    if let Ok(img) = cached(&img_dir) {
        return Ok(img);
    }
    eprintln!("kernels: downloading {package} {version} (about 70 MB, cached afterwards)");
    let tmp_name = package.replace(':', "_");
    let tmp = dir.join(format!(".dl-{tmp_name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let result = (|| -> Result<()> {
        let deb = apt_download(&tmp, &package, &version)?;
        // Only ./boot is unpacked: the modules (hundreds of MB) are not needed, as the initramfs
        // carries everything the checks use and no module is loaded.
        let unpack = Command::new("sh")
            .current_dir(&tmp)
            .arg("-c")
            .arg("dpkg-deb --fsys-tarfile \"$1\" | tar -x --wildcards './boot/*'")
            .arg("sh")
            .arg(&deb)
            .status()?;
        if !unpack.success() {
            bail!("unpacking {} failed", deb.display());
        }
        let partial = tmp.join("image");
        std::fs::create_dir_all(&partial)?;
        for e in std::fs::read_dir(tmp.join("boot"))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("vmlinuz-") {
                std::fs::rename(e.path(), partial.join("vmlinuz"))?;
            } else if name.starts_with("config-") {
                std::fs::rename(e.path(), partial.join("config"))?;
            }
        }
        std::fs::write(partial.join("package"), format!("{package}\n{version}\n"))?;
        let _ = std::fs::remove_dir_all(&img_dir);
        std::fs::rename(&partial, &img_dir)?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    let _ = std::fs::remove_file(&latest_link);
    std::os::unix::fs::symlink(img_dir.file_name().expect("named"), &latest_link)?;
    cached(&img_dir)
}

/// Downloads `package` at `version` into the folder `dir` with `apt-get download` (nothing is
/// installed) and returns the `.deb`'s path.
pub fn apt_download(dir: &Path, package: &str, version: &str) -> Result<PathBuf> {
    run_text(Command::new("apt-get").current_dir(dir).args([
        "download",
        "-q",
        &format!("{package}={version}"),
    ]))?;
    std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download left no .deb")
}

fn cached(dir: &Path) -> Result<KernelImage> {
    let meta = std::fs::read_to_string(dir.join("package"))?;
    let mut lines = meta.lines();
    let vmlinuz = dir.join("vmlinuz");
    if !vmlinuz.is_file() {
        bail!("no vmlinuz in {}", dir.display());
    }
    let config = dir.join("config");
    Ok(KernelImage {
        package: lines.next().unwrap_or("").to_string(),
        version: lines.next().unwrap_or("").to_string(),
        vmlinuz,
        config: config.is_file().then_some(config),
    })
}

/// The `/init` of the test initramfs: mounts what netprobe needs, runs the guest agent
/// (`harness guest`), and powers the machine off whatever happens.
const INIT: &str = r#"#!/bin/sh
export PATH=/bin:/usr/local/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || mount -t debugfs nodev /sys/kernel/debug
echo "NPGUEST begin $(uname -r)"
/harness guest --netprobe /usr/local/bin/netprobe --fixtures /fixtures
echo "NPGUEST end rc=$?"
poweroff -f
"#;

/// Builds the initramfs holding busybox, `netprobe`, the guest agent (`harness`) with their
/// libraries, and the targets under `/fixtures/`. Returns the archive's bytes.
pub fn build_initramfs(
    netprobe: &Path,
    harness: &Path,
    targets: &[(String, PathBuf)],
    expected: &checks::Expected,
) -> Result<Vec<u8>> {
    let mut root = Rootfs::new();
    root.bytes(
        serde_json::to_vec(expected)?,
        "/fixtures/expected.json",
        0o644,
    )?;
    root.bytes(INIT, "/init", 0o755)?;
    crate::images::add_busybox(
        &mut root,
        &[
            "sh", "mount", "umount", "mkdir", "poweroff", "uname", "echo", "cat", "ls", "sleep",
        ],
    )?;
    root.elf_with_libs(netprobe, "/usr/local/bin/netprobe")?;
    root.elf_with_libs(harness, "/harness")?;
    for (key, path) in targets {
        root.elf_with_libs(path, &format!("/fixtures/{key}"))?;
    }
    for d in ["/proc", "/sys", "/dev", "/tmp", "/root"] {
        root.dir(d, 0o755)?;
    }
    let mut out = Vec::new();
    root.write_newc(&mut out)?;
    Ok(out)
}

/// The outcome of one kernel row.
#[derive(Clone, Debug)]
pub struct KernelRow {
    /// Row name (`debian-6.1`, `host`).
    pub name: String,
    /// The architecture the row ran (its columns follow from it).
    pub arch: GuestArch,
    /// What ran: `uname -r` as the kernel reported it, or the package when it never booted.
    pub release: String,
    /// One result per check (plus the boot/tracefs/netprobe rows), in table order.
    pub results: Vec<CheckResult>,
    /// Seconds from QEMU start to power-off (0 for the host).
    pub seconds: f64,
}

/// Prefix of the guest agent's result lines on the console.
pub const RESULT_PREFIX: &str = "NPRESULT ";

/// The results the Rust guest agent (`harness guest`) printed on the console (`NPRESULT` lines).
pub fn agent_results(console: &[String]) -> Vec<CheckResult> {
    let mut results = Vec::new();
    for line in console {
        if let Some(json) = line.split_once(RESULT_PREFIX).map(|(_, r)| r) {
            match serde_json::from_str::<CheckResult>(json) {
                Ok(r) => results.push(r),
                Err(e) => results.push(CheckResult::failed(
                    "console",
                    format!("unreadable result line ({e}): {json}"),
                )),
            }
        }
    }
    results
}

/// Boots `image` under QEMU/TCG with `initramfs` and reads the guest's results from its console
/// with `results_of` ([`agent_results`] for the Rust agent, `arm64_guest::Judge` for the shell
/// agent of arm64 guests).
pub fn boot(
    spec: &KernelSpec,
    image: &KernelImage,
    initramfs: &Path,
    limit: Duration,
    results_of: &dyn Fn(&[String]) -> Vec<CheckResult>,
) -> KernelRow {
    let name = spec.name;
    let (qemu, qemu_package) = spec.arch.qemu();
    let started = Instant::now();
    let mut row = KernelRow {
        name: name.into(),
        arch: spec.arch,
        release: format!("{} {}", image.package, image.version),
        results: Vec::new(),
        seconds: 0.0,
    };
    let child = Command::new(qemu)
        .args(spec.arch.machine_args())
        .args(["-m", "1024", "-smp", "1", "-nographic", "-no-reboot"])
        .args(["-nic", "none", "-monitor", "none", "-serial", "stdio"])
        .arg("-kernel")
        .arg(&image.vmlinuz)
        .arg("-initrd")
        .arg(initramfs)
        .args(["-append", spec.arch.cmdline()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            row.results.push(CheckResult::failed(
                "boot",
                format!("starting {qemu} (apt-get install {qemu_package}): {e}"),
            ));
            return row;
        }
    };
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            lines.push(
                String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string(),
            );
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = started + limit;
    let mut timed_out = false;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
        }
    }
    row.seconds = started.elapsed().as_secs_f64();
    let console = reader.join().unwrap_or_default();
    let qemu_err = err_reader.join().unwrap_or_default();
    let mut boot_ok = false;
    for line in &console {
        if let Some(rest) = line.split_once("NPGUEST begin ").map(|(_, r)| r) {
            row.release = rest.trim().to_string();
            boot_ok = true;
        }
    }
    row.results.extend(results_of(&console));
    let tail: Vec<&str> = console
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .map(String::as_str)
        .collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join(" | ");
    let boot = if boot_ok {
        CheckResult {
            check: "boot".into(),
            ok: true,
            hits: None,
            detail: format!("{:.1} s to power-off", row.seconds),
            seconds: row.seconds,
        }
    } else if timed_out {
        CheckResult::failed(
            "boot",
            format!(
                "no guest output within {} s; console: {tail}",
                limit.as_secs()
            ),
        )
    } else {
        CheckResult::failed(
            "boot",
            format!(
                "guest never started the checks; console: {tail} {}",
                qemu_err.trim()
            ),
        )
    };
    row.results.insert(0, boot);
    // A check the guest never reported (agent crashed, time ran out) is red, never missing.
    for name in expected_columns(spec.arch) {
        if !row.results.iter().any(|r| r.check == name) {
            let why = if timed_out {
                format!(
                    "no result: the guest ran out of time ({} s); console: {tail}",
                    limit.as_secs()
                )
            } else {
                format!("no result from the guest; console: {tail}")
            };
            row.results.push(CheckResult::failed(&name, why));
        }
    }
    row
}

/// The columns of a row of `arch`, in order: boot, tracefs, netprobe, then every check of the
/// architecture's table ([`checks::checks_for`]), then what only that architecture's agent reports.
pub fn expected_columns(arch: GuestArch) -> Vec<String> {
    let mut cols = vec!["boot".to_string(), "tracefs".into(), "netprobe".into()];
    cols.extend(checks::checks_for(arch).iter().map(|c| c.name.to_string()));
    if arch == GuestArch::Aarch64 {
        cols.extend(
            crate::arm64_guest::EXTRA_COLUMNS
                .iter()
                .map(|c| c.to_string()),
        );
    }
    cols
}

/// Every column of the table: the x86-64 rows' columns, then the ones only other rows have.
pub fn all_columns() -> Vec<String> {
    let mut cols = expected_columns(GuestArch::X86_64);
    for c in expected_columns(GuestArch::Aarch64) {
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    cols
}

/// Runs every check on the running kernel (the guest agent's body, and the host row).
/// `targets` maps a target key to its path here.
pub fn run_here(
    netprobe: &Path,
    targets: &dyn Fn(&str) -> Option<PathBuf>,
    expected: &checks::Expected,
) -> Vec<CheckResult> {
    let mut results = Vec::new();
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find(|d| Path::new(d).join("uprobe_events").exists());
    results.push(match tracefs {
        Some(d) => CheckResult {
            check: "tracefs".into(),
            ok: true,
            hits: None,
            detail: format!("{d}/uprobe_events present"),
            seconds: 0.0,
        },
        None => CheckResult::failed(
            "tracefs",
            "no uprobe_events under /sys/kernel/tracing or /sys/kernel/debug/tracing (CONFIG_UPROBE_EVENTS off, or tracefs not mounted)",
        ),
    });
    let version =
        checks::run_with_timeout(netprobe, &["--version".into()], Duration::from_secs(30));
    results.push(match version {
        Ok(out) if out.code == Some(0) => CheckResult {
            check: "netprobe".into(),
            ok: true,
            hits: None,
            detail: out.stdout.trim().to_string(),
            seconds: 0.0,
        },
        Ok(out) => CheckResult::failed(
            "netprobe",
            format!(
                "`netprobe --version` exit {:?}: {}",
                out.code,
                out.stderr.trim()
            ),
        ),
        Err(e) => CheckResult::failed("netprobe", e),
    });
    for check in KERNEL_CHECKS {
        let target = match check.target {
            None => None,
            Some(t) => match targets(t.key()) {
                Some(p) => Some(p),
                None => {
                    results.push(CheckResult::failed(
                        check.name,
                        format!("target {} was not built", t.key()),
                    ));
                    continue;
                }
            },
        };
        results.push(checks::run_check(
            netprobe,
            check,
            target.as_deref(),
            expected,
        ));
    }
    results
}
