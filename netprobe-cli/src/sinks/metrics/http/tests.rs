//! The server on real sockets: hostile clients (silent, slow, never reading, too many, oversized
//! heads) do not delay a scrape, and TLS with basic authentication answers only the right
//! credentials, even under a flood of wrong ones.

use super::*;
use crate::plan::FunctionId;
use crate::sinks::metrics::Metrics;
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
                pod: "",
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
    let never_read: Vec<TcpStream> = (0..HANDLERS).map(|_| asks_and_never_reads(addr)).collect();
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
    let conn =
        rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
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
