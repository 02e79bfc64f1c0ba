//! A read-only reader of BoltDB files (bbolt, <https://github.com/etcd-io/bbolt>), the key/value
//! store containerd keeps its metadata in (`ROOT/io.containerd.metadata.v1.bolt/meta.db`) and
//! Podman 4 its state (`GRAPH_ROOT/libpod/bolt_state.db`).
//!
//! One file per on-disk structure, after bbolt's own sources: `meta.rs` (the two meta pages and
//! the snapshot they choose; bbolt `internal/common/meta.go`, `db.go`), `page.rs` (page header,
//! branch and leaf elements, overflow; `internal/common/page.go`) and `bucket.rs` (nested and
//! inline buckets, tree walks; `internal/common/bucket.go`, `bucket.go`, `cursor.go`).
//!
//! Zero-copy: a [`Db`] borrows the file's bytes (a mapping, [`crate::bytes::FileBytes`]) and every
//! key and value is a slice of them. No lock is taken: the runtime holds bbolt's `flock` for as
//! long as it runs. A writer never overwrites the pages of the last committed transaction (it
//! writes new pages, then the meta page), so the newest valid meta names a consistent snapshot;
//! a page that a later commit frees and reuses while we read mostly fails the checks below,
//! and the caller then reads the file once more (`state_file::read_db`).
//!
//! The bytes are hostile input (a file anyone with write access to the runtime's state can
//! shape): every offset is bounds-checked, a page must name itself in its header and lie below
//! the snapshot's high-water mark, trees and bucket nesting deeper than [`MAX_DEPTH`]
//! and pages met twice in one walk are errors. Nothing panics and memory stays proportional to
//! the depth and the pages of one walk.

mod bucket;
mod meta;
mod page;

pub use bucket::{Bucket, Entries, Entry, Value, MAX_DEPTH};

/// Why a file is not a readable BoltDB snapshot. One line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoltError {
    #[error("not a BoltDB file: {0}")]
    NotBolt(&'static str),
    #[error("BoltDB page {id}: {why}")]
    BadPage { id: u64, why: &'static str },
    #[error("BoltDB page {id} is reached twice in one walk (a cycle)")]
    Cycle { id: u64 },
    #[error("BoltDB tree or bucket nesting deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("BoltDB bucket value: {0}")]
    BadBucket(&'static str),
}

/// One consistent snapshot of a BoltDB file: the newest valid meta page and the pages it names.
#[derive(Clone, Copy, Debug)]
pub struct Db<'a> {
    pages: page::Pages<'a>,
    meta: meta::Meta,
}

impl<'a> Db<'a> {
    /// The snapshot the newest valid meta page of `data` describes.
    pub fn open(data: &'a [u8]) -> Result<Db<'a>, BoltError> {
        let meta = meta::newest(data)?;
        Ok(Db {
            pages: page::Pages {
                data,
                page_size: meta.page_size as usize,
                high_water: meta.high_water,
            },
            meta,
        })
    }

    /// The transaction the snapshot is the result of.
    pub fn txid(&self) -> u64 {
        self.meta.txid
    }

    /// The root bucket: its keys are the top-level buckets.
    pub fn root(&self) -> Bucket<'a> {
        Bucket::root(self.pages, self.meta.root)
    }

    /// The bucket at `path` (each name a bucket inside the previous one), `None` when one is
    /// missing or is a plain value.
    pub fn bucket(&self, path: &[&[u8]]) -> Result<Option<Bucket<'a>>, BoltError> {
        let mut at = self.root();
        for name in path {
            match at.bucket(name)? {
                Some(b) => at = b,
                None => return Ok(None),
            }
        }
        Ok(Some(at))
    }
}

#[cfg(test)]
pub(crate) mod tests;
