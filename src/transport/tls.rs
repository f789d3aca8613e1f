//! What a remote connection trusts and which certificate it shows: one rustls configuration for
//! every remote transport (Streamable HTTP, HTTP+SSE, WebSocket) and every OAuth request.
//!
//! Trust, in this order, each added to the one before:
//! 1. the system's trust store (`rustls-native-certs`: `SSL_CERT_FILE` / `SSL_CERT_DIR` in place
//!    of it when set, as OpenSSL reads them); the roots compiled into `webpki-roots` only when the
//!    system has none at all;
//! 2. `NODE_EXTRA_CA_CERTS` (a PEM file), added as Node and Claude Code add it;
//! 3. `tls.ca_file` and `tls.ca_pem` of the connection's options, then of the server's entry.
//!
//! The client certificate: `tls.client_cert` / `client_key` / `client_key_passphrase` (the entry's
//! over the connection's), else `CLAUDE_CODE_CLIENT_CERT` / `_KEY` / `_KEY_PASSPHRASE`. A key may
//! be PKCS#8, PKCS#1 or SEC1 PEM, or encrypted PKCS#8 with its passphrase.

use crate::error::Error;
use parking_lot::Mutex;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use std::sync::Arc;

/// A `tls` object of a server entry or of the connection's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TlsOptions {
    pub ca_file: Option<String>,
    pub ca_pem: Option<String>,
    pub client_cert: Option<String>,
    pub client_key: Option<String>,
    pub client_key_passphrase: Option<String>,
}

const KEYS: &[&str] = &[
    "ca_file",
    "ca_pem",
    "client_cert",
    "client_key",
    "client_key_passphrase",
];

impl TlsOptions {
    /// `what`: where it was given (`server field `tls``, `option `tls``), for errors.
    pub fn parse(v: &Value, what: &str) -> Result<Option<TlsOptions>, Error> {
        let obj = match v {
            Value::Null => return Ok(None),
            Value::Object(o) => o,
            v => {
                return Err(Error::invalid(format!(
                    "{what} must be an object {{ca_file, ca_pem, client_cert, client_key, client_key_passphrase}} (got {v})"
                )))
            }
        };
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(Error::invalid(format!(
                "{what}: unknown key `{k}` (known: {})",
                KEYS.join(", ")
            )));
        }
        let field = |k: &str| -> Result<Option<String>, Error> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(v) => Err(Error::invalid(format!(
                    "{what}.{k} must be a non-empty string (got {v})"
                ))),
            }
        };
        let o = TlsOptions {
            ca_file: field("ca_file")?,
            ca_pem: field("ca_pem")?,
            client_cert: field("client_cert")?,
            client_key: field("client_key")?,
            client_key_passphrase: field("client_key_passphrase")?,
        };
        if o.client_cert.is_some() != o.client_key.is_some() {
            return Err(Error::invalid(format!(
                "{what}: `client_cert` and `client_key` go together (a certificate and its key)"
            )));
        }
        Ok(Some(o))
    }

    /// `over`'s fields where it has them, this one's elsewhere.
    pub fn under(&self, over: &TlsOptions) -> TlsOptions {
        let pick = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
        // A client certificate is one thing: its key and passphrase come with it.
        let (cert, key, pass) = if over.client_cert.is_some() {
            (
                over.client_cert.clone(),
                over.client_key.clone(),
                over.client_key_passphrase.clone(),
            )
        } else {
            (
                self.client_cert.clone(),
                self.client_key.clone(),
                self.client_key_passphrase.clone(),
            )
        };
        TlsOptions {
            ca_file: pick(&over.ca_file, &self.ca_file),
            ca_pem: pick(&over.ca_pem, &self.ca_pem),
            client_cert: cert,
            client_key: key,
            client_key_passphrase: pass,
        }
    }
}

/// A built configuration and what went into it (for `--debug` and `mcplug get`).
#[derive(Debug)]
pub struct Trust {
    pub config: Arc<rustls::ClientConfig>,
    /// The trust sources consulted, in order: `system (N)`, `SSL_CERT_FILE=…`,
    /// `NODE_EXTRA_CA_CERTS=…`, `tls.ca_file=…`, `tls.ca_pem`, `webpki-roots`.
    pub sources: Vec<String>,
    /// Where the client certificate came from, if one is shown.
    pub client_cert: Option<String>,
}

/// The environment variables read (a snapshot keys the cached default configuration).
const ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "CLAUDE_CODE_CLIENT_CERT",
    "CLAUDE_CODE_CLIENT_KEY",
    "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE",
];

type Key = (Vec<Option<String>>, Option<TlsOptions>);

/// The configurations built so far (a handful: the default, and one per distinct `tls`).
static BUILT: Mutex<Vec<(Key, Arc<Trust>)>> = Mutex::new(Vec::new());

/// A server's `tls` as its entry and its connection's options say it, resolved when needed
/// (building a configuration reads the system's store: done once, on the runtime).
#[derive(Debug, Clone, Default)]
pub struct TlsChoice {
    pub entry: Option<TlsOptions>,
    pub connection: Option<TlsOptions>,
}

impl TlsChoice {
    pub fn trust(&self) -> Result<Arc<Trust>, Error> {
        trust_for(self.entry.as_ref(), self.connection.as_ref())
    }
}

/// The trust of a server whose entry says `entry` and whose connection's options say
/// `connection` (the entry's fields win).
pub fn trust_for(
    entry: Option<&TlsOptions>,
    connection: Option<&TlsOptions>,
) -> Result<Arc<Trust>, Error> {
    let merged = match (connection, entry) {
        (Some(c), Some(e)) => Some(c.under(e)),
        (c, e) => e.or(c).cloned(),
    };
    trust(merged.as_ref())
}

/// The trust of a connection whose options and entry say `tls` as given (`None`: neither).
/// Built once per distinct environment and options, then shared.
pub fn trust(options: Option<&TlsOptions>) -> Result<Arc<Trust>, Error> {
    let env: Vec<Option<String>> = ENV
        .iter()
        .map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .collect();
    let key: Key = (env, options.cloned());
    if let Some((_, t)) = BUILT.lock().iter().find(|(k, _)| *k == key) {
        return Ok(t.clone());
    }
    let t = Arc::new(build(options, &|name: &str| {
        ENV.iter()
            .position(|v| *v == name)
            .and_then(|i| key.0[i].clone())
    })?);
    let mut built = BUILT.lock();
    if built.len() >= 64 {
        built.remove(0);
    }
    built.push((key, t.clone()));
    Ok(t)
}

fn build(
    options: Option<&TlsOptions>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Trust, Error> {
    let mut roots = rustls::RootCertStore::empty();
    let mut sources = Vec::new();
    // 1. The system's store (or SSL_CERT_FILE / SSL_CERT_DIR in its place).
    let native = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(native.certs);
    let system = match (env("SSL_CERT_FILE"), env("SSL_CERT_DIR")) {
        (Some(f), Some(d)) => format!("SSL_CERT_FILE={f} and SSL_CERT_DIR={d}"),
        (Some(f), None) => format!("SSL_CERT_FILE={f}"),
        (None, Some(d)) => format!("SSL_CERT_DIR={d}"),
        (None, None) => "the system's trust store".to_string(),
    };
    sources.push(format!("{system} ({added} certificates)"));
    if added == 0 {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        sources.push("the roots built into mcplug (webpki-roots)".into());
    }
    // 2. NODE_EXTRA_CA_CERTS, added.
    if let Some(file) = env("NODE_EXTRA_CA_CERTS") {
        let n = add_pem_file(&mut roots, &file, "NODE_EXTRA_CA_CERTS")?;
        sources.push(format!("NODE_EXTRA_CA_CERTS={file} ({n})"));
    }
    // 3. The options' own CAs.
    if let Some(o) = options {
        if let Some(file) = &o.ca_file {
            let n = add_pem_file(&mut roots, file, "tls.ca_file")?;
            sources.push(format!("tls.ca_file={file} ({n})"));
        }
        if let Some(pem) = &o.ca_pem {
            let n = add_pem(&mut roots, pem.as_bytes(), "tls.ca_pem")?;
            sources.push(format!("tls.ca_pem ({n})"));
        }
    }
    let provider = Arc::new(provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::transport(format!("cannot set up TLS: {e}")))?
        .with_root_certificates(roots);
    let identity = match options.and_then(|o| Some((o.client_cert.clone()?, o.client_key.clone()?, o.client_key_passphrase.clone()))) {
        Some((cert, key, pass)) => Some((cert, key, pass, "tls.client_cert")),
        None => match (env("CLAUDE_CODE_CLIENT_CERT"), env("CLAUDE_CODE_CLIENT_KEY")) {
            (Some(cert), Some(key)) => Some((
                cert,
                key,
                env("CLAUDE_CODE_CLIENT_KEY_PASSPHRASE"),
                "CLAUDE_CODE_CLIENT_CERT",
            )),
            (Some(_), None) | (None, Some(_)) => {
                return Err(Error::invalid(
                    "CLAUDE_CODE_CLIENT_CERT and CLAUDE_CODE_CLIENT_KEY go together (a certificate and its key)",
                ))
            }
            (None, None) => None,
        },
    };
    let (config, client_cert) = match identity {
        Some((cert, key, pass, from)) => {
            let chain = read_certs(&cert, from)?;
            let key = read_key(&key, pass.as_deref(), from)?;
            let config = builder.with_client_auth_cert(chain, key).map_err(|e| {
                Error::invalid(format!(
                    "{from}: the certificate and key do not make a client identity: {e}"
                ))
            })?;
            (config, Some(format!("{from}={cert}")))
        }
        None => (builder.with_no_client_auth(), None),
    };
    Ok(Trust {
        config: Arc::new(config),
        sources,
        client_cert,
    })
}

/// ring's suites, with TLS 1.3's AES-128-GCM offered before AES-256-GCM (as browsers and Go
/// order them): every suite stays, but a server that takes the client's order encrypts each call
/// with 10 AES rounds instead of 14 (measured on a small call: the cryptography's ~4.5k
/// instructions down to ~4.1k).
fn provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::ring::cipher_suite as suite;
    let mut provider = rustls::crypto::ring::default_provider();
    let rank = |s: &rustls::SupportedCipherSuite| {
        let s = s.suite();
        [
            suite::TLS13_AES_128_GCM_SHA256,
            suite::TLS13_AES_256_GCM_SHA384,
            suite::TLS13_CHACHA20_POLY1305_SHA256,
        ]
        .iter()
        .position(|t| t.suite() == s)
        .unwrap_or(3)
    };
    provider.cipher_suites.sort_by_key(rank);
    provider
}

fn read_file(path: &str, what: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::invalid(format!("{what} {path}: cannot be read: {e}")))
}

fn add_pem_file(roots: &mut rustls::RootCertStore, path: &str, what: &str) -> Result<usize, Error> {
    add_pem(roots, &read_file(path, what)?, &format!("{what} {path}"))
}

fn add_pem(roots: &mut rustls::RootCertStore, pem: &[u8], what: &str) -> Result<usize, Error> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| Error::invalid(format!("{what}: not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!(
            "{what}: no certificate in it (a PEM file of `-----BEGIN CERTIFICATE-----` blocks)"
        )));
    }
    let (added, refused) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::invalid(format!(
            "{what}: none of its {refused} certificate(s) can be a trust anchor"
        )));
    }
    Ok(added)
}

fn read_certs(path: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = read_file(path, what)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| Error::invalid(format!("{what} {path}: not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!(
            "{what} {path}: no certificate in it"
        )));
    }
    Ok(certs)
}

fn read_key(
    path: &str,
    passphrase: Option<&str>,
    what: &str,
) -> Result<PrivateKeyDer<'static>, Error> {
    let pem = read_file(path, &format!("{what}'s key"))?;
    let text = String::from_utf8_lossy(&pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        let Some(pass) = passphrase else {
            return Err(Error::invalid(format!(
                "{what}'s key {path} is encrypted: give its passphrase (client_key_passphrase, or CLAUDE_CODE_CLIENT_KEY_PASSPHRASE)"
            )));
        };
        use pkcs8::der::pem::PemLabel;
        let start = text
            .find("-----BEGIN ENCRYPTED PRIVATE KEY-----")
            .unwrap_or_default();
        let (label, doc) = pkcs8::der::SecretDocument::from_pem(&text[start..])
            .map_err(|e| Error::invalid(format!("{what}'s key {path}: not PEM: {e}")))?;
        if label != pkcs8::EncryptedPrivateKeyInfo::PEM_LABEL {
            return Err(Error::invalid(format!(
                "{what}'s key {path}: not an encrypted PKCS#8 key"
            )));
        }
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| {
            Error::invalid(format!(
                "{what}'s key {path}: not an encrypted PKCS#8 key: {e}"
            ))
        })?;
        let plain = info.decrypt(pass).map_err(|_| {
            Error::invalid(format!(
                "{what}'s key {path} cannot be decrypted with the passphrase given (wrong passphrase, or a cipher not supported)"
            ))
        })?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(Error::invalid(format!(
            "{what}'s key {path} is encrypted in the legacy OpenSSL format; convert it to PKCS#8 (`openssl pkcs8 -topk8 -in KEY -out KEY8`)"
        )));
    }
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        Error::invalid(format!(
            "{what}'s key {path}: no private key in it (PKCS#8, PKCS#1 or SEC1 PEM): {e}"
        ))
    })
}

/// The TLS failure in an error's causes, in words: why the certificate was refused (unknown
/// issuer, expired, another name) or the handshake failed (a client certificate required).
/// `None` when the error is no TLS matter.
pub fn reason(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<rustls::Error>() {
            return Some(reason_of(r));
        }
        // The TLS layers wrap it in an io::Error, or two (tokio-rustls, then hyper-rustls), whose
        // `source()` skips what they wrap.
        let mut io = s.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(|e| e.get_ref()) {
            if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                return Some(reason_of(r));
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        source = s.source();
    }
    None
}

impl Trust {
    /// What was trusted and shown, for an error or a log line.
    pub fn describe(&self) -> String {
        format!(
            "trusted: {}{}",
            self.sources.join(", "),
            self.client_cert
                .as_ref()
                .map(|c| format!("; client certificate from {c}"))
                .unwrap_or_else(|| "; no client certificate".into())
        )
    }

    /// A TLS failure (marked `data.tls` by `remote::request_error`) with what was trusted.
    pub fn annotate(&self, mut e: Error) -> Error {
        if e.data.as_ref().is_some_and(|d| d.get("tls").is_some()) {
            e.message = format!("{} ({})", e.message, self.describe());
        }
        e
    }
}

fn reason_of(e: &rustls::Error) -> String {
    use rustls::{AlertDescription, CertificateError, Error as E};
    match e {
        E::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the server's certificate is from an unknown issuer (a CA none of the trust sources has: give it with tls.ca_file, SSL_CERT_FILE or NODE_EXTRA_CA_CERTS)".into()
        }
        E::InvalidCertificate(CertificateError::Expired)
        | E::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            "the server's certificate has expired".into()
        }
        E::InvalidCertificate(CertificateError::NotValidYet)
        | E::InvalidCertificate(CertificateError::NotValidYetContext { .. }) => {
            "the server's certificate is not valid yet".into()
        }
        E::InvalidCertificate(CertificateError::NotValidForName)
        | E::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            "the server's certificate is for another name".into()
        }
        E::InvalidCertificate(c) => format!("the server's certificate was refused: {c:?}"),
        E::AlertReceived(AlertDescription::CertificateRequired)
        | E::AlertReceived(AlertDescription::HandshakeFailure) => {
            format!(
                "the server refused the handshake ({e}): it may require a client certificate (tls.client_cert and client_key, or CLAUDE_CODE_CLIENT_CERT and _KEY)"
            )
        }
        E::AlertReceived(AlertDescription::BadCertificate)
        | E::AlertReceived(AlertDescription::UnknownCA) => {
            "the server refused our client certificate".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_are_checked_naming_the_field() {
        let what = "server field `tls`";
        assert_eq!(TlsOptions::parse(&json!(null), what).unwrap(), None);
        let o = TlsOptions::parse(&json!({"ca_file": "/x.pem"}), what)
            .unwrap()
            .unwrap();
        assert_eq!(o.ca_file.as_deref(), Some("/x.pem"));
        for (bad, says) in [
            (json!("x"), "must be an object"),
            (json!({"cafile": "x"}), "unknown key `cafile`"),
            (
                json!({"ca_file": 1}),
                "tls`.ca_file must be a non-empty string",
            ),
            (json!({"client_cert": "c"}), "go together"),
        ] {
            let e = TlsOptions::parse(&bad, what).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn the_entrys_fields_win_and_a_client_identity_is_one_thing() {
        let conn = TlsOptions {
            ca_file: Some("conn.pem".into()),
            client_cert: Some("c1".into()),
            client_key: Some("k1".into()),
            client_key_passphrase: Some("p1".into()),
            ..Default::default()
        };
        let entry = TlsOptions {
            ca_pem: Some("PEM".into()),
            client_cert: Some("c2".into()),
            client_key: Some("k2".into()),
            ..Default::default()
        };
        let m = conn.under(&entry);
        assert_eq!(m.ca_file.as_deref(), Some("conn.pem"));
        assert_eq!(m.ca_pem.as_deref(), Some("PEM"));
        assert_eq!(
            (m.client_cert.as_deref(), m.client_key_passphrase.as_deref()),
            (Some("c2"), None)
        );
    }

    #[test]
    fn missing_and_wrong_files_are_named() {
        let o = TlsOptions {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..Default::default()
        };
        let e = build(Some(&o), &|_| None).unwrap_err();
        assert!(
            e.message
                .contains("tls.ca_file /nonexistent/ca.pem: cannot be read"),
            "{}",
            e.message
        );
        let o = TlsOptions {
            ca_pem: Some("not a pem".into()),
            ..Default::default()
        };
        let e = build(Some(&o), &|_| None).unwrap_err();
        assert!(
            e.message.contains("tls.ca_pem: no certificate"),
            "{}",
            e.message
        );
        let e = build(None, &|n| {
            (n == "CLAUDE_CODE_CLIENT_CERT").then(|| "/c.pem".to_string())
        })
        .unwrap_err();
        assert!(e.message.contains("go together"), "{}", e.message);
    }
}
