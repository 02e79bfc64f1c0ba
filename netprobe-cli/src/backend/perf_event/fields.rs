//! Native-endian fields of a perf record, bounds-checked: `None` when the record is cut short
//! (the record decoders of this folder read every field through these).

/// The u64 at `at` of `b`, if it is all there.
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(bytes.try_into().ok()?))
}

/// The u32 at `at` of `b`, if it is all there.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

/// The u16 at `at` of `b`, if it is all there.
pub fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let bytes = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes(bytes.try_into().ok()?))
}
