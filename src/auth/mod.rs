//! OAuth for remote MCP servers (FEATURES A1–A6), as the credentials of a connection (see
//! `transport::credentials`): lazy — nothing happens until a server answers 401 (or 403
//! `insufficient_scope`) — then discovery, a client identity (pre-registered, a Client ID
//! Metadata Document, or dynamic registration, each bound to its issuer), a grant
//! (authorization code with PKCE through the host; client credentials; jwt-bearer for workload
//! identity; enterprise-managed authorization), DPoP where the server uses it, and the token
//! kept in the store, refreshed before it expires and after a 401.
//!
//! Nothing secret leaves this module except in the headers of the requests it is for: errors,
//! events and logs name issuers, scopes and URLs, never a token, secret, code or assertion.

pub mod challenge;
pub mod discovery;
pub(crate) mod flow;
mod grant;
pub(crate) mod helper;
pub mod host;
pub mod jws;
pub(crate) mod net;
pub mod normalize;
pub mod ssrf;
pub mod store;
pub mod xaa;

use crate::error::{Error, ErrorKind, Result};
use discovery::Discovered;
use jws::SigningKey;
use net::{auth_error, Net};
use parking_lot::{Mutex, RwLock};
use reqwest::header::HeaderValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use store::Store;

/// The connection (and manager) options of authorization: the store, the redirect, the client
/// identity and the host hooks (the README's "Authorizing a server").
#[derive(Debug, Clone)]
pub struct AuthOptions {
    /// `auth_store`: a directory, `"memory"`, or the default directory.
    pub store: Option<String>,
    /// `auth_interactive`: the host answers `auth/authorize`.
    pub interactive: bool,
    /// `auth_timeout_ms`: the whole interactive flow.
    pub timeout: Duration,
    /// `auth_request_timeout_ms`: each OAuth HTTP request.
    pub request_timeout: Duration,
    /// `auth_cache_ttl_ms`: how long a server stays `needs-auth` before it is probed again.
    pub cache_ttl: Duration,
    /// `refresh_skew_ms`: how long before its expiry a token is refreshed.
    pub refresh_skew: Duration,
    /// `allow_private_auth_urls`.
    pub allow_private: bool,
    /// `auth_channel`: echoed in `auth/authorize` requests, for hosts with many connections.
    pub channel: Option<String>,
    /// `headers_helper_timeout_ms`: how long the entry's `headersHelper` may run.
    pub helper_timeout: Duration,
    /// Where `auth/authorize` goes instead of the process's queue (the manager's; not an option
    /// a host gives).
    pub hook: Option<host::Hook>,
    /// `xaa_idp`: the enterprise IdP of the servers whose entry says `oauth.xaa: true`.
    pub xaa_idp: Option<xaa::XaaIdp>,
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            store: None,
            interactive: false,
            timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(30),
            cache_ttl: Duration::from_secs(900),
            refresh_skew: Duration::from_secs(300),
            allow_private: false,
            channel: None,
            helper_timeout: Duration::from_secs(10),
            hook: None,
            xaa_idp: None,
        }
    }
}

fn opt_ms(obj: &Map<String, Value>, key: &str) -> Result<Option<Duration>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|ms| Some(Duration::from_millis(ms)))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "option `{key}` must be a non-negative integer of milliseconds (got {v})"
                ))
            }),
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    obj.get(key)
        .map_or(Ok(None), |v| crate::shape::bool_of(key, v))
}

fn opt_str(obj: &Map<String, Value>, key: &str, what: &str) -> Result<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(v) => Err(Error::invalid(format!(
            "{what} `{key}` must be a non-empty string (got {})",
            if v.is_string() {
                "\"\"".to_string()
            } else {
                v.to_string()
            }
        ))),
    }
}

/// The keys of the authorization options (part of a connection's options).
pub const AUTH_KEYS: &[&str] = &[
    "auth_store",
    "auth_interactive",
    "auth_timeout_ms",
    "auth_request_timeout_ms",
    "auth_cache_ttl_ms",
    "refresh_skew_ms",
    "allow_private_auth_urls",
    "auth_channel",
    "headers_helper_timeout_ms",
    "xaa_idp",
];

impl AuthOptions {
    pub fn parse(obj: &Map<String, Value>) -> Result<AuthOptions> {
        let mut o = AuthOptions {
            store: opt_str(obj, "auth_store", "option")?,
            channel: opt_str(obj, "auth_channel", "option")?,
            ..Default::default()
        };
        o.interactive = opt_bool(obj, "auth_interactive")?.unwrap_or(false);
        o.allow_private = opt_bool(obj, "allow_private_auth_urls")?.unwrap_or(false);
        if let Some(d) = opt_ms(obj, "auth_timeout_ms")? {
            o.timeout = d;
        }
        if let Some(d) = opt_ms(obj, "auth_request_timeout_ms")? {
            o.request_timeout = d;
        }
        if let Some(d) = opt_ms(obj, "auth_cache_ttl_ms")? {
            o.cache_ttl = d;
        }
        if let Some(d) = opt_ms(obj, "refresh_skew_ms")? {
            o.refresh_skew = d;
        }
        if let Some(d) = opt_ms(obj, "headers_helper_timeout_ms")? {
            o.helper_timeout = d;
        }
        o.xaa_idp = match obj.get("xaa_idp") {
            None | Some(Value::Null) => None,
            Some(v) => Some(xaa::XaaIdp::parse(v)?),
        };
        Ok(o)
    }
}

/// Forgets what the store holds for the server at `url` (its tokens, registrations, needs-auth
/// mark): logout. Whether there was anything. The record is removed without being read: one
/// that cannot be used (corrupt, not a regular file, a symbolic link) goes too — logout is the
/// way out that a connection's error names.
pub fn logout(url: &str, options: &AuthOptions) -> Result<bool> {
    let store = Store::locate(options.store.as_deref())
        .map_err(|e| Error::invalid(format!("option `auth_store`: {e}")))?;
    store
        .remove(&store_key(url))
        .map_err(|e| Error::new(ErrorKind::Config, format!("the auth store: {e}")))
}

/// The store's key of the server at `url`.
fn store_key(url: &str) -> String {
    format!("server {url}")
}

/// A store failure as a connection's error. A record that cannot be used would fail every
/// connect to the server and nothing would ever fix it: the error names the way out, logout
/// (the CLI's, and each binding's), which removes it.
fn store_error(e: store::StoreError, name: Option<&str>) -> Error {
    let mut message = format!("the auth store: {}", e.message);
    if e.unusable_record {
        let name = name.unwrap_or("<server>");
        message.push_str(&format!(
            "; log out of the server to remove it: `mcplug logout {name}`, or \
             mcplug_auth_logout(entry) / mcplug_manager_logout(\"{name}\") (Python \
             mcplug.auth_logout(entry) / Manager.logout(\"{name}\"), Node authLogout(entry) / \
             manager.logout(\"{name}\")), then log in again"
        ));
    }
    Error::new(ErrorKind::Config, message)
}

/// The grant a server entry asks for (`oauth.grant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    AuthorizationCode,
    ClientCredentials,
    JwtBearer,
    Enterprise,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dpop {
    Auto,
    On,
    Off,
}

/// Enterprise-managed authorization (XAA): the IdP leg.
#[derive(Debug, Clone)]
struct Enterprise {
    /// The IdP named in the entry; `None` (`oauth.xaa: true`): the connection's `xaa_idp`.
    idp: Option<EntryIdp>,
    /// The ID token given; `None`: a login at the IdP gives it (and the store keeps it).
    id_token: Option<Source>,
}

#[derive(Debug, Clone)]
struct EntryIdp {
    idp_issuer: Option<String>,
    idp_token_endpoint: Option<String>,
    idp_client_id: String,
    idp_client_secret: Option<String>,
    idp_callback_port: u16,
}

/// A secret value given inline, in a file (re-read on each use: such files rotate), or in an
/// environment variable.
#[derive(Debug, Clone)]
enum Source {
    Inline(String),
    File(String),
    Env(String),
}

impl Source {
    fn read(&self, what: &str) -> Result<String> {
        match self {
            Source::Inline(s) => Ok(s.clone()),
            Source::File(path) => std::fs::read_to_string(path)
                .map(|s| s.trim().to_string())
                .map_err(|e| auth_error(format!("cannot read {what} from {path}: {e}"))),
            Source::Env(var) => std::env::var(var).map_err(|_| {
                auth_error(format!("{what}: the environment variable {var} is not set"))
            }),
        }
    }
}

/// The entry's `oauth` object, parsed.
#[derive(Debug, Clone)]
struct Settings {
    client_id: Option<String>,
    client_secret: Option<String>,
    issuer: Option<String>,
    callback_port: u16,
    callback_host: String,
    scopes: Option<String>,
    auth_server_metadata_url: Option<String>,
    client_metadata_url: Option<String>,
    token_endpoint_auth_method: Option<String>,
    client_name: String,
    grant: Grant,
    private_key: Option<Arc<SigningKey>>,
    assertion: Option<Source>,
    enterprise: Option<Enterprise>,
    dpop: Dpop,
    offline_access: bool,
}

/// A loopback callback port (`what` names where it was given): 0, any free one, when absent.
fn port_option(v: Option<&Value>, what: &str) -> Result<u16> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(p) => p
            .as_u64()
            .filter(|n| (1..=65535).contains(n))
            .map(|n| n as u16)
            .ok_or_else(|| {
                Error::invalid(format!("{what} must be a port number 1-65535 (got {p})"))
            }),
    }
}

fn source(o: &Map<String, Value>, inline: &str, file: &str, env: &str) -> Result<Option<Source>> {
    let what = "server field `oauth`:";
    if let Some(s) = opt_str(o, inline, what)? {
        return Ok(Some(Source::Inline(s)));
    }
    if let Some(s) = opt_str(o, file, what)? {
        return Ok(Some(Source::File(s)));
    }
    Ok(opt_str(o, env, what)?.map(Source::Env))
}

impl Settings {
    fn parse(oauth: Option<&Value>) -> Result<Settings> {
        let empty = Map::new();
        let o = match oauth {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(o)) => o,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `oauth` must be an object (got {v})"
                )))
            }
        };
        let what = "server field `oauth`:";
        let client_secret = match opt_str(o, "clientSecret", what)? {
            Some(s) => Some(s),
            None => match opt_str(o, "clientSecretEnv", what)? {
                Some(var) => Some(std::env::var(&var).map_err(|_| {
                    Error::invalid(format!(
                        "server field `oauth.clientSecretEnv`: the environment variable {var} is not set"
                    ))
                })?),
                None => None,
            },
        };
        let callback_port =
            port_option(o.get("callbackPort"), "server field `oauth.callbackPort`")?;
        let scopes = match o.get("scopes") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|s| {
                        s.as_str().map(str::to_string).ok_or_else(|| {
                            Error::invalid(
                                "server field `oauth.scopes` must be a string or a list of strings",
                            )
                        })
                    })
                    .collect::<Result<Vec<_>>>()?
                    .join(" "),
            ),
            Some(_) => {
                return Err(Error::invalid(
                    "server field `oauth.scopes` must be a string or a list of strings",
                ))
            }
        };
        let grant = match opt_str(o, "grant", what)?.as_deref() {
            None | Some("authorization_code") => Grant::AuthorizationCode,
            Some("client_credentials") => Grant::ClientCredentials,
            Some("jwt_bearer") => Grant::JwtBearer,
            Some("enterprise") | Some("xaa") => Grant::Enterprise,
            Some(g) => {
                return Err(Error::invalid(format!(
                    "server field `oauth.grant` {g:?}: one of authorization_code, client_credentials, jwt_bearer, enterprise"
                )))
            }
        };
        let alg = opt_str(o, "signingAlgorithm", what)?
            .map(|a| jws::Alg::parse(&a))
            .transpose()
            .map_err(|e| Error::invalid(format!("server field `oauth.signingAlgorithm`: {e}")))?;
        let pem = match opt_str(o, "privateKey", what)? {
            Some(p) => Some(p),
            None => match opt_str(o, "privateKeyFile", what)? {
                Some(path) => Some(std::fs::read_to_string(&path).map_err(|e| {
                    Error::invalid(format!(
                        "server field `oauth.privateKeyFile`: cannot read {path}: {e}"
                    ))
                })?),
                None => None,
            },
        };
        let private_key = pem
            .map(|p| SigningKey::from_pem(&p, alg))
            .transpose()
            .map_err(|e| Error::invalid(format!("server field `oauth.privateKey`: {e}")))?
            .map(Arc::new);
        let enterprise = match o.get("enterprise").or_else(|| o.get("xaa")) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            // Claude Code's `oauth.xaa: true`: the IdP is the user's one connection
            // (`xaa_idp`), and its login gives the ID token.
            Some(Value::Bool(true)) => Some(Enterprise {
                idp: None,
                id_token: None,
            }),
            Some(Value::Object(e)) => {
                let what = "server field `oauth.enterprise`:";
                let idp_client_id = opt_str(e, "idpClientId", what)?.ok_or_else(|| {
                    Error::invalid("server field `oauth.enterprise` needs `idpClientId`")
                })?;
                let id_token = source(e, "idToken", "idTokenFile", "idTokenEnv")?;
                let idp_issuer = opt_str(e, "idpIssuer", what)?;
                let idp_token_endpoint = opt_str(e, "idpTokenEndpoint", what)?;
                if idp_issuer.is_none() && idp_token_endpoint.is_none() {
                    return Err(Error::invalid(
                        "server field `oauth.enterprise` needs `idpIssuer` or `idpTokenEndpoint`",
                    ));
                }
                if id_token.is_none() && idp_issuer.is_none() {
                    return Err(Error::invalid(
                        "server field `oauth.enterprise` has no `idToken`, `idTokenFile` or `idTokenEnv`, so the ID token comes from a login at the IdP: that needs `idpIssuer`",
                    ));
                }
                let idp_callback_port = port_option(
                    e.get("idpCallbackPort"),
                    "server field `oauth.enterprise.idpCallbackPort`",
                )?;
                Some(Enterprise {
                    idp: Some(EntryIdp {
                        idp_issuer,
                        idp_token_endpoint,
                        idp_client_id,
                        idp_client_secret: opt_str(e, "idpClientSecret", what)?,
                        idp_callback_port,
                    }),
                    id_token,
                })
            }
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `oauth.xaa` (or `oauth.enterprise`) must be true, false or an object (got {v})"
                )))
            }
        };
        let grant = match (grant, &enterprise) {
            (Grant::AuthorizationCode, Some(_)) => Grant::Enterprise,
            (g, _) => g,
        };
        if grant == Grant::Enterprise && enterprise.is_none() {
            return Err(Error::invalid(
                "server field `oauth.grant` \"enterprise\" needs `oauth.enterprise`",
            ));
        }
        let assertion = source(o, "assertion", "assertionFile", "assertionEnv")?;
        if grant == Grant::JwtBearer && assertion.is_none() {
            return Err(Error::invalid(
                "server field `oauth.grant` \"jwt_bearer\" needs `oauth.assertion`, `assertionFile` or `assertionEnv`",
            ));
        }
        let dpop = match o.get("dpop") {
            None | Some(Value::Null) => Dpop::Auto,
            Some(Value::String(s)) if s == "auto" => Dpop::Auto,
            Some(Value::Bool(true)) => Dpop::On,
            Some(Value::Bool(false)) => Dpop::Off,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "server field `oauth.dpop` must be \"auto\", true or false (got {v})"
                )))
            }
        };
        let callback_host = opt_str(o, "callbackHost", what)?.unwrap_or_else(|| "localhost".into());
        if !matches!(callback_host.as_str(), "localhost" | "127.0.0.1" | "[::1]") {
            return Err(Error::invalid(format!(
                "server field `oauth.callbackHost` {callback_host:?}: one of localhost, 127.0.0.1, [::1]"
            )));
        }
        if let Some(u) = opt_str(o, "authServerMetadataUrl", what)? {
            if !u.starts_with("https://") {
                return Err(Error::invalid(format!(
                    "server field `oauth.authServerMetadataUrl` {u:?} must be an https URL"
                )));
            }
        }
        Ok(Settings {
            client_id: opt_str(o, "clientId", what)?,
            client_secret,
            issuer: opt_str(o, "issuer", what)?,
            callback_port,
            callback_host,
            scopes,
            auth_server_metadata_url: opt_str(o, "authServerMetadataUrl", what)?,
            client_metadata_url: opt_str(o, "clientMetadataUrl", what)?,
            token_endpoint_auth_method: opt_str(o, "tokenEndpointAuthMethod", what)?,
            client_name: opt_str(o, "clientName", what)?.unwrap_or_else(|| "mcplug".into()),
            grant,
            private_key,
            assertion,
            enterprise,
            dpop,
            offline_access: opt_bool(o, "offlineAccess")?.unwrap_or(true),
        })
    }
}

/// The token in use, ready to be sent.
#[derive(Clone)]
struct Current {
    /// Which token this is (`Applied::sent`).
    id: u64,
    /// `Bearer <token>` or `DPoP <token>`, marked sensitive.
    header: HeaderValue,
    /// The token itself, for a DPoP proof's `ath`.
    token: String,
    dpop: bool,
    /// Milliseconds since the epoch; `None`: unknown (refreshed on a 401).
    expires_at: Option<u64>,
    /// When a refresh is due (milliseconds since the epoch): `refresh_skew` before expiry, but
    /// never more than half the token's life before it — a token that lives 60 s is refreshed
    /// after 30, not before every request.
    refresh_at: Option<u64>,
    refreshable: bool,
    identity: u64,
}

impl Current {
    /// Whether a refresh is due at `now`.
    fn refresh_due(&self, now: u64) -> bool {
        self.refresh_at.is_some_and(|at| now >= at)
    }
}

/// When a token that expires at `expires_at` and was obtained at `obtained_at` (unknown for a
/// record kept before that was noted: then the skew alone) is due for refresh.
fn refresh_at(expires_at: u64, obtained_at: Option<u64>, skew: Duration) -> u64 {
    let skew = skew.as_millis().min(u128::from(u64::MAX)) as u64;
    let skew = match obtained_at {
        Some(at) => skew.min(expires_at.saturating_sub(at) / 2),
        None => skew,
    };
    expires_at.saturating_sub(skew)
}

/// A client identity at one authorization server.
#[derive(Debug, Clone)]
struct ClientReg {
    client_id: String,
    client_secret: Option<String>,
    method: String,
    redirect_uri: Option<String>,
    /// `pre-registered`, `cimd` or `dcr`: only a dynamic registration is ever discarded.
    provenance: &'static str,
}

/// What the single flight of authorizations knows.
#[derive(Default)]
struct Flight {
    /// The scope asked for in the last authorization, and the one granted.
    requested: Option<String>,
    granted: Option<String>,
    /// Step-ups per scope set asked for.
    step_ups: HashMap<String, u32>,
    /// A workload-identity grant failed: never retried (its assertion will not get better).
    grant_failed: Option<Error>,
}

/// OAuth's progress for one connection, for its host (an `auth` event): `state` is
/// `authorized`, `refreshed`, `needs-auth` or `failed`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuthEvent {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// The credentials of one remote connection: OAuth.
pub struct OAuth {
    server: String,
    name: Option<String>,
    settings: Settings,
    options: AuthOptions,
    store: Store,
    key: String,
    net: Net,
    current: RwLock<Option<Arc<Current>>>,
    flight: tokio::sync::Mutex<Flight>,
    /// The DPoP key, once DPoP is in use (the AS advertises it, or the entry asks for it).
    dpop_key: Mutex<Option<Arc<SigningKey>>>,
    /// Its PKCS#8, standard base64, to keep it with a DPoP-bound token.
    dpop_der: Mutex<Option<String>>,
    rs_nonce: Mutex<Option<String>>,
    notify: Box<dyn Fn(AuthEvent) + Send + Sync>,
    /// When the store said this server last needed authorization (read once, at connect).
    needs_auth_at: Option<u64>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn new_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Scopes as a sorted, deduplicated set, written back space-separated.
fn scope_set(parts: &[Option<&str>]) -> Option<String> {
    let mut all: Vec<&str> = parts
        .iter()
        .flatten()
        .flat_map(|s| s.split_ascii_whitespace())
        .collect();
    all.sort_unstable();
    all.dedup();
    (!all.is_empty()).then(|| all.join(" "))
}

/// A `needs_auth` error with the details a host needs to authorize by itself.
fn needs_auth(message: String, reason: &str, d: Option<&Discovered>, scope: Option<&str>) -> Error {
    let mut data = json!({"reason": reason});
    if let Some(d) = d {
        data["issuer"] = json!(d.issuer);
        if let Some(rm) = &d.resource_metadata {
            data["resource_metadata"] = json!(rm);
        }
    }
    if let Some(s) = scope {
        data["scope"] = json!(s);
    }
    Error::new(ErrorKind::NeedsAuth, message).with_data(data)
}

/// What a token endpoint answered, as a token or an error naming the server's own words.
fn token_of(answer: &net::Answer, what: &str) -> Result<Value> {
    let body = answer.json();
    let token_ok = (200..300).contains(&answer.status)
        && body
            .as_ref()
            .and_then(|b| b.get("access_token"))
            .is_some_and(Value::is_string);
    if token_ok {
        return Ok(body.unwrap_or_default());
    }
    let error = body
        .as_ref()
        .and_then(|b| b.get("error")?.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("HTTP {}", answer.status));
    let description = body
        .as_ref()
        .and_then(|b| b.get("error_description")?.as_str().map(str::to_string))
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    Err(Error::new(
        ErrorKind::NeedsAuth,
        format!("{what} was refused: {error}{description}"),
    )
    .with_data(json!({"reason": "refused", "error": error})))
}

/// The absolute expiry of a token response: `expires_in` from now (0: already expired), else
/// the JWT's own `exp`, else unknown.
fn expires_at(token: &Value) -> Option<u64> {
    if let Some(n) = token
        .get("expires_in")
        .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
    {
        return Some(now_ms().saturating_add(n.saturating_mul(1000)));
    }
    let at = token.get("access_token")?.as_str()?;
    let payload = at.split('.').nth(1)?;
    let bytes =
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload).ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_u64().map(|s| s.saturating_mul(1000))
}

impl OAuth {
    /// The credentials of the server at `server` (its entry's URL), named `name`.
    pub fn new(
        server: &str,
        name: Option<&str>,
        oauth: Option<&Value>,
        options: &AuthOptions,
        trust: crate::transport::tls::TlsChoice,
        proxies: crate::transport::proxy::Proxies,
        notify: Box<dyn Fn(AuthEvent) + Send + Sync>,
    ) -> Result<Arc<OAuth>> {
        let settings = Settings::parse(oauth)?;
        let store = match Store::locate(options.store.as_deref()) {
            Ok(store) => store,
            // No home to keep tokens in (a service without HOME or a user entry): the process's
            // memory, rather than no remote servers at all. A store the host named must work.
            Err(_) if options.store.is_none() => Store::locate(Some("memory"))
                .map_err(|e| Error::invalid(format!("option `auth_store`: {e}")))?,
            Err(e) => return Err(Error::invalid(format!("option `auth_store`: {e}"))),
        };
        let guard = ssrf::Guard::new(server, options.allow_private);
        let net = Net::new(guard, options.request_timeout, trust, proxies)?;
        let mut me = OAuth {
            server: server.to_string(),
            name: name.map(str::to_string),
            key: store_key(server),
            settings,
            options: options.clone(),
            store,
            net,
            current: RwLock::new(None),
            flight: tokio::sync::Mutex::new(Flight::default()),
            dpop_key: Mutex::new(None),
            dpop_der: Mutex::new(None),
            rs_nonce: Mutex::new(None),
            notify,
            needs_auth_at: None,
        };
        match me.store.read(&me.key) {
            Ok(Some(record)) => {
                me.adopt(&record);
                me.needs_auth_at = record.get("needs_auth_at").and_then(Value::as_u64);
            }
            Ok(None) => {}
            // Refused now, before the user is asked to log in for a token that could not be
            // kept: the error says how to remove the record.
            Err(e) if e.unusable_record => return Err(store_error(e, me.name.as_deref())),
            // The store's own trouble (a lock, the disk) may pass; a write will say if not.
            Err(_) => {}
        }
        Ok(Arc::new(me))
    }

    /// Whether this server was found to need authorization within the cache's time (and no
    /// token came since): a connect that cannot authorize then fails at once, without a probe.
    pub fn cached_needs_auth(&self) -> Option<Error> {
        if self.current.read().is_some() || self.options.interactive {
            return None;
        }
        let at = self.needs_auth_at?;
        let ttl = self.options.cache_ttl.as_millis() as u64;
        let now = now_ms();
        (now < at.saturating_add(ttl)).then(|| {
            needs_auth(
                format!(
                    "{} needed authorization {} s ago; it is not probed again for {} s (auth_cache_ttl_ms)",
                    self.server,
                    now.saturating_sub(at) / 1000,
                    at.saturating_add(ttl).saturating_sub(now) / 1000
                ),
                "cached",
                None,
                None,
            )
        })
    }

    /// Uses the stored token, when the record has one (and its DPoP key).
    fn adopt(&self, record: &Value) -> bool {
        let Some(t) = record.get("tokens") else {
            *self.current.write() = None;
            return false;
        };
        let Some(token) = t.get("access_token").and_then(Value::as_str) else {
            return false;
        };
        let dpop = t
            .get("token_type")
            .and_then(Value::as_str)
            .is_some_and(|k| k.eq_ignore_ascii_case("dpop"));
        if dpop {
            let key = record
                .get("dpop_key")
                .and_then(Value::as_str)
                .and_then(|k| {
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, k).ok()
                })
                .and_then(|der| SigningKey::from_pkcs8_der(&der, Some(jws::Alg::Es256)).ok());
            match key {
                Some(k) => *self.dpop_key.lock() = Some(Arc::new(k)),
                None => return false,
            }
        }
        let scheme = if dpop { "DPoP" } else { "Bearer" };
        let Ok(mut header) = HeaderValue::from_str(&format!("{scheme} {token}")) else {
            return false;
        };
        header.set_sensitive(true);
        let id = t.get("id").and_then(Value::as_u64).unwrap_or_else(new_id);
        let identity = t.get("identity").and_then(Value::as_u64).unwrap_or(id);
        let expires_at = t.get("expires_at").and_then(Value::as_u64);
        let obtained_at = t.get("obtained_at").and_then(Value::as_u64);
        *self.current.write() = Some(Arc::new(Current {
            id,
            header,
            token: token.to_string(),
            dpop,
            expires_at,
            refresh_at: expires_at.map(|x| refresh_at(x, obtained_at, self.options.refresh_skew)),
            refreshable: t.get("refresh_token").is_some_and(Value::is_string),
            identity,
        }));
        true
    }

    fn current_id(&self) -> u64 {
        self.current.read().as_ref().map_or(0, |c| c.id)
    }

    fn event(
        &self,
        state: &'static str,
        issuer: Option<&str>,
        scope: Option<&str>,
        expires_at: Option<u64>,
    ) {
        (self.notify)(AuthEvent {
            state,
            server: self.name.clone(),
            issuer: issuer.map(str::to_string),
            scope: scope.map(str::to_string),
            expires_at,
        });
    }

    async fn store_update<F>(&self, f: F) -> Result<Option<Value>>
    where
        F: FnOnce(Option<Value>) -> Option<Value> + Send + 'static,
    {
        let (store, key) = (self.store.clone(), self.key.clone());
        tokio::task::spawn_blocking(move || store.update(&key, f))
            .await
            .map_err(|_| Error::new(ErrorKind::Config, "the auth store's task failed"))?
            .map_err(|e| store_error(e, self.name.as_deref()))
    }

    /// Keeps a new token (and what refreshing it needs), and uses it.
    async fn keep(
        &self,
        token: &Value,
        d: &Discovered,
        client: Option<&ClientReg>,
        identity: u64,
    ) -> Result<()> {
        let dpop = token
            .get("token_type")
            .and_then(Value::as_str)
            .is_some_and(|k| k.eq_ignore_ascii_case("dpop"));
        let mut t = json!({
            "access_token": token.get("access_token"),
            "token_type": if dpop { "DPoP" } else { "Bearer" },
            "issuer": d.issuer,
            "token_endpoint": d.token_endpoint,
            "resource": d.resource,
            "id": new_id(),
            "identity": identity,
            "obtained_at": now_ms(),
        });
        for k in ["refresh_token", "scope"] {
            if let Some(v) = token.get(k).filter(|v| v.is_string()) {
                t[k] = v.clone();
            }
        }
        if let Some(x) = expires_at(token) {
            t["expires_at"] = json!(x);
        }
        if let Some(c) = client {
            t["client_id"] = json!(c.client_id);
            t["method"] = json!(c.method);
        }
        let dpop_der = if dpop {
            self.dpop_der.lock().clone()
        } else {
            None
        };
        let client_rec = client.filter(|c| c.provenance == "dcr").map(|c| {
            json!({"client_id": c.client_id, "client_secret": c.client_secret, "method": c.method,
                   "redirect_uri": c.redirect_uri, "provenance": c.provenance})
        });
        let issuer = d.issuer.clone();
        let server = self.server.clone();
        let t2 = t.clone();
        let record = self
            .store_update(move |old| {
                let mut r = old.filter(Value::is_object).unwrap_or_else(|| json!({}));
                r["server"] = json!(server);
                r["tokens"] = t2;
                if let Some(c) = client_rec {
                    if !r.get("clients").is_some_and(Value::is_object) {
                        r["clients"] = json!({});
                    }
                    r["clients"][issuer.as_str()] = c;
                }
                if let Some(der) = dpop_der {
                    r["dpop_key"] = json!(der);
                }
                if let Some(m) = r.as_object_mut() {
                    m.remove("needs_auth_at");
                }
                Some(r)
            })
            .await?;
        // The closure always writes a record; one the token cannot be used from (not a valid
        // header value, a DPoP key missing) is this grant's error, not a silent retry.
        if !record.is_some_and(|r| self.adopt(&r)) {
            return Err(auth_error(
                "the token endpoint's access token cannot be sent (not a valid header value, or its DPoP key is missing)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_is_due_at_most_half_a_tokens_life_before_it_expires() {
        let skew = Duration::from_secs(300);
        let now = 1_000_000_000;
        // An hour: five minutes before expiry.
        assert_eq!(
            refresh_at(now + 3_600_000, Some(now), skew),
            now + 3_300_000
        );
        // 60 s and 299 s: half-way, never "due" from the moment it arrives.
        assert_eq!(refresh_at(now + 60_000, Some(now), skew), now + 30_000);
        assert_eq!(refresh_at(now + 299_000, Some(now), skew), now + 149_500);
        // Already expired, or an absurd life: no overflow either way.
        assert_eq!(refresh_at(now, Some(now), skew), now);
        assert_eq!(refresh_at(u64::MAX, Some(now), skew), u64::MAX - 300_000);
        assert_eq!(refresh_at(0, Some(now), skew), 0);
        // A record kept before its start was noted: the skew alone.
        assert_eq!(refresh_at(now + 60_000, None, skew), now - 240_000);
    }

    #[test]
    fn an_absurd_expires_in_saturates() {
        let t = json!({"access_token": "x", "expires_in": u64::MAX});
        assert_eq!(expires_at(&t), Some(u64::MAX));
        let t = json!({"access_token": "x", "expires_in": "18446744073709551615"});
        assert_eq!(expires_at(&t), Some(u64::MAX));
        let t = json!({"access_token": "x", "expires_in": 60});
        let at = expires_at(&t).unwrap();
        assert!(at >= now_ms() + 59_000 && at <= now_ms() + 60_000);
    }

    /// A record the store cannot use refuses the connection at once, the error naming every way
    /// to log out; logout removes it unread, and the next connection is made.
    #[test]
    fn an_unusable_record_names_logout_and_logout_removes_it() {
        let dir = std::env::temp_dir().join(format!("mcplug-auth-unusable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let url = "https://mcp.example/mcp";
        let options = AuthOptions {
            store: Some(dir.display().to_string()),
            ..Default::default()
        };
        let store = Store::open(options.store.as_deref()).unwrap();
        store
            .update(&store_key(url), |_| Some(json!({"needs_auth_at": 1})))
            .unwrap();
        let record = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .unwrap();
        std::fs::write(&record, "{\"key\": \"server ").unwrap();
        let connect = || {
            let trust = Default::default();
            OAuth::new(
                url,
                Some("srv"),
                None,
                &options,
                trust,
                Default::default(),
                Box::new(|_| {}),
            )
        };

        let e = connect().err().expect("an unusable record was used");
        assert_eq!(e.kind, ErrorKind::Config, "{}", e.message);
        for way in [
            "mcplug logout srv",
            "mcplug_auth_logout",
            "mcplug_manager_logout(\"srv\")",
            "mcplug.auth_logout",
            "authLogout",
        ] {
            assert!(e.message.contains(way), "{way}: {}", e.message);
        }
        assert!(
            e.message.contains(&record.display().to_string()),
            "{}",
            e.message
        );

        assert!(logout(url, &options).unwrap());
        assert!(!record.exists());
        assert!(!logout(url, &options).unwrap());
        assert!(connect().is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
