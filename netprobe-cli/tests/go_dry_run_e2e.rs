//! `--dry-run` output for Go functions, as insta snapshots (Go and a C compiler; the esbuild
//! builds of scripts/fetch-go-binaries.sh for the stack ABI): the probe lines of the register ABI
//! on the sample app and of the stack ABI on esbuild built by Go 1.15.

use fixtures::e2e::{self, text, Need};
use fixtures::netprobe;
use std::path::Path;
use std::process::Command;

type R = Result<(), String>;

/// Rounds of the Go workload (as in go_trace_e2e.rs).
const ROUNDS: i64 = 5;

fn workload_cmd(bin: &Path) -> String {
    format!("{} workload -n {ROUNDS}", bin.display())
}

fn snapshot(name: &str, value: String, filters: Vec<(String, String)>) -> R {
    let refs: Vec<(&str, &str)> = filters
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let result = std::panic::catch_unwind(|| {
        insta::with_settings!({filters => refs}, {
            insta::assert_snapshot!(name, value);
        });
    });
    result.map_err(|_| "snapshot differs (see above; review with cargo insta review)".into())
}

fn go_version_tag() -> String {
    let out = Command::new("go")
        .arg("env")
        .arg("GOVERSION")
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    out.trim().replace('.', "_")
}

/// The dry-run of a Go trace and latency: post-prologue entry points, every RET, Go ABI
/// registers, r14 pairing, the notes. Offsets depend on the Go release: one snapshot per release.
fn go_dry_run_snapshots() -> R {
    let bin = fixtures::go::sample_app("sampleapp-default");
    let b = bin.display().to_string();
    let filters = vec![
        (fixtures::live::regex_escape(&b), "[SAMPLEAPP]".to_string()),
        (r"netprobe_\d+_\d+".into(), "netprobe_[SESSION]".into()),
    ];
    let trace = netprobe::stdout_ok(&[
        "trace",
        "--dry-run",
        "-c",
        &workload_cmd(&bin),
        &format!("{b}:main.Greet name=gostring times=s64"),
        &format!("{b}:main.BigFrame seed=s64"),
        &format!("r:{b}:main.Classify s64"),
    ])?;
    snapshot(
        &format!("go_trace_dry_run_{}", go_version_tag()),
        trace,
        filters.clone(),
    )?;
    let lat = netprobe::stdout_ok(&[
        "latency",
        "--dry-run",
        "-c",
        &workload_cmd(&bin),
        &format!("{b}:main.Recurse"),
    ])?;
    snapshot(
        &format!("go_latency_dry_run_{}", go_version_tag()),
        lat,
        filters,
    )
}

/// The stack ABI's dry-run (esbuild by Go 1.16): arguments and results from the stack pointer.
fn go_stack_abi_dry_run_snapshot() -> R {
    let bin = fixtures::go::third_party_go_dir().join("esbuild-0.8.57");
    let b = bin.display().to_string();
    let out = netprobe::stdout_ok(&[
        "trace",
        "--dry-run",
        &format!("{b}:os.Getenv key=gostring"),
        &format!("r:{b}:os.Getenv gostring"),
    ])?;
    snapshot(
        "go_stack_abi_dry_run",
        out,
        vec![
            (fixtures::live::regex_escape(&b), "[ESBUILD]".to_string()),
            (r"netprobe_\d+_\d+".into(), "netprobe_[SESSION]".into()),
        ],
    )
}

fn main() {
    let stack_abi: Vec<Need> = ["esbuild-0.7.22", "esbuild-0.8.57"]
        .iter()
        .map(|f| Need::Path(fixtures::go::third_party_go_dir().join(f)))
        .collect();
    e2e::run(vec![
        e2e::trial(
            "go_dry_run_snapshots",
            &[Need::Go, Need::CCompiler],
            go_dry_run_snapshots,
        ),
        e2e::trial(
            "go_stack_abi_dry_run_snapshot",
            &stack_abi,
            go_stack_abi_dry_run_snapshot,
        ),
    ]);
}
