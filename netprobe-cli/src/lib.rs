//! netprobe-cli's library half: probe attachment (tracefs), live sessions and output formats.
//! `main.rs` only parses arguments and calls into here.
//!
//! Layers, bottom up: [`tracefs`] (find/mount, probe lines, instances, ring buffers) →
//! [`plan`] (functions → kernel probes, and hits back to functions) → [`session`] (one live
//! recording: create, read, remove) with [`watchdog`] and [`signals`] for cleanup whatever happens →
//! [`runner`] (event loop) and [`output`] (trace lines, counts, latency) → [`commands`], [`demo`].

pub mod cleanup;
pub mod commands;
pub mod demo;
pub mod dryrun;
pub mod error;
pub mod launch;
pub mod output;
pub mod plan;
pub mod runner;
pub mod session;
pub mod signals;
pub mod spec;
pub mod targets;
pub mod tracefs;
pub mod watchdog;

pub use error::{Error, Result};
