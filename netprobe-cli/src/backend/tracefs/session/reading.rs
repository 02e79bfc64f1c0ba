//! Reading a session's per-CPU ring buffers: pages decoded into hits a chunk at a time, held
//! until every CPU has been read past them (so hits leave in time order), and each user stack
//! record given to the hit it belongs to.

use super::Session;
use crate::backend::tracefs::decode;
use crate::backend::tracefs::ringbuf::{parse_page, Missed};
use crate::error::Result;
use crate::plan::{Hit, ProbePlan, UserStack};

/// Pages read from each CPU's buffer before the hits decoded from them are handed out (64 pages:
/// a few thousand hits, a few hundred KiB decoded).
const PAGES_PER_CHUNK: usize = 64;

/// Chunks one [`Session::drain`] reads at most (4,096 pages per CPU in all).
const MAX_CHUNKS_PER_DRAIN: usize = 64;

/// A hit read from the buffers and not handed out yet.
#[derive(Debug)]
pub(super) struct Pending {
    hit: Hit,
    /// The return address the probe read at the stack pointer, to put under the probed
    /// instruction when the stack record comes (`ProbePlan::record_user_stacks`).
    return_address: Option<u64>,
    /// The plan records stacks and this hit's has not come yet.
    awaiting_stack: bool,
    /// The read that found it: the kernel writes a hit's stack record right after the hit, so a
    /// stack not found in the same read comes in the next one.
    read_in: u64,
    /// Its place in the order hits were read (equal times keep it, see `deliver`).
    seq: u64,
}

impl Session {
    /// Reads every page available now from every CPU and hands the decoded hits to `sink` in time
    /// order across CPUs. Returns the number of hits handed out.
    ///
    /// Each CPU has its own buffer, so a thread that migrates can leave its entry on one CPU and
    /// its return on another; hits newer than the moment this call started are held back until the
    /// next call (or [`Session::finish`]), when every CPU has been read past them.
    ///
    /// A backlog is read and handed out in chunks of at most [`PAGES_PER_CHUNK`] pages per CPU,
    /// so the hits decoded at once (about 200 bytes each) stay few: decoding a whole ring
    /// buffer's backlog in one go (after netprobe was kept off the CPU for seconds) raised the
    /// resident memory by tens of MB, which the allocator kept.
    pub fn drain(&mut self, sink: impl FnMut(&ProbePlan, Hit)) -> Result<u64> {
        let watermark = crate::backend::monotonic_ns();
        self.read_in_chunks(Some(watermark), sink)
    }

    /// Reads the CPUs' buffers a chunk at a time and hands out, after each chunk, the hits up to
    /// the time every CPU has been read past (and not past `watermark`; all that is left at the
    /// end when it is `None`, after reading every buffer to its end). A CPU whose hits read so
    /// far reach further in time than another's waits for it, so what is held back stays about
    /// a chunk. Returns the number of hits handed out.
    pub(super) fn read_in_chunks(
        &mut self,
        watermark: Option<u64>,
        mut sink: impl FnMut(&ProbePlan, Hit),
    ) -> Result<u64> {
        // Per CPU: `Some(t)` while it has more (t: just before the last hit read from it),
        // `None` once read to its end.
        let mut frontier: Vec<Option<u64>> = vec![Some(0); self.readers.len()];
        let mut delivered = 0;
        let mut chunks = 0;
        loop {
            self.read_chunk(&mut frontier)?;
            chunks += 1;
            let cut = frontier.iter().flatten().min().copied();
            let Some(cut) = cut else { break };
            delivered += self.deliver(Some(watermark.map_or(cut, |w| cut.min(w))), &mut sink);
            // Bounded: a busy CPU must not starve the others or the signal check.
            if watermark.is_some() && chunks >= MAX_CHUNKS_PER_DRAIN {
                return Ok(delivered);
            }
        }
        delivered += self.deliver(watermark, sink);
        Ok(delivered)
    }

    /// Reads at most [`PAGES_PER_CHUNK`] pages from each CPU that still has some and is not
    /// ahead of another in time (see [`Session::read_in_chunks`]), updating `frontier`.
    fn read_chunk(&mut self, frontier: &mut [Option<u64>]) -> Result<()> {
        self.reads += 1;
        let behind = frontier.iter().flatten().min().copied();
        let layout = self.layout;
        // Disjoint borrows: each page is decoded straight from the reader's page buffer, with no
        // copy of its records (at ~1M hits/s a copy per record was the reader's largest cost).
        let Session {
            readers,
            formats,
            plan,
            pending,
            user_stack_format,
            missed_in_pages,
            missed_unknown,
            malformed_pages,
            reads,
            read_seq,
            ..
        } = self;
        let stack_id = user_stack_format.as_ref().map(|f| f.id);
        for (r, front) in readers.iter_mut().zip(frontier.iter_mut()) {
            if front.is_none() || *front > behind {
                continue;
            }
            let before = pending.len();
            let mut pages = 0;
            while pages < PAGES_PER_CHUNK {
                let Some(page) = r.read_page()? else { break };
                pages += 1;
                let summary = parse_page(&layout, page, |rec| {
                    let (ts, data) = (rec.ts, rec.data);
                    let Some(id) = data.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]])) else {
                        return;
                    };
                    if Some(id) == stack_id {
                        if let Some(rec) = user_stack_format
                            .as_ref()
                            .and_then(|f| decode::user_stack(f, data))
                        {
                            attach_stack(pending, rec);
                        }
                        return;
                    }
                    let Some((_, slot, format)) = formats.iter().find(|(fid, _, _)| *fid == id)
                    else {
                        return;
                    };
                    let Some(probe) = slot.probe(data) else {
                        return;
                    };
                    if let Some(hit) = decode::decode(plan, probe, format, ts, data) {
                        let return_address = plan
                            .probes
                            .get(probe)
                            .and_then(|kp| decode::return_address(kp, format, data));
                        pending.push(Pending {
                            hit,
                            return_address,
                            awaiting_stack: plan.user_stacks,
                            read_in: *reads,
                            seq: *read_seq,
                        });
                        *read_seq += 1;
                    }
                });
                match summary {
                    Ok(s) => match s.missed {
                        Missed::None => {}
                        Missed::Count(c) => *missed_in_pages += c,
                        Missed::Unknown => *missed_unknown = true,
                    },
                    Err(_) => *malformed_pages += 1,
                }
            }
            *front = (pages == PAGES_PER_CHUNK).then(|| match pending.get(before..) {
                Some([.., p]) => p.hit.ts_ns.saturating_sub(1),
                // No hit in a whole chunk: keep the CPU's place.
                _ => front.unwrap_or(0),
            });
        }
        Ok(())
    }

    /// Hands out pending hits up to `watermark` (all when `None`), oldest first.
    ///
    /// A hit whose stack record was not read yet waits for one more read (the kernel writes it
    /// just after the hit, so it can miss the read that found the hit).
    fn deliver(&mut self, watermark: Option<u64>, mut sink: impl FnMut(&ProbePlan, Hit)) -> u64 {
        // Equal times keep their reading order; an unstable sort allocates nothing (the stable
        // sort's buffer of half the backlog, fresh on every read, cost a page fault per page).
        self.pending.sort_unstable_by_key(|p| (p.hit.ts_ns, p.seq));
        let cut = match watermark {
            Some(w) => {
                let by_time = self.pending.partition_point(|p| p.hit.ts_ns <= w);
                let reads = self.reads;
                self.pending[..by_time]
                    .iter()
                    .position(|p| p.awaiting_stack && p.read_in == reads)
                    .unwrap_or(by_time)
            }
            None => self.pending.len(),
        };
        for p in self.pending.drain(..cut) {
            sink(&self.plan, p.hit);
        }
        cut as u64
    }
}

/// Gives the stack of `rec` to the latest hit of its thread still waiting for one: the kernel
/// writes it right after that hit in the same CPU's buffer (`ftrace_trace_userstack`, called
/// from `trace_buffer_unlock_commit_regs` in `kernel/trace/trace.c`). Restores the caller the
/// walk misses at a function's entry or RET (`ProbePlan::record_user_stacks`).
pub(super) fn attach_stack(pending: &mut [Pending], rec: decode::UserStackRecord) {
    let Some(p) = pending
        .iter_mut()
        .rev()
        .find(|p| p.awaiting_stack && p.hit.tid == rec.tid)
    else {
        return;
    };
    p.awaiting_stack = false;
    p.hit.user_stack = Some(merge_stack(rec, p.return_address));
}

/// The user stack from a `user_stack` record and the return address the probe read at the stack
/// pointer: that address goes under the probed instruction, always.
///
/// The probe reads it only where the walk cannot have it (see `ProbePlan::record_user_stacks`):
/// the kernel's walk starts at the base pointer, which there still names the caller's frame, so
/// its first return address is the caller's caller's. Comparing values cannot tell: in a direct
/// recursion every frame returns to the same address (a C `rec(d)` calling `rec(d - 1)`, probed
/// at its first byte with `userstacktrace` on, records `rec, main+…, libc` for `rec(2)` called
/// by `rec(3)`, which `main` called: the `rec(3)` frame is missing though its return address
/// equals the next one's).
pub(super) fn merge_stack(rec: decode::UserStackRecord, return_address: Option<u64>) -> UserStack {
    let mut addrs = rec.addrs;
    if let Some(ra) = return_address.filter(|&ra| ra != 0) {
        if !addrs.is_empty() {
            addrs.insert(1, ra);
        }
    }
    UserStack {
        copy: None,
        pid: rec.pid,
        addrs,
        kernel_limit: rec.full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{FunctionId, Role};

    fn record(tid: u32, addrs: &[u64], full: bool) -> decode::UserStackRecord {
        decode::UserStackRecord {
            tid,
            pid: 7,
            addrs: addrs.to_vec(),
            full,
        }
    }

    fn pending(tid: u32, ra: Option<u64>) -> Pending {
        Pending {
            hit: Hit {
                ts_ns: 0,
                tid,
                pid: None,
                probe: 0,
                function: FunctionId(0),
                role: Role::Entry,
                args: vec![],
                pair_key: 0,
                comm: None,
                user_stack: None,
            },
            return_address: ra,
            awaiting_stack: true,
            read_in: 1,
            seq: 0,
        }
    }

    /// The caller the walk missed goes under the probed instruction, even when it returns to the
    /// same address as the next frame.
    #[test]
    fn the_return_address_restores_the_missed_caller() {
        let s = merge_stack(record(1, &[0x1139, 0x1176, 0x11c1], false), Some(0x115d));
        assert_eq!(s.addrs, vec![0x1139, 0x115d, 0x1176, 0x11c1]);
        // A direct recursion: the caller returns where its own caller does, and is restored too.
        let s = merge_stack(record(1, &[0x1139, 0x115d, 0x1176], true), Some(0x115d));
        assert_eq!(s.addrs, vec![0x1139, 0x115d, 0x115d, 0x1176]);
        assert!(s.kernel_limit);
        let s = merge_stack(record(1, &[0x1139, 0x1176], false), None);
        assert_eq!(s.addrs, vec![0x1139, 0x1176]);
    }

    /// A stack record goes to the latest hit of its thread still waiting for one.
    #[test]
    fn stacks_attach_to_the_latest_waiting_hit_of_their_thread() {
        let mut p = vec![pending(1, None), pending(2, None), pending(1, Some(0x50))];
        attach_stack(&mut p, record(1, &[0x10, 0x20], false));
        assert_eq!(
            p[2].hit.user_stack.as_ref().unwrap().addrs,
            vec![0x10, 0x50, 0x20]
        );
        assert!(p[0].hit.user_stack.is_none() && p[1].hit.user_stack.is_none());
        attach_stack(&mut p, record(1, &[0x11], false));
        assert_eq!(p[0].hit.user_stack.as_ref().unwrap().addrs, vec![0x11]);
        // No waiting hit of that thread: dropped.
        attach_stack(&mut p, record(9, &[0x12], false));
        assert!(p[1].hit.user_stack.is_none());
    }
}
