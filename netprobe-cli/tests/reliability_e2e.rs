//! What netprobe answers when the ground moves or the input is hostile (RELIABILITY.md has the
//! tables): privileges and tracefs missing, targets that exit, exec, are zombies or kernel
//! threads, images deleted or replaced while probed, session owners whose pid now names another
//! process, and hostile paths, ELF files and specs. Every refusal is one line naming the cause,
//! a non-zero exit, and nothing written to `uprobe_events` that names the input.
//!
//! Targets: `fixtures/c/tracee.c` (call i is `np_add(i - 3, i * 100000000000, "lbl-<i>")`) and
//! `fixtures/c/busy.c`.

use fixtures::e2e::{self, err, Need};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const NP: &str = env!("CARGO_BIN_EXE_netprobe");
const TRACEFS: &str = "/sys/kernel/tracing";
const NEEDS: &[Need] = &[Need::Root, Need::Tracefs, Need::CCompiler];

fn tracee() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::CProgram::new("tracee").flags(&["-O2"]).build())
        .clone()
}

fn busy() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| fixtures::CProgram::new("busy").flags(&["-O1"]).build())
        .clone()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A world-readable scratch directory (the non-root trials run netprobe as nobody).
fn scratch(tag: &str) -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix(&format!("np-rel-{tag}-"))
        .tempdir()
        .map_err(err)?;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).map_err(err)?;
    Ok(d)
}

/// A copy of the tracee at `dir/name`, executable by anyone.
fn tracee_at(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    std::fs::copy(tracee(), &p).map_err(err)?;
    Ok(p)
}

/// No line of `uprobe_events` names `needle` (a path or group of the trial's own).
fn nothing_registered_for(needle: &str) -> Result<(), String> {
    let events = std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
    match events.lines().find(|l| l.contains(needle)) {
        Some(l) => Err(format!("uprobe_events names {needle:?}: {l}")),
        None => Ok(()),
    }
}

/// A refusal: exit status `code`, exactly one line on stderr, holding every `needles`.
fn refused(out: &Output, code: i32, needles: &[&str]) -> Result<(), String> {
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    if out.status.code() != Some(code) || lines.len() != 1 {
        return Err(format!(
            "expected exit {code} and one line, got {:?}: {stderr}",
            out.status
        ));
    }
    for n in needles {
        if !lines[0].contains(n) {
            return Err(format!("expected {n:?} in: {}", lines[0]));
        }
    }
    if !lines[0].starts_with("netprobe: error: ") {
        return Err(format!("not a netprobe error line: {}", lines[0]));
    }
    Ok(())
}

fn np(args: &[&str]) -> Result<Output, String> {
    Command::new(NP).args(args).output().map_err(err)
}

/// A copy of the tracee of the trial's own (trials run in parallel, and each checks that
/// nothing in `uprobe_events` names its file).
fn own_tracee(tag: &str) -> Result<(tempfile::TempDir, String), String> {
    let dir = scratch(tag)?;
    let p = tracee_at(dir.path(), "tracee")?;
    Ok((dir, p.display().to_string()))
}

/// `netprobe count -c "TRACEE now 3" TRACEE:np_add` through `wrapper` (e.g. `setpriv ...`, or
/// `sh -c '...; exec "$@"'` to prepare a mount namespace), on a copy of the tracee; returns the
/// output and the copy's path.
fn count_via(wrapper: &[&str], tag: &str) -> Result<(Output, String, tempfile::TempDir), String> {
    let (dir, bin) = own_tracee(tag)?;
    let cmd = format!("{bin} now 3");
    let out = Command::new(wrapper[0])
        .args(&wrapper[1..])
        .args([NP, "count", "-c", &cmd, &format!("{bin}:np_add")])
        .output()
        .map_err(err)?;
    Ok((out, bin, dir))
}

/// The calls of `FUNCTION` in `netprobe count` output.
fn counted(out: &Output, function: &str) -> Option<u64> {
    text(&out.stdout)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(function))
        .and_then(|l| l.split_whitespace().last()?.parse().ok())
}

/// Waits until process `pid` is a zombie.
fn wait_zombie(pid: u32) -> Result<(), String> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(err)?;
        if st
            .rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z'))
        {
            return Ok(());
        }
        if Instant::now() > end {
            return Err(format!("{pid} never became a zombie"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// ELF64 little-endian: (offset, entry size, count, link) of the section of type `sh_type`.
fn section(elf: &[u8], sh_type: u32) -> Option<(usize, usize, usize, usize)> {
    let u16_at = |o: usize| -> Option<usize> {
        Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?).into())
    };
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?)) };
    let u64_at = |o: usize| -> Option<usize> {
        Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?) as usize)
    };
    let shoff = u64_at(0x28)?;
    let (shentsize, shnum) = (u16_at(0x3a)?, u16_at(0x3c)?);
    (0..shnum).find_map(|i| {
        let sh = shoff + i * shentsize;
        (u32_at(sh + 4)? == sh_type).then_some((
            u64_at(sh + 0x18)?,
            u64_at(sh + 0x38)?,
            u64_at(sh + 0x20)? / u64_at(sh + 0x38)?.max(1),
            u32_at(sh + 0x28)? as usize,
        ))
    })
}

/// Rewrites the value (address) of symbol `name` in `.symtab` (SHT_SYMTAB = 2, its names in
/// the string table its `sh_link` names; ELF64 `Elf64_Sym`: name u32, info, other, shndx u16,
/// value u64 at +8).
fn patch_symbol_value(elf: &mut [u8], name: &str, value: u64) -> Result<(), String> {
    let (off, ent, n, link) = section(elf, 2).ok_or("no .symtab")?;
    let shoff = u64::from_le_bytes(elf[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(elf[0x3a..0x3c].try_into().unwrap()) as usize;
    let strtab = u64::from_le_bytes(
        elf[shoff + link * shentsize + 0x18..shoff + link * shentsize + 0x20]
            .try_into()
            .unwrap(),
    ) as usize;
    for i in 0..n {
        let s = off + i * ent;
        let name_off = u32::from_le_bytes(elf[s..s + 4].try_into().unwrap()) as usize;
        let at = &elf[strtab + name_off..];
        let end = at.iter().position(|&b| b == 0).unwrap_or(0);
        if &at[..end] == name.as_bytes() {
            elf[s + 8..s + 16].copy_from_slice(&value.to_le_bytes());
            return Ok(());
        }
    }
    Err(format!("no symbol {name}"))
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee();
        busy();
    }
    let t = || tracee().display().to_string();
    let mut trials = vec![
        // ---- privilege ----
        e2e::trial(
            "privilege_non_root_is_one_line_naming_root",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("setpriv"),
            ],
            move || {
                let (out, bin, _dir) = count_via(
                    &[
                        "setpriv",
                        "--reuid=65534",
                        "--regid=65534",
                        "--clear-groups",
                    ],
                    "priv",
                )?;
                refused(&out, 1, &["needs root", "sudo"])?;
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_without_cap_sys_admin_tracefs_writes_still_work",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Check(capsh_works),
            ],
            move || {
                // tracefs checks the file mode of uprobe_events, not a capability: root without
                // CAP_SYS_ADMIN places probes and sees every call.
                let (out, bin, _dir) = count_via(
                    &[
                        "capsh",
                        "--drop=cap_sys_admin",
                        "--",
                        "-c",
                        "exec \"$0\" \"$@\"",
                    ],
                    "priv",
                )?;
                if !out.status.success() || counted(&out, "np_add") != Some(3) {
                    return Err(format!(
                        "{:?} {} {}",
                        out.status,
                        text(&out.stdout),
                        text(&out.stderr)
                    ));
                }
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_without_cap_sys_admin_or_tracefs_names_the_capability",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Check(capsh_works),
                Need::Program("unshare"),
            ],
            move || {
                let (out, bin, _dir) = count_via(&["unshare", "-m", "sh", "-c",
                      "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug 2>/dev/null; exec capsh --drop=cap_sys_admin -- -c 'exec \"$0\" \"$@\"' \"$@\"", "sh"], "priv")?;
                refused(&out, 1, &["tracefs is not mounted", "CAP_SYS_ADMIN"])?;
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_no_tracefs_is_one_line_naming_the_mount",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("unshare"),
            ],
            move || {
                // No /sys/kernel/tracing to mount on: an empty read-only tmpfs over /sys/kernel.
                let (out, bin, _dir) = count_via(
                    &[
                        "unshare",
                        "-m",
                        "sh",
                        "-c",
                        "mount -t tmpfs -o ro none /sys/kernel && exec \"$@\"",
                        "sh",
                    ],
                    "priv",
                )?;
                refused(
                    &out,
                    1,
                    &[
                        "tracefs is not mounted",
                        "mount -t tracefs nodev /sys/kernel/tracing",
                    ],
                )?;
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_read_only_tracefs_is_one_line_and_no_watchdog_noise",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("unshare"),
            ],
            move || {
                let (out, bin, _dir) = count_via(
                    &[
                        "unshare",
                        "-m",
                        "sh",
                        "-c",
                        "mount -o remount,bind,ro /sys/kernel/tracing && exec \"$@\"",
                        "sh",
                    ],
                    "priv",
                )?;
                refused(
                    &out,
                    1,
                    &[
                        "mounted read-only",
                        "mount -o remount,rw /sys/kernel/tracing",
                    ],
                )?;
                nothing_registered_for(&bin)
            },
        ),
        // ---- vanishing and changing targets ----
        e2e::trial(
            "target_exits_mid_trace_counts_every_call_and_says_so",
            NEEDS,
            move || {
                let (_dir, bin) = own_tracee("exit")?;
                let cmd = format!("{bin} spin 1");
                let out = np(&["count", "-c", &cmd, &format!("{bin}:np_tick")])?;
                let stderr = text(&out.stderr);
                // The tracee prints its own call count first on stdout.
                let own: u64 = text(&out.stdout)
                    .lines()
                    .find_map(|l| l.split_whitespace().next()?.parse().ok())
                    .ok_or("no call count from the tracee")?;
                if !out.status.success() || !stderr.contains("target exited after") {
                    return Err(format!("{:?} {stderr}", out.status));
                }
                if counted(&out, "np_tick") != Some(own) {
                    return Err(format!(
                        "counted {:?}, the tracee made {own}",
                        counted(&out, "np_tick")
                    ));
                }
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "target_that_execs_another_binary_stops_the_session_with_why",
            NEEDS,
            move || {
                let b = busy().display().to_string();
                let mut w = fixtures::live::Waiting::start(Command::new(&b).args([
                    "exec",
                    "7",
                    "/bin/sleep",
                    "5",
                ]))?;
                let pid = w.pid().to_string();
                let (child, errs) = fixtures::live::spawn_until_live(
                    Command::new(NP).args(["count", "-p", &pid, &format!("{b}:g500")]),
                    Duration::from_secs(30),
                )?;
                let done = w.go()?;
                if done.trim() != "done 7" {
                    return Err(format!("busy said {done:?}"));
                }
                let _ = w.go(); // execs /bin/sleep now
                let out = child.wait_with_output().map_err(err)?;
                let stderr = errs.join().unwrap_or_default();
                let out = Output {
                    stderr: stderr.clone().into_bytes(),
                    ..out
                };
                if !out.status.success()
                    || !stderr.contains(&format!("target {pid} ran another program (execve)"))
                    || !stderr.contains("it now runs /usr/bin/sleep")
                {
                    return Err(format!("{:?} {stderr}", out.status));
                }
                if counted(&out, "g500") != Some(7) {
                    return Err(format!("expected 7 calls of g500: {}", text(&out.stdout)));
                }
                nothing_registered_for(&b)
            },
        ),
        e2e::trial("zombie_target_is_refused_by_name", NEEDS, move || {
            let mut z = Command::new(tracee())
                .args(["now", "1"])
                .stdout(Stdio::null())
                .spawn()
                .map_err(err)?;
            wait_zombie(z.id())?;
            let out = np(&["trace", "-p", &z.id().to_string(), "np_add"])?;
            let _ = z.wait();
            refused(&out, 1, &["is a zombie", &format!("process {}", z.id())])
        }),
        e2e::trial(
            "kernel_thread_target_is_refused_by_name",
            &[Need::Root, Need::Tracefs],
            move || {
                let out = np(&["trace", "-p", "2", "np_add"])?;
                refused(&out, 1, &["process 2", "is a kernel thread"])
            },
        ),
        e2e::trial(
            "image_deleted_while_probed_keeps_every_hit",
            NEEDS,
            move || image_changed_while_probed(false),
        ),
        e2e::trial(
            "image_replaced_on_disk_while_probed_keeps_every_hit",
            NEEDS,
            move || image_changed_while_probed(true),
        ),
        e2e::trial(
            "session_owner_pid_reused_by_another_program_is_cleaned",
            NEEDS,
            move || {
                // A session named after pid P whose netprobe died while P now runs something else
                // (here: a tracee): `clean` must see P is no netprobe and remove the session.
                use std::os::unix::fs::MetadataExt;
                let w =
                    fixtures::live::Waiting::start(Command::new(tracee()).args(["stdin", "1"]))?;
                let ns = std::fs::metadata("/proc/self/ns/pid").map_err(err)?.ino();
                let name = format!("netprobe_{ns}_{}", w.pid());
                let nm = Command::new("nm").arg(tracee()).output().map_err(err)?;
                let off = text(&nm.stdout)
                    .lines()
                    .find(|l| l.ends_with(" np_add"))
                    .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
                    .ok_or("nm: no np_add")?;
                let line = format!("p:{name}/np_add {}:{off:#x}\n", t());
                {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(format!("{TRACEFS}/uprobe_events"))
                        .map_err(err)?;
                    f.write_all(line.as_bytes()).map_err(err)?;
                }
                std::fs::create_dir(format!("{TRACEFS}/instances/{name}")).map_err(err)?;
                let out = np(&["clean"])?;
                let said = text(&out.stdout);
                let left = fixtures::live::leftovers(TRACEFS, w.pid());
                if !out.status.success()
                    || !said.contains(&format!("removed {name}: 1 event(s), instance"))
                    || left.is_some()
                {
                    return Err(format!(
                        "clean: {said} {} left: {left:?}",
                        text(&out.stderr)
                    ));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "sigkill_before_the_command_is_released_leaves_no_waiting_command_and_no_session",
            NEEDS,
            move || {
                // `-c` forks the command paused before placing the probes (1,000 here: time to
                // hit that window). SIGKILL netprobe there: the paused command must give up (it
                // never runs untraced), and the watchdog must remove the session by itself.
                let b = busy().display().to_string();
                let np = Command::new(NP)
                    .args(["count", "-c", &format!("{b} run"), &format!("{b}:g*")])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(err)?;
                let pid = np.id();
                let comm = |p: &str| {
                    std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default()
                };
                let end = Instant::now() + Duration::from_secs(10);
                let paused = loop {
                    let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                        .unwrap_or_default();
                    // Children: the watchdog (named netprobe-watch once it runs), then the
                    // paused command (still netprobe's image and name).
                    let kids: Vec<&str> = kids.split_whitespace().collect();
                    if kids.iter().any(|k| comm(k).trim() == "netprobe-watch") {
                        if let Some(k) = kids.iter().find(|k| comm(k).trim() == "netprobe") {
                            break k.to_string();
                        }
                    }
                    if Instant::now() > end {
                        return Err("never saw the paused command".into());
                    }
                    std::thread::sleep(Duration::from_millis(1));
                };
                // SAFETY: signalling our own child.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                let mut np = np;
                let _ = np.wait();
                let end = Instant::now() + Duration::from_secs(6);
                loop {
                    let state =
                        std::fs::read_to_string(format!("/proc/{paused}/stat")).unwrap_or_default();
                    let exited = state.is_empty()
                        || state
                            .rsplit(')')
                            .next()
                            .is_some_and(|t| t.trim_start().starts_with('Z'));
                    let left = fixtures::live::leftovers(TRACEFS, pid);
                    if exited && left.is_none() {
                        break;
                    }
                    if Instant::now() > end {
                        return Err(format!(
                            "6 s after the kill: paused command {paused} exited={exited}, {left:?}"
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                if comm(&paused).trim() == "busy" {
                    return Err("the command ran untraced after netprobe died".into());
                }
                Ok(())
            },
        ),
    ];
    trials.extend(user_trials());
    trials.extend(capability_trials());
    trials.extend(hostile_trials());
    e2e::run(trials);
}

/// Traces a tracee started from a copy of its binary, then deletes the copy (or renames another
/// file over it) before the calls: the uprobe sits on the inode, which the running process keeps,
/// so every call is still seen with exact arguments; a second session started after the change
/// finds the file through /proc/PID/map_files.
fn image_changed_while_probed(replace: bool) -> Result<(), String> {
    let dir = scratch("image")?;
    let copy = tracee_at(dir.path(), "tracee")?;
    let c = copy.display().to_string();
    let mut w = fixtures::live::Waiting::start(Command::new(&copy).args(["stdin", "4"]))?;
    let pid = w.pid().to_string();
    let (first, errs) = fixtures::live::spawn_until_live(
        Command::new(NP).args([
            "trace",
            "--json",
            "-p",
            &pid,
            &format!("{c}:np_add a=s32 b=s64 s=string"),
        ]),
        Duration::from_secs(30),
    )?;
    if replace {
        let other = dir.path().join("other");
        std::fs::copy("/bin/true", &other).map_err(err)?;
        std::fs::rename(&other, &copy).map_err(err)?;
    } else {
        std::fs::remove_file(&copy).map_err(err)?;
    }
    // A session started now: the name of the deleted/replaced file no longer leads to the code.
    let (second, errs2) = fixtures::live::spawn_until_live(
        Command::new(NP).args(["count", "-p", &pid, "np_add"]),
        Duration::from_secs(30),
    )?;
    if w.go()?.trim() != "done" {
        return Err("tracee did not finish its calls".into());
    }
    drop(w.finish());
    let out = first.wait_with_output().map_err(err)?;
    let out2 = second.wait_with_output().map_err(err)?;
    let (e1, e2) = (
        errs.join().unwrap_or_default(),
        errs2.join().unwrap_or_default(),
    );
    let hits: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for i in 1..=4i64 {
        let h = hits
            .get(i as usize - 1)
            .ok_or_else(|| format!("{} hits: {e1}", hits.len()))?;
        if h["args"]["a"] != i - 3
            || h["args"]["b"] != i * 100_000_000_000
            || h["args"]["s"] != format!("lbl-{i}")
        {
            return Err(format!("call {i}: {h}"));
        }
    }
    let out2 = Output {
        stderr: e2.clone().into_bytes(),
        ..out2
    };
    if hits.len() != 4 || !e1.contains("target exited") || counted(&out2, "np_add") != Some(4) {
        return Err(format!(
            "{} hits; first: {e1}; second: {} {e2}",
            hits.len(),
            text(&out2.stdout)
        ));
    }
    nothing_registered_for(&c)
}

/// One trial per row of the hostile-input table.
fn hostile_trials() -> Vec<e2e::E2eTrial> {
    let named = |dir_name: &'static str, needles: &'static [&'static str]| {
        move || -> Result<(), String> {
            let dir = scratch("name")?;
            let sub = dir.path().join(dir_name);
            let bin = tracee_at(&sub, "tracee")?;
            let b = bin.display().to_string();
            let cmd = format!("{} now 2", tracee().display());
            let out = np(&["count", "-c", &cmd, &format!("{b}:np_add")])?;
            refused(&out, 1, needles)?;
            nothing_registered_for(&sub.display().to_string())
        }
    };
    vec![
        e2e::trial(
            "hostile_path_with_space",
            NEEDS,
            named("a b", &["a path with whitespace cannot be probed"]),
        ),
        e2e::trial(
            "hostile_path_with_newline",
            NEEDS,
            named("a\nb", &["a path with whitespace cannot be probed"]),
        ),
        e2e::trial(
            "hostile_path_with_hash",
            NEEDS,
            named("a#b", &["contains '#'", "comment"]),
        ),
        e2e::trial(
            "hostile_path_with_colon",
            NEEDS,
            named("a:b", &["a path holding ':' cannot be named"]),
        ),
        e2e::trial(
            "hostile_path_with_shell_metacharacters_is_traced_literally",
            NEEDS,
            move || {
                // No shell ever sees the path: it is traced as the file it names, and the command
                // substitution in its name runs nowhere.
                let dir = scratch("meta")?;
                let marker = dir.path().join("pwned");
                let sub = dir
                    .path()
                    .join(format!(";$(touch${{IFS}}{})|&`x`", marker.display()));
                let bin = tracee_at(&sub, "tracee")?;
                let b = bin.display().to_string();
                let cmd = format!("{b} now 3");
                let out = Command::new(NP)
                    .args(["count", "-c"])
                    .arg(&cmd)
                    .arg(format!("{b}:np_add"))
                    .output()
                    .map_err(err)?;
                if !out.status.success() || counted(&out, "np_add") != Some(3) || marker.exists() {
                    return Err(format!(
                        "{:?} {} {} marker={}",
                        out.status,
                        text(&out.stdout),
                        text(&out.stderr),
                        marker.exists()
                    ));
                }
                nothing_registered_for(&b)
            },
        ),
        e2e::trial(
            "hostile_symlink_out_of_a_container_root",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("chroot"),
            ],
            move || {
                // A process in its own root (chroot, as a container's) whose root holds
                // `/evil -> HOST_FILE`: through /proc/PID/root the absolute link would lead to
                // the host's file. netprobe only probes files the process maps (by the paths
                // /proc/PID/maps gives), so the link is refused and the host file left alone.
                let (_host_dir, host) = own_tracee("host")?;
                let root = scratch("root")?;
                let r = root.path();
                for lib in [
                    "/lib64/ld-linux-x86-64.so.2",
                    "/lib/x86_64-linux-gnu/libc.so.6",
                ] {
                    let to = r.join(lib.trim_start_matches('/'));
                    std::fs::create_dir_all(to.parent().unwrap()).map_err(err)?;
                    std::fs::copy(lib, &to).map_err(err)?;
                }
                tracee_at(r, "app")?;
                std::os::unix::fs::symlink(&host, r.join("evil")).map_err(err)?;
                let w = fixtures::live::Waiting::start(
                    Command::new("chroot").arg(r).args(["/app", "stdin", "1"]),
                )?;
                let pid = w.ready.trim().trim_start_matches("ready ").to_string();
                let out = np(&["trace", "-p", &pid, "/evil:np_add"])?;
                drop(w);
                refused(&out, 1, &["/evil is not mapped in process"])?;
                nothing_registered_for(&host)
            },
        ),
        e2e::trial("hostile_symbol_outside_every_segment", NEEDS, move || {
            let dir = scratch("sym")?;
            let bin = tracee_at(dir.path(), "tracee")?;
            let mut elf = std::fs::read(&bin).map_err(err)?;
            patch_symbol_value(&mut elf, "np_add", 0x7fff_dead_0000)?;
            std::fs::write(&bin, &elf).map_err(err)?;
            let b = bin.display().to_string();
            let out = np(&["count", "-c", &format!("{b} now 1"), &format!("{b}:np_add")])?;
            refused(&out, 1, &["np_add", "no file offset"])?;
            nothing_registered_for(&b)
        }),
        e2e::trial(
            "hostile_section_table_past_the_end_of_file",
            NEEDS,
            move || {
                let dir = scratch("shoff")?;
                let bin = tracee_at(dir.path(), "tracee")?;
                let mut elf = std::fs::read(&bin).map_err(err)?;
                let past = (elf.len() as u64 + 0x1000_0000).to_le_bytes();
                elf[0x28..0x30].copy_from_slice(&past);
                elf[0x3c..0x3e].copy_from_slice(&0xffffu16.to_le_bytes());
                std::fs::write(&bin, &elf).map_err(err)?;
                let b = bin.display().to_string();
                let out = np(&[
                    "count",
                    "-c",
                    &format!("{} now 1", tracee().display()),
                    &format!("{b}:np_add"),
                ])?;
                refused(&out, 1, &[&b])?;
                nothing_registered_for(&b)
            },
        ),
        e2e::trial("hostile_spec_with_300_arguments", NEEDS, move || {
            let (_dir, tp) = own_tracee("h")?;
            let spec = format!("{}:np_add {}", tp, vec!["u64"; 300].join(" "));
            let out = np(&["trace", "-c", &format!("{} now 1", tp), &spec])?;
            refused(&out, 1, &["301 arguments", "at most 128"])?;
            nothing_registered_for(&tp)
        }),
        e2e::trial("hostile_absurd_offset", NEEDS, move || {
            let (_dir, tp) = own_tracee("h")?;
            let out = np(&[
                "count",
                "-c",
                &format!("{} now 1", tp),
                &format!("{}:0xffffffffffff", tp),
            ])?;
            refused(&out, 1, &["no executable segment"])?;
            nothing_registered_for(&tp)
        }),
        e2e::trial("hostile_absurd_buffer_size", NEEDS, move || {
            let (_dir, tp) = own_tracee("h")?;
            let out = np(&[
                "count",
                "--buffer-kb",
                "99999999999",
                "-c",
                &format!("{} now 1", tp),
                &format!("{}:np_add", tp),
            ])?;
            refused(&out, 1, &["--buffer-kb 99999999999", "1 to 1048576 KiB"])?;
            nothing_registered_for(&tp)
        }),
    ]
}

/// `capsh` (Debian's libcap2-bin) runs; it has no `--version` that exits 0.
fn capsh_works() -> Result<(), String> {
    match Command::new("capsh").arg("--print").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("needs `capsh`: apt-get install libcap2-bin".into()),
    }
}

/// `setpriv` arguments that run what follows as nobody (uid and gid 65534, no supplementary
/// groups) holding exactly `caps` (setpriv's names, `dac_override`): as ambient capabilities,
/// the only ones a non-root uid keeps across execve (capabilities(7)). Root would not be
/// restricted by a bounding set alone: tracefs's files are root's own.
fn nobody_with(caps: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ]
    .map(String::from)
    .into();
    if !caps.is_empty() {
        let set: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
        args.push(format!("--inh-caps={}", set.join(",")));
        args.push(format!("--ambient-caps={}", set.join(",")));
    }
    args
}

/// The `ids ...` line `tracee ids N` prints.
fn ids_line(out: &Output) -> Option<String> {
    text(&out.stdout)
        .lines()
        .find(|l| l.starts_with("ids "))
        .map(str::to_string)
}

/// What `tracee ids` prints when run as `user` (a name or uid) the way `sudo -u` would run it: ids, groups and
/// home from the user database (`getent`, `id -G`), and a setuid(0) that fails.
fn ids_of(user: &str) -> Result<String, String> {
    let line = |args: &[&str]| -> Result<String, String> {
        let o = Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(err)?;
        Ok(text(&o.stdout).trim().to_string())
    };
    let pw = line(&["getent", "passwd", user])?;
    let f: Vec<&str> = pw.split(':').collect();
    if f.len() < 7 {
        return Err(format!("getent passwd {user}: {pw:?}"));
    }
    let mut groups: Vec<u32> = line(&["id", "-G", user])?
        .split_whitespace()
        .filter_map(|g| g.parse().ok())
        .collect();
    groups.sort_unstable();
    let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
    Ok(format!(
        "ids uid={u} euid={u} gid={g} egid={g} groups={} home={} user={n} logname={n} setuid0=refused",
        groups.join(","),
        f[5],
        n = f[0],
        u = f[2],
        g = f[3],
    ))
}

/// `tracee ids` prints its groups in getgroups(2) order; this sorts them to compare.
fn sorted_groups(line: &str) -> String {
    line.split(' ')
        .map(|w| match w.strip_prefix("groups=") {
            Some(g) => {
                let mut v: Vec<u32> = g.split(',').filter_map(|x| x.parse().ok()).collect();
                v.sort_unstable();
                let v: Vec<String> = v.iter().map(u32::to_string).collect();
                format!("groups={}", v.join(","))
            }
            None => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `netprobe count -c "TRACEE ids 3" TRACEE:np_add --user USER` through `wrapper` (nothing, or
/// [`nobody_with`]); checks the command ran as `user` and every call was counted.
fn count_as_user(wrapper: &[String], user: &str, tag: &str) -> Result<(), String> {
    let (_dir, bin) = own_tracee(tag)?;
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(NP);
            c
        }
        None => Command::new(NP),
    };
    let out = cmd
        .args([
            "count",
            "-c",
            &format!("{bin} ids 3"),
            &format!("{bin}:np_add"),
        ])
        .args(["--user", user])
        .output()
        .map_err(err)?;
    let want = ids_of(user)?;
    let got = ids_line(&out).map(|l| sorted_groups(&l));
    if !out.status.success() || got.as_deref() != Some(want.as_str()) {
        return Err(format!(
            "{:?}: want {want:?}, got {got:?}\n{}{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        ));
    }
    if counted(&out, "np_add") != Some(3) {
        return Err(format!("np_add not counted 3 times: {}", text(&out.stdout)));
    }
    nothing_registered_for(&bin)
}

/// `-c CMD --user NAME`: the command runs as that user, its probes placed by netprobe first.
fn user_trials() -> Vec<e2e::E2eTrial> {
    vec![
        e2e::trial(
            "user_runs_the_command_as_nobody_and_counts_every_call",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("getent"),
            ],
            move || {
                count_as_user(&[], "nobody", "user")?;
                // A numeric uid names the same user.
                count_as_user(&[], "65534", "user")
            },
        ),
        e2e::trial(
            "user_unknown_is_one_line_and_places_nothing",
            NEEDS,
            move || {
                let (_dir, bin) = own_tracee("user")?;
                for mode in ["trace", "count", "latency"] {
                    let out = np(&[
                        mode,
                        "-c",
                        &format!("{bin} ids 1"),
                        &format!("{bin}:np_add"),
                        "--user",
                        "no-such-user-np",
                    ])?;
                    refused(&out, 1, &["--user no-such-user-np", "no such user"])?;
                    if ids_line(&out).is_some() {
                        return Err(format!("{mode}: the command ran: {}", text(&out.stdout)));
                    }
                }
                let out = np(&[
                    "profile",
                    "-c",
                    &format!("{bin} ids 1"),
                    "--user",
                    "no-such-user-np",
                ])?;
                refused(&out, 1, &["--user no-such-user-np", "no such user"])?;
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial("user_without_command_is_a_usage_error", &[], move || {
            let out = np(&["trace", "-p", "1", "x:y", "--user", "nobody"])?;
            refused(&out, 1, &["--user nobody needs -c"])?;
            let out = np(&["profile", "-p", "1", "--user", "nobody"])?;
            refused(&out, 1, &["--user nobody needs -c"])
        }),
    ]
}

/// `netprobe count -p PID TRACEE:np_add` through `wrapper` on a root-owned `tracee stdin 5`,
/// released once netprobe says its probes are placed; returns netprobe's output and the tracee's
/// path. With `deleted`, the tracee's file is deleted once it runs (a package upgrade does that
/// to a running program), so only `/proc/PID/map_files` still opens it. With `bare`, the spec is
/// `np_add` alone, searched in every mapped file.
fn count_p_via(
    wrapper: &[String],
    tag: &str,
    deleted: bool,
    bare: bool,
) -> Result<(Output, String), String> {
    command_p_via("count", wrapper, tag, deleted, bare)
}

/// [`count_p_via`] with another live command (`trace`, `latency`).
fn command_p_via(
    command: &str,
    wrapper: &[String],
    tag: &str,
    deleted: bool,
    bare: bool,
) -> Result<(Output, String), String> {
    use std::io::BufRead;
    let (_dir, bin) = own_tracee(tag)?;
    let mut w = fixtures::live::Waiting::start(Command::new(&bin).args(["stdin", "5"]))?;
    let pid = w.pid().to_string();
    // The maps name a deleted file by its old path and " (deleted)"; its file name still
    // matches it.
    let image = if deleted {
        std::fs::remove_file(&bin).map_err(err)?;
        "tracee".to_string()
    } else {
        bin.clone()
    };
    let mut np = Command::new(&wrapper[0])
        .args(&wrapper[1..])
        .args([NP, command, "-p", &pid])
        .arg(if bare {
            "np_add".to_string()
        } else {
            format!("{image}:np_add")
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(err)?;
    let mut stderr = std::io::BufReader::new(np.stderr.take().ok_or("no stderr")?);
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).map_err(err)? == 0 {
            break;
        }
        seen.push_str(&line);
        if line.contains("Ctrl-C to stop") {
            w.go()?;
            w.close_stdin();
            break;
        }
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).map_err(err)?;
    drop(w);
    let mut out = np.wait_with_output().map_err(err)?;
    out.stderr = format!("{seen}{rest}").into_bytes();
    Ok((out, bin))
}

/// Each command with exactly the capabilities `docs/privileges.md`'s table lists works as a
/// non-root uid, and without any one of them it is one line naming that capability.
fn capability_trials() -> Vec<e2e::E2eTrial> {
    let needs: &[Need] = &[
        Need::Root,
        Need::Tracefs,
        Need::CCompiler,
        Need::Program("setpriv"),
        Need::Program("getent"),
    ];
    vec![
        e2e::trial(
            "privilege_trace_p_needs_dac_override_and_sys_ptrace",
            needs,
            move || {
                let all = ["dac_override", "sys_ptrace"];
                let (out, bin) = count_p_via(&nobody_with(&all), "cap", false, false)?;
                if !out.status.success() || counted(&out, "np_add") != Some(5) {
                    return Err(format!(
                        "with {all:?}: {:?} {} {}",
                        out.status,
                        text(&out.stdout),
                        text(&out.stderr)
                    ));
                }
                nothing_registered_for(&bin)?;
                for (dropped, name) in [
                    ("dac_override", "CAP_DAC_OVERRIDE"),
                    ("sys_ptrace", "CAP_SYS_PTRACE"),
                ] {
                    let left: Vec<&str> = all.iter().copied().filter(|c| *c != dropped).collect();
                    let (out, bin) = count_p_via(&nobody_with(&left), "cap", false, false)?;
                    refused(&out, 1, &[name]).map_err(|e| format!("without {name}: {e}"))?;
                    nothing_registered_for(&bin)?;
                }
                Ok(())
            },
        ),
        e2e::trial(
            "privilege_trace_p_records_with_the_same_capabilities",
            needs,
            move || {
                // `count` counts in the kernel; `trace` reads a record per hit from perf
                // buffers, which a uid without CAP_IPC_LOCK gets smaller (said on stderr):
                // the same two capabilities do.
                let all = ["dac_override", "sys_ptrace"];
                let (out, bin) = command_p_via("trace", &nobody_with(&all), "cap", false, false)?;
                let lines = text(&out.stdout)
                    .lines()
                    .filter(|l| l.contains("np_add"))
                    .count();
                if !out.status.success() || lines != 5 {
                    return Err(format!(
                        "with {all:?}: {:?} {lines} lines: {} {}",
                        out.status,
                        text(&out.stdout),
                        text(&out.stderr)
                    ));
                }
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_deleted_file_needs_checkpoint_restore",
            needs,
            move || {
                // The file a process runs was deleted: the path through /proc/PID/root opens
                // nothing, and map_files needs CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN).
                let all = ["dac_override", "sys_ptrace", "checkpoint_restore"];
                let (out, bin) = count_p_via(&nobody_with(&all), "cap", true, false)?;
                if !out.status.success() || counted(&out, "np_add") != Some(5) {
                    return Err(format!(
                        "with {all:?}: {:?} {} {}",
                        out.status,
                        text(&out.stdout),
                        text(&out.stderr)
                    ));
                }
                nothing_registered_for(&bin)?;
                let (out, bin) = count_p_via(&nobody_with(&all[..2]), "cap", true, false)?;
                refused(&out, 1, &["CAP_CHECKPOINT_RESTORE"])
                    .map_err(|e| format!("without CAP_CHECKPOINT_RESTORE: {e}"))?;
                nothing_registered_for(&bin)?;
                // A bare name searches every mapped file: the one it could not open is named,
                // not "no function matches".
                let (out, bin) = count_p_via(&nobody_with(&all[..2]), "cap", true, true)?;
                refused(&out, 1, &["CAP_CHECKPOINT_RESTORE"])
                    .map_err(|e| format!("bare name without CAP_CHECKPOINT_RESTORE: {e}"))?;
                nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "privilege_count_c_user_needs_dac_override_setuid_setgid",
            needs,
            move || {
                // netprobe runs as nobody and the command as daemon, another uid, so the drop
                // needs CAP_SETUID as well as CAP_SETGID.
                let all = ["dac_override", "setuid", "setgid"];
                count_as_user(&nobody_with(&all), "daemon", "cap")
                    .map_err(|e| format!("with {all:?}: {e}"))?;
                for (dropped, name) in [
                    ("dac_override", "CAP_DAC_OVERRIDE"),
                    ("setuid", "CAP_SETUID"),
                    ("setgid", "CAP_SETGID"),
                ] {
                    let left: Vec<&str> = all.iter().copied().filter(|c| *c != dropped).collect();
                    let (dir, bin) = own_tracee("cap")?;
                    let out = Command::new("setpriv")
                        .args(&nobody_with(&left)[1..])
                        .args([
                            NP,
                            "count",
                            "-c",
                            &format!("{bin} ids 3"),
                            &format!("{bin}:np_add"),
                        ])
                        .args(["--user", "daemon"])
                        .output()
                        .map_err(err)?;
                    refused(&out, 1, &[name]).map_err(|e| format!("without {name}: {e}"))?;
                    if ids_line(&out).is_some() {
                        return Err(format!("without {name} the command ran"));
                    }
                    nothing_registered_for(&bin)?;
                    drop(dir);
                }
                Ok(())
            },
        ),
        e2e::trial(
            "privilege_ps_names_the_missing_capability_not_root",
            needs,
            move || {
                let (_dir, bin) = own_tracee("ps")?;
                let w = fixtures::live::Waiting::start(Command::new(&bin).args(["stdin", "1"]))?;
                let pid = w.pid().to_string();
                let ps = |caps: &[&str]| -> Result<String, String> {
                    let out = Command::new("setpriv")
                        .args(&nobody_with(caps)[1..])
                        .args([NP, "ps"])
                        .output()
                        .map_err(err)?;
                    text(&out.stdout)
                        .lines()
                        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
                        .map(str::to_string)
                        .ok_or_else(|| format!("no line for {pid}: {}", text(&out.stdout)))
                };
                let bare = ps(&[])?;
                for want in ["missing CAP_DAC_OVERRIDE", "missing CAP_SYS_PTRACE"] {
                    if !bare.contains(want) || bare.contains("not root") {
                        return Err(format!("without capabilities, want {want:?}: {bare}"));
                    }
                }
                let with = ps(&["dac_override", "sys_ptrace"])?;
                if !with.trim_end().ends_with("yes") {
                    return Err(format!("with both capabilities, want yes: {with}"));
                }
                Ok(())
            },
        ),
    ]
}
