//! .NET tracing on the real Microsoft runtimes and the C# sample app ([`dotnet_app`]): every
//! assertion is about real kernel hits. Counts equal the calls the app made (it prints them),
//! with the environment guard and with `-c`; strings and stack arguments are decoded to the values
//! it passed; default tiering is warned of and the end of hits said; HTTP requests hit with their
//! value; latency survives garbage collections; the text output as a snapshot.
//!
//! Needs root, tracefs, `mcs` and the runtimes; a missing one skips a trial outside CI and fails
//! it under CI=true.

mod dotnet_app;

use dotnet_app::{
    all, entries, no_tiering_messages, per_runtime, start_app, trace_app, Netprobe, Runtime,
    REPLACE, SLEEP, TRACEFS,
};
use fixtures::e2e::{self, err, json_lines};
use fixtures::live::{free_loopback_port, http_get};
use fixtures::netprobe;
use serde_json::Value as Json;
use std::time::{Duration, Instant};

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
    let out = netprobe::command()
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

fn main() {
    e2e::run(per_runtime(&[
        (
            "sleep_hits_every_call_with_the_env_guard",
            sleep_hits_every_call_with_the_env_guard,
            all,
        ),
        (
            "keep_r2r_counts_every_call_in_command_mode",
            keep_r2r_counts_every_call_in_command_mode,
            all,
        ),
        ("strings_are_decoded", strings_are_decoded, all),
        (
            "stack_arguments_are_decoded",
            stack_arguments_are_decoded,
            all,
        ),
        (
            "default_tiering_warns_and_says_hits_stopped",
            default_tiering_warns_and_says_hits_stopped,
            all,
        ),
        (
            "http_echo_requests_hit_with_the_value",
            http_echo_requests_hit_with_the_value,
            all,
        ),
        (
            "latency_survives_garbage_collections",
            latency_survives_garbage_collections,
            all,
        ),
        ("trace_text_snapshot", trace_text_snapshot, all),
    ]));
}
