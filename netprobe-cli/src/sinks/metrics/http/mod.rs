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
//! The parts: the reading thread (`reading.rs`), the request head (`request.rs`), the handler
//! threads (`answering.rs`) and their answers (`response.rs`); `tests.rs` runs the server on
//! real sockets.
//!
//! Memory stays bounded: at most [`MAX_CONNECTIONS`] request heads of at most [`HEAD_LIMIT`]
//! bytes (and a TLS session each), and [`HANDLERS`] + [`QUEUE`] answers.

mod answering;
mod reading;
mod request;
mod response;

use super::web_config::WebConfig;
use crate::error::{Error, Result};
use answering::answer_requests;
use prometheus_client::registry::Registry;
use reading::{read_requests, Request};
use response::Answering;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

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

#[cfg(test)]
mod tests;
