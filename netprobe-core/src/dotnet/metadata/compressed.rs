//! ECMA-335 II.23.2 compressed integers: the lengths of `#Blob` entries and every count,
//! index and token inside a signature.

use crate::bytes::slice;

/// ECMA-335 II.23.2 compressed unsigned integer (big-endian, 1, 2 or 4 bytes).
pub(crate) fn decode_compressed(data: &[u8], pos: &mut usize) -> Option<u32> {
    let b0 = u32::from(*data.get(*pos)?);
    let (v, n) = if b0 & 0x80 == 0 {
        (b0, 1)
    } else if b0 & 0xc0 == 0x80 {
        ((b0 & 0x3f) << 8 | u32::from(*data.get(*pos + 1)?), 2)
    } else if b0 & 0xe0 == 0xc0 {
        let b = slice(data, *pos + 1, 3)?;
        (
            (b0 & 0x1f) << 24 | u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]),
            4,
        )
    } else {
        return None;
    };
    *pos += n;
    Some(v)
}

/// ECMA-335 II.23.2 compressed signed integer: the unsigned encoding with the sign bit rotated
/// into bit 0, over 7, 14 or 29 bits.
pub(crate) fn decode_compressed_signed(data: &[u8], pos: &mut usize) -> Option<i32> {
    let start = *pos;
    let b0 = *data.get(start)?;
    let raw = decode_compressed(data, pos)?;
    let bits = if b0 & 0x80 == 0 {
        7
    } else if b0 & 0xc0 == 0x80 {
        14
    } else {
        29
    };
    let magnitude = (raw >> 1) as i32;
    Some(if raw & 1 == 0 {
        magnitude
    } else {
        magnitude - (1 << (bits - 1))
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// ECMA-335 II.23.2 compressed unsigned encoding (test-side encoder).
    pub(crate) fn enc_u(v: u32, out: &mut Vec<u8>) {
        if v < 0x80 {
            out.push(v as u8);
        } else if v < 0x4000 {
            out.extend_from_slice(&((v as u16) | 0x8000).to_be_bytes());
        } else {
            out.extend_from_slice(&(v | 0xc000_0000).to_be_bytes());
        }
    }

    /// ECMA-335 II.23.2 compressed signed encoding (test-side encoder): the sign bit rotated
    /// into bit 0 over the smallest width that holds `v`, written in that width's form even
    /// when the rotated value is small (-8129 is `80 7F`, not `7F`, which reads as -1).
    pub(crate) fn enc_s(v: i32, out: &mut Vec<u8>) {
        let u = |mask: u32| ((v as u32) << 1 & mask) | u32::from(v < 0);
        if (-64..64).contains(&v) {
            out.push(u(0x7f) as u8);
        } else if (-8192..8192).contains(&v) {
            out.extend_from_slice(&((u(0x3fff) as u16) | 0x8000).to_be_bytes());
        } else {
            out.extend_from_slice(&(u(0x1fff_ffff) | 0xc000_0000).to_be_bytes());
        }
    }

    proptest! {
        #[test]
        fn compressed_signed_roundtrip(v in -(1i32 << 28)..(1i32 << 28)) {
            let mut b = Vec::new();
            enc_s(v, &mut b);
            let mut p = 0;
            prop_assert_eq!(decode_compressed_signed(&b, &mut p), Some(v));
        }
    }

    #[test]
    fn ecma_compressed_examples() {
        // ECMA-335 II.23.2 examples.
        for (v, bytes) in [
            (0x03u32, &[0x03u8][..]),
            (0x7f, &[0x7f]),
            (0x80, &[0x80, 0x80]),
            (0x2e57, &[0xae, 0x57]),
            (0x3fff, &[0xbf, 0xff]),
            (0x4000, &[0xc0, 0x00, 0x40, 0x00]),
            (0x1fff_ffff, &[0xdf, 0xff, 0xff, 0xff]),
        ] {
            let mut p = 0;
            assert_eq!(decode_compressed(bytes, &mut p), Some(v));
            assert_eq!(p, bytes.len());
        }
        for (v, bytes) in [
            (3i32, &[0x06u8][..]),
            (-3, &[0x7b]),
            (64, &[0x80, 0x80]),
            (-64, &[0x01]),
            (8192, &[0xc0, 0x00, 0x40, 0x00]),
            (-8192, &[0x80, 0x01]),
            (-8129, &[0x80, 0x7f]),
            (-268435393, &[0xc0, 0x00, 0x00, 0x7f]),
            (268435455, &[0xdf, 0xff, 0xff, 0xfe]),
            (-268435456, &[0xc0, 0x00, 0x00, 0x01]),
        ] {
            let mut p = 0;
            assert_eq!(decode_compressed_signed(bytes, &mut p), Some(v), "{v}");
        }
    }
}
