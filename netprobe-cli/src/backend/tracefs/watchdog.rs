//! The watchdog: a small child process that removes the session's probes and instance if netprobe
//! dies without cleaning up (SIGKILL, OOM kill, a crash).
//!
//! netprobe forks it first thing, while it has one thread, and keeps the write end of a pipe; the
//! watchdog blocks reading the other end. On a clean exit netprobe writes [`CLEAN_EXIT`] and the
//! watchdog leaves quietly. When the pipe closes without that byte (netprobe died), it removes the
//! group and instance `netprobe_<PID>` with [`cleanup::remove_session`]. The watchdog moves into
//! its own session (`setsid`) and ignores SIGINT/SIGHUP, so Ctrl-C or a closed terminal, which hit
//! netprobe's whole process group, do not take it down before it is needed.

use crate::backend::tracefs::cleanup;
use crate::backend::tracefs::probe::GroupName;
use crate::backend::tracefs::Tracefs;
use crate::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// The byte netprobe sends when it has cleaned up itself.
pub const CLEAN_EXIT: u8 = b'C';

pub use crate::backend::tracefs::cleanup::WATCHDOG_COMM;

/// The parent's handle on its watchdog.
#[derive(Debug)]
pub struct Watchdog {
    pipe: Option<OwnedFd>,
    pid: libc::pid_t,
}

/// Threads of this process now (`/proc/self/status`, `Threads:`); 0 if unreadable.
fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

impl Watchdog {
    /// Forks the watchdog for session `name`.
    ///
    /// Must be called while this process has a single thread (the child runs ordinary Rust code,
    /// which is only safe after fork when no other thread could hold a lock); returns
    /// [`Error::Usage`] otherwise.
    pub fn arm(tracefs: &Tracefs, name: &GroupName) -> Result<Watchdog> {
        if thread_count() != 1 {
            return Err(Error::usage(
                "internal: the watchdog must be forked before any thread is started",
            ));
        }
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::io("pipe", std::io::Error::last_os_error()));
        }
        // SAFETY: pipe2 returned two fresh descriptors we own.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the process is single-threaded (checked above), so the child may run any code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::io("fork", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            drop(write_end);
            let code = watch(tracefs, name, read_end);
            // SAFETY: leaving the child without running the parent's destructors or atexit hooks.
            unsafe { libc::_exit(code) };
        }
        drop(read_end);
        Ok(Watchdog {
            pipe: Some(write_end),
            pid,
        })
    }

    /// Tells the watchdog that netprobe cleaned up, and reaps it.
    pub fn disarm(mut self) {
        self.finish(true);
    }

    /// Closes the pipe (after the clean-exit byte when `clean`) and waits for the watchdog, so that
    /// whatever it removes is gone when netprobe exits.
    fn finish(&mut self, clean: bool) {
        if let Some(pipe) = self.pipe.take() {
            if clean {
                let b = [CLEAN_EXIT];
                // SAFETY: writing one byte from a valid buffer to our pipe.
                unsafe { libc::write(pipe.as_raw_fd(), b.as_ptr().cast(), 1) };
            }
            drop(pipe);
            let mut status = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }
}

/// The child's life: wait for the parent's verdict, clean up if it died.
fn watch(tracefs: &Tracefs, name: &GroupName, pipe: OwnedFd) -> i32 {
    // SAFETY: plain syscalls on our own process.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"netprobe-watch".as_ptr());
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        // stdin/stdout to /dev/null: a pipe reader waiting for netprobe's stdout to close must not
        // wait for us. stderr stays for a one-line note when cleanup fails.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            if null > 2 {
                libc::close(null);
            }
        }
    }
    close_other_fds(pipe.as_raw_fd());
    let mut b = [0u8; 1];
    let n = loop {
        // SAFETY: reading into a valid one-byte buffer.
        let n = unsafe { libc::read(pipe.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        break n;
    };
    if n == 1 && b[0] == CLEAN_EXIT {
        return 0;
    }
    match cleanup::remove_session(tracefs, name, Duration::from_secs(5)) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("netprobe watchdog: could not remove session {name}: {e}");
            1
        }
    }
}

/// Closes every descriptor above 2 except `keep` (the parent may have opened some before arming).
fn close_other_fds(keep: i32) {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        if fd > 2 && fd != keep {
            // SAFETY: closing a descriptor of our own process; the read_dir handle is already
            // dropped, so nothing still uses it.
            unsafe { libc::close(fd) };
        }
    }
}

impl Drop for Watchdog {
    /// Dropping without [`Watchdog::disarm`] (an error path, a panic unwinding) lets the
    /// watchdog remove whatever the session's own teardown left, and waits for it.
    fn drop(&mut self) {
        self.finish(false);
    }
}
