//! Each image parsed once per run: the one module that names the parsers' types next to the
//! cache. The parsers (`elf/`, `golang/`, `dotnet/`) take bytes and know no cache; the cache
//! ([`crate::cache`]) stores opaque parts and knows no parser; here each [`Part`] is parsed through
//! an [`ImageCache`] on first use, and the path-based entry points the rest of the code uses
//! ([`Assembly::open`], [`Bundle::open`], [`Bundle::assembly`], [`ElfFile::open`], [`image`]) are
//! defined, each with an `_in` form that takes the cache to use. Adding a symbol source means a
//! [`Part`] and a method of [`Image`] here, nothing in the cache.
//!
//! What is kept per image ([`Part`]): the ELF headers and function symbols, the Go tables, the
//! .NET assembly (PE, metadata, ReadyToRun header), the bundle manifest, the symbol list, the
//! probe-safety tables. Two of them borrow the image's bytes (the Go tables and the probe-safety
//! tables, which hold them); a value stored as `dyn Any` must own what it refers to, so those two
//! live in one self-referential holder ([`Parsed`]) that owns a handle on the bytes.

use crate::bytes::FileBytes;
use crate::cache::{CachedFile, ImageCache, ImageKey, PartKey};
use crate::dotnet::bundle::{Bundle, BundleEntry};
use crate::dotnet::{Assembly, SiblingOpener};
use crate::elf::parser::{ElfFacts, ElfView};
use crate::elf::resolver::FactsSource;
use crate::elf::ElfFile;
use crate::error::{Error, Result};
use crate::golang::GoBinary;
use crate::image::format::{sniff, ImageFormat};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// What is parsed of an image, each at most once while the image is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// ELF headers, loadable segments, sections and function symbols (`.symtab`, `.dynsym`).
    Elf,
    /// A Go binary's pclntab, text start and build info ([`GoBinary`]).
    Go,
    /// A .NET assembly's PE headers, metadata and ReadyToRun header ([`Assembly`]).
    Assembly,
    /// A .NET single-file bundle's manifest ([`Bundle`]).
    Bundle,
    /// The image's symbol list ([`crate::image::load_symbols`]; for an assembly, its ReadyToRun
    /// method entry points and names).
    Symbols,
    /// The probe-safety gate's tables ([`crate::probe_safety::CodeFile`]).
    SafetyTables,
}

impl Part {
    /// Its name in the cache (and in its counters).
    pub const fn key(self) -> PartKey {
        PartKey(match self {
            Part::Elf => "Elf",
            Part::Go => "Go",
            Part::Assembly => "Assembly",
            Part::Bundle => "Bundle",
            Part::Symbols => "Symbols",
            Part::SafetyTables => "SafetyTables",
        })
    }
}

impl From<Part> for PartKey {
    fn from(p: Part) -> PartKey {
        p.key()
    }
}

/// The key of the holder of the parts that borrow the image's bytes.
const BORROWED: PartKey = PartKey("borrowed parts");

/// The image at `path` in the process-wide cache ([`ImageCache::shared`]); see [`Image::open`].
pub fn image(path: &Path) -> Result<Arc<Image>> {
    Image::open(ImageCache::shared(), path)
}

/// Opens the assemblies an assembly references ([`Assembly::open_sibling`]) through the
/// process-wide cache, so a sibling several assemblies name is parsed once per run.
pub fn sibling_opener() -> SiblingOpener {
    Arc::new(|p: &Path| Assembly::open(p))
}

/// One value of an image that borrows its bytes, computed at most once (a failure is not kept).
pub(crate) struct Slot<T>(Mutex<Option<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Mutex::new(None))
    }
}

impl<T: Clone> Slot<T> {
    /// The value, computed by `parse` on first use (counted as a parse of `part` of `image`).
    pub(crate) fn get_or_init(&self, image: &Image, part: Part, parse: impl FnOnce() -> T) -> T {
        match self.get_or_try(image, part, || Ok::<T, std::convert::Infallible>(parse())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// The value, computed by `parse` on first use (counted as a parse of `part` of `image`).
    pub(crate) fn get_or_try<E>(
        &self,
        image: &Image,
        part: Part,
        parse: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = slot.as_ref() {
            return Ok(v.clone());
        }
        image.file.count_parse(part.key());
        let v = parse()?;
        *slot = Some(v.clone());
        Ok(v)
    }
}

self_cell::self_cell!(
    /// An image's bytes and the parts that borrow them.
    struct Borrowed {
        owner: FileBytes,
        #[not_covariant]
        dependent: Parsed,
    }
);

/// The parts of one image that borrow its bytes; each on first use.
pub(crate) struct Parsed<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) go: Slot<Option<Arc<GoBinary<'a>>>>,
    pub(crate) safety: Slot<crate::probe_safety::CachedTables<'a>>,
}

/// One opened image: its bytes (kept by the cache), and its parts as they get parsed.
pub struct Image {
    file: Arc<CachedFile>,
    borrowed: Arc<Borrowed>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.file.fmt(f)
    }
}

impl Image {
    /// The image at `path`, opened once per file identity in `cache` ([`ImageCache::open`]).
    pub fn open(cache: &ImageCache, path: &Path) -> Result<Arc<Image>> {
        Ok(Arc::new(Image::of(cache.open(path)?)))
    }

    fn of(file: Arc<CachedFile>) -> Image {
        let borrowed = file.holder(BORROWED, || {
            Borrowed::new(file.bytes().clone(), |b| Parsed {
                bytes: b,
                go: Slot::default(),
                safety: Slot::default(),
            })
        });
        Image { file, borrowed }
    }

    /// An image of bytes the caller holds (a mutated copy in tests): parsed like a cached one,
    /// but neither kept nor counted.
    pub fn uncached(path: &Path, bytes: FileBytes) -> Image {
        Image::of(Arc::new(CachedFile::uncached(path, bytes)))
    }

    /// The path it was first opened under.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Its cache key; `None` for an uncached image.
    pub fn key(&self) -> Option<ImageKey> {
        self.file.key()
    }

    /// Its bytes (cloning them shares the mapping).
    pub fn bytes(&self) -> &FileBytes {
        self.file.bytes()
    }

    /// Runs `f` over the parts that borrow the image's bytes.
    pub(crate) fn with<R>(&self, f: impl for<'a, 'b> FnOnce(&'b Parsed<'a>) -> R) -> R {
        self.borrowed.with_dependent(|_, parsed| f(parsed))
    }

    /// Part `part` of the image, parsed by `parse` on first use ([`CachedFile::part`]).
    pub(crate) fn part<T: std::any::Any + Send + Sync>(
        &self,
        part: Part,
        parse: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        self.file.part(part.key(), parse)
    }

    /// `result` of a parse of the image's bytes, unless the file shrank under its mapping while
    /// it was parsed ([`FileBytes::check_unchanged`]): then what was parsed came partly from
    /// zeros, and the answer is [`Error::ChangedWhileRead`] (not kept: the next call opens the
    /// file's new identity afresh).
    pub(crate) fn unchanged<T>(&self, path: &Path, result: Result<T>) -> Result<T> {
        self.bytes().check_unchanged(path)?;
        result
    }

    /// The ELF facts (segments, sections, function symbols), parsed once. Errors as
    /// [`ElfView::parse`], naming `path` (as does every parse below: the path the caller knows
    /// the image by).
    pub(crate) fn elf(&self, path: &Path) -> Result<Arc<ElfFacts>> {
        // Not ELF by its magic: nothing to parse, and nothing to count (a PE file is asked for
        // its ELF facts by callers that take any image).
        if sniff(self.bytes()) != Some(ImageFormat::Elf) {
            return Err(Error::NotAnObjectFile {
                path: path.to_path_buf(),
            });
        }
        self.part(Part::Elf, || {
            self.unchanged(path, ElfFacts::parse(path, self.bytes()))
        })
    }

    /// The .NET assembly, parsed once; errors as [`Assembly::from_bytes`]. An image opened by
    /// [`member_image`] gives the assembly at its place in the bundle. Its sibling assemblies
    /// are opened through the process-wide cache ([`Assembly::with_sibling_opener`]).
    pub(crate) fn assembly(&self, path: &Path) -> Result<Arc<Assembly>> {
        self.part(Part::Assembly, || {
            let assembly = Assembly::from_bytes_at(path, self.bytes().clone(), self.file.base());
            self.unchanged(path, assembly)
                .map(|a| a.with_sibling_opener(sibling_opener()))
        })
    }

    /// The single-file bundle the image is, parsed once; `None` when it is none.
    pub(crate) fn bundle(&self, path: &Path) -> Result<Option<Arc<Bundle>>> {
        self.part(Part::Bundle, || {
            let bundle = Bundle::from_bytes(path, self.bytes().clone());
            self.unchanged(path, bundle).map(|b| b.map(Arc::new))
        })
        .map(|b| b.as_ref().clone())
    }

    /// Runs `f` over the Go binary the image is (`None` when it is not one), parsed once.
    /// Errors as [`GoBinary::parse`].
    pub fn with_go<R>(
        &self,
        path: &Path,
        f: impl for<'a> FnOnce(Option<&GoBinary<'a>>) -> R,
    ) -> Result<R> {
        self.with(|p| {
            let go = self.go(path, p)?;
            Ok(f(go.as_deref()))
        })
    }

    /// The Go binary as the probe-safety tables hold it.
    pub(crate) fn go<'a>(&self, path: &Path, p: &Parsed<'a>) -> Result<Option<Arc<GoBinary<'a>>>> {
        p.go.get_or_try(self, Part::Go, || {
            self.unchanged(path, GoBinary::parse(path, p.bytes))
                .map(|g| g.map(Arc::new))
        })
    }
}

impl Assembly {
    /// Reads and parses the assembly at `path`, once per run ([`ImageCache::shared`]).
    ///
    /// Returns `Err(Error::Io/PermissionDenied)` when the file cannot be read, and the errors of
    /// [`Assembly::parse`] otherwise.
    ///
    /// `path` may name an assembly inside a .NET single-file bundle as if the bundle were a
    /// folder (`./app/System.Private.CoreLib.dll`, see
    /// [`crate::dotnet::bundle::split_member_path`]); it is then opened in place
    /// ([`Bundle::assembly`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Assembly> {
        Assembly::open_in(ImageCache::shared(), path.as_ref())
    }

    /// [`Assembly::open`] through `cache`.
    pub fn open_in(cache: &ImageCache, path: &Path) -> Result<Assembly> {
        match Image::open(cache, path) {
            Ok(image) => image.assembly(path).map(|a| a.with_path(path)),
            Err(e) => match open_member(cache, path)? {
                Some(asm) => Ok(asm),
                None => Err(e),
            },
        }
    }
}

impl ElfFile {
    /// Opens and checks `path` ([`ElfFile::open_in`] the process-wide cache).
    pub fn open(path: &Path) -> Result<ElfFile> {
        ElfFile::open_in(ImageCache::shared(), path)
    }

    /// Opens and checks `path`. Errors: [`Error::NotAnObjectFile`] when it is no ELF file,
    /// [`Error::Malformed`] when its headers are truncated or corrupt, I/O errors naming the
    /// path. The file is opened once per run (`cache`); its symbol tables are parsed (once per
    /// run) by the first `symbols()`, not here: asking a 75 MB Go binary for its segments or
    /// sections must not read its 170,000 `.dynsym` names.
    pub fn open_in(cache: &ImageCache, path: &Path) -> Result<ElfFile> {
        let image = Image::open(cache, path)?;
        if sniff(image.bytes()) != Some(ImageFormat::Elf) {
            return Err(Error::NotAnObjectFile {
                path: path.to_path_buf(),
            });
        }
        ElfView::parse(path, image.bytes())?;
        let bytes = image.bytes().clone();
        let facts = FactsSource::new(move |p: &Path| image.elf(p));
        Ok(ElfFile::with_facts(path, bytes, facts))
    }
}

impl Bundle {
    /// Opens `path` as a bundle: `Ok(None)` when it is a file but not a single-file bundle
    /// (not ELF, or an ELF without a bundle manifest); `Err` for I/O errors and for a bundle
    /// whose manifest is corrupt ([`Error::Malformed`]) or of an unknown format version
    /// ([`Error::Unsupported`]). The file is opened and its manifest parsed once per run
    /// ([`ImageCache::shared`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Option<Bundle>> {
        Bundle::open_in(ImageCache::shared(), path.as_ref())
    }

    /// [`Bundle::open`] through `cache`.
    pub fn open_in(cache: &ImageCache, path: &Path) -> Result<Option<Bundle>> {
        Ok(Image::open(cache, path)?
            .bundle(path)?
            .map(|b| b.with_path(path)))
    }

    /// Opens bundled assembly `entry` in place, parsed once per run ([`member_image`]). Its
    /// [`Assembly::file_base`] is the entry's offset, so its symbols' file offsets are offsets
    /// in the bundle file.
    ///
    /// Errors: [`Error::CompressedBundleEntry`] (not probe-able; the fix is to publish without
    /// compression), [`Error::ExtractedBundleEntry`] (the runtime uses an extracted copy),
    /// [`Error::NotDotnet`] for a file that is no assembly, and the assembly's own errors.
    pub fn assembly(&self, entry: &BundleEntry) -> Result<Assembly> {
        let member = self.member_path(entry);
        member_image(ImageCache::shared(), self, entry)?
            .assembly(&member)
            .map(|a| a.with_path(&member))
    }

    /// Every assembly the runtime maps from the bundle
    /// ([`crate::dotnet::bundle::Placement::Mapped`]), in manifest order, with the result of
    /// opening it ([`Bundle::assembly`]).
    pub fn mapped_assemblies(&self) -> Vec<(&BundleEntry, Result<Assembly>)> {
        self.mapped_entries()
            .map(|e| (e, self.assembly(e)))
            .collect()
    }
}

/// The image of bundled assembly `entry` (opened and parsed once per run in `cache` when the
/// bundle is a mapped file); errors as [`Bundle::assembly`].
pub(crate) fn member_image(
    cache: &ImageCache,
    bundle: &Bundle,
    entry: &BundleEntry,
) -> Result<Arc<Image>> {
    bundle.check_mapped(entry)?;
    let member = bundle.member_path(entry);
    let file = match bundle.data() {
        FileBytes::Mapped(_) => {
            cache.open_member(bundle.path(), &member, entry.offset.0, entry.size)?
        }
        FileBytes::Owned(_) => {
            let stored = bundle
                .stored_bytes(entry)
                .ok_or_else(|| Error::malformed(bundle.path(), "entry outside the bundle"))?;
            let bytes = FileBytes::Owned(stored.to_vec());
            Arc::new(CachedFile::uncached_at(&member, bytes, entry.offset))
        }
    };
    Ok(Arc::new(Image::of(file)))
}

/// Opens the bundled assembly a member path names (see
/// [`crate::dotnet::bundle::split_member_path`]); `Ok(None)` when `path` is no member path of a
/// bundle.
pub fn open_member(cache: &ImageCache, path: &Path) -> Result<Option<Assembly>> {
    let Some((bundle, rel)) = bundle_of_member(cache, path)? else {
        return Ok(None);
    };
    let entry = bundle.entry(&rel)?;
    let member = bundle.member_path(entry);
    member_image(cache, &bundle, entry)?
        .assembly(&member)
        .map(|a| Some(a.with_path(&member)))
}

/// [`open_member`]'s image: `Ok(None)` when `path` is no member path of a bundle.
pub(crate) fn open_member_image(cache: &ImageCache, path: &Path) -> Result<Option<Arc<Image>>> {
    let Some((bundle, rel)) = bundle_of_member(cache, path)? else {
        return Ok(None);
    };
    member_image(cache, &bundle, bundle.entry(&rel)?).map(Some)
}

/// The bundle a member path names and the member's path inside it; `Ok(None)` when `path` is
/// no member path of a bundle.
fn bundle_of_member(cache: &ImageCache, path: &Path) -> Result<Option<(Bundle, String)>> {
    let Some((bundle_path, rel)) = crate::dotnet::bundle::split_member_path(path) else {
        return Ok(None);
    };
    Ok(Bundle::open_in(cache, &bundle_path)?.map(|b| (b, rel)))
}
