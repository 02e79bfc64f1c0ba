//! Bounds-checked little-endian reads over untrusted bytes.
//!
//! Every reader returns `None` when the requested bytes are not all inside the slice, so a parser
//! built on them cannot index out of range; offsets are `usize` and every sum is checked.

/// `len` bytes at `offset`; `None` when any of them lies outside `data`.
pub(crate) fn slice(data: &[u8], offset: usize, len: usize) -> Option<&[u8]> {
    data.get(offset..offset.checked_add(len)?)
}

pub(crate) fn u8_at(data: &[u8], offset: usize) -> Option<u8> {
    data.get(offset).copied()
}

pub(crate) fn u16_at(data: &[u8], offset: usize) -> Option<u16> {
    let b = slice(data, offset, 2)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

pub(crate) fn u32_at(data: &[u8], offset: usize) -> Option<u32> {
    let b = slice(data, offset, 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn u64_at(data: &[u8], offset: usize) -> Option<u64> {
    let b = slice(data, offset, 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// The NUL-terminated string starting at `offset` (without the NUL); `None` when no NUL follows
/// inside `data` or `offset` is outside it. Not checked for UTF-8: callers decide.
pub(crate) fn cstr_at(data: &[u8], offset: usize) -> Option<&[u8]> {
    let rest = data.get(offset..)?;
    let end = memchr::memchr(0, rest)?;
    rest.get(..end)
}

/// A `usize` from a `u32` file field (lossless on the 64-bit targets netprobe supports).
pub(crate) fn us(v: u32) -> usize {
    v as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stay_inside() {
        let d = [1u8, 2, 3, 4, 0, 5];
        assert_eq!(u16_at(&d, 0), Some(0x0201));
        assert_eq!(u32_at(&d, 0), Some(0x0403_0201));
        assert_eq!(u32_at(&d, 3), None);
        assert_eq!(u64_at(&d, 0), None);
        assert_eq!(slice(&d, usize::MAX, 2), None);
        assert_eq!(cstr_at(&d, 2), Some(&[3u8, 4][..]));
        assert_eq!(cstr_at(&d, 5), None);
        assert_eq!(cstr_at(&d, 9), None);
    }
}
