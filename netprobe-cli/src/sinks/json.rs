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

    fn trace_line(&self, out: &mut dyn Write, l: &TraceLine<'_>) -> io::Result<()> {
        let mut obj = json!({
            "time_s": (l.rel_s * 1e6).round() / 1e6,
            "mono_ns": l.mono_ns,
            "pid": l.pid,
            "tid": l.tid,
            "comm": l.comm,
            "function": l.function,
            // Lossy: a path that is not UTF-8 still prints (serde refuses it).
            "image": l.image.to_string_lossy(),
            "event": l.role,
        });
        match l.role {
            Role::Entry => {
                let args: serde_json::Map<String, serde_json::Value> = l
                    .args
                    .iter()
                    .map(|(n, v)| (n.clone(), serde_json::to_value(v).unwrap_or_default()))
                    .collect();
                obj["args"] = serde_json::Value::Object(args);
            }
            Role::Return => {
                if let Some(v) = l.retval() {
                    obj["retval"] = serde_json::to_value(v).unwrap_or_default();
                }
            }
        }
        if let Some(s) = l.stack {
            obj["stack"] = if s.missing {
                serde_json::Value::Null
            } else {
                serde_json::to_value(&s.frames).unwrap_or_default()
            };
            obj["stack_cut"] = serde_json::to_value(s.cut).unwrap_or_default();
        }
        writeln!(out, "{obj}")
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
        let obj = json!({
            "elapsed_s": (r.elapsed_s * 1e3).round() / 1e3,
            "counts": counts,
            "lost": r.lost.counted,
            "complete": !r.lost.any(),
        });
        writeln!(out, "{obj}")
    }

    fn latency(&self, out: &mut dyn Write, r: &LatencyReport<'_>) -> io::Result<()> {
        for (name, stats) in &r.functions {
            let Some(s) = stats else {
                writeln!(out, "{}", json!({"function": name, "count": 0}))?;
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
                json!({
                    "function": name,
                    "count": s.calls,
                    "p50_ns": s.p50_ns, "p90_ns": s.p90_ns, "p99_ns": s.p99_ns, "max_ns": s.max_ns,
                    "buckets": buckets,
                    "lost": r.lost.counted,
                    "complete": !r.lost.any(),
                })
            )?;
        }
        Ok(())
    }
}
