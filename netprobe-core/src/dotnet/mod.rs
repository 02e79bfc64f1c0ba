//! .NET assemblies: ReadyToRun (precompiled) code and ECMA-335 metadata.
//!
//! [`Assembly::open`] reads a `.dll`; [`Assembly::r2r`] says whether it holds precompiled code
//! (`None` = IL-only, JIT-compiled at run time, not probe-able); [`Assembly::methods`] lists every
//! precompiled method with its crossgen-style name, structured signature, RVA, size, funclets
//! and file offset; [`Assembly::rva_to_file_offset`] and [`Assembly::sections`] let live-process
//! code cross-check a static offset against `/proc/PID/maps`.
//!
//! ```no_run
//! use netprobe_core::dotnet::Assembly;
//! let asm = Assembly::open("System.Private.CoreLib.dll")?;
//! for m in asm.methods()? {
//!     println!("{} {:#x} {} {}", m.rva, m.size, m.file_offset.map_or(0, |o| o.0), m.name);
//! }
//! # Ok::<(), netprobe_core::Error>(())
//! ```

pub mod bundle;
pub mod contract_descriptor;
pub mod managed_name;
pub mod metadata;
pub mod pe;
pub mod r2r;
pub mod runtime;

use crate::addr::{FileOffset, Rva};
use crate::bytes::FileBytes;
use crate::error::{Error, Result};
use crate::symbol::{Address, Symbol, SymbolKind, SymbolOrigin, SymbolSource};
use metadata::{enclosing_map, Metadata, MetadataLayout};
use pe::{CliHeader, PeImage, PeSection};
use r2r::types::{flags, section, R2rHeader, RuntimeFunction};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub use r2r::types::{CodeRange, EntryKind, MethodDetails, R2rMethod};

/// A parsed .NET assembly (PE + CLI header + metadata + optional ReadyToRun header). Cloning
/// shares its mapping and copies its parsed headers.
#[derive(Clone)]
pub struct Assembly {
    path: PathBuf,
    data: FileBytes,
    pe: PeImage,
    cli: CliHeader,
    md_start: usize,
    md_len: usize,
    md_layout: MetadataLayout,
    enclosing: Vec<u32>,
    r2r: Option<R2rImage>,
    /// Where the assembly's first byte lies in the file it is stored in: 0 for an assembly file,
    /// the entry's offset for an assembly inside a single-file bundle.
    file_base: FileOffset,
    /// [`Assembly::methods`], listed on first use and shared by every clone (the image cache
    /// hands out clones of one parse, [`crate::image::cached`]).
    methods: std::sync::Arc<std::sync::Mutex<Option<Vec<R2rMethod>>>>,
    /// [`Assembly::methods_named`], by own name, decoded once each and shared as `methods` is.
    named: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<R2rMethod>>>>,
    /// [`Assembly::type_names`], written on first use and shared as `methods` is.
    type_names: std::sync::Arc<std::sync::OnceLock<metadata::TypeNames>>,
    /// How the assemblies this one references are opened by path ([`Assembly::open_sibling`]).
    sibling_opener: Option<SiblingOpener>,
}

/// Opens an assembly by path: how [`Assembly::open_sibling`] reaches the assemblies beside one
/// (`<dir>/<name>.dll`) through whatever opened it ([`crate::image::cached`]'s cache).
pub type SiblingOpener = std::sync::Arc<dyn Fn(&Path) -> Result<Assembly> + Send + Sync>;

/// The ReadyToRun part of an assembly.
#[derive(Clone, Debug)]
pub struct R2rImage {
    pub header: R2rHeader,
    /// RUNTIME_FUNCTIONS: every code block (method bodies, funclets, cold parts), sorted by RVA.
    pub runtime_functions: Vec<RuntimeFunction>,
    /// COMPILER_IDENTIFIER (e.g. `Crossgen2 8.0.424.16909`); `None` when absent.
    pub compiler: Option<String>,
}

impl Assembly {
    /// Parses an assembly from its bytes (`path` is only used in messages).
    ///
    /// Returns:
    /// - `Ok` for a .NET assembly, whether ReadyToRun ([`Assembly::r2r`] is `Some`) or IL-only
    ///   (`None`);
    /// - `Err(NotAnObjectFile)` when the bytes are not a PE file;
    /// - `Err(NotDotnet)` for a PE file without a CLI header;
    /// - `Err(CompositeComponent)` for a component assembly whose code lives in a composite
    ///   ReadyToRun image (the message names that image);
    /// - `Err(CompositeImage)` for a composite image itself (not resolved yet);
    /// - `Err(UnsupportedR2rVersion)` for a ReadyToRun major version outside
    ///   [`r2r::parser::MIN_MAJOR`]..=[`r2r::parser::MAX_MAJOR`];
    /// - `Err(Malformed)` when any structure is cut short or inconsistent (never a panic).
    pub fn parse(path: impl AsRef<Path>, data: Vec<u8>) -> Result<Assembly> {
        Assembly::from_bytes(path.as_ref(), FileBytes::Owned(data))
    }

    /// [`Assembly::parse`] over bytes already opened (mapped) with [`FileBytes::open`], e.g. by
    /// `image::load_symbols` after sniffing `MZ`. Same results as [`Assembly::parse`].
    pub fn from_bytes(path: &Path, data: FileBytes) -> Result<Assembly> {
        Assembly::from_bytes_at(path, data, FileOffset(0))
    }

    /// [`Assembly::from_bytes`] for an assembly stored at `file_base` inside a larger file (a
    /// single-file bundle): parsing reads `data` alone, and [`Assembly::file_base`] says where
    /// it lies in the file.
    pub fn from_bytes_at(path: &Path, data: FileBytes, file_base: FileOffset) -> Result<Assembly> {
        let path = path.to_path_buf();
        let bad = |what: String| Error::malformed(&path, what);
        let pe = match PeImage::parse(&data) {
            Ok(pe) => pe,
            Err(e) if e == "not a PE file" => return Err(Error::NotAnObjectFile { path }),
            Err(e) => return Err(bad(e)),
        };
        let Some(cli) = CliHeader::parse(&pe, &data).map_err(bad)? else {
            // A composite image has no CLI metadata of its own but exports RTR_HEADER
            // (readytorun-format.md, "PE Headers and CLI Headers").
            if let Some(rva) = pe.export_rva(&data, "RTR_HEADER") {
                let header = r2r::parser::parse_header(&pe, &data, rva).map_err(bad)?;
                let components = header
                    .section(section::COMPONENT_ASSEMBLIES)
                    .map_or(0, |s| s.size / 16);
                return Err(Error::CompositeImage { path, components });
            }
            return Err(Error::NotDotnet { path });
        };
        let md = pe
            .bytes_at(&data, cli.metadata.rva, cli.metadata.size)
            .ok_or_else(|| bad("metadata outside the file".into()))?;
        let md_layout = MetadataLayout::parse(md).map_err(bad)?;
        let md_start = pe
            .rva_to_file_offset(Rva(cli.metadata.rva.into()))
            .and_then(|o| usize::try_from(o.0).ok())
            .ok_or_else(|| bad("metadata outside the file".into()))?;
        let md_len = md.len();
        let enclosing = enclosing_map(&Metadata::new(&md_layout, md));
        let mut asm = Assembly {
            path,
            data,
            pe,
            cli,
            md_start,
            md_len,
            md_layout,
            enclosing,
            r2r: None,
            file_base,
            methods: Default::default(),
            named: Default::default(),
            type_names: Default::default(),
            sibling_opener: None,
        };
        asm.r2r = asm.parse_r2r()?;
        Ok(asm)
    }

    /// This assembly, opening the assemblies it references with `open` ([`Assembly::open_sibling`]).
    pub fn with_sibling_opener(self, open: SiblingOpener) -> Assembly {
        Assembly {
            sibling_opener: Some(open),
            ..self
        }
    }

    /// The assembly at `path` that this one references (a file beside it): opened as this one
    /// was opened ([`Assembly::with_sibling_opener`]), else read and parsed now.
    pub fn open_sibling(&self, path: &Path) -> Result<Assembly> {
        match &self.sibling_opener {
            Some(open) => open(path),
            None => Assembly::from_bytes(path, FileBytes::open(path)?),
        }
    }

    /// This assembly named `path` in messages (the cache shares one parse between the paths of
    /// one file).
    pub(crate) fn with_path(&self, path: &Path) -> Assembly {
        Assembly {
            path: path.to_path_buf(),
            ..self.clone()
        }
    }

    fn parse_r2r(&self) -> Result<Option<R2rImage>> {
        let mnh = self.cli.managed_native_header;
        // readytorun-format.md: a ReadyToRun image sets COMIMAGE_FLAGS_IL_LIBRARY and points
        // ManagedNativeHeader at READYTORUN_HEADER.
        if mnh.is_empty() || self.cli.flags & 0x4 == 0 {
            return Ok(None);
        }
        let bad = |what: String| Error::malformed(&self.path, what);
        let header = r2r::parser::parse_header(&self.pe, &self.data, mnh.rva).map_err(bad)?;
        if header.flags & flags::COMPONENT != 0 {
            let composite = header
                .section(section::OWNER_COMPOSITE_EXECUTABLE)
                .and_then(|s| self.pe.bytes_at(&self.data, s.rva, s.size))
                .map(|b| {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    String::from_utf8_lossy(&b[..end]).into_owned()
                })
                .unwrap_or_else(|| "(unnamed composite image)".into());
            return Err(Error::CompositeComponent {
                path: self.path.clone(),
                composite,
            });
        }
        if !(r2r::parser::MIN_MAJOR..=r2r::parser::MAX_MAJOR).contains(&header.major_version) {
            return Err(Error::UnsupportedR2rVersion {
                path: self.path.clone(),
                major: header.major_version,
                minor: header.minor_version,
            });
        }
        let runtime_functions = match header.section(section::RUNTIME_FUNCTIONS) {
            Some(s) => r2r::parser::runtime_functions(&self.pe, &self.data, s).map_err(bad)?,
            None => Vec::new(),
        };
        let compiler = header
            .section(section::COMPILER_IDENTIFIER)
            .and_then(|s| self.pe.bytes_at(&self.data, s.rva, s.size))
            .map(|b| {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                String::from_utf8_lossy(&b[..end]).into_owned()
            });
        Ok(Some(R2rImage {
            header,
            runtime_functions,
            compiler,
        }))
    }

    /// The file this assembly was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the assembly's byte 0 lies in the file that stores it: 0 for an assembly file, the
    /// entry's offset for an assembly inside a single-file bundle. Offsets of
    /// [`Assembly::methods`], [`Assembly::rva_to_file_offset`] and [`Assembly::bytes`] are
    /// relative to the assembly; add this for the offset a uprobe on the storing file needs
    /// ([`SymbolSource::symbols`] does).
    pub fn file_base(&self) -> FileOffset {
        self.file_base
    }

    /// The assembly's bytes (for a bundled assembly: only its own, from its entry's offset).
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The metadata view (tables and heaps).
    pub fn metadata(&self) -> Metadata<'_> {
        Metadata::new(
            &self.md_layout,
            self.data
                .get(self.md_start..self.md_start + self.md_len)
                .unwrap_or(&[]),
        )
    }

    /// Per TypeDef row, the enclosing TypeDef row (0 = top level).
    pub fn enclosing_types(&self) -> &[u32] {
        &self.enclosing
    }

    /// Every TypeDef name of the assembly, written on first use (for listings, which name most
    /// types many times; see [`metadata::TypeNames`]).
    pub fn type_names(&self) -> &metadata::TypeNames {
        self.type_names.get_or_init(|| {
            metadata::TypeNames::of(
                &metadata::Names {
                    md: self.metadata().with_validated_strings(),
                    enclosing: &self.enclosing,
                    foreign: None,
                    type_names: None,
                },
                crate::name_budget::limit(self.data.len()),
            )
        })
    }

    /// [`Assembly::type_names`] when already written; `None` otherwise (a lookup of one name
    /// does not pay for writing them all).
    pub fn type_names_if_written(&self) -> Option<&metadata::TypeNames> {
        self.type_names.get()
    }

    /// The assembly's simple name (`System.Private.CoreLib`); `None` for a bare module.
    pub fn name(&self) -> Option<&str> {
        self.metadata().assembly_name()
    }

    /// The module version id as the runtime prints it in `/tmp/perfinfo-PID.map`
    /// (`c3aba5b9-2a5c-43a1-a419-3ca08b6eaaff`, without braces); `None` when absent.
    pub fn mvid(&self) -> Option<String> {
        let g = self.metadata().mvid()?;
        let d1 = crate::bytes::u32_at(&g, 0)?;
        let d2 = crate::bytes::u16_at(&g, 4)?;
        let d3 = crate::bytes::u16_at(&g, 6)?;
        Some(format!(
            "{d1:08x}-{d2:04x}-{d3:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
            g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]
        ))
    }

    /// The PE headers (machine, target OS, preferred image base, data directories).
    pub fn pe(&self) -> &PeImage {
        &self.pe
    }

    /// The PE section table: what the loader maps where (compare with `/proc/PID/maps`).
    pub fn sections(&self) -> &[PeSection] {
        &self.pe.sections
    }

    /// The file offset of `rva` via [`crate::formulas::pe_section`] over the section that holds
    /// it; `None` when no section holds it in the file.
    pub fn rva_to_file_offset(&self, rva: Rva) -> Option<FileOffset> {
        self.pe.rva_to_file_offset(rva)
    }

    /// Size in bytes of the IL body of MethodDef `token` (0x06xxxxxx or a bare row number), from
    /// its method header (ECMA-335 II.25.4: tiny header = 1 byte with the size in the upper 6
    /// bits; fat header = 12 bytes with the size at +4). The JIT never inlines a callee whose IL
    /// exceeds 100 bytes (unless marked AggressiveInlining), while calls to tiny methods (16 bytes
    /// or less) are usually inlined and then never hit a probe. `None` for abstract/extern
    /// methods (no IL) or an unreadable header.
    pub fn il_code_size(&self, token: u32) -> Option<u32> {
        let row = self.metadata().method_def(token & 0x00ff_ffff)?;
        if row.rva == 0 {
            return None;
        }
        let first = *self.pe.bytes_at(&self.data, row.rva, 1)?.first()?;
        match first & 3 {
            2 => Some(u32::from(first >> 2)),
            3 => {
                let fat = self.pe.bytes_at(&self.data, row.rva, 12)?;
                crate::bytes::u32_at(fat, 4)
            }
            _ => None,
        }
    }

    /// Every method the assembly defines (MethodDef table) as `(token, name)`, named like
    /// [`Assembly::methods`] names precompiled ones, with or without precompiled code (IL-only
    /// assemblies too). For explaining why a method that exists cannot be probed; methods whose
    /// signature does not decode are left out.
    pub fn method_def_names(&self) -> Vec<(u32, String)> {
        r2r::resolver::method_def_names(self)
    }

    /// The ReadyToRun header and code table; `None` for an IL-only assembly (no precompiled code:
    /// methods are JIT-compiled at run time and cannot be probed).
    /// Where RUNTIME_FUNCTIONS entry `index` lies in the file (its `BeginAddress` field, followed
    /// by `EndAddress` and the unwind data's RVA: readytorun-format.md, x64 entries of 12 bytes);
    /// `None` without ReadyToRun code, for an index past the table, or a table outside the file.
    pub fn runtime_function_file_offset(&self, index: u32) -> Option<FileOffset> {
        let r2r = self.r2r.as_ref()?;
        if index as usize >= r2r.runtime_functions.len() {
            return None;
        }
        let table = r2r.header.section(section::RUNTIME_FUNCTIONS)?;
        let at = self.rva_to_file_offset(Rva(u64::from(table.rva)))?;
        Some(FileOffset(at.0.checked_add(12 * u64::from(index))?))
    }

    pub fn r2r(&self) -> Option<&R2rImage> {
        self.r2r.as_ref()
    }

    /// Every precompiled method: first the METHODDEF_ENTRYPOINTS ones in MethodDef order, then the
    /// generic instantiations of INSTANCE_METHOD_ENTRYPOINTS in table order.
    ///
    /// Returns `Err(Error::IlOnly)` for an IL-only assembly (the message explains JIT and how to
    /// publish ReadyToRun), `Err(Malformed)` when an entry-point structure is corrupt.
    /// Instantiations may name types or methods of other assemblies of the image's version bubble
    /// (none in the shared framework's own images); those assemblies are then opened from the
    /// image's directory ([`r2r::SiblingAssemblies`]); what still cannot be found is named
    /// `[module#N]<token>`.
    ///
    /// Listed once per assembly (and its clones); a listing that fails is tried again.
    pub fn methods(&self) -> Result<Vec<R2rMethod>> {
        let mut listed = self
            .methods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(m) = listed.as_ref() {
            return Ok(m.clone());
        }
        let methods = self.list_methods()?;
        *listed = Some(methods.clone());
        Ok(methods)
    }

    fn list_methods(&self) -> Result<Vec<R2rMethod>> {
        self.list_as(None, &|m| m)
    }

    /// [`Assembly::methods`] (not cached) of the methods whose own name `keep` accepts (all
    /// without `keep`), each as `map` makes it.
    fn list_as<T: Send>(
        &self,
        keep: Option<&dyn Fn(&str) -> bool>,
        map: &(dyn Fn(R2rMethod) -> T + Sync),
    ) -> Result<Vec<T>> {
        // Whether a method is named by module and token (`[module#N]<token>`: its module was
        // not open when it was named), looked at while the names are new.
        let other_module = AtomicBool::new(false);
        let listed = self.listed_as(None, keep, &|m| {
            if names_a_module(&m.name) {
                other_module.store(true, Ordering::Relaxed);
            }
            map(m)
        })?;
        if !other_module.load(Ordering::Relaxed) {
            return Ok(listed);
        }
        let siblings =
            r2r::SiblingAssemblies::open(self, r2r::SiblingAssemblies::referenced_modules(self));
        let resolver = &siblings;
        self.listed_as(Some(&resolver), keep, map)
    }

    fn listed_as<'a, T: Send>(
        &'a self,
        foreign: Option<&'a dyn metadata::ModuleResolver<'a>>,
        keep: Option<&dyn Fn(&str) -> bool>,
        map: &(dyn Fn(R2rMethod) -> T + Sync),
    ) -> Result<Vec<T>> {
        let Some(r2r) = &self.r2r else {
            return Err(Error::IlOnly {
                path: self.path.clone(),
            });
        };
        let budget = crate::name_budget::SharedNameBudget::for_file(self.data.len());
        r2r::resolver::methods_where(self, r2r, foreign, keep, map, &budget)
            .map_err(|e| self.listing_error(&budget, e))
    }

    /// [`Assembly::methods`], naming types of other modules of the version bubble through
    /// `foreign` (see [`r2r::SiblingAssemblies`]).
    pub fn methods_with<'a>(
        &'a self,
        foreign: Option<&'a dyn metadata::ModuleResolver<'a>>,
    ) -> Result<Vec<R2rMethod>> {
        let Some(r2r) = &self.r2r else {
            return Err(Error::IlOnly {
                path: self.path.clone(),
            });
        };
        let budget = crate::name_budget::SharedNameBudget::for_file(self.data.len());
        r2r::resolver::methods(self, r2r, foreign, &budget)
            .map_err(|e| self.listing_error(&budget, e))
    }

    /// The error of a listing that failed with `e`: [`Error::NamesTooLarge`] when its names
    /// exceeded `budget` (naming stopped there), else `e` as [`Error::Malformed`].
    fn listing_error(&self, budget: &crate::name_budget::SharedNameBudget, e: String) -> Error {
        if budget.exceeded() {
            budget.error(&self.path)
        } else {
            Error::malformed(&self.path, e)
        }
    }
}

/// Whether `name` contains `[module#` (named by module and token: its module was not open when
/// it was named). Each `#` of a name is looked at (few names have one), not each position: a
/// substring search per name cost 4% of listing CoreLib.
fn names_a_module(name: &str) -> bool {
    let name = name.as_bytes();
    memchr::memchr_iter(b'#', name).any(|at| name[..at].ends_with(b"[module"))
}

impl Assembly {
    /// [`Assembly::methods_where`] of the methods whose own name is `own`, decoded once per name
    /// and run (resolving `Thread::Sleep` in a process, then planning each of its overloads,
    /// asks for the same name three times).
    pub fn methods_named(&self, own: &str) -> Result<Vec<R2rMethod>> {
        let cached = self
            .named
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(own)
            .cloned();
        if let Some(m) = cached {
            return Ok(m);
        }
        let m = self.methods_where(&|n| n == own)?;
        self.named
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(own.to_string(), m.clone());
        Ok(m)
    }

    /// [`Assembly::methods_named`] as [`Assembly::symbols`] gives them, in the same order.
    pub fn symbols_named(&self, own: &str) -> Result<Vec<Symbol>> {
        Ok(self
            .methods_named(own)?
            .into_iter()
            .map(|m| self.symbol_of(m))
            .collect())
    }

    /// The methods of [`Assembly::methods`] whose own name (MethodDef/MemberRef name, as printed
    /// between `::` and `(`) `keep` accepts, in the same order, named the same; the others are
    /// never named. Not cached ([`Assembly::methods_named`] is).
    pub fn methods_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<R2rMethod>> {
        // As `list_methods`: names of other modules of the version bubble need the siblings (a
        // kept method that names none of them is named the same with or without them).
        self.list_as(Some(keep), &|m| m)
    }

    /// Whether any string of the `#Strings` heap (type, namespace and member names) contains
    /// `byte`; `false` when the heap cannot be read.
    pub fn names_contain(&self, byte: u8) -> bool {
        self.metadata()
            .strings_heap()
            .is_some_and(|h| memchr::memchr(byte, h).is_some())
    }

    fn symbol_of(&self, m: R2rMethod) -> Symbol {
        Symbol {
            name: m.name,
            kind: SymbolKind::ManagedMethod,
            origin: SymbolOrigin::ReadyToRun,
            address: Address::Rva(m.rva),
            size: Some(m.total_size),
            file_offset: m
                .file_offset
                .and_then(|o| bundle::bundle_offset(self.file_base, o)),
        }
    }
}

impl Assembly {
    /// Namespace, type path, method name, structured signature (parameter types, `has_this`)
    /// and parameter names of a method from [`Assembly::methods`] of this assembly.
    /// `Err(Malformed)` when its metadata row or signature cannot be read (or `m` comes from
    /// another assembly).
    pub fn details(&self, m: &R2rMethod) -> Result<MethodDetails> {
        self.details_with(m, None)
    }

    /// `t` as the runtime prints it in method names (ILDASM style: `int32`, `string`,
    /// `class [System.Runtime]System.IO.TextWriter`, `valuetype Interop/Error`, `!0`, `uint8&`),
    /// for a type from a signature of this assembly's metadata (e.g. [`MethodDetails::signature`]).
    /// Tokens that do not resolve print as `?`.
    pub fn type_text(&self, t: &metadata::TypeSig) -> String {
        let names = metadata::Names {
            md: self.metadata(),
            enclosing: &self.enclosing,
            foreign: None,
            type_names: None,
        };
        let mut s = String::new();
        names.ildasm(t, &mut s);
        s
    }

    /// [`Assembly::details`] with a resolver for other modules (see [`Assembly::methods_with`]).
    pub fn details_with<'a>(
        &'a self,
        m: &R2rMethod,
        foreign: Option<&'a dyn metadata::ModuleResolver<'a>>,
    ) -> Result<MethodDetails> {
        r2r::resolver::details(self, m, foreign).map_err(|e| Error::malformed(&self.path, e))
    }
}

impl SymbolSource for Assembly {
    /// Every precompiled method as a [`Symbol`] (`ManagedMethod`, origin `ReadyToRun`, address =
    /// RVA, size = main body plus funclets, file offset of the entry point in the file that
    /// stores the assembly: shifted by [`Assembly::file_base`]). `Err(IlOnly)` for an IL-only
    /// assembly.
    fn symbols(&self) -> Result<Vec<Symbol>> {
        // Symbols are cached per image ([`crate::image::cached`]): a listing not cached yet is not
        // copied into the methods cache as well.
        let cached = self
            .methods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match cached {
            Some(m) => Ok(m.into_iter().map(|m| self.symbol_of(m)).collect()),
            None => self.list_as(None, &|m| self.symbol_of(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The `#`-first check finds `[module#` exactly where a substring search does (names
        /// put together from pieces of the tag, so that it occurs, or nearly does, often).
        #[test]
        fn module_tag_found_as_contains_finds_it(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec!["[module#", "[module", "module#", "#", "[", "e", "x#"]),
                0..6,
            )
        ) {
            let name = pieces.concat();
            prop_assert_eq!(names_a_module(&name), name.contains("[module#"));
        }

        /// Arbitrary bytes, with or without PE magic, never panic the parser.
        #[test]
        fn arbitrary_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..2048), magic in any::<bool>(), lfanew in 0u32..512) {
            if magic && bytes.len() >= 0x40 {
                bytes[0] = b'M';
                bytes[1] = b'Z';
                bytes[0x3c..0x40].copy_from_slice(&lfanew.to_le_bytes());
                let at = lfanew as usize;
                if bytes.len() >= at + 4 {
                    bytes[at..at + 4].copy_from_slice(b"PE\0\0");
                }
            }
            if let Ok(a) = Assembly::parse("fuzz.dll", bytes) {
                let _ = a.methods();
                let _ = a.name();
                let _ = a.mvid();
            }
        }
    }

    #[test]
    fn not_a_pe_file_is_named() {
        let e = Assembly::parse("x.dll", b"\x7fELF....".to_vec())
            .err()
            .unwrap();
        assert!(matches!(e, Error::NotAnObjectFile { .. }), "{e}");
    }
}
