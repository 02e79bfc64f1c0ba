//! End-to-end tests of .NET tracing on the real Microsoft runtimes (.NET 8.0.4 and .NET Core
//! 3.1.23, fetched by `sample-app/dotnet/fetch-runtimes.sh`; .NET 9.0.5 by
//! `sample-app/dotnet/fetch-net9-nativeaot.sh`) and the C# sample app
//! (`sample-app/dotnet`, built with Debian's `mcs`). Every assertion is about real kernel hits:
//! counts equal the calls the app made (it prints them), arguments equal the values it passed.
//!
//! Needs root, tracefs, `mcs` and the runtimes; a missing one skips a trial outside CI and fails
//! it under CI=true.

use fixtures::e2e::{self, err, json_lines, Need};
use fixtures::live::{free_loopback_port, http_get, DotnetSampleApp};
use fixtures::objdump::CodeAt;
use serde_json::Value as Json;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NP: &str = env!("CARGO_BIN_EXE_netprobe");
const TRACEFS: &str = "/sys/kernel/tracing";
const SLEEP: &str = "System.Threading.Thread::Sleep(int32)";
const REPLACE: &str = "System.String::Replace(string,string)";

#[derive(Clone, Copy, Debug)]
struct Runtime {
    major: &'static str,
    version: &'static str,
    tfm: &'static str,
    /// Suffix of trial names.
    tag: &'static str,
}

const NET8: Runtime = Runtime {
    major: "8",
    version: "8.0.4",
    tfm: "net8.0",
    tag: "net8",
};
/// .NET 9.0.5: the runtime root `sample-app/dotnet/fetch-net9-nativeaot.sh` builds from the files
/// of a self-contained .NET 9 app (npm `@azure/mcp-linux-x64@0.5.0`).
const NET9: Runtime = Runtime {
    major: "9",
    version: "9.0.5",
    tfm: "net9.0",
    tag: "net9",
};
const NET31: Runtime = Runtime {
    major: "3.1",
    version: "3.1.23",
    tfm: "netcoreapp3.1",
    tag: "netcore31",
};

impl Runtime {
    fn root(&self) -> PathBuf {
        fixtures::cache_dir().join("dotnet").join(self.major)
    }
    fn dotnet(&self) -> PathBuf {
        self.root().join("dotnet")
    }
    fn corelib(&self) -> PathBuf {
        self.root()
            .join("shared/Microsoft.NETCore.App")
            .join(self.version)
            .join("System.Private.CoreLib.dll")
    }
    fn app(&self) -> PathBuf {
        fixtures::cache_dir()
            .join("sample-app-dotnet")
            .join(self.tfm)
            .join("sample-netcore-app.dll")
    }
    fn needs(&self) -> Vec<Need> {
        vec![
            Need::Root,
            Need::Tracefs,
            Need::Program("mcs"),
            Need::Path(self.corelib()),
        ]
    }
    /// The variable that keeps ReadyToRun code on this runtime (3.1 reads only `COMPlus_`).
    fn guard_var(&self) -> &'static str {
        if self.major == "3.1" {
            "COMPlus_TieredCompilation"
        } else {
            "DOTNET_TieredCompilation"
        }
    }
    /// The command line that runs the sample app (for `-c`).
    fn command(&self, mode_args: &str) -> String {
        format!(
            "{} {} {mode_args}",
            self.dotnet().display(),
            self.app().display()
        )
    }
}

/// Builds the sample app for `rt` (run.sh rebuilds only when a source changed).
fn build_app(rt: Runtime) -> Result<(), String> {
    let script = fixtures::workspace_root().join("sample-app/dotnet/run.sh");
    let out = Command::new(script)
        .args(["--runtime", rt.major, "--build-only"])
        .output()
        .map_err(err)?;
    if !out.status.success() {
        return Err(format!(
            "building the sample app failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The sample app started with `--wait`: running, its pid known, waiting for "go".
type App = DotnetSampleApp;

/// Starts `dotnet app.dll ARGS --wait` with `env` added (and the invariant globalization mode
/// this machine needs).
fn start_app(rt: Runtime, args: &[&str], env: &[(&str, &str)]) -> Result<App, String> {
    let mut cmd = Command::new(rt.dotnet());
    cmd.arg(rt.app())
        .args(args)
        .arg("--wait")
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    DotnetSampleApp::start(&mut cmd)
}

/// A netprobe run in the background, its stderr collected.
struct Netprobe {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
}

impl Netprobe {
    /// Starts `netprobe ARGS` and waits until its probes are live (or it failed).
    fn start(args: &[String]) -> Result<Netprobe, String> {
        let (child, h) = fixtures::live::spawn_until_live(
            Command::new(NP)
                .args(args)
                // For -c commands (no ICU on this machine kind).
                .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1"),
            Duration::from_secs(60),
        )?;
        Ok(Netprobe { child, stderr: h })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for netprobe to end by itself (the target exited); returns stdout, stderr.
    fn wait(mut self) -> Result<(String, String), String> {
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut out).map_err(err)?;
        }
        let status = self.child.wait().map_err(err)?;
        let stderr = self.stderr.join().unwrap_or_default();
        if !status.success() {
            return Err(format!("netprobe failed ({status}): {stderr}"));
        }
        Ok((out, stderr))
    }
}

fn entries<'a>(hits: &'a [Json], function: &str) -> Vec<&'a Json> {
    hits.iter()
        .filter(|h| h["event"] == "entry" && h["function"] == function)
        .collect()
}

/// `netprobe trace --json -p PID SPECS` around an app run; returns the hits, netprobe's stderr
/// and the app's output.
fn trace_app(
    rt: Runtime,
    app_args: &[&str],
    env: &[(&str, &str)],
    np_args: &[&str],
) -> Result<(Vec<Json>, String, String), String> {
    let app = start_app(rt, app_args, env)?;
    let mut args: Vec<String> = np_args.iter().map(|s| s.to_string()).collect();
    args.extend([
        "-p".into(),
        app.pid.to_string(),
        "--duration".into(),
        "90s".into(),
    ]);
    let np = Netprobe::start(&args)?;
    let np_pid = np.pid();
    let app_out = app.go_and_wait()?;
    let (out, stderr) = np.wait()?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    Ok((json_lines(&out), stderr, app_out))
}

fn no_tiering_messages(stderr: &str) -> Result<(), String> {
    if stderr.contains("tiered compilation on") || stderr.contains("stopped after") {
        return Err(format!(
            "tiering message although the guard is set: {stderr}"
        ));
    }
    Ok(())
}

/// `netprobe trace -p PID 'System.Threading.Thread::Sleep'` (the bare pattern, searched in every
/// image the process maps; both overloads match) with the guard variable set on the target: one
/// hit of `Sleep(int32)` per call, each with the value passed, none of `Sleep(TimeSpan)`.
fn sleep_hits_every_call_with_the_env_guard(rt: Runtime) -> Result<(), String> {
    let (hits, stderr, app_out) = trace_app(
        rt,
        &["sleep", "--count", "40", "--ms", "7"],
        &[(rt.guard_var(), "0")],
        &["trace", "--json", "System.Threading.Thread::Sleep"],
    )?;
    if !app_out.contains("done calls=40") {
        return Err(format!("app: {app_out}"));
    }
    let calls = entries(&hits, SLEEP);
    if calls.len() != 40 || hits.len() != 40 {
        return Err(format!(
            "{} hits of Sleep(int32), {} in all, for 40 calls; stderr: {stderr}",
            calls.len(),
            hits.len()
        ));
    }
    for h in &calls {
        if h["args"]["millisecondsTimeout"] != 7 {
            return Err(format!("wrong argument: {h}"));
        }
    }
    no_tiering_messages(&stderr)
}

/// `count -c ... --keep-r2r 'System.Private.CoreLib.dll:...'` (an assembly named as IMAGE before
/// the app runs): netprobe sets the variables for the command; every call counts.
fn keep_r2r_counts_every_call_in_command_mode(rt: Runtime) -> Result<(), String> {
    let out = Command::new(NP)
        .args([
            "count",
            "--json",
            "--keep-r2r",
            "--duration",
            "90s",
            "-c",
            &rt.command("sleep --count 60 --ms 3"),
            &format!("System.Private.CoreLib.dll:{SLEEP}"),
        ])
        .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
        .output()
        .map_err(err)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !stdout.contains("done calls=60") {
        return Err(format!("{:?}: {stdout} {stderr}", out.status));
    }
    let last = json_lines(stdout.as_bytes())
        .pop()
        .ok_or("no JSON output")?;
    if last["counts"][SLEEP] != 60 || last["complete"] != true {
        return Err(format!("{last}; stderr {stderr}"));
    }
    if !stderr.contains(
        "--keep-r2r: the command runs with DOTNET_TieredCompilation=0 COMPlus_TieredCompilation=0",
    ) {
        return Err(format!("no --keep-r2r note: {stderr}"));
    }
    no_tiering_messages(&stderr)
}

/// `String::Replace(string,string)`: `this`, `oldValue`, `newValue` and the returned string
/// decoded from the objects, an ASCII, a non-ASCII and a 100-char value (cut at 64, reported).
fn strings_are_decoded(rt: Runtime) -> Result<(), String> {
    let (hits, stderr, app_out) = trace_app(
        rt,
        &["strings", "--count", "2"],
        &[(rt.guard_var(), "0")],
        &["trace", "--json", REPLACE, &format!("r:{REPLACE}")],
    )?;
    if !app_out.contains("done calls=6") {
        return Err(format!("app: {app_out}"));
    }
    let long: String = "x".repeat(90) + "0123456789";
    let values = [
        "hello netprobe",
        "héllo wörld ✓ 日本語 Ünïcödé",
        long.as_str(),
    ];
    // What the kernel's 64-unit window shows of each value.
    let expect = |v: &str| -> Json {
        let units: Vec<u16> = v.encode_utf16().collect();
        if units.len() <= 64 {
            Json::String(v.to_string())
        } else {
            serde_json::json!({
                "text": String::from_utf16_lossy(&units[..64]),
                "truncated": true,
                "length": units.len(),
            })
        }
    };
    let calls = entries(&hits, REPLACE);
    let returns: Vec<&Json> = hits
        .iter()
        .filter(|h| h["event"] == "return" && h["function"] == REPLACE)
        .collect();
    if calls.len() != 6 || returns.len() != 6 {
        return Err(format!(
            "{} entries, {} returns for 6 calls: {hits:?} {stderr}",
            calls.len(),
            returns.len()
        ));
    }
    for (i, (call, ret)) in calls.iter().zip(&returns).enumerate() {
        let v = values[i % 3];
        let a = &call["args"];
        if a["this"] != expect(v) || a["newValue"] != expect(v) || a["oldValue"] != "needle" {
            return Err(format!("call {i}: expected {v:?}, got {call}"));
        }
        // No "needle" in the value: Replace returns the same string.
        if ret["retval"] != expect(v) {
            return Err(format!("return {i}: expected {v:?}, got {ret}"));
        }
    }
    no_tiering_messages(&stderr)
}

/// `System.DateTime::.ctor(int32 x7)`: with `this` that is eight integer arguments, so `second`
/// and `millisecond` are on the stack at entry (`+8(%sp)`, `+16(%sp)`, System V AMD64 ABI
/// 3.2.3): every call hits once with all seven values the app passed.
fn stack_arguments_are_decoded(rt: Runtime) -> Result<(), String> {
    const CTOR: &str = "System.DateTime::.ctor(int32,int32,int32,int32,int32,int32,int32)";
    const N: i64 = 9;
    let (hits, stderr, app_out) = trace_app(
        rt,
        &["dates", "--count", &N.to_string(), "--call", "reflection"],
        &[(rt.guard_var(), "0")],
        &["trace", "--json", CTOR],
    )?;
    if !app_out.contains(&format!("done calls={N}")) {
        return Err(format!("app: {app_out}"));
    }
    let names = [
        "year",
        "month",
        "day",
        "hour",
        "minute",
        "second",
        "millisecond",
    ];
    let got: Vec<Vec<i64>> = entries(&hits, CTOR)
        .iter()
        .map(|h| {
            names
                .iter()
                .map(|k| h["args"][*k].as_i64().unwrap_or(i64::MIN))
                .collect()
        })
        .collect();
    let want: Vec<Vec<i64>> = (1..=N)
        .map(|i| {
            vec![
                2000 + i,
                1 + i % 12,
                1 + i % 28,
                i % 24,
                i % 60,
                (7 * i) % 60,
                (13 * i) % 1000,
            ]
        })
        .collect();
    if got != want {
        return Err(format!("got {got:?}, want {want:?}; {stderr}"));
    }
    Ok(())
}

/// Default settings: the warning names the variable this runtime reads, and once the runtime
/// swaps in tier-1 code (hits stop while the app keeps calling) netprobe says so, once.
fn default_tiering_warns_and_says_hits_stopped(rt: Runtime) -> Result<(), String> {
    let app = start_app(rt, &["sleep", "--count", "400", "--ms", "10"], &[])?;
    let np = Netprobe::start(&[
        "count".into(),
        "--json".into(),
        "-p".into(),
        app.pid.to_string(),
        "--duration".into(),
        "90s".into(),
        SLEEP.into(),
    ])?;
    let np_pid = np.pid();
    let app_out = app.go_and_wait()?;
    let (out, stderr) = np.wait()?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    if !app_out.contains("done calls=400") {
        return Err(format!("app: {app_out}"));
    }
    let var = format!("{}=0", rt.guard_var());
    let warning = stderr
        .lines()
        .find(|l| l.contains("runs with tiered compilation on (the default)"))
        .ok_or_else(|| format!("no tiering warning: {stderr}"))?;
    if !warning.contains(&var) {
        return Err(format!("warning does not name {var}: {warning}"));
    }
    if rt.major == "3.1"
        && (!warning.contains("reads only COMPlus_") || warning.contains("DOTNET_"))
    {
        return Err(format!("3.1 warning must name COMPlus_ only: {warning}"));
    }
    let stopped: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(&format!("hits on {SLEEP} stopped after")))
        .collect();
    if stopped.len() != 1 || !stopped[0].contains("tiered compilation") {
        return Err(format!("expected one hits-stopped message: {stderr}"));
    }
    let counted = json_lines(&out)
        .pop()
        .and_then(|l| l["counts"][SLEEP].as_u64())
        .ok_or_else(|| format!("no count: {out}"))?;
    if counted == 0 || counted >= 400 {
        return Err(format!(
            "{counted} hits of 400 calls: tiering did not replace the code?"
        ));
    }
    eprintln!(
        "  {}: {counted} of 400 calls hit before tier-1 code replaced the R2R code",
        rt.tag
    );
    Ok(())
}

/// `latency` on a managed method while garbage collections walk the caller's stack: returns are
/// observed by uprobes on the RET instructions (a uretprobe's replaced return address crashes the
/// runtime's stack walk: SIGSEGV on the first collection, verified on both runtimes), so every
/// call completes and the app survives.
fn latency_survives_garbage_collections(rt: Runtime) -> Result<(), String> {
    let app = start_app(
        rt,
        &["sleep", "--count", "60", "--ms", "2", "--gc"],
        &[(rt.guard_var(), "0")],
    )?;
    let np = Netprobe::start(&[
        "latency".into(),
        "--json".into(),
        "-p".into(),
        app.pid.to_string(),
        "--duration".into(),
        "90s".into(),
        SLEEP.into(),
    ])?;
    let np_pid = np.pid();
    let app_out = app.go_and_wait()?;
    let (out, stderr) = np.wait()?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    let collections: u64 = app_out
        .lines()
        .find_map(|l| l.strip_prefix("collections="))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("app: {app_out}"))?;
    if !app_out.contains("done calls=60") || collections < 10 {
        return Err(format!("app: {app_out}"));
    }
    let report = json_lines(&out)
        .into_iter()
        .find(|l| l["function"] == SLEEP)
        .ok_or_else(|| format!("no latency report: {out} {stderr}"))?;
    if report["count"] != 60 {
        return Err(format!("{report}: expected 60 completed calls; {stderr}"));
    }
    eprintln!(
        "  {}: 60 calls timed during {collections} collections",
        rt.tag
    );
    Ok(())
}

/// The HTTP service: every `GET /echo/{value}` passes `Uri.UnescapeDataString(value)` and then
/// `String.Concat(echoed, "\n")` (both precompiled framework methods, not inlined); N requests
/// give exactly N hits of each with the value.
fn http_echo_requests_hit_with_the_value(rt: Runtime) -> Result<(), String> {
    const N: usize = 12;
    let value = "héllo wörld ✓";
    let encoded = "h%C3%A9llo%20w%C3%B6rld%20%E2%9C%93";
    let port = free_loopback_port()?;
    let np = Netprobe::start(&[
        "trace".into(),
        "--json".into(),
        "--keep-r2r".into(),
        "--duration".into(),
        "90s".into(),
        "-c".into(),
        rt.command(&format!("serve --port {port} --max-requests {}", N + 1)),
        "System.Private.Uri.dll:System.Uri::UnescapeDataString(string)".into(),
        "System.String::Concat(string,string)".into(),
    ])?;
    let np_pid = np.pid();
    // The service is up when /health answers (that request counts toward --max-requests).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match http_get(port, "/health") {
            Ok(b) if b.trim() == "ok" => break,
            _ if Instant::now() > deadline => return Err("service did not come up".into()),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    for _ in 0..N {
        let body = http_get(port, &format!("/echo/{encoded}"))?;
        if body.trim_end() != value {
            return Err(format!("echo answered {body:?}"));
        }
    }
    let (out, stderr) = np.wait()?;
    if let Some(l) = fixtures::live::leftovers(TRACEFS, np_pid) {
        return Err(l);
    }
    let hits = json_lines(&out);
    let unescape = entries(&hits, "System.Uri::UnescapeDataString(string)");
    // Concat(string,string) also runs elsewhere; the echo's call has the value first.
    let concat: Vec<&Json> = entries(&hits, "System.String::Concat(string,string)")
        .into_iter()
        .filter(|h| h["args"]["str0"] == value)
        .collect();
    if unescape.len() != N
        || unescape
            .iter()
            .any(|h| h["args"]["stringToUnescape"] != encoded)
    {
        return Err(format!(
            "UnescapeDataString: {} hits for {N} requests: {unescape:?} {stderr}",
            unescape.len()
        ));
    }
    if concat.len() != N || concat.iter().any(|h| h["args"]["str1"] != "\n") {
        return Err(format!(
            "Concat with the echoed value: {} hits for {N} requests: {concat:?} {stderr}",
            concat.len()
        ));
    }
    Ok(())
}

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
        let out = Command::new(NP).args(&args).output().map_err(err)?;
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
    let out = Command::new(NP)
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
    let out = Command::new(NP).args(&args).output().map_err(err)?;
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

/// Snapshot of `trace` text output on real hits (times and pids filtered).
fn trace_text_snapshot(rt: Runtime) -> Result<(), String> {
    let app = start_app(rt, &["strings", "--count", "1"], &[(rt.guard_var(), "0")])?;
    let np = Netprobe::start(&[
        "trace".into(),
        "-p".into(),
        app.pid.to_string(),
        REPLACE.into(),
        format!("r:{REPLACE}"),
    ])?;
    app.go_and_wait()?;
    let (out, _stderr) = np.wait()?;
    insta::with_settings!({filters => vec![
        (r"(?m)^ *\d+\.\d{6} +\d+/\d+ ", "[TIME] [PID/TID] "),
    ]}, {
        insta::assert_snapshot!(format!("trace_text_{}", rt.tag), out);
    });
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
                netprobe_core::x86::instructions(
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
        let out = Command::new(NP).args(&args).output().map_err(err)?;
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

/// azmcp 0.5.0 (npm `@azure/mcp-linux-x64`): a .NET 9.0.5 self-contained app, loose files, no
/// `dotnet` host and no `shared/` folder (`libcoreclr.so` beside the apphost).
fn azmcp() -> PathBuf {
    fixtures::cache_dir().join("azmcp-0.5.0/azmcp")
}

/// `count -c 'azmcp --version'` on the self-contained app: `System.Console`'s type initializer
/// runs exactly once per process (ECMA-335 II.10.5.3.1), so with --keep-r2r the count is 1; and
/// without it the tiering warning names the runtime netprobe found in the app's own folder.
fn azmcp_self_contained_counts_and_guard() -> Result<(), String> {
    const CCTOR: &str = "System.Console::.cctor()";
    let cmd = format!("{} --version", azmcp().display());
    let run = |extra: &[&str]| -> Result<(String, String), String> {
        let out = Command::new(NP)
            .args(["count", "--json", "--duration", "60s"])
            .args(extra)
            .args(["-c", &cmd, &format!("System.Console.dll:{CCTOR}")])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .output()
            .map_err(err)?;
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        if !out.status.success() || !o.contains("0.5.0+") {
            return Err(format!("{:?}: {o} {e}", out.status));
        }
        Ok((o, e))
    };
    let (out, stderr) = run(&["--keep-r2r"])?;
    let last = json_lines(&out).pop().ok_or("no JSON output")?;
    if last["counts"][CCTOR] != 1 {
        return Err(format!("{last}: expected 1 call; {stderr}"));
    }
    no_tiering_messages(&stderr)?;
    let (_, stderr) = run(&[])?;
    if !stderr.contains(
        "the command (.NET 9.0.5 (file version 9.0.525.21509)) runs with tiered compilation on",
    ) {
        return Err(format!("no tiering warning naming .NET 9.0.5: {stderr}"));
    }
    Ok(())
}

/// `-p` on the running self-contained app (`azmcp server start` waits on stdin): netprobe finds
/// the runtime from the mapped `libcoreclr.so` outside any `shared/` folder, warns with the
/// variable .NET 9 reads, and says nothing when the app runs with it.
fn azmcp_pid_guard_finds_the_runtime() -> Result<(), String> {
    for guard in [false, true] {
        let mut cmd = Command::new(azmcp());
        cmd.args(["server", "start"])
            .env("DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if guard {
            cmd.env("DOTNET_TieredCompilation", "0");
        }
        let mut app = cmd.spawn().map_err(err)?;
        // The runtime is mapped once the host loaded it.
        std::thread::sleep(Duration::from_secs(2));
        let pid = app.id();
        let out = Command::new(NP)
            .args(["count", "--duration", "1s", "-p", &pid.to_string(), SLEEP])
            .output()
            .map_err(err);
        let _ = app.kill();
        let _ = app.wait();
        let out = out?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warned = stderr.contains(&format!(
            "pid {pid} (.NET 9.0.5 (file version 9.0.525.21509)) runs with tiered compilation on"
        )) && stderr.contains("DOTNET_TieredCompilation=0");
        if !out.status.success() || warned == guard {
            return Err(format!("guard {guard}: {:?} {stderr}", out.status));
        }
    }
    Ok(())
}

fn main() {
    let mut trials = Vec::new();
    for rt in [NET8, NET9, NET31] {
        let needs = rt.needs();
        let built = e2e::unmet(&needs[2..]).is_none() && build_app(rt).is_ok();
        // A failed build shows up in every trial of the runtime.
        let wrap = move |f: fn(Runtime) -> Result<(), String>| {
            move || {
                if !built {
                    build_app(rt)?;
                }
                f(rt)
            }
        };
        let t = |name: &str, f: fn(Runtime) -> Result<(), String>, needs: &[Need]| {
            e2e::trial(&format!("{name}_{}", rt.tag), needs, wrap(f))
        };
        let no_root: Vec<Need> = needs[2..].to_vec();
        trials.extend([
            t(
                "sleep_hits_every_call_with_the_env_guard",
                sleep_hits_every_call_with_the_env_guard,
                &needs,
            ),
            t(
                "keep_r2r_counts_every_call_in_command_mode",
                keep_r2r_counts_every_call_in_command_mode,
                &needs,
            ),
            t("strings_are_decoded", strings_are_decoded, &needs),
            t(
                "stack_arguments_are_decoded",
                stack_arguments_are_decoded,
                &needs,
            ),
            t(
                "default_tiering_warns_and_says_hits_stopped",
                default_tiering_warns_and_says_hits_stopped,
                &needs,
            ),
            t(
                "http_echo_requests_hit_with_the_value",
                http_echo_requests_hit_with_the_value,
                &needs,
            ),
            t(
                "il_only_app_method_is_explained",
                il_only_app_method_is_explained,
                &needs,
            ),
            t(
                "latency_survives_garbage_collections",
                latency_survives_garbage_collections,
                &needs,
            ),
            t("dry_run_snapshot", dry_run_snapshot, &no_root),
            t(
                "mutated_r2r_entry_refused",
                mutated_r2r_entry_refused,
                &[Need::Root, Need::Tracefs, Need::Path(rt.corelib())],
            ),
            t("trace_text_snapshot", trace_text_snapshot, &needs),
            t(
                "moved_entry_probe_hits_as_the_first_byte",
                moved_entry_probe_hits_as_the_first_byte,
                &needs,
            ),
        ]);
    }
    let azmcp_needs = [Need::Root, Need::Tracefs, Need::Path(azmcp())];
    trials.extend([
        e2e::trial(
            "azmcp_self_contained_counts_and_guard_net9",
            &azmcp_needs,
            azmcp_self_contained_counts_and_guard,
        ),
        e2e::trial(
            "azmcp_pid_guard_finds_the_runtime_net9",
            &azmcp_needs,
            azmcp_pid_guard_finds_the_runtime,
        ),
    ]);
    e2e::run(trials);
}
