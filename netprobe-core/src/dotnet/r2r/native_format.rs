//! NativeFormat, the encoding ReadyToRun uses for its lookup structures (dotnet/runtime
//! `docs/design/coreclr/botr/readytorun-format.md`, "Native Format"): variable-length integers,
//! the sparse `NativeArray` (MethodDefEntryPoints) and the `NativeHashtable`
//! (InstanceMethodEntryPoints).
//!
//! Offsets are positions in one byte slice (the whole image file, as the runtime reads it);
//! every read is bounds-checked and a malformed structure yields `None`.

use crate::bytes::{u16_at, u32_at, u8_at};

/// Decodes a NativeFormat unsigned integer at `pos` (readytorun-format.md "Integer encoding"):
/// the low bits of the first byte say how many bytes follow (`x0`: 1 byte, `x01`: 2, `x011`: 3,
/// `x0111`: 4, `01111`: a full u32 follows). Returns the value and the position after it; `None`
/// when the bytes run out or the first byte has the reserved pattern `xxx11111`.
pub fn decode_unsigned(data: &[u8], pos: usize) -> Option<(u32, usize)> {
    let b0 = u32::from(u8_at(data, pos)?);
    let b = |i: usize| u8_at(data, pos + i).map(u32::from);
    if b0 & 1 == 0 {
        Some((b0 >> 1, pos + 1))
    } else if b0 & 2 == 0 {
        Some(((b0 | b(1)? << 8) >> 2, pos + 2))
    } else if b0 & 4 == 0 {
        Some(((b0 | b(1)? << 8 | b(2)? << 16) >> 3, pos + 3))
    } else if b0 & 8 == 0 {
        Some(((b0 | b(1)? << 8 | b(2)? << 16 | b(3)? << 24) >> 4, pos + 4))
    } else if b0 & 16 == 0 {
        Some((u32_at(data, pos + 1)?, pos + 5))
    } else {
        None
    }
}

/// Decodes a NativeFormat signed integer at `pos`: the unsigned layout, sign-extended from 7, 14,
/// 21 or 28 bits (or a full i32). Returns the value and the next position; `None` as for
/// [`decode_unsigned`].
pub fn decode_signed(data: &[u8], pos: usize) -> Option<(i32, usize)> {
    let b0 = u32::from(u8_at(data, pos)?);
    let b = |i: usize| u8_at(data, pos + i).map(u32::from);
    // Put the payload in the top bits of an i32, then shift right arithmetically.
    if b0 & 1 == 0 {
        Some((((b0 << 24) as i32) >> 25, pos + 1))
    } else if b0 & 2 == 0 {
        Some(((((b0 | b(1)? << 8) << 16) as i32) >> 18, pos + 2))
    } else if b0 & 4 == 0 {
        Some((
            (((b0 | b(1)? << 8 | b(2)? << 16) << 8) as i32) >> 11,
            pos + 3,
        ))
    } else if b0 & 8 == 0 {
        Some((
            ((b0 | b(1)? << 8 | b(2)? << 16 | b(3)? << 24) as i32) >> 4,
            pos + 4,
        ))
    } else if b0 & 16 == 0 {
        Some((u32_at(data, pos + 1)? as i32, pos + 5))
    } else {
        None
    }
}

/// Encodes `v` the way [`decode_unsigned`] reads it (shortest form). Used by tests and by
/// synthetic images.
pub fn encode_unsigned(v: u32, out: &mut Vec<u8>) {
    if v < 1 << 7 {
        out.push((v << 1) as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v << 2) | 1).to_le_bytes()[..2]);
    } else if v < 1 << 21 {
        out.extend_from_slice(&((v << 3) | 3).to_le_bytes()[..3]);
    } else if v < 1 << 28 {
        out.extend_from_slice(&((v << 4) | 7).to_le_bytes());
    } else {
        out.push(0x0f);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Encodes `v` the way [`decode_signed`] reads it (shortest form).
pub fn encode_signed(v: i32, out: &mut Vec<u8>) {
    let fits = |bits: u32| v >= -(1i32 << (bits - 1)) && v < (1i32 << (bits - 1));
    let u = v as u32;
    if fits(7) {
        out.push((u << 1) as u8);
    } else if fits(14) {
        out.extend_from_slice(&((u << 2) | 1).to_le_bytes()[..2]);
    } else if fits(21) {
        out.extend_from_slice(&((u << 3) | 3).to_le_bytes()[..3]);
    } else if fits(28) {
        out.extend_from_slice(&((u << 4) | 7).to_le_bytes());
    } else {
        out.push(0x0f);
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// Elements per block of a [`NativeArray`] (readytorun-format.md "Sparse Array").
const BLOCK_SIZE: u32 = 16;

/// A NativeFormat sparse array: a header (count << 2 | entry index size), a block index with one
/// offset per 16 elements, and per block a 4-level binary tree leading to each present element.
#[derive(Clone, Copy, Debug)]
pub struct NativeArray {
    base: usize,
    count: u32,
    entry_index_size: u8,
}

impl NativeArray {
    /// Reads the header at `pos`. `None` when it is cut short or names an entry index size of 3.
    pub fn parse(data: &[u8], pos: usize) -> Option<NativeArray> {
        let (header, base) = decode_unsigned(data, pos)?;
        let entry_index_size = (header & 3) as u8;
        if entry_index_size > 2 {
            return None;
        }
        // The block offsets (one per 16 slots, 1 << entry_index_size bytes each) follow the
        // header (NativeArray::GetElement in src/coreclr/vm/nativeformatreader.h): a count whose
        // block table does not fit in `data` is no array, and would have callers walk up to
        // 2^30 slots of nothing.
        let blocks = (header >> 2).div_ceil(BLOCK_SIZE) as usize;
        if base.checked_add(blocks << entry_index_size)? > data.len() {
            return None;
        }
        Some(NativeArray {
            base,
            count: header >> 2,
            entry_index_size,
        })
    }

    /// Number of slots (present or not).
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether the array has no slots.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The position of element `index`'s data. `None` when the element is absent, `index` is out
    /// of range, or the tree is malformed.
    pub fn get(&self, data: &[u8], index: u32) -> Option<usize> {
        if index >= self.count {
            return None;
        }
        let block = (index / BLOCK_SIZE) as usize;
        let block_offset = match self.entry_index_size {
            0 => u32::from(u8_at(data, self.base + block)?),
            1 => u32::from(u16_at(data, self.base + 2 * block)?),
            _ => u32_at(data, self.base + 4 * block)?,
        };
        let mut pos = self.base.checked_add(block_offset as usize)?;
        let mut bit = BLOCK_SIZE >> 1;
        while bit > 0 {
            let (node, next) = decode_unsigned(data, pos)?;
            if index & bit != 0 {
                // Higher-index child: at a relative offset stored in the node.
                if node & 2 != 0 {
                    pos = pos.checked_add((node >> 2) as usize)?;
                    bit >>= 1;
                    continue;
                }
            } else if node & 1 != 0 {
                // Lower-index child: right after the node.
                pos = next;
                bit >>= 1;
                continue;
            }
            // No child that way. A node without children is a leaf that stands for the single
            // element of its subtree whose low bits it stores.
            if node & 3 == 0 && (node >> 2) == index & (BLOCK_SIZE - 1) {
                return Some(next);
            }
            return None;
        }
        Some(pos)
    }
}

/// A NativeFormat hashtable (readytorun-format.md "Hashtable"): a header byte
/// (log2 buckets << 2 | entry size), `buckets + 1` bucket offsets, then per bucket entries of one
/// low-hash byte plus a signed offset (relative to itself) to the entry's data.
#[derive(Clone, Copy, Debug)]
pub struct NativeHashtable {
    base: usize,
    buckets: u32,
    entry_index_size: u8,
    end: usize,
}

impl NativeHashtable {
    /// Reads the header at `pos`; `end` bounds the table (section end). `None` when malformed.
    pub fn parse(data: &[u8], pos: usize, end: usize) -> Option<NativeHashtable> {
        let header = u8_at(data, pos)?;
        let shift = u32::from(header >> 2);
        let entry_index_size = header & 3;
        if shift > 31 || entry_index_size > 2 {
            return None;
        }
        Some(NativeHashtable {
            base: pos + 1,
            buckets: 1 << shift,
            entry_index_size,
            end: end.min(data.len()),
        })
    }

    fn bucket_offset(&self, data: &[u8], i: u32) -> Option<usize> {
        let i = i as usize;
        let off = match self.entry_index_size {
            0 => u32::from(u8_at(data, self.base + i)?),
            1 => u32::from(u16_at(data, self.base.checked_add(2 * i)?)?),
            _ => u32_at(data, self.base.checked_add(4 * i)?)?,
        };
        self.base.checked_add(off as usize)
    }

    /// Every entry as `(low hash byte, position of the entry's data)`, bucket by bucket.
    /// `Err(what)` at the first malformed bucket or entry.
    pub fn entries(&self, data: &[u8]) -> Result<Vec<(u8, usize)>, String> {
        let mut out = Vec::new();
        let mut start = self
            .bucket_offset(data, 0)
            .ok_or("hashtable bucket table cut short")?;
        for b in 0..self.buckets {
            let end = self
                .bucket_offset(data, b + 1)
                .ok_or("hashtable bucket table cut short")?;
            if end > self.end || start > end {
                return Err("hashtable bucket outside its section".into());
            }
            let mut pos = start;
            while pos < end {
                let low = u8_at(data, pos).ok_or("hashtable entry cut short")?;
                let (delta, next) =
                    decode_signed(data, pos + 1).ok_or("hashtable entry cut short")?;
                let target = (pos as i64 + 1 + i64::from(delta)) as usize;
                if target >= data.len() {
                    return Err("hashtable entry points outside the image".into());
                }
                out.push((low, target));
                pos = next;
            }
            start = end;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doc_examples() {
        // readytorun-format.md: 12 -> 0x18; 1000 -> 0xa1 0x0f.
        let mut v = Vec::new();
        encode_unsigned(12, &mut v);
        assert_eq!(v, [0x18]);
        v.clear();
        encode_unsigned(1000, &mut v);
        assert_eq!(v, [0xa1, 0x0f]);
        assert_eq!(decode_unsigned(&[0xa1, 0x0f], 0), Some((1000, 2)));
        assert_eq!(decode_unsigned(&[0xa1], 0), None);
        assert_eq!(decode_unsigned(&[0x1f, 0, 0, 0, 0], 0), None);
    }

    /// A NativeArray with one element per slot, built the way the format describes: one block,
    /// full binary tree. Each data item is the byte `index`.
    fn build_tree(present: &[u32], lo: u32, bit: u32, out: &mut Vec<u8>) {
        // Leaf level: emit the data.
        if bit == 0 {
            encode_unsigned(lo, out);
            return;
        }
        let left: Vec<u32> = present.iter().copied().filter(|&i| i & bit == 0).collect();
        let right: Vec<u32> = present.iter().copied().filter(|&i| i & bit != 0).collect();
        let mut left_bytes = Vec::new();
        if !left.is_empty() {
            build_tree(&left, lo, bit >> 1, &mut left_bytes);
        }
        let mut right_bytes = Vec::new();
        if !right.is_empty() {
            build_tree(&right, lo | bit, bit >> 1, &mut right_bytes);
        }
        // The node's offset to the right child is relative to the node itself; the node's own
        // size depends on that offset, so settle it by trying sizes.
        let flags = u32::from(!left.is_empty()) | u32::from(!right.is_empty()) << 1;
        let mut node = Vec::new();
        for _ in 0..3 {
            let rel = node.len().max(1) + left_bytes.len();
            node.clear();
            encode_unsigned(
                flags
                    | if right.is_empty() {
                        0
                    } else {
                        (rel as u32) << 2
                    },
                &mut node,
            );
        }
        out.extend_from_slice(&node);
        out.extend_from_slice(&left_bytes);
        out.extend_from_slice(&right_bytes);
    }

    fn build_array(count: u32, present: &[u32]) -> Vec<u8> {
        let blocks = count.div_ceil(BLOCK_SIZE);
        let mut block_data: Vec<Vec<u8>> = Vec::new();
        for b in 0..blocks {
            let in_block: Vec<u32> = present
                .iter()
                .copied()
                .filter(|&i| i / BLOCK_SIZE == b)
                .map(|i| i % BLOCK_SIZE)
                .collect();
            let mut bytes = Vec::new();
            if in_block.is_empty() {
                // Nothing present: a node with only a lower-index child, which is the leaf for
                // in-block index 15. Queries in the upper half find no child; queries in the lower
                // half reach a leaf that matches only 15, which is not in the lower half. (A lone
                // leaf 0x3c would stand for index 15 itself: proptest found count = 16.)
                encode_unsigned(1, &mut bytes);
                encode_unsigned(15 << 2, &mut bytes);
            } else {
                let mut t = Vec::new();
                build_tree(&in_block, 0, BLOCK_SIZE >> 1, &mut t);
                // Data values are the in-block index; rewrite them to the global index below.
                bytes = t;
            }
            block_data.push(bytes);
        }
        let mut out = Vec::new();
        encode_unsigned(count << 2 | 2, &mut out); // 4-byte block offsets
        let index_len = 4 * blocks as usize;
        let mut offset = index_len;
        let mut index = Vec::new();
        for d in &block_data {
            index.extend_from_slice(&(offset as u32).to_le_bytes());
            offset += d.len();
        }
        out.extend_from_slice(&index);
        for d in block_data {
            out.extend_from_slice(&d);
        }
        out
    }

    /// The case proptest found: a whole block (16 slots) with nothing present.
    #[test]
    fn full_block_with_nothing_present() {
        let bytes = build_array(16, &[]);
        let arr = NativeArray::parse(&bytes, 0).unwrap();
        assert!((0..16).all(|i| arr.get(&bytes, i).is_none()));
    }

    /// Found by the `bundle` fuzz target: a header claiming 2^30 slots in a few bytes made
    /// METHODDEF_ENTRYPOINTS readers walk every slot (minutes of work for a 26 KB input).
    #[test]
    fn a_count_whose_block_table_does_not_fit_is_no_array() {
        let mut bytes = Vec::new();
        encode_unsigned(((1 << 30) - 1) << 2, &mut bytes);
        bytes.extend_from_slice(&[0; 64]);
        assert!(NativeArray::parse(&bytes, 0).is_none());
        // The same count with its whole block table present is an array.
        let mut bytes = Vec::new();
        encode_unsigned(32 << 2, &mut bytes);
        bytes.extend_from_slice(&[0; 2]);
        assert_eq!(NativeArray::parse(&bytes, 0).map(|a| a.len()), Some(32));
        assert!(NativeArray::parse(&bytes[..2], 0).is_none());
    }

    proptest! {
        #[test]
        fn unsigned_roundtrip(v in any::<u32>()) {
            let mut b = Vec::new();
            encode_unsigned(v, &mut b);
            prop_assert_eq!(decode_unsigned(&b, 0), Some((v, b.len())));
        }

        #[test]
        fn signed_roundtrip(v in any::<i32>()) {
            let mut b = Vec::new();
            encode_signed(v, &mut b);
            prop_assert_eq!(decode_signed(&b, 0), Some((v, b.len())));
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..8), pos in 0usize..10) {
            let _ = decode_unsigned(&bytes, pos);
            let _ = decode_signed(&bytes, pos);
        }

        /// Every present element is found (its data is its in-block index) and no absent one.
        #[test]
        fn sparse_array_finds_exactly_the_present(count in 1u32..100, seed in proptest::collection::vec(any::<bool>(), 100)) {
            let present: Vec<u32> = (0..count).filter(|&i| seed[i as usize]).collect();
            let bytes = build_array(count, &present);
            let arr = NativeArray::parse(&bytes, 0).unwrap();
            prop_assert_eq!(arr.len(), count);
            for i in 0..count {
                let got = arr.get(&bytes, i).map(|p| decode_unsigned(&bytes, p).unwrap().0);
                if present.contains(&i) {
                    prop_assert_eq!(got, Some(i % BLOCK_SIZE));
                } else {
                    prop_assert_eq!(got, None);
                }
            }
            prop_assert_eq!(arr.get(&bytes, count), None);
        }

        #[test]
        fn sparse_array_on_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), idx in 0u32..1000) {
            if let Some(a) = NativeArray::parse(&bytes, 0) {
                let _ = a.get(&bytes, idx);
            }
            if let Some(h) = NativeHashtable::parse(&bytes, 0, bytes.len()) {
                let _ = h.entries(&bytes);
            }
        }
    }

    #[test]
    fn hashtable_doc_example() {
        // readytorun-format.md "Hashtable": 2 buckets with 1-byte cells holding P,Q,R | S.
        // Bucket cells are relative to the byte after the header (as the runtime's
        // NativeHashtable reads them); each entry is a low-hash byte and a signed offset to the
        // object, relative to the offset's own position.
        let mut data = vec![0xeeu8]; // a byte before the table: positions are image-wide
        data.extend_from_slice(&[0x04, 3, 9, 11]); // header, bucket 0, bucket 1, end
        let objects_at = data.len() + 8;
        for (i, low) in [0x31u8, 0x32, 0x34, 0x38].into_iter().enumerate() {
            data.push(low);
            let here = data.len();
            data.push(((objects_at + i - here) as u8) << 1);
        }
        data.extend_from_slice(b"PQRS");
        let h = NativeHashtable::parse(&data, 1, data.len()).unwrap();
        let entries = h.entries(&data).unwrap();
        let got: Vec<(u8, u8)> = entries.iter().map(|&(l, p)| (l, data[p])).collect();
        assert_eq!(
            got,
            vec![(0x31, b'P'), (0x32, b'Q'), (0x34, b'R'), (0x38, b'S')]
        );
    }
}
