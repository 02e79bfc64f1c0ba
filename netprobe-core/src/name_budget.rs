//! A bound on the bytes of names one image may produce.
//!
//! A symbol's name is a reference into the file (an ELF string-table offset, a Go `funcnametab`
//! offset, an ECMA-335 `#Strings` index), and nothing stops many symbols from naming the same long
//! string, or successive suffixes of it: 1,000 ELF symbols naming one 1 MiB string are 1 GiB of
//! names from a 1 MB file (names are copied out of the file into each `Symbol`, and a .NET name is
//! composed from its type's name and its own). Real files stay far below: a string table is part
//! of the file, so its names add up to less than the file, and .NET's composed names to a few
//! times the metadata (CoreLib 8: ~5 MB of names from 12.8 MB). So the names of one image may add
//! up to at most [`limit`]: four times the file plus 64 MiB; past it the image is refused
//! ([`crate::Error::NamesTooLarge`]) before more is copied. The threads that name one .NET
//! listing share one budget ([`SharedNameBudget`]), and no single composed name may pass
//! [`MAX_NAME`].

use crate::error::Error;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The longest single name netprobe composes (a .NET method's `RET Owner::Name(ARGS)`): 1 MiB.
/// A signature names each parameter's type, and a generic instantiation each argument's, so a
/// few bytes of signature blob can name a long type many times over (ECMA-335 II.23.2); .NET
/// 8 CoreLib's longest composed name is 515 bytes. The writers stop appending past it and the
/// method is refused as malformed ([`too_long`]).
pub const MAX_NAME: usize = 1 << 20;

/// Whether a name being composed in `out` has grown past [`MAX_NAME`].
#[inline]
pub fn too_long(out: &str) -> bool {
    out.len() > MAX_NAME
}

/// [`Error::NamesTooLarge`] of `path` for `limit`.
fn refusal(path: &Path, limit: u64) -> Error {
    Error::NamesTooLarge {
        path: path.to_path_buf(),
        limit,
    }
}

/// The bound on the name bytes of a file of `file_len` bytes: `4 * file_len + 64 MiB`.
pub fn limit(file_len: usize) -> u64 {
    (file_len as u64).saturating_mul(4).saturating_add(64 << 20)
}

/// The name bytes left for one image's listing.
#[derive(Clone, Debug)]
pub struct NameBudget {
    limit: u64,
    used: u64,
}

impl NameBudget {
    /// The budget of a file of `file_len` bytes ([`limit`]).
    pub fn for_file(file_len: usize) -> NameBudget {
        NameBudget {
            limit: limit(file_len),
            used: 0,
        }
    }

    /// Counts a name of `len` bytes; `false` once the names so far exceed the bound (and from
    /// then on).
    pub fn take(&mut self, len: usize) -> bool {
        self.used = self.used.saturating_add(len as u64);
        self.used <= self.limit
    }

    /// Whether the names so far exceed the bound.
    pub fn exceeded(&self) -> bool {
        self.used > self.limit
    }

    /// The refusal naming `path`.
    pub fn error(&self, path: &Path) -> Error {
        refusal(path, self.limit)
    }
}

/// [`NameBudget`] shared by the threads that compose one image's names (.NET ReadyToRun
/// listings name their methods on two threads, `dotnet::r2r::resolver`).
#[derive(Debug)]
pub struct SharedNameBudget {
    limit: u64,
    used: AtomicU64,
}

impl SharedNameBudget {
    /// The budget of a file of `file_len` bytes ([`limit`]).
    pub fn for_file(file_len: usize) -> SharedNameBudget {
        SharedNameBudget {
            limit: limit(file_len),
            used: AtomicU64::new(0),
        }
    }

    /// Counts a name of `len` bytes; `false` once the names so far, on every thread, exceed the
    /// bound (and from then on).
    pub fn take(&self, len: usize) -> bool {
        let before = self.used.fetch_add(len as u64, Ordering::Relaxed);
        before.saturating_add(len as u64) <= self.limit
    }

    /// Whether the names so far exceed the bound.
    pub fn exceeded(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.limit
    }

    /// A counter for one thread's names that adds them to this budget 64 KiB at a time (and
    /// when it is finished): one atomic add per name would make the naming threads of a listing
    /// contend for one cache line tens of thousands of times. The bound is overshot by at most
    /// 64 KiB per thread.
    pub fn share(&self) -> BudgetShare<'_> {
        BudgetShare {
            budget: self,
            pending: 0,
        }
    }

    /// The refusal naming `path`.
    pub fn error(&self, path: &Path) -> Error {
        refusal(path, self.limit)
    }
}

/// One thread's part of a [`SharedNameBudget`] ([`SharedNameBudget::share`]).
#[derive(Debug)]
pub struct BudgetShare<'b> {
    budget: &'b SharedNameBudget,
    pending: usize,
}

impl BudgetShare<'_> {
    /// Names counted locally before they are added to the shared budget.
    const BATCH: usize = 64 << 10;

    /// Counts a name of `len` bytes; `false` once the shared budget is exceeded.
    #[inline]
    pub fn take(&mut self, len: usize) -> bool {
        self.pending = self.pending.saturating_add(len);
        self.pending < Self::BATCH || self.finish()
    }

    /// Adds what is counted locally to the shared budget; `false` once it is exceeded.
    pub fn finish(&mut self) -> bool {
        let ok = self.budget.take(self.pending);
        self.pending = 0;
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_by_four_times_the_file_plus_a_constant() {
        let mut b = NameBudget::for_file(1 << 20);
        assert!(b.take(64 << 20));
        assert!(b.take(4 << 20));
        assert!(!b.exceeded());
        assert!(!b.take(1));
        assert!(b.exceeded());
        let msg = b.error(Path::new("/x/app")).to_string();
        assert!(
            msg.starts_with("names of /x/app add up to more than 71303168 bytes"),
            "{msg}"
        );
    }

    #[test]
    fn shared_budget_counts_the_names_of_every_thread() {
        let b = SharedNameBudget::for_file(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..32 {
                        b.take(1 << 20);
                    }
                });
            }
        });
        assert!(!b.exceeded(), "64 MiB is within the bound of an empty file");
        let mut share = b.share();
        assert!(share.take(1), "counted locally, not yet added");
        assert!(!share.finish());
        assert!(b.exceeded());
    }
}
