//! A debuginfod client: the debug file of a build-id from the servers `DEBUGINFOD_URLS` names,
//! kept in the cache folder elfutils' own client uses, so `debuginfod-find`, gdb and netprobe
//! share what each fetched.
//!
//! The protocol and settings are elfutils' (debuginfod(8) and debuginfod_find_debuginfo(3),
//! <https://sourceware.org/elfutils/Debuginfod.html>):
//! - `DEBUGINFOD_URLS`: server URLs separated by spaces; each is asked in turn
//!   `GET URL/buildid/HEX/debuginfo`, HEX the build-id in lowercase hex, until one answers 200.
//!   Unset or empty: no request is ever made.
//! - the cache: `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
//!   `$HOME/.cache/debuginfod_client`; a file is `CACHE/HEX/debuginfo`, found there before any
//!   request and written atomically (a temporary file in the same folder, renamed into place),
//!   so a reader never sees half a file.
//! - `DEBUGINFOD_TIMEOUT` (seconds, default 90): the longest wait for the connection or for the
//!   next bytes of the answer; `DEBUGINFOD_MAXSIZE` (bytes): the largest file accepted (at most
//!   [`MAX_FILE`] here either way).
//!
//! Only `http://` is spoken (HTTP/1.0, so the body ends at the close, without chunked encoding),
//! with at most [`MAX_REDIRECTS`] redirects. `https://` servers are skipped with a reason; to
//! use one, fill the cache first with `debuginfod-find debuginfo HEX` (elfutils' client speaks
//! https and writes the same cache), or run a local `debuginfod` that federates to it
//! (`DEBUGINFOD_URLS=https://... debuginfod -p PORT`) and point netprobe at `http://127.0.0.1:PORT`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest debug file accepted.
pub const MAX_FILE: u64 = 4 << 30;
/// Redirects followed per request.
pub const MAX_REDIRECTS: usize = 4;
/// Largest status line and headers read.
const MAX_HEAD: usize = 64 << 10;

/// The servers and cache of the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    pub urls: Vec<String>,
    pub cache: PathBuf,
    pub timeout: Duration,
    pub max_size: u64,
}

impl Client {
    /// The client `DEBUGINFOD_URLS` asks for; `None` when it is unset or names no server, or no
    /// cache folder can be named.
    pub fn from_env() -> Option<Client> {
        Client::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Client::from_env`] over `var` (a test's environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<Client> {
        let urls: Vec<String> = var("DEBUGINFOD_URLS")?
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let non_empty = |k: &str| var(k).filter(|v| !v.is_empty());
        let cache = non_empty("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| {
                non_empty("XDG_CACHE_HOME").map(|x| Path::new(&x).join("debuginfod_client"))
            })
            .or_else(|| {
                non_empty("HOME").map(|h| Path::new(&h).join(".cache/debuginfod_client"))
            })?;
        let number = |k: &str| non_empty(k).and_then(|v| v.trim().parse::<u64>().ok());
        Some(Client {
            urls,
            cache,
            timeout: Duration::from_secs(number("DEBUGINFOD_TIMEOUT").unwrap_or(90).max(1)),
            max_size: number("DEBUGINFOD_MAXSIZE")
                .filter(|&n| n > 0)
                .map_or(MAX_FILE, |n| n.min(MAX_FILE)),
        })
    }

    /// The cached debug file of build-id `hex` (lowercase hex digits), fetched when not cached
    /// yet. Errors: one line per server saying why it gave nothing.
    pub fn debuginfo(&self, hex: &str) -> Result<PathBuf, String> {
        if hex.len() < 2 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(format!("{hex:?} is not a build-id"));
        }
        let dir = self.cache.join(hex);
        let target = dir.join("debuginfo");
        if std::fs::metadata(&target).is_ok_and(|m| m.is_file() && m.len() > 0) {
            return Ok(target);
        }
        let mut why = Vec::new();
        for url in &self.urls {
            match self.fetch(&format!("{url}/buildid/{hex}/debuginfo"), &dir, &target) {
                Ok(()) => return Ok(target),
                Err(e) => why.push(format!("{url}: {e}")),
            }
        }
        Err(why.join("; "))
    }

    fn fetch(&self, url: &str, dir: &Path, target: &Path) -> Result<(), String> {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let (mut stream, head_end, head) = self.request(&url)?;
            let (status, headers) = parse_head(&head[..head_end])?;
            match status {
                200 => {
                    if let Some(len) =
                        header(&headers, "content-length").and_then(|v| v.parse::<u64>().ok())
                    {
                        if len > self.max_size {
                            return Err(format!(
                                "the file is {len} bytes, over the {} limit",
                                self.max_size
                            ));
                        }
                    }
                    return self.save(&head[head_end..], &mut stream, dir, target);
                }
                301 | 302 | 303 | 307 | 308 => {
                    let to = header(&headers, "location").ok_or("a redirect without Location")?;
                    url = if to.starts_with('/') {
                        let (scheme_host, _) = split_url(&url)?;
                        format!("http://{scheme_host}{to}")
                    } else {
                        to.to_string()
                    };
                }
                404 => return Err("not found (404)".into()),
                n => return Err(format!("HTTP status {n}")),
            }
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }

    /// Connects, sends the request and reads up to the end of the headers: the stream, where
    /// the headers end in the bytes read, and those bytes.
    fn request(&self, url: &str) -> Result<(TcpStream, usize, Vec<u8>), String> {
        let (host, path) = split_url(url)?;
        let addr = with_port(host)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} has no address"))?;
        let mut stream = TcpStream::connect_timeout(&addr, self.timeout)
            .map_err(|e| format!("cannot connect to {host}: {e}"))?;
        let io = |e: std::io::Error| e.to_string();
        stream.set_read_timeout(Some(self.timeout)).map_err(io)?;
        stream.set_write_timeout(Some(self.timeout)).map_err(io)?;
        let req = format!(
            "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: netprobe/{}\r\nAccept: */*\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        stream.write_all(req.as_bytes()).map_err(io)?;
        let mut head = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(end) = find(&head, b"\r\n\r\n") {
                return Ok((stream, end + 4, head));
            }
            if head.len() > MAX_HEAD {
                return Err(format!("headers longer than {MAX_HEAD} bytes"));
            }
            let n = stream.read(&mut buf).map_err(io)?;
            if n == 0 {
                return Err("the server closed the connection before its headers ended".into());
            }
            head.extend_from_slice(&buf[..n]);
        }
    }

    /// Writes `first` and the rest of `stream` to a temporary file in `dir`, then renames it to
    /// `target`.
    fn save(
        &self,
        first: &[u8],
        stream: &mut TcpStream,
        dir: &Path,
        target: &Path,
    ) -> Result<(), String> {
        let io = |e: std::io::Error| format!("{}: {e}", dir.display());
        std::fs::create_dir_all(dir).map_err(io)?;
        // A name no other writer picks (pid and a per-process counter), created exclusively.
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp_path = dir.join(format!(".debuginfo.netprobe.{}.{n}", std::process::id()));
        let mut tmp = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp_path)
            .map_err(io)?;
        let written = (|| {
            tmp.write_all(first).map_err(io)?;
            let limit = self
                .max_size
                .saturating_add(1)
                .saturating_sub(first.len() as u64);
            let copied = std::io::copy(&mut stream.take(limit), &mut tmp).map_err(io)?;
            let total = copied + first.len() as u64;
            if total > self.max_size {
                return Err(format!("the file is over the {}-byte limit", self.max_size));
            }
            if total == 0 {
                return Err("an empty answer".into());
            }
            tmp.sync_all().map_err(io)?;
            std::fs::rename(&tmp_path, target).map_err(io)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp_path);
        }
        written?;
        Ok(())
    }
}

/// `http://HOST[:PORT]/PATH` as (`HOST[:PORT]`, `/PATH`).
fn split_url(url: &str) -> Result<(&str, &str), String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(if url.starts_with("https://") {
            "https is not supported by netprobe's debuginfod client: fill the cache with \
             `debuginfod-find debuginfo BUILDID` or use a local http debuginfod that federates \
             to this server"
                .into()
        } else {
            format!("{url} is not an http:// URL")
        });
    };
    let slash = rest.find('/').unwrap_or(rest.len());
    let (host, path) = rest.split_at(slash);
    if host.is_empty() || host.contains(['@', ' ', '\r', '\n']) || path.contains(['\r', '\n', ' '])
    {
        return Err(format!("{url} is not a URL netprobe requests"));
    }
    Ok((host, if path.is_empty() { "/" } else { path }))
}

fn with_port(host: &str) -> String {
    // `[v6]:port`, `[v6]`, `name:port`, `name`.
    let has_port = match host.rfind(']') {
        Some(b) => host[b..].contains(':'),
        None => host.contains(':'),
    };
    if has_port {
        host.to_string()
    } else {
        format!("{host}:80")
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The status code and the headers (names lowercased) of a response head.
fn parse_head(head: &[u8]) -> Result<(u16, Vec<(String, String)>), String> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.strip_prefix("HTTP/1."))
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or("not an HTTP answer")?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok((status, headers))
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn client(vars: &[(&str, &str)]) -> Option<Client> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Client::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn the_environment_names_servers_and_the_elfutils_cache() {
        assert_eq!(client(&[("HOME", "/h")]), None);
        assert_eq!(client(&[("DEBUGINFOD_URLS", "  "), ("HOME", "/h")]), None);
        let c = client(&[
            ("DEBUGINFOD_URLS", "http://a:8002/ http://b"),
            ("HOME", "/h"),
        ])
        .unwrap();
        assert_eq!(c.urls, ["http://a:8002", "http://b"]);
        assert_eq!(c.cache, Path::new("/h/.cache/debuginfod_client"));
        assert_eq!(c.timeout, Duration::from_secs(90));
        let c = client(&[
            ("DEBUGINFOD_URLS", "http://a"),
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_TIMEOUT", "5"),
            ("DEBUGINFOD_MAXSIZE", "1000"),
        ])
        .unwrap();
        assert_eq!(c.cache, Path::new("/x/debuginfod_client"));
        assert_eq!((c.timeout, c.max_size), (Duration::from_secs(5), 1000));
        let c = client(&[
            ("DEBUGINFOD_URLS", "http://a"),
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_CACHE_PATH", "/c"),
        ])
        .unwrap();
        assert_eq!(c.cache, Path::new("/c"));
    }

    #[test]
    fn urls_split_and_https_is_refused_with_the_workaround() {
        assert_eq!(split_url("http://h:1/p/q"), Ok(("h:1", "/p/q")));
        assert_eq!(split_url("http://h"), Ok(("h", "/")));
        assert_eq!(with_port("h"), "h:80");
        assert_eq!(with_port("[::1]"), "[::1]:80");
        assert_eq!(with_port("[::1]:9"), "[::1]:9");
        assert!(split_url("https://x/")
            .unwrap_err()
            .contains("debuginfod-find"));
        assert!(split_url("http://u@h/").is_err());
        assert!(split_url("http://h/a\r\nX: y").is_err());
    }

    #[test]
    fn a_build_id_that_is_not_lowercase_hex_is_refused_before_any_request() {
        let c = client(&[
            ("DEBUGINFOD_URLS", "http://127.0.0.1:1"),
            ("HOME", "/nonexistent"),
        ])
        .unwrap();
        for bad in ["", "a", "../../etc", "ABCD", "ab/cd"] {
            assert!(
                c.debuginfo(bad).unwrap_err().contains("not a build-id"),
                "{bad}"
            );
        }
    }

    #[test]
    fn heads_parse_to_status_and_lowercased_headers() {
        let (s, h) =
            parse_head(b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0").unwrap();
        assert_eq!(s, 302);
        assert_eq!(header(&h, "location"), Some("/x"));
        assert!(parse_head(b"SSH-2.0").is_err());
    }
}
