//! netprobe-cli's library half: the command-line interface (`cli`), the commands (`commands`),
//! output helpers (`output`, `trace_output`), and the tracing engine. `main.rs` only calls
//! [`cli::main`].
//!
//! Engine layers, bottom up: [`spec`] (what users type) → [`lang`] (language rules, one
//! [`lang::Planner`]) → [`plan`] (backend-neutral probes: functions, probe points, values at
//! `netprobe_core::abi` locations) → [`gate`] (every probe checked) → [`backend`] (the
//! [`backend::Backend`] trait; [`backend::tracefs`]: probe lines, instances, ring buffers, the live
//! session) with [`watchdog`] and [`signals`] for cleanup whatever happens → [`runner`] (event
//! loop) and [`trace_output`] (trace lines, counts, latency) → [`commands::live`], [`demo`].

pub mod backend;
pub mod cleanup;
pub mod cli;
pub mod commands;
pub mod demo;
pub mod dryrun;
pub mod error;
pub mod gate;
pub mod lang;
pub mod launch;
pub mod mode;
pub mod output;
pub mod pidns;
pub mod plan;
pub mod runner;
pub mod signals;
pub mod spec;
pub mod trace_output;
pub mod watchdog;

pub use error::{Error, Result};
