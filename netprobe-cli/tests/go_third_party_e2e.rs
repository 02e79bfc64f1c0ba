//! Live tracing of third-party Go programs on real uprobes (root, tracefs): Go's stack ABI on
//! esbuild built by Go 1.15 and 1.16 (scripts/fetch-go-binaries.sh), and Debian's dockerd, where
//! a probe on `net/http.(*conn).serve` hits once per `docker version` (a running dockerd).

use fixtures::e2e::{self, err, json_lines, succeeded, text, Need};
use fixtures::netprobe;
use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

/// Arguments from the stack (a string at 8(SP), an int), a string result at the end of the
/// in/out area on each RET, latency paired by thread; values set through the environment.
fn go_stack_abi_esbuild() -> R {
    for file in ["esbuild-0.7.22", "esbuild-0.8.57"] {
        let bin = fixtures::go::third_party_go_dir().join(file);
        let b = bin.display();
        let out = netprobe::command()
            .env("GODEBUG", "netprobe=42")
            .env("DEBUG_HTTP2_GOROUTINES", "nptest")
            .args([
                "trace",
                "--json",
                "-c",
                &format!("{b} --nptest-bogus-flag"),
                &format!("{b}:os.Getenv key=gostring"),
                &format!("r:{b}:os.Getenv gostring"),
                &format!("{b}:os.Exit code=s64"),
            ])
            .output()
            .map_err(err)?;
        let out = succeeded(out, file)?;
        let hits = json_lines(&out.stdout);
        let pairs: Vec<(String, String)> = hits
            .windows(2)
            .filter(|w| w[0]["function"] == "os.Getenv" && w[0]["event"] == "entry")
            .map(|w| {
                (
                    w[0]["args"]["key"].as_str().unwrap_or("?").to_string(),
                    w[1]["retval"].as_str().unwrap_or("?").to_string(),
                )
            })
            .collect();
        let want = [
            ("GODEBUG", "netprobe=42"),
            ("DEBUG_HTTP2_GOROUTINES", "nptest"),
        ];
        for (k, v) in want {
            if !pairs.iter().any(|(pk, pv)| pk == k && pv == v) {
                return Err(format!(
                    "{file}: no os.Getenv({k}) = {v:?} in {pairs:?}: {}",
                    text(&out.stderr)
                ));
            }
        }
        let exit = hits
            .iter()
            .find(|h| h["function"] == "os.Exit")
            .ok_or(format!("{file}: os.Exit not seen"))?;
        if exit["args"]["code"] != 1 {
            return Err(format!("{file}: {exit}"));
        }
        // Latency pairs by thread and says so.
        let lat = succeeded(
            netprobe::output(&[
                "latency",
                "--json",
                "-c",
                &format!("{b} --nptest-bogus-flag"),
                &format!("{b}:os.Getenv"),
            ])?,
            file,
        )?;
        let stderr = text(&lat.stderr);
        if !stderr.contains("paired by thread") {
            return Err(format!("{file}: no pairing note: {stderr}"));
        }
        let l = json_lines(&lat.stdout)
            .into_iter()
            .find(|l| l["function"] == "os.Getenv")
            .ok_or("no latency line")?;
        if l["count"].as_i64().unwrap_or(0) < 2 {
            return Err(format!("{file}: {l}"));
        }
    }
    Ok(())
}

/// `docker version` makes one HTTP connection to dockerd and one /version request: a probe on
/// `net/http.(*conn).serve` (and on the version handler) of the running, stripped dockerd hits
/// once per run. Other tests (the Docker harness) may talk to dockerd at the same time, so both
/// counts are lower bounds (seen exactly equal to the runs when dockerd is otherwise idle).
fn dockerd_real_probe() -> R {
    let pid = pid_of_comm("dockerd").ok_or("dockerd is not running")?;
    let version = "github.com/docker/docker/api/server/router/system.(*systemRouter).getVersion";
    let np = netprobe::Running::start(&[
        "count",
        "--json",
        "-p",
        &pid,
        "net/http.(*conn).serve",
        version,
    ])?;
    const RUNS: i64 = 4;
    for _ in 0..RUNS {
        let out = Command::new("/usr/bin/docker")
            .arg("version")
            .output()
            .map_err(err)?;
        if !out.status.success() {
            return Err(format!("docker version: {}", text(&out.stderr)));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let (stdout, stderr) = np.stop()?;
    let last = json_lines(stdout.as_bytes()).pop().ok_or("no output")?;
    let serve = last["counts"]["net/http.(*conn).serve"]
        .as_i64()
        .unwrap_or(0);
    let versions = last["counts"][version].as_i64().unwrap_or(0);
    if versions < RUNS || serve < RUNS {
        return Err(format!("{last}: {stderr}"));
    }
    Ok(())
}

/// The lowest pid whose `/proc/PID/comm` is `comm`, as a string.
fn pid_of_comm(comm: &str) -> Option<String> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect();
    pids.sort_unstable();
    pids.first().map(|p| p.to_string())
}

fn main() {
    let stack_abi: Vec<Need> = ["esbuild-0.7.22", "esbuild-0.8.57"]
        .iter()
        .map(|f| Need::Path(fixtures::go::third_party_go_dir().join(f)))
        .collect();
    e2e::run(vec![
        e2e::trial(
            "go_stack_abi_esbuild",
            &[e2e::live(&[]), stack_abi].concat(),
            go_stack_abi_esbuild,
        ),
        e2e::trial(
            "dockerd_real_probe",
            &e2e::live(&[Need::Docker]),
            dockerd_real_probe,
        ),
    ]);
}
