//! netprobe-cli's library: the tracing engine, usable without the command line, and (feature
//! `cli`, on by default) the command line itself: arguments (`cli`), the commands (`commands`)
//! and their output helpers (`output`). `main.rs` only calls `cli::main`.
//!
//! Tracing layers, bottom up: [`tracefs`] (find/mount, probe lines, instances, ring buffers) →
//! [`spec`] and [`lang`] (what to probe, planned by each language's rules) → [`plan`] (functions →
//! kernel probes, and hits back to functions) → [`gate`] (probe safety) → [`session`] (one live
//! recording: create, read, remove) with [`watchdog`] and [`signals`] for cleanup whatever happens →
//! [`runner`] (event loop) and [`sinks`] (trace lines, counts, latency; one printer per format) →
//! `commands::live`, [`demo`]. `examples/engine.rs` walks these steps without the command line.

pub mod cleanup;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
pub mod demo;
pub mod dryrun;
pub mod error;
pub mod gate;
pub mod lang;
pub mod launch;
#[cfg(feature = "cli")]
pub mod output;
pub mod pidns;
pub mod plan;
pub mod profile;
pub mod runner;
pub mod session;
pub mod signals;
pub mod sinks;
pub mod spec;
pub mod targets;
pub mod tracefs;
pub mod watchdog;

pub use error::{Error, Result};
