//! `netprobe count` on real uprobes (root, tracefs, a C compiler): counts equal the calls made,
//! exactly, for one function and for a thousand and ten thousand functions in one session.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]).

use fixtures::e2e::{self, err, json_lines_strict, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};
use serde_json::Value as Json;

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![
        e2e::trial(
            "a_thousand_functions_in_one_session_each_counted_exactly",
            NEEDS,
            move || {
                // 1,000 probes share a few kernel events (multi-probe events tagged with np_id); every
                // hit must still be attributed to its own function.
                let _g = session::shared();
                let many = fixtures::CProgram::new("many").flags(&["-O1"]).build();
                let many = many.to_str().unwrap();
                let out = netprobe::command()
                    .args([
                        "count",
                        "--json",
                        "-c",
                        &format!("{many} 7"),
                        &format!("{many}:f*"),
                    ])
                    .output()
                    .map_err(err)?;
                let report: Json = serde_json::from_slice(
                    out.stdout
                        .split(|&b| b == b'\n')
                        .find(|l| !l.is_empty())
                        .unwrap_or_default(),
                )
                .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&out.stderr)))?;
                let counts = report["counts"].as_object().ok_or("no counts")?;
                let probed = counts
                    .keys()
                    .filter(|k| k.starts_with('f') && k[1..].parse::<u32>().is_ok())
                    .count();
                if probed != 1000 {
                    return Err(format!("{probed} of f0..f999 probed"));
                }
                // (`f*` also matches crt's frame_dummy, which really runs once at start-up.)
                for (name, n) in counts.iter().filter(|(k, _)| k[1..].parse::<u32>().is_ok()) {
                    let want = match name.as_str() {
                        "f0" => 7,
                        "f500" => 14,
                        "f999" => 21,
                        _ => 0,
                    };
                    if n.as_u64() != Some(want) {
                        return Err(format!("{name}: {n} calls counted, {want} made"));
                    }
                }
                if report["lost"] != 0 || report["complete"] != true {
                    return Err(format!("incomplete: {report}"));
                }
                Ok(())
            },
        ),
        e2e::trial(
            "ten_thousand_functions_in_one_session_each_counted_exactly",
            NEEDS,
            move || {
                // Every function of a 10,000-function program (fixtures/c/many10k.c), spread over
                // several multi-probe events; the program calls f_i (i % 7 + 1) times per round for
                // every i that is a multiple of 97, nothing else. Each count must be exact, and the
                // session must leave nothing registered.
                let _g = session::shared();
                let many = fixtures::CProgram::new("many10k").flags(&["-O1"]).build();
                let many = many.to_str().unwrap();
                let rounds = 3u64;
                let mut cmd = netprobe::command();
                cmd.args(["count", "--json", "-c", &format!("{many} {rounds}")]);
                // f*0 .. f*9: every f_i, and not crt's frame_dummy.
                cmd.args((0..10).map(|d| format!("{many}:f*{d}")));
                let (pid, out) = session::output_with_pid(&mut cmd)?;
                let lines = json_lines_strict(&out.stdout)?;
                let report = lines.last().ok_or(format!(
                    "no output: {}",
                    String::from_utf8_lossy(&out.stderr)
                ))?;
                let counts = report["counts"].as_object().ok_or("no counts")?;
                let mut probed = 0;
                for (name, n) in counts {
                    let Some(i) = name.strip_prefix('f').and_then(|d| d.parse::<u64>().ok()) else {
                        continue;
                    };
                    probed += 1;
                    let want = if i % 97 == 0 { rounds * (i % 7 + 1) } else { 0 };
                    if n.as_u64() != Some(want) {
                        return Err(format!("{name}: {n} calls counted, {want} made"));
                    }
                }
                if probed != 10_000 {
                    return Err(format!("{probed} of f0..f9999 counted"));
                }
                if report["lost"] != 0 || report["complete"] != true || !out.status.success() {
                    return Err(format!("incomplete: {report}"));
                }
                // Several kernel events, none of them left behind.
                let (probes, inst) = session::left_behind(pid);
                if probes || inst {
                    return Err(format!("session {} left behind", session::name(pid)));
                }
                Ok(())
            },
        ),
        e2e::trial("count_equals_calls_exactly", NEEDS, move || {
            let _g = session::shared();
            let bin = t();
            let out = netprobe::command()
                .args([
                    "count",
                    "--json",
                    "-c",
                    &format!("{bin} now 5000"),
                    &format!("{bin}:np_add"),
                ])
                .output()
                .map_err(err)?;
            let lines = json_lines_strict(&out.stdout)?;
            let last = lines.last().ok_or("no output")?;
            if last["counts"]["np_add"] != 5000 || last["complete"] != true {
                return Err(format!(
                    "{last}; stderr {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            Ok(())
        }),
    ]);
}
