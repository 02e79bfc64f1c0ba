//! Where netprobe places .NET probes, on the real Microsoft runtimes and the C# sample app
//! ([`dotnet_app`]): `--dry-run` as a snapshot, an IL-only method explained, an entry probe moved
//! past the first byte hits as the first byte would, and a mutated ReadyToRun entry refused.
//!
//! Needs root, tracefs, `mcs` and the runtimes; a missing one skips a trial outside CI and fails
//! it under CI=true.

mod dotnet_app;

use dotnet_app::{
    all, entries, per_runtime, start_app, trace_app, Runtime, REPLACE, SLEEP, TRACEFS,
};
use fixtures::e2e::{self, err, Need};
use fixtures::netprobe;
use fixtures::objdump::CodeAt;

/// The app's own methods are IL-only (mcs): asking for one gives the JIT explanation as one line,
/// with -p (bare pattern and IMAGE:PATTERN) and with -c, and leaves nothing behind.
fn il_only_app_method_is_explained(rt: Runtime) -> Result<(), String> {
    let app = start_app(rt, &["echo", "x"], &[])?;
    let pid = app.pid.to_string();
    let cmd = rt.command("echo x");
    let cases: Vec<Vec<&str>> = vec![
        vec!["trace", "-p", &pid, "EchoProvider::calculateEchoValue"],
        vec![
            "trace",
            "-p",
            &pid,
            "sample-netcore-app.dll:EchoProvider::calculateEchoValue",
        ],
        vec!["count", "-c", &cmd, "EchoProvider::calculateEchoValue"],
    ];
    for args in cases {
        let out = netprobe::command().args(&args).output().map_err(err)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("netprobe: error:"))
            .collect();
        let ok = out.status.code() == Some(1)
            && errors.len() == 1
            && errors[0].contains("sample_netcore_app.Providers.EchoProvider::calculateEchoValue(string) cannot be probed")
            && errors[0].contains("IL-only")
            && errors[0].contains("JIT-compiled")
            && errors[0].contains("dotnet publish -p:PublishReadyToRun=true")
            && !stderr.contains("probe(s) on");
        if !ok {
            return Err(format!("{args:?}: {:?} {stderr}", out.status));
        }
    }
    app.go_and_wait()?;
    Ok(())
}

/// Snapshot of the dry-run for `-c` with framework resolution (no root needed): the probe lines
/// with the offsets netprobe computes for this runtime's CoreLib, the arguments typed from the
/// signatures, RET probes for returns, the perf commands, and why there is no bpftrace program.
fn dry_run_snapshot(rt: Runtime) -> Result<(), String> {
    let out = netprobe::command()
        .args([
            "trace",
            "--dry-run",
            "-c",
            &rt.command("strings"),
            REPLACE,
            &format!("r:{REPLACE}"),
            SLEEP,
            // A double takes an XMM register, not an integer one: digits is in %di.
            "System.Math::Round(float64,int32)",
        ])
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let cache = fixtures::cache_dir().display().to_string();
    let text = format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    insta::with_settings!({filters => vec![
        (fixtures::live::regex_escape(&cache).as_str(), "[CACHE]"),
        (r"netprobe_\d+(_\d+)?", "netprobe_[PID]"),
    ]}, {
        insta::assert_snapshot!(format!("dry_run_{}", rt.tag), text);
    });
    Ok(())
}

const IS_NULL_OR_EMPTY: &str = "System.String::IsNullOrEmpty(string)";

/// The entry probe offset `netprobe trace --dry-run [--exact-entry]` places on
/// `String::IsNullOrEmpty(string)` of the runtime's CoreLib, and the perf line's comment.
fn is_null_or_empty_probe(rt: Runtime, exact: bool) -> Result<(u64, String), String> {
    let spec = format!("{}:{IS_NULL_OR_EMPTY}", rt.corelib().display());
    let mut args = vec!["trace", "--dry-run"];
    if exact {
        args.push("--exact-entry");
    }
    args.push(&spec);
    let out = netprobe::command().args(&args).output().map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("perf probe -x"))
        .ok_or_else(|| {
            format!(
                "no perf line: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let (_, rest) = line.split_once("__e0=0x").ok_or(line.to_string())?;
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    let comment = line.split_once("  # ").map_or("", |(_, c)| c).to_string();
    Ok((u64::from_str_radix(&hex, 16).map_err(err)?, comment))
}

/// An entry probe on a ReadyToRun method moved to the first instruction the kernel emulates
/// (CoreLib 8.0.4's `String::IsNullOrEmpty(string)`: `test rdi, rdi` single-stepped, then `je`)
/// hits once per call with the argument the app passed, exactly as the probe on the first byte
/// (`--exact-entry`) does. Where each probe sits is read from `--dry-run` and decoded by
/// objdump; on runtimes whose method starts otherwise the hits must still agree.
fn moved_entry_probe_hits_as_the_first_byte(rt: Runtime) -> Result<(), String> {
    let (moved, comment) = is_null_or_empty_probe(rt, false)?;
    let (first, _) = is_null_or_empty_probe(rt, true)?;
    let corelib = rt.corelib();
    let at_first = fixtures::objdump::mnemonic(&corelib, CodeAt::FileOffset(first))?;
    let at_moved = fixtures::objdump::mnemonic(&corelib, CodeAt::FileOffset(moved))?;
    if rt.version == "8.0.4"
        && (moved != first + 3
            || at_first != "test"
            || at_moved != "je"
            || !comment.contains("je, emulated"))
    {
        return Err(format!(
            "want +0x3 (je) instead of +0x0 (test): {first:#x} {at_first}, {moved:#x} {at_moved}, {comment}"
        ));
    }
    let values = ["np-empty-1", "", "np-empty-ü✓"];
    let rounds = 4;
    for exact in [false, true] {
        let mut np_args = vec!["trace", "--json", IS_NULL_OR_EMPTY];
        if exact {
            np_args.push("--exact-entry");
        }
        let (hits, stderr, app_out) = trace_app(
            rt,
            &["empty", "--count", &rounds.to_string()],
            &[(rt.guard_var(), "0")],
            &np_args,
        )?;
        if !app_out.contains(&format!("done calls={}", rounds * values.len())) {
            return Err(format!("app: {app_out}"));
        }
        // The runtime may call the method itself; the app's calls are the hits with its values.
        let ours: Vec<String> = entries(&hits, IS_NULL_OR_EMPTY)
            .iter()
            .filter_map(|h| h["args"]["value"].as_str())
            .filter(|v| values.contains(v))
            .map(str::to_string)
            .collect();
        let want: Vec<String> = (0..rounds)
            .flat_map(|_| values.iter().map(|v| v.to_string()))
            .collect();
        if ours != want {
            return Err(format!(
                "exact entry {exact} at {:#x}: hits {ours:?}, want {want:?}; {stderr}",
                if exact { first } else { moved }
            ));
        }
    }
    Ok(())
}

/// A copy of the runtime's System.Console.dll whose RUNTIME_FUNCTIONS entry puts a method's
/// entry one byte into its first instruction (`Assembly::runtime_function_file_offset`): the
/// image still lists the method, and `probe add` and `trace --dry-run` refuse its probes with
/// one line naming it, exit 1, and leave nothing in `uprobe_events`.
fn mutated_r2r_entry_refused(rt: Runtime) -> Result<(), String> {
    use netprobe_core::dotnet::{Assembly, EntryKind};
    let original = rt.corelib().with_file_name("System.Console.dll");
    let dir = tempfile::tempdir().map_err(err)?;
    let copy = dir.path().join("System.Console.dll");
    let mut bytes = std::fs::read(&original).map_err(err)?;
    let asm = Assembly::open(&original).map_err(err)?;
    let methods = asm.methods().map_err(err)?;
    let m = methods
        .iter()
        .filter(|m| m.entry == EntryKind::MethodDef)
        .filter(|m| {
            let short = m.short_name();
            !short.contains(' ') && methods.iter().filter(|n| n.short_name() == short).count() == 1
        })
        .find(|m| {
            m.file_offset.is_some_and(|o| {
                netprobe_core::arch::x86_64::instructions(
                    &bytes[o.0 as usize..],
                    netprobe_core::addr::VirtAddr(0),
                )
                .next()
                .is_some_and(|i| i.len() >= 2)
            })
        })
        .ok_or("no method starts with an instruction longer than a byte")?;
    let at = asm
        .runtime_function_file_offset(m.runtime_function)
        .ok_or("RUNTIME_FUNCTION outside the file")?
        .0 as usize;
    let begin = u32::from_le_bytes(bytes[at..at + 4].try_into().map_err(err)?);
    bytes[at..at + 4].copy_from_slice(&(begin + 1).to_le_bytes());
    std::fs::write(&copy, &bytes).map_err(err)?;
    let moved = Assembly::open(&copy)
        .and_then(|a| a.methods())
        .map_err(err)?
        .into_iter()
        .find(|n| n.name == m.name)
        .map(|n| n.rva.0);
    if moved != Some(m.rva.0 + 1) {
        return Err(format!("{}: entry not moved ({moved:?})", m.name));
    }
    let path = copy.display().to_string();
    let spec = format!("{path}:{}", m.short_name());
    for args in [
        vec!["probe", "add", "--group", "nptest_dotnet_gate", &spec],
        vec!["trace", "--dry-run", &spec],
    ] {
        let out = netprobe::command().args(&args).output().map_err(err)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("netprobe: error"))
            .collect();
        if out.status.code() != Some(1)
            || errors.len() != 1
            || !errors[0].contains("refusing the probe on ")
            || !errors[0].contains(&format!("at {path}:0x"))
            || !errors[0].contains("ReadyToRun RUNTIME_FUNCTIONS")
        {
            return Err(format!("{args:?}: {:?}\n{stderr}", out.status));
        }
        let events = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
        if events.contains(&path) {
            return Err(format!("{args:?} left probes: {events}"));
        }
    }
    Ok(())
}

fn main() {
    e2e::run(per_runtime(&[
        (
            "il_only_app_method_is_explained",
            il_only_app_method_is_explained,
            all,
        ),
        ("dry_run_snapshot", dry_run_snapshot, |rt| {
            rt.needs()[2..].to_vec()
        }),
        (
            "mutated_r2r_entry_refused",
            mutated_r2r_entry_refused,
            |rt| vec![Need::Root, Need::Tracefs, Need::Path(rt.corelib())],
        ),
        (
            "moved_entry_probe_hits_as_the_first_byte",
            moved_entry_probe_hits_as_the_first_byte,
            all,
        ),
    ]));
}
