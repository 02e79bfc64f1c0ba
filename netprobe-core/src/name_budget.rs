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
//! ([`crate::Error::NamesTooLarge`]) before more is copied.

use crate::error::Error;
use std::path::Path;

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
        Error::NamesTooLarge {
            path: path.to_path_buf(),
            limit: self.limit,
        }
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
}
