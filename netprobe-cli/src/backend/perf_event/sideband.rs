//! The records perf writes beside samples about the traced processes' address spaces, as
//! `perf record` tracks them to name a workload's frames after it exited: `PERF_RECORD_MMAP2`
//! (an executable mapping: range, file offset, device, inode and path), `PERF_RECORD_FORK` (a new
//! process starts with its parent's mappings) and `PERF_RECORD_COMM` with
//! `PERF_RECORD_MISC_COMM_EXEC` (an exec drops them), decoded into
//! [`netprobe_core::maps::RecordedMaps`] (record layouts: `include/uapi/linux/perf_event.h`).
//!
//! One event per task and CPU asks for them ([`track`]): the kernel writes a task's side-band
//! records through the events of the task's context that match the CPU it runs on
//! (`perf_iterate_sb` in `kernel/events/core.c`), and inherited events carry the request into the
//! task's children. With `sample_id_all` each record ends in the sample id of the event's
//! `sample_type`; [`track`] is for events whose sample id is `TID | TIME` alone (`u32 pid, tid;
//! u64 time`), so a record's time is its last eight bytes. Bounds-checked: a cut record decodes to
//! nothing.

use super::fields::{u32_at, u64_at};
use netprobe_core::maps::{mmap_record_entry, Device, MmapRecord, RecordedMaps};
use perf_event_open_sys as sys;

/// `PERF_RECORD_COMM`: `{ header; u32 pid, tid; char comm[]; sample_id }`.
pub const PERF_RECORD_COMM: u32 = 3;
/// `PERF_RECORD_FORK`: `{ header; u32 pid, ppid, tid, ptid; u64 time; sample_id }`.
pub const PERF_RECORD_FORK: u32 = 7;
/// `PERF_RECORD_MMAP2`: `{ header; u32 pid, tid; u64 addr, len, pgoff; u32 maj, min; u64 ino,
/// ino_generation; u32 prot, flags; char filename[]; sample_id }`.
pub const PERF_RECORD_MMAP2: u32 = 10;
/// In a COMM record's `misc`: the name changed because the task called execve.
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
/// In an MMAP2 record's `misc`: a build id stands where device and inode would (`build_id`).
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// The sample id's size with `TID | TIME`.
const SAMPLE_ID: usize = 16;

/// Asks `a` (an event whose `sample_type` holds `TID | TIME` and none of `ID`, `STREAM_ID`,
/// `CPU`, `IDENTIFIER`) for its task's executable mappings, forks and execs, each stamped with
/// its time.
pub fn track(a: &mut sys::bindings::perf_event_attr) {
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_task(1);
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_sample_id_all(1);
}

/// What one side-band record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sideband {
    Mmap {
        pid: u32,
        time: u64,
        record: MmapRecord,
        /// The record's name bytes (NUL-padded).
        filename: Vec<u8>,
    },
    Fork {
        parent: u32,
        child: u32,
        time: u64,
    },
    Exec {
        pid: u32,
        time: u64,
    },
}

/// Decodes record `rec` (header included) of type `kind`; `None` for other types, a thread's
/// fork (not a new process), a COMM that is no exec, a build-id mapping, or a cut record.
pub fn decode(kind: u32, rec: &[u8]) -> Option<Sideband> {
    let misc = u16::from_ne_bytes(rec.get(4..6)?.try_into().ok()?);
    let time_at_end = || u64_at(rec, rec.len().checked_sub(8)?);
    match kind {
        PERF_RECORD_MMAP2 if misc & PERF_RECORD_MISC_MMAP_BUILD_ID == 0 => {
            let end = rec.len().checked_sub(SAMPLE_ID)?;
            Some(Sideband::Mmap {
                pid: u32_at(rec, 8)?,
                time: time_at_end()?,
                record: MmapRecord {
                    addr: u64_at(rec, 16)?,
                    len: u64_at(rec, 24)?,
                    pgoff: u64_at(rec, 32)?,
                    dev: Device {
                        major: u32_at(rec, 40)?,
                        minor: u32_at(rec, 44)?,
                    },
                    ino: u64_at(rec, 48)?,
                    prot: u32_at(rec, 64)?,
                    flags: u32_at(rec, 68)?,
                },
                filename: rec.get(72..end)?.to_vec(),
            })
        }
        PERF_RECORD_FORK => {
            let (child, parent) = (u32_at(rec, 8)?, u32_at(rec, 12)?);
            (child != parent).then_some(Sideband::Fork {
                parent,
                child,
                time: u64_at(rec, 24)?,
            })
        }
        PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => Some(Sideband::Exec {
            pid: u32_at(rec, 8)?,
            time: time_at_end()?,
        }),
        _ => None,
    }
}

impl Sideband {
    /// Adds what the record says to `maps`.
    pub fn apply(&self, maps: &RecordedMaps) {
        match *self {
            Sideband::Mmap {
                pid,
                time,
                ref record,
                ref filename,
            } => maps.mapped(pid, time, mmap_record_entry(record, filename)),
            Sideband::Fork {
                parent,
                child,
                time,
            } => maps.forked(parent, child, time),
            Sideband::Exec { pid, time } => maps.exec(pid, time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(kind: u32, misc: u16, body: &[u8], time: u64) -> Vec<u8> {
        let mut rec = kind.to_ne_bytes().to_vec();
        rec.extend_from_slice(&misc.to_ne_bytes());
        let size = 8 + body.len() + SAMPLE_ID;
        rec.extend_from_slice(&(size as u16).to_ne_bytes());
        rec.extend_from_slice(body);
        rec.extend_from_slice(&[0; 8]);
        rec.extend_from_slice(&time.to_ne_bytes());
        rec
    }

    #[test]
    fn mmap2_fork_and_exec_records_decode_as_the_abi_lays_them_out() {
        let mut body = Vec::new();
        for v in [7u32, 8] {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [0x40_1000u64, 0x1000, 0x1000] {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [8u32, 1] {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [1234u64, 0] {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [5u32, 2] {
            body.extend_from_slice(&v.to_ne_bytes());
        }
        body.extend_from_slice(b"/usr/bin/p\0\0\0\0\0\0");
        let rec = framed(PERF_RECORD_MMAP2, 2, &body, 99);
        let Some(Sideband::Mmap {
            pid: 7,
            time: 99,
            record,
            filename,
        }) = decode(PERF_RECORD_MMAP2, &rec)
        else {
            panic!("{:?}", decode(PERF_RECORD_MMAP2, &rec));
        };
        assert_eq!(
            (record.addr, record.len, record.ino, record.prot),
            (0x40_1000, 0x1000, 1234, 5)
        );
        assert_eq!(record.dev, Device { major: 8, minor: 1 });
        let maps = RecordedMaps::new();
        Sideband::Mmap {
            pid: 7,
            time: 99,
            record,
            filename,
        }
        .apply(&maps);
        let view = maps.view(7).unwrap();
        assert_eq!(
            view.maps[0].path.file(),
            Some(std::path::Path::new("/usr/bin/p"))
        );
        // A build-id record holds no device and inode: skipped.
        assert_eq!(
            decode(
                PERF_RECORD_MMAP2,
                &framed(PERF_RECORD_MMAP2, 2 | (1 << 14), &body, 1)
            ),
            None
        );

        let words = |w: &[u32], tail: &[u8]| -> Vec<u8> {
            w.iter()
                .flat_map(|v| v.to_ne_bytes())
                .chain(tail.iter().copied())
                .collect()
        };
        let fork = words(&[11, 7, 11, 7], &5u64.to_ne_bytes());
        assert_eq!(
            decode(PERF_RECORD_FORK, &framed(PERF_RECORD_FORK, 0, &fork, 5)),
            Some(Sideband::Fork {
                parent: 7,
                child: 11,
                time: 5
            })
        );
        let thread = words(&[7, 7, 12, 7], &5u64.to_ne_bytes());
        assert_eq!(
            decode(PERF_RECORD_FORK, &framed(PERF_RECORD_FORK, 0, &thread, 5)),
            None
        );
        let comm = words(&[7, 7], b"p\0\0\0\0\0\0\0");
        assert_eq!(
            decode(
                PERF_RECORD_COMM,
                &framed(PERF_RECORD_COMM, 1 << 13, &comm, 42)
            ),
            Some(Sideband::Exec { pid: 7, time: 42 })
        );
        assert_eq!(
            decode(PERF_RECORD_COMM, &framed(PERF_RECORD_COMM, 0, &comm, 42)),
            None
        );
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panicking(kind in 0u32..12, rec in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Some(s) = decode(kind, &rec) {
                s.apply(&RecordedMaps::new());
            }
        }
    }
}
