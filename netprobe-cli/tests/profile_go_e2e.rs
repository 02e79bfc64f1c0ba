//! `netprobe profile` on a Go program sampled by the kernel (root, Go): the Go sample app,
//! stripped, serving CPU-bound `/spin` requests. The top frame is `main.Spin`, under
//! `main.SpinHandler` and `net/http.(*conn).serve`; every Go function named is one `go tool nm`
//! lists in the unstripped build of the same source. Off the CPU, goroutines where they park:
//! `profile_go/parks.rs`.

#[path = "profile_go/parks.rs"]
mod parks;

use fixtures::e2e::{self, err, succeeded, text, Need};
use fixtures::live::{http_get, GoSampleServer};
use fixtures::{netprobe, profile};
use serde_json::Value as Json;
use std::path::Path;
use std::process::Command;

type R = Result<(), String>;

/// Function names `go tool nm` lists in `bin` (text symbols). Assembly functions carry an
/// `.abi0` suffix in the symbol table that their pclntab names lack (`runtime.usleep.abi0`;
/// `cmd/internal/obj` names ABI0 symbols so).
fn go_nm(bin: &Path) -> Result<std::collections::HashSet<String>, String> {
    let out = Command::new("go")
        .args(["tool", "nm"])
        .arg(bin)
        .output()
        .map_err(err)?;
    Ok(text(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (_, kind) = (w.next()?, w.next()?);
            let name = w.collect::<Vec<_>>().join(" ");
            (kind == "T" || kind == "t")
                .then(|| name.strip_suffix(".abi0").unwrap_or(&name).to_string())
        })
        .collect())
}

/// The stripped Go sample app serving `/spin?n=10000000` (about 10 ms of CPU each) in a loop:
/// main.Spin is the top frame, under its handler and net/http's connection loop, every frame
/// named as go tool nm names it.
fn go_stripped_spin_is_the_top_frame() -> R {
    let dir = fixtures::go::sample_app_variants();
    let app = GoSampleServer::start(&dir.join("sampleapp-stripped"))?;
    let port = app.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if http_get(port, "/spin?n=10000000").is_ok() {
                    n += 1;
                }
            }
            n
        })
    };
    let out = netprobe::command()
        .args([
            "profile",
            "-p",
            &app.pid().to_string(),
            "--duration",
            "4s",
            "-F",
            "299",
            "--json",
        ])
        .output()
        .map_err(err);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let requests = client.join().unwrap_or(0);
    drop(app);
    let out = succeeded(out?, "profile -p (Go)")?;
    let v: Json = serde_json::from_slice(&out.stdout).map_err(err)?;
    let samples = v["samples"].as_u64().unwrap_or(0);
    let top = v["functions"][0]["name"].as_str().unwrap_or("");
    eprintln!(
        "{requests} requests, {samples} samples, top {top} self {}, unknown {} of {}",
        v["functions"][0]["self"], v["unknown_frames"], v["frames"]
    );
    if top != "main.Spin" || profile::pct(profile::self_samples(&v, "main.Spin"), samples) < 50.0 {
        return Err(format!(
            "main.Spin is not the top frame: {}",
            v["functions"]
        ));
    }
    // Every sample in Spin was reached from net/http's connection loop through its handler.
    // main.Spin is a leaf without a frame (no BP push: `go tool objdump -s main.Spin`), so a
    // frame-pointer walk from it (the kernel's, perf -g's) continues at SpinHandler's caller;
    // netprobe unwinds each Go frame by its pcsp table and keeps SpinHandler.
    for (f, n) in profile::stacks(&v) {
        if f.last().is_some_and(|l| l == "main.Spin") {
            let s = f.join(";");
            if !(s.contains("net/http.(*conn).serve;")
                && s.ends_with("net/http.HandlerFunc.ServeHTTP;main.SpinHandler;main.Spin"))
            {
                return Err(format!("{n} samples of main.Spin under {s}"));
            }
        }
    }
    // Unknown frames may only be outside the binary (the vDSO, or where the walk left the
    // frame chain in runtime assembly that keeps none); none inside it, stripped as it is.
    let (mut unknown, mut all) = (0, 0);
    for (f, n) in profile::stacks(&v) {
        all += n * f.len() as u64;
        for x in f.iter().filter(|x| x.starts_with("[unknown]")) {
            unknown += n;
            if x.contains("sampleapp") {
                return Err(format!("an unknown frame in the Go binary: {x}"));
            }
        }
    }
    if profile::pct(unknown, all) > 1.0 {
        return Err(format!("{unknown} of {all} frames unknown"));
    }
    // Functions that ran as calls are symbols of the unstripped build (inlined ones have none).
    let nm = go_nm(&dir.join("sampleapp-default"))?;
    let called = v["stacks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["frames"].as_array().into_iter().flatten())
        .filter(|f| f["inlined"] == false && f["unknown"] == false);
    for f in called {
        let name = f["function"].as_str().unwrap_or("");
        // The vDSO's functions (the kernel's own image, symbols versioned `LINUX_2.6`) run under
        // Go's time calls and are named from the vDSO, not the Go binary.
        if name.ends_with("@@LINUX_2.6") {
            continue;
        }
        if !nm.contains(name) {
            return Err(format!("{name} is not a function go tool nm lists"));
        }
    }
    Ok(())
}

fn main() {
    parks::child_if_asked();
    e2e::run(vec![
        e2e::trial(
            "go_stripped_spin_is_the_top_frame",
            &[Need::Root, Need::Go],
            go_stripped_spin_is_the_top_frame,
        ),
        e2e::trial(
            "goroutine_parks_by_the_feed_then_the_cli",
            &[Need::Root, Need::Tracefs, Need::Go],
            parks::goroutine_parks_by_the_feed_then_the_cli,
        ),
    ]);
}
