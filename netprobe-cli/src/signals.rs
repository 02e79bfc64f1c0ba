//! SIGINT, SIGTERM and SIGHUP end a session cleanly: the handler only records the signal and
//! writes a byte to a self-pipe that the event loop polls (write(2) is async-signal-safe), so the
//! loop stops, drains, removes the probes and exits. A second signal during teardown does not
//! interrupt it.

use crate::error::{Error, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signals that stop a session.
pub const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int) {
    LAST_SIGNAL.store(sig, Ordering::SeqCst);
    let fd = WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = [1u8];
        // SAFETY: write(2) is async-signal-safe; the buffer is valid; errors (full pipe) are fine.
        unsafe { libc::write(fd, b.as_ptr().cast(), 1) };
    }
}

/// The read end of the self-pipe; handlers are installed while it lives.
#[derive(Debug)]
pub struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
}

impl SignalPipe {
    /// Installs the handlers for [`STOP_SIGNALS`].
    pub fn install() -> Result<SignalPipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(Error::io("pipe", std::io::Error::last_os_error()));
        }
        // SAFETY: fresh descriptors we own.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        WRITE_FD.store(write.as_raw_fd(), Ordering::SeqCst);
        LAST_SIGNAL.store(0, Ordering::SeqCst);
        for sig in STOP_SIGNALS {
            // SAFETY: installing a handler that only touches atomics and calls write(2).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(Error::io("sigaction", std::io::Error::last_os_error()));
                }
            }
        }
        Ok(SignalPipe {
            read,
            _write: write,
        })
    }

    /// The signal received so far, if any (and empties the pipe).
    pub fn received(&self) -> Option<i32> {
        let mut buf = [0u8; 64];
        // SAFETY: non-blocking read into a valid buffer.
        while unsafe { libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {
        }
        match LAST_SIGNAL.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        WRITE_FD.store(-1, Ordering::SeqCst);
    }
}

/// The conventional name of a signal number.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "signal",
    }
}
