//! `netprobe symbols FILE [PATTERN]`: every function/method with address, size and file offset.
//!
//! A .NET single-file bundle lists its own (app host) functions, then the methods of every
//! assembly the runtime maps from it, one group per assembly under a `# NAME` line (file offsets
//! are offsets in the bundle: what a uprobe on the bundle needs). `--files` lists the bundled
//! files instead.
//!
//! A function without a file offset always says why: a numbered footnote in the table
//! (`-[1]`), a `no_file_offset` field in JSON
//! ([`netprobe_core::probe_safety::missing_offset_reasons`]).

use crate::cli::SymbolsArgs;
use crate::output::Out;
use crate::printable::printable;
use netprobe_core::dotnet::bundle::{Bundle, Placement};
use netprobe_core::elf::nativeaot::NativeAotImage;
use netprobe_core::matching::Pattern;
use netprobe_core::probe_safety::missing_offset_reasons;
use netprobe_core::symbol::{Symbol, SymbolKind};
use netprobe_core::{image, Error};
use serde::Serialize;
use std::path::Path;
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
pub fn nativeaot_of(path: &Path) -> Option<NativeAotImage> {
    let file = netprobe_core::elf::ElfFile::open(path).ok()?;
    netprobe_core::elf::nativeaot::detect(&file.view().ok()?)
}

/// One symbol of a listing in JSON, with the image it belongs to when the file holds several
/// (a bundled assembly's member path).
#[derive(Serialize)]
struct JsonSymbol<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<String>,
    #[serde(flatten)]
    symbol: &'a Symbol,
    /// Why the symbol has no file offset, when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    no_file_offset: Option<&'a str>,
}

pub fn run(args: &SymbolsArgs) -> anyhow::Result<ExitCode> {
    if args.files {
        return list_files(&args.file, args.json);
    }
    if args.vars {
        return super::vars::run(args);
    }
    let pattern = args.pattern.as_deref().map(Pattern::parse).transpose()?;
    let groups = match &pattern {
        Some(pattern) => image::load_image_symbols_matching(&args.file, pattern)?
            .into_iter()
            .map(|g| image::SharedImageSymbols {
                image: g.image,
                file_base: g.file_base,
                symbols: std::sync::Arc::new(g.symbols),
            })
            .collect(),
        None => image::load_shared_image_symbols(&args.file)?,
    };
    let notes = image::bundle_notes(&args.file);
    if let Some(aot) = nativeaot_of(&args.file) {
        crate::printable::eprint_line(&format!(
            "netprobe: note: {}: {}",
            args.file.display(),
            aot.describe()
        ));
    }
    if let (Some(p), Some(pattern)) = (&args.pattern, &pattern) {
        if groups.iter().all(|g| g.symbols.is_empty()) {
            if let Some(note) = notes.into_iter().next() {
                return Err(Error::NoMatchInBundle {
                    pattern: p.clone(),
                    image: args.file.display().to_string(),
                    note,
                }
                .into());
            }
            let all = image::load_image_symbols(&args.file)?;
            let every: Vec<Symbol> = all.into_iter().flat_map(|g| g.symbols).collect();
            return Err(Error::NoMatch {
                pattern: p.clone(),
                image: args.file.display().to_string(),
                nearest: pattern.nearest(&every, 5),
            }
            .into());
        }
    }
    let several = groups.len() > 1;
    let mut out = Out::new();
    // Footnotes for missing offsets, numbered in order of first appearance over all groups.
    let mut footnotes: Vec<String> = Vec::new();
    if !args.json {
        out.line(&format!(
            "{:>18} {:>9} {:>12}  {:<6}  {:<9}  NAME",
            "ADDRESS", "SIZE", "FILE_OFFSET", "KIND", "SOURCE"
        ))?;
    }
    for (i, g) in groups.iter().enumerate() {
        if g.symbols.is_empty() {
            continue;
        }
        let mut sorted: Vec<&Symbol> = g.symbols.iter().collect();
        sorted.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| a.name.cmp(&b.name)));
        let member = (i > 0).then(|| g.image.display().to_string());
        // The reasons of the symbols without a file offset, in their order (most listings
        // have none: no list as long as the table is built for them).
        let mut reasons = missing_offset_reasons(
            &args.file,
            sorted.iter().copied().filter(|s| s.file_offset.is_none()),
        )
        .into_iter();
        if args.json {
            for s in &sorted {
                let why = match s.file_offset {
                    Some(_) => None,
                    None => reasons.next().flatten(),
                };
                out.json(&JsonSymbol {
                    image: member.clone(),
                    symbol: s,
                    no_file_offset: why.as_deref(),
                })?;
            }
            continue;
        }
        if several && i > 0 {
            out.line(&format!(
                "# {} (bundled at file offset {}; addresses are RVAs in it, file offsets are in the bundle)",
                g.image.display(),
                g.file_base
            ))?;
        }
        write_table(&mut out, &sorted, &mut reasons, &mut footnotes)?;
    }
    for (i, why) in footnotes.iter().enumerate() {
        writeln!(out, "[{}] no file offset: {}", i + 1, printable(why))?;
    }
    out.flush()?;
    for note in notes {
        crate::printable::eprint_line(&format!("netprobe: note: {note}"));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--files`: the manifest of a single-file bundle, one line (or JSON object) per file.
fn list_files(path: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let Some(bundle) = Bundle::open(path)? else {
        return Err(Error::Unsupported(format!(
            "{} is not a .NET single-file bundle (no bundle manifest): --files lists the files of a bundle",
            path.display()
        ))
        .into());
    };
    let mut out = Out::new();
    let h = &bundle.manifest().header;
    if json {
        out.json(bundle.manifest())?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    out.line(&format!(
        "# bundle format {}.{}, id {}, {} files, manifest at {}",
        h.major_version,
        h.minor_version,
        h.bundle_id,
        bundle.entries().len(),
        h.offset
    ))?;
    out.line(&format!(
        "{:>12} {:>10} {:>10}  {:<13}  {:<11}  PATH",
        "OFFSET", "SIZE", "COMPRESSED", "TYPE", "PROBES"
    ))?;
    for e in bundle.entries() {
        let probes = match bundle.placement(e) {
            Placement::Mapped => "in bundle",
            Placement::Compressed => "no: deflate",
            Placement::Extracted => "extracted",
            Placement::Data => "-",
        };
        let compressed = if e.is_compressed() {
            e.compressed_size.to_string()
        } else {
            "-".into()
        };
        out.line(&format!(
            "{:>12} {:>10} {:>10}  {:<13}  {:<11}  {}",
            e.offset.to_string(),
            e.size,
            compressed,
            e.file_type.label(),
            probes,
            e.path
        ))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The table rows of `symbols`; a symbol without a file offset gets the number of its reason
/// (the next of `reasons`) in `footnotes` (added there when new).
///
/// The columns are `{:>18} {:>9} {:>12}  {:<6}  {:<9}  NAME` (hex with `0x`); nearly every row
/// is put together by hand ([`fixed_columns`]): through `write!` the padding and integer
/// formatting cost more than reading the file for the 70,000 functions of a large Go binary.
fn write_table(
    out: &mut Out,
    symbols: &[&Symbol],
    reasons: &mut dyn Iterator<Item = Option<String>>,
    footnotes: &mut Vec<String>,
) -> anyhow::Result<()> {
    let mut row = Vec::with_capacity(256);
    for s in symbols {
        row.clear();
        push_row(&mut row, s, reasons, footnotes);
        out.bytes(&row)?;
    }
    Ok(())
}

/// Appends the table row of `s` (see [`write_table`]) to `row`, newline included.
fn push_row(
    row: &mut Vec<u8>,
    s: &Symbol,
    reasons: &mut dyn Iterator<Item = Option<String>>,
    footnotes: &mut Vec<String>,
) {
    // Most rows: every column fits its width, written in place into one array of spaces
    // (CoreLib's 36,000 rows, dockerd's 70,000: a column at a time cost ~500 instructions each).
    if let Some(fixed) = fixed_columns(s) {
        row.extend_from_slice(&fixed);
        row.extend_from_slice(printable(&s.name).as_bytes());
        row.push(b'\n');
        return;
    }
    // The others (a footnote to number, a column wider than its width) through `format!`.
    let size = s.size.map_or_else(|| "?".to_string(), |z| z.to_string());
    let offset = match s.file_offset {
        Some(o) => format!("{:#x}", o.0),
        None => {
            let why = reasons.next().flatten();
            let why = why.as_deref().unwrap_or("unknown");
            let n = match footnotes.iter().position(|w| w == why) {
                Some(i) => i + 1,
                None => {
                    footnotes.push(why.to_string());
                    footnotes.len()
                }
            };
            format!("-[{n}]")
        }
    };
    let columns = format!(
        "{:>18} {size:>9} {offset:>12}  {:<6}  {:<9}  ",
        format!("{:#x}", s.address.value()),
        kind_label(s.kind),
        s.origin.label()
    );
    row.extend_from_slice(columns.as_bytes());
    row.extend_from_slice(printable(&s.name).as_bytes());
    row.push(b'\n');
}

/// Bytes of a row before its name: `{:>18} {:>9} {:>12}  {:<6}  {:<9}  `.
const FIXED_COLUMNS: usize = 62;

/// The columns of `s` before its name, when each fits its width and `s` has a file offset
/// (no footnote to number); `None` otherwise (then [`push_row`] pads column by column).
fn fixed_columns(s: &Symbol) -> Option<[u8; FIXED_COLUMNS]> {
    let mut c = [b' '; FIXED_COLUMNS];
    put_hex(&mut c[..18], s.address.value())?;
    match s.size {
        Some(z) => put_decimal(&mut c[19..28], z)?,
        None => c[27] = b'?',
    }
    put_hex(&mut c[29..41], s.file_offset?.0)?;
    put_left(&mut c[43..49], kind_label(s.kind).as_bytes())?;
    put_left(&mut c[51..60], s.origin.label().as_bytes())?;
    Some(c)
}

/// Writes `{v:#x}` right-aligned into `field`; `None` when it is wider.
fn put_hex(field: &mut [u8], v: u64) -> Option<()> {
    let digits = hex_len(v);
    let end = field.len();
    let start = end.checked_sub(digits + 2)?;
    field[start] = b'0';
    field[start + 1] = b'x';
    for i in 0..digits {
        field[end - 1 - i] = b"0123456789abcdef"[((v >> (4 * i)) & 0xf) as usize];
    }
    Some(())
}

/// Writes the decimal digits of `v` right-aligned into `field`; `None` when it is wider.
fn put_decimal(field: &mut [u8], mut v: u64) -> Option<()> {
    let mut at = field.len();
    loop {
        at = at.checked_sub(1)?;
        field[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return Some(());
        }
    }
}

/// Writes `text` left-aligned into `field`; `None` when it is wider.
fn put_left(field: &mut [u8], text: &[u8]) -> Option<()> {
    if text.len() > field.len() {
        return None;
    }
    for (to, &b) in field.iter_mut().zip(text) {
        *to = b;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_symbol() -> impl Strategy<Value = Symbol> {
        use netprobe_core::addr::{FileOffset, Rva, VirtAddr};
        use netprobe_core::symbol::SymbolOrigin;
        let value = prop_oneof![0u64..0x1_0000, any::<u64>()];
        (
            (value.clone(), any::<bool>()),
            proptest::option::of(prop_oneof![0u64..100_000, any::<u64>()]),
            proptest::option::of(value),
            0usize..4,
            0usize..6,
            "[a-zA-Z:.() ]{0,12}",
        )
            .prop_map(
                |((address, rva), size, offset, kind, origin, name)| Symbol {
                    name,
                    kind: [
                        SymbolKind::Function,
                        SymbolKind::Ifunc,
                        SymbolKind::ManagedMethod,
                        SymbolKind::GoFunction,
                    ][kind],
                    origin: [
                        SymbolOrigin::ElfSymtab,
                        SymbolOrigin::ElfDynsym,
                        SymbolOrigin::CrossgenMap,
                        SymbolOrigin::PerfMap,
                        SymbolOrigin::ReadyToRun,
                        SymbolOrigin::GoPclntab,
                    ][origin],
                    address: if rva {
                        netprobe_core::symbol::Address::Rva(Rva(address))
                    } else {
                        netprobe_core::symbol::Address::Virt(VirtAddr(address))
                    },
                    size,
                    file_offset: offset.map(FileOffset),
                },
            )
    }

    proptest! {
        /// A row is what `format!` writes for the table's columns, whichever way it is put
        /// together (in place when every column fits, through `format!` otherwise).
        #[test]
        fn rows_as_format_writes_them(s in any_symbol()) {
            let mut footnotes = Vec::new();
            let mut reasons = std::iter::once(Some("why".to_string()));
            let mut row = Vec::new();
            push_row(&mut row, &s, &mut reasons, &mut footnotes);
            let size = s.size.map_or("?".to_string(), |z| z.to_string());
            let offset = s.file_offset.map_or("-[1]".to_string(), |o| format!("{:#x}", o.0));
            let want = format!(
                "{:>18} {:>9} {:>12}  {:<6}  {:<9}  {}\n",
                format!("{:#x}", s.address.value()),
                size,
                offset,
                kind_label(s.kind),
                s.origin.label(),
                printable(&s.name)
            );
            prop_assert_eq!(String::from_utf8(row).unwrap(), want);
            prop_assert_eq!(footnotes.len(), usize::from(s.file_offset.is_none()));
        }
    }
}
