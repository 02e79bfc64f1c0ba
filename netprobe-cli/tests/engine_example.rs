//! examples/engine.rs (the engine without the command line) against real uprobes: it traces
//! `np_add` in `fixtures/c/tracee.c`, whose call i is `np_add(i - 3, i * 100000000000, "lbl-<i>")`,
//! and must print exactly one entry per call with the values passed.
//!
//! The example is compiled into this test as a module and run as a child process of this very
//! binary (`NETPROBE_RUN_ENGINE_EXAMPLE` set): its watchdog must be forked from a single-threaded
//! process, and the trials run in threads.

#[allow(dead_code)]
#[path = "../examples/engine.rs"]
mod engine;

use fixtures::e2e::{self, err, Need};
use fixtures::live::{leftovers, spawn_until_live, Waiting};
use serde_json::Value as Json;
use std::process::{Command, ExitCode};
use std::time::Duration;

const RUN_EXAMPLE: &str = "NETPROBE_RUN_ENGINE_EXAMPLE";
const TRACEFS: &str = "/sys/kernel/tracing";
const CALLS: i64 = 7;

fn engine_example_prints_every_call_of_a_pid_with_exact_args() -> Result<(), String> {
    let tracee = fixtures::CProgram::new("tracee").flags(&["-O2"]).build();
    let mut target = Waiting::start(Command::new(&tracee).args(["stdin", &CALLS.to_string()]))?;
    let pid = target.pid();
    let exe = std::env::current_exe().map_err(err)?;
    let (example, stderr) = spawn_until_live(
        Command::new(exe).env(RUN_EXAMPLE, "1").args([
            tracee.to_str().ok_or("tracee path is not UTF-8")?,
            "np_add a=s32 b=s64 s=string",
            "--pid",
            &pid.to_string(),
            "--seconds",
            "60",
            "--json",
        ]),
        Duration::from_secs(30),
    )?;
    let example_pid = example.id();
    let done = target.go()?;
    if done.trim() != "done" {
        return Err(format!("tracee said {done:?} instead of done"));
    }
    // The tracee exits at EOF on stdin; the example stops when its target exits.
    target.finish();
    let out = example.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    if !out.status.success() {
        return Err(format!("engine example failed: {stderr}"));
    }
    if !stderr.contains("target exited") {
        return Err(format!("expected a stop on the target's exit: {stderr}"));
    }
    let hits: Vec<Json> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}")))
        .collect::<Result<_, _>>()?;
    if hits.len() as i64 != CALLS {
        return Err(format!(
            "expected {CALLS} hits, got {}: {hits:?}",
            hits.len()
        ));
    }
    for (i, hit) in (1..=CALLS).zip(&hits) {
        let (a, b, s) = (i - 3, i * 100_000_000_000, format!("lbl-{i}"));
        let args = &hit["args"];
        if hit["event"] != "entry"
            || hit["function"] != "np_add"
            || hit["pid"] != pid
            || args["a"] != a
            || args["b"] != b
            || args["s"] != s.as_str()
        {
            return Err(format!(
                "call {i}: expected np_add({a}, {b}, {s}), got {hit}"
            ));
        }
    }
    if let Some(left) = leftovers(TRACEFS, example_pid) {
        return Err(format!("the engine example left {left}"));
    }
    Ok(())
}

fn main() -> ExitCode {
    if std::env::var_os(RUN_EXAMPLE).is_some() {
        return engine::main();
    }
    e2e::run(vec![e2e::trial(
        "engine_example_prints_every_call_of_a_pid_with_exact_args",
        &[Need::Root, Need::Tracefs, Need::CCompiler],
        engine_example_prints_every_call_of_a_pid_with_exact_args,
    )])
}
