//! `--dry-run` plans of aarch64 binaries on any host, compared with tools netprobe did not
//! write: a C program cross-built by `aarch64-linux-gnu-gcc` (entry probes at the offsets
//! `aarch64-linux-gnu-nm` and the `PT_LOAD` headers of `aarch64-linux-gnu-readelf` give, a raw
//! offset 2 bytes into an instruction refused, an offset on the `ldaxr` and inside the exclusive
//! sequence `aarch64-linux-gnu-objdump -d` shows refused), and the Go sample app built with
//! `GOARCH=arm64` by the oldest and newest fetched toolchains, stripped and not (entry probes
//! after the stack check and RET probes where `go tool objdump` shows the `BLS` and the `RET`s,
//! functions at `go tool nm`'s offsets).

use assert_cmd::Command;
use fixtures::e2e::{self, text, Need};
use std::path::{Path, PathBuf};

type R = Result<(), String>;

fn cc_needs() -> Vec<Need> {
    vec![
        Need::Program(fixtures::build::AARCH64_CC),
        Need::Program("aarch64-linux-gnu-objdump"),
    ]
}

fn c_program() -> PathBuf {
    fixtures::build::CProgram::new("arm64_gate")
        .compiler(fixtures::build::AARCH64_CC)
        .flags(&["-O2", "-mno-outline-atomics"])
        .build()
}

fn tool(program: &str, args: &[&str], file: &Path) -> Result<String, String> {
    let out = std::process::Command::new(program)
        .args(args)
        .arg(file)
        .output()
        .map_err(e2e::err)?;
    e2e::succeeded(out, program).map(|o| text(&o.stdout))
}

/// `(file offset, vaddr, filesz)` of each `PT_LOAD` with `E`, from `readelf -lW`.
fn exec_segments(file: &Path) -> Result<Vec<(u64, u64, u64)>, String> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(e2e::err);
    tool("aarch64-linux-gnu-readelf", &["-lW"], file)?
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD") && l.contains(" E "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Ok((hex(f[1])?, hex(f[2])?, hex(f[4])?))
        })
        .collect()
}

fn file_offset(segments: &[(u64, u64, u64)], vaddr: u64) -> Result<u64, String> {
    segments
        .iter()
        .find(|&&(_, v, z)| vaddr >= v && vaddr - v < z)
        .map(|&(o, v, _)| o + (vaddr - v))
        .ok_or_else(|| format!("{vaddr:#x} lies in no executable PT_LOAD"))
}

/// The offsets of the `p:` lines of a dry-run script whose event names contain `name`.
fn planned_offsets(script: &str, name: &str) -> Vec<u64> {
    script
        .lines()
        .filter(|l| l.starts_with("echo 'p:") || l.starts_with("printf '%s\\n' 'p:"))
        .filter(|l| l.contains(name))
        .filter_map(|l| {
            let at = l.split_whitespace().find(|w| w.contains(":0x"))?;
            u64::from_str_radix(at.rsplit(":0x").next()?, 16).ok()
        })
        .collect()
}

fn dry_run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(fixtures::netprobe::bin())
        .args(["trace", "--dry-run"])
        .args(args)
        .output()
        .map_err(e2e::err)?;
    e2e::succeeded(out, &args.join(" ")).map(|o| text(&o.stdout))
}

/// A refused dry-run: exit 1, and the error is one line on stderr containing `want`.
fn refused(spec: &str, want: &str) -> R {
    let out = Command::new(fixtures::netprobe::bin())
        .args(["trace", "--dry-run", spec])
        .output()
        .map_err(e2e::err)?;
    let stderr = text(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error:")).collect();
    if out.status.code() != Some(1) || errors.len() != 1 || !errors[0].contains(want) {
        return Err(format!(
            "{spec}: expected exit 1 and one error line with {want:?}, got {:?}:\n{stderr}",
            out.status
        ));
    }
    Ok(())
}

fn c_entries_at_nm_offsets() -> R {
    let bin = c_program();
    let b = bin.display().to_string();
    let segments = exec_segments(&bin)?;
    let nm = tool("aarch64-linux-gnu-nm", &[], &bin)?;
    for f in ["gate_add", "gate_pick", "gate_bump"] {
        let vaddr = nm
            .lines()
            .find(|l| l.ends_with(&format!(" T {f}")))
            .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
            .ok_or_else(|| format!("nm lists no {f}"))?;
        let want = file_offset(&segments, vaddr)?;
        let script = dry_run(&["--exact-entry", &format!("{b}:{f}")])?;
        let got = planned_offsets(&script, f);
        if got != vec![want] {
            return Err(format!(
                "{f}: planned {got:x?}, nm and readelf say {want:#x}\n{script}"
            ));
        }
    }
    Ok(())
}

fn c_bad_offsets_refused() -> R {
    let bin = c_program();
    let b = bin.display().to_string();
    let segments = exec_segments(&bin)?;
    let dump = tool("aarch64-linux-gnu-objdump", &["-d"], &bin)?;
    let addr_of = |mnemonic: &str| -> Result<u64, String> {
        dump.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(mnemonic))
            .and_then(|l| u64::from_str_radix(l.split(':').next()?.trim(), 16).ok())
            .ok_or_else(|| format!("objdump shows no {mnemonic}"))
    };
    let ldaxr = file_offset(&segments, addr_of("ldaxr")?)?;
    let stlxr = file_offset(&segments, addr_of("stlxr")?)?;
    refused(
        &format!("{b}:{:#x}", ldaxr + 2),
        "not an instruction boundary",
    )?;
    refused(&format!("{b}:{ldaxr:#x}"), "exclusive load or store")?;
    // The `add` between the ldaxr and the stlxr: inside the exclusive sequence.
    refused(&format!("{b}:{:#x}", ldaxr + 4), "exclusive sequence")?;
    // After the stlxr (`cbnz`): accepted.
    let script = dry_run(&[&format!("{b}:{:#x}", stlxr + 4)])?;
    if planned_offsets(&script, "0x").len() != 1 {
        return Err(format!(
            "the cbnz after the stlxr was not planned:\n{script}"
        ));
    }
    Ok(())
}

/// The Go sample app for arm64 by `version`, and a copy stripped by binutils (same code).
fn go_builds(version: &str) -> Result<(PathBuf, PathBuf), String> {
    let bin = fixtures::go::sample_app_arm64(version)?;
    let stripped = bin.with_file_name(format!(
        "{}-stripped",
        bin.file_name().unwrap().to_string_lossy()
    ));
    if !stripped.exists() {
        let tmp = fixtures::build::unique_tmp(bin.parent().unwrap(), "arm64-stripped");
        tool(
            "aarch64-linux-gnu-strip",
            &["-o", &tmp.display().to_string()],
            &bin,
        )?;
        fixtures::build::put_in_place(&tmp, &stripped);
    }
    Ok((bin, stripped))
}

fn go_tool(version: &str, args: &[&str], bin: &Path) -> Result<String, String> {
    let go = fixtures::go::toolchain_go(version);
    let goroot = go.parent().and_then(Path::parent).ok_or("no GOROOT")?;
    let out = std::process::Command::new(&go)
        .arg("tool")
        .args(args)
        .arg(bin)
        .env("GOROOT", goroot)
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(e2e::err)?;
    e2e::succeeded(out, "go tool").map(|o| text(&o.stdout))
}

/// `go tool objdump -s '^FUNC$'`: (address, mnemonic) of each instruction.
fn go_objdump(version: &str, bin: &Path, func: &str) -> Result<Vec<(u64, String)>, String> {
    let pattern = format!("^{}$", func.replace('.', "\\."));
    Ok(go_tool(version, &["objdump", "-s", &pattern], bin)?
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let a = u64::from_str_radix(f.get(1)?.trim_start_matches("0x"), 16).ok()?;
            Some((a, f.get(3)?.to_string()))
        })
        .collect())
}

fn go_plan_matches_go_tools(version: &'static str) -> R {
    let (bin, stripped) = go_builds(version)?;
    let segments = exec_segments(&bin)?;
    let nm = go_tool(version, &["nm"], &bin)?;
    for func in ["main.Fib", "main.Recurse", "main.BigFrame"] {
        let code = go_objdump(version, &bin, func)?;
        let entry = code
            .first()
            .ok_or_else(|| format!("objdump shows no {func}"))?
            .0;
        let listed = nm.lines().any(|l| {
            l.ends_with(&format!(" T {func}")) && l.trim_start().starts_with(&format!("{entry:x}"))
        });
        if !listed {
            return Err(format!("go tool nm does not list {func} at {entry:#x}"));
        }
        // The entry probe: after the stack check's BLS when there is one, else the entry.
        let bls = code
            .iter()
            .take(8)
            .find(|(_, m)| m == "BLS")
            .map(|&(a, _)| a);
        let want_entry = file_offset(&segments, bls.map_or(entry, |a| a + 4))?;
        let mut want_rets: Vec<u64> = code
            .iter()
            .filter(|(_, m)| m == "RET")
            .map(|&(a, _)| file_offset(&segments, a))
            .collect::<Result<_, _>>()?;
        want_rets.sort_unstable();
        for file in [&bin, &stripped] {
            let f = file.display().to_string();
            let script = dry_run(&[&format!("{f}:{func}"), &format!("r:{f}:{func}")])?;
            let event = func.replace('.', "_");
            let entries = planned_offsets(&script, &format!("{event}_e"));
            let mut rets = planned_offsets(&script, &format!("{event}_r"));
            rets.sort_unstable();
            if entries != vec![want_entry] || rets != want_rets {
                return Err(format!(
                    "{func} in {f}: planned entry {entries:x?} and returns {rets:x?}; go tool objdump says {want_entry:#x} and {want_rets:x?}\n{script}"
                ));
            }
        }
    }
    // A raw offset 2 bytes into main.Recurse's first instruction.
    let recurse = go_objdump(version, &bin, "main.Recurse")?[0].0;
    let f = stripped.display().to_string();
    refused(
        &format!("{f}:{:#x}", file_offset(&segments, recurse)? + 2),
        "not an instruction boundary",
    )
}

fn main() {
    let mut trials = vec![
        e2e::trial(
            "c_entries_at_nm_offsets",
            &cc_needs(),
            c_entries_at_nm_offsets,
        ),
        e2e::trial("c_bad_offsets_refused", &cc_needs(), c_bad_offsets_refused),
    ];
    for version in fixtures::go::SHORT_MATRIX {
        let mut needs = cc_needs();
        needs.push(Need::Path(fixtures::go::toolchain_go(version)));
        trials.push(e2e::trial(
            &format!("go{version}_arm64_plan_matches_go_tools"),
            &needs,
            move || go_plan_matches_go_tools(version),
        ));
    }
    e2e::run(trials)
}
