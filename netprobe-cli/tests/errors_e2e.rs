//! Errors on live runs (root, tracefs, a C compiler): each is one line, exits non-zero and leaves
//! nothing in tracefs.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]); sessions are read in tracefs
//! ([`fixtures::session`]).

use fixtures::e2e::{self, err, Need};
use fixtures::session::TRACEFS;
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::path::Path;

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![e2e::trial(
        "errors_are_one_line_and_leave_nothing",
        NEEDS,
        move || {
            let _g = session::shared();
            let bin = t();
            // A process whose main thread has exited while another runs (`pthread_exit`).
            let headless = fixtures::live::Headless::start()?;
            let headless_pid = headless.pid();
            for (args, needle) in [
                (
                    vec![
                        "trace".to_string(),
                        "-p".into(),
                        "999999999".into(),
                        "np_add".into(),
                    ],
                    "no process with pid",
                ),
                (
                    vec![
                        "trace".to_string(),
                        "-p".into(),
                        headless_pid.to_string(),
                        "sleep".into(),
                    ],
                    "its main thread has exited while 1 other thread(s) still run",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:no_such_fn")],
                    "no function matches",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:np_add bogus")],
                    "unknown argument type",
                ),
                (
                    vec!["trace".to_string(), format!("{bin}:np_add a=%zz:s32")],
                    "Invalid register name",
                ),
            ] {
                let (pid, out) = session::output_with_pid(netprobe::command().args(&args))?;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let err_lines: Vec<&str> = stderr
                    .lines()
                    .filter(|l| l.starts_with("netprobe: error"))
                    .collect();
                if out.status.code() != Some(1)
                    || err_lines.len() != 1
                    || !err_lines[0].contains(needle)
                    || stderr.contains("panicked")
                {
                    return Err(format!("{args:?}: {:?} {stderr}", out.status));
                }
                // The session's instance is prepared while names resolve: a name that fails
                // removes it before the error is shown (nothing of the session once it exits).
                if session::left_behind(pid) != (false, false) {
                    return Err(format!(
                        "{args:?}: session {} left {:?} (probes, instance)",
                        session::name(pid),
                        session::left_behind(pid)
                    ));
                }
            }
            // Other trials run concurrently: only sessions of netprobe processes that are gone count.
            let events =
                std::fs::read_to_string(format!("{TRACEFS}/uprobe_events")).map_err(err)?;
            for l in events.lines() {
                let Some(g) = l
                    .split(['/', ' '])
                    .next()
                    .and_then(|h| h.split_once(':'))
                    .map(|x| x.1)
                else {
                    continue;
                };
                if let Some(pid) = g
                    .strip_prefix("netprobe_")
                    .and_then(|p| p.split_once('_'))
                    .and_then(|(_, p)| p.parse::<u32>().ok())
                {
                    if !Path::new(&format!("/proc/{pid}")).exists() {
                        return Err(format!("probe of a dead netprobe left: {l}"));
                    }
                }
            }
            Ok(())
        },
    )]);
}
