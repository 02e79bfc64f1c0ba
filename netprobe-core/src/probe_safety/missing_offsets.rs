//! Why a symbol has no file offset, by what the file's headers say about its address.

use crate::elf::parser::ElfView;
use crate::elf::LoadSegments;
use crate::image::{sniff, ImageFormat};
use std::path::Path;

/// Why each symbol of the file at `path` has no file offset (`None` for those that have one):
/// one short phrase each, for listings (`netprobe symbols`) and errors. The reasons, by what the
/// file's headers say about the symbol's address:
/// - a Go pclntab function of a 1.18+ layout whose text start is unknown (header field zero, no
///   relocation supplies it): its "address" is an offset from the start of text;
/// - ELF: in a segment that is not executable (data); in the zero-filled tail of a segment
///   (`p_memsz` beyond `p_filesz`); outside every `PT_LOAD`;
/// - PE: outside the file data of every section;
/// - an address in a live process (perf map): JIT code, in no file.
pub fn missing_offset_reasons<'s>(
    path: &Path,
    symbols: impl IntoIterator<Item = &'s crate::symbol::Symbol>,
) -> Vec<Option<String>> {
    use crate::symbol::{Address, SymbolOrigin};
    let image = crate::image::cached::image(path).ok();
    let elf = image
        .as_ref()
        .filter(|i| sniff(i.bytes()) == Some(ImageFormat::Elf));
    // Read only when a symbol has no file offset: the ELF facts hold every symbol of the file,
    // which a one-name listing (`symbols dockerd main.main`) does not otherwise read.
    let read_segments = || {
        elf.and_then(|i| match i.elf(path) {
            Ok(facts) => Some(facts.segments.clone()),
            // Headers readable, symbol tables not: the segments still tell.
            Err(_) => ElfView::parse(path, i.bytes())
                .ok()
                .map(|v| LoadSegments::from_program_headers(&v.program_headers)),
        })
    };
    let mut segments: Option<Option<LoadSegments>> = None;
    let go_text_unknown = || {
        elf.and_then(|i| {
            i.with_go(path, |g| {
                g.is_some_and(|g| {
                    g.pclntab().version().entries_are_text_offsets()
                        && g.pclntab().text_start() == 0
                })
            })
            .ok()
        })
        .unwrap_or(false)
    };
    let mut text_unknown: Option<bool> = None;
    symbols
        .into_iter()
        .map(|s| {
            if s.file_offset.is_some() {
                return None;
            }
            Some(match s.address {
                Address::Runtime(_) => "JIT code: in no file".to_string(),
                Address::Rva(rva) => {
                    format!("RVA {rva} lies outside the file data of every section")
                }
                Address::Virt(v) => {
                    if s.origin == SymbolOrigin::GoPclntab
                        && *text_unknown.get_or_insert_with(go_text_unknown)
                    {
                        return Some(
                            "text start unknown: the pclntab header's text-start field is zero, so this is an offset from the start of text, not an address"
                                .to_string(),
                        );
                    }
                    let seg = segments.get_or_insert_with(read_segments).as_ref().and_then(|segs| {
                        segs.0
                            .iter()
                            .find(|g| v.0 >= g.vaddr && v.0 - g.vaddr < g.memsz.max(g.filesz))
                    });
                    match seg {
                        Some(g) if !g.executable => {
                            format!("address {v} lies in a segment that is not executable (data)")
                        }
                        Some(_) => format!(
                            "address {v} lies in the zero-filled part of its segment (no bytes in the file)"
                        ),
                        None => format!("address {v} lies outside every executable segment"),
                    }
                }
            })
        })
        .collect()
}
