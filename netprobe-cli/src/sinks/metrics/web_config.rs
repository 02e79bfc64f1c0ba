//! `--metrics-web-config FILE`: TLS and basic authentication for `/metrics`, read from the file
//! Prometheus exporters take as `--web.config.file` (the exporter toolkit's format:
//! <https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>).
//!
//! What netprobe reads of it:
//! - `tls_server_config`: `cert_file` and `key_file` (PEM; both needed), `client_auth_type`
//!   (`NoClientCert`, the default; `VerifyClientCertIfGiven` and `RequireAndVerifyClientCert`,
//!   which need `client_ca_file`), `client_ca_file`, `min_version` and `max_version` (`TLS12`,
//!   `TLS13`);
//! - `basic_auth_users`: user → bcrypt hash (empty: no authentication, as in the toolkit).
//!
//! Any other key, and settings rustls cannot honour (`TLS10`, the client auth types that accept
//! unverified certificates), are refused with one line naming the key: a security setting that
//! is silently ignored would be worse than none. Relative paths are relative to the file's
//! directory, as the toolkit reads them. The file is read once, when netprobe starts (the
//! toolkit rereads it on every request).

use super::basic_auth::BasicAuth;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_norway::{Mapping, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `/metrics` requires of its clients.
#[derive(Default)]
pub struct WebConfig {
    /// Serve HTTPS with this configuration (plain HTTP when `None`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Require these users' credentials (anyone when `None`).
    pub auth: Option<BasicAuth>,
}

/// Keys of the toolkit's format that netprobe does not implement.
const UNSUPPORTED: &[&str] = &[
    "http_server_config",
    "rate_limit",
    "cert",
    "key",
    "client_ca",
    "client_allowed_sans",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
];

impl WebConfig {
    /// Reads `path`; an error is one line naming the file, the key and the fix.
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        let at = |what: String| format!("--metrics-web-config {}: {what}", path.display());
        let text = std::fs::read_to_string(path)
            .map_err(|e| at(format!("cannot read it ({e}): give a readable file")))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(at)
    }

    /// The configuration in `text`, with relative paths taken from `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<WebConfig, String> {
        let doc: Value = serde_norway::from_str(text).map_err(|e| {
            format!(
                "not YAML ({}): write it as the exporter toolkit's web configuration",
                e.to_string().replace('\n', " ")
            )
        })?;
        let mut config = WebConfig::default();
        let top = match doc {
            // An empty file asks for nothing, as in the toolkit.
            Value::Null => return Ok(config),
            Value::Mapping(m) => m,
            _ => return Err(
                "not a mapping of settings: write `tls_server_config:` and/or `basic_auth_users:`"
                    .into(),
            ),
        };
        for (key, value) in &top {
            match key_name(key, "")? {
                "tls_server_config" => config.tls = Some(tls(value, dir)?),
                "basic_auth_users" => config.auth = users(value)?,
                k => return Err(refused(k, "")),
            }
        }
        Ok(config)
    }
}

/// The one line refusing key `k` (under `parent`).
fn refused(k: &str, parent: &str) -> String {
    if UNSUPPORTED.contains(&k) {
        format!("{parent}{k}: this exporter-toolkit setting is not supported by netprobe; remove it (supported: tls_server_config cert_file, key_file, client_auth_type, client_ca_file, min_version, max_version; basic_auth_users)")
    } else {
        format!("{parent}{k}: unknown key; remove it or fix its spelling (supported: tls_server_config cert_file, key_file, client_auth_type, client_ca_file, min_version, max_version; basic_auth_users)")
    }
}

fn key_name<'a>(key: &'a Value, parent: &str) -> Result<&'a str, String> {
    key.as_str()
        .ok_or_else(|| format!("{parent}{key:?}: a key that is not a string; keys are names"))
}

fn string<'a>(value: &'a Value, key: &str) -> Result<&'a str, String> {
    value
        .as_str()
        .ok_or_else(|| format!("{key}: expected a string, found {value:?}"))
}

fn mapping<'a>(value: &'a Value, key: &str) -> Result<Option<&'a Mapping>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Mapping(m) => Ok(Some(m)),
        v => Err(format!("{key}: expected a mapping, found {v:?}")),
    }
}

/// `basic_auth_users`: every value must be a bcrypt hash.
fn users(value: &Value) -> Result<Option<BasicAuth>, String> {
    let Some(m) = mapping(value, "basic_auth_users")? else {
        return Ok(None);
    };
    let mut users = HashMap::new();
    for (user, hash) in m {
        let user = key_name(user, "basic_auth_users.")?;
        let key = format!("basic_auth_users.{user}");
        let hash = string(hash, &key)?;
        if hash.parse::<bcrypt::HashParts>().is_err() {
            return Err(format!("{key}: not a bcrypt hash: give one such as `htpasswd -nBC 10 \"\" | tr -d ':\\n'` prints"));
        }
        users.insert(user.to_string(), hash.to_string());
    }
    Ok((!users.is_empty()).then(|| BasicAuth::new(users)))
}

/// Who must show a client certificate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientAuth {
    None,
    IfGiven,
    Required,
}

/// `tls_server_config`: a rustls configuration on the ring provider.
fn tls(value: &Value, dir: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    const P: &str = "tls_server_config.";
    let m = mapping(value, "tls_server_config")?
        .ok_or("tls_server_config: empty; give cert_file and key_file")?;
    let (mut cert, mut key, mut ca) = (None, None, None);
    let mut client_auth = ClientAuth::None;
    let mut versions = (&rustls::version::TLS12, &rustls::version::TLS13);
    for (k, v) in m {
        let name = key_name(k, P)?;
        let full = format!("{P}{name}");
        match name {
            "cert_file" => cert = Some(dir.join(string(v, &full)?)),
            "key_file" => key = Some(dir.join(string(v, &full)?)),
            "client_ca_file" => ca = Some(dir.join(string(v, &full)?)),
            "client_auth_type" => {
                client_auth = match string(v, &full)? {
                    "NoClientCert" => ClientAuth::None,
                    "VerifyClientCertIfGiven" => ClientAuth::IfGiven,
                    "RequireAndVerifyClientCert" => ClientAuth::Required,
                    other => return Err(format!("{full}: '{other}' is not supported: use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert (RequestClientCert and RequireAnyClientCert accept certificates nobody verified)")),
                }
            }
            "min_version" => versions.0 = version(string(v, &full)?, &full)?,
            "max_version" => versions.1 = version(string(v, &full)?, &full)?,
            k => return Err(refused(k, P)),
        }
    }
    let (Some(cert), Some(key)) = (cert, key) else {
        return Err("tls_server_config: give both cert_file and key_file (PEM)".into());
    };
    let versions: Vec<_> = [&rustls::version::TLS12, &rustls::version::TLS13]
        .into_iter()
        .filter(|v| {
            let n = |v: &rustls::SupportedProtocolVersion| u16::from(v.version);
            n(v) >= n(versions.0) && n(v) <= n(versions.1)
        })
        .collect();
    if versions.is_empty() {
        return Err(
            "tls_server_config: min_version is above max_version; no TLS version is left".into(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let builder = match (client_auth, ca) {
        (ClientAuth::None, None) => builder.with_no_client_auth(),
        (ClientAuth::None, Some(_)) => {
            return Err("tls_server_config.client_ca_file: unused with client_auth_type NoClientCert: set client_auth_type RequireAndVerifyClientCert, or remove client_ca_file".into())
        }
        (_, None) => {
            return Err("tls_server_config.client_auth_type: verifying client certificates needs client_ca_file".into())
        }
        (auth, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certificates(&ca, "client_ca_file")? {
                roots.add(c).map_err(|e| {
                    format!("{P}client_ca_file: {}: not a CA certificate ({e})", ca.display())
                })?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::IfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("{P}client_ca_file: {e}"))?,
            )
        }
    };
    let chain = certificates(&cert, "cert_file")?;
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| {
        format!(
            "{P}key_file: {}: no private key read ({e}): give a PEM key (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        )
    })?;
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        format!("{P}cert_file and key_file do not make a usable pair ({e}): give the key of the first certificate")
    })?;
    // Only HTTP/1.1 is served; a client offering HTTP/2 as well gets HTTP/1.1 (RFC 7301).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The PEM certificates of file `path` (key `key`), at least one.
fn certificates(path: &PathBuf, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let what = |e: String| format!("tls_server_config.{key}: {}: {e}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| what(format!("cannot read it ({e})")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| what(format!("not PEM ({e})")))?;
    if certs.is_empty() {
        return Err(what("no CERTIFICATE in it: give a PEM certificate".into()));
    }
    Ok(certs)
}

fn version(text: &str, key: &str) -> Result<&'static rustls::SupportedProtocolVersion, String> {
    match text {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => Err(format!(
            "{key}: {text} is not supported (rustls implements TLS 1.2 and 1.3): use TLS12 or TLS13"
        )),
        other => Err(format!(
            "{key}: '{other}' is not a TLS version: use TLS12 or TLS13"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with a server certificate (`cert.pem`), its key (`key.pem`) and its CA
    /// (`ca.pem`).
    fn with_cert() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fixtures::tls::write_certificates(dir.path()).unwrap();
        dir
    }

    fn parse(text: &str) -> Result<WebConfig, String> {
        let dir = with_cert();
        WebConfig::parse(text, dir.path())
    }

    #[test]
    fn tls_and_users_are_read() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let c = parse(&format!(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS13\nbasic_auth_users:\n  prom: {hash}\n"
        ))
        .unwrap();
        assert!(c.tls.is_some() && c.auth.is_some());
        let mutual = parse(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
        )
        .unwrap();
        assert!(mutual.tls.is_some() && mutual.auth.is_none());
        let empty = parse("").unwrap();
        assert!(empty.tls.is_none() && empty.auth.is_none());
        assert!(parse("basic_auth_users: {}\n").unwrap().auth.is_none());
    }

    /// Each refusal is one line naming the key.
    #[test]
    fn unknown_or_unsupported_keys_are_refused_by_name() {
        let cases = [
            ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "tls_server_config.cipher_suites: this exporter-toolkit setting is not supported"),
            ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  certfile: x\n", "tls_server_config.certfile: unknown key"),
            ("rate_limit:\n  interval: 1s\n", "rate_limit: this exporter-toolkit setting is not supported"),
            ("http_server_config:\n  http2: false\n", "http_server_config: this exporter-toolkit setting"),
            ("basic_auth_user:\n  a: b\n", "basic_auth_user: unknown key"),
            ("basic_auth_users:\n  prom: plaintext\n", "basic_auth_users.prom: not a bcrypt hash"),
            ("tls_server_config:\n  cert_file: cert.pem\n", "give both cert_file and key_file"),
            ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS10\n", "tls_server_config.min_version: TLS10 is not supported"),
            ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAnyClientCert\n", "tls_server_config.client_auth_type: 'RequireAnyClientCert' is not supported"),
            ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
            ("tls_server_config:\n  cert_file: missing.pem\n  key_file: key.pem\n", "tls_server_config.cert_file: "),
            ("tls_server_config:\n  cert_file: key.pem\n  key_file: key.pem\n", "no CERTIFICATE in it"),
            ("tls_server_config: [a\n", "not YAML"),
            ("- a\n", "not a mapping"),
        ];
        for (text, want) in cases {
            let e = parse(text)
                .err()
                .unwrap_or_else(|| panic!("accepted: {text}"));
            assert!(e.contains(want), "{text}\n=> {e}\n(want {want})");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
