//! The resolver on live processes, checked against each program's own report of where its
//! functions are at run time (`printf("%p", fn)`): plain, in another mount namespace (files
//! through `/proc/PID/root`), and after its binary was deleted: probes always go through
//! `/proc/PID/map_files`, the file the kernel maps.

use fixtures::e2e::{self, Need};
use fixtures::CProgram;
use netprobe_core::addr::RuntimeAddr;
use netprobe_core::resolve::{resolve_file, resolve_in_process};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn program() -> PathBuf {
    CProgram::new("offsets")
        .flags(&[
            "-O1",
            "-pie",
            "-fPIE",
            "-Wl,--section-start=.farcode=0x800000",
        ])
        .build()
}

/// A running fixture that has printed its functions' runtime addresses.
struct Running {
    child: Child,
    addrs: HashMap<String, u64>,
}

impl Running {
    fn start(mut cmd: Command) -> Result<Running, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(e2e::err)?;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut addrs = HashMap::new();
        for _ in 0..2 {
            let mut line = String::new();
            out.read_line(&mut line).map_err(e2e::err)?;
            let (name, addr) = line
                .trim()
                .split_once('=')
                .ok_or(format!("bad line {line:?}"))?;
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).map_err(e2e::err)?;
            addrs.insert(name.to_string(), addr);
        }
        Ok(Running { child, addrs })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every function's runtime address per netprobe equals the program's own; file offsets equal
/// the static resolution's.
fn check(run: &Running, image: &str, file: &Path) -> Result<Vec<PathBuf>, String> {
    let mut probe_paths = Vec::new();
    for (name, addr) in &run.addrs {
        let live = resolve_in_process(run.pid(), Some(image), name).map_err(e2e::err)?;
        let [t] = live.as_slice() else {
            return Err(format!("{name}: {} targets", live.len()));
        };
        if t.runtime_addr != Some(RuntimeAddr(*addr)) {
            return Err(format!(
                "{name}: netprobe says {:?}, the program says {addr:#x}",
                t.runtime_addr
            ));
        }
        let stat = resolve_file(file, name).map_err(e2e::err)?;
        if stat[0].file_offset != t.file_offset {
            return Err(format!(
                "{name}: live offset {} != static {}",
                t.file_offset, stat[0].file_offset
            ));
        }
        probe_paths.push(t.probe_path.clone());
    }
    // A bare pattern (no image) finds the same function among everything mapped.
    let any = resolve_in_process(run.pid(), None, "np_far_function").map_err(e2e::err)?;
    if any.len() != 1 {
        return Err(format!("bare pattern: {} targets", any.len()));
    }
    Ok(probe_paths)
}

fn plain() -> Result<(), String> {
    let bin = program();
    let mut cmd = Command::new(&bin);
    cmd.arg("wait");
    let run = Running::start(cmd)?;
    let paths = check(&run, bin.file_name().unwrap().to_str().unwrap(), &bin)?;
    through_map_files(&run, &paths, &bin)?;
    // The same file named through another path is found by its device and inode.
    let other = format!("/proc/self/root{}", bin.display());
    check(&run, &other, &bin)?;
    Ok(())
}

fn other_mount_namespace() -> Result<(), String> {
    let bin = program();
    let dir = tempfile::tempdir().map_err(e2e::err)?;
    let d = dir.path().display();
    // Inside a new mount namespace a tmpfs hides `dir` from us; the program runs from there.
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs nptest {d} && cp {} {d}/hidden-prog && exec {d}/hidden-prog wait",
            bin.display()
        ));
    let run = Running::start(cmd)?;
    let inside = dir.path().join("hidden-prog");
    if inside.exists() {
        return Err("the tmpfs should hide the program from the host".into());
    }
    let via_root = PathBuf::from(format!("/proc/{}/root{}", run.pid(), inside.display()));
    let paths = check(&run, "hidden-prog", &via_root)?;
    through_map_files(&run, &paths, &via_root)?;
    Ok(())
}

fn deleted_binary() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(e2e::err)?;
    let copy = dir.path().join("deleted-prog");
    std::fs::copy(program(), &copy).map_err(e2e::err)?;
    let mut cmd = Command::new(&copy);
    cmd.arg("wait");
    let run = Running::start(cmd)?;
    let kept = dir.path().join("kept-for-comparison");
    std::fs::copy(&copy, &kept).map_err(e2e::err)?;
    std::fs::remove_file(&copy).map_err(e2e::err)?;
    let paths = check(&run, "deleted-prog", &kept)?;
    through_map_files(&run, &paths, &kept)
}

/// Every probe path is a `/proc/PID/map_files/` link (the file the kernel maps, whatever the path
/// it was mapped from names now) that opens the same bytes as `file`.
fn through_map_files(run: &Running, paths: &[PathBuf], file: &Path) -> Result<(), String> {
    let map_files = format!("/proc/{}/map_files/", run.pid());
    let want = std::fs::read(file).map_err(e2e::err)?;
    for p in paths {
        if !p.to_string_lossy().starts_with(&map_files) {
            return Err(format!("probe path should go through map_files: {paths:?}"));
        }
        if std::fs::read(p).map_err(e2e::err)? != want {
            return Err(format!("{} does not open {}", p.display(), file.display()));
        }
    }
    Ok(())
}

fn main() {
    e2e::run(vec![
        e2e::trial(
            "runtime_addresses_match_the_programs_own",
            &[Need::CCompiler],
            plain,
        ),
        e2e::trial(
            "other_mount_namespace_through_proc_root",
            &[Need::Root, Need::CCompiler, Need::Program("unshare")],
            other_mount_namespace,
        ),
        e2e::trial(
            "deleted_binary_through_map_files",
            &[Need::Root, Need::CCompiler],
            deleted_binary,
        ),
    ]);
}
