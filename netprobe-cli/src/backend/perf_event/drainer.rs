//! Emptying [`Sampler`]s' ring buffers on a thread of their own.
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
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the rings are emptied: a tenth of the time they hold at the highest frequency.
pub const DRAIN_INTERVAL: Duration = Duration::from_millis(20);

/// Most chunks (one per drain that found records) waiting for the reader: 10 s of drains.
pub const MAX_QUEUED_CHUNKS: usize = 500;

/// Emptied buffers kept for the drainer to fill again.
const RECYCLED_BUFFERS: usize = 8;

/// Samplers whose rings a thread empties.
pub struct Drainer {
    stop: Arc<AtomicBool>,
    /// Emptied buffers going back to the drainer, so a busy profile (a context switch a few
    /// microseconds apart, each with its stack) does not allocate and fault in fresh pages for
    /// every drain.
    recycle: SyncSender<Vec<u8>>,
    /// Chunks of records, each with the index of the sampler whose rings it came from.
    queue: Receiver<(usize, Vec<u8>)>,
    thread: Option<JoinHandle<Vec<Sampler>>>,
}

impl Drainer {
    /// Moves `samplers` (enabled or not) to a thread that empties their rings every
    /// [`DRAIN_INTERVAL`] until [`Drainer::finish`].
    pub fn start(mut samplers: Vec<Sampler>) -> std::io::Result<Drainer> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, queue) = sync_channel::<(usize, Vec<u8>)>(MAX_QUEUED_CHUNKS);
        let (recycle, recycled) = sync_channel::<Vec<u8>>(RECYCLED_BUFFERS);
        let recycle_own = recycle.clone();
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("netprobe-drain".into())
            .spawn(move || {
                'draining: loop {
                    let last = stopping.load(Ordering::Acquire);
                    if last {
                        // Records written before the events stopped are still in the rings.
                        samplers.iter().for_each(Sampler::disable);
                    }
                    for (i, sampler) in samplers.iter_mut().enumerate() {
                        let mut chunk = recycled.try_recv().unwrap_or_default();
                        chunk.clear();
                        sampler.drain(&mut chunk);
                        if chunk.is_empty() {
                            // Back to the pool for the next drain (a full pool drops it).
                            let _ = recycle_own.try_send(chunk);
                        } else if tx.send((i, chunk)).is_err() {
                            break 'draining;
                        }
                    }
                    if last {
                        break;
                    }
                    std::thread::sleep(DRAIN_INTERVAL);
                }
                samplers
            })?;
        Ok(Drainer {
            stop,
            recycle,
            queue,
            thread: Some(thread),
        })
    }

    /// Appends to `out` the chunks drained so far, each with the index of its sampler, waiting
    /// up to `wait` for the first. Give each back ([`Drainer::recycle`]) once read.
    pub fn take(&self, wait: Duration, out: &mut Vec<(usize, Vec<u8>)>) {
        match self.queue.recv_timeout(wait) {
            Ok(chunk) => out.push(chunk),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
        out.extend(self.queue.try_iter());
    }

    /// Hands a chunk's buffer back for the drainer to fill again.
    pub fn recycle(&self, mut buf: Vec<u8>) {
        buf.clear();
        let _ = self.recycle.try_send(buf);
    }

    /// Stops sampling, appends everything still queued or in the rings to `out`, and closes the
    /// events.
    pub fn finish(mut self, out: &mut Vec<(usize, Vec<u8>)>) {
        self.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The thread may wait on a full queue: keep taking until it has ended.
        while !thread.is_finished() {
            self.take(DRAIN_INTERVAL, out);
        }
        self.take(Duration::ZERO, out);
        if let Ok(samplers) = thread.join() {
            drop(samplers);
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
