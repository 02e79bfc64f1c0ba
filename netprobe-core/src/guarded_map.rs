//! Read-only file mappings that survive the file being truncated under them.
//!
//! Reading a page of a `MAP_SHARED` or `MAP_PRIVATE` file mapping that lies past the file's
//! current end raises SIGBUS (mmap(2), "SIGBUS: Attempted access to a page of the buffer that
//! lies beyond the end of the mapped file"). netprobe maps files other users own, who may shrink
//! them at any time, so without a guard any of them could kill it.
//!
//! The guard: every mapping is registered in a fixed, process-wide table of address ranges, and a
//! SIGBUS handler (installed once, chained to the handler that was there before) that finds the
//! faulting address (`si_addr`, sigaction(2)) in a registered range maps an anonymous zero page
//! over the faulting page (`MAP_FIXED`, mmap(2)), marks the range changed, and returns: the
//! faulting load runs again and reads zeros. Zeros are never used: whoever parsed the bytes asks
//! [`GuardedMap::changed`] afterwards (see `FileBytes::check_unchanged`) and reports that the
//! file changed while it was read. Faults at addresses that are not in the table go to the
//! previous handler (Rust's own stack-overflow handler, or the default action).
//!
//! This is the only `unsafe` code of netprobe-core.
#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// How many mappings may be alive at once. The parse cache keeps at most
/// [`crate::cache::MAX_IMAGES`] images; the rest are short-lived (one per image a command reads
/// outside the cache).
const SLOTS: usize = 1024;

/// One registered range. Written only by [`register`] and [`unregister`] (under `claimed`),
/// read by the signal handler without locks: a sequence counter (odd while the range is being
/// written) lets the handler skip a slot that changes under it.
struct Slot {
    claimed: AtomicBool,
    seq: AtomicUsize,
    start: AtomicUsize,
    end: AtomicUsize,
    changed: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // each array element gets its own copy
const EMPTY: Slot = Slot {
    claimed: AtomicBool::new(false),
    seq: AtomicUsize::new(0),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    changed: AtomicBool::new(false),
};

static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];

/// The page size, read once before the handler is installed (sysconf(3) is not on
/// signal-safety(7)'s list, so the handler does not call it).
static PAGE: AtomicUsize = AtomicUsize::new(0);

/// The SIGBUS action that was in place before ours, to hand foreign faults to.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A read-only mapping of (part of) a file, registered with the SIGBUS guard while it lives.
pub struct GuardedMap {
    map: memmap2::Mmap,
    slot: usize,
}

impl GuardedMap {
    /// Maps `len` bytes of `file` from `offset` (any offset: memmap2 maps from the page below
    /// and hides the difference) read-only, and registers them. `len` must be non-zero.
    pub fn new(file: &File, offset: u64, len: usize) -> std::io::Result<GuardedMap> {
        install_handler()?;
        // SAFETY: a read-only private mapping (mmap(2) PROT_READ, MAP_PRIVATE); nothing is ever
        // written through it. memmap2 documents its constructors `unsafe` because another
        // process may truncate the file under the mapping: reading a page past the new end
        // raises SIGBUS, which the handler installed above turns into zeros and a `changed`
        // mark once the range is registered below; the caller checks `changed` before trusting
        // what it parsed. Until registration finishes nothing reads the mapping.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len)
                .map(file)?
        };
        let start = map.as_ptr() as usize;
        let slot = register(start, start + map.len()).ok_or_else(|| {
            std::io::Error::other(format!(
                "more than {SLOTS} files are mapped at once; netprobe maps fewer (this is a bug)"
            ))
        })?;
        Ok(GuardedMap { map, slot })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Whether a read of the mapping hit a page the file no longer had (it was truncated while
    /// mapped): the bytes read there were zeros, not the file's.
    pub fn changed(&self) -> bool {
        TABLE[self.slot].changed.load(Ordering::Acquire)
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Unregistered before memmap2 unmaps the range (the field is dropped after this), so the
        // handler never sees a range that is no longer mapped. The anonymous pages the handler
        // put inside the range go with it: munmap(2) removes every mapping in the range.
        unregister(self.slot);
    }
}

impl std::fmt::Debug for GuardedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GuardedMap({} bytes)", self.map.len())
    }
}

fn register(start: usize, end: usize) -> Option<usize> {
    let i = TABLE.iter().position(|s| {
        s.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    })?;
    let s = &TABLE[i];
    s.seq.fetch_add(1, Ordering::AcqRel); // odd: being written
    s.start.store(start, Ordering::Relaxed);
    s.end.store(end, Ordering::Relaxed);
    s.changed.store(false, Ordering::Relaxed);
    s.seq.fetch_add(1, Ordering::Release); // even: readable
    Some(i)
}

fn unregister(i: usize) {
    let s = &TABLE[i];
    s.seq.fetch_add(1, Ordering::AcqRel);
    s.start.store(0, Ordering::Relaxed);
    s.end.store(0, Ordering::Relaxed);
    s.seq.fetch_add(1, Ordering::Release);
    s.claimed.store(false, Ordering::Release);
}

/// The slot whose live range holds `addr`; lock-free and allocation-free (called from the
/// signal handler). A slot being written at that moment is skipped: it is not the faulting
/// mapping, which its reader keeps alive.
fn slot_of(addr: usize) -> Option<&'static Slot> {
    TABLE.iter().find(|s| {
        let before = s.seq.load(Ordering::Acquire);
        if before % 2 == 1 {
            return false;
        }
        let (start, end) = (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        s.seq.load(Ordering::Relaxed) == before && start <= addr && addr < end
    })
}

/// Installs the SIGBUS handler once per process; later calls return its first result.
fn install_handler() -> std::io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        // SAFETY: sysconf(3) with a valid name.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        PAGE.store(usize::try_from(page).unwrap_or(4096), Ordering::Relaxed);
        // SAFETY: sigaction(2) with a zeroed (valid: empty mask, no flags) struct to fill in;
        // reading the current action changes nothing.
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let _ = PREVIOUS.set(previous);
        // SAFETY: sigaction(2): SA_SIGINFO makes the kernel call `on_sigbus` with the siginfo
        // (whose si_addr is the faulting address for a fault) and the context; SA_ONSTACK runs
        // it on the thread's alternate stack when it has one (Rust's threads do); the mask is
        // emptied with sigemptyset(3). PREVIOUS is set before the handler can run.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
            }
        }
        Ok(())
    });
    result.map_err(std::io::Error::from_raw_os_error)
}

/// The SIGBUS handler. It only loads atomics, calls mmap(2) and sigaction(2), and saves and
/// restores errno. sigaction(2) is async-signal-safe by signal-safety(7); mmap(2) is not on that
/// list, but glibc's and musl's `mmap` are a bare system call that touches no lock or allocator
/// state, which is what the list guards against (the same use as the JVM's and Go's fault
/// handlers make of it).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: errno is thread-local; signal-safety(7) asks a handler to save and restore it.
    let errno = unsafe { libc::__errno_location() };
    let saved = unsafe { *errno };
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t (sigaction(2)); si_addr is
    // the faulting address for SIGBUS raised by a memory access.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    let handled = page != 0
        && slot_of(addr).is_some_and(|slot| {
            let at = addr & !(page - 1);
            // SAFETY: mmap(2) MAP_FIXED over the one page that holds `addr`, which lies in a
            // registered range, i.e. inside a live read-only file mapping of ours (its reader
            // holds it, so it is not unmapped meanwhile): the file's vanished page becomes a
            // private zero page; no other memory is touched.
            let mapped = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            let ok = mapped != libc::MAP_FAILED;
            if ok {
                slot.changed.store(true, Ordering::Release);
            }
            ok
        });
    if !handled {
        chain(sig, info, context);
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

/// Hands a SIGBUS that is not ours to the action that was in place before ours.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(previous) = PREVIOUS.get() else {
        return default_action(sig);
    };
    match previous.sa_sigaction {
        libc::SIG_DFL | libc::SIG_IGN => default_action(sig),
        handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
            // signature (sigaction(2)); it gets the arguments the kernel gave us.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(handler) };
            f(sig, info, context)
        }
        handler => {
            // SAFETY: without SA_SIGINFO a handler takes the signal number only (sigaction(2)).
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            f(sig)
        }
    }
}

/// Restores the default action and lets the signal take it: a fault re-executes the faulting
/// instruction on return and dies of SIGBUS as it would have without us; a SIGBUS sent by
/// kill(2) is raised again (its default action is to terminate with a core dump, signal(7)).
fn default_action(sig: libc::c_int) {
    // SAFETY: sigaction(2) and raise(3) are async-signal-safe (signal-safety(7)); the struct is
    // zeroed (empty mask) with SIG_DFL.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &action, std::ptr::null_mut());
        libc::raise(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_file_reads_zeros_and_is_marked_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let page = 4096 * 4;
        std::fs::write(&path, vec![7u8; page * 3]).unwrap();
        let file = File::open(&path).unwrap();
        let map = GuardedMap::new(&file, 0, page * 3).unwrap();
        assert_eq!(map.bytes()[page * 2], 7);
        assert!(!map.changed());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        // The pages past the end are gone: reading them would be SIGBUS without the guard.
        let sum: u64 = map.bytes().iter().map(|&b| u64::from(b)).sum();
        assert_eq!(sum, 0);
        assert!(map.changed());
        let slot = map.slot;
        drop(map);
        assert_eq!(TABLE[slot].end.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn addresses_outside_every_range_are_not_ours() {
        let here = 0usize;
        assert!(slot_of(here).is_none());
    }
}
