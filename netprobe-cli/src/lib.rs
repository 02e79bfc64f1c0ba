//! netprobe-cli's library: the tracing engine, usable without the command line, and (feature
//! `cli`, on by default) the command line itself: arguments (`cli`), the commands (`commands`)
//! and their output helpers (`output`). `main.rs` only calls `cli::main`.
//!
//! Engine layers, bottom up: [`spec`] (what users type) → [`lang`] (language rules, one
//! [`lang::Planner`]) → [`plan`] (backend-neutral probes: functions, probe points, values at
//! `netprobe_core::abi` locations) → [`gate`] (every probe checked) → [`backend`] (the
//! [`backend::Backend`] trait; [`backend::tracefs`]: probe lines, instances, ring buffers, the live
//! session) with [`watchdog`] and [`signals`] for cleanup whatever happens → [`runner`] (event
//! loop) and [`sinks`] (trace lines, counts, latency; one printer per format) →
//! `commands::live`, [`demo`]. `examples/engine.rs` walks these steps without the command line.

pub mod backend;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
pub mod demo;
pub mod error;
pub mod filter;
pub mod gate;
pub mod lang;
pub mod launch;
pub mod mode;
#[cfg(feature = "cli")]
pub mod output;
pub mod output_file;
pub mod overhead;
pub mod plan;
pub mod printable;
pub mod probe_bytes;
pub mod profile;
pub mod run_as;
pub mod runner;
pub mod session;
pub mod shell;
pub mod signals;
pub mod sinks;
pub mod spec;
pub mod stacks;

pub use error::{Error, Result};
