//! netprobe-cli's library half: the command-line interface (`cli`), the commands (`commands`),
//! and output helpers (`output`). `main.rs` only calls [`cli::main`].

pub mod cli;
pub mod commands;
pub mod output;
