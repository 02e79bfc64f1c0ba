//! The process a thread belonged to after it exited. A hit is read a moment after the call it
//! records; a short-lived thread may be gone by then, and `/proc/TID` with it. A backend that
//! keeps that fact elsewhere (tracefs: the `saved_tgids` table) hands the sinks a lookup.

/// Finds the process of an exited thread (a kernel thread id).
pub trait ExitedThreads: Send {
    /// The process thread `tid` belonged to; `None` when not known.
    fn process_of(&mut self, tid: u32) -> Option<u32>;

    /// Forgets what was read so far (a long-running session keeps bounded memory; the next
    /// lookup reads afresh).
    fn forget(&mut self) {}
}
