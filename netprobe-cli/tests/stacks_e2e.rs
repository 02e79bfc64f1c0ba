//! End-to-end tests of `trace --stack` and `count --stack` on real hits, with known truths:
//!
//! - `fixtures/c/stacks.c` (frame pointers kept) calls `probed(1)` through main → path_a →
//!   path_b three times and `probed(2)` through main → path_c twice: every hit's stack is its
//!   path (the argument says which), each return address is the instruction after the call as
//!   objdump disassembles it; `count --stack` counts each path exactly; `--folded` is exact and
//!   renders as a flame graph with inferno; under a uretprobe the frame whose return address the
//!   kernel replaced is named `[uretprobe trampoline]`.
//! - The same program in a Docker container, probed from the host through `/proc/PID/root`; and
//!   netprobe with the program in a pid namespace of their own (a sidecar's situation).
//!
//! Go and .NET programs: `stacks_go_e2e.rs`, `stacks_dotnet_e2e.rs`.

use fixtures::e2e::{self, err, Need};
use fixtures::live::{spawn_until_live, Waiting};
use fixtures::CProgram;
use fixtures::{netprobe, stacks};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

type R = Result<(), String>;

fn stacks_c() -> PathBuf {
    CProgram::new("stacks")
        .flags(&["-O0", "-fno-omit-frame-pointer"])
        .build()
}

/// Runs netprobe `args` against the stacks program, started and waiting: attaches with `-p`,
/// lets it make its 5 calls, waits for netprobe to stop at `--max-events 5` (the program lives
/// until then, so its stacks are named from its maps), then lets it exit. Returns stdout.
fn run_on_stacks(bin: &Path, args: &[&str]) -> Result<String, String> {
    let target = Waiting::start(&mut Command::new(bin)).map_err(err)?;
    let pid = target.pid();
    run_on(target, pid, args)
}

/// [`run_on_stacks`] on a started `target` whose process is `pid` (seen from here).
fn run_on(mut target: Waiting, pid: u32, args: &[&str]) -> Result<String, String> {
    let pid = pid.to_string();
    let mut cmd = netprobe::command();
    cmd.args(args).args(["-p", &pid, "--max-events", "5"]);
    let (child, stderr) = spawn_until_live(&mut cmd, Duration::from_secs(30))?;
    let np_pid = child.id();
    let done = target.go()?;
    if !done.starts_with("done") {
        return Err(format!("the program said {done:?}"));
    }
    let out = child.wait_with_output().map_err(err)?;
    let stderr = stderr.join().unwrap_or_default();
    target.finish();
    if !out.status.success() {
        return Err(format!("netprobe exited with {}: {stderr}", out.status));
    }
    if let Some(left) = fixtures::live::leftovers("/sys/kernel/tracing", np_pid) {
        return Err(format!("left behind: {left}"));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The return address (as an offset from the function's start) of the call from `caller` to
/// `callee`, from objdump's disassembly: the address of the instruction after the call.
fn return_offset(bin: &Path, caller: &str, callee: &str) -> Result<u64, String> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(bin)
        .output()
        .map_err(err)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let start = format!("<{caller}>:");
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with(&start))
        .take_while(|l| !l.is_empty())
        .collect();
    let entry = body
        .first()
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .ok_or_else(|| format!("{caller} not in objdump's output"))?;
    let call = body
        .iter()
        .position(|l| l.contains("call") && l.ends_with(&format!("<{callee}>")))
        .ok_or_else(|| format!("no call to {callee} in {caller}"))?;
    let next = body
        .get(call + 1)
        .and_then(|l| u64::from_str_radix(l.trim().split(':').next()?, 16).ok())
        .ok_or("no instruction after the call")?;
    Ok(next - entry)
}

/// `trace --stack --json`: each hit's innermost frames are its path, named from the ELF symbol
/// table, at the return addresses objdump shows; frames above main lie in libc.
fn c_trace_stack_frames_match_paths() -> R {
    let bin = stacks_c();
    let probe = format!("{}:probed s32", bin.display());
    let out = run_on_stacks(&bin, &["trace", "--stack", "--json", &probe])?;
    check_c_paths(&bin, &bin.to_string_lossy(), &out)
}

/// The stacks program in a Docker container (its own mount and pid namespaces), probed from
/// the host through `/proc/PID/root`: the same frames, the image named as the container's
/// process names it (`/app/stacks`), found through `/proc/PID/root`.
fn c_in_container_frames_match_paths() -> R {
    let bin = stacks_c();
    harness::docker::ensure_engine().map_err(|e| format!("{e:#}"))?;
    let owner = harness::owner::Owner::current();
    let rootfs = harness::images::program_rootfs(&bin, "stacks").map_err(|e| format!("{e:#}"))?;
    let image = harness::docker::import(&rootfs, &owner.image_ref("stacks-c"), &[])
        .map_err(|e| format!("{e:#}"))?;
    let container = harness::docker::ContainerGuard::new(owner.container_name("stacks-c"));
    let target = Waiting::start(Command::new("/usr/bin/docker").args([
        "run",
        "-i",
        "--name",
        container.name(),
        image.reference(),
        "/app/stacks",
    ]))?;
    let pid: u32 = harness::docker::docker(&["inspect", "-f", "{{.State.Pid}}", container.name()])
        .map_err(|e| format!("{e:#}"))?
        .trim()
        .parse()
        .map_err(err)?;
    let probe = format!("/proc/{pid}/root/app/stacks:probed s32");
    let out = run_on(target, pid, &["trace", "--stack", "--json", &probe])?;
    check_c_paths(&bin, "/app/stacks", &out)
}

/// A sidecar's situation: netprobe and the stacks program in a pid namespace of their own
/// (`unshare --pid --mount-proc`), where hits carry the kernel's ids that the namespace's
/// `/proc` does not know: the frames are named through the namespace's pids all the same.
fn c_in_pid_namespace_frames_match_paths() -> R {
    use std::io::Write;
    let bin = stacks_c();
    let mut child = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", netprobe::bin()])
        // --duration bounds the wait if the hits never come.
        .args([
            "trace",
            "--stack",
            "--json",
            "--max-events",
            "5",
            "--duration",
            "20s",
            "-c",
        ])
        .arg(&bin)
        .arg(format!("{}:probed s32", bin.display()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(err)?;
    // The program waits for a line before its calls, then for the end of its input, which
    // comes only after netprobe stopped at 5 hits (it ends the program itself).
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(b"go\n").map_err(err)?;
    stdin.flush().map_err(err)?;
    let out = child.wait_with_output().map_err(err)?;
    drop(stdin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "netprobe exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    check_c_paths(&bin, &bin.to_string_lossy(), &stdout)
}

/// Checks `trace --stack --json` output of the stacks program `bin` (named `image` by its
/// process): 3 hits of path 1 and 2 of path 2, each with its path's frames.
fn check_c_paths(bin: &Path, image: &str, out: &str) -> R {
    let want_offsets = [
        ("path_b", return_offset(bin, "path_b", "probed")?),
        ("path_a", return_offset(bin, "path_a", "path_b")?),
        ("path_c", return_offset(bin, "path_c", "probed")?),
    ];
    let mut seen = [0u32; 3];
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let v: Json = serde_json::from_str(line).map_err(err)?;
        let path = v["args"]["arg0"].as_i64().unwrap_or(-1);
        let want: &[&str] = match path {
            1 => &["probed", "path_b", "path_a", "main"],
            2 => &["probed", "path_c", "main"],
            _ => return Err(format!("unexpected hit {line}")),
        };
        seen[path as usize] += 1;
        let frames = v["stack"].as_array().ok_or("no stack")?;
        let names: Vec<&str> = frames
            .iter()
            .map(|f| f["function"].as_str().unwrap_or("?"))
            .collect();
        if names.len() < want.len() || names[..want.len()] != *want {
            return Err(format!("path {path}: stack {names:?}, want {want:?} first"));
        }
        for f in &frames[..want.len()] {
            if f["source"] != "elf_symtab" || f["image"].as_str() != Some(image) {
                return Err(format!("frame not from the program's .symtab: {f}"));
            }
            let name = f["function"].as_str().unwrap_or("");
            let offset = f["offset"].as_u64().ok_or("frame without offset")?;
            if name == "probed" && offset != 0 {
                return Err(format!(
                    "the probe fired at probed+{offset:#x}, not its entry"
                ));
            }
            if let Some((_, o)) = want_offsets.iter().find(|(n, _)| *n == name) {
                if offset != *o {
                    return Err(format!(
                        "{name}+{offset:#x}, objdump puts the return address at {name}+{o:#x}"
                    ));
                }
            }
        }
        // Above main: libc's start code (Debian's libc has no .symtab: named from .dynsym or
        // unknown), unwound by its call-frame information (libc keeps no frame pointers) up to
        // the program's `_start`, the outermost frame.
        let above = &frames[want.len()..];
        for (i, f) in above.iter().enumerate() {
            let img = f["image"].as_str().unwrap_or("");
            let outermost_start = i + 1 == above.len() && f["function"] == "_start" && img == image;
            if !img.contains("libc.so") && !outermost_start {
                return Err(format!("a frame above main outside libc: {f}"));
            }
        }
        if above.last().is_some_and(|f| f["function"] != "_start") {
            return Err(format!(
                "the walk ended before the program's _start: {line}"
            ));
        }
        if v["stack_cut"] != Json::Null {
            return Err(format!("stack said cut: {line}"));
        }
    }
    if seen[1..] != [3, 2] {
        return Err(format!(
            "hits per path {:?}, want [3, 2]:\n{out}",
            &seen[1..]
        ));
    }
    Ok(())
}

/// A uretprobe on `path_b` replaces the return address into `path_a` with the kernel's
/// trampoline while `path_b` runs: the stacks of `probed` under it name that frame
/// `[uretprobe trampoline]` (not `[unknown]`), with `main` above it; `path_b`'s own return hits
/// fire back in `path_a`.
fn c_uretprobe_trampoline_named() -> R {
    // A copy of its own: a uretprobe hijacks returns in every process running the file (the
    // instance's pid filter only decides which hits are recorded), which would change the
    // stacks the other trials of this file see.
    let dir = fixtures::build::target_dir().join("stacks-artifacts");
    std::fs::create_dir_all(&dir).map_err(err)?;
    let bin = dir.join(format!("stacks-uretprobe-{}", std::process::id()));
    std::fs::copy(stacks_c(), &bin).map_err(err)?;
    let out = run_on_stacks(
        &bin,
        &[
            "trace",
            "--stack",
            "--json",
            &format!("r:{}:path_b", bin.display()),
            &format!("{}:probed", bin.display()),
        ],
    )?;
    let hits = e2e::json_lines_strict(&out)?;
    let _ = std::fs::remove_file(&bin);
    let name = |h: &Json, i: usize| h["stack"][i]["function"].as_str().map(str::to_string);
    let (entries, returns): (Vec<&Json>, Vec<&Json>) =
        hits.iter().partition(|h| h["event"] == "entry");
    if entries.len() != 3 || returns.len() != 2 {
        return Err(format!(
            "3 probed and 2 path_b returns expected first:\n{out}"
        ));
    }
    // Under path_b's uretprobe, its return address on the stack is the kernel's trampoline: a
    // walk that reads it names it as such (the `[uprobes]` page), while perf's call chain of a
    // session scoped to the process puts back the real one, path_a's, on kernels that fix it up
    // (`fixup_uretprobe_trampoline_entries` in kernel/events/callchain.c, Linux 6.12+).
    for h in entries {
        let t = &h["stack"][2];
        let trampoline =
            t["source"] == "return_probe_trampoline" && name(h, 3).as_deref() == Some("main");
        let restored =
            name(h, 2).as_deref() == Some("path_a") && name(h, 3).as_deref() == Some("main");
        if name(h, 0).as_deref() != Some("probed")
            || name(h, 1).as_deref() != Some("path_b")
            || !(trampoline || restored)
        {
            return Err(format!("stack under the uretprobe: {}", h["stack"]));
        }
    }
    for h in returns {
        if name(h, 0).as_deref() != Some("path_a") || name(h, 1).as_deref() != Some("main") {
            return Err(format!("path_b's return: {}", h["stack"]));
        }
    }
    Ok(())
}

/// `count --stack --json`: one stack per path, counted exactly.
fn c_count_stack_counts_each_path() -> R {
    let bin = stacks_c();
    let probe = format!("{}:probed", bin.display());
    let out = run_on_stacks(&bin, &["count", "--stack", "--json", &probe])?;
    let got: Vec<(Vec<String>, u64)> = stacks::counted_stacks(&out)?
        .into_iter()
        .map(|(frames, count, _)| {
            let below_main = frames.into_iter().take_while(|n| n != "main").collect();
            (below_main, count)
        })
        .collect();
    let want = vec![
        (
            vec!["probed".to_string(), "path_b".into(), "path_a".into()],
            3,
        ),
        (vec!["probed".to_string(), "path_c".into()], 2),
    ];
    if got != want {
        return Err(format!("stacks {got:?}, want {want:?}: {out}"));
    }
    Ok(())
}

/// `count --stack --stack-depth 3 --folded FILE`: exactly the two folded lines, root first, and
/// inferno draws them.
fn c_folded_output_is_exact() -> R {
    let bin = stacks_c();
    let probe = format!("{}:probed", bin.display());
    let dir = fixtures::build::target_dir().join("stacks-artifacts");
    std::fs::create_dir_all(&dir).map_err(err)?;
    let folded = dir.join(format!("c-{}.folded", std::process::id()));
    let out = run_on_stacks(
        &bin,
        &[
            "count",
            "--stack",
            "--stack-depth",
            "3",
            "--folded",
            &folded.to_string_lossy(),
            &probe,
        ],
    )?;
    let text = std::fs::read_to_string(&folded).map_err(err)?;
    let _ = std::fs::remove_file(&folded);
    let want = "main;path_c;probed 2\npath_a;path_b;probed 3\n";
    if text != want {
        return Err(format!("folded:\n{text}\nwant:\n{want}"));
    }
    if !out.contains("(cut at --stack-depth 3)") {
        return Err(format!(
            "the table does not say the stacks were cut:\n{out}"
        ));
    }
    let mut svg = Vec::new();
    let mut opts = inferno::flamegraph::Options::default();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut svg).map_err(err)?;
    let svg = String::from_utf8_lossy(&svg);
    for n in [3, 2] {
        if !svg.contains(&format!("<title>probed ({n} samples")) {
            return Err(format!("inferno's flame graph has no probed frame of {n}"));
        }
    }
    Ok(())
}

fn main() {
    let live = [
        Need::Root,
        Need::Tracefs,
        Need::CCompiler,
        Need::Program("objdump"),
    ];
    e2e::run(vec![
        e2e::trial(
            "c_trace_stack_frames_match_paths",
            &live,
            c_trace_stack_frames_match_paths,
        ),
        e2e::trial(
            "c_count_stack_counts_each_path",
            &live,
            c_count_stack_counts_each_path,
        ),
        e2e::trial("c_folded_output_is_exact", &live, c_folded_output_is_exact),
        e2e::trial(
            "c_uretprobe_trampoline_named",
            &live,
            c_uretprobe_trampoline_named,
        ),
        e2e::trial(
            "c_in_pid_namespace_frames_match_paths",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("objdump"),
                Need::Program("unshare"),
            ],
            c_in_pid_namespace_frames_match_paths,
        ),
        e2e::trial(
            "c_in_container_frames_match_paths",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("objdump"),
                Need::Docker,
            ],
            c_in_container_frames_match_paths,
        ),
    ]);
}
