//! The answers: what a request gets (credentials first, then the path: `/metrics`, `/`, 404,
//! 405) and the bytes of a whole HTTP/1.1 response that closes the connection (RFC 9112).

use super::request::Head;
use super::CONTENT_TYPE;
use crate::sinks::metrics::basic_auth::BasicAuth;
use crate::sinks::metrics::basic_auth::Verdict;
use crate::sinks::metrics::Metrics;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What the handlers share.
pub(super) struct Answering {
    pub(super) registry: Registry,
    pub(super) auth: Option<BasicAuth>,
    pub(super) stop: Arc<AtomicBool>,
}

/// The answer to a request: credentials first, then the path.
pub(super) fn route(h: &Head<'_>, shared: &Answering) -> Vec<u8> {
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

pub(super) fn reason(status: u16) -> &'static str {
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
pub(super) fn response(
    status: u16,
    content_type: &str,
    body: String,
    extra: &[(&str, &str)],
) -> Vec<u8> {
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
