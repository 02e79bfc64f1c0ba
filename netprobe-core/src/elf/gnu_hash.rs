//! Finding `.dynsym` entries by name through `.gnu.hash`, the table the dynamic linker itself
//! looks names up in, instead of reading every entry (Debian's dockerd: 170,000 entries, 6 MB of
//! names, for one name).
//!
//! Format (no gABI text exists; Jakub Jelinek, "GNU_HASH section format", binutils list,
//! 2006-10-31, and glibc `elf/dl-lookup.c`): four `u32` words `nbuckets`, `symoffset`,
//! `bloom_size`, `bloom_shift`; `bloom_size` Bloom filter words of the ELF class's size;
//! `nbuckets` `u32` bucket heads; then one `u32` per `.dynsym` entry from `symoffset` on: the
//! entry's name hash with bit 0 replaced by "last of its chain". Entries `symoffset..` are sorted
//! by `hash % nbuckets`, and a bucket holds the index of its first entry (0 for none). Entries
//! before `symoffset` cannot be looked up (undefined and local symbols); callers read those
//! themselves. The hash is `dl_new_hash`: `h = 5381; h = h * 33 + byte` over the name.

/// `SHT_GNU_HASH` (binutils `include/elf/common.h`).
pub const SHT_GNU_HASH: u32 = 0x6fff_fff6;

/// The hash `.gnu.hash` files names under (`dl_new_hash`).
pub fn name_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &b| {
        h.wrapping_mul(33).wrapping_add(u32::from(b))
    })
}

/// The `index`th `u32` of `bytes` in the file's byte order; `None` when it is cut off. The
/// table's words follow the file's data encoding (`EI_DATA`), unlike [`crate::bytes::u32_at`]'s
/// fixed little-endian reads.
fn u32_word(bytes: &[u8], index: usize, little_endian: bool) -> Option<u32> {
    let at = index.checked_mul(4)?;
    let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if little_endian {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

/// A `.gnu.hash` section over a `.dynsym` of `symbols` entries.
#[derive(Clone, Copy, Debug)]
pub struct GnuHash<'a> {
    symoffset: u32,
    buckets: &'a [u8],
    chain: &'a [u8],
    little_endian: bool,
}

impl<'a> GnuHash<'a> {
    /// Reads the section's header and places its arrays; `word_size` is 8 for ELF64, 4 for
    /// ELF32. `None` when the header or arrays are cut off, there are no buckets, or
    /// `symoffset` exceeds `symbols` (a table that cannot describe this `.dynsym`).
    pub fn parse(
        section: &'a [u8],
        word_size: usize,
        little_endian: bool,
        symbols: usize,
    ) -> Option<GnuHash<'a>> {
        let word = |index: usize| u32_word(section, index, little_endian);
        let (nbuckets, symoffset, bloom_size) = (word(0)?, word(1)?, word(2)?);
        if nbuckets == 0 || symoffset as usize > symbols {
            return None;
        }
        let buckets_at = (bloom_size as usize)
            .checked_mul(word_size)?
            .checked_add(16)?;
        let chain_at = buckets_at.checked_add((nbuckets as usize).checked_mul(4)?)?;
        let chain_len = (symbols - symoffset as usize).checked_mul(4)?;
        Some(GnuHash {
            symoffset,
            buckets: section.get(buckets_at..chain_at)?,
            chain: section.get(chain_at..chain_at.checked_add(chain_len)?)?,
            little_endian,
        })
    }

    /// The index of the first `.dynsym` entry the table covers (`symoffset`); entries before it
    /// cannot be found through [`GnuHash::candidates`].
    pub fn first_hashed(&self) -> usize {
        self.symoffset as usize
    }

    /// The `.dynsym` indices (ascending, all at least [`GnuHash::first_hashed`]) of the entries
    /// whose name has `name`'s hash: every entry named `name` from `symoffset` on is among them
    /// (the caller compares the names). Empty when the name's bucket is empty or points before
    /// `symoffset`; a chain that runs off the table ends there.
    pub fn candidates(&self, name: &[u8]) -> Vec<usize> {
        let hash = name_hash(name);
        let nbuckets = (self.buckets.len() / 4) as u32;
        let mut out = Vec::new();
        let Some(first) = u32_word(self.buckets, (hash % nbuckets) as usize, self.little_endian)
        else {
            return out;
        };
        if first < self.symoffset {
            return out;
        }
        let mut index = first as usize;
        while let Some(value) = u32_word(
            self.chain,
            index - self.symoffset as usize,
            self.little_endian,
        ) {
            if (value ^ hash) >> 1 == 0 {
                out.push(index);
            }
            if value & 1 == 1 {
                break;
            }
            index += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A `.gnu.hash` section for `names` (the `.dynsym` entries from `symoffset` on, which the
    /// caller has sorted by bucket) as a linker writes it: no Bloom words needed for lookups.
    fn table(symoffset: u32, nbuckets: u32, names: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for w in [nbuckets, symoffset, 1, 6] {
            out.extend(w.to_le_bytes());
        }
        out.extend(u64::MAX.to_le_bytes());
        let bucket_of = |n: &[u8]| name_hash(n) % nbuckets;
        for b in 0..nbuckets {
            let first = names.iter().position(|n| bucket_of(n) == b);
            out.extend(first.map_or(0, |i| i as u32 + symoffset).to_le_bytes());
        }
        for (i, n) in names.iter().enumerate() {
            let last = names
                .get(i + 1)
                .is_none_or(|m| bucket_of(m) != bucket_of(n));
            out.extend(((name_hash(n) & !1) | u32::from(last)).to_le_bytes());
        }
        out
    }

    #[test]
    fn hash_values_of_the_format_notes() {
        // Published with the format (flapenguin.me, "ELF: symbol lookup via DT_GNU_HASH").
        assert_eq!(name_hash(b""), 0x0000_1505);
        assert_eq!(name_hash(b"printf"), 0x156b_2bb8);
        assert_eq!(name_hash(b"exit"), 0x7c96_7e3f);
        assert_eq!(name_hash(b"syscall"), 0xbac2_12a0);
    }

    proptest! {
        /// Every name of the table is found at its index (among its hash's candidates), every
        /// candidate has the name's hash, and indices before `symoffset` are never returned.
        #[test]
        fn every_name_is_among_its_candidates(
            mut names in proptest::collection::vec("[a-z._]{0,6}", 1..60)
                .prop_map(|v| v.into_iter().map(String::into_bytes).collect::<Vec<_>>()),
            nbuckets in 1u32..17,
            symoffset in 0u32..5,
            probe in "[a-z._]{0,6}",
        ) {
            names.sort_by_key(|n| name_hash(n) % nbuckets);
            let bytes = table(symoffset, nbuckets, &names);
            let total = names.len() + symoffset as usize;
            let t = GnuHash::parse(&bytes, 8, true, total).unwrap();
            prop_assert_eq!(t.first_hashed(), symoffset as usize);
            for (i, n) in names.iter().enumerate() {
                prop_assert!(t.candidates(n).contains(&(i + symoffset as usize)));
            }
            let found = t.candidates(probe.as_bytes());
            let expected: Vec<usize> = names
                .iter()
                .enumerate()
                .filter(|(_, n)| {
                    let (h, p) = (name_hash(n), name_hash(probe.as_bytes()));
                    h % nbuckets == p % nbuckets && h >> 1 == p >> 1
                })
                .map(|(i, _)| i + symoffset as usize)
                .collect();
            prop_assert_eq!(found, expected);
        }

        /// Hostile bytes: parsing and looking up never panic, and candidates stay inside the
        /// `.dynsym` the table was parsed for.
        #[test]
        fn hostile_tables_stay_in_bounds(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            symbols in 0usize..50,
            name in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            if let Some(t) = GnuHash::parse(&bytes, 8, true, symbols) {
                for i in t.candidates(&name) {
                    prop_assert!(i >= t.first_hashed() && i < symbols);
                }
            }
        }
    }
}
