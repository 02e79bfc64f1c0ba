//! netprobe-cli's library half: the command-line interface (`cli`), the commands (`commands`),
//! output helpers (`output`, `sinks`), and the live-tracing backend. `main.rs` only calls
//! [`cli::main`].
//!
//! Tracing layers, bottom up: [`tracefs`] (find/mount, probe lines, instances, ring buffers) →
//! [`plan`] (functions → kernel probes, and hits back to functions) → [`session`] (one live
//! recording: create, read, remove) with [`watchdog`] and [`signals`] for cleanup whatever happens →
//! [`runner`] (event loop) and [`sinks`] (trace lines, counts, latency; one printer per format) →
//! [`commands::live`], [`demo`].

pub mod cleanup;
pub mod cli;
pub mod commands;
pub mod demo;
pub mod dryrun;
pub mod error;
pub mod gate;
pub mod lang;
pub mod launch;
pub mod output;
pub mod pidns;
pub mod plan;
pub mod runner;
pub mod session;
pub mod signals;
pub mod sinks;
pub mod spec;
pub mod targets;
pub mod tracefs;
pub mod watchdog;

pub use error::{Error, Result};
