//! The `/metrics` endpoint: a thread serving [`super::Metrics`] over HTTP/1.1 with `tiny_http`.
//! `GET /metrics` answers the exposition with the OpenMetrics content type
//! (`application/openmetrics-text; version=1.0.0`, the type Prometheus asks for first in its
//! `Accept` header and parses as OpenMetrics); `/` points there; anything else is 404 (405 for
//! other methods).

use super::Metrics;
use crate::error::{Error, Result};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The content type of the OpenMetrics text format (its specification's "Overall Structure").
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A bound `/metrics` port, not serving yet (bound before the probes are placed, so a port in
/// use fails with nothing left behind).
pub struct Listener {
    server: tiny_http::Server,
    addr: SocketAddr,
}

/// A running `/metrics` server; [`MetricsServer::shutdown`] (or drop) stops it.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

/// Parses `--metrics`' `ADDR:PORT` (`0.0.0.0:9464`, `127.0.0.1:9464`, `[::1]:9464`).
pub fn parse_addr(text: &str) -> std::result::Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("'{text}' is not ADDR:PORT: give an IP address and a port, e.g. 0.0.0.0:9464 (every interface) or 127.0.0.1:9464")
    })
}

impl Listener {
    /// Binds `addr` (port 0: the kernel picks one, see [`Listener::addr`]).
    pub fn bind(addr: SocketAddr) -> Result<Listener> {
        let server = tiny_http::Server::http(addr).map_err(|e| {
            Error::usage(format!(
                "cannot serve metrics on {addr} ({e}): give --metrics a free port and an address of this host"
            ))
        })?;
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        Ok(Listener { server, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts answering requests with `registry`'s exposition, on a thread of its own.
    pub fn serve(self, registry: Registry) -> Result<MetricsServer> {
        let server = Arc::new(self.server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("netprobe-metrics".into())
            .spawn(move || serve(&serving, &registry))
            .map_err(|e| Error::io("metrics server thread", e))?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
        })
    }
}

impl MetricsServer {
    /// Stops serving and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Answers requests until the server is unblocked.
fn serve(server: &tiny_http::Server, registry: &Registry) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("");
        let response = match (request.method(), path) {
            (tiny_http::Method::Get, "/metrics") => {
                text(200, Metrics::exposition(registry), CONTENT_TYPE)
            }
            (tiny_http::Method::Get, "/") => text(
                200,
                "netprobe: metrics at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            (tiny_http::Method::Get, _) => text(
                404,
                "not found: metrics are at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            _ => text(
                405,
                "only GET is served\n".to_string(),
                "text/plain; charset=utf-8",
            ),
        };
        // A scraper that hung up is its own business.
        let _ = request.respond(response);
    }
}

fn text(
    status: u16,
    body: String,
    content_type: &str,
) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    let mut r = tiny_http::Response::from_string(body).with_status_code(status);
    if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
        r.add_header(h);
    }
    r
}
