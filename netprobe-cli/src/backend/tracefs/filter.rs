//! A probe's [`ProbeFilter`] as the text of a trace event's `filter` file (kernel
//! `Documentation/trace/events.rst`, "Event filtering"): the kernel tests each hit before it
//! is committed to the ring buffer, so a filtered-out hit costs no buffer space and never wakes
//! a reader.
//!
//! What the kernel accepts (`kernel/trace/trace_events_filter.c`, `parse_pred`): a field on the
//! left, a constant on the right; numeric fields with `== != < <= > >=` (and `&`), the constant
//! parsed by `kstrtoll`/`kstrtoull` (so no negative constant for an unsigned field); string
//! fields (a `string` fetch-arg is `__data_loc char[]`) with `==`, `!=` and `~` (glob), the
//! constant quoted with `"` or `'` and no escapes, shorter than `MAX_FILTER_STR_VAL` (256);
//! the `common_pid` field (the thread id) and the `comm` pseudo-field (the task's name). It
//! refuses string comparisons on arrays (`u8[N]`, `u16[N]`: "Expecting numeric field"), field
//! to field comparisons and arithmetic. The engine's resolution (`crate::filter`) already
//! refuses what no backend can do; this module refuses what only the kernel cannot.

use crate::backend::tracefs::fetch::{field_type, FetchType};
use crate::backend::tracefs::instance::Instance;
use crate::backend::tracefs::probe::{EventName, GroupName};
use crate::error::{Error, Result};
use crate::filter::{CmpOp, Constant, FieldKind, Subject, Test};
use crate::plan::KernelProbe;
use netprobe_core::abi::IntType;
use std::path::Path;

/// Longest string constant the kernel's filter parser takes (`MAX_FILTER_STR_VAL` 256,
/// the terminating NUL included).
pub const MAX_FILTER_STRING: usize = 255;
/// Longest task name (`TASK_COMM_LEN` 16, the NUL included): a longer `comm` never matches.
pub const MAX_COMM: usize = 15;

/// The kernel filter text of probe `p`, `None` when it has no filter; `Err` says why the kernel
/// cannot evaluate it.
pub fn kernel_filter(p: &KernelProbe) -> Result<Option<String>> {
    let Some(filter) = &p.filter else {
        return Ok(None);
    };
    filter
        .render(&mut |t| test_text(p, t))
        .map(Some)
        .map_err(|why| Error::usage(format!("--filter cannot run in the kernel: {why}")))
}

fn test_text(p: &KernelProbe, t: &Test) -> std::result::Result<String, String> {
    let op = t.op.as_str();
    match &t.subject {
        Subject::Tid => Ok(format!("common_pid {op} {}", int_text(&t.value)?)),
        Subject::Comm => {
            let s = string_text(&t.value)?;
            if let Constant::Str(v) = &t.value {
                if t.op == CmpOp::Eq && v.len() > MAX_COMM {
                    return Err(format!(
                        "a task name has at most {MAX_COMM} bytes (TASK_COMM_LEN), so $comm is never \"{v}\"; the kernel keeps the first {MAX_COMM}: match \"{}\"",
                        truncate(v, MAX_COMM)
                    ));
                }
            }
            Ok(format!("comm {op} {s}"))
        }
        Subject::Field { arg, field, kind } => {
            let ty = field_type(p, field)
                .ok_or_else(|| format!("{arg} is not read by the probe (no field {field})"))?;
            match (ty, &t.value) {
                (FetchType::Int(it), Constant::Int(v)) => {
                    check_range(arg, it, *v)?;
                    Ok(format!("{field} {op} {v}"))
                }
                (FetchType::String, Constant::Str(_)) => Ok(format!("{field} {op} {}", string_text(&t.value)?)),
                (FetchType::Int(it), Constant::Str(_)) => Err(format!(
                    "{arg} is a number ({}); compare it with a number",
                    it.name()
                )),
                (FetchType::String, Constant::Int(_)) => Err(format!(
                    "{arg} is a string; compare it with a quoted string"
                )),
                (FetchType::Array { len, .. }, _) => Err(match kind {
                    FieldKind::Utf16 => format!(
                        "{arg} is a .NET string, which netprobe reads as UTF-16 characters (u16[{len}]); the kernel's event filter compares only NUL-terminated byte strings and refuses arrays (\"Expecting numeric field\"), so it cannot test {arg}; filter on another argument, $tid or $comm"
                    ),
                    FieldKind::GoString => format!(
                        "{arg} is a Go string, which netprobe reads as bytes (u8[{len}]) with its length apart (Go strings have no terminating NUL); the kernel's event filter compares only NUL-terminated strings and refuses arrays (\"Expecting numeric field\"), so it cannot test {arg}; filter on another argument, $tid or $comm"
                    ),
                    _ => format!(
                        "{arg} is an array ({}); the kernel's event filter cannot compare arrays",
                        ty.kernel_name()
                    ),
                }),
            }
        }
    }
}

fn check_range(arg: &str, t: IntType, v: i128) -> std::result::Result<(), String> {
    let (lo, hi) = crate::filter::int_range(t);
    if v < lo || v > hi {
        return Err(format!(
            "{arg} is {} ({lo}..={hi}), so {v} can never be its value",
            t.name()
        ));
    }
    Ok(())
}

fn int_text(c: &Constant) -> std::result::Result<String, String> {
    match c {
        Constant::Int(v) => Ok(v.to_string()),
        Constant::Str(s) => Err(format!("\"{s}\" is not a number")),
    }
}

/// A string constant quoted for the kernel: `"..."`, or `'...'` when it holds a `"` (the
/// kernel's parser has no escapes, so one with both quotes cannot be written).
fn string_text(c: &Constant) -> std::result::Result<String, String> {
    let Constant::Str(s) = c else {
        return Err("expected a string".into());
    };
    if s.len() > MAX_FILTER_STRING {
        return Err(format!(
            "the string is {} bytes long; the kernel's filter takes at most {MAX_FILTER_STRING}",
            s.len()
        ));
    }
    if let Some(ch) = s.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the string holds the control character {ch:?}, which a filter cannot carry"
        ));
    }
    match (s.contains('"'), s.contains('\'')) {
        (false, _) => Ok(format!("\"{s}\"")),
        (true, false) => Ok(format!("'{s}'")),
        (true, true) => Err(format!(
            "{s:?} holds both quote characters; the kernel's filter has no escapes, so it cannot be written"
        )),
    }
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The `filter` file of an event, relative to an instance or the tracefs root.
pub fn filter_file(group: &GroupName, event: &EventName) -> std::path::PathBuf {
    Path::new("events")
        .join(group.as_str())
        .join(event.as_str())
        .join("filter")
}

/// Writes `text` into the event's `filter` file under `dir` (an instance, or the tracefs root
/// for persistent probes) and reads it back. The kernel refuses a filter it cannot parse with
/// `EINVAL` and leaves its reason in the same file (`parse_error: ...`); that reason is in the
/// error.
pub fn set_filter(dir: &Path, group: &GroupName, event: &EventName, text: &str) -> Result<()> {
    let path = dir.join(filter_file(group, event));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
    let back = crate::backend::tracefs::mount::read_text(&path).unwrap_or_default();
    match written {
        Ok(()) if back.trim_end() == text => Ok(()),
        Ok(()) => Err(Error::usage(format!(
            "the kernel did not take the filter `{text}` on {group}:{event}: {} reads back `{}`",
            path.display(),
            back.trim_end()
        ))),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let reason = back
                .lines()
                .find_map(|l| l.trim().strip_prefix("parse_error:"))
                .map(|r| r.trim().to_string())
                .unwrap_or_else(|| "Invalid argument".into());
            Err(Error::usage(format!(
                "the kernel refused the filter `{text}` on {group}:{event}: {reason}"
            )))
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Sets the filter of an event of an instance (see [`set_filter`]).
pub fn set_instance_filter(
    inst: &Instance,
    group: &GroupName,
    event: &EventName,
    text: &str,
) -> Result<()> {
    set_filter(inst.dir(), group, event, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tracefs::events::event_layout;
    use crate::backend::tracefs::fetch::tests::{c_function, pos};
    use crate::filter::Expr;
    use crate::plan::{apply_filter, ArgRequest, ProbePlan, Returns};
    use netprobe_core::abi::ValueType;
    use std::fmt::Write;

    /// A C function `add(s32 n, u64 size, string name, utf16 text, gostring key, raw w)` with a
    /// uretprobe returning s32.
    fn plan() -> ProbePlan {
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(
            vec![
                pos("n", ValueType::Int(IntType::S32)),
                pos("size", ValueType::Int(IntType::U64)),
                pos("name", ValueType::CString),
                pos("text", ValueType::DotnetString),
                pos("key", ValueType::GoString),
                ArgRequest::Raw {
                    name: "w".into(),
                    text: "+0(%di):u16[4]".into(),
                },
            ],
            Returns::UretProbe,
        ))
        .unwrap();
        plan
    }

    /// What each filter becomes: the kernel text of every event, the notes, or the refusal.
    fn outcome(filter: &str) -> String {
        let mut plan = plan();
        let expr = match Expr::parse(filter) {
            Ok(e) => e,
            Err(e) => return format!("parse error: {e}"),
        };
        if let Err(e) = apply_filter(&mut plan, Some(&expr), None) {
            return format!("refused: {e}");
        }
        match event_layout(&plan) {
            Err(e) => format!("refused: {e}"),
            Ok(layout) => {
                let mut s = String::new();
                for e in layout.events {
                    let _ = write!(
                        s,
                        "{}: {}; ",
                        e.name,
                        e.filter.as_deref().unwrap_or("(none)")
                    );
                }
                for n in &plan.notes {
                    let _ = write!(s, "note: {n}; ");
                }
                s
            }
        }
    }

    #[test]
    fn kernel_filter_texts() {
        let cases = [
            "n > 5",
            "5 < n",
            "arg0 > 5",
            "n >= -3 && (size == 0x10 || !(n == 7))",
            "name == \"abc\"",
            "name ~ \"tmp*\"",
            "name != 'say \"hi\"'",
            "name == \"it's \\\"both\\\"\"",
            "name > \"a\"",
            "n == \"5\"",
            "name == 5",
            "n ~ \"5*\"",
            "size > -1",
            "n > 3000000000",
            "n == size",
            "1 == 2",
            "text == \"hello\"",
            "key == \"k1\"",
            "w == 5",
            "ret < 0",
            "ret < 0 && n > 1",
            "nosuch == 1",
            "$tid == 42 && $comm == \"app\"",
            "$comm == \"a-very-long-task-name\"",
            "$comm ~ \"a-very-long-task-name*\"",
        ];
        let mut out = String::new();
        for c in cases {
            let _ = writeln!(out, "{c}\n    => {}", outcome(c));
        }
        insta::assert_snapshot!(out);
    }

    #[test]
    fn a_function_without_arguments_says_how_to_declare_them() {
        let mut plan = ProbePlan::new(false);
        plan.add_function(c_function(vec![], Returns::None))
            .unwrap();
        let e = apply_filter(&mut plan, Some(&Expr::parse("arg0 > 5").unwrap()), None).unwrap_err();
        assert!(e.to_string().contains("reads no arguments of add"), "{e}");
    }
}
