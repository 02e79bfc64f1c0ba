//! The JSON format: one object a line (JSON Lines, <https://jsonlines.org/>), for programs. Keys
//! are sorted (serde_json's default map).

use super::latency::bucket_bounds;
use super::stack::StackCountReport;
use super::{CountReport, LatencyReport, Printer, TraceLine};
use crate::plan::Role;
use serde_json::json;
use std::io::{self, Write};

/// Prints JSON lines.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonPrinter;

impl Printer for JsonPrinter {
    fn trace_header(&self, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }

    /// Written field by field in the order serde_json's sorted map gives, with each value
    /// serialized as serde_json does, so the line is the same as serializing a `json!` object:
    /// building that object (a B-tree map of owned values) per hit was most of the reader's cost
    /// at a million hits a second.
    fn trace_line(&self, out: &mut dyn Write, l: &TraceLine<'_>) -> io::Result<()> {
        // The line is made in a buffer of this thread and written at once: many small writes
        // through `dyn Write` cost more than the formatting.
        thread_local! {
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        LINE.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            write_trace_line(&mut buf, l)?;
            out.write_all(&buf)
        })
    }

    fn stack_counts(&self, out: &mut dyn Write, r: &StackCountReport) -> io::Result<()> {
        let obj = json!({
            "elapsed_s": (r.elapsed_s * 1e3).round() / 1e3,
            "stacks": r.stacks,
            "without_stack": r.without_stack,
            "lost": r.lost.counted,
            "complete": !r.lost.any(),
        });
        writeln!(out, "{obj}")
    }

    fn counts(&self, out: &mut dyn Write, r: &CountReport<'_>) -> io::Result<()> {
        let counts: serde_json::Map<String, serde_json::Value> = r
            .rows
            .iter()
            .map(|(name, n)| (name.to_string(), json!(n)))
            .collect();
        let mut obj = json!({
            "elapsed_s": (r.elapsed_s * 1e3).round() / 1e3,
            "counts": counts,
            "lost": r.lost.counted,
            "complete": !r.lost.any(),
        });
        if !r.by_place.is_empty() {
            // One object per container: its container, pod and namespace beside its counts.
            let per: Vec<serde_json::Value> = r
                .by_place
                .iter()
                .map(|(place, rows)| {
                    let mut o = serde_json::to_value(&**place).unwrap_or_default();
                    o["counts"] = rows
                        .iter()
                        .map(|(name, n)| (name.to_string(), json!(n)))
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                    o
                })
                .collect();
            obj["containers"] = per.into();
        }
        writeln!(out, "{obj}")
    }

    fn latency(&self, out: &mut dyn Write, r: &LatencyReport<'_>) -> io::Result<()> {
        for (name, place, stats) in &r.functions {
            // Where the calls ran: the container, pod and namespace beside the function.
            let with_place = |mut o: serde_json::Value| {
                if let Some(p) = place {
                    if let (Some(o), Ok(serde_json::Value::Object(p))) =
                        (o.as_object_mut(), serde_json::to_value(&**p))
                    {
                        o.extend(p);
                    }
                }
                o
            };
            let Some(s) = stats else {
                writeln!(out, "{}", with_place(json!({"function": name, "count": 0})))?;
                continue;
            };
            let buckets: Vec<serde_json::Value> = s
                .log2
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| {
                    let (lo, hi) = bucket_bounds(i);
                    json!({"lo_ns": lo, "hi_ns": hi, "count": c})
                })
                .collect();
            writeln!(
                out,
                "{}",
                with_place(json!({
                    "function": name,
                    "count": s.calls,
                    "p50_ns": s.p50_ns, "p90_ns": s.p90_ns, "p99_ns": s.p99_ns, "max_ns": s.max_ns,
                    "buckets": buckets,
                    "lost": r.lost.counted,
                    "complete": !r.lost.any(),
                }))
            )?;
        }
        Ok(())
    }
}

/// `s` as a JSON string (serde_json's escaping), from a cache of this thread: a session's lines
/// repeat a few function names and image paths, whose escaping was a large part of each line.
fn escaped_once(w: &mut Vec<u8>, s: &str) -> io::Result<()> {
    /// Strings remembered (a session names few functions per second; beyond, the oldest go).
    const KEPT: usize = 64;
    thread_local! {
        static SEEN: std::cell::RefCell<Vec<(String, Vec<u8>)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if let Some((_, e)) = seen.iter().find(|(raw, _)| raw == s) {
            w.extend_from_slice(e);
            return Ok(());
        }
        let e = serde_json::to_vec(s).map_err(io::Error::from)?;
        w.extend_from_slice(&e);
        if seen.len() >= KEPT {
            seen.remove(0);
        }
        seen.push((s.to_string(), e));
        Ok(())
    })
}

/// One trace line into `w`: the fields in the order serde_json's sorted map gives, each value
/// serialized as serde_json does (see [`JsonPrinter::trace_line`]).
fn write_trace_line(w: &mut Vec<u8>, l: &TraceLine<'_>) -> io::Result<()> {
    fn key(w: &mut Vec<u8>, first: bool, k: &str) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, k)?;
        w.write_all(b":")
    }
    fn value(w: &mut Vec<u8>, v: &impl serde::Serialize) -> io::Result<()> {
        serde_json::to_writer(w, v).map_err(io::Error::from)
    }
    // A value that may be an object (a cut string, a stack frame) goes through
    // serde_json's map, which sorts its keys like every other object of the line.
    fn sorted(w: &mut Vec<u8>, v: &impl serde::Serialize) -> io::Result<()> {
        let v = serde_json::to_value(v).map_err(io::Error::from)?;
        serde_json::to_writer(w, &v).map_err(io::Error::from)
    }
    // One of this function's own keys, which need no escaping.
    fn fixed(w: &mut Vec<u8>, k: &[u8]) {
        w.push(b',');
        w.extend_from_slice(k);
    }
    w.write_all(b"{")?;
    let mut first = true;
    if l.role == Role::Entry {
        key(w, true, "args")?;
        first = false;
        // A JSON object names each key once: the last value of a repeated name wins, as in
        // a map built from them in order.
        let mut args: Vec<&(String, crate::plan::Value)> = l.args.iter().collect();
        args.sort_by(|a, b| a.0.cmp(&b.0));
        w.write_all(b"{")?;
        let mut written = 0;
        for (i, (n, v)) in args.iter().map(|a| (&a.0, &a.1)).enumerate() {
            if args.get(i + 1).is_some_and(|next| next.0 == *n) {
                continue;
            }
            key(w, written == 0, n)?;
            sorted(w, v)?;
            written += 1;
        }
        w.write_all(b"}")?;
    }
    key(w, first, "comm")?;
    value(w, &l.comm)?;
    if let Some(p) = l.place {
        fixed(w, b"\"container\":");
        value(w, &p.container)?;
    }
    fixed(w, b"\"event\":");
    value(w, &l.role)?;
    fixed(w, b"\"function\":");
    escaped_once(w, l.function)?;
    fixed(w, b"\"image\":");
    match l.image.to_str() {
        Some(image) => escaped_once(w, image)?,
        // Lossy: a path that is not UTF-8 still prints (serde refuses it).
        None => value(w, &l.image.to_string_lossy())?,
    }
    fixed(w, b"\"mono_ns\":");
    value(w, &l.mono_ns)?;
    if let Some(ns) = l.place.and_then(|p| p.namespace.as_ref()) {
        fixed(w, b"\"namespace\":");
        value(w, ns)?;
    }
    fixed(w, b"\"pid\":");
    value(w, &l.pid)?;
    if let Some(pod) = l.place.and_then(|p| p.pod.as_ref()) {
        fixed(w, b"\"pod\":");
        value(w, pod)?;
    }
    if l.role == Role::Return {
        if let Some(v) = l.retval() {
            key(w, false, "retval")?;
            sorted(w, v)?;
        }
    }
    if let Some(s) = l.stack {
        key(w, false, "stack")?;
        if s.missing {
            w.write_all(b"null")?;
        } else if s.unwound_by.is_empty() {
            sorted(w, &s.frames)?;
        } else {
            // Unwound from a copy of the stack: each frame says which method found it.
            let mut frames = serde_json::to_value(&s.frames).map_err(io::Error::from)?;
            if let Some(list) = frames.as_array_mut() {
                for (f, by) in list.iter_mut().zip(&s.unwound_by) {
                    f["unwound_by"] = by.as_str().into();
                }
            }
            sorted(w, &frames)?;
        }
        key(w, false, "stack_cut")?;
        value(w, &s.cut)?;
    }
    fixed(w, b"\"tid\":");
    value(w, &l.tid)?;
    fixed(w, b"\"time_s\":");
    value(w, &((l.rel_s * 1e6).round() / 1e6))?;
    w.write_all(b"}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Value;
    use crate::sinks::places::Place;

    fn line(role: Role, args: &[(String, Value)]) -> String {
        line_in(role, args, None)
    }

    fn line_in(role: Role, args: &[(String, Value)], place: Option<&Place>) -> String {
        let l = TraceLine {
            rel_s: 0.25,
            mono_ns: 7,
            pid: None,
            tid: 3,
            comm: "c\"q",
            function: "f",
            image: std::path::Path::new("/x"),
            role,
            args,
            stack: None,
            place,
        };
        let mut out = Vec::new();
        JsonPrinter.trace_line(&mut out, &l).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_trace_line_is_the_sorted_object_serde_json_would_print() {
        let args = vec![
            ("b".to_string(), Value::Signed(-1)),
            ("a".to_string(), Value::Hex(16)),
            ("b".to_string(), Value::Unsigned(2)),
        ];
        // Keys sorted; of a repeated argument name the last value, as a map built in order.
        let want = json!({
            "args": {"a": "0x10", "b": 2},
            "comm": "c\"q", "event": "entry", "function": "f", "image": "/x",
            "mono_ns": 7, "pid": null, "tid": 3, "time_s": 0.25,
        });
        assert_eq!(line(Role::Entry, &args), format!("{want}\n"));
        let ret = vec![("ret".to_string(), Value::Signed(5))];
        let want = json!({
            "comm": "c\"q", "event": "return", "function": "f", "image": "/x",
            "mono_ns": 7, "pid": null, "retval": 5, "tid": 3, "time_s": 0.25,
        });
        assert_eq!(line(Role::Return, &ret), format!("{want}\n"));
    }

    #[test]
    fn a_hit_in_a_pod_names_its_container_pod_and_namespace() {
        let place = Place {
            container: "api".into(),
            pod: Some("checkout-7d4".into()),
            namespace: Some("shop".into()),
        };
        let want = json!({
            "args": {}, "comm": "c\"q", "container": "api", "event": "entry", "function": "f",
            "image": "/x", "mono_ns": 7, "namespace": "shop", "pid": null, "pod": "checkout-7d4",
            "tid": 3, "time_s": 0.25,
        });
        assert_eq!(line_in(Role::Entry, &[], Some(&place)), format!("{want}\n"));
        let docker = Place {
            container: "web".into(),
            ..Place::default()
        };
        let want = json!({
            "args": {}, "comm": "c\"q", "container": "web", "event": "entry", "function": "f",
            "image": "/x", "mono_ns": 7, "pid": null, "tid": 3, "time_s": 0.25,
        });
        assert_eq!(
            line_in(Role::Entry, &[], Some(&docker)),
            format!("{want}\n")
        );
    }
}
