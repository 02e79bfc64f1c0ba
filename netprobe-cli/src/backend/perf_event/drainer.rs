//! Emptying a [`Sampler`]'s ring buffers on a thread of their own.
//!
//! The reader's work on what it reads is uneven: naming the first frame in a library parses that
//! library's symbols and, where one is installed, its debug file (Debian's libc6-dbg: megabytes
//! of zlib-compressed DWARF, most of a second in a debug build), and unwinding opens each
//! image's call-frame information once. The rings hold about two of the reader's 100 ms ticks of
//! samples (`data_pages`), so a reader that emptied them between such steps would lose samples
//! to a full ring. The drainer copies the records out every [`DRAIN_INTERVAL`] into a bounded
//! queue instead, as `perf record` empties its rings into a file before reporting: the reader
//! then takes them at its own pace. The queue's bound ([`MAX_QUEUED_CHUNKS`]) caps the memory:
//! when the reader falls that far behind the drainer waits, the rings fill, and the kernel counts
//! the samples it drops (`PERF_RECORD_LOST`), as without the drainer.

use super::Sampler;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the rings are emptied: a tenth of the time they hold at the highest frequency.
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(20);

/// Most chunks (one per drain that found records) waiting for the reader: 10 s of drains.
pub const MAX_QUEUED_CHUNKS: usize = 500;

/// A sampler whose rings a thread empties.
pub struct Drainer {
    stop: Arc<AtomicBool>,
    queue: Receiver<Vec<u8>>,
    thread: Option<JoinHandle<Sampler>>,
}

impl Drainer {
    /// Moves `sampler` (enabled or not) to a thread that empties its rings every
    /// [`DRAIN_INTERVAL`] until [`Drainer::finish`].
    pub fn start(mut sampler: Sampler) -> std::io::Result<Drainer> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, queue) = sync_channel::<Vec<u8>>(MAX_QUEUED_CHUNKS);
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("netprobe-drain".into())
            .spawn(move || {
                loop {
                    let last = stopping.load(Ordering::Acquire);
                    if last {
                        // Records written before the events stopped are still in the rings.
                        sampler.disable();
                    }
                    let mut chunk = Vec::new();
                    sampler.drain(&mut chunk);
                    if !chunk.is_empty() && tx.send(chunk).is_err() {
                        break;
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(DRAIN_INTERVAL);
                }
                sampler
            })?;
        Ok(Drainer {
            stop,
            queue,
            thread: Some(thread),
        })
    }

    /// Appends to `out` what was drained, waiting up to `wait` for the first chunk.
    pub fn take(&self, wait: Duration, out: &mut Vec<u8>) {
        match self.queue.recv_timeout(wait) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(chunk) = self.queue.try_recv() {
            out.extend_from_slice(&chunk);
        }
    }

    /// Stops sampling, appends everything still queued or in the rings to `out`, and closes the
    /// events.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The thread may wait on a full queue: keep taking until it has ended.
        while !thread.is_finished() {
            self.take(DRAIN_INTERVAL, out);
        }
        while let Ok(chunk) = self.queue.try_recv() {
            out.extend_from_slice(&chunk);
        }
        if let Ok(sampler) = thread.join() {
            drop(sampler);
        }
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        // Dropped without finish (an error path): stop the thread and let it close the events.
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            while !thread.is_finished() {
                let _ = self.queue.recv_timeout(DRAIN_INTERVAL);
            }
            let _ = thread.join();
        }
    }
}
