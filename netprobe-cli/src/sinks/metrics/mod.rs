//! `--metrics ADDR:PORT`: the hits of `count` and `latency` as Prometheus metrics, served on
//! `/metrics` (`http/`) beside the text output.
//!
//! [`Metrics`] holds one series per (function, image, pid, comm, container); [`Exported`] is a
//! sink decorator that feeds it from the hits the runner hands to the command's own sink. A
//! session that re-attaches to a restarted target ([`Metrics::rebind`]) keeps its series: a
//! function is known by name and image (the path as the process names it, without
//! `/proc/PID/root`), so the new process's series differ from the old one's by pid only. The
//! exposition is written by the official Rust client, `prometheus-client` (OpenMetrics text
//! format, <https://github.com/prometheus/OpenMetrics/blob/v1.0.0/specification/OpenMetrics.md>),
//! through a [`Collector`] that encodes the series in a stable order:
//!
//! - `netprobe_calls_total{function,image,pid,comm,container}`: calls (entry hits; return hits
//!   of return-only probes), as `netprobe count` counts them;
//! - `netprobe_call_duration_seconds{function,image,pid,comm,container}` (`latency`): a classic
//!   histogram
//!   whose `le` bounds are the upper ends of the latency sink's log2 buckets
//!   ([`super::latency::bucket_bounds`]: `(2^(i+1) - 1)` ns), so each bucket holds exactly
//!   the calls of the text histogram's rows up to it;
//! - `container`: the container's name (Docker's metadata or Engine API), else its short id,
//!   from the process's cgroup (`/proc/PID/cgroup`); empty for a process on the host;
//! - `netprobe_lost_events_total`, `netprobe_probes_attached`, and
//!   `netprobe_dropped_series_total`: hits not exported because their series would pass the cap
//!   (memory stays bounded whatever the label cardinality; said once on stderr).

//!
//! The parts: the series and their cap (`series.rs`), their exposition and labels
//! (`exposition.rs`), the sink decorator (`exported.rs`), and the `/metrics` server (`http/`,
//! with `basic_auth.rs` and `web_config.rs`).

pub mod basic_auth;
mod exported;
mod exposition;
pub mod http;
mod series;
pub mod web_config;

pub use exported::Exported;
pub use series::image_label;
pub use series::{Metrics, Task, DEFAULT_MAX_SERIES};

#[cfg(test)]
mod tests;
