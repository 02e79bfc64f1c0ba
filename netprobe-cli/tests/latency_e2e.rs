//! `netprobe latency` on real uprobes (root, tracefs, a C compiler): every entry paired with its
//! return.
//!
//! The target is `fixtures/c/tracee.c` ([`fixtures::tracee`]).

use fixtures::e2e::{self, err, json_lines_strict, Need};
use fixtures::tracee::NEEDS;
use fixtures::{netprobe, session, tracee};

fn main() {
    if e2e::unmet(&[Need::CCompiler]).is_none() {
        tracee::bin();
    }
    let t = || tracee::bin().display().to_string();
    e2e::run(vec![e2e::trial(
        "latency_pairs_every_call",
        NEEDS,
        move || {
            let _g = session::shared();
            let bin = t();
            let out = netprobe::command()
                .args([
                    "latency",
                    "--json",
                    "-c",
                    &format!("{bin} now 300"),
                    &format!("{bin}:np_add"),
                ])
                .output()
                .map_err(err)?;
            let lines = json_lines_strict(&out.stdout)?;
            let f = lines.first().ok_or("no output")?;
            if f["count"] != 300 || f["p50_ns"].as_u64().unwrap_or(0) == 0 {
                return Err(format!("{f}"));
            }
            let bucket_sum: u64 = f["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["count"].as_u64().unwrap())
                .sum();
            if bucket_sum != 300 {
                return Err(format!("buckets sum to {bucket_sum}"));
            }
            Ok(())
        },
    )]);
}
