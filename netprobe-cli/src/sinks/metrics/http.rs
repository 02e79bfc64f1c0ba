//! The `/metrics` endpoint: a small HTTP/1.1 server (RFC 9112) serving [`super::Metrics`],
//! plain or over TLS, with optional basic authentication (`--metrics-web-config`,
//! `web_config.rs`). `GET /metrics` answers the exposition with the OpenMetrics content type
//! (`application/openmetrics-text; version=1.0.0`, the type Prometheus asks for first in its
//! `Accept` header and parses as OpenMetrics); `/` points there; anything else is 404 (405 for
//! other methods). One request per connection (`Connection: close`).
//!
//! Anyone who reaches the port is a client, so no client can hold the server:
//! - one thread ([`read_requests`]) polls (poll(2)) every connection while it sends its request:
//!   accepting, the TLS handshake and reading the request head never wait on one client;
//! - a request head must be complete within [`REQUEST_DEADLINE`] of the connection, and within
//!   [`HEAD_LIMIT`] bytes (else 431); a connection that misses the deadline is closed;
//! - at most [`MAX_CONNECTIONS`] connections are read at once: a new one beyond closes the one
//!   that has waited longest for its request (a scraper sends its request as soon as it is
//!   connected, so idle connections cannot crowd it out);
//! - complete requests wait in a queue of [`QUEUE`] for [`HANDLERS`] threads, which check the
//!   credentials, encode the exposition and write it; a request that finds the queue full is
//!   answered 503 at once;
//! - each answer must be written within [`RESPONSE_DEADLINE`], and a client that takes no byte
//!   of it for [`STALL_LIMIT`] is dropped then: one that asks and does not read holds a handler
//!   for at most that long. (So [`HANDLERS`] such clients, asking again as soon as they are
//!   dropped, can delay a scrape by up to [`STALL_LIMIT`]; a single one delays none.)
//!
//! Memory stays bounded: at most [`MAX_CONNECTIONS`] request heads of at most [`HEAD_LIMIT`]
//! bytes (and a TLS session each), and [`HANDLERS`] + [`QUEUE`] answers.

use super::basic_auth::Verdict;
use super::web_config::WebConfig;
use super::Metrics;
use crate::error::{Error, Result};
use prometheus_client::registry::Registry;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The content type of the OpenMetrics text format (its specification's "Overall Structure").
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Connections read at once (each holds at most [`HEAD_LIMIT`] bytes and a TLS session).
const MAX_CONNECTIONS: usize = 256;
/// The largest request head (request line and header fields) read: 8 KiB, as common servers
/// allow; Prometheus's requests are a few hundred bytes.
const HEAD_LIMIT: usize = 8 * 1024;
/// From the connection to a complete request head, TLS handshake included.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// To write an answer: Prometheus's default `scrape_timeout`.
const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a client may take no byte of its answer before it is dropped.
const STALL_LIMIT: Duration = Duration::from_secs(2);
/// Threads answering complete requests.
const HANDLERS: usize = 4;
/// Complete requests waiting for a handler.
const QUEUE: usize = 16;
/// How often the reading thread looks at its deadlines and at shutdown; a blocked write of a
/// handler looks at shutdown as often.
const TICK: Duration = Duration::from_millis(100);

/// A bound `/metrics` port, not serving yet (bound before the probes are placed, so a port in
/// use fails with nothing left behind).
pub struct Listener {
    listener: TcpListener,
    addr: SocketAddr,
}

/// A running `/metrics` server; [`MetricsServer::shutdown`] (or drop) stops it.
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Parses `--metrics`' `ADDR:PORT` (`127.0.0.1:9464`, `10.1.2.3:9464`, `[::1]:9464`).
pub fn parse_addr(text: &str) -> std::result::Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("'{text}' is not ADDR:PORT: give an IP address and a port, e.g. 127.0.0.1:9464 (this host only) or the address of the interface Prometheus scrapes")
    })
}

impl Listener {
    /// Binds `addr` (port 0: the kernel picks one, see [`Listener::addr`]).
    pub fn bind(addr: SocketAddr) -> Result<Listener> {
        let cannot = |e: io::Error| {
            Error::usage(format!(
                "cannot serve metrics on {addr} ({e}): give --metrics a free port and an address of this host"
            ))
        };
        let listener = TcpListener::bind(addr).map_err(cannot)?;
        listener.set_nonblocking(true).map_err(cannot)?;
        let addr = listener.local_addr().unwrap_or(addr);
        Ok(Listener { listener, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts answering requests with `registry`'s exposition, as `web` requires.
    pub fn serve(self, registry: Registry, web: WebConfig) -> Result<MetricsServer> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = MetricsServer {
            stop: Arc::clone(&stop),
            threads: Vec::with_capacity(HANDLERS + 1),
        };
        let shared = Arc::new(Answering {
            registry,
            auth: web.auth,
            stop: Arc::clone(&stop),
        });
        let (jobs, queue) = mpsc::sync_channel::<Request>(QUEUE);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..HANDLERS {
            let (shared, queue) = (Arc::clone(&shared), Arc::clone(&queue));
            let t = std::thread::Builder::new()
                .name(format!("np-metrics-{i}"))
                .spawn(move || answer_requests(&queue, &shared))
                .map_err(|e| Error::io("metrics server thread", e))?;
            server.threads.push(t);
        }
        let tls = web.tls;
        let t = std::thread::Builder::new()
            .name("np-metrics".into())
            .spawn(move || read_requests(&self.listener, tls, &jobs, &stop))
            .map_err(|e| Error::io("metrics server thread", e))?;
        server.threads.push(t);
        Ok(server)
    }
}

impl MetricsServer {
    /// Stops serving and waits for the threads (at most about [`TICK`]).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A connection whose request head has arrived, for a handler.
struct Request {
    stream: TcpStream,
    tls: Option<Box<rustls::ServerConnection>>,
    head: Vec<u8>,
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

/// The end of a request head (RFC 9112 section 2.1: the empty line after the header fields).
fn head_end(head: &[u8]) -> Option<usize> {
    head.windows(4).position(|w| w == b"\r\n\r\n")
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
fn read_requests(
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

/// What the handlers share.
struct Answering {
    registry: Registry,
    auth: Option<super::basic_auth::BasicAuth>,
    stop: Arc<AtomicBool>,
}

/// A handler thread: answers requests from `queue` until the reading thread has stopped.
fn answer_requests(queue: &Mutex<Receiver<Request>>, shared: &Answering) {
    loop {
        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        match next {
            Ok(r) => answer(r, shared),
            Err(_) => return,
        }
    }
}

/// The parts of a request head the server looks at.
struct Head<'a> {
    method: &'a str,
    path: &'a str,
    authorization: Option<&'a str>,
}

/// Parses a complete request head (RFC 9112 sections 3 and 5); `None` when it is not HTTP/1.x.
fn parse_head(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(&head[..head_end(head)?]).ok()?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target, version) = (
        request_line.next()?,
        request_line.next()?,
        request_line.next()?,
    );
    if !version.starts_with("HTTP/1.") || request_line.next().is_some() {
        return None;
    }
    let authorization = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.trim());
    Some(Head {
        method,
        path: target.split('?').next().unwrap_or(""),
        authorization,
    })
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

/// The answer to a request: credentials first, then the path.
fn route(h: &Head<'_>, shared: &Answering) -> Vec<u8> {
    const TEXT: &str = "text/plain; charset=utf-8";
    match shared.auth.as_ref().map(|a| a.check(h.authorization)) {
        None | Some(Verdict::Allowed) => {}
        // RFC 7617 section 2: the challenge names the scheme and a realm.
        Some(Verdict::Refused) => {
            return response(
                401,
                TEXT,
                "unauthorized\n".into(),
                &[("WWW-Authenticate", "Basic realm=\"netprobe\"")],
            )
        }
        Some(Verdict::Busy) => {
            return response(
                429,
                TEXT,
                "password checks are busy: retry\n".into(),
                &[("Retry-After", "1")],
            )
        }
    }
    match (h.method, h.path) {
        ("GET", "/metrics") => response(
            200,
            CONTENT_TYPE,
            Metrics::exposition(&shared.registry),
            &[],
        ),
        ("GET", "/") => response(200, TEXT, "netprobe: metrics at /metrics\n".into(), &[]),
        ("GET", _) => response(
            404,
            TEXT,
            "not found: metrics are at /metrics\n".into(),
            &[],
        ),
        _ => response(
            405,
            TEXT,
            "only GET is served\n".into(),
            &[("Allow", "GET")],
        ),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

/// A whole HTTP/1.1 response with `body`, after which the connection closes. The head is put
/// in front of the body in its own buffer, so an exposition is not held twice.
fn response(status: u16, content_type: &str, body: String, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = body;
    out.insert_str(0, &head);
    out.into_bytes()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::FunctionId;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    /// A server on a free loopback port exporting `series` call series (about 100 bytes each in
    /// the exposition).
    fn start(series: u32) -> (MetricsServer, SocketAddr) {
        start_with(series, WebConfig::default())
    }

    fn start_with(series: u32, web: WebConfig) -> (MetricsServer, SocketAddr) {
        let m = Metrics::new(&crate::sinks::test_plan(&["f"], "/srv/app"), 1, 1 << 20);
        for pid in 0..series {
            m.call(
                FunctionId(0),
                &super::super::Task {
                    pid: Some(pid),
                    comm: "worker",
                    container: "",
                },
            );
        }
        let l = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.addr();
        (l.serve(m.registry(), web).unwrap(), addr)
    }

    /// One HTTP/1.0 `GET path` on a new connection (the server closes it after the answer, and
    /// sends the body as it is, not chunked): the status line and the body, read to the end.
    fn get(addr: SocketAddr, path: &str) -> std::io::Result<(String, String)> {
        get_with(addr, path, None)
    }

    /// [`get`] with an `Authorization` header.
    fn get_with(
        addr: SocketAddr,
        path: &str,
        authorization: Option<&str>,
    ) -> std::io::Result<(String, String)> {
        let mut s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n")?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer)?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        Ok((
            head.lines().next().unwrap_or("").to_string(),
            body.to_string(),
        ))
    }

    /// A silent client (connected, sends nothing), 200 idle connections (half of them stopped in
    /// the middle of a request line, as slowloris does) and a client that asks for `/metrics` and
    /// never reads the answer (60,000 series, ~5.7 MB: more than the loopback socket buffers
    /// hold, `tcp_wmem` and `tcp_rmem` in Documentation/networking/ip-sysctl.rst): a scrape beside
    /// them still gets the whole exposition within 3 s.
    #[test]
    fn hostile_clients_do_not_delay_a_scrape() {
        let (_server, addr) = start(60_000);
        eprintln!("scrape alone: {:?}", full_scrape(addr, 60_000));
        let _silent = TcpStream::connect(addr).unwrap();
        let mut idle = Vec::new();
        for i in 0..200 {
            let mut c = TcpStream::connect(addr).unwrap();
            if i % 2 == 1 {
                c.write_all(b"GET /metr").unwrap();
            }
            idle.push(c);
        }
        let _never_reads = asks_and_never_reads(addr);
        std::thread::sleep(Duration::from_millis(300));
        let took = full_scrape(addr, 60_000);
        eprintln!("scrape beside 202 hostile connections: {took:?}");
        assert!(took < Duration::from_secs(3), "the scrape took {took:?}");
    }

    /// A client that asks for `/metrics` and never reads the answer.
    fn asks_and_never_reads(addr: SocketAddr) -> TcpStream {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        c
    }

    /// Scrapes `/metrics`, checks that the whole exposition of `series` call series came, and
    /// returns how long it took.
    fn full_scrape(addr: SocketAddr, series: usize) -> Duration {
        let started = Instant::now();
        let (status, body) = get(addr, "/metrics").unwrap();
        let took = started.elapsed();
        assert!(status.ends_with(" 200 OK"), "{status}");
        assert!(
            body.ends_with("# EOF\n"),
            "cut exposition: ...{}",
            &body[body.len().saturating_sub(200)..]
        );
        assert_eq!(body.matches("netprobe_calls_total{").count(), series);
        took
    }

    /// As many clients as there are handlers ask for a 5.7 MB exposition and never read it:
    /// each is dropped once it has taken nothing for [`STALL_LIMIT`], so a scrape behind them is
    /// answered soon after, not after [`RESPONSE_DEADLINE`].
    #[test]
    fn clients_that_never_read_are_dropped_at_the_stall_limit() {
        let (_server, addr) = start(60_000);
        let never_read: Vec<TcpStream> =
            (0..HANDLERS).map(|_| asks_and_never_reads(addr)).collect();
        std::thread::sleep(Duration::from_millis(200));
        let took = full_scrape(addr, 60_000);
        eprintln!("scrape behind {HANDLERS} clients that never read: {took:?}");
        assert!(took < STALL_LIMIT + Duration::from_secs(3), "{took:?}");
        drop(never_read);
    }

    /// Beyond [`MAX_CONNECTIONS`] silent connections, each new one closes the one that has
    /// waited longest, and a scrape is answered at once.
    #[test]
    fn connections_beyond_the_cap_close_the_oldest() {
        let (_server, addr) = start(3);
        let silent: Vec<TcpStream> = (0..MAX_CONNECTIONS + 20)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let started = Instant::now();
        let (status, _) = get(addr, "/metrics").unwrap();
        assert!(status.ends_with(" 200 OK"), "{status}");
        assert!(started.elapsed() < Duration::from_secs(1));
        // The first 21 were closed (20 silent ones and the scrape's beyond the cap), well
        // before their deadline; the newest are still open.
        let closed = |s: &TcpStream| {
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            match (&mut &*s).read(&mut [0u8; 1]) {
                Ok(n) => n == 0,
                // Still open: nothing to read before the timeout. Else reset: closed.
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            }
        };
        assert!(silent[..21].iter().all(closed));
        assert!(!closed(silent.last().unwrap()));
    }

    /// A request whose header is larger than the cap is answered 431 (or closed) and the next
    /// scrape is answered as usual.
    #[test]
    fn an_oversized_header_is_refused_and_the_next_scrape_answered() {
        let (_server, addr) = start(3);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let big = format!(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "a".repeat(64 * 1024)
        );
        // The server may close before it has read everything: a failed write is a refusal too.
        let _ = s.write_all(big.as_bytes());
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 431 "),
            "{answer:.200}"
        );
        let (status, body) = get(addr, "/metrics").unwrap();
        assert!(status.ends_with(" 200 OK"), "{status}");
        assert!(body.ends_with("# EOF\n"));
    }

    /// One `GET /metrics` over TLS, trusting the CA in `ca`, with `authorization` as the
    /// `Authorization` header: the response head and body.
    fn get_tls(
        addr: SocketAddr,
        ca: &std::path::Path,
        authorization: Option<&str>,
    ) -> std::io::Result<(String, String)> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let conn = rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap())
            .unwrap();
        let sock = TcpStream::connect(addr)?;
        sock.set_read_timeout(Some(Duration::from_secs(20)))?;
        let mut tls = rustls::StreamOwned::new(conn, sock);
        let auth = authorization
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        write!(
            tls,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n"
        )?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer)?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        Ok((head.to_string(), body.to_string()))
    }

    /// `--metrics-web-config` with TLS and a user: the right credentials get the exposition over
    /// TLS; none or a wrong password get 401 with a `Basic` challenge; a plain HTTP request gets
    /// no HTTP answer at all.
    #[test]
    fn tls_and_basic_auth_answer_only_right_credentials() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let certs = fixtures::tls::write_certificates(dir.path()).unwrap();
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let web = WebConfig::parse(
            &format!("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\nbasic_auth_users:\n  prom: '{hash}'\n"),
            dir.path(),
        )
        .unwrap();
        let (_server, addr) = start_with(3, web);
        // A silent client and one stopped inside its TLS ClientHello hold nothing.
        let _silent = TcpStream::connect(addr).unwrap();
        let mut hello = TcpStream::connect(addr).unwrap();
        hello.write_all(&[0x16, 0x03, 0x01, 0x02]).unwrap();
        let basic = |user_password: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(user_password)
            )
        };
        let (head, body) = get_tls(addr, &certs.ca, Some(&basic("prom:s3cret"))).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(body.ends_with("# EOF\n"), "{body}");
        for auth in [
            None,
            Some(basic("prom:wrong")),
            Some(basic("nobody:s3cret")),
        ] {
            let (head, _) = get_tls(addr, &certs.ca, auth.as_deref()).unwrap();
            assert!(
                head.starts_with("HTTP/1.1 401 Unauthorized"),
                "{auth:?}: {head}"
            );
            assert!(
                head.lines()
                    .any(|l| l.starts_with("WWW-Authenticate: Basic")),
                "{head}"
            );
        }
        // Plain HTTP to the TLS port: rustls refuses the first bytes as a TLS record.
        match get(addr, "/metrics") {
            Ok((status, _)) => assert!(!status.starts_with("HTTP/"), "{status}"),
            Err(e) => assert_ne!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
        }
    }

    /// Eight clients sending wrong passwords as fast as they are answered (each a bcrypt of
    /// cost 10) do not hold a scraper whose password was verified before: its scrapes are
    /// answered within 1 s throughout, and the flood gets 401 or, while bcrypt is taken, 429.
    #[test]
    fn a_flood_of_wrong_passwords_does_not_hold_a_verified_scraper() {
        use base64::Engine;
        let basic = |user_password: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(user_password)
            )
        };
        let started = Instant::now();
        let hash = bcrypt::hash("s3cret", bcrypt::DEFAULT_COST).unwrap();
        eprintln!("one bcrypt of cost 10: {:?}", started.elapsed());
        let web = WebConfig::parse(
            &format!("basic_auth_users:\n  prom: '{hash}'\n"),
            std::path::Path::new("."),
        )
        .unwrap();
        let (_server, addr) = start_with(100, web);
        let right = basic("prom:s3cret");
        assert!(get_with(addr, "/metrics", Some(&right))
            .unwrap()
            .0
            .ends_with(" 200 OK"));
        let flooding = Arc::new(AtomicBool::new(true));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let flood: Vec<_> = (0..8)
            .map(|i| {
                let (flooding, answers) = (Arc::clone(&flooding), Arc::clone(&answers));
                std::thread::spawn(move || {
                    let mut n = 0;
                    while flooding.load(Ordering::Acquire) {
                        n += 1;
                        let auth = basic(&format!("prom:guess{i}-{n}"));
                        let status = get_with(addr, "/metrics", Some(&auth));
                        answers.lock().unwrap().push(status.unwrap_or_default().0);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let started = Instant::now();
            let (status, _) = get_with(addr, "/metrics", Some(&right)).unwrap();
            slowest = slowest.max(started.elapsed());
            assert!(status.ends_with(" 200 OK"), "{status}");
            std::thread::sleep(Duration::from_millis(100));
        }
        flooding.store(false, Ordering::Release);
        for t in flood {
            t.join().unwrap();
        }
        let answers = answers.lock().unwrap();
        let busy = answers.iter().filter(|a| a.contains(" 429 ")).count();
        let refused = answers.iter().filter(|a| a.contains(" 401 ")).count();
        eprintln!(
            "verified scraper's slowest answer during the flood: {slowest:?}; flood: {refused} x 401, {busy} x 429, {} other",
            answers.len() - busy - refused
        );
        assert_eq!(busy + refused, answers.len(), "{answers:?}");
        assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    }
}
