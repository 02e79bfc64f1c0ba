//! Decoding the records a sampler's ring buffer holds (`struct perf_event_header` and the record
//! bodies of `include/uapi/linux/perf_event.h`), for the attribute `perf_event` opens:
//! `PERF_SAMPLE_IP | TID | TIME | CALLCHAIN | REGS_USER | STACK_USER` (registers
//! [`PERF_REGS_MASK`]), with `sample_id_all` for the side-band records of the tasks'
//! mappings ([`super::sideband`]). Bounds-checked: a malformed buffer ends decoding, never
//! panics.

use netprobe_core::debuginfo::PERF_REGS_MASK;

use super::fields::{u16_at, u32_at, u64_at};

/// `PERF_RECORD_LOST`: `{ header; u64 id; u64 lost; }`.
pub const PERF_RECORD_LOST: u32 = 2;
/// `PERF_RECORD_THROTTLE`: the kernel lowered the sampling rate for a while.
pub const PERF_RECORD_THROTTLE: u32 = 5;
/// `PERF_RECORD_SAMPLE`.
pub const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_SWITCH`: `{ header; sample_id }`, written for an event with `context_switch`
/// each time its task is switched in or out (since Linux 4.3).
pub const PERF_RECORD_SWITCH: u32 = 14;
/// In a switch record's `misc`: the task was switched out (else in).
const PERF_RECORD_MISC_SWITCH_OUT: u16 = 1 << 13;
/// In a switch-out record's `misc`: the task was preempted while runnable (since Linux 4.17).
const PERF_RECORD_MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// The callchain marker before the kernel's part (`enum perf_callchain_context`).
const PERF_CONTEXT_KERNEL: u64 = (-128i64) as u64;
/// The callchain marker before the user part.
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;
/// Callchain entries at or above this value are context markers (`PERF_CONTEXT_USER`, ...),
/// not addresses (`enum perf_callchain_context`).
pub const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;

/// The end of user space on x86-64 with 5-level paging (`TASK_SIZE_MAX` under LA57 in
/// arch/x86/include/asm/page_64_types.h); with 4-level paging it ends lower, at 2^47.
pub const USER_SPACE_END: u64 = 1 << 56;

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A user stack: `ips[0]` is the sampled instruction, then return addresses outwards.
    Sample {
        pid: u32,
        tid: u32,
        time: u64,
        ips: Vec<u64>,
        /// The kernel's part of the callchain, innermost first: empty unless the event asked
        /// for it (a context-switch event: where in the kernel the task blocked).
        kernel_ips: Vec<u64>,
        /// The top of the user stack when the sample was taken, from RSP upwards
        /// (`PERF_SAMPLE_STACK_USER`'s `dyn_size` bytes); empty when the kernel copied none.
        /// Borrowed from the buffer decoded: a switch-heavy profile decodes thousands a second.
        stack: &'a [u8],
        /// The user registers (`PERF_SAMPLE_REGS_USER`) in the ascending bit order of
        /// [`PERF_REGS_MASK`]; empty when the kernel had none to give
        /// (`PERF_SAMPLE_REGS_ABI_NONE`).
        regs: Vec<u64>,
    },
    /// The buffer was full: this many samples were dropped.
    Lost(u64),
    /// The kernel throttled sampling (too many interrupts).
    Throttle,
    /// The task was switched in or out (`PERF_RECORD_SWITCH`; its sample id is `TID | TIME`).
    Switch {
        pid: u32,
        tid: u32,
        time: u64,
        /// Switched out (else in).
        out: bool,
        /// Switched out while runnable: preempted, not blocked.
        preempted: bool,
    },
    /// A mapping, fork or exec of a sampled task ([`super::sideband`]).
    Sideband(super::sideband::Sideband),
    /// Any other record type (skipped).
    Other(u32),
}

/// The `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER` parts of a sample record `rec`,
/// from byte `at` on: `{ u64 abi; u64 regs[weight(mask)]; }` (regs only when abi is not
/// PERF_SAMPLE_REGS_ABI_NONE, 0) then `{ u64 size; char data[size]; u64 dyn_size; }` (dyn_size
/// only when size != 0: `size` is what was asked for, the first `dyn_size` bytes what the kernel
/// could copy), as `perf_output_sample` in kernel/events/core.c writes them for
/// [`PERF_REGS_MASK`]. Absent parts read as empty; `None` when a part is cut short.
pub fn regs_and_stack(rec: &[u8], mut at: usize) -> Option<(Vec<u64>, &[u8])> {
    let (mut regs, mut stack): (Vec<u64>, &[u8]) = (Vec::new(), &[]);
    let Some(abi) = u64_at(rec, at) else {
        return Some((regs, stack));
    };
    at += 8;
    if abi != 0 {
        for _ in 0..PERF_REGS_MASK.count_ones() {
            regs.push(u64_at(rec, at)?);
            at += 8;
        }
    }
    if let Some(size) = u64_at(rec, at).filter(|&s| s > 0) {
        let size = usize::try_from(size).ok()?;
        let data = rec.get(at + 8..(at + 8).checked_add(size)?)?;
        let copied = u64_at(rec, at + 8 + size)?;
        stack = &data[..usize::try_from(copied).map_or(size, |c| c.min(size))];
    }
    Some((regs, stack))
}

/// A callchain's kernel and user parts, each innermost first, without the context markers.
/// Entries before any marker are user ones (a chain of a user-only event may start without
/// one). The user part ends at the first return address that cannot be user code: zero (a
/// thread's outermost frame holds zeros) or above user space (the walk went through a frame of
/// code that keeps no frame pointer and read data). The kernel's x86 `perf_callchain_user`
/// (arch/x86/events/core.c) checks the frame pointer, not the return address it stores.
fn split_callchain(chain: impl Iterator<Item = u64>) -> (Vec<u64>, Vec<u64>) {
    let (mut kernel, mut user) = (Vec::new(), Vec::new());
    let mut in_kernel = false;
    let mut user_ended = false;
    for a in chain {
        match a {
            PERF_CONTEXT_KERNEL => in_kernel = true,
            PERF_CONTEXT_USER => in_kernel = false,
            a if a >= PERF_CONTEXT_MAX => in_kernel = false,
            a if in_kernel => kernel.push(a),
            a if user_ended || a == 0 || a >= USER_SPACE_END => user_ended = true,
            a => user.push(a),
        }
    }
    (kernel, user)
}

/// Decodes one record body (`rec` = the whole record, header included).
fn decode_one(kind: u32, rec: &[u8]) -> Option<Record<'_>> {
    match kind {
        PERF_RECORD_SAMPLE => {
            // { header; u64 ip; u32 pid, tid; u64 time; u64 nr; u64 ips[nr]; }
            let ip = u64_at(rec, 8)?;
            let pid = u32_at(rec, 16)?;
            let tid = u32_at(rec, 20)?;
            let time = u64_at(rec, 24)?;
            let nr = u64_at(rec, 32)?;
            let room = (rec.len().saturating_sub(40) / 8) as u64;
            if nr > room {
                return None;
            }
            let chain = (0..nr as usize).filter_map(|i| u64_at(rec, 40 + 8 * i));
            let (kernel_ips, mut ips) = split_callchain(chain);
            if ips.is_empty() && ip != 0 && ip < USER_SPACE_END {
                ips.push(ip);
            }
            let (regs, stack) = regs_and_stack(rec, 40 + 8 * nr as usize)?;
            Some(Record::Sample {
                pid,
                tid,
                time,
                ips,
                kernel_ips,
                stack,
                regs,
            })
        }
        PERF_RECORD_SWITCH => {
            let misc = u16_at(rec, 4)?;
            let at = rec.len().checked_sub(16)?;
            Some(Record::Switch {
                pid: u32_at(rec, at)?,
                tid: u32_at(rec, at + 4)?,
                time: u64_at(rec, at + 8)?,
                out: misc & PERF_RECORD_MISC_SWITCH_OUT != 0,
                preempted: misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0,
            })
        }
        PERF_RECORD_LOST => Some(Record::Lost(u64_at(rec, 16)?)),
        PERF_RECORD_THROTTLE => Some(Record::Throttle),
        other => {
            Some(super::sideband::decode(other, rec).map_or(Record::Other(other), Record::Sideband))
        }
    }
}

/// Decodes the records in `buf` (whole records back to back, as drained from a ring buffer).
/// Stops at the first header whose size is impossible (less than a header, past the end).
pub fn decode(buf: &[u8]) -> Vec<Record<'_>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let (Some(kind), Some(size)) = (u32_at(buf, at), u16_at(buf, at + 6)) {
        let size = size as usize;
        let Some(rec) = (size >= 8).then(|| buf.get(at..at + size)).flatten() else {
            break;
        };
        match decode_one(kind, rec) {
            Some(r) => out.push(r),
            None => out.push(Record::Other(kind)),
        }
        at += size;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(kind: u32, size: u16) -> Vec<u8> {
        let mut v = kind.to_ne_bytes().to_vec();
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&size.to_ne_bytes());
        v
    }

    fn sample(pid: u32, tid: u32, chain: &[u64]) -> Vec<u8> {
        with_stack(pid, tid, chain, None)
    }

    /// A sample record; with `Some((asked, copied))`, a STACK_USER part of `asked` bytes of
    /// which the first `copied` hold 0, 1, 2...
    fn with_stack(pid: u32, tid: u32, chain: &[u64], stack: Option<(usize, u64)>) -> Vec<u8> {
        let stack_len = stack.map_or(0, |(asked, _)| 24 + asked);
        let size = 40 + 8 * chain.len() + stack_len;
        let mut v = header(PERF_RECORD_SAMPLE, size as u16);
        v.extend_from_slice(
            &chain
                .iter()
                .find(|&&a| a < PERF_CONTEXT_MAX)
                .copied()
                .unwrap_or(0)
                .to_ne_bytes(),
        );
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend_from_slice(&tid.to_ne_bytes());
        v.extend_from_slice(&77u64.to_ne_bytes());
        v.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        for a in chain {
            v.extend_from_slice(&a.to_ne_bytes());
        }
        if let Some((asked, copied)) = stack {
            // PERF_SAMPLE_REGS_ABI_NONE: no registers.
            v.extend_from_slice(&0u64.to_ne_bytes());
            v.extend_from_slice(&(asked as u64).to_ne_bytes());
            v.extend((0..asked).map(|i| i as u8));
            v.extend_from_slice(&copied.to_ne_bytes());
        }
        v
    }

    #[test]
    fn the_user_stack_is_what_the_kernel_copied() {
        let buf = with_stack(1, 2, &[0x401000, 0x401234], Some((64, 24)));
        match &decode(&buf)[..] {
            [Record::Sample { ips, stack, .. }] => {
                assert_eq!(ips, &vec![0x401000, 0x401234]);
                assert_eq!(stack, &(0..24).collect::<Vec<u8>>());
            }
            other => panic!("{other:?}"),
        }
        // A copied size above the asked one is cut to it; asked 0 has no dyn_size word.
        let buf = with_stack(1, 2, &[0x401000], Some((16, 99)));
        assert!(matches!(&decode(&buf)[..], [Record::Sample { stack, .. }] if stack.len() == 16));
        let mut buf = sample(1, 2, &[0x401000]);
        buf.extend_from_slice(&0u64.to_ne_bytes());
        buf.extend_from_slice(&0u64.to_ne_bytes());
        let len = buf.len() as u16;
        buf[6..8].copy_from_slice(&len.to_ne_bytes());
        assert!(matches!(&decode(&buf)[..], [Record::Sample { stack, .. }] if stack.is_empty()));
        // A stack part cut off by its record is refused.
        let mut cut = with_stack(1, 2, &[0x401000], Some((64, 64)));
        cut.truncate(cut.len() - 8);
        let len = cut.len() as u16;
        cut[6..8].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(decode(&cut), vec![Record::Other(PERF_RECORD_SAMPLE)]);
    }

    #[test]
    fn user_registers_come_before_the_stack() {
        let mut buf = sample(1, 2, &[0x401000]);
        buf.extend_from_slice(&2u64.to_ne_bytes()); // PERF_SAMPLE_REGS_ABI_64
        let n = PERF_REGS_MASK.count_ones() as u64;
        for r in 0..n {
            buf.extend_from_slice(&(1000 + r).to_ne_bytes());
        }
        buf.extend_from_slice(&8u64.to_ne_bytes());
        buf.extend_from_slice(&[7; 8]);
        buf.extend_from_slice(&8u64.to_ne_bytes());
        let len = buf.len() as u16;
        buf[6..8].copy_from_slice(&len.to_ne_bytes());
        match &decode(&buf)[..] {
            [Record::Sample { regs, stack, .. }] => {
                assert_eq!(regs, &(1000..1000 + n).collect::<Vec<_>>());
                assert_eq!(stack, &vec![7u8; 8]);
            }
            other => panic!("{other:?}"),
        }
        // Registers cut off by the record's end: refused.
        let mut cut = buf[..buf.len() - 8 * (n as usize)].to_vec();
        let len = cut.len() as u16;
        cut[6..8].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(decode(&cut), vec![Record::Other(PERF_RECORD_SAMPLE)]);
    }

    #[test]
    fn a_return_address_that_cannot_be_user_code_ends_the_chain() {
        const PERF_CONTEXT_USER: u64 = (-512i64) as u64;
        let buf = sample(
            10,
            11,
            &[PERF_CONTEXT_USER, 0x401000, 0x401234, 0, 0x7f00_0000_1000],
        );
        match &decode(&buf)[..] {
            [Record::Sample { ips, .. }] => assert_eq!(ips, &vec![0x401000, 0x401234]),
            other => panic!("{other:?}"),
        }
        // Text read as a return address (seen under a .NET 8 JIT frame).
        let buf = sample(10, 11, &[0x401000, 0x6c25_203a_656c_6260, 0x401234]);
        match &decode(&buf)[..] {
            [Record::Sample { ips, .. }] => assert_eq!(ips, &vec![0x401000]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn samples_lost_and_others_decode_and_context_markers_drop_out() {
        const PERF_CONTEXT_USER: u64 = (-512i64) as u64;
        let mut buf = sample(
            10,
            11,
            &[PERF_CONTEXT_USER, 0x401000, 0x401234, 0x7f00_0000_1000],
        );
        let mut lost = header(PERF_RECORD_LOST, 24);
        lost.extend_from_slice(&1u64.to_ne_bytes());
        lost.extend_from_slice(&42u64.to_ne_bytes());
        buf.extend_from_slice(&lost);
        buf.extend_from_slice(&header(3, 8));
        buf.extend_from_slice(&header(PERF_RECORD_THROTTLE, 8));
        assert_eq!(
            decode(&buf),
            vec![
                Record::Sample {
                    pid: 10,
                    tid: 11,
                    time: 77,
                    ips: vec![0x401000, 0x401234, 0x7f00_0000_1000],
                    stack: &[],
                    regs: vec![],
                    kernel_ips: vec![],
                },
                Record::Lost(42),
                Record::Other(3),
                Record::Throttle,
            ]
        );
    }

    #[test]
    fn a_context_switch_sample_splits_its_chain_and_switch_records_decode() {
        let kernel = [0xffff_ffff_8226_6833, 0xffff_ffff_8226_d89e];
        let mut chain = vec![PERF_CONTEXT_KERNEL];
        chain.extend(kernel);
        chain.extend([PERF_CONTEXT_USER, 0x7f00_0000_1000, 0x401234]);
        let mut buf = sample(5, 6, &chain);
        // The sample's ip is the kernel's: the user part keeps the chain's.
        buf[8..16].copy_from_slice(&kernel[0].to_ne_bytes());
        for (misc, out, preempted) in [
            (0u16, false, false),
            (1 << 13, true, false),
            (3 << 13, true, true),
        ] {
            let mut rec = PERF_RECORD_SWITCH.to_ne_bytes().to_vec();
            rec.extend_from_slice(&misc.to_ne_bytes());
            rec.extend_from_slice(&24u16.to_ne_bytes());
            rec.extend_from_slice(&5u32.to_ne_bytes());
            rec.extend_from_slice(&6u32.to_ne_bytes());
            rec.extend_from_slice(&900u64.to_ne_bytes());
            buf.extend_from_slice(&rec);
            let got = decode(&buf);
            assert_eq!(
                got.last(),
                Some(&Record::Switch {
                    pid: 5,
                    tid: 6,
                    time: 900,
                    out,
                    preempted
                })
            );
        }
        match &decode(&buf)[0] {
            Record::Sample {
                ips, kernel_ips, ..
            } => {
                assert_eq!(ips, &vec![0x7f00_0000_1000, 0x401234]);
                assert_eq!(kernel_ips, &kernel.to_vec());
            }
            other => panic!("{other:?}"),
        }
        // A switch record too short for its sample id decodes to nothing.
        let mut short = PERF_RECORD_SWITCH.to_ne_bytes().to_vec();
        short.extend_from_slice(&[0, 0, 12, 0, 1, 2, 3, 4]);
        assert_eq!(decode(&short), vec![Record::Other(PERF_RECORD_SWITCH)]);
    }

    #[test]
    fn a_chain_longer_than_its_record_is_refused_and_a_short_header_stops() {
        let mut bad = sample(1, 1, &[0x10, 0x20]);
        bad[32..40].copy_from_slice(&1000u64.to_ne_bytes());
        assert_eq!(decode(&bad), vec![Record::Other(PERF_RECORD_SAMPLE)]);
        assert_eq!(decode(&header(PERF_RECORD_SAMPLE, 4)), vec![]);
        assert_eq!(decode(&header(PERF_RECORD_SAMPLE, 200)), vec![]);
    }

    proptest! {
        #[test]
        fn hostile_buffers_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&buf);
        }

        #[test]
        fn encoded_samples_decode_to_their_chains(
            chains in proptest::collection::vec(proptest::collection::vec(1u64..USER_SPACE_END, 1..40), 0..8)
        ) {
            let buf: Vec<u8> = chains.iter().enumerate().flat_map(|(i, c)| sample(i as u32, 7, c)).collect();
            let got = decode(&buf);
            prop_assert_eq!(got.len(), chains.len());
            for (r, c) in got.iter().zip(&chains) {
                match r {
                    Record::Sample { ips, .. } => prop_assert_eq!(ips, c),
                    other => prop_assert!(false, "not a sample: {:?}", other),
                }
            }
        }
    }
}
