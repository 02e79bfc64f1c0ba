//! The handler threads: each takes a complete request from the queue, answers it, and writes the
//! answer (through TLS when configured) within [`RESPONSE_DEADLINE`], dropping a client that
//! takes no byte of it for [`STALL_LIMIT`].

use super::reading::Request;
use super::request::parse_head;
use super::response::{response, route, Answering};
use super::{RESPONSE_DEADLINE, STALL_LIMIT, TICK};
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::Instant;

/// A handler thread: answers requests from `queue` until the reading thread has stopped.
pub(super) fn answer_requests(queue: &Mutex<Receiver<Request>>, shared: &Answering) {
    loop {
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            Ok(r) => answer(r, shared),
            Err(_) => return,
        }
    }
}

fn answer(r: Request, shared: &Answering) {
    let Request { stream, tls, head } = r;
    let answer = match parse_head(&head) {
        None => response(
            400,
            "text/plain; charset=utf-8",
            "bad request\n".into(),
            &[],
        ),
        Some(h) => route(&h, shared),
    };
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let mut out = Deadlined {
        stream: &stream,
        deadline: Instant::now() + RESPONSE_DEADLINE,
        stop: &shared.stop,
        stalled_since: None,
    };
    // A client that hung up or does not read is its own business: the connection is closed.
    let _ = match tls {
        None => out.write_all(&answer),
        Some(mut tls) => write_tls(&mut tls, &answer, &mut out),
    };
}

/// Writes `answer` through `tls`, then its close_notify alert (RFC 8446 section 6.1).
fn write_tls(
    tls: &mut rustls::ServerConnection,
    answer: &[u8],
    out: &mut Deadlined<'_>,
) -> io::Result<()> {
    let mut rest = answer;
    while !rest.is_empty() {
        let n = tls.writer().write(rest)?;
        rest = &rest[n..];
        if n == 0 && !tls.wants_write() {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while tls.wants_write() {
            tls.write_tls(out)?;
        }
    }
    tls.send_close_notify();
    while tls.wants_write() {
        tls.write_tls(out)?;
    }
    Ok(())
}

/// A blocking socket whose writes give up at `deadline`, after [`STALL_LIMIT`] without
/// progress, or when the server stops.
struct Deadlined<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
    stop: &'a AtomicBool,
    /// Since when the socket has taken nothing (`None`: it took the last write).
    stalled_since: Option<Instant>,
}

impl Write for Deadlined<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let now = Instant::now();
            let left = self.deadline.saturating_duration_since(now);
            let stalled = self
                .stalled_since
                .is_some_and(|t| now.duration_since(t) >= STALL_LIMIT);
            if left.is_zero() || stalled || self.stop.load(Ordering::Acquire) {
                return Err(io::ErrorKind::TimedOut.into());
            }
            // SO_SNDTIMEO (socket(7)): a write that can send nothing for this long fails with
            // EAGAIN, and the loop looks at the limits and at shutdown again.
            self.stream.set_write_timeout(Some(left.min(TICK)))?;
            match (&mut &*self.stream).write(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    self.stalled_since.get_or_insert(now);
                }
                r => {
                    self.stalled_since = None;
                    return r;
                }
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
