//! Runs the kernel matrix: builds the targets and the initramfs once, boots each selected kernel,
//! runs the host row, and returns the rows for [`crate::report::render`].

use crate::checks::{self, CheckResult};
use crate::guest_arch::GuestArch;
use crate::kernels::{self, KernelRow, KernelSpec, HOST, KERNELS};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct MatrixOptions {
    /// Row names to run (`debian-6.1`, `debian-6.12`, `host`); empty = all.
    pub only: Vec<String>,
    /// The `harness` binary that becomes the guest agent (`/harness guest`).
    pub harness: PathBuf,
    /// Time limit per boot.
    pub boot_limit: Duration,
}

/// Every row name the matrix knows, in order.
pub fn all_rows() -> Vec<&'static str> {
    KERNELS
        .iter()
        .map(|k| k.name)
        .chain(std::iter::once(HOST))
        .collect()
}

/// Runs the selected rows. Errors only for a bad selection or when netprobe itself cannot be
/// built; everything else becomes a red cell with its reason.
pub fn run(opts: &MatrixOptions) -> Result<Vec<KernelRow>> {
    let selected: Vec<&str> = if opts.only.is_empty() {
        all_rows()
    } else {
        for name in &opts.only {
            if !all_rows().contains(&name.as_str()) {
                bail!("unknown kernel {name:?}; known: {}", all_rows().join(", "));
            }
        }
        all_rows()
            .into_iter()
            .filter(|r| opts.only.iter().any(|o| o == r))
            .collect()
    };
    let spec_of = |name: &str| KERNELS.iter().find(|k| k.name == name);
    let x86_guests: Vec<&KernelSpec> = selected
        .iter()
        .filter_map(|r| spec_of(r))
        .filter(|k| k.arch == GuestArch::X86_64)
        .collect();
    let arm64_guests: Vec<&KernelSpec> = selected
        .iter()
        .filter_map(|r| spec_of(r))
        .filter(|k| k.arch == GuestArch::Aarch64)
        .collect();
    let x86_needed = !x86_guests.is_empty() || selected.contains(&HOST);
    let netprobe = if x86_needed {
        Some(crate::binaries::netprobe_release()?)
    } else {
        None
    };
    // Builders name their temporary files by pid: one thread at a time builds within a process
    // (several test trials may run matrices at once).
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let mut building = Some(BUILDING.lock().unwrap_or_else(|p| p.into_inner()));
    // Targets: built once on the host; a failed build turns its checks red in every row.
    let mut built: BTreeMap<&'static str, PathBuf> = BTreeMap::new();
    let mut build_errors: BTreeMap<&'static str, String> = BTreeMap::new();
    let mut arches = Vec::new();
    if x86_needed {
        arches.push(GuestArch::X86_64);
    }
    if !arm64_guests.is_empty() {
        arches.push(GuestArch::Aarch64);
    }
    for arch in &arches {
        for t in checks::targets(*arch) {
            match t.build() {
                Ok(p) => {
                    built.insert(t.key(), p);
                }
                Err(e) => {
                    build_errors.insert(t.key(), e);
                }
            }
        }
    }
    let expected = checks::expected_values(GuestArch::X86_64, &|key| built.get(key).cloned());
    let x86_initramfs = match (x86_guests.is_empty(), &netprobe) {
        (false, Some(netprobe)) => {
            Some(write_initramfs(netprobe, &opts.harness, &built, &expected)?)
        }
        _ => None,
    };
    let arm64_expected =
        checks::expected_values(GuestArch::Aarch64, &|key| built.get(key).cloned());
    let arm64_initramfs = (!arm64_guests.is_empty()).then(|| {
        crate::binaries::netprobe_cross(GuestArch::Aarch64)
            .and_then(|np| crate::arm64_guest::write_initramfs(&np, &built, &arm64_expected))
    });
    building.take();
    let mut rows = Vec::new();
    for spec in x86_guests {
        let initramfs = x86_initramfs.as_deref().expect("built for x86-64 rows");
        rows.push(boot_row(
            spec,
            initramfs,
            opts.boot_limit,
            &kernels::agent_results,
        ));
    }
    for spec in arm64_guests {
        rows.push(
            match arm64_initramfs.as_ref().expect("built for arm64 rows") {
                Ok(initramfs) => boot_row(spec, initramfs, opts.boot_limit, &|console| {
                    crate::arm64_guest::judge_console(console, &arm64_expected)
                }),
                Err(e) => unbootable(spec, &format!("no initramfs: {e:#}")),
            },
        );
    }
    building.take();
    if selected.contains(&HOST) {
        let started = Instant::now();
        eprintln!("kernels: running the checks on the host kernel");
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        let mut results = vec![CheckResult {
            check: "boot".into(),
            ok: true,
            hits: None,
            detail: "host kernel (not booted)".into(),
            seconds: 0.0,
        }];
        results.extend(kernels::run_here(
            netprobe.as_deref().expect("built for the host row"),
            &|key| built.get(key).cloned(),
            &expected,
        ));
        rows.push(KernelRow {
            name: HOST.into(),
            arch: GuestArch::X86_64,
            release,
            results,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    // A check whose target did not build says so (rather than "not built") in every row.
    for row in &mut rows {
        for r in &mut row.results {
            let Some(check) = checks::checks_for(row.arch)
                .iter()
                .find(|c| c.name == r.check)
            else {
                continue;
            };
            if let Some(err) = check.target.and_then(|t| build_errors.get(t.key())) {
                *r = CheckResult::failed(check.name, format!("target did not build: {err}"));
            }
        }
    }
    Ok(rows)
}

/// Fetches `spec`'s kernel and boots it with `initramfs`.
fn boot_row(
    spec: &KernelSpec,
    initramfs: &Path,
    limit: Duration,
    results_of: &dyn Fn(&[String]) -> Vec<CheckResult>,
) -> KernelRow {
    match kernels::fetch(spec) {
        Ok(image) => {
            eprintln!(
                "kernels: booting {} ({} {}) under QEMU/TCG",
                spec.name, image.package, image.version
            );
            kernels::boot(spec, &image, initramfs, limit, results_of)
        }
        Err(e) => unbootable(spec, &format!("{e:#}")),
    }
}

fn unbootable(spec: &KernelSpec, why: &str) -> KernelRow {
    let mut results = vec![CheckResult::failed(
        "boot",
        format!("no kernel image: {why}"),
    )];
    for col in kernels::expected_columns(spec.arch).into_iter().skip(1) {
        results.push(CheckResult::failed(&col, "kernel did not boot"));
    }
    KernelRow {
        name: spec.name.into(),
        arch: spec.arch,
        release: "?".into(),
        results,
        seconds: 0.0,
    }
}

/// Writes the initramfs to `<target>/harness-kernels/initramfs-<hash>.cpio` and returns its path.
fn write_initramfs(
    netprobe: &Path,
    harness: &Path,
    built: &BTreeMap<&'static str, PathBuf>,
    expected: &checks::Expected,
) -> Result<PathBuf> {
    let targets: Vec<(String, PathBuf)> = built
        .iter()
        .map(|(k, p)| (k.to_string(), p.clone()))
        .collect();
    let dir = fixtures::build::target_dir().join("harness-kernels");
    std::fs::create_dir_all(&dir)?;
    // A debug build of the guest agent carries ~100 MB of debug info: ship it stripped.
    let stripped = dir.join(format!("harness-guest-{}", std::process::id()));
    let harness = match std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(harness)
        .status()
    {
        Ok(s) if s.success() => stripped.as_path(),
        _ => harness,
    };
    let bytes = kernels::build_initramfs(netprobe, harness, &targets, expected);
    let _ = std::fs::remove_file(&stripped);
    let bytes = bytes?;
    use sha2::Digest;
    let hash: String = sha2::Sha256::digest(&bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = dir.join(format!("initramfs-{hash}.cpio"));
    if !path.exists() {
        let tmp = dir.join(format!(".initramfs-{}.tmp", std::process::id()));
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)
            .with_context(|| format!("renaming {} into place", tmp.display()))?;
    }
    eprintln!(
        "kernels: initramfs {} ({:.1} MB)",
        path.display(),
        bytes.len() as f64 / 1e6
    );
    Ok(path)
}
