//! A per-run, process-wide cache of opened and parsed images, so that every entry point of the
//! core ([`crate::image::load_symbols`], [`crate::resolve::resolve_file`],
//! [`crate::resolve::resolve_in_process`], [`crate::dotnet::Assembly::open`],
//! [`crate::dotnet::bundle::Bundle::open`], [`crate::elf::ElfFile::open`],
//! [`crate::probe_safety::CodeFile::open`], ...) opens and parses each image once per run,
//! whichever of them asks first and however often.
//!
//! - Key: [`FileId`] (device, inode, size, modification time) of the file a path names, so two
//!   paths of one file (`/proc/PID/root/...`, a bind mount) share one entry, and a file rewritten
//!   or replaced on disk is a new entry (the entry of its old identity is dropped at once). An
//!   assembly stored inside a single-file bundle is its own entry: the bundle's [`FileId`] and
//!   the member's byte range.
//! - What is kept per image, each parsed on first use ([`Part`]): the ELF headers and function
//!   symbols, the Go tables, the .NET assembly (PE, metadata, ReadyToRun header), the bundle
//!   manifest, the symbol list, the probe-safety tables. A parse that fails is not kept: the
//!   next call parses again and reports its error afresh.
//! - Bound: at most [`MAX_IMAGES`] images and [`MAX_BYTES`] bytes of files; past either, the
//!   least recently used images are dropped (a caller still holding one keeps it alive).
//! - Threads: any thread may ask; an image is opened under one lock, and each part of it is
//!   parsed under its own lock, so two threads asking for the same part parse it once.
//! - Counters: [`stats`] counts opens and parses per image, for tests.

use crate::bytes::FileBytes;
use crate::file_id::FileId;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// At most this many images are kept; past it the least recently used one is dropped.
pub const MAX_IMAGES: usize = 64;

/// At most this many bytes of files (their sizes summed) are kept mapped; past it the least
/// recently used images are dropped. 4 GiB: dockerd (~100 MB) and every .NET framework assembly
/// a process maps fit several times over.
pub const MAX_BYTES: u64 = 4 << 30;

/// What is parsed of an image, each at most once while the image is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// ELF headers, loadable segments, sections and function symbols (`.symtab`, `.dynsym`).
    Elf,
    /// A Go binary's pclntab, text start and build info ([`crate::golang::GoBinary`]).
    Go,
    /// A .NET assembly's PE headers, metadata and ReadyToRun header ([`crate::dotnet::Assembly`]).
    Assembly,
    /// A .NET single-file bundle's manifest ([`crate::dotnet::bundle::Bundle`]).
    Bundle,
    /// The image's symbol list ([`crate::image::load_symbols`]; for an assembly, its ReadyToRun
    /// method entry points and names).
    Symbols,
    /// The probe-safety gate's tables ([`crate::probe_safety::CodeFile`]).
    SafetyTables,
}

/// Which image an entry is: a whole file, or the `(offset, len)` bytes of an assembly stored in a
/// single-file bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageKey {
    pub file: FileId,
    pub member: Option<(u64, u64)>,
}

/// Counters since the process started (or since [`clear`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// How many times each image's bytes were opened (mapped or read).
    pub opens: BTreeMap<ImageKey, u64>,
    /// How many times each part of each image was parsed (failed attempts included).
    pub parses: BTreeMap<(ImageKey, Part), u64>,
}

impl Stats {
    /// Opens of the whole file `file`.
    pub fn opens_of(&self, file: FileId) -> u64 {
        let key = ImageKey { file, member: None };
        self.opens.get(&key).copied().unwrap_or(0)
    }

    /// Parses of `part` of the whole file `file`.
    pub fn parses_of(&self, file: FileId, part: Part) -> u64 {
        let key = ImageKey { file, member: None };
        self.parses.get(&(key, part)).copied().unwrap_or(0)
    }

    /// Every part of the whole file `file` that was parsed, with its count.
    pub fn parts_of(&self, file: FileId) -> BTreeMap<Part, u64> {
        self.parses
            .iter()
            .filter(|((k, _), _)| k.file == file && k.member.is_none())
            .map(|((_, p), n)| (*p, *n))
            .collect()
    }
}

/// The counters so far.
pub fn stats() -> Stats {
    lock(&state().stats).clone()
}

/// Drops every cached image and zeroes the counters (an agent between runs; tests).
pub fn clear() {
    let mut lru = lock(&state().images);
    lru.entries.clear();
    lru.bytes = 0;
    *lock(&state().stats) = Stats::default();
    lock(&state().read_at).paths.clear();
}

/// The image at `path`, opened once per [`FileId`]: from the cache, or opened (mapped) now and
/// kept. A path that cannot be stat'ed is opened uncached (and its open error returned).
/// Errors: those of [`FileBytes::open`].
pub fn image(path: &Path) -> crate::Result<Arc<Image>> {
    let Some(file) = FileId::of(path) else {
        return Ok(Arc::new(Image::uncached(path, FileBytes::open(path)?)));
    };
    lock(&state().read_at).record(path, file);
    let key = ImageKey { file, member: None };
    cached(key, path, || FileBytes::open(path))
}

/// The identity of the file this run last read under `path` ([`image`]); `None` when it read
/// nothing there. A probe's file is checked against it right before the probe is written
/// ([`crate::resolve::verify_probe_file`]): the kernel must find the file whose bytes were parsed.
pub fn identity_read_at(path: &Path) -> Option<FileId> {
    lock(&state().read_at).paths.get(path).copied()
}

/// Which file each path was read as, for [`identity_read_at`]. Bounded: past [`MAX_READ_PATHS`]
/// paths it starts afresh (a path no longer remembered is read again before it is probed).
#[derive(Default)]
struct ReadAt {
    paths: HashMap<PathBuf, FileId>,
}

/// At most this many paths are remembered by [`identity_read_at`].
const MAX_READ_PATHS: usize = 65_536;

impl ReadAt {
    fn record(&mut self, path: &Path, file: FileId) {
        if self.paths.get(path) == Some(&file) {
            return;
        }
        if self.paths.len() >= MAX_READ_PATHS {
            self.paths.clear();
        }
        self.paths.insert(path.to_path_buf(), file);
    }
}

/// The assembly stored uncompressed at `(offset, len)` in the single-file bundle at `bundle`,
/// named `member` in messages: opened (mapped) once per bundle [`FileId`] and range.
pub(crate) fn member_image(
    bundle: &Path,
    member: &Path,
    offset: u64,
    len: u64,
) -> crate::Result<Arc<Image>> {
    let open = || FileBytes::open_range(bundle, offset, len);
    let Some(file) = FileId::of(bundle) else {
        let (b, off) = (open()?, crate::addr::FileOffset(offset));
        return Ok(Arc::new(Image::uncached_at(member, b, off)));
    };
    let key = ImageKey {
        file,
        member: Some((offset, len)),
    };
    cached(key, member, open)
}

fn cached(
    key: ImageKey,
    path: &Path,
    open: impl FnOnce() -> crate::Result<FileBytes>,
) -> crate::Result<Arc<Image>> {
    let st = state();
    // Held while opening, so that two threads asking for one image open it once.
    let mut lru = lock(&st.images);
    lru.tick += 1;
    let tick = lru.tick;
    if let Some((img, used)) = lru.entries.get_mut(&key) {
        *used = tick;
        return Ok(img.clone());
    }
    let bytes = open()?;
    *lock(&st.stats).opens.entry(key).or_default() += 1;
    if key.member.is_none() && size_of_key(&key) > MAX_BYTES {
        // Larger than the whole bound (the 2 TiB sparse memfd a .NET 8 process maps its JIT code
        // from): keeping it would evict every other image. Served uncached; it is no image.
        return Ok(Arc::new(Image::uncached(path, bytes)));
    }
    let img = Arc::new(Image::new(path, bytes, Some(key)));
    // The same file under an older identity (rewritten in place, replaced): its parse is stale.
    let stale: Vec<ImageKey> = lru
        .entries
        .keys()
        .filter(|k| {
            k.file.dev == key.file.dev
                && k.file.ino == key.file.ino
                && k.member == key.member
                && k.file != key.file
        })
        .copied()
        .collect();
    for k in stale {
        lru.remove(&k);
    }
    lru.bytes = lru.bytes.saturating_add(size_of_key(&key));
    lru.entries.insert(key, (img.clone(), tick));
    lru.evict(key);
    Ok(img)
}

fn size_of_key(k: &ImageKey) -> u64 {
    k.member.map_or(k.file.size, |(_, len)| len)
}

/// The cached images with the tick of their last use.
#[derive(Default)]
struct Lru {
    entries: HashMap<ImageKey, (Arc<Image>, u64)>,
    bytes: u64,
    tick: u64,
}

impl Lru {
    fn remove(&mut self, k: &ImageKey) {
        if self.entries.remove(k).is_some() {
            self.bytes = self.bytes.saturating_sub(size_of_key(k));
        }
    }

    /// Drops least recently used images until both bounds hold; never `keep`.
    fn evict(&mut self, keep: ImageKey) {
        while self.entries.len() > MAX_IMAGES || self.bytes > MAX_BYTES {
            let Some(oldest) = self
                .entries
                .iter()
                .filter(|(k, _)| **k != keep)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            self.remove(&oldest);
        }
    }
}

struct State {
    images: Mutex<Lru>,
    stats: Mutex<Stats>,
    read_at: Mutex<ReadAt>,
}

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| State {
        images: Mutex::new(Lru::default()),
        stats: Mutex::new(Stats::default()),
        read_at: Mutex::new(ReadAt::default()),
    })
}

/// A lock that a panic elsewhere does not poison for good: the cache holds only values that were
/// complete when stored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One value of an image, computed at most once (a failure is not kept).
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
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut slot = lock(&self.0);
        if let Some(v) = slot.as_ref() {
            return Ok(v.clone());
        }
        image.count_parse(part);
        let v = parse()?;
        *slot = Some(v.clone());
        Ok(v)
    }
}

self_cell::self_cell!(
    /// An image's bytes and what has been parsed from them (which borrows the bytes).
    struct Cell {
        owner: FileBytes,
        #[not_covariant]
        dependent: Parsed,
    }
);

/// What has been parsed of one image; each part on first use. Borrows the image's bytes.
pub(crate) struct Parsed<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) elf: Slot<Arc<crate::elf::parser::ElfFacts>>,
    pub(crate) go: Slot<Option<Arc<crate::golang::GoBinary<'a>>>>,
    pub(crate) assembly: Slot<Arc<crate::dotnet::Assembly>>,
    pub(crate) bundle: Slot<Option<Arc<crate::dotnet::bundle::Bundle>>>,
    pub(crate) symbols: Slot<Arc<Vec<crate::symbol::Symbol>>>,
    pub(crate) safety: Slot<crate::probe_safety::CachedTables<'a>>,
}

/// One opened image: its bytes, and its parts as they get parsed.
pub struct Image {
    path: PathBuf,
    key: Option<ImageKey>,
    /// Where the image's first byte lies in its file: 0, or a bundled assembly's entry offset.
    base: crate::addr::FileOffset,
    cell: Cell,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("path", &self.path)
            .field("key", &self.key)
            .finish()
    }
}

impl Image {
    fn new(path: &Path, bytes: FileBytes, key: Option<ImageKey>) -> Image {
        let base = crate::addr::FileOffset(key.and_then(|k| k.member).map_or(0, |(off, _)| off));
        Image {
            path: path.to_path_buf(),
            key,
            base,
            cell: Cell::new(bytes, |b| Parsed {
                bytes: b,
                elf: Slot::default(),
                go: Slot::default(),
                assembly: Slot::default(),
                bundle: Slot::default(),
                symbols: Slot::default(),
                safety: Slot::default(),
            }),
        }
    }

    /// An image of bytes the caller holds (a mutated copy in tests): parsed like a cached one,
    /// but neither kept nor counted.
    pub fn uncached(path: &Path, bytes: FileBytes) -> Image {
        Image::new(path, bytes, None)
    }

    /// [`Image::uncached`] for an assembly stored at `base` in its file (a bundle read into
    /// memory).
    pub(crate) fn uncached_at(
        path: &Path,
        bytes: FileBytes,
        base: crate::addr::FileOffset,
    ) -> Image {
        Image {
            base,
            ..Image::new(path, bytes, None)
        }
    }

    /// The path it was first opened under.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its cache key; `None` for an uncached image.
    pub fn key(&self) -> Option<ImageKey> {
        self.key
    }

    /// Its bytes (cloning them shares the mapping).
    pub fn bytes(&self) -> &FileBytes {
        self.cell.borrow_owner()
    }

    /// Runs `f` over what is parsed of the image.
    pub(crate) fn with<R>(&self, f: impl for<'a, 'b> FnOnce(&'b Parsed<'a>) -> R) -> R {
        self.cell.with_dependent(|_, parsed| f(parsed))
    }

    /// `result` of a parse of the image's bytes, unless the file shrank under its mapping while
    /// it was parsed ([`FileBytes::check_unchanged`]): then what was parsed came partly from
    /// zeros, and the answer is [`crate::Error::ChangedWhileRead`] (not kept: the next call opens
    /// the file's new identity afresh).
    pub(crate) fn unchanged<T>(&self, path: &Path, result: crate::Result<T>) -> crate::Result<T> {
        self.bytes().check_unchanged(path)?;
        result
    }

    fn count_parse(&self, part: Part) {
        if let Some(key) = self.key {
            *lock(&state().stats).parses.entry((key, part)).or_default() += 1;
        }
    }

    /// The ELF facts (segments, sections, function symbols), parsed once. Errors as
    /// [`crate::elf::parser::ElfView::parse`], naming `path` (as does every parse below: the
    /// path the caller knows the image by).
    pub(crate) fn elf(&self, path: &Path) -> crate::Result<Arc<crate::elf::parser::ElfFacts>> {
        self.with(|p| {
            // Not ELF by its magic: nothing to parse, and nothing to count (a PE file is asked
            // for its ELF facts by callers that take any image).
            if crate::image::sniff(p.bytes) != Some(crate::image::ImageFormat::Elf) {
                return Err(crate::Error::NotAnObjectFile {
                    path: path.to_path_buf(),
                });
            }
            p.elf.get_or_try(self, Part::Elf, || {
                self.unchanged(path, crate::elf::parser::ElfFacts::parse(path, p.bytes))
                    .map(Arc::new)
            })
        })
    }

    /// The .NET assembly, parsed once; errors as [`crate::dotnet::Assembly::from_bytes`]. An
    /// image opened by [`member_image`] gives the assembly at its place in the bundle.
    pub(crate) fn assembly(&self, path: &Path) -> crate::Result<Arc<crate::dotnet::Assembly>> {
        self.with(|p| {
            p.assembly.get_or_try(self, Part::Assembly, || {
                let assembly =
                    crate::dotnet::Assembly::from_bytes_at(path, self.bytes().clone(), self.base);
                self.unchanged(path, assembly).map(Arc::new)
            })
        })
    }

    /// The single-file bundle the image is, parsed once; `None` when it is none.
    pub(crate) fn bundle(
        &self,
        path: &Path,
    ) -> crate::Result<Option<Arc<crate::dotnet::bundle::Bundle>>> {
        self.with(|p| {
            p.bundle.get_or_try(self, Part::Bundle, || {
                let bundle = crate::dotnet::bundle::Bundle::from_bytes(path, self.bytes().clone());
                self.unchanged(path, bundle).map(|b| b.map(Arc::new))
            })
        })
    }

    /// Runs `f` over the Go binary the image is (`None` when it is not one), parsed once.
    /// Errors as [`crate::golang::GoBinary::parse`].
    pub fn with_go<R>(
        &self,
        path: &Path,
        f: impl for<'a> FnOnce(Option<&crate::golang::GoBinary<'a>>) -> R,
    ) -> crate::Result<R> {
        self.with(|p| {
            let go = self.go(path, p)?;
            Ok(f(go.as_deref()))
        })
    }

    /// The Go binary as the probe-safety tables hold it.
    pub(crate) fn go<'a>(
        &self,
        path: &Path,
        p: &Parsed<'a>,
    ) -> crate::Result<Option<Arc<crate::golang::GoBinary<'a>>>> {
        p.go.get_or_try(self, Part::Go, || {
            self.unchanged(path, crate::golang::GoBinary::parse(path, p.bytes))
                .map(|g| g.map(Arc::new))
        })
    }

    /// The image's symbols as [`crate::image::load_symbols`] gives them, computed once.
    pub fn symbols(&self, path: &Path) -> crate::Result<Arc<Vec<crate::symbol::Symbol>>> {
        self.with(|p| {
            p.symbols.get_or_try(self, Part::Symbols, || {
                self.unchanged(path, crate::image::symbols_of(self, path, p))
                    .map(Arc::new)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_invalidated_by_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"one").unwrap();
        let first = image(&a).unwrap();
        let again = image(&a).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let id = FileId::of(&a).unwrap();
        assert_eq!(stats().opens_of(id), 1);
        std::fs::write(&a, b"rewritten").unwrap();
        let new = image(&a).unwrap();
        assert!(!Arc::ptr_eq(&first, &new));
        assert_eq!(&new.bytes()[..], b"rewritten");
        let entries = lock(&state().images);
        assert!(!entries.entries.keys().any(|k| k.file == id));
        drop(entries);
        // More files than the bound: the oldest goes, the newest stays.
        let paths: Vec<PathBuf> = (0..MAX_IMAGES + 3)
            .map(|i| {
                let p = dir.path().join(format!("f{i}"));
                std::fs::write(&p, format!("{i}")).unwrap();
                image(&p).unwrap();
                p
            })
            .collect();
        let lru = lock(&state().images);
        assert!(lru.entries.len() <= MAX_IMAGES);
        let last = FileId::of(paths.last().unwrap()).unwrap();
        assert!(lru.entries.keys().any(|k| k.file == last));
        let first = FileId::of(&paths[0]).unwrap();
        assert!(!lru.entries.keys().any(|k| k.file == first));
        drop(lru);
        // A file larger than the whole bound (a .NET 8 process maps a 2 TiB sparse memfd) is
        // served uncached and evicts nothing.
        let kept = paths.last().unwrap();
        let huge = dir.path().join("huge");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(MAX_BYTES + 1)
            .unwrap();
        image(&huge).unwrap();
        let lru = lock(&state().images);
        assert!(
            lru.entries.keys().any(|k| k.file == last),
            "{kept:?} evicted"
        );
        assert!(!lru.entries.keys().any(|k| k.file.size > MAX_BYTES));
    }
}
