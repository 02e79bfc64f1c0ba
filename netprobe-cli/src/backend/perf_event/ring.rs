//! A perf event's ring buffer, mapped and read by the protocol of
//! `include/uapi/linux/perf_event.h` (`struct perf_event_mmap_page`, `data_head`/`data_tail`).

use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

/// One CPU's ring buffer: the `mmap`ed metadata page and data pages of its first event.
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

impl Ring {
    /// Maps `fd`'s ring buffer: the metadata page and `data_pages` data pages (a power of two).
    pub fn map(fd: OwnedFd, data_pages: usize) -> std::io::Result<Ring> {
        Ring::try_map(fd, data_pages).map_err(|(e, _)| e)
    }

    /// [`Ring::map`] that hands `fd` back when the mapping fails, to try a smaller one.
    pub fn try_map(fd: OwnedFd, data_pages: usize) -> Result<Ring, (std::io::Error, OwnedFd)> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + data_pages);
        // SAFETY: a fresh shared mapping of a perf event fd, of the size perf_event_open(2)
        // requires (1 + 2^n pages); the kernel owns its contents, we only read the data pages
        // and the header and write `data_tail`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err((std::io::Error::last_os_error(), fd));
        }
        Ok(Ring {
            fd,
            base: base.cast(),
            len,
        })
    }

    /// The event whose buffer this is.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn header(&self) -> *mut sys::bindings::perf_event_mmap_page {
        self.base.cast()
    }

    /// Appends every complete record the kernel wrote since the last call to `out` (records
    /// that wrap around the buffer's end come out contiguous) and hands the space back.
    pub fn drain(&mut self, out: &mut Vec<u8>) {
        self.drain_upto(out, usize::MAX);
    }

    /// [`Ring::drain`], but of whole records up to about `max` bytes (at least one record when
    /// any is waiting); returns whether more are waiting. A backlog read a piece at a time keeps
    /// what is decoded at once small.
    pub fn drain_upto(&mut self, out: &mut Vec<u8>, max: usize) -> bool {
        let h = self.header();
        // SAFETY: `h` points to the mapped metadata page for as long as `self` lives; the
        // kernel updates `data_head` concurrently, so it is read volatile and followed by an
        // acquire fence before the data is read (the protocol in include/uapi/linux/perf_event.h
        // above `data_head`).
        let (head, tail, data_offset, data_size) = unsafe {
            let head = std::ptr::addr_of!((*h).data_head).read_volatile();
            fence(Ordering::Acquire);
            (
                head,
                std::ptr::addr_of!((*h).data_tail).read_volatile(),
                std::ptr::addr_of!((*h).data_offset).read_volatile() as usize,
                std::ptr::addr_of!((*h).data_size).read_volatile() as usize,
            )
        };
        if data_size == 0 || data_offset.saturating_add(data_size) > self.len {
            return false;
        }
        let avail = (head.wrapping_sub(tail) as usize).min(data_size);
        let start = (tail as usize) % data_size;
        // SAFETY: the data area [data_offset, data_offset + data_size) lies inside the mapping
        // (checked above).
        let data = unsafe { self.base.add(data_offset) };
        let byte_at = |i: usize| -> u8 {
            // SAFETY: `i % data_size` is inside the data area; the kernel does not write between
            // tail and head until data_tail moves past them.
            unsafe { data.add(i % data_size).read() }
        };
        let mut take = avail;
        if avail > max {
            // Whole records: each begins with `struct perf_event_header { u32 type; u16 misc;
            // u16 size; }`.
            take = 0;
            while take < avail {
                let at = start + take;
                let size = u16::from_ne_bytes([byte_at(at + 6), byte_at(at + 7)]) as usize;
                if size < 8 || take + size > avail {
                    // Not a record boundary the kernel wrote: hand it all on, where the decoder
                    // counts it malformed.
                    take = avail;
                    break;
                }
                if take > 0 && take + size > max {
                    break;
                }
                take += size;
            }
        }
        let first = take.min(data_size - start);
        // SAFETY: both ranges lie inside the data area; see `byte_at`.
        unsafe {
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, take - first));
        }
        // SAFETY: as above; the release fence orders our reads of the data before the store
        // that lets the kernel overwrite it.
        unsafe {
            fence(Ordering::Release);
            std::ptr::addr_of_mut!((*h).data_tail).write_volatile(tail.wrapping_add(take as u64));
        }
        take < avail
    }
}

// SAFETY: the mapping is this `Ring`'s alone (made in `Ring::map`, unmapped in `drop`, never
// shared), so moving it to another thread moves its only user; the kernel's side of the
// protocol does not depend on which thread reads.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `Ring::map`, exactly once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
