//! What netprobe answers without the privileges it needs (RELIABILITY.md, "Privilege"): not
//! root, without CAP_SYS_ADMIN (tracefs writes still work, or the capability is named), tracefs
//! missing or read-only, the capabilities `trace -p`, `count -c --user` and `ps` need, and
//! `--user` running the command as another user. Every refusal is one line naming the cause, a
//! non-zero exit, and nothing written to `uprobe_events`. Root, tracefs, a C compiler, setpriv,
//! capsh, unshare and getent.
//!
//! Targets: `fixtures/c/tracee.c` ([`fixtures::tracee`]) and `fixtures/c/busy.c`.

use fixtures::e2e::{self, err, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::process::{Command, Output, Stdio};

/// `netprobe count -c "TRACEE now 3" TRACEE:np_add` through `wrapper` (e.g. `setpriv ...`, or
/// `sh -c '...; exec "$@"'` to prepare a mount namespace), on a copy of the tracee; returns the
/// output and the copy's path.
fn count_via(wrapper: &[&str], tag: &str) -> Result<(Output, String, tempfile::TempDir), String> {
    let (dir, bin) = tracee::own_copy(tag)?;
    let cmd = format!("{bin} now 3");
    let out = Command::new(wrapper[0])
        .args(&wrapper[1..])
        .args([
            netprobe::bin(),
            "count",
            "-c",
            &cmd,
            &format!("{bin}:np_add"),
        ])
        .output()
        .map_err(err)?;
    Ok((out, bin, dir))
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
    e2e::text(&out.stdout)
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
        Ok(e2e::text(&o.stdout).trim().to_string())
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
    let (_dir, bin) = tracee::own_copy(tag)?;
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(netprobe::bin());
            c
        }
        None => netprobe::command(),
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
            e2e::text(&out.stdout),
            e2e::text(&out.stderr)
        ));
    }
    if netprobe::counted(&out, "np_add") != Some(3) {
        return Err(format!(
            "np_add not counted 3 times: {}",
            e2e::text(&out.stdout)
        ));
    }
    session::nothing_registered_for(&bin)
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
                let (_dir, bin) = tracee::own_copy("user")?;
                for mode in ["trace", "count", "latency"] {
                    let out = netprobe::output(&[
                        mode,
                        "-c",
                        &format!("{bin} ids 1"),
                        &format!("{bin}:np_add"),
                        "--user",
                        "no-such-user-np",
                    ])?;
                    netprobe::refused(&out, 1, &["--user no-such-user-np", "no such user"])?;
                    if ids_line(&out).is_some() {
                        return Err(format!(
                            "{mode}: the command ran: {}",
                            e2e::text(&out.stdout)
                        ));
                    }
                }
                let out = netprobe::output(&[
                    "profile",
                    "-c",
                    &format!("{bin} ids 1"),
                    "--user",
                    "no-such-user-np",
                ])?;
                netprobe::refused(&out, 1, &["--user no-such-user-np", "no such user"])?;
                session::nothing_registered_for(&bin)
            },
        ),
        e2e::trial("user_without_command_is_a_usage_error", &[], move || {
            let out = netprobe::output(&["trace", "-p", "1", "x:y", "--user", "nobody"])?;
            netprobe::refused(&out, 1, &["--user nobody needs -c"])?;
            let out = netprobe::output(&["profile", "-p", "1", "--user", "nobody"])?;
            netprobe::refused(&out, 1, &["--user nobody needs -c"])
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
    let (_dir, bin) = tracee::own_copy(tag)?;
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
        .args([netprobe::bin(), command, "-p", &pid])
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
                if !out.status.success() || netprobe::counted(&out, "np_add") != Some(5) {
                    return Err(format!(
                        "with {all:?}: {:?} {} {}",
                        out.status,
                        e2e::text(&out.stdout),
                        e2e::text(&out.stderr)
                    ));
                }
                session::nothing_registered_for(&bin)?;
                for (dropped, name) in [
                    ("dac_override", "CAP_DAC_OVERRIDE"),
                    ("sys_ptrace", "CAP_SYS_PTRACE"),
                ] {
                    let left: Vec<&str> = all.iter().copied().filter(|c| *c != dropped).collect();
                    let (out, bin) = count_p_via(&nobody_with(&left), "cap", false, false)?;
                    netprobe::refused(&out, 1, &[name])
                        .map_err(|e| format!("without {name}: {e}"))?;
                    session::nothing_registered_for(&bin)?;
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
                let lines = e2e::text(&out.stdout)
                    .lines()
                    .filter(|l| l.contains("np_add"))
                    .count();
                if !out.status.success() || lines != 5 {
                    return Err(format!(
                        "with {all:?}: {:?} {lines} lines: {} {}",
                        out.status,
                        e2e::text(&out.stdout),
                        e2e::text(&out.stderr)
                    ));
                }
                session::nothing_registered_for(&bin)
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
                if !out.status.success() || netprobe::counted(&out, "np_add") != Some(5) {
                    return Err(format!(
                        "with {all:?}: {:?} {} {}",
                        out.status,
                        e2e::text(&out.stdout),
                        e2e::text(&out.stderr)
                    ));
                }
                session::nothing_registered_for(&bin)?;
                let (out, bin) = count_p_via(&nobody_with(&all[..2]), "cap", true, false)?;
                netprobe::refused(&out, 1, &["CAP_CHECKPOINT_RESTORE"])
                    .map_err(|e| format!("without CAP_CHECKPOINT_RESTORE: {e}"))?;
                session::nothing_registered_for(&bin)?;
                // A bare name searches every mapped file: the one it could not open is named,
                // not "no function matches".
                let (out, bin) = count_p_via(&nobody_with(&all[..2]), "cap", true, true)?;
                netprobe::refused(&out, 1, &["CAP_CHECKPOINT_RESTORE"])
                    .map_err(|e| format!("bare name without CAP_CHECKPOINT_RESTORE: {e}"))?;
                session::nothing_registered_for(&bin)
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
                    let (dir, bin) = tracee::own_copy("cap")?;
                    let out = Command::new("setpriv")
                        .args(&nobody_with(&left)[1..])
                        .args([
                            netprobe::bin(),
                            "count",
                            "-c",
                            &format!("{bin} ids 3"),
                            &format!("{bin}:np_add"),
                        ])
                        .args(["--user", "daemon"])
                        .output()
                        .map_err(err)?;
                    netprobe::refused(&out, 1, &[name])
                        .map_err(|e| format!("without {name}: {e}"))?;
                    if ids_line(&out).is_some() {
                        return Err(format!("without {name} the command ran"));
                    }
                    session::nothing_registered_for(&bin)?;
                    drop(dir);
                }
                Ok(())
            },
        ),
        e2e::trial(
            "privilege_ps_names_the_missing_capability_not_root",
            needs,
            move || {
                let (_dir, bin) = tracee::own_copy("ps")?;
                let w = fixtures::live::Waiting::start(Command::new(&bin).args(["stdin", "1"]))?;
                let pid = w.pid().to_string();
                let ps = |caps: &[&str]| -> Result<String, String> {
                    let out = Command::new("setpriv")
                        .args(&nobody_with(caps)[1..])
                        .args([netprobe::bin(), "ps"])
                        .output()
                        .map_err(err)?;
                    e2e::text(&out.stdout)
                        .lines()
                        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
                        .map(str::to_string)
                        .ok_or_else(|| format!("no line for {pid}: {}", e2e::text(&out.stdout)))
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

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
        tracee::busy();
    }
    let mut trials = vec![
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
                netprobe::refused(&out, 1, &["needs root", "sudo"])?;
                session::nothing_registered_for(&bin)
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
                if !out.status.success() || netprobe::counted(&out, "np_add") != Some(3) {
                    return Err(format!(
                        "{:?} {} {}",
                        out.status,
                        e2e::text(&out.stdout),
                        e2e::text(&out.stderr)
                    ));
                }
                session::nothing_registered_for(&bin)
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
                netprobe::refused(&out, 1, &["tracefs is not mounted", "CAP_SYS_ADMIN"])?;
                session::nothing_registered_for(&bin)
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
                netprobe::refused(
                    &out,
                    1,
                    &[
                        "tracefs is not mounted",
                        "mount -t tracefs nodev /sys/kernel/tracing",
                    ],
                )?;
                session::nothing_registered_for(&bin)
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
                netprobe::refused(
                    &out,
                    1,
                    &[
                        "mounted read-only",
                        "mount -o remount,rw /sys/kernel/tracing",
                    ],
                )?;
                session::nothing_registered_for(&bin)
            },
        ),
    ];
    trials.extend(user_trials());
    trials.extend(capability_trials());
    e2e::run(trials);
}
