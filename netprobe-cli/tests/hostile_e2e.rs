//! Targets that try to steer netprobe onto files they do not map (RELIABILITY.md, "Hostile
//! targets"): a process maps a library, then puts another file (the host's libc) at the path it
//! mapped it from, in its own mount namespace or by deleting the file; a process whose command
//! line names a FIFO or `/dev/zero` as its .NET runtimeconfig. netprobe must read and probe the
//! file the kernel maps, and every hit counted must be a call the target made.
//!
//! Target: `fixtures/c/hostile_host.c` mapping `fixtures/c/np_lib.c` (each line on its stdin makes
//! 1,000 calls of `np_add`).

use fixtures::e2e::{self, err, Need};
use fixtures::live::{spawn_until_live, Waiting};
use fixtures::netprobe;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const NEEDS: &[Need] = &[Need::Root, Need::Tracefs, Need::CCompiler];
/// The host's C library: the file a hostile target points its library's path at.
const HOST_LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn library() -> PathBuf {
    fixtures::mapped_library::np_lib()
}

fn host() -> PathBuf {
    fixtures::mapped_library::library_host()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn np(args: &[&str]) -> Result<Output, String> {
    netprobe::command().args(args).output().map_err(err)
}

/// Device and inode of what `path` opens.
fn identity(path: &Path) -> Result<(u64, u64), String> {
    let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((m.dev(), m.ino()))
}

/// The calls of `function` in `netprobe count` output.
fn counted(out: &str, function: &str) -> Option<u64> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(function))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

/// `netprobe trace --dry-run` of `spec` in `pid` plans np_add on the file the process maps (a
/// `/proc/PID/map_files/` link that opens the library's bytes), never on the host's
/// libc; `count` of it counts exactly the 1,000 calls the target makes.
fn probes_the_mapped_file(target: &mut Waiting, lib_copy: &Path) -> Result<(), String> {
    let pid = target.pid().to_string();
    let plan = np(&["trace", "--dry-run", "-p", &pid, "np_add"])?;
    let stdout = text(&plan.stdout);
    if !plan.status.success() {
        return Err(format!(
            "dry-run of np_add failed: {}{stdout}",
            text(&plan.stderr)
        ));
    }
    let line = stdout
        .lines()
        .find(|l| l.contains("uprobe_events") && l.contains("/map_files/"))
        .ok_or_else(|| format!("no probe on a map_files path in:\n{stdout}"))?;
    let path = line
        .split_whitespace()
        .find_map(|w| {
            let w = w.trim_start_matches(['\'', '"']);
            w.split(':').next().filter(|p| p.contains("/map_files/"))
        })
        .ok_or_else(|| format!("no path in {line}"))?;
    // The mapped library: its bytes (in a container it is a copy, another inode).
    if std::fs::read(path).map_err(err)? != std::fs::read(lib_copy).map_err(err)? {
        return Err(format!("{path} does not hold the mapped library"));
    }
    if identity(Path::new(path))? == identity(Path::new(HOST_LIBC))? {
        return Err(format!("{path} is the host's libc"));
    }
    // A name only the host's libc has is not found in the target's library.
    let malloc = np(&["trace", "--dry-run", "-p", &pid, "libnp.so:malloc"])?;
    if malloc.status.success() || !text(&malloc.stderr).contains("no function matches") {
        return Err(format!(
            "libnp.so:malloc should match nothing: {:?} {}{}",
            malloc.status,
            text(&malloc.stderr),
            text(&malloc.stdout)
        ));
    }
    let (child, stderr) = spawn_until_live(
        netprobe::command().args(["count", "-p", &pid, "libnp.so:np_add", "--duration", "20s"]),
        Duration::from_secs(30),
    )?;
    let done = target.go()?;
    if done.trim() != "done calls=1000" {
        return Err(format!("target said {done:?}"));
    }
    // The target exits at EOF; the session ends with it.
    let mut child = child;
    target.close_stdin();
    let out = wait_output(&mut child, Duration::from_secs(30))?;
    let log = stderr.join().unwrap_or_default();
    match counted(&out, "np_add") {
        Some(1000) => Ok(()),
        n => Err(format!(
            "counted {n:?} calls of np_add, made 1000:\n{out}{log}"
        )),
    }
}

/// The stdout of `child` once it exits, within `within` (else it is killed).
fn wait_output(child: &mut std::process::Child, within: Duration) -> Result<String, String> {
    let end = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().map_err(err)? {
            let mut out = String::new();
            if let Some(mut o) = child.stdout.take() {
                std::io::Read::read_to_string(&mut o, &mut out).map_err(err)?;
            }
            if !status.success() {
                return Err(format!("netprobe exited {status:?}: {out}"));
            }
            return Ok(out);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("netprobe still ran after {} s", within.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The process maps `D/app/lib/libnp.so` in a mount namespace of its own, then mounts a tmpfs over
/// `D/app/lib` and puts an absolute symlink to the host's libc at `libnp.so`: through
/// `/proc/PID/root`, that path now opens the host's libc.
fn mount_namespace_swap() -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("np-hostile-mnt-")
        .tempdir()
        .map_err(err)?;
    let d = dir.path().display().to_string();
    let lib_copy = dir.path().join("kept-libnp.so");
    std::fs::copy(library(), &lib_copy).map_err(err)?;
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs nptest {d}/app 2>/dev/null || {{ mkdir -p {d}/app && mount -t tmpfs nptest {d}/app; }} && mkdir -p {d}/app/lib && cp {lib} {d}/app/lib/libnp.so && exec {host} {d}/app/lib/libnp.so",
            lib = lib_copy.display(),
            host = host().display()
        ))
        .stderr(Stdio::inherit());
    let mut target = Waiting::start(&mut cmd)?;
    let pid = target.pid();
    let swap = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs nptest2 {d}/app/lib && ln -s {HOST_LIBC} {d}/app/lib/libnp.so"
        ))
        .status()
        .map_err(err)?;
    if !swap.success() {
        return Err(format!(
            "the swap inside the target's namespace failed: {swap:?}"
        ));
    }
    // The attack is real: the path the maps line names now opens the host's libc.
    let via_root = PathBuf::from(format!("/proc/{pid}/root{d}/app/lib/libnp.so"));
    if identity(&via_root)? != identity(Path::new(HOST_LIBC))? {
        return Err(format!(
            "{} should now open the host's libc",
            via_root.display()
        ));
    }
    probes_the_mapped_file(&mut target, &lib_copy)
}

/// In netprobe's own mount namespace: the process maps `D/libnp.so`, which is then deleted (a hard
/// link keeps the inode) and replaced by a symlink to the host's libc, as any user can do in a
/// folder of their own.
fn deleted_and_symlinked() -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("np-hostile-del-")
        .tempdir()
        .map_err(err)?;
    let lib = dir.path().join("libnp.so");
    std::fs::copy(library(), &lib).map_err(err)?;
    let mut target = Waiting::start(Command::new(host()).arg(&lib))?;
    let kept = dir.path().join("kept-libnp.so");
    std::fs::hard_link(&lib, &kept).map_err(err)?;
    std::fs::remove_file(&lib).map_err(err)?;
    std::os::unix::fs::symlink(HOST_LIBC, &lib).map_err(err)?;
    probes_the_mapped_file(&mut target, &kept)
}

/// A process that looks like `dotnet` running with `--runtimeconfig FILE` where FILE is `/dev/zero`
/// or a FIFO: `netprobe ps` reads neither (a character device or FIFO is no runtimeconfig), and
/// finishes in bounded time listing the process.
fn runtimeconfig_device_or_fifo() -> Result<(), String> {
    let dir = tempfile::Builder::new()
        .prefix("np-hostile-cfg-")
        .tempdir()
        .map_err(err)?;
    // A `libcoreclr.so` in a shared-framework folder makes the process .NET 8.0.4 to `ps`.
    let fw = dir.path().join("shared/Microsoft.NETCore.App/8.0.4");
    std::fs::create_dir_all(&fw).map_err(err)?;
    let coreclr = fw.join("libcoreclr.so");
    std::fs::copy(library(), &coreclr).map_err(err)?;
    let dotnet = dir.path().join("dotnet");
    std::fs::copy(host(), &dotnet).map_err(err)?;
    let fifo = dir.path().join("app.runtimeconfig.json");
    let made = Command::new("mkfifo").arg(&fifo).status().map_err(err)?;
    if !made.success() {
        return Err("mkfifo failed".into());
    }
    for cfg in [Path::new("/dev/zero"), fifo.as_path()] {
        let target = Waiting::start(
            Command::new(&dotnet)
                .arg(&coreclr)
                .arg("--runtimeconfig")
                .arg(cfg),
        )?;
        let pid = target.pid().to_string();
        let start = Instant::now();
        let mut child = netprobe::command()
            .args(["ps", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(err)?;
        let out = wait_output(&mut child, Duration::from_secs(60))
            .map_err(|e| format!("ps with --runtimeconfig {}: {e}", cfg.display()))?;
        let listed = e2e::json_lines(&out)
            .into_iter()
            .any(|v| v["pid"].as_u64().map(|p| p.to_string()) == Some(pid.clone()));
        if !listed {
            return Err(format!(
                "ps did not list {pid} (--runtimeconfig {})",
                cfg.display()
            ));
        }
        eprintln!(
            "ps with --runtimeconfig {}: {} ms",
            cfg.display(),
            start.elapsed().as_millis()
        );
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "mount_namespace_symlink_swap_probes_the_mapped_file",
            &[
                NEEDS[0].clone(),
                NEEDS[1].clone(),
                NEEDS[2].clone(),
                Need::Program("unshare"),
                Need::Program("nsenter"),
            ],
            mount_namespace_swap,
        ),
        e2e::trial(
            "deleted_and_symlinked_mapped_file_probes_the_mapped_file",
            NEEDS,
            deleted_and_symlinked,
        ),
        e2e::trial(
            "ps_reads_no_runtimeconfig_that_is_a_device_or_fifo",
            &[Need::Root, Need::CCompiler, Need::Program("mkfifo")],
            runtimeconfig_device_or_fifo,
        ),
    ]);
}
