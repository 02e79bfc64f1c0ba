//! netprobe-cli's library: the tracing engine, usable without the command line, and (feature
//! `cli`, on by default) the command line itself: arguments (`cli`), the commands (`commands`)
//! and their output helpers (`output`). `main.rs` only calls `cli::main`.
//!
//! The front door is [`session::Session`]: a builder takes the specs, the target and the options,
//! `start` places the probes, `run` hands hits to a [`sinks::Sink`], `stop` removes everything.
//! Below it, bottom up (ARCHITECTURE.md writes the order and `tests/layers.rs` keeps it):
//! [`spec`] (what users type) → [`filter`] → [`plan`] (backend-neutral probes) → [`lang`]
//! (language rules) → [`gate`] (every probe checked) → [`backend`] (the [`backend::Backend`] trait;
//! [`backend::tracefs`] and everything that speaks tracefs, [`backend::per_task`],
//! [`backend::perf_event`]) → [`runner`] (event loop), [`sinks`], [`overhead`], [`profile`] →
//! [`session`] → [`demo`] and the commands.

pub mod backend;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
pub mod demo;
pub mod error;
pub mod fetch_type;
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

/// The README's library example, compiled as a test (`cargo test --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;
