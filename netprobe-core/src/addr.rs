//! Address newtypes. Each says *what* an address is, so a formula cannot mix them up.
//!
//! - [`FileOffset`]: byte offset into the file on disk; what `uprobe_events` wants after `PATH:`
//!   (kernel `Documentation/trace/uprobetracer.rst`: "OFFSET: Offset where the probe is inserted").
//! - [`VirtAddr`]: link-time virtual address inside an ELF file (`st_value`, `p_vaddr`, `sh_addr`).
//! - [`Rva`]: relative virtual address inside a PE image (offset from the image base once the
//!   loader has laid out the sections; ECMA-335 II.25 / PE-COFF spec).
//! - [`ImageBase`]: the runtime address at which an image's first byte (file offset 0) is mapped.
//! - [`RuntimeAddr`]: any address in a live process's address space.

use serde::Serialize;
use std::fmt;

macro_rules! hex_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u64);

        /// Serialized as a `"0x..."` string: JSON numbers lose precision above 2^53 in most
        /// consumers, and addresses are read in hex.
        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}

hex_newtype!(
    /// Byte offset into a file on disk.
    FileOffset
);
hex_newtype!(
    /// Link-time virtual address in an ELF file.
    VirtAddr
);
hex_newtype!(
    /// Relative virtual address in a PE image.
    Rva
);
hex_newtype!(
    /// Runtime address of an image's byte at file offset 0 (PE: the image's RVA 0).
    ImageBase
);
hex_newtype!(
    /// An address in a live process.
    RuntimeAddr
);

/// A set of addresses, hashed by one multiplication (Fibonacci hashing: Knuth, TAOCP vol. 3,
/// 6.4) instead of the standard library's SipHash: addresses come from the file being read, not
/// from an adversary who could choose them to collide (at worst a hostile file makes the set
/// slow, never wrong), and a listing asks it 100,000 times.
pub type AddressSet = std::collections::HashSet<u64, std::hash::BuildHasherDefault<AddressHasher>>;

/// The hasher of [`AddressSet`]: the last `u64` written, times 2^64 / golden ratio, rotated so
/// that the product's high bits (which depend on every bit of the address) come out low as well:
/// the standard library's table picks a bucket by the low bits, and the low bits of the product
/// of a 32-byte-aligned address are all zero (Go aligns its functions so).
#[derive(Default, Clone, Copy, Debug)]
pub struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0.rotate_left(32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The set answers as the standard library's does, for aligned, clustered and
        /// arbitrary addresses alike.
        #[test]
        fn address_set_is_a_set(
            values in proptest::collection::vec(any::<u64>(), 0..300),
            base in any::<u64>(),
            probes in proptest::collection::vec(any::<u64>(), 0..100),
        ) {
            let aligned: Vec<u64> = values.iter().map(|v| base.wrapping_add((v % 4096) * 32)).collect();
            for list in [&values, &aligned] {
                let ours: AddressSet = list.iter().copied().collect();
                let std_set: std::collections::HashSet<u64> = list.iter().copied().collect();
                prop_assert_eq!(ours.len(), std_set.len());
                for p in list.iter().chain(&probes) {
                    prop_assert_eq!(ours.contains(p), std_set.contains(p));
                }
            }
        }
    }
}
