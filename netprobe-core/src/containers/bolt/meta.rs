//! The meta page: which of a BoltDB file's two meta pages describes its last committed
//! transaction, and what it says (page size, root bucket, high-water page id, transaction id).
//!
//! Layout (bbolt `internal/common/meta.go`, `Meta`; `internal/common/types.go`, `Magic`,
//! `Version`): pages 0 and 1 are meta pages; after the 16-byte page header each holds
//! `magic u32 · version u32 · pageSize u32 · flags u32 · root {pgid u64, sequence u64} ·
//! freelist u64 · pgid u64 · txid u64 · checksum u64`, little-endian on the machines netprobe
//! runs on. The checksum is FNV-1a 64 over the 56 bytes before it (`Meta.Sum64`). A commit
//! writes the meta page `txid % 2` last, so the valid meta with the higher txid is the newest
//! consistent snapshot, and the other one the previous (bbolt `db.go`, `DB.meta`).

use super::page::{Pgid, PAGE_HEADER};
use super::BoltError;
use crate::bytes::{slice, u32_at, u64_at};

/// bbolt's `Magic`.
const MAGIC: u32 = 0xED0C_DAED;
/// bbolt's data file format `Version`.
const VERSION: u32 = 2;
/// The bytes the checksum covers (the meta up to its `checksum` field).
const SUMMED: usize = 56;
/// The whole meta: the summed bytes and the checksum.
const META_LEN: usize = SUMMED + 8;
/// Page sizes bbolt tries when looking for the second meta page after an unreadable first one
/// (`DB.getPageSizeFromSecondMeta`: 1 KiB up to 16 MiB), and so the sizes accepted at all.
const MIN_PAGE: u32 = 1024;
const MAX_PAGE: u32 = 1024 << 14;

/// What the chosen meta page says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The size of every page (the writer's OS page size when the file was made).
    pub page_size: u32,
    /// The root page of the root bucket, whose keys are the top-level buckets.
    pub root: Pgid,
    /// The high-water mark: every page in use has a smaller id.
    pub high_water: Pgid,
    /// The transaction this snapshot is the result of.
    pub txid: u64,
}

/// FNV-1a 64 (the `hash/fnv` `New64a` bbolt sums its meta with).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The meta of the page starting at `at`, when it is a valid one (magic, version, checksum, a
/// page size bbolt can write); why not otherwise.
fn meta_at(data: &[u8], at: usize) -> Result<Meta, &'static str> {
    let m = slice(
        data,
        at.checked_add(PAGE_HEADER).ok_or("past the end")?,
        META_LEN,
    )
    .ok_or("past the end of the file")?;
    let field = |off: usize| u64_at(m, off).unwrap_or(0);
    if u32_at(m, 0) != Some(MAGIC) {
        return Err("no BoltDB magic");
    }
    if u32_at(m, 4) != Some(VERSION) {
        return Err("not BoltDB format version 2");
    }
    if fnv1a64(&m[..SUMMED]) != field(SUMMED) {
        return Err("meta checksum mismatch");
    }
    let page_size = u32_at(m, 8).unwrap_or(0);
    if !(MIN_PAGE..=MAX_PAGE).contains(&page_size) || !page_size.is_power_of_two() {
        return Err("page size out of range");
    }
    let meta = Meta {
        page_size,
        root: field(16),
        high_water: field(40),
        txid: field(48),
    };
    // bbolt never writes a root at or above the high-water mark (`Meta.Write` panics on it),
    // nor a root in the meta pages.
    if meta.root < 2 || meta.root >= meta.high_water {
        return Err("root page outside the file's pages");
    }
    Ok(meta)
}

/// The newest valid meta of the file `data`: meta page 0 at offset 0 gives the page size, and
/// meta page 1 is one page further; when page 0 is unreadable, page 1 is looked for at each page
/// size bbolt allows, as bbolt itself does. Of the valid ones, the higher txid wins.
pub fn newest(data: &[u8]) -> Result<Meta, BoltError> {
    let first = meta_at(data, 0);
    let page_size = match first {
        Ok(m) => Some(m.page_size),
        Err(_) => (0..=14)
            .map(|i| MIN_PAGE << i)
            .find(|&size| meta_at(data, size as usize).is_ok_and(|m| m.page_size == size)),
    };
    let second = match page_size {
        Some(size) => meta_at(data, size as usize).and_then(|m| {
            if m.page_size == size {
                Ok(m)
            } else {
                Err("the two meta pages disagree on the page size")
            }
        }),
        None => Err("no second meta page"),
    };
    match (first, second) {
        (Ok(a), Ok(b)) => Ok(if b.txid > a.txid { b } else { a }),
        (Ok(m), Err(_)) | (Err(_), Ok(m)) => Ok(m),
        (Err(why), Err(_)) => Err(BoltError::NotBolt(why)),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The bytes of a meta page of `page_size` bytes numbered `id`, with its checksum.
    pub fn meta_page(id: u64, page_size: u32, root: u64, high_water: u64, txid: u64) -> Vec<u8> {
        let mut p = vec![0u8; page_size as usize];
        p[0..8].copy_from_slice(&id.to_le_bytes());
        p[8..10].copy_from_slice(&4u16.to_le_bytes());
        let m = &mut p[PAGE_HEADER..PAGE_HEADER + META_LEN];
        m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        m[4..8].copy_from_slice(&VERSION.to_le_bytes());
        m[8..12].copy_from_slice(&page_size.to_le_bytes());
        m[16..24].copy_from_slice(&root.to_le_bytes());
        m[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        m[40..48].copy_from_slice(&high_water.to_le_bytes());
        m[48..56].copy_from_slice(&txid.to_le_bytes());
        let sum = fnv1a64(&m[..SUMMED]);
        m[56..64].copy_from_slice(&sum.to_le_bytes());
        p
    }

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // FNV test vectors (draft-eastlake-fnv, "FNV-1a 64"): "" and "a".
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn the_higher_valid_txid_wins_and_a_broken_meta_falls_back() {
        let mut file = meta_page(0, 4096, 3, 4, 7);
        file.extend(meta_page(1, 4096, 2, 4, 8));
        assert_eq!(newest(&file).unwrap().txid, 8);
        file[4096 + PAGE_HEADER + 20] ^= 1; // page 1's root, so its checksum fails
        let m = newest(&file).unwrap();
        assert_eq!((m.txid, m.root), (7, 3));
        file[PAGE_HEADER] ^= 1; // page 0's magic: both broken
        assert!(matches!(newest(&file), Err(BoltError::NotBolt(_))));
    }

    #[test]
    fn a_broken_first_page_still_finds_the_second_by_page_size() {
        let mut file = vec![0u8; 16384];
        file.extend(meta_page(1, 16384, 2, 3, 9));
        assert_eq!(newest(&file).unwrap().page_size, 16384);
    }

    #[test]
    fn lying_sizes_are_refused() {
        assert!(
            newest(&meta_page(0, 4096, 2, 2, 1)).is_err(),
            "root at high water"
        );
        let mut odd = meta_page(0, 4096, 2, 3, 1);
        odd.truncate(20);
        assert!(newest(&odd).is_err());
        assert!(newest(&[]).is_err());
    }
}
