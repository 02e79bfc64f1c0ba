//! HTTP basic authentication of `/metrics` (RFC 7617) against the bcrypt hashes of the exporter
//! toolkit's `basic_auth_users` (`web_config.rs`).
//!
//! bcrypt is slow by design (cost 10: ~70 ms; each step of cost doubles it). Two things keep it
//! from costing a scrape every second or taking every handler thread:
//! - a (user, SHA-256 of the password) pair that verified once is remembered (at most
//!   [`MAX_VERIFIED`] pairs), so the next scrapes cost a hash of the password, not a bcrypt;
//!   the toolkit caches verified pairs too ("About bcrypt" in
//!   <https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>);
//! - at most one bcrypt runs at a time and at most one more request waits for it
//!   ([`MAX_IN_BCRYPT`] in all); a request that would be a third gets [`Verdict::Busy`] (429) at
//!   once, so a flood of wrong passwords holds at most two handler threads, each for one bcrypt.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Verified (user, password digest) pairs remembered at most; the set is emptied when full.
const MAX_VERIFIED: usize = 64;

/// Requests that may run or wait for a bcrypt at the same time.
const MAX_IN_BCRYPT: usize = 2;

/// What an `Authorization` header is worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Missing, malformed or wrong credentials: 401 with `WWW-Authenticate: Basic`.
    Refused,
    /// Unverified credentials while bcrypt is taken: 429, try again.
    Busy,
}

/// The users of `basic_auth_users` and what was verified of them.
#[derive(Debug)]
pub struct BasicAuth {
    /// User → bcrypt hash (`$2y$10$...`).
    users: HashMap<String, String>,
    verified: Mutex<HashSet<(String, [u8; 32])>>,
    in_bcrypt: AtomicUsize,
    bcrypt: Mutex<()>,
}

impl BasicAuth {
    /// `users` maps each user to a bcrypt hash, already checked to parse.
    pub fn new(users: HashMap<String, String>) -> BasicAuth {
        BasicAuth {
            users,
            verified: Mutex::new(HashSet::new()),
            in_bcrypt: AtomicUsize::new(0),
            bcrypt: Mutex::new(()),
        }
    }

    /// The verdict on a request's `Authorization` header value (`None`: no header).
    pub fn check(&self, authorization: Option<&str>) -> Verdict {
        let Some((user, password)) = authorization.and_then(credentials) else {
            return Verdict::Refused;
        };
        let digest = ring::digest::digest(&ring::digest::SHA256, password.as_bytes());
        let mut key = (user, [0u8; 32]);
        key.1.copy_from_slice(digest.as_ref());
        if lock(&self.verified).contains(&key) {
            return Verdict::Allowed;
        }
        // An unknown user costs a bcrypt too (against any known hash, then refused), so the
        // answer's time does not tell which users exist; the toolkit does the same.
        let (known, hash) = match self.users.get(&key.0) {
            Some(h) => (true, h),
            None => match self.users.values().next() {
                Some(h) => (false, h),
                None => return Verdict::Refused,
            },
        };
        if self
            .in_bcrypt
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_IN_BCRYPT).then_some(n + 1)
            })
            .is_err()
        {
            return Verdict::Busy;
        }
        let matches = {
            let _one_at_a_time = lock(&self.bcrypt);
            bcrypt::verify(password.as_bytes(), hash).unwrap_or(false)
        };
        self.in_bcrypt.fetch_sub(1, Ordering::AcqRel);
        if !(known && matches) {
            return Verdict::Refused;
        }
        let mut verified = lock(&self.verified);
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(key);
        Verdict::Allowed
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing held under these locks can be left half-done by a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The user and password of a `Basic` `Authorization` value: base64 of `user:password`
/// (RFC 7617 section 2; the scheme name is case-insensitive, RFC 7235 section 2.1).
fn credentials(value: &str) -> Option<(String, String)> {
    use base64::Engine;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn header(user: &str, password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    fn auth() -> BasicAuth {
        // Cost 4, the lowest bcrypt allows: these tests check the logic, not the cost.
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        BasicAuth::new([("prom".to_string(), hash)].into())
    }

    #[test]
    fn right_credentials_pass_and_are_remembered() {
        let a = auth();
        assert_eq!(a.check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
        assert_eq!(lock(&a.verified).len(), 1);
        assert_eq!(a.check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
        assert_eq!(lock(&a.verified).len(), 1);
    }

    #[test]
    fn wrong_missing_or_malformed_credentials_are_refused() {
        let a = auth();
        for h in [
            Some(header("prom", "wrong")),
            Some(header("other", "s3cret")),
            Some("Bearer abc".to_string()),
            Some("Basic !!!".to_string()),
            Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode("no-colon")
            )),
            None,
        ] {
            assert_eq!(a.check(h.as_deref()), Verdict::Refused, "{h:?}");
        }
        assert!(lock(&a.verified).is_empty());
    }

    /// With the bcrypt and its waiting place taken, an unverified request is turned away at once
    /// while a verified one still passes.
    #[test]
    fn a_full_bcrypt_turns_unverified_requests_away_at_once() {
        let a = auth();
        assert_eq!(a.check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
        a.in_bcrypt.store(MAX_IN_BCRYPT, Ordering::Release);
        let started = std::time::Instant::now();
        assert_eq!(a.check(Some(&header("prom", "wrong"))), Verdict::Busy);
        assert!(started.elapsed() < std::time::Duration::from_millis(50));
        assert_eq!(a.check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
    }
}
