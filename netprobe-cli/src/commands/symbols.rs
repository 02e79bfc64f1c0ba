//! `netprobe symbols FILE [PATTERN]`: every function/method with address, size and file offset.

use crate::cli::SymbolsArgs;
use crate::output::Out;
use netprobe_core::matching::Pattern;
use netprobe_core::symbol::{Symbol, SymbolKind};
use netprobe_core::{image, Error};
use std::process::ExitCode;

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
    let mut out = Out::new();
    if args.json {
        for s in &symbols {
            out.json(s)?;
        }
    } else {
        out.line(&format!(
            "{:>18} {:>9} {:>12}  {:<6}  {:<6}  NAME",
            "ADDRESS", "SIZE", "FILE_OFFSET", "KIND", "SOURCE"
        ))?;
        for s in &symbols {
            out.line(&format!(
                "{:>18} {:>9} {:>12}  {:<6}  {:<6}  {}",
                s.address.to_string(),
                s.size.map_or_else(|| "?".to_string(), |z| z.to_string()),
                s.file_offset
                    .map_or_else(|| "-".to_string(), |o| o.to_string()),
                kind_label(s.kind),
                s.origin.label(),
                s.name
            ))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
