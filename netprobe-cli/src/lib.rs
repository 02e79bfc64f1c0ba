//! netprobe-cli's library half: probe attachment (tracefs), live sessions and output formats.
//! `main.rs` only parses arguments and calls into here.

pub mod error;
pub mod tracefs;

pub use error::{Error, Result};
