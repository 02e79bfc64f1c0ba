//! `trace --stack` and `count --stack` on Go code (root, tracefs, Go): the stripped Go sample app
//! (`fixtures::go`), `main.Echo` probed under HTTP requests: frames named from the pclntab, each
//! as `go tool addr2line` names its address in the unstripped build; `count --stack` on its
//! workload's 65-deep direct recursion counts each depth exactly (every frame returns to the same
//! address, each is still counted).

use fixtures::e2e::{self, err, Need};
use fixtures::live::{http_get, spawn_until_live, GoSampleServer, Waiting};
use fixtures::{netprobe, stacks};
use serde_json::Value as Json;
use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

/// The stripped Go sample app serving `/echo`, `main.Echo` probed: every hit's stack runs from
/// main.Echo through main.EchoHandler and net/http to runtime.goexit, every frame named from the
/// pclntab as `go tool addr2line` names its address in the unstripped build of the same source.
fn go_stripped_frames_match_addr2line() -> R {
    let dir = fixtures::go::sample_app_variants();
    let bin = dir.join("sampleapp-stripped");
    let app = GoSampleServer::start(&bin)?;
    let port = app.port;
    let result = (|| {
        let probe = format!("{}:main.Echo gostring", bin.display());
        let pid = app.pid().to_string();
        let mut cmd = netprobe::command();
        cmd.args([
            "trace",
            "--stack",
            "--json",
            "-p",
            &pid,
            "--max-events",
            "3",
            &probe,
        ]);
        let (child, stderr) = spawn_until_live(&mut cmd, Duration::from_secs(30))?;
        for i in 0..3 {
            http_get(port, &format!("/echo?msg=s{i}"))?;
        }
        let out = child.wait_with_output().map_err(err)?;
        let stderr = stderr.join().unwrap_or_default();
        if !out.status.success() {
            return Err(format!("netprobe exited with {}: {stderr}", out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    })();
    drop(app);
    let out = result?;
    let unstripped = dir.join("sampleapp-default");
    let mut hits = 0;
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let v: Json = serde_json::from_str(line).map_err(err)?;
        hits += 1;
        let frames = v["stack"].as_array().ok_or("no stack")?;
        let names: Vec<&str> = frames
            .iter()
            .map(|f| f["function"].as_str().unwrap_or("?"))
            .collect();
        if names.first() != Some(&"main.Echo")
            || names.get(1) != Some(&"main.EchoHandler")
            || names.last() != Some(&"runtime.goexit")
            || !names.contains(&"net/http.(*conn).serve")
        {
            return Err(format!("stack {names:?}"));
        }
        let mut addrs = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            if f["source"] != "go_pclntab" || f["inlined"] != false {
                return Err(format!("a frame not named from the pclntab as a call: {f}"));
            }
            let a = f["address"]
                .as_str()
                .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
                .ok_or("frame without address")?;
            // Return addresses: the call instruction is the byte before.
            addrs.push(if i == 0 { a } else { a - 1 });
        }
        let want = fixtures::go::go_addr2line(&unstripped, &addrs)?;
        if want != names {
            return Err(format!("netprobe {names:?}\ngo tool addr2line {want:?}"));
        }
    }
    if hits != 3 {
        return Err(format!("{hits} hits for 3 requests:\n{out}"));
    }
    Ok(())
}

/// `count --stack` on the stripped Go sample app's workload, `main.Recurse` probed: each round
/// calls `Recurse(64)` in a new goroutine, 65 nested calls of which the k-th has k `Recurse`
/// frames, its goroutine's function and `runtime.goexit` under it. The caller the frame-pointer
/// walk misses at the entry probe is restored, so every stack is whole, one per depth, each
/// counted once a round. Every frame in a direct recursion returns to the same address: each
/// must still be counted (the restored caller is not mistaken for the walk's first frame).
fn go_count_stack_counts_each_depth() -> R {
    let bin = fixtures::go::sample_app_variants().join("sampleapp-stripped");
    let rounds = 3u64;
    // Held after its calls until netprobe has stopped: frames are named from its maps.
    let mut target = Waiting::start(Command::new(&bin).args([
        "workload",
        "-n",
        &rounds.to_string(),
        "-wait",
        "-hold",
    ]))?;
    let pid = target.pid().to_string();
    let mut cmd = netprobe::command();
    cmd.args([
        "count",
        "--stack",
        "--json",
        "-p",
        &pid,
        "--max-events",
        "195",
    ])
    .arg(format!("{}:main.Recurse", bin.display()));
    let (child, stderr) = spawn_until_live(&mut cmd, Duration::from_secs(30))?;
    target.go()?;
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    let said = target.finish();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !said.contains("Recurse calls=195 outer=3") {
        return Err(format!(
            "netprobe exited with {}: {stdout}{stderr}; the workload said {said}",
            out.status
        ));
    }
    let stacks = stacks::counted_stacks(&stdout)?;
    let recurse = |k: usize| vec!["main.Recurse".to_string(); k];
    let goroutine = stacks
        .iter()
        .find_map(|(f, _, _)| f.get(1).filter(|n| n.starts_with("main.workload.")))
        .cloned()
        .ok_or_else(|| {
            format!("no stack of main.Recurse under main.workload's goroutine: {stacks:?}")
        })?;
    let whole = |k: usize| [recurse(k), vec![goroutine.clone(), "runtime.goexit".into()]].concat();
    // A session scoped to the process reads perf's call chain, up to
    // kernel.perf_event_max_stack (127) entries: every depth of the recursion is whole.
    let mut want: Vec<(Vec<String>, u64, bool)> =
        (1..=65).map(|k| (whole(k), rounds, false)).collect();
    let mut got = stacks.clone();
    got.sort();
    want.sort();
    if got != want {
        return Err(format!("stacks\n{got:#?}\nwant\n{want:#?}"));
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "go_stripped_frames_match_addr2line",
            &[Need::Root, Need::Tracefs, Need::Go],
            go_stripped_frames_match_addr2line,
        ),
        e2e::trial(
            "go_count_stack_counts_each_depth",
            &[Need::Root, Need::Tracefs, Need::Go],
            go_count_stack_counts_each_depth,
        ),
    ]);
}
