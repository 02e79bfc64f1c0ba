//! What netprobe answers when the ground moves (RELIABILITY.md, "Vanishing and changing targets"):
//! targets that exit or exec mid-session, zombies and kernel threads, images deleted or replaced on
//! disk while probed, a session owner whose pid now names another program, and a SIGKILL before the
//! `-c` command is released. Root, tracefs, a C compiler.
//!
//! Targets: `fixtures/c/tracee.c` ([`fixtures::tracee`]) and `fixtures/c/busy.c`.

use fixtures::e2e::{self, err, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";

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

/// Traces a tracee started from a copy of its binary, then deletes the copy (or renames another
/// file over it) before the calls: the uprobe sits on the inode, which the running process keeps,
/// so every call is still seen with exact arguments; a second session started after the change
/// finds the file through /proc/PID/map_files.
fn image_changed_while_probed(replace: bool) -> Result<(), String> {
    let dir = tracee::scratch("image")?;
    let copy = tracee::copy_at(dir.path(), "tracee")?;
    let c = copy.display().to_string();
    let mut w = fixtures::live::Waiting::start(Command::new(&copy).args(["stdin", "4"]))?;
    let pid = w.pid().to_string();
    let (first, errs) = fixtures::live::spawn_until_live(
        netprobe::command().args([
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
        netprobe::command().args(["count", "-p", &pid, "np_add"]),
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
    let hits: Vec<serde_json::Value> = e2e::text(&out.stdout)
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
    if hits.len() != 4
        || !e1.contains("target exited")
        || netprobe::counted(&out2, "np_add") != Some(4)
    {
        return Err(format!(
            "{} hits; first: {e1}; second: {} {e2}",
            hits.len(),
            e2e::text(&out2.stdout)
        ));
    }
    session::nothing_registered_for(&c)
}

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
        tracee::busy();
    }
    let t = || tracee::bin().display().to_string();
    let trials = vec![
        e2e::trial(
            "target_exits_mid_trace_counts_every_call_and_says_so",
            NEEDS,
            move || {
                let (_dir, bin) = tracee::own_copy("exit")?;
                let cmd = format!("{bin} spin 1");
                let out = netprobe::output(&["count", "-c", &cmd, &format!("{bin}:np_tick")])?;
                let stderr = e2e::text(&out.stderr);
                // The tracee prints its own call count first on stdout.
                let own: u64 = e2e::text(&out.stdout)
                    .lines()
                    .find_map(|l| l.split_whitespace().next()?.parse().ok())
                    .ok_or("no call count from the tracee")?;
                if !out.status.success() || !stderr.contains("target exited after") {
                    return Err(format!("{:?} {stderr}", out.status));
                }
                if netprobe::counted(&out, "np_tick") != Some(own) {
                    return Err(format!(
                        "counted {:?}, the tracee made {own}",
                        netprobe::counted(&out, "np_tick")
                    ));
                }
                session::nothing_registered_for(&bin)
            },
        ),
        e2e::trial(
            "target_that_execs_another_binary_stops_the_session_with_why",
            NEEDS,
            move || {
                let b = tracee::busy().display().to_string();
                let mut w = fixtures::live::Waiting::start(Command::new(&b).args([
                    "exec",
                    "7",
                    "/bin/sleep",
                    "5",
                ]))?;
                let pid = w.pid().to_string();
                let (child, errs) = fixtures::live::spawn_until_live(
                    netprobe::command().args(["count", "-p", &pid, &format!("{b}:g500")]),
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
                if netprobe::counted(&out, "g500") != Some(7) {
                    return Err(format!(
                        "expected 7 calls of g500: {}",
                        e2e::text(&out.stdout)
                    ));
                }
                session::nothing_registered_for(&b)
            },
        ),
        e2e::trial("zombie_target_is_refused_by_name", NEEDS, move || {
            let mut z = Command::new(tracee::bin())
                .args(["now", "1"])
                .stdout(Stdio::null())
                .spawn()
                .map_err(err)?;
            wait_zombie(z.id())?;
            let out = netprobe::output(&["trace", "-p", &z.id().to_string(), "np_add"])?;
            let _ = z.wait();
            netprobe::refused(&out, 1, &["is a zombie", &format!("process {}", z.id())])
        }),
        e2e::trial(
            "kernel_thread_target_is_refused_by_name",
            &[Need::Root, Need::Tracefs],
            move || {
                let out = netprobe::output(&["trace", "-p", "2", "np_add"])?;
                netprobe::refused(&out, 1, &["process 2", "is a kernel thread"])
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
                let w = fixtures::live::Waiting::start(
                    Command::new(tracee::bin()).args(["stdin", "1"]),
                )?;
                let ns = std::fs::metadata("/proc/self/ns/pid").map_err(err)?.ino();
                let name = format!("netprobe_{ns}_{}", w.pid());
                let nm = Command::new("nm")
                    .arg(tracee::bin())
                    .output()
                    .map_err(err)?;
                let off = e2e::text(&nm.stdout)
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
                let out = netprobe::output(&["clean"])?;
                let said = e2e::text(&out.stdout);
                let left = fixtures::live::leftovers(TRACEFS, w.pid());
                if !out.status.success()
                    || !said.contains(&format!("removed {name}: 1 event(s), instance"))
                    || left.is_some()
                {
                    return Err(format!(
                        "clean: {said} {} left: {left:?}",
                        e2e::text(&out.stderr)
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
                let b = tracee::busy().display().to_string();
                let np = netprobe::command()
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
    e2e::run(trials);
}
