//! `netprobe symbols FILE [PATTERN]`: every function/method with address, size and file offset.
//! A function without a file offset always says why: a numbered footnote in the table
//! (`-[1]`), a `no_file_offset` field in JSON
//! ([`netprobe_core::probe_safety::missing_offset_reasons`]).

use crate::cli::SymbolsArgs;
use crate::output::Out;
use netprobe_core::matching::Pattern;
use netprobe_core::probe_safety::missing_offset_reasons;
use netprobe_core::symbol::{Symbol, SymbolKind};
use netprobe_core::{image, Error};
use std::process::ExitCode;

/// A symbol as `--json` prints it: the symbol's fields, and why it has no file offset.
#[derive(serde::Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    symbol: &'a Symbol,
    #[serde(skip_serializing_if = "Option::is_none")]
    no_file_offset: Option<&'a str>,
}

/// Number of hex digits of `v` (at least 1).
fn hex_len(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).div_ceil(4).max(1)
}

/// The short kind column.
pub fn kind_label(k: SymbolKind) -> &'static str {
    match k {
        SymbolKind::Function => "func",
        SymbolKind::Ifunc => "ifunc",
        SymbolKind::ManagedMethod => "method",
        SymbolKind::GoFunction => "gofunc",
    }
}

pub fn run(args: &SymbolsArgs) -> anyhow::Result<ExitCode> {
    let mut symbols = image::load_symbols(&args.file)?;
    if let Some(p) = &args.pattern {
        let pattern = Pattern::parse(p)?;
        let selected: Vec<Symbol> = pattern.select(&symbols).into_iter().cloned().collect();
        if selected.is_empty() {
            return Err(Error::NoMatch {
                pattern: p.clone(),
                image: args.file.display().to_string(),
                nearest: pattern.nearest(&symbols, 5),
            }
            .into());
        }
        symbols = selected;
    }
    symbols.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| a.name.cmp(&b.name)));
    let reasons = missing_offset_reasons(&args.file, &symbols);
    let mut out = Out::new();
    if args.json {
        for (s, why) in symbols.iter().zip(&reasons) {
            out.json(&Row {
                symbol: s,
                no_file_offset: why.as_deref(),
            })?;
        }
    } else {
        // Footnotes for missing offsets, numbered in order of first appearance.
        let mut notes: Vec<&str> = Vec::new();
        out.line(&format!(
            "{:>18} {:>9} {:>12}  {:<6}  {:<9}  NAME",
            "ADDRESS", "SIZE", "FILE_OFFSET", "KIND", "SOURCE"
        ))?;
        for (s, why) in symbols.iter().zip(&reasons) {
            let addr = s.address.value();
            // Hex columns padded by hand: `{:>#18x}` pads the digits, not the `0x`.
            write!(out, "{:>width$}0x{addr:x} ", "", width = 16 - hex_len(addr))?;
            match s.size {
                Some(z) => write!(out, "{z:>9} ")?,
                None => write!(out, "{:>9} ", "?")?,
            }
            match s.file_offset {
                Some(o) => write!(
                    out,
                    "{:>width$}0x{:x}",
                    "",
                    o.0,
                    width = 10 - hex_len(o.0).min(10)
                )?,
                None => {
                    let why = why.as_deref().unwrap_or("unknown");
                    let n = match notes.iter().position(|w| *w == why) {
                        Some(i) => i + 1,
                        None => {
                            notes.push(why);
                            notes.len()
                        }
                    };
                    write!(out, "{:>12}", format!("-[{n}]"))?
                }
            }
            writeln!(
                out,
                "  {:<6}  {:<9}  {}",
                kind_label(s.kind),
                s.origin.label(),
                s.name
            )?;
        }
        for (i, why) in notes.iter().enumerate() {
            writeln!(out, "[{}] no file offset: {why}", i + 1)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
