//! Decoding what the ring buffer of a per-task probe event holds (`struct perf_event_header` and
//! the record bodies of `include/uapi/linux/perf_event.h`), for the attribute
//! [`super::events`] opens: `PERF_SAMPLE_TID | TIME | RAW`, plus `CALLCHAIN | REGS_USER |
//! STACK_USER` when the plan records user stacks, no `sample_id_all`. The `RAW` bytes are the trace event's own record,
//! laid out as its tracefs `format` file says (kernel `perf_trace_buf_submit` hands perf the
//! buffer the event would have written to tracefs). Bounds-checked: a malformed record ends the
//! walk and is counted, never panics.

use crate::backend::perf_event::record::{PERF_CONTEXT_MAX, PERF_RECORD_LOST, PERF_RECORD_SAMPLE};
use crate::backend::perf_event::sideband::{self, Sideband};

/// One probe hit as perf delivered it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample<'a> {
    /// The process and thread, as netprobe's pid namespace names them (perf translates ids into
    /// the namespace of the event's owner: `perf_event_pid` in `kernel/events/core.c`).
    pub pid: u32,
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds (`use_clockid`).
    pub time: u64,
    /// User return addresses, innermost first (the probed instruction, then each caller), when
    /// the stack was asked for; context markers (`PERF_CONTEXT_USER`) are left out.
    pub callchain: Option<Vec<u64>>,
    /// The trace event's record.
    pub raw: &'a [u8],
    /// The user registers (`PERF_SAMPLE_REGS_USER`, in the bit order of
    /// `netprobe_core::debuginfo::PERF_REGS_MASK`); empty when none came.
    pub regs: Vec<u64>,
    /// The user stack from rsp up (`PERF_SAMPLE_STACK_USER`'s copied bytes); empty when none.
    pub stack: &'a [u8],
}

/// A record of the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// The buffer was full: the kernel dropped this many records.
    Lost(u64),
    /// A mapping, fork or exec of a target (the events that track them, see
    /// [`super::events`]).
    Sideband(Sideband),
    /// Any other type (skipped).
    Other,
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Decodes one record (`rec`: header included) of type `kind`; `None` when it is cut short.
fn decode_one(kind: u32, rec: &[u8], callchain: bool) -> Option<Record<'_>> {
    match kind {
        PERF_RECORD_SAMPLE => {
            // { header; u32 pid, tid; u64 time; [u64 nr; u64 ips[nr];] u32 size; char data[size]; }
            let pid = u32_at(rec, 8)?;
            let tid = u32_at(rec, 12)?;
            let time = u64_at(rec, 16)?;
            let mut at = 24;
            let chain = if callchain {
                let nr = usize::try_from(u64_at(rec, at)?).ok()?;
                at += 8;
                let bytes = nr.checked_mul(8)?;
                let ips = rec.get(at..at.checked_add(bytes)?)?;
                at += bytes;
                Some(
                    ips.chunks_exact(8)
                        .filter_map(|c| c.try_into().ok().map(u64::from_ne_bytes))
                        .filter(|&ip| ip < PERF_CONTEXT_MAX)
                        .collect(),
                )
            } else {
                None
            };
            let size = u32_at(rec, at)? as usize;
            at += 4;
            let raw = rec.get(at..at.checked_add(size)?)?;
            // Then, when asked for, the user registers and stack.
            let (regs, stack) = crate::backend::perf_event::record::regs_and_stack(rec, at + size)?;
            Some(Record::Sample(Sample {
                pid,
                tid,
                time,
                callchain: chain,
                raw,
                regs,
                stack,
            }))
        }
        // { header; u64 id; u64 lost; }
        PERF_RECORD_LOST => Some(Record::Lost(u64_at(rec, 16)?)),
        _ => Some(sideband::decode(kind, rec).map_or(Record::Other, Record::Sideband)),
    }
}

/// Walks the records of `buf` (whole records, as [`crate::backend::perf_event::ring::Ring`]
/// drains them) and hands each to `f`. Returns the number of malformed records (the walk stops
/// at the first one: what follows cannot be framed).
pub fn for_each(buf: &[u8], callchain: bool, mut f: impl FnMut(Record<'_>)) -> u64 {
    let mut at = 0usize;
    while at < buf.len() {
        // struct perf_event_header { u32 type; u16 misc; u16 size; }
        let (Some(kind), Some(size)) = (
            u32_at(buf, at),
            buf.get(at + 6..at + 8)
                .map(|b| u16::from_ne_bytes([b[0], b[1]]) as usize),
        ) else {
            return 1;
        };
        let Some(rec) = (size >= 8).then(|| buf.get(at..at + size)).flatten() else {
            return 1;
        };
        match decode_one(kind, rec, callchain) {
            Some(r) => f(r),
            None => return 1,
        }
        at += size;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(pid: u32, tid: u32, time: u64, chain: Option<&[u64]>, raw: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&pid.to_ne_bytes());
        body.extend_from_slice(&tid.to_ne_bytes());
        body.extend_from_slice(&time.to_ne_bytes());
        if let Some(c) = chain {
            body.extend_from_slice(&(c.len() as u64).to_ne_bytes());
            for ip in c {
                body.extend_from_slice(&ip.to_ne_bytes());
            }
        }
        body.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        body.extend_from_slice(raw);
        while (body.len() + 8) % 8 != 0 {
            body.push(0);
        }
        let mut rec = Vec::new();
        rec.extend_from_slice(&PERF_RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&0u16.to_ne_bytes());
        rec.extend_from_slice(&((body.len() + 8) as u16).to_ne_bytes());
        rec.extend_from_slice(&body);
        rec
    }

    #[test]
    fn samples_and_lost_records_decode_as_the_abi_lays_them_out() {
        let user = (-512i64) as u64; // PERF_CONTEXT_USER
        let mut buf = sample(
            7,
            8,
            99,
            Some(&[user, 0x401000, 0x402000]),
            &[1, 2, 3, 4, 5],
        );
        let mut lost = Vec::new();
        lost.extend_from_slice(&PERF_RECORD_LOST.to_ne_bytes());
        lost.extend_from_slice(&[0, 0, 24, 0]);
        lost.extend_from_slice(&3u64.to_ne_bytes());
        lost.extend_from_slice(&41u64.to_ne_bytes());
        buf.extend_from_slice(&lost);
        let mut seen = Vec::new();
        let bad = for_each(&buf, true, |r| seen.push(format!("{r:?}")));
        assert_eq!(bad, 0);
        assert_eq!(
            seen,
            vec![
                "Sample(Sample { pid: 7, tid: 8, time: 99, callchain: Some([4198400, 4202496]), raw: [1, 2, 3, 4, 5], regs: [], stack: [] })",
                "Lost(41)"
            ]
        );
    }

    #[test]
    fn a_cut_record_stops_the_walk_and_is_counted() {
        let buf = sample(1, 1, 1, None, &[9; 16]);
        let cut = &buf[..buf.len() - 9];
        let mut n = 0;
        assert_eq!(for_each(cut, false, |_| n += 1), 1);
        assert_eq!(n, 0);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panicking(buf in proptest::collection::vec(any::<u8>(), 0..512), chain: bool) {
            let mut n = 0u64;
            let bad = for_each(&buf, chain, |_| n += 1);
            prop_assert!(bad <= 1);
        }
    }
}
