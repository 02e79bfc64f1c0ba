//! `netprobe symbols FILE [PATTERN]`: every function/method with address, size and file offset.

use crate::cli::SymbolsArgs;
use crate::output::Out;
use netprobe_core::elf::nativeaot::NativeAotImage;
use netprobe_core::matching::Pattern;
use netprobe_core::symbol::{Symbol, SymbolKind};
use netprobe_core::{image, Error};
use std::process::ExitCode;

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

/// The NativeAOT module header of `path`, when it is a NativeAOT ELF image
/// (`netprobe_core::elf::nativeaot`).
pub fn nativeaot_of(path: &std::path::Path) -> Option<NativeAotImage> {
    let file = netprobe_core::elf::ElfFile::open(path).ok()?;
    netprobe_core::elf::nativeaot::detect(&file.view().ok()?)
}

pub fn run(args: &SymbolsArgs) -> anyhow::Result<ExitCode> {
    let mut symbols = image::load_symbols(&args.file)?;
    if let Some(aot) = nativeaot_of(&args.file) {
        eprintln!(
            "netprobe: note: {}: {}",
            args.file.display(),
            aot.describe()
        );
    }
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
            "{:>18} {:>9} {:>12}  {:<6}  {:<9}  NAME",
            "ADDRESS", "SIZE", "FILE_OFFSET", "KIND", "SOURCE"
        ))?;
        for s in &symbols {
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
                None => write!(out, "{:>12}", "-")?,
            }
            writeln!(
                out,
                "  {:<6}  {:<9}  {}",
                kind_label(s.kind),
                s.origin.label(),
                s.name
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
