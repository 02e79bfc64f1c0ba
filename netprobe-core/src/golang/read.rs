//! Bounds-checked little-endian reads over untrusted bytes. Every read returns `None` instead of
//! panicking when the bytes are too short or an offset computation overflows.

/// `len` bytes at `off`; `None` when they are not all inside `data`.
pub(crate) fn bytes(data: &[u8], off: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(off).ok()?;
    let len = usize::try_from(len).ok()?;
    data.get(start..start.checked_add(len)?)
}

/// Everything from `off` to the end; `None` when `off` is past the end.
pub(crate) fn tail(data: &[u8], off: u64) -> Option<&[u8]> {
    data.get(usize::try_from(off).ok()?..)
}

pub(crate) fn u32_le(data: &[u8], off: u64) -> Option<u32> {
    let b = bytes(data, off, 4)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

pub(crate) fn u64_le(data: &[u8], off: u64) -> Option<u64> {
    let b = bytes(data, off, 8)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// An unsigned little-endian word of `size` bytes (4 or 8); `None` for any other size.
pub(crate) fn word_le(data: &[u8], off: u64, size: u8) -> Option<u64> {
    match size {
        4 => u32_le(data, off).map(u64::from),
        8 => u64_le(data, off),
        _ => None,
    }
}

/// The NUL-terminated byte string at `off` (without the NUL); `None` when `off` is out of range
/// or no NUL follows.
pub(crate) fn c_str(data: &[u8], off: u64) -> Option<&[u8]> {
    let rest = tail(data, off)?;
    let nul = memchr::memchr(0, rest)?;
    rest.get(..nul)
}

/// An unsigned LEB128 varint as Go's `encoding/binary.Uvarint` writes it, at the front of `data`:
/// `(value, bytes consumed)`. `None` when it is truncated or does not fit in 64 bits.
pub(crate) fn uvarint(data: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in data.iter().enumerate().take(10) {
        let shift = 7 * i as u32;
        let low = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None; // more than 64 bits
        }
        value |= low << shift;
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let d = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(u32_le(&d, 0), Some(1));
        assert_eq!(u32_le(&d, 4), Some(2));
        assert_eq!(u32_le(&d, 5), None);
        assert_eq!(u64_le(&d, 0), Some(0x2_0000_0001));
        assert_eq!(u64_le(&d, 1), None);
        assert_eq!(bytes(&d, u64::MAX, 2), None);
        assert_eq!(word_le(&d, 0, 3), None);
        assert_eq!(c_str(b"ab\0cd", 0), Some(&b"ab"[..]));
        assert_eq!(c_str(b"ab\0cd", 3), None);
    }

    #[test]
    fn uvarint_like_go() {
        assert_eq!(uvarint(&[0x05]), Some((5, 1)));
        assert_eq!(uvarint(&[0xac, 0x02]), Some((300, 2)));
        assert_eq!(uvarint(&[0x80]), None);
        assert_eq!(uvarint(&[0xff; 10]), None);
        assert_eq!(
            uvarint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Some((u64::MAX, 10))
        );
    }
}
