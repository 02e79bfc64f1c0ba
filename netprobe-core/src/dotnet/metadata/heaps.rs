//! The metadata heaps: `#Strings` (II.24.2.3), `#Blob` (II.24.2.4) and `#GUID` (II.24.2.5),
//! read through the offsets the metadata root gave each stream ([`super::MetadataLayout`]).

use super::compressed::decode_compressed;
use super::tables::Metadata;
use crate::bytes::{cstr_at, slice, us};

/// A string from `#Strings`.
pub type StrRef<'a> = &'a str;

impl<'a> Metadata<'a> {
    /// The same view with the whole `#Strings` heap checked for UTF-8 once (about 0.2 ms for
    /// CoreLib), so that string lookups skip per-string validation: for bulk work such as
    /// naming every method. Unchanged when the heap is not valid UTF-8 as a whole.
    pub fn with_validated_strings(mut self) -> Metadata<'a> {
        let (off, size) = self.layout.strings;
        self.strings_utf8 = slice(self.bytes, off, size).and_then(|h| std::str::from_utf8(h).ok());
        self
    }

    /// The whole `#Strings` heap (II.24.2.3); `None` when it lies outside the metadata.
    pub fn strings_heap(&self) -> Option<&'a [u8]> {
        let (off, size) = self.layout.strings;
        slice(self.bytes, off, size)
    }

    /// The `#Strings` entry at `index` (II.24.2.3); `None` when outside the heap or not UTF-8.
    pub fn string(&self, index: u32) -> Option<StrRef<'a>> {
        if let Some(heap) = self.strings_utf8 {
            let rest = heap.get(us(index)..)?;
            let end = memchr::memchr(0, rest.as_bytes())?;
            return rest.get(..end);
        }
        let (off, size) = self.layout.strings;
        let heap = slice(self.bytes, off, size)?;
        let s = cstr_at(heap, us(index))?;
        std::str::from_utf8(s).ok()
    }

    /// The `#Blob` entry at `index`, without its length prefix (II.24.2.4); `None` when outside.
    pub fn blob(&self, index: u32) -> Option<&'a [u8]> {
        let (off, size) = self.layout.blob;
        let heap = slice(self.bytes, off, size)?;
        let mut p = us(index);
        let len = decode_compressed(heap, &mut p)?;
        slice(heap, p, us(len))
    }

    /// The `#GUID` entry `index` (1-based, II.24.2.5); `None` when 0 or outside.
    pub fn guid(&self, index: u32) -> Option<[u8; 16]> {
        let (off, size) = self.layout.guid;
        let heap = slice(self.bytes, off, size)?;
        let g = slice(heap, us(index.checked_sub(1)?).checked_mul(16)?, 16)?;
        let mut out = [0u8; 16];
        out.copy_from_slice(g);
        Some(out)
    }
}
