//! How a check's output is judged: hits counted and their arguments compared with the table's
//! values, counts read from the last report, and `offsets --json` compared with what binutils
//! computes on the host ([`crate::oracle`]).

use super::{checks_for, KernelCheck, Reading, RunOutput};
use crate::guest_arch::GuestArch;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The outcome of one check on one system.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckResult {
    /// The check's name.
    pub check: String,
    /// True when every expectation held.
    pub ok: bool,
    /// Hits seen (None when the output gives no number).
    pub hits: Option<u64>,
    /// Why it failed, or a short note on success.
    pub detail: String,
    /// Wall time of the netprobe run.
    pub seconds: f64,
}

impl CheckResult {
    /// A failed result with `detail` as the reason.
    pub fn failed(check: &str, detail: impl Into<String>) -> CheckResult {
        CheckResult {
            check: check.to_string(),
            ok: false,
            hits: None,
            detail: detail.into(),
            seconds: 0.0,
        }
    }
}

/// Expected values per check computed on the host with tools netprobe did not write
/// (check name → function → file offset), shipped to the guest as `/fixtures/expected.json`.
pub type Expected = std::collections::BTreeMap<String, std::collections::BTreeMap<String, u64>>;

/// The [`Expected`] values of every check of `arch` that names `offsets_of`, from binutils on
/// the host. A check whose expectation cannot be computed is left out (it then fails with that
/// reason).
pub fn expected_values(arch: GuestArch, targets: &dyn Fn(&str) -> Option<PathBuf>) -> Expected {
    let mut expected = Expected::new();
    for c in checks_for(arch) {
        if c.offsets_of.is_empty() {
            continue;
        }
        let Some(path) = c.target.and_then(|t| targets(t.key())) else {
            continue;
        };
        match crate::oracle::elf_offsets(&path, c.offsets_of) {
            Ok(o) => {
                expected.insert(c.name.to_string(), o);
            }
            Err(e) => eprintln!("harness: no expected offsets for {}: {e:#}", c.name),
        }
    }
    expected
}

/// Judges `offsets --json` output against offsets from binutils.
pub fn evaluate_offsets(
    check: &KernelCheck,
    out: &RunOutput,
    want: &std::collections::BTreeMap<String, u64>,
) -> CheckResult {
    if out.code != Some(0) {
        return CheckResult::failed(
            check.name,
            format!("exit {:?}: {}", out.code, last_line(&out.stderr)),
        );
    }
    let mut got = std::collections::BTreeMap::new();
    for v in out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
    {
        let (Some(name), Some(off)) = (
            v.get("name").and_then(|n| n.as_str()),
            v.get("offset").and_then(|o| o.as_str()),
        ) else {
            continue;
        };
        if let Ok(off) = u64::from_str_radix(off.trim_start_matches("0x"), 16) {
            got.insert(name.to_string(), off);
        }
    }
    for (name, want) in want {
        match got.get(name) {
            Some(g) if g == want => {}
            Some(g) => {
                return CheckResult::failed(
                    check.name,
                    format!("{name}: netprobe says {g:#x}, nm+readelf say {want:#x}"),
                )
            }
            None => {
                return CheckResult::failed(
                    check.name,
                    format!(
                        "{name} missing from netprobe's output: {}",
                        last_line(&out.stdout)
                    ),
                )
            }
        }
    }
    CheckResult {
        check: check.name.into(),
        ok: true,
        hits: None,
        detail: format!("{} offsets equal nm+readelf", want.len()),
        seconds: 0.0,
    }
}

/// The last non-empty line of `text`, shortened, for failure reasons.
fn last_line(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut s: String = line.chars().take(160).collect();
    if line.chars().count() > 160 {
        s.push('…');
    }
    s
}

/// Judges a finished run against the check's expectations.
pub fn evaluate(check: &KernelCheck, out: &RunOutput) -> CheckResult {
    let fail = |detail: String| CheckResult::failed(check.name, detail);
    if out.timed_out {
        return fail(format!(
            "no end within {} s; stderr: {}",
            check.timeout_secs,
            last_line(&out.stderr)
        ));
    }
    if check.reading == Reading::Refused {
        return refused(check, out);
    }
    if out.code != Some(0) {
        return fail(format!(
            "exit {:?}: {}",
            out.code,
            last_line(if out.stderr.trim().is_empty() {
                &out.stdout
            } else {
                &out.stderr
            })
        ));
    }
    match check.reading {
        Reading::JsonOffsets => fail("offsets are judged by evaluate_offsets".into()),
        Reading::Refused => refused(check, out),
        Reading::JsonReturns => {
            let returns = json_returns(&out.stdout, check.function);
            let n = returns.len() as u64;
            if Some(n) != check.hits {
                return CheckResult {
                    hits: Some(n),
                    ..fail(format!(
                        "{n} return events, expected {}",
                        check.hits.unwrap_or(0)
                    ))
                };
            }
            for (i, ret) in returns.iter().enumerate() {
                for (field, want) in check.arg_values {
                    let got = ret.get(*field).map(|v| match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    if got.as_deref() != Some(*want) {
                        return CheckResult {
                            hits: Some(n),
                            ..fail(format!(
                                "return {i}: {field} = {}, expected {want}",
                                got.unwrap_or_else(|| "missing".into())
                            ))
                        };
                    }
                }
            }
            CheckResult {
                check: check.name.into(),
                ok: true,
                hits: Some(n),
                detail: "count and return values exact".into(),
                seconds: 0.0,
            }
        }
        Reading::ExitStatus => CheckResult {
            check: check.name.into(),
            ok: true,
            hits: None,
            detail: "exit 0".into(),
            seconds: 0.0,
        },
        Reading::JsonHits => {
            let hits = json_hits(&out.stdout, check.function);
            let n = hits.len() as u64;
            if Some(n) != check.hits {
                return CheckResult {
                    hits: Some(n),
                    ..fail(format!("{n} hits, expected {}", check.hits.unwrap_or(0)))
                };
            }
            for (i, hit) in hits.iter().enumerate() {
                for (arg, want) in check.arg_values {
                    match arg_value(hit, arg) {
                        Some(got) if &got == want => {}
                        got => {
                            return CheckResult {
                                hits: Some(n),
                                ..fail(format!(
                                    "hit {i}: argument {arg} = {}, expected {want}",
                                    got.unwrap_or_else(|| "missing".into())
                                ))
                            }
                        }
                    }
                }
            }
            CheckResult {
                check: check.name.into(),
                ok: true,
                hits: Some(n),
                detail: if check.arg_values.is_empty() {
                    "count exact".into()
                } else {
                    "count and arguments exact".into()
                },
                seconds: 0.0,
            }
        }
        Reading::JsonCounts if out.stdout.contains("\"complete\":false") => fail(format!(
            "netprobe reports the counts incomplete (hits lost): {}",
            last_line(&out.stdout)
        )),
        Reading::JsonCounts => match json_count(&out.stdout, check.function) {
            Some(n) if Some(n) == check.hits => CheckResult {
                check: check.name.into(),
                ok: true,
                hits: Some(n),
                detail: "count exact".into(),
                seconds: 0.0,
            },
            Some(n) => CheckResult {
                hits: Some(n),
                ..fail(format!("count {n}, expected {}", check.hits.unwrap_or(0)))
            },
            None => fail(format!(
                "no count for {} in the output: {}",
                check.function,
                last_line(&out.stdout)
            )),
        },
    }
}

/// A refusal: netprobe exited non-zero on its own (not at the time limit), printed no event, and
/// never handed the probe to the kernel (a kernel's refusal is not netprobe's).
fn refused(check: &KernelCheck, out: &RunOutput) -> CheckResult {
    let fail = |detail: String| CheckResult::failed(check.name, detail);
    if out.timed_out {
        return fail(format!(
            "ran until the time limit instead of refusing: {}",
            last_line(&out.stderr)
        ));
    }
    let events = out
        .stdout
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l.trim()).is_ok_and(|v| v.is_object())
        })
        .count();
    if out.stderr.contains("kernel refused") {
        return fail(format!(
            "netprobe placed it and the kernel refused it (netprobe's own check let it through): {}",
            last_line(&out.stderr)
        ));
    }
    match out.code {
        Some(0) => fail(format!(
            "accepted (exit 0, {events} events): {}",
            last_line(&out.stderr)
        )),
        _ if events > 0 => fail(format!(
            "exit {:?} but {events} events were traced",
            out.code
        )),
        None => fail("killed by a signal".into()),
        Some(code) => CheckResult {
            check: check.name.into(),
            ok: true,
            hits: None,
            detail: format!("refused (exit {code}): {}", last_line(&out.stderr)),
            seconds: 0.0,
        },
    }
}

/// The return events (`"event":"return"`) on `stdout` that name `function` in a string field.
pub fn json_returns(stdout: &str, function: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter(|v| v.get("event").and_then(|e| e.as_str()) == Some("return"))
        .filter(|v| {
            v.as_object().is_some_and(|o| {
                o.values()
                    .any(|val| val.as_str().is_some_and(|s| s.contains(function)))
            })
        })
        .collect()
}

/// The JSON objects on `stdout` that name `function` in a string field.
pub fn json_hits(stdout: &str, function: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        // Return events (`"event":"return"`) are not calls.
        .filter(|v| v.get("event").and_then(|e| e.as_str()) != Some("return"))
        .filter(|v| {
            v.as_object().is_some_and(|o| {
                o.iter().any(|(k, val)| {
                    k != "args" && val.as_str().is_some_and(|s| s.contains(function))
                })
            })
        })
        .collect()
}

/// The decoded argument `arg` (a name, or a 0-based position) of a hit, as decimal text.
pub fn arg_value(hit: &serde_json::Value, arg: &str) -> Option<String> {
    let args = hit.get("args")?;
    let v = match (args, arg.parse::<usize>()) {
        (serde_json::Value::Array(a), Ok(i)) => a.get(i)?,
        (serde_json::Value::Object(o), Ok(i)) => o.get(arg).or_else(|| o.values().nth(i))?,
        (serde_json::Value::Object(o), Err(_)) => o.get(arg)?,
        _ => return None,
    };
    let v = match v {
        // A decoded string is {"length": .., "text": .., "truncated": ..}; a named value
        // {"name": .., "value": ..}.
        serde_json::Value::Object(o) => o.get("text").or_else(|| o.get("value"))?,
        other => other,
    };
    Some(match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The hit count of `function` in the last JSON report on `stdout`.
pub fn json_count(stdout: &str, function: &str) -> Option<u64> {
    let mut found = None;
    for v in stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
    {
        let scope = v.get("counts").unwrap_or(&v);
        if let Some(o) = scope.as_object() {
            for (k, n) in o {
                if k.contains(function) {
                    if let Some(n) = n.as_u64() {
                        found = Some(n);
                    }
                }
            }
        }
        if let Some(a) = scope.as_array() {
            for item in a {
                let names = item
                    .as_object()
                    .map(|o| {
                        o.values()
                            .any(|s| s.as_str().is_some_and(|s| s.contains(function)))
                    })
                    .unwrap_or(false);
                if names {
                    if let Some(n) = item.get("count").and_then(|n| n.as_u64()) {
                        found = Some(n);
                    }
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str) -> &'static KernelCheck {
        crate::checks::KERNEL_CHECKS
            .iter()
            .find(|c| c.name == name)
            .unwrap()
    }

    fn ok_output(stdout: &str) -> RunOutput {
        RunOutput {
            code: Some(0),
            stdout: stdout.into(),
            ..Default::default()
        }
    }

    #[test]
    fn every_hit_needs_the_right_count_and_arguments() {
        let c = check("c-static trace");
        let hit =
            r#"{"event":"entry","function":"np_harness_add","pid":4,"args":{"a":7,"b":12345}}"#;
        let ret = r#"{"event":"return","function":"np_harness_add","pid":4,"retval":12352}"#;
        let five = std::iter::repeat_n(hit, 5).collect::<Vec<_>>().join("\n");
        let r = evaluate(c, &ok_output(&five));
        assert!(r.ok, "{r:?}");
        // Return events between the entries are not counted as calls.
        let with_returns = std::iter::repeat_n(format!("{hit}\n{ret}"), 5)
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(evaluate(c, &ok_output(&with_returns)).hits, Some(5));
        assert_eq!(r.hits, Some(5));
        let four = std::iter::repeat_n(hit, 4).collect::<Vec<_>>().join("\n");
        let r = evaluate(c, &ok_output(&four));
        assert!(!r.ok);
        assert_eq!(r.detail, "4 hits, expected 5");
        let bad = five.replacen("12345", "12346", 1);
        let r = evaluate(c, &ok_output(&bad));
        assert_eq!(r.detail, "hit 0: argument b = 12346, expected 12345");
    }

    #[test]
    fn failures_carry_their_reason() {
        let c = check("c-static trace");
        let r = evaluate(
            c,
            &RunOutput {
                code: Some(2),
                stderr: "error: unrecognized subcommand 'trace'\n\nUsage: netprobe\n".into(),
                ..Default::default()
            },
        );
        assert!(!r.ok);
        assert_eq!(r.detail, "exit Some(2): Usage: netprobe");
        let r = evaluate(
            c,
            &RunOutput {
                timed_out: true,
                ..Default::default()
            },
        );
        assert!(r.detail.starts_with("no end within 120 s"));
    }

    #[test]
    fn counts_read_from_the_last_report() {
        let c = check("c-section count");
        let out = "{\"counts\":{\"np_harness_other\":3}}\n{\"counts\":{\"harness_calls_static:np_harness_other\":9}}\n";
        let r = evaluate(c, &ok_output(out));
        assert!(r.ok, "{r:?}");
        let out = r#"{"counts":[{"function":"np_harness_other","count":8}]}"#;
        let r = evaluate(c, &ok_output(out));
        assert_eq!(r.detail, "count 8, expected 9");
    }
}
