//! Command-line arguments (clap) and dispatch. Errors are printed as one line,
//! `netprobe: error: <cause>: <fix>`, with exit status 1; usage errors exit with 2 (clap).

use crate::commands;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Dynamic tracing of .NET and Go programs with uprobes: finds where in which file a function's
/// code is, places the probes, shows the calls, and cleans up.
#[derive(Parser, Debug)]
#[command(name = "netprobe", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the functions/methods of a file with address, size and file offset.
    Symbols(SymbolsArgs),
    /// Print the uprobe offset of each method of an image mapped in a process
    /// (what seed 001's calc-offsets.py prints, right on .NET 8 too).
    Offsets(OffsetsArgs),
}

#[derive(clap::Args, Debug)]
pub struct SymbolsArgs {
    /// ELF executable or library, or .NET assembly.
    pub file: PathBuf,
    /// Only names matching this (exact name, glob like 'main*', or Type::Method).
    pub pattern: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct OffsetsArgs {
    /// The process whose maps place the image.
    pub pid: u32,
    /// The mapped image: full path, file name, or short name (`System.Console`, `c`).
    pub image: String,
    /// Only methods matching this (exact, glob, or Type::Method).
    pub pattern: Option<String>,
    /// A crossgen /CreatePerfMap map file for IMAGE (`ADDR SIZE NAME`, addresses are RVAs);
    /// without it, the symbols come from IMAGE itself.
    #[arg(long, value_name = "FILE")]
    pub map: Option<PathBuf>,
    /// Read the maps from FILE instead of /proc/PID/maps (a recorded copy).
    #[arg(long, value_name = "FILE")]
    pub maps: Option<PathBuf>,
    /// Explain the layout first: image base, executable mapping, formula.
    #[arg(long)]
    pub explain: bool,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Parses the command line, runs the command, prints any error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Symbols(a) => commands::symbols::run(&a),
        Command::Offsets(a) => commands::offsets::run(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) if crate::output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("netprobe: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line (`a: b: c`), newlines folded.
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}
