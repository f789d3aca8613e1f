//! The HTTP of OAuth: its own reqwest client (never the MCP connection's), with the rules every
//! discovered URL needs — the SSRF guard on each URL and on the addresses it resolves to, no
//! redirects (a token or registration request is never re-sent elsewhere, and a metadata
//! document is read where it was asked for), a time limit per request — plus DPoP proofs and
//! their nonces on token requests, and the 200-with-an-error bodies normalized.

use super::jws::{self, SigningKey};
use super::ssrf::{Guard, GuardedResolver};
use crate::error::{Error, ErrorKind, Result};
use base64::Engine as _;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The largest OAuth answer read (metadata, registration, token).
const MAX_BODY: usize = 1 << 20;

pub(crate) struct Net {
    /// Built on first use, on the runtime: most connections never need it, and building one
    /// (TLS roots, a pool) costs time and — in a debug build — more stack than a host thread
    /// with a small stack has.
    http: once_cell::sync::OnceCell<reqwest::Client>,
    /// The client of the requests that go through a proxy (the proxy resolves their names, so
    /// the guard checks their hosts as written: `check`).
    proxied: once_cell::sync::OnceCell<reqwest::Client>,
    proxies: crate::transport::proxy::Proxies,
    timeout: Duration,
    guard: Guard,
    /// What its TLS trusts: the server's connection's trust.
    trust: crate::transport::tls::TlsChoice,
    /// DPoP: the last nonce the authorization server asked for.
    as_nonce: Mutex<Option<String>>,
}

/// An answer: status, headers, body (at most `MAX_BODY`).
pub(crate) struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// How a token request authenticates the client (one method only, RFC 6749 §2.3).
pub(crate) enum ClientAuth<'a> {
    /// `client_id` in the body (a public client).
    None(&'a str),
    /// HTTP Basic with the id and secret form-encoded (RFC 6749 §2.3.1).
    Basic(&'a str, &'a str),
    /// `client_id` and `client_secret` in the body.
    Post(&'a str, &'a str),
    /// `client_assertion` (private_key_jwt; RFC 7523 §2.2), no `client_id`.
    Assertion(String),
    /// Nothing at all (a jwt-bearer grant whose assertion is the client's identity).
    Nothing,
}

impl Net {
    pub(crate) fn new(
        guard: Guard,
        timeout: Duration,
        trust: crate::transport::tls::TlsChoice,
        proxies: crate::transport::proxy::Proxies,
    ) -> Result<Net> {
        Ok(Net {
            http: once_cell::sync::OnceCell::new(),
            proxied: once_cell::sync::OnceCell::new(),
            proxies,
            timeout,
            guard,
            trust,
            as_nonce: Mutex::new(None),
        })
    }

    /// The client for `url`: through its proxy when one applies, else direct with the guarded
    /// resolver.
    fn http(&self, url: &reqwest::Url) -> Result<&reqwest::Client> {
        let proxied = self.proxies.for_url(url).is_some();
        let cell = if proxied { &self.proxied } else { &self.http };
        cell.get_or_try_init(|| {
            let trust = self.trust.trust()?;
            let builder = reqwest::Client::builder()
                .timeout(self.timeout)
                .connect_timeout(self.timeout)
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .user_agent(concat!("mcplug/", env!("CARGO_PKG_VERSION")))
                .use_preconfigured_tls((*trust.config).clone());
            let builder = if proxied {
                // The proxy resolves the names (the guard checks the hosts as written, `check`);
                // one request a connection (see `remote::http_client`): OAuth makes few.
                builder
                    .proxy(self.proxies.reqwest())
                    .pool_max_idle_per_host(0)
            } else {
                builder.dns_resolver(Arc::new(GuardedResolver(self.guard.clone())))
            };
            builder
                .build()
                .map_err(|e| Error::transport(format!("cannot build the OAuth HTTP client: {e}")))
        })
    }

    pub(crate) fn check(&self, url: &str, what: &str) -> Result<reqwest::Url> {
        self.guard.check_url(url, what).map_err(auth_error)
    }

    /// Reads an answer's body (within the request's time limit, which covers the body too): a
    /// body that stops coming, or breaks off, is that error — never an empty answer, which
    /// would read as the server's refusal.
    async fn read(&self, resp: reqwest::Response, what: &str, url: &str) -> Result<Answer> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = Vec::new();
        let mut resp = resp;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY {
                        return Err(auth_error(format!(
                            "{what} {url}: the answer is larger than {MAX_BODY} bytes"
                        )));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(net_error(what, url, &e)),
            }
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// GETs a JSON document (metadata). `Ok(None)` for an answer that is not a 2xx JSON object
    /// (the caller tries the next place); an error when the URL is refused or unreachable.
    pub(crate) async fn get_json(&self, url: &str, what: &str) -> Result<Option<Value>> {
        let parsed = self.check(url, what)?;
        let resp = self
            .http(&parsed)?
            .get(parsed.clone())
            .header(ACCEPT, "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .map_err(|e| net_error(what, url, &e))?;
        let answer = self.read(resp, what, url).await?;
        if !(200..300).contains(&answer.status) {
            return Ok(None);
        }
        Ok(answer.json().filter(Value::is_object))
    }

    /// POSTs JSON (dynamic registration).
    pub(crate) async fn post_json(&self, url: &str, body: &Value, what: &str) -> Result<Answer> {
        let parsed = self.check(url, what)?;
        let resp = self
            .http(&parsed)?
            .post(parsed.clone())
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| net_error(what, url, &e))?;
        self.read(resp, what, url).await
    }

    /// A token request: the form, the client's authentication, a DPoP proof when DPoP is on
    /// (and once more with the server's nonce when it asks for one). The answer's status and
    /// body are normalized (an error sent with 200 becomes 400).
    pub(crate) async fn token(
        &self,
        url: &str,
        form: &[(&str, &str)],
        auth: &ClientAuth<'_>,
        dpop: Option<&SigningKey>,
        what: &str,
    ) -> Result<Answer> {
        let parsed = self.check(url, what)?;
        let mut form: Vec<(&str, &str)> = form.to_vec();
        let assertion;
        let mut basic = None;
        match auth {
            ClientAuth::None(id) => form.push(("client_id", id)),
            ClientAuth::Basic(id, secret) => basic = Some(basic_value(id, secret)),
            ClientAuth::Post(id, secret) => {
                form.push(("client_id", id));
                form.push(("client_secret", secret));
            }
            ClientAuth::Assertion(a) => {
                assertion = a.clone();
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                ));
                form.push(("client_assertion", &assertion));
            }
            ClientAuth::Nothing => {}
        }
        let htu = strip_query(url);
        let mut tried_nonce = false;
        loop {
            let mut req = self
                .http(&parsed)?
                .post(parsed.clone())
                .header(ACCEPT, "application/json")
                .form(&form);
            if let Some(b) = &basic {
                req = req.header(AUTHORIZATION, b.as_str());
            }
            if let Some(key) = dpop {
                let nonce = self.as_nonce.lock().clone();
                let proof = jws::dpop_proof(key, "POST", &htu, None, nonce.as_deref(), None)
                    .map_err(|e| Error::new(ErrorKind::NeedsAuth, format!("DPoP proof: {e}")))?;
                req = req.header("dpop", proof);
            }
            let resp = req.send().await.map_err(|e| net_error(what, url, &e))?;
            let mut answer = self.read(resp, what, url).await?;
            let (status, body) = super::normalize::token_response(answer.status, &answer.body);
            let body = body.into_owned();
            answer.status = status;
            answer.body = body;
            if dpop.is_some() {
                if let Some(nonce) = answer
                    .headers
                    .get("dpop-nonce")
                    .and_then(|v| v.to_str().ok())
                {
                    *self.as_nonce.lock() = Some(nonce.to_string());
                    let asks = answer
                        .json()
                        .and_then(|v| v.get("error")?.as_str().map(str::to_string))
                        .is_some_and(|e| e == "use_dpop_nonce");
                    if asks && !tried_nonce {
                        tried_nonce = true;
                        continue;
                    }
                }
            }
            return Ok(answer);
        }
    }
}

/// `Basic base64(urlencode(id):urlencode(secret))` (RFC 6749 §2.3.1).
fn basic_value(id: &str, secret: &str) -> String {
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", enc(id), enc(secret));
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

/// A URL without its query and fragment (a DPoP proof's `htu`).
pub(crate) fn strip_query(url: &str) -> String {
    let end = url.find(['?', '#']).unwrap_or(url.len());
    url[..end].to_string()
}

pub(crate) fn auth_error(message: String) -> Error {
    Error::new(ErrorKind::NeedsAuth, message)
}

/// A request that failed or ran out of time (`auth_request_timeout_ms` covers the answer's body
/// too): `needs_auth`, with reason `timeout` when it ran out of time.
fn net_error(what: &str, url: &str, e: &reqwest::Error) -> Error {
    let why = crate::transport::remote::chain(e);
    if let Some(reason) = crate::transport::tls::reason(e) {
        let host = e.url().and_then(|u| u.host_str()).unwrap_or(url);
        return Error::new(
            ErrorKind::NeedsAuth,
            format!("{what} {url}: the TLS connection to {host} failed: {reason}"),
        )
        .with_data(serde_json::json!({"reason": "tls", "tls": reason}));
    }
    if e.is_timeout() {
        Error::new(
            ErrorKind::NeedsAuth,
            format!("{what} {url}: no complete answer in time ({why}; auth_request_timeout_ms)"),
        )
        .with_data(serde_json::json!({"reason": "timeout"}))
    } else {
        Error::new(ErrorKind::NeedsAuth, format!("{what} {url} failed: {why}"))
    }
}
