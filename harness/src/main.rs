//! `harness`: the kernel matrix and the Docker leftovers sweep.
//!
//! - `harness kernels [--kernel NAME]...`: boots each Debian kernel line under QEMU/TCG with
//!   netprobe's checks in the initramfs, runs the same checks on the host, prints the table
//!   kernel × check (exit 1 when a cell is red). `--markdown FILE` also writes it as Markdown.
//! - `harness guest`: the guest agent (run by the initramfs's /init): runs the checks on the
//!   running kernel and prints one `NPRESULT <json>` line each.
//! - `harness sweep`: removes containers/images of harness runs that no longer exist.

use clap::{Parser, Subcommand};
use harness::{docker, kernels, matrix, report};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "harness", about = "netprobe's end-to-end harness")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run netprobe's checks per kernel (Debian kernels under QEMU/TCG, and the host kernel).
    Kernels {
        /// Only these rows (repeatable): debian-6.1, debian-6.12, host. Default: all.
        #[arg(long = "kernel")]
        kernels: Vec<String>,
        /// List the rows and checks and exit.
        #[arg(long)]
        list: bool,
        /// Also write the table as Markdown to this file.
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Seconds allowed per boot (boot, all checks, power-off).
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Colour: auto (when stdout is a terminal), always, never.
        #[arg(long, default_value = "auto")]
        color: String,
    },
    /// Guest agent: run the checks here and print NPRESULT lines (used by the initramfs).
    Guest {
        /// The netprobe binary.
        #[arg(long)]
        netprobe: PathBuf,
        /// Folder holding the targets by key.
        #[arg(long)]
        fixtures: PathBuf,
    },
    /// Remove containers and images left by harness runs that no longer exist.
    Sweep,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Kernels {
            kernels,
            list,
            markdown,
            timeout,
            color,
        } => {
            if list {
                println!("kernels: {}", matrix::all_rows().join(", "));
                for c in harness::checks::KERNEL_CHECKS {
                    println!("check {:<16} {}", c.name, c.what);
                }
                for c in harness::checks::ARM64_CHECKS {
                    println!("arm64 check {:<18} {}", c.name, c.what);
                }
                return ExitCode::SUCCESS;
            }
            let started = Instant::now();
            let harness_bin = match std::env::current_exe() {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("harness: cannot find its own binary: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let opts = matrix::MatrixOptions {
                only: kernels,
                harness: harness_bin,
                boot_limit: Duration::from_secs(timeout),
            };
            let rows = match matrix::run(&opts) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("harness kernels: {e:#}");
                    return ExitCode::FAILURE;
                }
            };
            let color = match color.as_str() {
                "always" => true,
                "never" => false,
                _ => std::io::stdout().is_terminal(),
            };
            let (text, ok) = report::render(&rows, report::Style::Terminal { color });
            print!("{text}");
            for row in &rows {
                println!("{}: {:.1} s", row.name, row.seconds);
            }
            println!("total: {:.1} s", started.elapsed().as_secs_f64());
            if let Some(path) = markdown {
                let (md, _) = report::render(&rows, report::Style::Markdown);
                if let Err(e) = std::fs::write(&path, md) {
                    eprintln!("harness: writing {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Cmd::Guest { netprobe, fixtures } => {
            // Expected values computed on the host (the guest has no binutils).
            let expected: harness::checks::Expected = std::fs::read(fixtures.join("expected.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            let results = kernels::run_here(
                &netprobe,
                &|key| {
                    let p = fixtures.join(key);
                    p.is_file().then_some(p)
                },
                &expected,
            );
            for r in results {
                match serde_json::to_string(&r) {
                    Ok(json) => println!("{}{json}", kernels::RESULT_PREFIX),
                    Err(e) => eprintln!("harness guest: {e}"),
                }
            }
            ExitCode::SUCCESS
        }
        Cmd::Sweep => match docker::ensure_engine().and_then(|_| docker::sweep_dead_owners()) {
            Ok(s) => {
                for c in s.containers {
                    println!("removed container {c}");
                }
                for i in s.images {
                    println!("removed image {i}");
                }
                for r in s.raced {
                    println!("left to the process already removing it: {r}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("harness sweep: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
