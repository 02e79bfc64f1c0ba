//! `netprobe trace` on real uprobes (root, tracefs, a C compiler): every call of the tracee with
//! exact arguments and returns from the first one, raw array fetch-args, pids inside a pid
//! namespace, `-p` scoping, two sessions on one function, text output and `--max-events`.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]), whose call i is
//! `np_add(i - 3, i * 100000000000, "lbl-<i>") = a + b + strlen(s)`.

use fixtures::e2e::{self, err, json_lines_strict, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use std::process::Command;

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![
        e2e::trial(
            "trace_c_sees_every_call_with_exact_args_and_returns_from_the_first",
            NEEDS,
            move || {
                let _g = session::shared();
                let bin = t();
                let out = netprobe::command()
                    .args([
                        "trace",
                        "--json",
                        "-c",
                        &format!("{bin} now 25"),
                        &format!("{bin}:np_add a=s32 b=s64 s=string"),
                        &format!("r:{bin}:np_add s64"),
                    ])
                    .output()
                    .map_err(err)?;
                if !out.status.success() {
                    return Err(format!(
                        "netprobe failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let hits = json_lines_strict(&out.stdout)?;
                // -c: the first call (i = 1, a = -2) is there, so tracing started before the command ran.
                tracee::check_hits(&hits, 25, None)
            },
        ),
        e2e::trial(
            "raw_array_fetch_args_decode_every_element",
            NEEDS,
            move || {
                // The kernel declares array fields without a length (`u8 w[]; size:5`); each call's
                // label "lbl-<i>" must come back byte for byte, and as u16 pairs.
                let _g = session::shared();
                let bin = t();
                let out = netprobe::command()
                    .args([
                        "trace",
                        "--json",
                        "-c",
                        &format!("{bin} now 9"),
                        &format!("{bin}:np_add w=+0(%dx):u8[5] u=+0(%dx):u16[2]"),
                    ])
                    .output()
                    .map_err(err)?;
                let hits = json_lines_strict(&out.stdout)?;
                if hits.len() != 9 {
                    return Err(format!(
                        "{} hits for 9 calls: {}",
                        hits.len(),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                for (i, h) in hits.iter().enumerate() {
                    let label = format!("lbl-{}", i + 1);
                    let want: Vec<u64> = label.bytes().map(u64::from).collect();
                    let got: Vec<u64> =
                        serde_json::from_value(h["args"]["w"].clone()).map_err(err)?;
                    if got != want {
                        return Err(format!("call {}: w = {got:?}, want {want:?}", i + 1));
                    }
                    let b = label.as_bytes();
                    let pairs = vec![
                        u64::from(u16::from_le_bytes([b[0], b[1]])),
                        u64::from(u16::from_le_bytes([b[2], b[3]])),
                    ];
                    let got: Vec<u64> =
                        serde_json::from_value(h["args"]["u"].clone()).map_err(err)?;
                    if got != pairs {
                        return Err(format!("call {}: u = {got:?}, want {pairs:?}", i + 1));
                    }
                }
                Ok(())
            },
        ),
        e2e::trial(
            "inside_a_pid_namespace_hits_arrive_with_the_namespace_pids",
            &[
                Need::Root,
                Need::Tracefs,
                Need::CCompiler,
                Need::Program("unshare"),
            ],
            move || {
                // A sidecar's situation: netprobe and its target in a pid namespace, where
                // set_event_pid's kernel (global) pids cannot be named directly.
                let _g = session::shared();
                let bin = t();
                let out = Command::new("unshare")
                    .args([
                        "--pid",
                        "--fork",
                        "--mount-proc",
                        netprobe::bin(),
                        "trace",
                        "--json",
                        "-c",
                    ])
                    .arg(format!("{bin} now 7"))
                    .arg(format!("{bin}:np_add a=s32 b=s64 s=string"))
                    .arg(format!("r:{bin}:np_add s64"))
                    .output()
                    .map_err(err)?;
                let hits = json_lines_strict(&out.stdout)?;
                tracee::check_hits(&hits, 7, None).map_err(|e| {
                    format!("{e}; stderr: {}", String::from_utf8_lossy(&out.stderr))
                })?;
                // The ids shown are the namespace's (netprobe is 1 there, its child small).
                for h in &hits {
                    let pid = h["pid"].as_u64().ok_or("no pid")?;
                    if !(2..100).contains(&pid) || h["tid"].as_u64() != Some(pid) {
                        return Err(format!("namespace ids expected, got {h}"));
                    }
                }
                Ok(())
            },
        ),
        e2e::trial("pid_filter_sees_only_that_process", NEEDS, move || {
            let _g = session::shared();
            let bin = t();
            let mut mine = tracee::Waiting::start(40);
            let mut other = tracee::Waiting::start(40);
            let pid = mine.pid().to_string();
            let (np, errs) = netprobe::start_until_live(&[
                "trace",
                "--json",
                "-p",
                &pid,
                &format!("{bin}:np_add a=s32 b=s64 s=string"),
                &format!("r:{bin}:np_add s64"),
            ]);
            other.go();
            mine.go();
            other.finish();
            mine.finish(); // target exits: netprobe stops by itself
            let out = np.wait_with_output().map_err(err)?;
            let stderr = errs.join().unwrap();
            if !out.status.success() {
                return Err(stderr);
            }
            tracee::check_hits(
                &json_lines_strict(&out.stdout)?,
                40,
                Some(pid.parse().unwrap()),
            )?;
            if !stderr.contains("target exited") {
                return Err(format!("expected a stop on target exit: {stderr}"));
            }
            Ok(())
        }),
        e2e::trial(
            "two_sessions_on_one_function_see_only_their_own_hits",
            NEEDS,
            move || {
                let _g = session::shared();
                let bin = t();
                let mut a = tracee::Waiting::start(30);
                let mut b = tracee::Waiting::start(17);
                let spec = [
                    format!("{bin}:np_add a=s32 b=s64 s=string"),
                    format!("r:{bin}:np_add s64"),
                ];
                let (na, ea) = netprobe::start_until_live(&[
                    "trace",
                    "--json",
                    "-p",
                    &a.pid().to_string(),
                    &spec[0],
                    &spec[1],
                ]);
                let (nb, eb) = netprobe::start_until_live(&[
                    "trace",
                    "--json",
                    "-p",
                    &b.pid().to_string(),
                    &spec[0],
                    &spec[1],
                ]);
                a.go();
                b.go();
                let (pa, pb) = (a.pid() as u64, b.pid() as u64);
                a.finish();
                b.finish();
                let oa = na.wait_with_output().map_err(err)?;
                let ob = nb.wait_with_output().map_err(err)?;
                let (ea, eb) = (ea.join().unwrap(), eb.join().unwrap());
                tracee::check_hits(&json_lines_strict(&oa.stdout)?, 30, Some(pa))
                    .map_err(|e| format!("{e}; {ea}"))?;
                tracee::check_hits(&json_lines_strict(&ob.stdout)?, 17, Some(pb))
                    .map_err(|e| format!("{e}; {eb}"))
            },
        ),
        e2e::trial("text_output_and_max_events", NEEDS, move || {
            let _g = session::shared();
            let bin = t();
            let out = netprobe::command()
                .args([
                    "trace",
                    "--max-events",
                    "3",
                    "-c",
                    &format!("{bin} now 10"),
                    &format!("{bin}:np_add a=s32 b=x64 s=string"),
                ])
                .output()
                .map_err(err)?;
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().skip(1).collect();
            if lines.len() != 3
                || !lines[0].contains("-> np_add(a=-2, b=0x174876e800, s=\"lbl-1\")")
            {
                return Err(text.into_owned());
            }
            Ok(())
        }),
    ]);
}
