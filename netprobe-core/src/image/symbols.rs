//! The symbols of any image netprobe can probe, from the best sources for its format
//! ([`super::format::sniff`]), each image's parts read once per run ([`super::cached`]).

use super::cached::{self, Image, Parsed, Part};
use super::format::{sniff, ImageFormat};
use crate::addr::FileOffset;
use crate::addr::VirtAddr;
use crate::cache::ImageCache;
use crate::dotnet::bundle::Bundle;
use crate::error::{Error, Result};
use crate::matching::Pattern;
use crate::symbol::{Symbol, SymbolKind, SymbolSource};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every probe-able function or method of the file at `path`, from the best sources for its
/// format:
/// - ELF: `.symtab`/`.dynsym`; for a Go binary the pclntab's functions first (they exist even when
///   the file is stripped, and carry Go's own names, `·` included), then the ELF functions at
///   addresses the pclntab does not name (cgo's C code);
/// - PE: the ReadyToRun header.
///
/// Errors: [`Error::NotAnObjectFile`], [`Error::Malformed`], I/O errors naming the path, and for
/// PE files the .NET-specific errors (IL-only assembly: not probe-able). A Go table that cannot be
/// read leaves the ELF tables as the only source; without them its error is returned.
///
/// The file is opened and parsed once per run ([`ImageCache::shared`]); each call returns a copy
/// of the list.
pub fn load_symbols(path: &Path) -> Result<Vec<Symbol>> {
    load_symbols_in(ImageCache::shared(), path)
}

/// [`load_symbols`] through `cache`.
pub fn load_symbols_in(cache: &ImageCache, path: &Path) -> Result<Vec<Symbol>> {
    shared_symbols(cache, path).map(|s| s.as_ref().clone())
}

/// [`load_symbols`], shared with the cache.
fn shared_symbols(cache: &ImageCache, path: &Path) -> Result<Arc<Vec<Symbol>>> {
    let image = match Image::open(cache, path) {
        Ok(i) => i,
        // An assembly inside a single-file bundle, named as a file in a folder named after the
        // bundle (`./app/System.Private.CoreLib.dll`).
        Err(e) => match cached::open_member_image(cache, path)? {
            Some(image) => image,
            None => return Err(e),
        },
    };
    symbols_of_image(&image, path)
}

/// The image's symbols as [`load_symbols`] gives them, computed once per image
/// ([`Part::Symbols`]).
fn symbols_of_image(image: &Image, path: &Path) -> Result<Arc<Vec<Symbol>>> {
    image.part(Part::Symbols, || {
        image.unchanged(path, image.with(|p| symbols_of(image, path, p)))
    })
}

/// [`load_symbols`] of an image: the one dispatch on its format for listing.
fn symbols_of(image: &Image, path: &Path, p: &Parsed<'_>) -> Result<Vec<Symbol>> {
    match sniff(p.bytes) {
        Some(ImageFormat::Elf) => {
            let (go, go_error) = match image.go(path, p) {
                Ok(Some(bin)) => (bin.symbols().ok(), None),
                Ok(None) => (None, None),
                Err(e) => (None, Some(e)),
            };
            match go {
                Some(mut go) => {
                    // The ELF tables of a Go binary mostly name the Go table's functions again
                    // (Debian's dockerd: 69,597 of the 69,701 functions of its `.dynsym`); only
                    // those at addresses the Go table does not name are kept (cgo's C code),
                    // decided by address before their names are read.
                    let entries: crate::addr::AddressSet =
                        go.iter().map(|s| s.address.value()).collect();
                    let (others, segments) = elf_functions_where(path, p.bytes, &|vaddr, _| {
                        !entries.contains(&vaddr.0)
                    })?;
                    go.extend(crate::elf::resolver::symbols_of(&others, &segments));
                    Ok(go)
                }
                None => {
                    let facts = image.elf(path)?;
                    let elf = crate::elf::resolver::symbols_of(&facts.functions, &facts.segments);
                    match go_error {
                        // A Go table whose function addresses cannot be established (see
                        // `golang::moduledata`) lists nothing; with no ELF functions either,
                        // its reason is the answer.
                        Some(e) if elf.is_empty() => Err(e),
                        _ => Ok(elf),
                    }
                }
            }
        }
        Some(ImageFormat::Pe) => image.assembly(path)?.with_path(path).symbols(),
        None => Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        }),
    }
}

/// The ELF functions of `bytes` that `keep` accepts ([`crate::elf::parser::ElfView::functions_where`])
/// and the file's loadable segments, read from the headers without the per-run cache's facts
/// (which hold every function).
fn elf_functions_where(
    path: &Path,
    bytes: &[u8],
    keep: &dyn Fn(VirtAddr, &[u8]) -> bool,
) -> Result<(
    Vec<crate::elf::parser::RawFunction>,
    crate::elf::LoadSegments,
)> {
    let view = crate::elf::parser::ElfView::parse(path, bytes)?;
    let functions = view.functions_where(path, keep)?;
    Ok((
        functions,
        crate::elf::LoadSegments::from_program_headers(&view.program_headers),
    ))
}

/// The symbols of one image inside a file: the file itself, or an assembly bundled in it.
#[derive(Debug)]
pub struct ImageSymbols {
    /// The image's name: the file's path, or for a bundled assembly its member path
    /// (`BUNDLE/System.Private.CoreLib.dll`).
    pub image: PathBuf,
    /// Where the image's bytes start in the file: 0, or a bundled assembly's entry offset.
    pub file_base: FileOffset,
    /// As [`load_symbols`] gives them; file offsets are offsets in the file (bundle) itself.
    pub symbols: Vec<Symbol>,
}

/// Every image a file holds with its symbols: the file itself ([`load_symbols`]), and for a
/// .NET single-file bundle also each assembly the runtime maps from it
/// ([`crate::dotnet::bundle::Placement::Mapped`]) that has ReadyToRun code. IL-only and
/// unreadable bundled assemblies are left out (their methods cannot be probed);
/// [`bundle_notes`] says what is left out and why.
pub fn load_image_symbols(path: &Path) -> Result<Vec<ImageSymbols>> {
    Ok(load_shared_image_symbols(path)?
        .into_iter()
        .map(|g| ImageSymbols {
            image: g.image,
            file_base: g.file_base,
            symbols: g.symbols.as_ref().clone(),
        })
        .collect())
}

/// The symbols of one image inside a file, as the per-run cache holds them (not copied).
#[derive(Debug)]
pub struct SharedImageSymbols {
    /// As [`ImageSymbols::image`].
    pub image: PathBuf,
    /// As [`ImageSymbols::file_base`].
    pub file_base: FileOffset,
    /// As [`ImageSymbols::symbols`], shared with the cache.
    pub symbols: Arc<Vec<Symbol>>,
}

/// [`load_image_symbols`] without copying the lists out of the per-run cache: what a listing
/// that only reads them wants (copying 70,000 symbols costs as much as naming them).
pub fn load_shared_image_symbols(path: &Path) -> Result<Vec<SharedImageSymbols>> {
    let cache = ImageCache::shared();
    let mut out = vec![SharedImageSymbols {
        image: path.to_path_buf(),
        file_base: FileOffset(0),
        symbols: shared_symbols(cache, path)?,
    }];
    // A bundled assembly named as `BUNDLE/NAME.dll` is one image already.
    let member = crate::dotnet::bundle::split_member_path(path).is_some();
    if let Some(bundle) = (!member)
        .then(|| Bundle::open_in(cache, path))
        .transpose()?
        .flatten()
    {
        for entry in bundle.mapped_entries() {
            // Each bundled assembly is parsed and listed once per run.
            let symbols = cached::member_image(cache, &bundle, entry)
                .and_then(|i| symbols_of_image(&i, &bundle.member_path(entry)));
            let Ok(symbols) = symbols else { continue };
            out.push(SharedImageSymbols {
                image: bundle.member_path(entry),
                file_base: entry.offset,
                symbols,
            });
        }
    }
    Ok(out)
}

/// [`load_image_symbols`] with `pattern` applied to each image ([`Pattern::select`]): the same
/// groups and symbols, in the same order, but names are compared before symbols are built, so
/// resolving one name does not cost a whole listing. A Go table's names are matched before its
/// function records are decoded, ELF symbols before they are copied, and for a .NET assembly,
/// when the pattern says which method name it wants ([`Pattern::managed_method_name`]), only
/// the methods of that name have their owner and signature decoded. Bundles, and bundled
/// assemblies named as `BUNDLE/NAME.dll`, are listed whole first.
pub fn load_image_symbols_matching(path: &Path, pattern: &Pattern) -> Result<Vec<ImageSymbols>> {
    let whole = |path: &Path| -> Result<Vec<ImageSymbols>> {
        let mut groups = load_image_symbols(path)?;
        for g in &mut groups {
            g.symbols = pattern.select(&g.symbols).into_iter().cloned().collect();
        }
        Ok(groups)
    };
    let cache = ImageCache::shared();
    let image = match Image::open(cache, path) {
        Ok(i) => i,
        // An assembly inside a single-file bundle, named as a file in a folder named after the
        // bundle (as in `load_symbols`); any other file that does not open is not tried again.
        Err(e) => match cached::open_member_image(cache, path)? {
            Some(_) => return whole(path),
            None => return Err(e),
        },
    };
    let format = image.with(|p| sniff(p.bytes));
    if format.is_none() {
        // As `load_symbols` says of it (without opening the file again: a file that changes
        // while it is read, such as the runtime's JIT memfd, would be a new image).
        return Err(Error::NotAnObjectFile {
            path: path.to_path_buf(),
        });
    }
    // A bundle is an ELF app host with assemblies appended; it is listed whole.
    if format != Some(ImageFormat::Pe) && image.bundle(path)?.is_some() {
        return whole(path);
    }
    let candidates = match format {
        Some(ImageFormat::Pe) => {
            let asm = image.assembly(path)?.with_path(path);
            match pattern.managed_method_name() {
                Some(method) if !asm.names_contain(b':') && !asm.names_contain(b'(') => {
                    asm.symbols_named(method)?
                }
                _ => return whole(path),
            }
        }
        _ => image.with(|p| elf_symbols_matching(&image, path, p, pattern))?,
    };
    Ok(vec![ImageSymbols {
        image: path.to_path_buf(),
        file_base: FileOffset(0),
        symbols: pattern.select(&candidates).into_iter().cloned().collect(),
    }])
}

/// The symbols [`symbols_of`] lists for an ELF image whose names `pattern` matches
/// ([`Pattern::matches_name`]), in its order: the Go table's, then the ELF functions at
/// addresses the Go table does not name.
fn elf_symbols_matching(
    image: &Image,
    path: &Path,
    p: &Parsed<'_>,
    pattern: &Pattern,
) -> Result<Vec<Symbol>> {
    let elf_keep = |name: &str, kind| pattern.matches_name(name, kind);
    let go = image.go(path, p);
    let prefix = pattern.native_name_prefix().map(str::as_bytes);
    let view = crate::elf::parser::ElfView::parse(path, p.bytes)?;
    // A literal can only be one of a few `.dynsym` names, found through `.gnu.hash`
    // ([`crate::elf::parser::ElfView::functions_named_where`]).
    let dynsym_names = prefix
        .filter(|_| view.dynsym_hash().is_some())
        .map(dynsym_names_of);
    // Then, without a `.symtab`, only those few ELF symbols are checked against the Go table,
    // each by binary search: no set of its 70,000 entries is built.
    let few_elf_symbols = dynsym_names.is_some()
        && !view
            .section_headers
            .iter()
            .any(|s| s.sh_type == goblin::elf::section_header::SHT_SYMTAB);
    let mut go_entries = crate::addr::AddressSet::default();
    let (go_symbols, go_binary) = match &go {
        Ok(Some(bin)) => (
            bin.symbols_where(
                &pattern.go_name_may_match(),
                &|name| pattern.matches_name(name, SymbolKind::GoFunction),
                (!few_elf_symbols).then_some(&mut go_entries),
            )?,
            Some(bin),
        ),
        _ => (Vec::new(), None),
    };
    // ELF symbols that name a Go function again are left out by address before their names
    // are read (as in `symbols_of`).
    let not_go = |vaddr: VirtAddr| match go_binary {
        None => true,
        Some(bin) if few_elf_symbols => !bin.lists_entry(vaddr),
        Some(_) => !go_entries.contains(&vaddr.0),
    };
    let facts = if go_binary.is_some() || prefix.is_some() {
        // Only names that start with the pattern's literal prefix can match it, and only those,
        // or their unversioned forms (shorter than it), can hide a `.dynsym` copy of a `.symtab`
        // name (`elf::resolver::symbols_where`): the rest of the names is never read.
        let name_ok = |rest: &[u8]| {
            let Some(prefix) = prefix else { return true };
            let n = rest.len().min(prefix.len());
            match rest[..n].iter().position(|&b| b == 0) {
                // The name ends inside the prefix: it may be an unversioned form of one.
                Some(end) => rest[..end] == prefix[..end],
                None => n == prefix.len() && rest[..n] == *prefix,
            }
        };
        let keep = |vaddr: VirtAddr, rest: &[u8]| not_go(vaddr) && name_ok(rest);
        let functions = match &dynsym_names {
            Some(names) => view.functions_named_where(path, names, &keep)?,
            None => view.functions_where(path, &keep)?,
        };
        std::sync::Arc::new(crate::elf::parser::ElfFacts {
            segments: crate::elf::LoadSegments::from_program_headers(&view.program_headers),
            section_headers: Vec::new(),
            section_names: Vec::new(),
            functions,
        })
    } else {
        image.elf(path)?
    };
    let elf = || crate::elf::resolver::symbols_where(&facts.functions, &facts.segments, &elf_keep);
    match go {
        Ok(Some(_)) => {
            let mut out = go_symbols;
            out.extend(elf());
            Ok(out)
        }
        Ok(None) => Ok(elf()),
        // As `symbols_of`: without ELF functions the Go table's reason is the answer (all of
        // the file's functions, not only those the name filter kept).
        Err(e) if image.elf(path)?.functions.is_empty() => Err(e),
        Err(_) => Ok(elf()),
    }
}

/// The `.dynsym` names (as its string table holds them, without versions) whose function
/// [`Pattern::matches_name`] can match the literal `text`: a native function's names are its
/// name and the name without its `@VERSION`/`@@VERSION` ([`crate::matching::match_keys`]),
/// and `nm -D` writes a versioned `.dynsym` entry `NAME` as `NAME@V` or `NAME@@V`: `text`
/// itself, and `text` cut before each `@` it holds.
fn dynsym_names_of(text: &[u8]) -> Vec<&[u8]> {
    std::iter::once(text)
        .chain(
            text.iter()
                .enumerate()
                .filter(|&(i, &b)| b == b'@' && i > 0)
                .map(|(i, _)| &text[..i]),
        )
        .collect()
}

/// What a user must know about the assemblies of the bundle at `path` that netprobe cannot
/// probe in it (one line each): compressed ones, and components of a composite ReadyToRun image
/// (`PublishReadyToRunComposite`, whose code netprobe does not resolve). Empty for a file that
/// is no bundle or whose assemblies are all probe-able or IL-only.
pub fn bundle_notes(path: &Path) -> Vec<String> {
    let Ok(Some(bundle)) = Bundle::open(path) else {
        return Vec::new();
    };
    let compressed = bundle.compressed_assemblies();
    let mut notes = Vec::new();
    if let Some(first) = compressed.first() {
        notes.push(compressed_note(&bundle, first, compressed.len()));
    }
    let composite: Vec<String> = bundle
        .mapped_assemblies()
        .into_iter()
        .filter_map(|(_, a)| match a {
            Err(e @ (Error::CompositeComponent { .. } | Error::CompositeImage { .. })) => {
                Some(e.to_string())
            }
            _ => None,
        })
        .collect();
    if let Some(first) = composite.first() {
        notes.push(match composite.len() {
            1 => first.clone(),
            n => format!("{first} (and {} more bundled assemblies like it)", n - 1),
        });
    }
    notes
}

/// The note for `count` compressed assemblies of `bundle`, `first` named.
fn compressed_note(
    bundle: &Bundle,
    first: &crate::dotnet::bundle::BundleEntry,
    count: usize,
) -> String {
    let others = match count {
        0 | 1 => String::new(),
        n => format!(" and {} other assemblies", n - 1),
    };
    format!(
        "{}{others} are stored compressed in the .NET single-file bundle {}: the runtime decompresses them into anonymous memory, where no file backs their code and uprobes cannot reach it; republish with `dotnet publish -p:PublishSingleFile=true -p:EnableCompressionInSingleFile=false` to probe them",
        first.path,
        bundle.path().display()
    )
}
