//! Storage of opened images and of what has been parsed from them, keyed by file identity, so
//! that a run opens and parses each image once, whichever entry point asks first and however
//! often. It knows no format: a part is an opaque value (`Arc<dyn Any + Send + Sync>`) under a
//! [`PartKey`], computed by whoever asks for it first ([`CachedFile::part`]). The one module that
//! names the parts and their parsers is [`crate::image::cached`]; the parsers themselves take
//! bytes and know no cache. (The cache is passed in, as blazesym's `Symbolizer` owns its caches
//! instead of reaching for a global: [`ImageCache::new`] makes one, [`ImageCache::shared`] is the
//! process-wide one the path-based entry points use.)
//!
//! - Key: [`FileId`] (device, inode, size, modification time) of the file a path names, so two
//!   paths of one file (`/proc/PID/root/...`, a bind mount) share one entry, and a file rewritten
//!   or replaced on disk is a new entry (the entry of its old identity is dropped at once). An
//!   image stored inside another file (an assembly in a single-file bundle) is its own entry:
//!   the file's [`FileId`] and the member's byte range.
//! - Parts: each computed on first use, under its own lock, so two threads asking for the same
//!   part compute it once. A computation that fails is not kept: the next call tries again and
//!   reports its error afresh.
//! - Bound: at most [`MAX_IMAGES`] images and [`MAX_BYTES`] bytes of files; past either, the
//!   least recently used images are dropped (a caller still holding one keeps it alive).
//! - Counters: [`ImageCache::stats`] counts opens and parses per image, for tests.

use crate::addr::FileOffset;
use crate::bytes::FileBytes;
use crate::file_id::FileId;
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// At most this many images are kept; past it the least recently used one is dropped.
pub const MAX_IMAGES: usize = 64;

/// At most this many bytes of files (their sizes summed) are kept mapped; past it the least
/// recently used images are dropped. 4 GiB: dockerd (~100 MB) and every .NET framework assembly
/// a process maps fit several times over.
pub const MAX_BYTES: u64 = 4 << 30;

/// The name of one part of an image (what is parsed, each at most once while the image is
/// cached). Whoever stores a part names it; [`crate::image::cached::Part`] names the core's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartKey(pub &'static str);

impl std::fmt::Debug for PartKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Which image an entry is: a whole file, or the `(offset, len)` bytes of an image stored inside
/// it (an assembly in a single-file bundle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageKey {
    pub file: FileId,
    pub member: Option<(u64, u64)>,
}

/// Counters since the cache was made (or since [`ImageCache::clear`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// How many times each image's bytes were opened (mapped or read).
    pub opens: BTreeMap<ImageKey, u64>,
    /// How many times each part of each image was parsed (failed attempts included).
    pub parses: BTreeMap<(ImageKey, PartKey), u64>,
}

impl Stats {
    /// Opens of the whole file `file`.
    pub fn opens_of(&self, file: FileId) -> u64 {
        let key = ImageKey { file, member: None };
        self.opens.get(&key).copied().unwrap_or(0)
    }

    /// Parses of `part` of the whole file `file`.
    pub fn parses_of(&self, file: FileId, part: impl Into<PartKey>) -> u64 {
        let key = ImageKey { file, member: None };
        self.parses.get(&(key, part.into())).copied().unwrap_or(0)
    }

    /// Every part of the whole file `file` that was parsed, with its count.
    pub fn parts_of(&self, file: FileId) -> BTreeMap<PartKey, u64> {
        self.parses
            .iter()
            .filter(|((k, _), _)| k.file == file && k.member.is_none())
            .map(|((_, p), n)| (*p, *n))
            .collect()
    }
}

/// Opened images and their parts, bounded, keyed by file identity.
pub struct ImageCache {
    images: Mutex<Lru>,
    stats: Arc<Mutex<Stats>>,
    read_at: Mutex<ReadAt>,
}

impl Default for ImageCache {
    fn default() -> Self {
        ImageCache::new()
    }
}

impl ImageCache {
    /// An empty cache of its own (a library user's, a test's).
    pub fn new() -> ImageCache {
        ImageCache {
            images: Mutex::new(Lru::default()),
            stats: Arc::default(),
            read_at: Mutex::new(ReadAt::default()),
        }
    }

    /// The process-wide cache: what the path-based entry points (`image::load_symbols`,
    /// `resolve::resolve_file`, `Assembly::open`, ...) use, so one run parses each image once.
    pub fn shared() -> &'static ImageCache {
        static SHARED: OnceLock<ImageCache> = OnceLock::new();
        SHARED.get_or_init(ImageCache::new)
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        lock(&self.stats).clone()
    }

    /// Drops every cached image and zeroes the counters (an agent between runs; tests).
    pub fn clear(&self) {
        let mut lru = lock(&self.images);
        lru.entries.clear();
        lru.bytes = 0;
        *lock(&self.stats) = Stats::default();
        lock(&self.read_at).paths.clear();
    }

    /// The file at `path`, opened once per [`FileId`]: from the cache, or opened (mapped) now and
    /// kept. A path that cannot be stat'ed is opened uncached (and its open error returned).
    /// Errors: those of [`FileBytes::open`].
    pub fn open(&self, path: &Path) -> crate::Result<Arc<CachedFile>> {
        let Some(file) = FileId::of(path) else {
            return Ok(Arc::new(CachedFile::uncached(path, FileBytes::open(path)?)));
        };
        lock(&self.read_at).record(path, file);
        let key = ImageKey { file, member: None };
        self.cached(key, path, || FileBytes::open(path))
    }

    /// The image stored at `(offset, len)` in the file at `file`, named `member` in messages:
    /// opened (mapped) once per [`FileId`] of `file` and range.
    pub fn open_member(
        &self,
        file: &Path,
        member: &Path,
        offset: u64,
        len: u64,
    ) -> crate::Result<Arc<CachedFile>> {
        let open = || FileBytes::open_range(file, offset, len);
        let Some(id) = FileId::of(file) else {
            let (b, off) = (open()?, FileOffset(offset));
            return Ok(Arc::new(CachedFile::uncached_at(member, b, off)));
        };
        let key = ImageKey {
            file: id,
            member: Some((offset, len)),
        };
        self.cached(key, member, open)
    }

    /// The identity of the file this cache last opened under `path` ([`ImageCache::open`]);
    /// `None` when it opened nothing there. A probe's file is checked against it right before the
    /// probe is written ([`crate::resolve::verify_probe_file`]): the kernel must find the file
    /// whose bytes were parsed.
    pub fn identity_read_at(&self, path: &Path) -> Option<FileId> {
        lock(&self.read_at).paths.get(path).copied()
    }

    fn cached(
        &self,
        key: ImageKey,
        path: &Path,
        open: impl FnOnce() -> crate::Result<FileBytes>,
    ) -> crate::Result<Arc<CachedFile>> {
        // Held while opening, so that two threads asking for one image open it once.
        let mut lru = lock(&self.images);
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((img, used)) = lru.entries.get_mut(&key) {
            *used = tick;
            return Ok(img.clone());
        }
        let bytes = open()?;
        *lock(&self.stats).opens.entry(key).or_default() += 1;
        if key.member.is_none() && size_of_key(&key) > MAX_BYTES {
            // Larger than the whole bound (the 2 TiB sparse memfd a .NET 8 process maps its JIT
            // code from): keeping it would evict every other image. Served uncached.
            return Ok(Arc::new(CachedFile::uncached(path, bytes)));
        }
        let base = FileOffset(key.member.map_or(0, |(off, _)| off));
        let img = Arc::new(CachedFile {
            key: Some(key),
            stats: Some(self.stats.clone()),
            ..CachedFile::uncached_at(path, bytes, base)
        });
        // The same file under an older identity (rewritten in place, replaced): its parse is
        // stale.
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
}

/// Which file each path was read as, for [`ImageCache::identity_read_at`]. Bounded: past
/// [`MAX_READ_PATHS`] paths it starts afresh (a path no longer remembered is read again before it
/// is probed).
#[derive(Default)]
struct ReadAt {
    paths: HashMap<PathBuf, FileId>,
}

/// At most this many paths are remembered by [`ImageCache::identity_read_at`].
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

fn size_of_key(k: &ImageKey) -> u64 {
    k.member.map_or(k.file.size, |(_, len)| len)
}

/// The cached images with the tick of their last use.
#[derive(Default)]
struct Lru {
    entries: HashMap<ImageKey, (Arc<CachedFile>, u64)>,
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

/// A lock that a panic elsewhere does not poison for good: the cache holds only values that were
/// complete when stored.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One stored part: empty until first computed.
type PartSlot = Arc<Mutex<Option<Arc<dyn Any + Send + Sync>>>>;

/// One opened image: its bytes, and its parts as they get computed.
pub struct CachedFile {
    path: PathBuf,
    key: Option<ImageKey>,
    /// Where the image's first byte lies in its file: 0, or a bundled assembly's entry offset.
    base: FileOffset,
    bytes: FileBytes,
    parts: Mutex<HashMap<PartKey, PartSlot>>,
    /// The counters of the cache that keeps it; `None` for an uncached image.
    stats: Option<Arc<Mutex<Stats>>>,
}

impl std::fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedFile")
            .field("path", &self.path)
            .field("key", &self.key)
            .finish()
    }
}

impl CachedFile {
    /// An image of bytes the caller holds (a mutated copy in tests): its parts are computed once
    /// like a cached one's, but it is neither kept nor counted.
    pub fn uncached(path: &Path, bytes: FileBytes) -> CachedFile {
        CachedFile::uncached_at(path, bytes, FileOffset(0))
    }

    /// [`CachedFile::uncached`] for an image stored at `base` in its file (a bundled assembly
    /// read into memory).
    pub fn uncached_at(path: &Path, bytes: FileBytes, base: FileOffset) -> CachedFile {
        CachedFile {
            path: path.to_path_buf(),
            key: None,
            base,
            bytes,
            parts: Mutex::default(),
            stats: None,
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

    /// Where its first byte lies in its file (non-zero for an image stored inside another file).
    pub fn base(&self) -> FileOffset {
        self.base
    }

    /// Its bytes (cloning them shares the mapping).
    pub fn bytes(&self) -> &FileBytes {
        &self.bytes
    }

    /// Part `key` of the image: computed by `parse` on first use (counted as a parse of `key`),
    /// then shared. A failed `parse` is not kept.
    ///
    /// Panics when `key` was stored with another type (two owners using one key).
    pub fn part<T: Any + Send + Sync, E>(
        &self,
        key: PartKey,
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        self.slot_value(key, true, parse)
    }

    /// A holder of values computed later (not itself a parse, so not counted): built by `make`
    /// on first use, then shared. Parts that borrow the image's bytes live in one such holder
    /// (a value stored as `dyn Any` must own what it refers to).
    pub fn holder<T: Any + Send + Sync>(&self, key: PartKey, make: impl FnOnce() -> T) -> Arc<T> {
        match self.slot_value(key, false, || Ok::<T, std::convert::Infallible>(make())) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// Counts one parse of `part` (for parts a [`CachedFile::holder`] keeps).
    pub fn count_parse(&self, part: PartKey) {
        if let (Some(key), Some(stats)) = (self.key, &self.stats) {
            *lock(stats).parses.entry((key, part)).or_default() += 1;
        }
    }

    fn slot_value<T: Any + Send + Sync, E>(
        &self,
        key: PartKey,
        counted: bool,
        parse: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let slot = lock(&self.parts).entry(key).or_default().clone();
        let mut value = lock(&slot);
        if let Some(v) = value.as_ref() {
            return Ok(downcast(key, v.clone()));
        }
        if counted {
            self.count_parse(key);
        }
        let v = Arc::new(parse()?);
        *value = Some(v.clone());
        Ok(v)
    }
}

fn downcast<T: Any + Send + Sync>(key: PartKey, v: Arc<dyn Any + Send + Sync>) -> Arc<T> {
    v.downcast::<T>()
        .unwrap_or_else(|_| panic!("image part {key:?} stored with another type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_invalidated_by_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"one").unwrap();
        let cache = ImageCache::new();
        let first = cache.open(&a).unwrap();
        let again = cache.open(&a).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let id = FileId::of(&a).unwrap();
        assert_eq!(cache.stats().opens_of(id), 1);
        std::fs::write(&a, b"rewritten").unwrap();
        let new = cache.open(&a).unwrap();
        assert!(!Arc::ptr_eq(&first, &new));
        assert_eq!(&new.bytes()[..], b"rewritten");
        let entries = lock(&cache.images);
        assert!(!entries.entries.keys().any(|k| k.file == id));
        drop(entries);
        // More files than the bound: the oldest goes, the newest stays.
        let paths: Vec<PathBuf> = (0..MAX_IMAGES + 3)
            .map(|i| {
                let p = dir.path().join(format!("f{i}"));
                std::fs::write(&p, format!("{i}")).unwrap();
                cache.open(&p).unwrap();
                p
            })
            .collect();
        let lru = lock(&cache.images);
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
        cache.open(&huge).unwrap();
        let lru = lock(&cache.images);
        assert!(
            lru.entries.keys().any(|k| k.file == last),
            "{kept:?} evicted"
        );
        assert!(!lru.entries.keys().any(|k| k.file.size > MAX_BYTES));
    }

    #[test]
    fn a_part_is_computed_once_and_a_failure_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, b"bytes").unwrap();
        let cache = ImageCache::new();
        let file = cache.open(&a).unwrap();
        let key = PartKey("Length");
        let failed: Result<Arc<usize>, &str> = file.part(key, || Err("not yet"));
        assert!(failed.is_err());
        let len = file.part(key, || Ok::<_, ()>(file.bytes().len())).unwrap();
        let again = file.part(key, || Ok::<usize, ()>(0)).unwrap();
        assert!(Arc::ptr_eq(&len, &again));
        assert_eq!(*len, 5);
        let id = FileId::of(&a).unwrap();
        // The failed attempt and the one parse; the cached answer is no parse.
        assert_eq!(cache.stats().parses_of(id, key), 2);
        // Another cache shares nothing with this one.
        let other = ImageCache::new();
        assert!(!Arc::ptr_eq(&other.open(&a).unwrap(), &file));
        assert_eq!(other.stats().parses_of(id, key), 0);
    }
}
