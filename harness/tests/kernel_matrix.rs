//! The kernel matrix as a test target: per kernel row (Debian lines under QEMU/TCG, and the host),
//! one trial asserting the plumbing (the kernel boots, tracefs has uprobe_events, netprobe runs)
//! and one per check of the table (hits, arguments, offsets exact). Each row boots once; its
//! trials all read that run. Select rows like any test: `cargo test -p harness --test
//! kernel_matrix -- debian-6.12/`. The table is printed to stderr.

use fixtures::e2e::{self, Need};
use harness::checks::{self, Target};
use harness::guest_arch::GuestArch;
use harness::kernels::{KernelRow, HOST, KERNELS};
use harness::{matrix, report};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

type Shared = Arc<Mutex<HashMap<String, Arc<OnceLock<Result<KernelRow, String>>>>>>;

const PLUMBING: &[&str] = &["boot", "tracefs", "netprobe"];

fn main() {
    let runs: Shared = Arc::default();
    let mut trials = Vec::new();
    for row in matrix::all_rows() {
        let arch = KERNELS
            .iter()
            .find(|k| k.name == row)
            .map_or(GuestArch::X86_64, |k| k.arch);
        let mut needs = vec![Need::Root];
        if row == HOST {
            needs.push(Need::Check(netprobe_builds));
            needs.push(Need::Tracefs);
        } else {
            if arch == GuestArch::X86_64 {
                needs.push(Need::Check(netprobe_builds));
            } else {
                // The cross build (rustup's aarch64 target, Debian gcc-aarch64-linux-gnu).
                needs.push(Need::Program(arch.cc()));
                needs.push(Need::Check(netprobe_aarch64_builds));
            }
            needs.push(Need::Program(arch.qemu().0));
            needs.push(Need::Program("apt-get"));
        }
        let r = runs.clone();
        trials.push(e2e::trial(
            &format!("{row}/boots_and_runs_netprobe"),
            &needs,
            move || assert_columns(&row_run(&r, row)?, PLUMBING),
        ));
        // One trial per check, so a check whose netprobe subcommand has not landed is skipped
        // (failed under CI=true) on its own, and every other check still asserts.
        for check in checks::checks_for(arch) {
            let mut check_needs = needs.clone();
            match check.target {
                Some(Target::C {
                    arch: GuestArch::X86_64,
                    ..
                }) => check_needs.push(Need::CCompiler),
                Some(Target::Go {
                    arch: GuestArch::X86_64,
                    ..
                }) => check_needs.push(Need::Go),
                Some(Target::Go { .. }) => {
                    check_needs.push(Need::Path(fixtures::go::toolchain_go(checks::CROSS_GO)))
                }
                Some(Target::C { .. }) | None => {}
            }
            if arch == GuestArch::X86_64 {
                // The x86-64 binary's subcommands (the arm64 agent reports a missing one as a
                // failed run).
                check_needs.extend(harness::binaries::subcommand_need(check.subcommand));
            }
            let r = runs.clone();
            trials.push(e2e::trial(
                &format!("{row}/{}", check.name.replace(' ', "_")),
                &check_needs,
                move || assert_columns(&row_run(&r, row)?, &[check.name]),
            ));
        }
        for col in harness::kernels::expected_columns(arch)
            .into_iter()
            .skip(PLUMBING.len() + checks::checks_for(arch).len())
        {
            let r = runs.clone();
            trials.push(e2e::trial(
                &format!("{row}/{}", col.replace(' ', "_")),
                &needs,
                move || assert_columns(&row_run(&r, row)?, &[col.as_str()]),
            ));
        }
    }
    e2e::run(trials);
}

fn netprobe_aarch64_builds() -> Result<(), String> {
    harness::binaries::netprobe_cross(GuestArch::Aarch64)
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

fn netprobe_builds() -> Result<(), String> {
    harness::binaries::netprobe_release()
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

/// Runs `row` once (whichever trial asks first) and returns its result.
fn row_run(runs: &Shared, row: &str) -> Result<KernelRow, String> {
    let cell = runs
        .lock()
        .map_err(|_| "poisoned")?
        .entry(row.to_string())
        .or_default()
        .clone();
    cell.get_or_init(|| {
        let opts = matrix::MatrixOptions {
            only: vec![row.to_string()],
            harness: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
            boot_limit: Duration::from_secs(600),
        };
        let rows = matrix::run(&opts).map_err(|e| format!("{e:#}"))?;
        let (table, _) = report::render(&rows, report::Style::Terminal { color: false });
        eprintln!("{table}");
        rows.into_iter()
            .next()
            .ok_or_else(|| format!("no row for {row}"))
    })
    .clone()
}

fn assert_columns(row: &KernelRow, cols: &[&str]) -> Result<(), String> {
    let mut failures = Vec::new();
    for col in cols {
        match row.results.iter().find(|r| r.check == *col) {
            Some(r) if r.ok => {}
            Some(r) => failures.push(format!("{col}: {}", r.detail)),
            None => failures.push(format!("{col}: no result")),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} ({}): {}",
            row.name,
            row.release,
            failures.join("; ")
        ))
    }
}
