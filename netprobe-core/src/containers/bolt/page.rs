//! Pages: where page N of a BoltDB file lies, and the elements of its branch and leaf pages.
//!
//! Layout (bbolt `internal/common/page.go`): a page starts with a 16-byte header
//! `id u64 · flags u16 · count u16 · overflow u32`; page N is at N × page size and spans
//! `overflow + 1` pages. Flags: branch 0x01, leaf 0x02, meta 0x04, freelist 0x10. After the
//! header come `count` elements of 16 bytes:
//! - branch (`branchPageElement`): `pos u32 · ksize u32 · pgid u64`, the child page whose keys
//!   start at this key;
//! - leaf (`leafPageElement`): `flags u32 · pos u32 · ksize u32 · vsize u32`, with flag 0x01
//!   (`BucketLeafFlag`) when the value is a nested bucket.
//!
//! `pos` counts from the element's own first byte, the key follows, and a leaf's value follows
//! its key. Every offset here is checked against the page's bytes, which are checked against
//! the file: a lying size or position is an error, never a read outside.

use super::BoltError;
use crate::bytes::{slice, u16_at, u32_at, u64_at};

/// A page id.
pub type Pgid = u64;
/// The bytes of a page header (`PageHeaderSize`).
pub const PAGE_HEADER: usize = 16;
/// The bytes of a branch or leaf element (`BranchPageElementSize`, `LeafPageElementSize`).
const ELEMENT: usize = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
/// `BucketLeafFlag`: a leaf value that is a bucket.
pub const BUCKET_LEAF: u32 = 0x01;

/// The pages of one snapshot: the file's bytes, its page size and the high-water mark of the
/// meta that chose it (a page at or above it is not part of the snapshot).
#[derive(Clone, Copy, Debug)]
pub struct Pages<'a> {
    pub data: &'a [u8],
    pub page_size: usize,
    pub high_water: Pgid,
}

/// A branch or leaf page, over its bytes (overflow pages included).
#[derive(Clone, Copy, Debug)]
pub struct Page<'a> {
    /// The page's id; 0 for a bucket's inline page.
    pub id: Pgid,
    bytes: &'a [u8],
    branch: bool,
    count: u16,
}

/// One element of a page: a branch's separator key and child, or a leaf's key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Element<'a> {
    Branch {
        key: &'a [u8],
        child: Pgid,
    },
    Leaf {
        flags: u32,
        key: &'a [u8],
        value: &'a [u8],
    },
}

impl<'a> Pages<'a> {
    /// Page `id` of the snapshot: inside the file and below the high-water mark, naming itself
    /// `id` in its header (bbolt's `Page.FastCheck`), and a branch or leaf page.
    pub fn page(&self, id: Pgid) -> Result<Page<'a>, BoltError> {
        let bad = |why: &'static str| BoltError::BadPage { id, why };
        if id < 2 || id >= self.high_water {
            return Err(bad("outside the snapshot's pages"));
        }
        let start = usize::try_from(id)
            .ok()
            .and_then(|i| i.checked_mul(self.page_size))
            .ok_or(bad("past the end of the file"))?;
        let header = slice(self.data, start, PAGE_HEADER).ok_or(bad("past the end of the file"))?;
        if u64_at(header, 0) != Some(id) {
            return Err(bad("its header names another page"));
        }
        let overflow = u32_at(header, 12).unwrap_or(0) as usize;
        let len = overflow
            .checked_add(1)
            .and_then(|n| n.checked_mul(self.page_size))
            .ok_or(bad("its overflow runs past the end of the file"))?;
        let bytes = slice(self.data, start, len)
            .ok_or(bad("its overflow runs past the end of the file"))?;
        Page::over(id, bytes)
    }
}

impl<'a> Page<'a> {
    /// The page whose header starts `bytes` (a file page, or an inline bucket's page), when it is
    /// a branch or leaf page whose elements fit in it.
    pub fn over(id: Pgid, bytes: &'a [u8]) -> Result<Page<'a>, BoltError> {
        let bad = |why: &'static str| BoltError::BadPage { id, why };
        let flags = u16_at(bytes, 8).ok_or(bad("shorter than a page header"))?;
        let count = u16_at(bytes, 10).ok_or(bad("shorter than a page header"))?;
        let branch = match flags {
            BRANCH => true,
            LEAF => false,
            _ => return Err(bad("neither a branch nor a leaf page")),
        };
        if usize::from(count) * ELEMENT > bytes.len().saturating_sub(PAGE_HEADER) {
            return Err(bad("more elements than the page holds"));
        }
        Ok(Page {
            id,
            bytes,
            branch,
            count,
        })
    }

    /// Whether this is a branch page (its elements name child pages).
    pub fn is_branch(&self) -> bool {
        self.branch
    }

    /// How many elements the page holds.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Element `i`, its key and value checked to lie inside the page.
    pub fn element(&self, i: u16) -> Result<Element<'a>, BoltError> {
        let bad = |why: &'static str| BoltError::BadPage { id: self.id, why };
        if i >= self.count {
            return Err(bad("element index past the count"));
        }
        let at = PAGE_HEADER + usize::from(i) * ELEMENT;
        let field = |off: usize| u32_at(self.bytes, at + off).unwrap_or(0) as usize;
        if self.branch {
            let key = slice(self.bytes, at + field(0), field(4))
                .ok_or(bad("a key lies outside the page"))?;
            let child = u64_at(self.bytes, at + 8).unwrap_or(0);
            return Ok(Element::Branch { key, child });
        }
        let key_at = at
            .checked_add(field(4))
            .ok_or(bad("a key lies outside the page"))?;
        let key = slice(self.bytes, key_at, field(8)).ok_or(bad("a key lies outside the page"))?;
        let value = slice(self.bytes, key_at + key.len(), field(12))
            .ok_or(bad("a value lies outside the page"))?;
        Ok(Element::Leaf {
            flags: field(0) as u32,
            key,
            value,
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A leaf page's bytes (`page_size` of them, or just enough with 0) holding `items`:
    /// (flags, key, value), laid out as bbolt's `node.write` lays them out.
    pub fn leaf(id: u64, page_size: usize, items: &[(u32, &[u8], &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; PAGE_HEADER + items.len() * ELEMENT];
        p[0..8].copy_from_slice(&id.to_le_bytes());
        p[8..10].copy_from_slice(&LEAF.to_le_bytes());
        p[10..12].copy_from_slice(&(items.len() as u16).to_le_bytes());
        for (i, (flags, key, value)) in items.iter().enumerate() {
            let at = PAGE_HEADER + i * ELEMENT;
            let pos = (p.len() - at) as u32;
            p[at..at + 4].copy_from_slice(&flags.to_le_bytes());
            p[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
            p[at + 8..at + 12].copy_from_slice(&(key.len() as u32).to_le_bytes());
            p[at + 12..at + 16].copy_from_slice(&(value.len() as u32).to_le_bytes());
            p.extend_from_slice(key);
            p.extend_from_slice(value);
        }
        if page_size > p.len() {
            p.resize(page_size, 0);
        }
        p
    }

    /// A branch page's bytes holding `children`: (first key, child page).
    pub fn branch(id: u64, page_size: usize, children: &[(&[u8], u64)]) -> Vec<u8> {
        let mut p = vec![0u8; PAGE_HEADER + children.len() * ELEMENT];
        p[0..8].copy_from_slice(&id.to_le_bytes());
        p[8..10].copy_from_slice(&BRANCH.to_le_bytes());
        p[10..12].copy_from_slice(&(children.len() as u16).to_le_bytes());
        for (i, (key, child)) in children.iter().enumerate() {
            let at = PAGE_HEADER + i * ELEMENT;
            let pos = (p.len() - at) as u32;
            p[at..at + 4].copy_from_slice(&pos.to_le_bytes());
            p[at + 4..at + 8].copy_from_slice(&(key.len() as u32).to_le_bytes());
            p[at + 8..at + 16].copy_from_slice(&child.to_le_bytes());
            p.extend_from_slice(key);
        }
        p.resize(page_size.max(p.len()), 0);
        p
    }

    #[test]
    fn elements_are_read_where_their_positions_say() {
        let bytes = leaf(0, 0, &[(0, b"k1", b"v1"), (BUCKET_LEAF, b"k2", b"value2")]);
        let page = Page::over(0, &bytes).unwrap();
        assert_eq!(page.count(), 2);
        assert_eq!(
            page.element(1).unwrap(),
            Element::Leaf {
                flags: BUCKET_LEAF,
                key: b"k2",
                value: b"value2"
            }
        );
        assert!(page.element(2).is_err());
    }

    #[test]
    fn lying_counts_positions_and_overflows_are_errors() {
        let mut bytes = leaf(0, 0, &[(0, b"k", b"v")]);
        bytes[10] = 9; // count 9 in a page of one element
        assert!(Page::over(0, &bytes).is_err());
        bytes[10] = 1;
        bytes[PAGE_HEADER + 12] = 200; // vsize past the end
        let page = Page::over(0, &bytes).unwrap();
        assert!(page.element(0).is_err());

        let mut file = vec![0u8; 3 * 1024];
        let p2 = leaf(2, 1024, &[]);
        file[2048..3072].copy_from_slice(&p2);
        let pages = Pages {
            data: &file,
            page_size: 1024,
            high_water: 3,
        };
        assert!(pages.page(2).is_ok());
        file[2048 + 12] = 1; // one overflow page the file does not have
        let pages = Pages {
            data: &file,
            page_size: 1024,
            high_water: 3,
        };
        assert!(pages.page(2).is_err());
        assert!(pages.page(3).is_err(), "at the high-water mark");
        assert!(pages.page(u64::MAX).is_err());
        assert!(pages.page(1).is_err(), "a meta page");
    }
}
