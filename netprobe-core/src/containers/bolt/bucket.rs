//! Buckets: a B+tree of pages holding sorted keys, each with a value or a nested bucket.
//!
//! A nested bucket is a leaf value with `BucketLeafFlag` whose bytes start with bbolt's
//! `InBucket` header, `root u64 · sequence u64` (bbolt `internal/common/bucket.go`). A root of 0
//! marks an inline bucket: its one leaf page follows the header inside the value (bbolt
//! `bucket.go`, `openBucket`: "If this is an inline bucket then reference the inline page").
//!
//! Walking a tree is bounded: a page id met twice in one walk (a cycle, or a page shared by two
//! parents, which bbolt never writes) and a tree or bucket nesting deeper than [`MAX_DEPTH`]
//! are errors, so a hostile file costs at most one visit per page of each bucket walked.

use super::page::{Element, Page, Pages, Pgid, BUCKET_LEAF};
use super::BoltError;
use crate::bytes::u64_at;
use std::collections::HashSet;

/// The deepest B+tree, and the deepest nesting of buckets, accepted. bbolt's trees are a few
/// levels deep (a 4 KiB page holds at least two keys per level, and real files hold a few
/// levels); containerd nests buckets five deep, Podman three.
pub const MAX_DEPTH: usize = 64;
/// bbolt's `BucketHeaderSize`.
const BUCKET_HEADER: usize = 16;

/// A bucket of one snapshot.
#[derive(Clone, Copy, Debug)]
pub struct Bucket<'a> {
    pages: Pages<'a>,
    root: Root<'a>,
    /// How many buckets enclose this one (0 for the root bucket).
    depth: usize,
}

#[derive(Clone, Copy, Debug)]
enum Root<'a> {
    Page(Pgid),
    Inline(Page<'a>),
}

/// A key of a bucket and what it holds.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    pub key: &'a [u8],
    pub value: Value<'a>,
}

/// A plain value or a nested bucket.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Data(&'a [u8]),
    Bucket(Bucket<'a>),
}

impl<'a> Bucket<'a> {
    /// The root bucket, whose tree starts at page `root`.
    pub(super) fn root(pages: Pages<'a>, root: Pgid) -> Bucket<'a> {
        Bucket {
            pages,
            root: Root::Page(root),
            depth: 0,
        }
    }

    /// The bucket a leaf value with the bucket flag holds, nested in `self`.
    fn nested(&self, value: &'a [u8]) -> Result<Bucket<'a>, BoltError> {
        if self.depth + 1 > MAX_DEPTH {
            return Err(BoltError::TooDeep);
        }
        let root = u64_at(value, 0).ok_or(BoltError::BadBucket("shorter than a bucket header"))?;
        let root = if root == 0 {
            let page = Page::over(0, value.get(BUCKET_HEADER..).unwrap_or_default())?;
            if page.is_branch() {
                return Err(BoltError::BadBucket("an inline bucket holds a branch page"));
            }
            Root::Inline(page)
        } else {
            Root::Page(root)
        };
        Ok(Bucket {
            pages: self.pages,
            root,
            depth: self.depth + 1,
        })
    }

    /// What `element` of one of this bucket's leaf pages holds.
    fn entry(&self, flags: u32, key: &'a [u8], value: &'a [u8]) -> Result<Entry<'a>, BoltError> {
        let value = if flags & BUCKET_LEAF != 0 {
            Value::Bucket(self.nested(value)?)
        } else {
            Value::Data(value)
        };
        Ok(Entry { key, value })
    }

    fn root_page(&self) -> Result<Page<'a>, BoltError> {
        match self.root {
            Root::Page(id) => self.pages.page(id),
            Root::Inline(page) => Ok(page),
        }
    }

    /// What `key` holds, found by descending the tree (bbolt `Cursor.search`: at a branch, the
    /// last child whose first key is not above `key`).
    pub fn get(&self, key: &[u8]) -> Result<Option<Value<'a>>, BoltError> {
        let mut page = self.root_page()?;
        let mut seen = HashSet::new();
        for _ in 0..MAX_DEPTH {
            if !page.is_branch() {
                for i in 0..page.count() {
                    if let Element::Leaf {
                        flags,
                        key: k,
                        value,
                    } = page.element(i)?
                    {
                        if k == key {
                            return Ok(Some(self.entry(flags, k, value)?.value));
                        }
                    }
                }
                return Ok(None);
            }
            let mut child = None;
            for i in 0..page.count() {
                if let Element::Branch { key: k, child: c } = page.element(i)? {
                    if child.is_some() && k > key {
                        break;
                    }
                    child = Some(c);
                }
            }
            let Some(child) = child else {
                return Ok(None);
            };
            if !seen.insert(child) {
                return Err(BoltError::Cycle { id: child });
            }
            page = self.pages.page(child)?;
        }
        Err(BoltError::TooDeep)
    }

    /// The nested bucket `key` names; `None` when there is none or `key` holds a plain value.
    pub fn bucket(&self, key: &[u8]) -> Result<Option<Bucket<'a>>, BoltError> {
        Ok(match self.get(key)? {
            Some(Value::Bucket(b)) => Some(b),
            _ => None,
        })
    }

    /// The plain value `key` holds; `None` when there is none or `key` names a bucket.
    pub fn value(&self, key: &[u8]) -> Result<Option<&'a [u8]>, BoltError> {
        Ok(match self.get(key)? {
            Some(Value::Data(v)) => Some(v),
            _ => None,
        })
    }

    /// Every entry in key order; after an error the iteration ends.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            bucket: *self,
            stack: Vec::new(),
            seen: HashSet::new(),
            started: false,
            done: false,
        }
    }
}

/// The entries of a bucket, walking its tree depth first ([`Bucket::entries`]).
pub struct Entries<'a> {
    bucket: Bucket<'a>,
    /// The pages from the root down to the current leaf, each with its next element.
    stack: Vec<(Page<'a>, u16)>,
    seen: HashSet<Pgid>,
    started: bool,
    done: bool,
}

impl<'a> Entries<'a> {
    fn push(&mut self, page: Page<'a>) -> Result<(), BoltError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(BoltError::TooDeep);
        }
        if page.id != 0 && !self.seen.insert(page.id) {
            return Err(BoltError::Cycle { id: page.id });
        }
        self.stack.push((page, 0));
        Ok(())
    }

    fn step(&mut self) -> Result<Option<Entry<'a>>, BoltError> {
        if !self.started {
            self.started = true;
            let root = self.bucket.root_page()?;
            self.push(root)?;
        }
        while let Some((page, next)) = self.stack.last_mut() {
            let (page, i) = (*page, *next);
            if i >= page.count() {
                self.stack.pop();
                continue;
            }
            *next += 1;
            match page.element(i)? {
                Element::Branch { child, .. } => {
                    let child = self.bucket.pages.page(child)?;
                    self.push(child)?;
                }
                Element::Leaf { flags, key, value } => {
                    return self.bucket.entry(flags, key, value).map(Some);
                }
            }
        }
        Ok(None)
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, BoltError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step();
        if !matches!(step, Ok(Some(_))) {
            self.done = true;
        }
        step.transpose()
    }
}
