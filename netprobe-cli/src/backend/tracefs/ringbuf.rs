//! Reading the per-CPU ring buffers in binary: `per_cpu/cpuN/trace_pipe_raw` hands out whole pages
//! (kernel `kernel/trace/ring_buffer.c`; the same format libtraceevent's kbuffer reads).
//!
//! Page: header per [`PageLayout`] (u64 timestamp of the first event, then `commit`: the number
//! of data bytes; its bit 31 (RB_MISSED_EVENTS) says events were lost before this page, bit 30
//! (RB_MISSED_STORED) that their count is stored as a long right after the data).
//!
//! Event header (`events/header_event`): a u32 with `type_len` in the low 5 bits and
//! `time_delta` in the upper 27, then `array[]`:
//! - `type_len` 1..=28: a data record of `type_len * 4` bytes starting at `array[0]`;
//! - 0: a data record whose length is in `array[0]` (including those 4 bytes), data at `array[1]`;
//! - 29 (padding): with `time_delta == 0` the rest of the page is empty; else a discarded event
//!   of `array[0]` bytes counted from `array[0]` on;
//! - 30 (time extend): add `array[0] << 27 | time_delta` to the running time, 8 bytes in all;
//! - 31 (absolute time stamp): the time is `array[0] << 27 | time_delta` (upper 5 bits kept from
//!   the running time, kernel `rb_fix_abs_ts`), 8 bytes in all.
//!
//! Data events advance the running time by `time_delta`; padding does not. Every read here is bounds-checked: a
//! malformed page yields the events before the fault and an error, never a panic.

use crate::backend::tracefs::format::PageLayout;
use crate::error::{Error, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

const RB_MISSED_EVENTS: u64 = 1 << 31;
const RB_MISSED_STORED: u64 = 1 << 30;
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
/// Upper 5 bits of a 64-bit time that an absolute time stamp (59 bits) does not carry.
const TS_MSB: u64 = 0xf8 << 56;

/// One data record from a page: its time and its bytes (starting with `common_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

/// Events lost before a page, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Missed {
    /// None lost.
    #[default]
    None,
    /// This many were lost.
    Count(u64),
    /// Some were lost; the page had no room to say how many.
    Unknown,
}

/// What a page held besides its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PageSummary {
    pub missed: Missed,
    pub records: usize,
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

fn read_uint(b: &[u8], at: usize, size: usize) -> Option<u64> {
    let s = b.get(at..at.checked_add(size)?)?;
    Some(match size {
        4 => u32::from_le_bytes(s.try_into().ok()?) as u64,
        8 => u64::from_le_bytes(s.try_into().ok()?),
        _ => return None,
    })
}

/// Parses one page, calling `each` for every data record in order.
///
/// Returns the page summary; [`Error::BadPage`] when the header or a record is out of bounds or
/// inconsistent (records before the fault have been handed to `each`).
pub fn parse_page<'a>(
    layout: &PageLayout,
    page: &'a [u8],
    mut each: impl FnMut(RawRecord<'a>),
) -> Result<PageSummary> {
    let bad = |what: &str| Error::BadPage(what.to_string());
    let mut ts = read_uint(page, layout.timestamp_offset, 8).ok_or_else(|| bad("short header"))?;
    let commit = read_uint(page, layout.commit_offset, layout.commit_size)
        .ok_or_else(|| bad("short header"))?;
    let flags = commit & (RB_MISSED_EVENTS | RB_MISSED_STORED);
    // The low 30 bits count data bytes (sub-buffers are far below 1 GiB).
    let len = (commit & (RB_MISSED_STORED - 1)) as usize;
    let data_end = layout
        .data_offset
        .checked_add(len)
        .filter(|&e| e <= page.len())
        .ok_or_else(|| bad("commit length beyond the page"))?;
    let data = page
        .get(layout.data_offset..data_end)
        .ok_or_else(|| bad("commit length beyond the page"))?;
    let mut summary = PageSummary {
        missed: if flags & RB_MISSED_STORED != 0 {
            match read_uint(page, data_end, layout.commit_size) {
                Some(n) => Missed::Count(n),
                None => Missed::Unknown,
            }
        } else if flags & RB_MISSED_EVENTS != 0 {
            Missed::Unknown
        } else {
            Missed::None
        },
        records: 0,
    };
    let mut pos = 0usize;
    while pos < data.len() {
        let header = read_u32(data, pos).ok_or_else(|| bad("truncated event header"))?;
        let type_len = header & 0x1f;
        let delta = (header >> 5) as u64;
        let body = pos + 4;
        match type_len {
            TYPE_PADDING => {
                if delta == 0 {
                    break; // the rest of the page is empty
                }
                let skip = read_u32(data, body).ok_or_else(|| bad("truncated padding"))?;
                // The kernel's reader does not add a discarded event's delta
                // (`rb_update_read_stamp`).
                pos = body
                    .checked_add(skip as usize)
                    .ok_or_else(|| bad("padding overflow"))?;
            }
            TYPE_TIME_EXTEND => {
                let hi = read_u32(data, body).ok_or_else(|| bad("truncated time extend"))?;
                ts = ts.wrapping_add(((hi as u64) << TS_SHIFT) | delta);
                pos = body + 4;
            }
            TYPE_TIME_STAMP => {
                let hi = read_u32(data, body).ok_or_else(|| bad("truncated time stamp"))?;
                let abs = ((hi as u64) << TS_SHIFT) | delta;
                let mut t = abs | (ts & TS_MSB);
                if ts & TS_MSB != 0 && t < ts {
                    t = t.wrapping_add(1 << 59);
                }
                ts = t;
                pos = body + 4;
            }
            0 => {
                let rec_len = read_u32(data, body).ok_or_else(|| bad("truncated length"))? as usize;
                // rec_len counts array[0] itself.
                let payload = rec_len
                    .checked_sub(4)
                    .ok_or_else(|| bad("record length below 4"))?;
                let start = body + 4;
                let end = start
                    .checked_add(payload)
                    .filter(|&e| e <= data.len())
                    .ok_or_else(|| bad("record beyond the data"))?;
                ts = ts.wrapping_add(delta);
                each(RawRecord {
                    ts,
                    data: &data[start..end],
                });
                summary.records += 1;
                // Records are 4-byte aligned.
                pos = end
                    .checked_add(3)
                    .map(|e| e & !3)
                    .ok_or_else(|| bad("overflow"))?;
            }
            n => {
                let end = body + (n as usize) * 4;
                let rec = data
                    .get(body..end)
                    .ok_or_else(|| bad("record beyond the data"))?;
                ts = ts.wrapping_add(delta);
                each(RawRecord { ts, data: rec });
                summary.records += 1;
                pos = end;
            }
        }
    }
    Ok(summary)
}

/// A non-blocking reader of one CPU's `trace_pipe_raw`.
#[derive(Debug)]
pub struct CpuReader {
    pub cpu: u32,
    file: std::fs::File,
    page: Vec<u8>,
}

impl CpuReader {
    /// Opens `per_cpu/cpuN/trace_pipe_raw` with O_NONBLOCK; `page_size` is the sub-buffer size.
    pub fn open(instance_dir: &Path, cpu: u32, page_size: usize) -> Result<CpuReader> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = instance_dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(CpuReader {
            cpu,
            file,
            page: vec![0; page_size],
        })
    }

    /// Reads the next page. `Ok(None)` when the buffer is empty now (EAGAIN) or at EOF; the page
    /// bytes otherwise (the kernel hands out full pages, or the part written so far).
    pub fn read_page(&mut self) -> Result<Option<&[u8]>> {
        loop {
            // SAFETY: the buffer is valid for page.len() bytes and owned by self.
            let n = unsafe {
                libc::read(
                    self.file.as_raw_fd(),
                    self.page.as_mut_ptr().cast(),
                    self.page.len(),
                )
            };
            if n > 0 {
                return Ok(self.page.get(..n as usize));
            }
            if n == 0 {
                return Ok(None);
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                _ => {
                    return Err(Error::io(
                        format!("per_cpu/cpu{}/trace_pipe_raw", self.cpu),
                        e,
                    ))
                }
            }
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a page the way the kernel's writer lays it out.
    pub(crate) struct PageBuilder {
        pub ts: u64,
        pub data: Vec<u8>,
        pub flags: u64,
        pub missed: Option<u64>,
    }

    impl PageBuilder {
        pub fn new(ts: u64) -> PageBuilder {
            PageBuilder {
                ts,
                data: Vec::new(),
                flags: 0,
                missed: None,
            }
        }
        fn header(&mut self, type_len: u32, delta: u32) {
            self.data
                .extend_from_slice(&(type_len | (delta << 5)).to_le_bytes());
        }
        /// A record of `payload` (padded to 4 bytes); long ones use the type_len 0 form.
        pub fn record(&mut self, delta: u32, payload: &[u8]) -> &mut Self {
            let padded = (payload.len() + 3) & !3;
            if padded <= 28 * 4 && !payload.is_empty() {
                self.header((padded / 4) as u32, delta);
            } else {
                self.header(0, delta);
                self.data
                    .extend_from_slice(&((padded + 4) as u32).to_le_bytes());
            }
            self.data.extend_from_slice(payload);
            self.data
                .resize(self.data.len() + padded - payload.len(), 0);
            self
        }
        pub fn extend(&mut self, delta: u64) -> &mut Self {
            self.header(TYPE_TIME_EXTEND, (delta & ((1 << 27) - 1)) as u32);
            self.data
                .extend_from_slice(&((delta >> 27) as u32).to_le_bytes());
            self
        }
        /// A discarded event: `skip` counts from `array[0]` on, itself included (kernel
        /// `rb_event_discard`), so at least 4.
        pub fn padding(&mut self, delta: u32, skip: u32) -> &mut Self {
            self.header(TYPE_PADDING, delta);
            self.data.extend_from_slice(&skip.to_le_bytes());
            self.data.resize(self.data.len() + skip as usize - 4, 0xee);
            self
        }
        pub fn build(&self) -> Vec<u8> {
            let mut page = vec![0u8; 4096];
            page[0..8].copy_from_slice(&self.ts.to_le_bytes());
            let mut commit = self.data.len() as u64 | self.flags;
            if self.missed.is_some() {
                commit |= RB_MISSED_STORED | RB_MISSED_EVENTS;
            }
            page[8..16].copy_from_slice(&commit.to_le_bytes());
            page[16..16 + self.data.len()].copy_from_slice(&self.data);
            if let Some(m) = self.missed {
                let at = 16 + self.data.len();
                page[at..at + 8].copy_from_slice(&m.to_le_bytes());
            }
            page
        }
    }

    fn collect(page: &[u8]) -> (Vec<(u64, Vec<u8>)>, Result<PageSummary>) {
        let mut out = Vec::new();
        let r = parse_page(&PageLayout::X86_64, page, |rec| {
            out.push((rec.ts, rec.data.to_vec()))
        });
        (out, r)
    }

    #[test]
    fn small_long_extended_and_padding() {
        let long = vec![7u8; 200];
        let page = PageBuilder::new(1000)
            .record(5, &[1, 2, 3, 4])
            .extend(1 << 30)
            .record(0, &long)
            .padding(3, 8)
            .record(2, &[9; 6])
            .build();
        let (recs, r) = collect(&page);
        let s = r.unwrap();
        assert_eq!(s.records, 3);
        assert_eq!(s.missed, Missed::None);
        assert_eq!(recs[0], (1005, vec![1, 2, 3, 4]));
        assert_eq!(recs[1].0, 1005 + (1 << 30));
        assert_eq!(recs[1].1, long);
        assert_eq!(recs[2].0, 1005 + (1 << 30) + 2);
        assert_eq!(recs[2].1, vec![9, 9, 9, 9, 9, 9, 0, 0]);
    }

    #[test]
    fn missed_counts() {
        let mut b = PageBuilder::new(0);
        b.record(1, &[0; 8]);
        b.missed = Some(42);
        assert_eq!(collect(&b.build()).1.unwrap().missed, Missed::Count(42));
        let mut b = PageBuilder::new(0);
        b.record(1, &[0; 8]);
        b.flags = RB_MISSED_EVENTS;
        assert_eq!(collect(&b.build()).1.unwrap().missed, Missed::Unknown);
    }

    #[test]
    fn null_padding_ends_the_page() {
        let mut b = PageBuilder::new(0);
        b.record(1, &[1; 4]);
        b.data.extend_from_slice(&TYPE_PADDING.to_le_bytes());
        b.data.extend_from_slice(&[0xff; 12]);
        let (recs, r) = collect(&b.build());
        assert_eq!(recs.len(), 1);
        assert!(r.is_ok());
    }

    #[test]
    fn malformed_pages_are_errors() {
        // commit beyond the page
        let mut page = PageBuilder::new(0).build();
        page[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(collect(&page).1.is_err());
        // a long record claiming more than the data holds
        let mut b = PageBuilder::new(0);
        b.data.extend_from_slice(&0u32.to_le_bytes());
        b.data.extend_from_slice(&1000u32.to_le_bytes());
        assert!(collect(&b.build()).1.is_err());
        // a long record of length < 4
        let mut b = PageBuilder::new(0);
        b.data.extend_from_slice(&0u32.to_le_bytes());
        b.data.extend_from_slice(&2u32.to_le_bytes());
        assert!(collect(&b.build()).1.is_err());
        assert!(collect(&[0u8; 10]).1.is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_pages_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..4200)) {
            let _ = collect(&bytes);
        }

        #[test]
        fn mutated_pages_never_panic(flips in proptest::collection::vec((16usize..300, proptest::num::u8::ANY), 1..20)) {
            let mut page = PageBuilder::new(77).record(3, &[1; 20]).extend(99_999_999_999).record(1, &[2; 150]).padding(5, 12).record(1, &[3; 4]).build();
            for (at, v) in flips { page[at] = v; }
            let (recs, _) = collect(&page);
            for (_, d) in recs { proptest::prop_assert!(d.len() <= 4096); }
        }

        /// Records written with the builder come back in order with the right times.
        #[test]
        fn written_records_round_trip(recs in proptest::collection::vec((0u32..1000, proptest::collection::vec(proptest::num::u8::ANY, 1..150)), 0..15)) {
            let mut b = PageBuilder::new(10);
            let mut want = Vec::new();
            let mut ts = 10u64;
            for (d, payload) in &recs {
                b.record(*d, payload);
                ts += *d as u64;
                let mut p = payload.clone();
                p.resize((p.len() + 3) & !3, 0);
                want.push((ts, p));
            }
            let (got, r) = collect(&b.build());
            proptest::prop_assert!(r.is_ok());
            proptest::prop_assert_eq!(got, want);
        }
    }
}
