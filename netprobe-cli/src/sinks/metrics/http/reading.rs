//! The reading thread: accepts connections and reads each one's request head (the TLS
//! handshake included) with poll(2), never waiting on one client; a complete head goes to the
//! handlers' queue, an oversized one or one that finds the queue full is refused at once, one
//! past [`REQUEST_DEADLINE`] is closed.

use super::request::head_end;
use super::response::{reason, response};
use super::{HEAD_LIMIT, MAX_CONNECTIONS, REQUEST_DEADLINE, TICK};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

/// A connection whose request head has arrived, for a handler.
pub(super) struct Request {
    pub(super) stream: TcpStream,
    pub(super) tls: Option<Box<rustls::ServerConnection>>,
    pub(super) head: Vec<u8>,
}

/// A connection still sending its request.
struct Incoming {
    request: Request,
    deadline: Instant,
}

/// Where an [`Incoming`] connection stands after reading what it sent.
enum Progress {
    Waiting,
    Complete,
    TooLarge,
    Closed,
}

impl Incoming {
    fn progress(&mut self) -> Progress {
        let r = &mut self.request;
        let mut buf = [0u8; 4096];
        let Some(tls) = r.tls.as_mut() else {
            loop {
                match r.stream.read(&mut buf) {
                    Ok(0) => return Progress::Closed,
                    Ok(n) => {
                        r.head.extend_from_slice(&buf[..n]);
                        if let Some(p) = head_progress(&r.head) {
                            return p;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Waiting,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Progress::Closed,
                }
            }
        };
        // TLS (rustls' non-blocking use, `rustls::Connection` docs): records in from the socket,
        // then the plaintext they carry, then whatever the handshake has to send.
        match tls.read_tls(&mut r.stream) {
            Ok(0) => return Progress::Closed,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Progress::Closed,
        }
        if tls.process_new_packets().is_err() {
            // Not TLS (a plain HTTP request, say), or a failed handshake: send rustls' alert.
            let _ = tls.write_tls(&mut r.stream);
            return Progress::Closed;
        }
        loop {
            match tls.reader().read(&mut buf) {
                Ok(0) => return Progress::Closed,
                Ok(n) => {
                    r.head.extend_from_slice(&buf[..n]);
                    if let Some(p) = head_progress(&r.head) {
                        return p;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Progress::Closed,
            }
        }
        while tls.wants_write() {
            match tls.write_tls(&mut r.stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Progress::Closed,
            }
        }
        Progress::Waiting
    }

    /// The poll(2) events to wait for.
    fn events(&self) -> libc::c_short {
        match &self.request.tls {
            Some(t) if t.wants_write() => libc::POLLIN | libc::POLLOUT,
            _ => libc::POLLIN,
        }
    }
}

/// Whether `head` (what a client sent so far) is a complete request head, or too large.
fn head_progress(head: &[u8]) -> Option<Progress> {
    match head_end(head) {
        Some(end) if end + 4 <= HEAD_LIMIT => Some(Progress::Complete),
        Some(_) => Some(Progress::TooLarge),
        None if head.len() > HEAD_LIMIT => Some(Progress::TooLarge),
        None => None,
    }
}

/// The reading thread: accepts connections and reads their requests (TLS handshake included)
/// without blocking, hands complete ones to the handlers, until `stop`.
pub(super) fn read_requests(
    listener: &TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    jobs: &SyncSender<Request>,
    stop: &AtomicBool,
) {
    // Oldest first: the front is the connection that has waited longest.
    let mut open: VecDeque<Incoming> = VecDeque::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        fds.clear();
        let pollfd = |fd, events| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        fds.push(pollfd(listener.as_raw_fd(), libc::POLLIN));
        fds.extend(
            open.iter()
                .map(|c| pollfd(c.request.stream.as_raw_fd(), c.events())),
        );
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the call's duration.
        let n = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                TICK.as_millis() as libc::c_int,
            )
        };
        if n < 0 {
            // EINTR (a signal for the main thread); anything else would repeat: wait a tick.
            if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                std::thread::sleep(TICK);
            }
            continue;
        }
        let now = Instant::now();
        let before = std::mem::take(&mut open);
        for (mut c, fd) in before.into_iter().zip(&fds[1..]) {
            let progress = if fd.revents != 0 {
                c.progress()
            } else {
                Progress::Waiting
            };
            match progress {
                Progress::Waiting if now < c.deadline => open.push_back(c),
                // Past its deadline, or gone: closed by dropping it.
                Progress::Waiting | Progress::Closed => {}
                Progress::TooLarge => refuse(c.request, 431),
                Progress::Complete => match jobs.try_send(c.request) {
                    Ok(()) => {}
                    Err(TrySendError::Full(r)) => refuse(r, 503),
                    Err(TrySendError::Disconnected(_)) => return,
                },
            }
        }
        if fds[0].revents != 0 {
            accept_all(listener, tls.as_ref(), &mut open, now);
        }
    }
}

/// Accepts every pending connection; beyond [`MAX_CONNECTIONS`] the oldest open one is closed.
fn accept_all(
    listener: &TcpListener,
    tls: Option<&Arc<rustls::ServerConfig>>,
    open: &mut VecDeque<Incoming>,
    now: Instant,
) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) =>
            {
                // Out of file descriptors or memory: free the oldest connection's descriptor,
                // or let the next tick try again.
                if open.pop_front().is_none() {
                    std::thread::sleep(TICK);
                }
                return;
            }
            // EINTR, or a connection reset before it was accepted: the next one.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) =>
            {
                continue
            }
            // The network errors accept(2) passes on ("Error handling") and anything else:
            // retried a tick later, so a lasting error cannot spin this thread.
            Err(_) => {
                std::thread::sleep(TICK);
                return;
            }
        };
        let tls = match tls.map(|c| rustls::ServerConnection::new(Arc::clone(c))) {
            None => None,
            Some(Ok(t)) => Some(Box::new(t)),
            Some(Err(_)) => continue,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        if open.len() >= MAX_CONNECTIONS {
            open.pop_front();
        }
        open.push_back(Incoming {
            request: Request {
                stream,
                tls,
                head: Vec::new(),
            },
            deadline: now + REQUEST_DEADLINE,
        });
    }
}

/// Answers `status` on the reading thread: one non-blocking write, then the connection is
/// closed (a client that does not take the short answer at once loses it).
fn refuse(mut r: Request, status: u16) {
    let answer = response(
        status,
        "text/plain; charset=utf-8",
        format!("{}\n", reason(status)),
        &[],
    );
    match r.tls.as_mut() {
        Some(tls) => {
            let _ = tls.writer().write_all(&answer);
            tls.send_close_notify();
            let _ = tls.write_tls(&mut r.stream);
        }
        None => {
            let _ = r.stream.write(&answer);
        }
    }
}
