//! What the remote transports (Streamable HTTP, HTTP+SSE, WebSocket) share: the server entry's
//! URL and headers, the HTTP client, a look at each outgoing message (kind, id, method, name,
//! protocol version), SSE events read under the message limit, and error messages that name the
//! status and the URL.

use crate::error::Error;
use base64::Engine as _;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A remote server entry: where it is and what to send with every HTTP request.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub url: String,
    /// The entry's `headers`, in order (checked when the entry is parsed).
    pub headers: Vec<(String, String)>,
    /// The entry's `oauth` object, as given (read by `crate::auth`).
    pub oauth: Option<serde_json::Value>,
    /// The entry's `headersHelper` command (run by `crate::auth::helper`).
    pub headers_helper: Option<String>,
    /// What supplies each request's credentials (set by the client at connect, from `oauth`
    /// and the connection's options), when anything does.
    pub credentials: Option<super::credentials::Shared>,
    /// The entry's `tls` (its fields over the connection's); boxed: most entries have none.
    pub tls: Option<Box<super::tls::TlsOptions>>,
    /// The entry's `proxy` (over the connection's, over the environment).
    pub proxy: Option<Box<super::proxy::ProxySetting>>,
}

/// Limits of one remote connection.
#[derive(Debug, Clone)]
pub struct RemoteLimits {
    /// The largest message (a JSON body, an SSE event, a WebSocket message) accepted.
    pub max_message_bytes: usize,
    /// Bounds each TCP/TLS connect, and each exchange that has no caller's timer of its own
    /// (notifications, responses, the SSE endpoint, the WebSocket handshake).
    pub connect_timeout: Duration,
    /// How long close waits for the session DELETE or the WebSocket close handshake.
    pub shutdown_grace: Duration,
    /// The connection's `tls` option.
    pub tls: Option<super::tls::TlsOptions>,
    /// The connection's `proxy` option.
    pub proxy: Option<super::proxy::ProxySetting>,
}

impl Default for RemoteLimits {
    fn default() -> Self {
        RemoteLimits {
            max_message_bytes: 32 << 20,
            connect_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_millis(500),
            tls: None,
            proxy: None,
        }
    }
}

/// Checks a header of a server entry: a valid HTTP field name and value.
pub fn check_header(name: &str, value: &str) -> Result<(), Error> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        Error::invalid(format!(
            "server field `headers`: {name:?} is not a valid HTTP header name"
        ))
    })?;
    HeaderValue::from_str(value).map_err(|_| {
        Error::invalid(format!(
            "server field `headers.{name}`: the value is not a valid HTTP header value (visible ASCII, space and tab only)"
        ))
    })?;
    Ok(())
}

pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        check_header(name, value)?;
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("checked"),
            HeaderValue::from_str(value).expect("checked"),
        );
    }
    Ok(map)
}

/// The HTTP client of one remote connection: a keep-alive pool, TCP_NODELAY (without it a
/// request waits for the peer's delayed ACK: ~40 ms per call), connects bounded. Idle
/// connections are given up after `IDLE_CONNECTION`, before the servers' own keep-alive
/// timeouts (5 s in Node's http and in uvicorn): a request sent on a connection the server is
/// closing at that moment fails with "connection closed before message completed" (see
/// `is_stale_connection`). Redirects are followed (10 at most) within the
/// origin; to another origin only when the entry sends no headers of its own (`headers`, a
/// `headersHelper`'s): reqwest drops `Authorization` and `Cookie` on such a hop (OAuth's token
/// with them; a DPoP proof is bound to the original URL), but would carry an `X-Api-Key` to
/// whoever the server names. Refused, it is an error naming where it went.
pub(crate) fn http_client(
    limits: &RemoteLimits,
    sends_headers: bool,
    trust: &super::tls::Trust,
    proxies: &super::proxy::Proxies,
    url: &reqwest::Url,
) -> Result<reqwest::Client, Error> {
    let policy = if sends_headers {
        reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= 10 {
                return attempt.error("more than 10 redirects");
            }
            let same = attempt
                .previous()
                .last()
                .is_some_and(|from| from.origin() == attempt.url().origin());
            if same {
                attempt.follow()
            } else {
                let to = crate::redact::urls(attempt.url().as_str()).into_owned();
                attempt.error(format!(
                    "the server redirected to another origin ({to}); not followed, since the connection's own headers would go there too"
                ))
            }
        })
    } else {
        reqwest::redirect::Policy::limited(10)
    };
    // Plain HTTP through a proxy is one request a connection: simple proxies (tinyproxy) relay
    // the later requests of a kept-alive connection without reading them. (A tunnel, for
    // https, is kept alive as a direct connection is.)
    let plain_proxied = url.scheme() == "http" && proxies.for_url(url).is_some();
    reqwest::Client::builder()
        .redirect(policy)
        .tcp_nodelay(true)
        .connect_timeout(limits.connect_timeout)
        .pool_idle_timeout(IDLE_CONNECTION)
        .pool_max_idle_per_host(if plain_proxied { 0 } else { 64 })
        .user_agent(concat!("mcplug/", env!("CARGO_PKG_VERSION")))
        .use_preconfigured_tls((*trust.config).clone())
        .no_proxy()
        .proxy(proxies.reqwest())
        .build()
        .map_err(|e| Error::transport(format!("cannot build the HTTP client: {}", chain(&e))))
}

/// How a remote server is reached: its trust (the entry's `tls` fields over the connection's,
/// with the environment, see `tls.rs`) and its proxies (the entry's `proxy`, the connection's,
/// the environment). Logged once for `--debug`.
pub(crate) fn route_of(
    config: &RemoteConfig,
    limits: &RemoteLimits,
) -> Result<(std::sync::Arc<super::tls::Trust>, super::proxy::Proxies), Error> {
    let trust = super::tls::trust_for(config.tls.as_deref(), limits.tls.as_ref())?;
    let proxies = super::proxy::Proxies::resolve(config.proxy.as_deref(), limits.proxy.as_ref())?;
    if let Ok(url) = reqwest::Url::parse(&config.url) {
        tracing::debug!(
            target: "mcplug::transport",
            "{}: {}; {}",
            crate::redact::urls(&config.url),
            proxies.describe(&url),
            trust.describe()
        );
    }
    Ok((trust, proxies))
}

/// How long an idle keep-alive connection is kept for the next request.
pub(crate) const IDLE_CONNECTION: Duration = Duration::from_secs(4);

/// An error with its causes, `a: b: c`, without repeats.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

/// A failed HTTP exchange as a `transport` error naming what was done and where.
/// Whether a request failed because its connection was closed under it before any answer
/// came: hyper's "connection closed before message completed", a reset or a broken pipe. On a
/// kept-alive connection that is the server closing it as the request went out.
pub(crate) fn is_stale_connection(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
            if matches!(io.kind(), BrokenPipe | ConnectionReset) {
                return true;
            }
        }
        source = s.source();
    }
    false
}

pub(crate) fn request_error(what: &str, url: &str, e: &reqwest::Error) -> Error {
    if let Some(reason) = super::tls::reason(e) {
        let host = e.url().and_then(|u| u.host_str()).unwrap_or(url);
        return Error::transport(format!(
            "{what} {url}: the TLS connection to {host} failed: {reason}"
        ))
        .with_data(serde_json::json!({ "tls": reason }));
    }
    if e.is_timeout() || e.is_connect() && chain(e).contains("timed out") {
        return Error::transport(format!("{what} {url}: connecting timed out ({})", chain(e)));
    }
    Error::transport(format!("{what} {url} failed: {}", chain(e)))
}

/// The first bytes of an error body, for a message.
pub(crate) fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

/// Reads a whole body, refusing more than `limit` bytes.
pub(crate) async fn read_body(
    mut resp: reqwest::Response,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, Error> {
    if let Some(len) = resp.content_length() {
        if len as usize > limit {
            return Err(too_large(what, limit));
        }
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| Error::transport(format!("reading {what} failed: {}", chain(&e))))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_large(what, limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A short error body (best effort: what does not arrive soon is left out).
pub(crate) async fn error_body(resp: reqwest::Response) -> Vec<u8> {
    tokio::time::timeout(
        Duration::from_secs(2),
        read_body(resp, 64 << 10, "an error body"),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default()
}

pub(crate) fn too_large(what: &str, limit: usize) -> Error {
    Error::transport(format!(
        "{what} is larger than the limit of {limit} bytes (option max_message_bytes)"
    ))
}

/// Whether a response's `Content-Type` is `mime` (parameters ignored).
pub(crate) fn is_content_type(resp: &reqwest::Response, mime: &str) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(mime))
}

/// A header value as the 2026-07-28 Streamable HTTP transport writes it: as is when it is plain
/// visible ASCII and spaces without a space at either end, else `=?base64?...?=` (also for a
/// value that looks like that form itself). A tab is a control character: it is encoded too.
pub(crate) fn header_safe(value: &str) -> Cow<'_, str> {
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !sentinel;
    if plain {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value.as_bytes())
        ))
    }
}

/// What kind of JSON-RPC message is going out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// With its id, as JSON text.
    Request(String),
    Notification,
    Response,
}

/// What the transport needs to know of one outgoing message.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub kind: Kind,
    pub method: Option<String>,
    /// `params.name` (tools/call, prompts/get) or `params.uri` (resources/read).
    pub name: Option<String>,
    /// The modern `_meta` protocol version, when the message carries one.
    pub version: Option<String>,
    /// For `notifications/cancelled`: the id of the request given up, as JSON text.
    pub cancels: Option<String>,
}

/// The top of an outgoing message, read in one pass: `params` is looked into as it is read (not
/// kept as text and parsed again), and only the members the transport needs are kept; anything
/// of another shape than expected is passed over rather than refused (see `Lenient`).
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Lenient<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Lenient<PeekParams<'a>>,
}

#[derive(Deserialize)]
struct PeekParams<'a> {
    #[serde(borrow, default)]
    name: Lenient<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Lenient<Cow<'a, str>>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Lenient<PeekMeta<'a>>,
    #[serde(rename = "requestId", borrow, default)]
    request_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct PeekMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    version: Lenient<Cow<'a, str>>,
}

/// A member read when it has the expected shape (a string, or an object), passed over when not.
struct Lenient<T>(Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

/// How a `Lenient` member is recognized: strings from string tokens, structs from objects.
trait LenientShape<'de>: Sized {
    fn from_str(_: Cow<'de, str>) -> Option<Self> {
        None
    }
    fn from_map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
        drain_map(map)?;
        Ok(None)
    }
}

fn drain_map<'de, A: serde::de::MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    use serde::de::IgnoredAny;
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

impl<'de: 'a, 'a> LenientShape<'de> for Cow<'a, str> {
    fn from_str(s: Cow<'de, str>) -> Option<Self> {
        Some(s)
    }
}

macro_rules! lenient_struct {
    ($($t:ident),*) => {$(
        impl<'de: 'a, 'a> LenientShape<'de> for $t<'a> {
            fn from_map<A: serde::de::MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
                Deserialize::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
            }
        }
    )*};
}
lenient_struct!(PeekParams, PeekMeta);

impl<'de, T: LenientShape<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: LenientShape<'de>> Visitor<'de> for V<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(Lenient(T::from_str(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Lenient(T::from_str(Cow::Owned(s.to_string()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(Lenient(T::from_str(Cow::Owned(s))))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::from_map(map).map(Lenient)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl Outgoing {
    /// Looks at one message the engine wrote (one line of JSON). Anything unreadable is sent
    /// as an opaque notification: the engine only writes valid JSON-RPC.
    pub(crate) fn peek(line: &[u8]) -> Outgoing {
        let mut out = Outgoing {
            kind: Kind::Notification,
            method: None,
            name: None,
            version: None,
            cancels: None,
        };
        // Checked as UTF-8 once, as a whole: read from bytes, serde_json checks every string.
        let Ok(peek) = std::str::from_utf8(line)
            .map_err(|_| ())
            .and_then(|text| serde_json::from_str::<Peek>(text).map_err(|_| ()))
        else {
            return out;
        };
        out.kind = match (&peek.id, &peek.method.0) {
            (Some(id), Some(_)) => Kind::Request(id.get().trim().to_string()),
            (Some(_), None) => Kind::Response,
            _ => Kind::Notification,
        };
        let method = peek.method.0.map(Cow::into_owned);
        if let Some(params) = peek.params.0 {
            out.name = match method.as_deref() {
                Some("tools/call" | "prompts/get") => params.name.0.map(Cow::into_owned),
                Some("resources/read") => params.uri.0.map(Cow::into_owned),
                _ => None,
            };
            out.version = params.meta.0.and_then(|m| m.version.0).map(Cow::into_owned);
            if method.as_deref() == Some("notifications/cancelled") {
                out.cancels = params.request_id.map(|r| r.get().trim().to_string());
            }
        }
        out.method = method;
        out
    }

    pub(crate) fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("a response")
    }
}

/// What the transport looks at in an incoming message: is it the answer to a request of ours?
#[derive(Deserialize)]
struct InPeek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

/// The id (JSON text) of a response, `None` for anything else (and for a batch).
pub(crate) fn response_id(message: &[u8]) -> Option<String> {
    let peek = serde_json::from_slice::<InPeek>(message).ok()?;
    if peek.method.is_some() {
        return None;
    }
    peek.id.map(|id| id.get().trim().to_string())
}

/// Whether `body` is a JSON-RPC error response (a 4xx/5xx body that speaks MCP).
pub(crate) fn rpc_error_of(body: &[u8]) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let err = v.get("error")?;
    err.get("code")?.as_i64()?;
    Some(err.clone())
}

/// A JSON-RPC error response to the request `id` (JSON text).
pub(crate) fn error_response(id: &str, error: &serde_json::Value) -> Vec<u8> {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#).into_bytes()
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>> + Send>>;
type EventStream = sse_stream::SseStream<sse_stream::ByteStreamBody<ByteStream, Bytes>>;

/// The SSE events of one response body (parsed by `sse-stream`), each refused past the
/// message limit: the bytes since the last event are counted as they arrive.
pub(crate) struct Events {
    inner: Pin<Box<EventStream>>,
    since_event: Arc<AtomicUsize>,
    limit: usize,
    what: String,
}

/// Why an SSE stream gave no event: an event over the message limit (the stream cannot go on
/// past it), or a broken stream (which may be resumed).
#[derive(Debug)]
pub(crate) enum StreamError {
    TooLarge(Error),
    Broken(Error),
}

impl From<StreamError> for Error {
    fn from(e: StreamError) -> Error {
        match e {
            StreamError::TooLarge(e) | StreamError::Broken(e) => e,
        }
    }
}

/// The byte stream went past the message limit (told apart by type, not by its text).
#[derive(Debug)]
struct OverLimit;

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("over the message limit")
    }
}

impl std::error::Error for OverLimit {}

/// Whether `e`, or an error it wraps, is [`OverLimit`].
fn is_over_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(e);
    while let Some(e) = at {
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        if e.is::<OverLimit>() || inner.is_some_and(|i| i.is::<OverLimit>()) {
            return true;
        }
        at = e.source();
    }
    false
}

/// One SSE event as the transports use it.
#[derive(Debug, Default)]
pub(crate) struct Event {
    pub name: Option<String>,
    pub data: String,
    pub id: Option<String>,
    pub retry: Option<Duration>,
}

impl Events {
    pub(crate) fn new(resp: reqwest::Response, limit: usize, what: String) -> Events {
        let since_event = Arc::new(AtomicUsize::new(0));
        let counter = since_event.clone();
        // Slack for the field names and line ends around a message of the largest size.
        let bound = limit.saturating_add(limit / 8 + 1024);
        let bytes: ByteStream = Box::pin(resp.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| std::io::Error::other(chain(&e)))?;
            let n = counter.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if n > bound {
                return Err(std::io::Error::other(OverLimit));
            }
            Ok(chunk)
        }));
        Events {
            inner: Box::pin(sse_stream::SseStream::from_bytes_stream(bytes)),
            since_event,
            limit,
            what,
        }
    }

    /// The next event; `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Option<Result<Event, StreamError>> {
        let item = self.inner.next().await?;
        Some(match item {
            Ok(sse) => {
                self.since_event.store(0, Ordering::Relaxed);
                let data = sse.data.unwrap_or_default();
                if data.len() > self.limit {
                    Err(StreamError::TooLarge(too_large(
                        &format!("an SSE event of {}", self.what),
                        self.limit,
                    )))
                } else {
                    Ok(Event {
                        name: sse.event,
                        data,
                        id: sse.id,
                        retry: sse.retry.map(Duration::from_millis),
                    })
                }
            }
            Err(sse_stream::Error::Body(e)) if is_over_limit(e.as_ref()) => {
                Err(StreamError::TooLarge(too_large(
                    &format!("an SSE event of {}", self.what),
                    self.limit,
                )))
            }
            Err(e) => Err(StreamError::Broken(Error::transport(format!(
                "the SSE stream of {} broke: {}",
                self.what,
                chain(&e)
            )))),
        })
    }
}

/// Splits what the engine sends (one or more lines, each ending in a newline) into messages.
pub(crate) fn lines(message: &[u8]) -> impl Iterator<Item = &[u8]> {
    message
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty())
}

pub(crate) fn parse_url(url: &str) -> Result<reqwest::Url, Error> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| Error::invalid(format!("server field `url` {url:?} is not a URL: {e}")))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(Error::invalid(format!(
            "server field `url` {url:?}: scheme {other:?} is not http or https"
        ))),
    }
}

/// An HTTP error status as a `transport` error: what was sent, where, and what came back (the
/// status also as `data.http_status`, so that it is told from a broken connection); a 401
/// is `needs_auth` (reached when the entry's own `Authorization` was refused, or the
/// credentials' retries ran out).
pub(crate) fn status_error(
    verb: &str,
    url: &str,
    what: &str,
    status: reqwest::StatusCode,
    body: &[u8],
) -> Error {
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Error::new(
            crate::error::ErrorKind::NeedsAuth,
            format!(
                "HTTP 401 from {verb} {url} ({what}): the server needs authorization, and refused what was sent{}",
                snippet(body)
            ),
        );
    }
    Error::transport(format!(
        "HTTP {} from {verb} {url} ({what}){}",
        status,
        snippet(body)
    ))
    .with_data(serde_json::json!({"http_status": status.as_u16()}))
}

/// A fingerprint of credentials (the headers a remote transport sends), keyed per process so
/// that it says nothing outside it.
pub(crate) fn fingerprint<'a>(parts: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    static KEYS: once_cell::sync::Lazy<std::collections::hash_map::RandomState> =
        once_cell::sync::Lazy::new(std::collections::hash_map::RandomState::new);
    let mut h = KEYS.build_hasher();
    for (name, value) in parts {
        name.hash(&mut h);
        value.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_limit_is_told_by_its_type_not_its_text() {
        let ours: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::other(OverLimit));
        assert!(is_over_limit(ours.as_ref()));
        let lookalike = std::io::Error::other("over the message limit");
        assert!(
            !is_over_limit(&lookalike),
            "a server's text cannot pass for it"
        );
    }

    #[test]
    fn header_values_are_base64_when_not_plain() {
        assert_eq!(header_safe("get_weather"), "get_weather");
        assert_eq!(header_safe("file:///a b.txt"), "file:///a b.txt");
        assert_eq!(
            header_safe("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_safe(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_safe("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(header_safe("a\tb"), "=?base64?YQli?=");
        assert_eq!(header_safe(""), "");
        assert_eq!(
            header_safe("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }

    #[test]
    fn outgoing_messages_are_recognized() {
        let o = Outgoing::peek(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{"name":"not this"}}}"#);
        assert_eq!(o.kind, Kind::Request("7".into()));
        assert_eq!(o.name.as_deref(), Some("echo"));
        assert_eq!(o.version.as_deref(), Some("2026-07-28"));
        let o = Outgoing::peek(
            br#"{"jsonrpc":"2.0","method":"resources/read","id":"a","params":{"uri":"x://y"}}"#,
        );
        assert_eq!(o.kind, Kind::Request("\"a\"".into()));
        assert_eq!(o.name.as_deref(), Some("x://y"));
        let o = Outgoing::peek(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
        );
        assert_eq!(o.kind, Kind::Notification);
        assert_eq!(o.cancels.as_deref(), Some("3"));
        let o = Outgoing::peek(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert_eq!(o.kind, Kind::Response);
        // Odd shapes are passed over, never a reason to take a request for a notification.
        for odd in [
            r#"{"jsonrpc":"2.0","id":4,"method":"x/y","params":[1,{"a":2}]}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"x/y","params":{"_meta":5,"name":{"n":1}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"x/y","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":[1]}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"params":null,"method":"x/y"}"#,
        ] {
            let o = Outgoing::peek(odd.as_bytes());
            assert_eq!(o.kind, Kind::Request("4".into()), "{odd}");
            assert_eq!(o.method.as_deref(), Some("x/y"), "{odd}");
            assert_eq!(o.version, None, "{odd}");
        }
        let o = Outgoing::peek(
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a\"b","_meta":{"io.modelcontextprotocol/protocolVersion":"v","x":[{}]},"arguments":{"_meta":1}}}"#,
        );
        assert_eq!(o.name.as_deref(), Some("a\"b"));
        assert_eq!(o.version.as_deref(), Some("v"));
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id": 3 ,"result":{}}"#).as_deref(),
            Some("3")
        );
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#),
            None
        );
        let lines: Vec<_> = lines(b"{}\n{\"a\":1}\n").collect();
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn header_entries_are_checked() {
        assert!(check_header("Authorization", "Bearer x").is_ok());
        assert!(check_header("Bad Name", "x")
            .unwrap_err()
            .message
            .contains("Bad Name"));
        assert!(check_header("X-A", "a\nb")
            .unwrap_err()
            .message
            .contains("X-A"));
    }
}
