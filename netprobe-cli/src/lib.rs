//! netprobe-cli's library half: the command-line interface (`cli`), the commands (`commands`),
//! output helpers (`output`, `trace_output`), and the live-tracing backend. `main.rs` only calls
//! [`cli::main`].
//!
//! Tracing layers, bottom up: [`tracefs`] (find/mount, probe lines, instances, ring buffers) →
//! [`plan`] (functions → kernel probes, and hits back to functions) → [`session`] (one live
//! recording: create, read, remove) with [`watchdog`] and [`signals`] for cleanup whatever happens →
//! [`runner`] (event loop) and [`trace_output`] (trace lines, counts, latency) →
//! [`commands::live`], [`demo`].

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
