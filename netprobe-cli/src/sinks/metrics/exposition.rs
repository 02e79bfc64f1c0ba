//! The exposition of [`Metrics`]: a `prometheus-client` [`Collector`] that writes every series
//! in a stable order (function first seen, then pid, comm, container) in the OpenMetrics text
//! format (<https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md>),
//! the latency histogram's `le` bounds being the latency sink's log2 buckets, and the labels
//! each series carries.

use super::series::{State, Task, FIRST_BUCKET, LAST_BUCKET};
use super::Metrics;
use crate::sinks::latency::bucket_bounds;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;

impl Metrics {
    /// A registry holding these metrics (what the HTTP server encodes).
    pub fn registry(self: &Arc<Metrics>) -> Registry {
        let mut r = Registry::default();
        r.register_collector(Box::new(Arc::clone(self)));
        r
    }

    /// The exposition text, as `/metrics` serves it.
    pub fn exposition(registry: &Registry) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; an encoder error would be a bug in our labels.
        if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The labels of a series: `pod` and `namespace` only for a process in a Kubernetes pod (an
/// empty label is an absent one to Prometheus; leaving them out keeps other series short).
fn labels<'a>(
    st: &'a State,
    function: usize,
    pid: &'a str,
    task: &Task<'a>,
) -> Vec<(&'static str, &'a str)> {
    let (name, image) = st
        .functions
        .get(function)
        .map_or(("", ""), |(n, i)| (n.as_str(), i.as_str()));
    let mut labels = vec![
        ("function", name),
        ("image", image),
        ("pid", pid),
        ("comm", task.comm),
        ("container", task.container),
    ];
    if let Some((namespace, pod)) = task.pod.split_once('/') {
        labels.extend([("pod", pod), ("namespace", namespace)]);
    }
    labels
}

/// The text a label holds for a pid (`unknown` when netprobe could not find the process).
fn pid_text(pid: Option<u32>) -> String {
    pid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
}

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let st = self.state();
        {
            let mut m = encoder.encode_descriptor(
                "netprobe_calls",
                "Calls per probed function (entry hits; return hits of return-only probes).",
                None,
                MetricType::Counter,
            )?;
            for (f, task, n) in st.calls.iter() {
                let pid = pid_text(task.pid);
                let labels = labels(&st, f, &pid, &task);
                m.encode_family(&labels)?
                    .encode_counter::<NoLabelSet, u64, u64>(n, None)?;
            }
        }
        if !st.durations.0.is_empty() {
            let mut m = encoder.encode_descriptor(
                "netprobe_call_duration",
                "Durations of completed calls (entry to return); le bounds are the log2 buckets of netprobe latency.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (f, task, d) in st.durations.iter() {
                {
                    let pid = pid_text(task.pid);
                    let labels = labels(&st, f, &pid, &task);
                    let buckets: Vec<(f64, u64)> = d
                        .buckets
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| {
                            let b = FIRST_BUCKET + i;
                            let le = if b > LAST_BUCKET {
                                f64::INFINITY
                            } else {
                                bucket_bounds(b).1 as f64 / 1e9
                            };
                            (le, n)
                        })
                        .collect();
                    m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                        d.sum_ns as f64 / 1e9,
                        d.count,
                        &buckets,
                        None,
                    )?;
                }
            }
        }
        encoder
            .encode_descriptor(
                "netprobe_lost_events",
                "Hits the kernel lost (ring buffer full) or that did not decode.",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, u64, u64>(&st.lost, None)?;
        encoder
            .encode_descriptor(
                "netprobe_dropped_series",
                "Hits not exported because their new series would pass the series cap (--metrics-max-series).",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, u64, u64>(&st.dropped, None)?;
        encoder
            .encode_descriptor(
                "netprobe_probes_attached",
                "Uprobes this session placed.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&st.probes)?;
        Ok(())
    }
}
