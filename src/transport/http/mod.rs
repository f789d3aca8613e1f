//! The Streamable HTTP transport, in both eras (the specification's "Transports" section of
//! 2025-03-26 to 2025-11-25, and the stateless one of 2026-07-28).
//!
//! Every message is its own POST to the MCP endpoint. A request's POST runs as a task of its
//! own: its answer (a JSON body, or an SSE stream carrying the request's notifications, server
//! requests in the legacy era, then the answer) goes to the connection like any message, and
//! when no answer can come (the POST failed, an HTTP error, the stream broke beyond resumption)
//! the request fails with a `transport` error naming the status and the URL. Timers stay the
//! caller's; connects are bounded here. Notifications and responses are sent before `send`
//! returns, so that `notifications/initialized` is at the server before the next request.
//!
//! The era is read off the messages themselves: a request carrying the modern `_meta` protocol
//! version (2026-07-28) is sent with `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`, no
//! session; cancelling one closes its stream. In the legacy era the `Mcp-Session-Id` of the
//! initialize answer and the negotiated `MCP-Protocol-Version` ride every later request, the GET
//! stream carries server-initiated messages (404/405: none offered), a cut response stream is
//! resumed with `Last-Event-ID` after the server's `retry`, a 404 on the session re-initializes
//! once and retries, and close DELETEs the session.
//!
//! A modern `tools/call` also carries the `Mcp-Param-*` headers of the tool's `x-mcp-header`
//! arguments, from what the connection learned of the tool (see `param_headers`).
//!
//! An `http` server whose POST of `initialize` fails with 400/404/405 and no JSON-RPC body is
//! tried as a deprecated HTTP+SSE server at the same URL (the spec's backwards compatibility).

mod direct;
pub use direct::fuzz_response;
mod headers;
mod session;

use super::credentials::{self, Applied, Credentials};
use super::param_headers::ParamHeaders;
use super::remote::{
    self, parse_url, status_error, Event, Events, Kind, Outgoing, RemoteConfig, RemoteLimits,
    StreamError,
};
use super::{BoxFuture, Inbound, Transport};
use crate::error::Error;
use direct::Direct;
use headers::{Era, SESSION};
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::task::AbortHandle;

const LAST_EVENT_ID: &str = "last-event-id";
pub(super) const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// How long to wait before reconnecting a stream when the server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest `retry` honoured: a server cannot park a call for longer between attempts.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Reconnections of one stream in a row that bring nothing before it is given up.
const MAX_RESUMES: u32 = 3;
/// How long a response stream is read on after its answer, for its end (see `drain`).
const DRAIN: Duration = Duration::from_secs(1);
/// At most this many response streams are read on after their answer at a time, in the whole
/// process: each holds a connection (a server that never ends its streams would hold many).
const MAX_DRAINING: usize = 16;
static DRAINING: AtomicUsize = AtomicUsize::new(0);

pub struct HttpTransport {
    me: Weak<HttpTransport>,
    http: reqwest::Client,
    /// What its TLS trusts (named in a certificate error).
    trust: Arc<super::tls::Trust>,
    /// The proxy its requests go through (shown, without credentials), if any.
    via: Option<String>,
    url: reqwest::Url,
    headers: HeaderMap,
    sink: Weak<dyn Inbound>,
    limits: RemoteLimits,
    state: Mutex<State>,
    /// One re-initialization at a time.
    reinit: tokio::sync::Mutex<()>,
    /// Requests in flight (their POST and response stream), by id: a cancelled one is aborted.
    inflight: Mutex<HashMap<String, AbortHandle>>,
    /// The GET stream and other background work, aborted on close.
    background: Mutex<Vec<AbortHandle>>,
    /// How the server refused `initialize` when the refusal says it may speak HTTP+SSE (400,
    /// 404 or 405 with no MCP error): the connect then tries that transport (the client's
    /// choice, not this transport's).
    refused_initialize: Mutex<Option<String>>,
    closed: AtomicBool,
    /// Sessions started (the first initialize, and each re-initialization).
    sessions: AtomicU64,
    /// The tools' `x-mcp-header` parameters, as the connection learned them.
    param_headers: Option<Arc<ParamHeaders>>,
    /// The fingerprint of `headers` (see [`Transport::credential`]).
    credential: u64,
    /// What supplies each request's credentials (OAuth), when anything does.
    credentials: Option<Arc<dyn Credentials>>,
    /// The direct path for callers that wait on their own thread (no proxy).
    direct: Option<Direct>,
}

#[derive(Default)]
struct State {
    /// The legacy session, from the initialize answer's `Mcp-Session-Id`.
    session: Option<HeaderValue>,
    /// The legacy version the server chose, for `MCP-Protocol-Version`.
    legacy_version: Option<String>,
    /// The modern version of the last modern request, for notifications without `_meta`.
    modern_version: Option<String>,
    /// The initialize request (its text and id), replayed to start a new session after a 404.
    initialize: Option<(Vec<u8>, String)>,
    get_running: bool,
    get_last_event: Option<String>,
}

/// How one POST went, before its body is read.
enum Posted {
    Answer(reqwest::Response),
    /// 404 on a session, or a 400 that says the session is not known: the session is gone.
    SessionLost(HeaderValue),
    /// An HTTP error whose body was read to judge it (a 400 about something else).
    Refused(StatusCode, Vec<u8>),
}

/// Whether a 400's body says the session is the problem: servers restarted with the reference
/// SDKs answer an old session with 400 "Bad Request: No valid session ID provided" (or "Server
/// not initialized"), not the spec's 404.
fn refuses_the_session(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&body[..body.len().min(4096)]).to_ascii_lowercase();
    text.contains("session") || text.contains("not initialized")
}

impl HttpTransport {
    pub fn new(
        config: &RemoteConfig,
        limits: RemoteLimits,
        param_headers: Option<Arc<ParamHeaders>>,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<Self>, Error> {
        let url = parse_url(&config.url)?;
        let headers = remote::header_map(&config.headers)?;
        let (trust, proxies) = remote::route_of(config, &limits)?;
        let via = proxies.for_url(&url).map(super::proxy::shown);
        let http = remote::http_client(
            &limits,
            !config.headers.is_empty() || config.headers_helper.is_some(),
            &trust,
            &proxies,
            &url,
        )?;
        let credential = remote::fingerprint(
            headers
                .iter()
                .map(|(name, value)| (name.as_str().as_bytes(), value.as_bytes())),
        );
        let direct = Direct::new(&url, &headers, via.is_some(), &trust);
        Ok(Arc::new_cyclic(|me| HttpTransport {
            me: me.clone(),
            http,
            trust,
            via,
            url,
            headers,
            sink,
            limits,
            state: Mutex::new(State::default()),
            reinit: tokio::sync::Mutex::new(()),
            inflight: Mutex::new(HashMap::new()),
            background: Mutex::new(Vec::new()),
            refused_initialize: Mutex::new(None),
            closed: AtomicBool::new(false),
            sessions: AtomicU64::new(0),
            param_headers,
            credential,
            credentials: config.credentials.as_ref().map(|c| c.0.clone()),
            direct,
        }))
    }

    /// The refusal of `initialize` that says the server may be an HTTP+SSE one (the spec's
    /// backwards compatibility: try that transport at the same URL), if there was one.
    pub fn refused_initialize(&self) -> Option<String> {
        self.refused_initialize.lock().clone()
    }

    fn me(&self) -> Arc<HttpTransport> {
        self.me.upgrade().expect("a transport in use is alive")
    }

    /// A request with the headers of every request of this connection at this point: the
    /// entry's own, then the era's (`modern`, or the legacy session and version), the message's
    /// (`message`: a POST of one) and the credentials `applied` (see `headers::compose`).
    fn base(
        &self,
        builder: reqwest::RequestBuilder,
        modern: Option<&str>,
        message: Option<(&[u8], &Outgoing)>,
        applied: &Applied,
    ) -> reqwest::RequestBuilder {
        let mut extra = HeaderMap::new();
        {
            let state = self.state.lock();
            let era = match modern {
                Some(version) => Era::Modern(version),
                None => Era::Legacy {
                    session: state.session.as_ref(),
                    version: state.legacy_version.as_deref(),
                },
            };
            // A header that is no valid HTTP value is left out here (reqwest would refuse
            // the whole request); `header_safe` already made the message's names sendable.
            let _ = headers::compose(
                &mut extra,
                &era,
                message,
                self.param_headers.as_deref(),
                applied,
            );
        }
        builder.headers(self.headers.clone()).headers(extra)
    }

    /// Sends the request `build` makes with the credentials applied (when the connection has
    /// any); a 401/403 goes to the credentials, which say whether it is sent again (refreshed,
    /// authorized, with a nonce) or fails. Bounded by `credentials::MAX_RETRIES`. Runtime only.
    async fn send_authorized(
        &self,
        method: &str,
        body: Option<&[u8]>,
        what: &str,
        repeatable: bool,
        build: impl Fn(&Applied) -> reqwest::RequestBuilder + Send + Sync,
    ) -> Result<reqwest::Response, Error> {
        let url = self.url.as_str();
        let creds = self.credentials.as_deref();
        credentials::send(creds, method, url, body, what, repeatable, build)
            .await
            .map_err(|e| super::proxy::annotate(self.trust.annotate(e), self.via.as_deref()))
    }

    /// The modern version in use, when the connection is of the modern era.
    fn modern_now(&self) -> Option<String> {
        let state = self.state.lock();
        if state.session.is_some() || state.legacy_version.is_some() {
            return None;
        }
        state.modern_version.clone()
    }

    /// POSTs one message with the headers its era asks for.
    async fn post(&self, line: &[u8], out: &Outgoing) -> Result<Posted, Error> {
        let modern = match &out.version {
            Some(v) => {
                self.state.lock().modern_version = Some(v.clone());
                Some(v.clone())
            }
            // A notification of the modern era carries no `_meta` of its own.
            None if out.kind == Kind::Notification => self.modern_now(),
            None => None,
        };
        let session = self.state.lock().session.clone();
        let what = format!("POST ({})", out.method());
        let handshake = matches!(out.method(), "initialize" | "server/discover");
        let resp = self
            .send_authorized("POST", Some(line), &what, handshake, |applied| {
                self.base(
                    self.http.post(self.url.clone()),
                    modern.as_deref(),
                    Some((line, out)),
                    applied,
                )
                .header(ACCEPT, ACCEPT_BOTH)
                .header(CONTENT_TYPE, "application/json")
                .body(line.to_vec())
            })
            .await?;
        if modern.is_none() {
            if let Some(session) = session {
                match resp.status() {
                    StatusCode::NOT_FOUND => return Ok(Posted::SessionLost(session)),
                    StatusCode::BAD_REQUEST => {
                        let body = remote::error_body(resp).await;
                        if refuses_the_session(&body) {
                            return Ok(Posted::SessionLost(session));
                        }
                        return Ok(Posted::Refused(StatusCode::BAD_REQUEST, body));
                    }
                    _ => {}
                }
            }
        }
        Ok(Posted::Answer(resp))
    }

    /// A notification or a response: POSTed, accepted (2xx) or a `transport` error.
    async fn post_simple(&self, line: &[u8], out: &Outgoing) -> Result<(), Error> {
        let what = out.method();
        let exchange = async {
            let resp = match self.post(line, out).await? {
                Posted::Answer(resp) => resp,
                Posted::SessionLost(_) => {
                    return Err(Error::transport(format!(
                        "POST {} ({what}): the server no longer knows the session",
                        self.url
                    )))
                }
                Posted::Refused(status, body) => {
                    return Err(status_error("POST", self.url.as_str(), what, status, &body))
                }
            };
            let status = resp.status();
            if status.is_success() {
                // Drain what little there is, so the connection goes back to the pool.
                let _ = remote::error_body(resp).await;
                return Ok(());
            }
            let body = remote::error_body(resp).await;
            Err(status_error("POST", self.url.as_str(), what, status, &body))
        };
        match tokio::time::timeout(self.limits.connect_timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(Error::transport(format!(
                "POST {} ({what}) got no answer within {} ms",
                self.url,
                self.limits.connect_timeout.as_millis()
            ))),
        }
    }

    /// A request: its POST and its answer, delivered to the connection. An error means that no
    /// answer will come.
    async fn exchange(&self, line: &[u8], out: &Outgoing, id: &str) -> Result<(), Error> {
        let mut retried = false;
        loop {
            let resp = match self.post(line, out).await? {
                Posted::Answer(resp) => resp,
                Posted::SessionLost(session)
                    if !retried && out.method.as_deref() != Some("initialize") =>
                {
                    retried = true;
                    self.renew_session(session).await?;
                    continue;
                }
                Posted::SessionLost(_) => {
                    return Err(Error::transport(format!(
                    "POST {} ({}): the server lost the session again after a new one was started",
                    self.url,
                    out.method()
                )))
                }
                Posted::Refused(status, body) => return self.status_answer(status, &body, out, id),
            };
            let status = resp.status();
            if status.is_success() {
                if out.method.as_deref() == Some("initialize") {
                    let session = resp.headers().get(SESSION).cloned();
                    self.state.lock().session = session;
                    self.sessions.fetch_add(1, Ordering::Relaxed);
                }
                return self.read_answer(resp, out, id, true).await.map(|_| ());
            }
            let body = remote::error_body(resp).await;
            if out.method() == "initialize"
                && matches!(status.as_u16(), 400 | 404 | 405)
                && remote::rpc_error_of(&body).is_none()
            {
                *self.refused_initialize.lock() = Some(format!(
                    "HTTP {} from POST {} (initialize){}",
                    status.as_u16(),
                    self.url,
                    remote::snippet(&body)
                ));
            }
            return self.status_answer(status, &body, out, id);
        }
    }

    /// A request answered with an HTTP error status: an MCP error in it goes to the connection
    /// as the answer; `server/discover` refused is an answer the era negotiation reads as
    /// "legacy"; anything else is the request's `transport` (or `needs_auth`) error.
    fn status_answer(
        &self,
        status: StatusCode,
        body: &[u8],
        out: &Outgoing,
        id: &str,
    ) -> Result<(), Error> {
        let method = out.method();
        if let Some(mut error) = remote::rpc_error_of(body) {
            // An MCP error in an HTTP error: the server's own words, with the status.
            if let Some(m) = error.get("message").and_then(Value::as_str) {
                let m = format!("{m} (HTTP {} from POST {})", status.as_u16(), self.url);
                error["message"] = json!(m);
            }
            self.deliver(&remote::error_response(id, &error));
            return Ok(());
        }
        if method == "server/discover"
            && status.is_client_error()
            && status != StatusCode::UNAUTHORIZED
        {
            // Not a 2026-07-28 server: an error the era negotiation reads as "legacy".
            let error = json!({
                "code": crate::protocol::codes::METHOD_NOT_FOUND,
                "message": format!("HTTP {} from POST {} (server/discover){}", status.as_u16(), self.url, remote::snippet(body)),
            });
            self.deliver(&remote::error_response(id, &error));
            return Ok(());
        }
        Err(status_error(
            "POST",
            self.url.as_str(),
            method,
            status,
            body,
        ))
    }

    fn direct(&self) -> Option<&Direct> {
        self.direct.as_ref()
    }

    fn url(&self) -> &str {
        self.url.as_str()
    }

    fn limits(&self) -> &RemoteLimits {
        &self.limits
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// A message of a direct exchange's response stream, for the connection: whether it was
    /// the answer to `id`.
    fn direct_answer(&self, message: &[u8], id: &str) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        match self.sink.upgrade() {
            Some(sink) => sink.answer(message, id),
            None => false,
        }
    }

    /// Why a JSON body was not the answer to request `id` (read only on this, the failing path).
    fn unanswered(&self, body: &[u8], out: &Outgoing, id: &str) -> Error {
        let why = if body.iter().all(u8::is_ascii_whitespace) {
            "an empty body".to_string()
        } else if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(body) {
            format!("a body that is not JSON ({e})")
        } else {
            match remote::response_id(body) {
                Some(other) => format!("the answer to another request (id {other})"),
                None => "a message that is not an answer".to_string(),
            }
        };
        Error::protocol(format!(
            "POST {} ({}) answered application/json with {why}, not the answer to its request (id {id})",
            self.url,
            out.method()
        ))
    }

    /// A direct exchange's request gets no answer: it fails with `error`.
    fn direct_failed(&self, id: &str, error: Error) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Some(sink) = self.sink.upgrade() {
            sink.request_failed(id, error);
        }
    }

    /// The header lines a modern request carries besides the fixed ones (see `base`), for the
    /// direct path; `None` when one cannot be written as is, or the credentials must be brought
    /// up to date first (the general path then decides).
    fn direct_headers(&self, line: &[u8], out: &Outgoing, version: &str) -> Option<Vec<u8>> {
        let applied = match &self.credentials {
            Some(c) if c.due() => return None,
            Some(c) => c.apply(&credentials::Request {
                method: "POST",
                url: self.url.as_str(),
                body: Some(line),
            }),
            None => Applied::default(),
        };
        let mut extra = headers::Lines(Vec::with_capacity(96));
        headers::compose(
            &mut extra,
            &Era::Modern(version),
            Some((line, out)),
            self.param_headers.as_deref(),
            &applied,
        )?;
        Some(extra.0)
    }

    /// Whether a 401/403 is the credentials' to judge (then the direct path hands the request
    /// to the general one: a refresh or an authorization never runs on a host's thread).
    fn judges_challenges(&self) -> bool {
        self.credentials.is_some()
    }

    /// Reads the answer of a request: JSON or an SSE stream. Every message goes to the
    /// connection (`deliver_answer`: the answer too); returns the answer. A stream that ends
    /// before the answer is resumed (legacy era, an event id seen), else a `transport` error.
    async fn read_answer(
        &self,
        resp: reqwest::Response,
        out: &Outgoing,
        id: &str,
        deliver_answer: bool,
    ) -> Result<Option<Vec<u8>>, Error> {
        let what = format!("the answer to {} from {}", out.method(), self.url);
        if remote::is_content_type(&resp, "application/json") {
            let accepted = resp.status() == StatusCode::ACCEPTED;
            let body = remote::read_body(resp, self.limits.max_message_bytes, &what).await?;
            if accepted && body.iter().all(u8::is_ascii_whitespace) {
                return Ok(None); // 202: the answer comes on another stream
            }
            self.note_answer(out, &body);
            // A JSON body answers this POST's request and nothing else: anything else fails
            // the request now, rather than leaving it to its timeout.
            let answered = if deliver_answer {
                self.direct_answer(&body, id)
            } else {
                remote::response_id(&body).as_deref() == Some(id)
            };
            if !answered {
                return Err(self.unanswered(&body, out, id));
            }
            return Ok(Some(body));
        }
        if !remote::is_content_type(&resp, "text/event-stream") {
            if resp.status() == StatusCode::ACCEPTED || resp.content_length() == Some(0) {
                // No body: the answer comes on another stream (the GET stream), under the
                // caller's timer.
                return Ok(None);
            }
            let kind = resp
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("none")
                .to_string();
            return Err(Error::transport(format!(
                "POST {} ({}) answered with Content-Type {kind:?}; expected application/json or text/event-stream",
                self.url,
                out.method()
            )));
        }
        let modern = out.version.is_some();
        let mut events = Events::new(resp, self.limits.max_message_bytes, what.clone());
        let mut last_id: Option<String> = None;
        let mut retry = DEFAULT_RETRY;
        let mut resumes = 0;
        loop {
            let end = loop {
                match events.next().await {
                    None => break None,
                    Some(Err(StreamError::TooLarge(e))) => return Err(e),
                    Some(Err(StreamError::Broken(e))) => break Some(e),
                    Some(Ok(event)) => {
                        note_event(&event, &mut last_id, &mut retry);
                        if event.data.trim().is_empty() {
                            continue; // a priming event (an id, a retry), or a keep-alive
                        }
                        resumes = 0;
                        let data = event.data.as_bytes();
                        if remote::response_id(data).as_deref() == Some(id) {
                            self.note_answer(out, data);
                            if deliver_answer {
                                self.deliver(data);
                            }
                            drain(events).await;
                            return Ok(Some(event.data.into_bytes()));
                        }
                        self.deliver(data);
                    }
                }
            };
            let why = match &end {
                Some(e) => e.message.clone(),
                None => "the server ended it".to_string(),
            };
            if modern
                || last_id.is_none()
                || resumes >= MAX_RESUMES
                || self.closed.load(Ordering::SeqCst)
            {
                return Err(Error::transport(format!(
                    "the response stream of {} from POST {} ended before the answer ({why}){}",
                    out.method(),
                    self.url,
                    if modern || last_id.is_some() {
                        ""
                    } else {
                        "; it cannot be resumed: the server sent no event ids"
                    }
                )));
            }
            resumes += 1;
            tokio::time::sleep(retry).await;
            events = self
                .resume(last_id.as_deref().unwrap_or_default(), &what)
                .await?;
        }
    }

    /// What the transport learns from an answer: the legacy version the server chose.
    fn note_answer(&self, out: &Outgoing, body: &[u8]) {
        if out.method.as_deref() != Some("initialize") {
            return;
        }
        if let Ok(v) = serde_json::from_slice::<Value>(body) {
            if let Some(version) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
                self.state.lock().legacy_version = Some(version.to_string());
            }
        }
    }

    fn deliver(&self, message: &[u8]) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Some(sink) = self.sink.upgrade() {
            sink.message(message);
        }
    }
}

/// How long `notifications/initialized` waits for the GET stream's answer.
const GET_STREAM_WAIT: Duration = Duration::from_millis(250);

/// Reads a response stream on after its answer (already delivered) up to its end, which the
/// server sends next, so that the connection goes back to the pool: a stream dropped before its
/// end closes the connection, and the next POST pays for a new one (one call in ten against
/// peer-bench's rmcp server, where the end often comes in a TCP segment of its own; more where
/// Nagle holds it back). Bounded in time and in streams at once; what comes is ignored.
async fn drain(mut events: Events) {
    struct Slot;
    impl Drop for Slot {
        fn drop(&mut self) {
            DRAINING.fetch_sub(1, Ordering::Relaxed);
        }
    }
    if DRAINING.fetch_add(1, Ordering::Relaxed) >= MAX_DRAINING {
        DRAINING.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let _slot = Slot; // given back even when the request's task is aborted meanwhile
    let _ = tokio::time::timeout(DRAIN, async {
        while let Some(Ok(_)) = events.next().await {}
    })
    .await;
}

fn note_event(event: &Event, last_id: &mut Option<String>, retry: &mut Duration) {
    if let Some(id) = &event.id {
        *last_id = Some(id.clone());
    }
    if let Some(r) = event.retry {
        *retry = r.min(MAX_RETRY);
    }
}

impl HttpTransport {
    /// Whether the request `out` (id `id`, JSON text) of a caller that drives its own request
    /// `driven` takes the direct path (see `http::direct`): the transport's path exists, the
    /// caller is a host thread, and the request is that caller's own, of the modern era.
    fn direct_for(&self, out: &Outgoing, id: &str, driven: Option<u64>) -> Option<&Direct> {
        let direct = self.direct.as_ref()?;
        let driven = driven?;
        if out.version.is_none()
            || !direct.enabled()
            || out.method.as_deref() == Some("initialize")
            || id.parse::<u64>().ok() != Some(driven)
            || !crate::runtime::on_host_thread()
            || !direct.addresses_ready()
        {
            return None;
        }
        Some(direct)
    }

    /// A request's exchange as a task of its own on the runtime (the general path).
    fn spawn_exchange(self: &Arc<Self>, line: Vec<u8>, out: Outgoing, id: String) {
        let me = self.clone();
        let key = id.clone();
        // The entry goes in under the lock that the task's end takes too, so a quick task
        // never leaves its handle behind.
        let mut inflight = self.inflight.lock();
        let task = crate::runtime::spawn(async move {
            let r = me.exchange(&line, &out, &id).await;
            me.inflight.lock().remove(&id);
            if let Err(e) = r {
                if !me.closed.load(Ordering::SeqCst) {
                    if let Some(sink) = me.sink.upgrade() {
                        sink.request_failed(&id, e);
                    }
                }
            }
        });
        inflight.insert(key, task.abort_handle());
    }

    /// A direct POST was redirected (the server did not handle it), or the TLS of its
    /// connection failed before an answer: the request goes again by the general path (which
    /// follows redirects, and explains a TLS failure with what was trusted), and so does every
    /// later one.
    fn direct_handed_over(&self, body: &[u8], out: Outgoing, id: String) {
        if let Some(direct) = &self.direct {
            direct.disable();
        }
        if !self.closed.load(Ordering::SeqCst) {
            self.me().spawn_exchange(body.to_vec(), out, id);
        }
    }

    /// A direct POST was answered 401/403 and the connection has credentials: the request goes
    /// again by the general path, where the credentials judge the challenge on the runtime.
    fn direct_challenged(&self, body: &[u8], out: Outgoing, id: String) {
        if !self.closed.load(Ordering::SeqCst) {
            self.me().spawn_exchange(body.to_vec(), out, id);
        }
    }

    fn send_lines(
        self: Arc<Self>,
        message: Vec<u8>,
        mut driven: Option<super::DrivenRequest>,
    ) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::closed("the connection is closed"));
            }
            let mut lines = remote::lines(&message).peekable();
            while let Some(line) = lines.next() {
                // The caller's own request (the last line) as the caller described it, if it
                // did; anything else as read from the message.
                let shape = match lines.peek() {
                    None => driven.as_mut().and_then(|d| d.shape.take()),
                    Some(_) => None,
                };
                let out = match (shape, &driven) {
                    (Some(shape), Some(d)) => Outgoing {
                        kind: Kind::Request(d.id.to_string()),
                        method: Some(shape.method.to_string()),
                        name: Some(shape.name),
                        version: shape.version,
                        cancels: None,
                    },
                    _ => Outgoing::peek(line),
                };
                let driven_id = driven.as_ref().map(|d| d.id);
                match &out.kind {
                    Kind::Request(id) => {
                        if let Some(direct) = self.direct_for(&out, id, driven_id) {
                            let version = out.version.as_deref().unwrap_or_default();
                            if let Some(extra) = self.direct_headers(line, &out, version) {
                                {
                                    let mut state = self.state.lock();
                                    if state.modern_version.as_deref() != Some(version) {
                                        state.modern_version = Some(version.to_string());
                                    }
                                }
                                let id = id.clone();
                                direct.start(&self, line, out, id, &extra);
                                continue;
                            }
                        }
                        if out.method.as_deref() == Some("initialize") {
                            self.state.lock().initialize = Some((line.to_vec(), id.clone()));
                        }
                        let id = id.clone();
                        self.spawn_exchange(line.to_vec(), out, id);
                    }
                    Kind::Notification if out.cancels.is_some() => {
                        let target = out.cancels.clone().unwrap_or_default();
                        if self.modern_now().is_none() {
                            // Legacy: a disconnect is no cancellation; say it, then stop reading.
                            let _ = self.clone().post_on_worker(line, &out).await;
                        }
                        // Modern: closing the request's stream is the cancellation.
                        if let Some(task) = self.inflight.lock().remove(&target) {
                            task.abort();
                        } else if let Some(direct) = &self.direct {
                            direct.cancel(&target);
                        }
                    }
                    _ => {
                        if out.method.as_deref() == Some("notifications/initialized") {
                            // The GET stream first: a server that asks the client something as
                            // soon as it is initialized (roots/list, say) sends it there, and
                            // one that has no stream open drops it. Bounded: a server that
                            // holds the GET's headers back only delays the connect that long.
                            if let Some(ready) = self.start_listening() {
                                let _ = tokio::time::timeout(GET_STREAM_WAIT, ready).await;
                            }
                        }
                        self.clone().post_on_worker(line, &out).await?;
                    }
                }
            }
            Ok(())
        })
    }

    /// `post_simple` on a runtime thread (reqwest's futures never run on a host thread's stack:
    /// see `runtime::on_worker`).
    async fn post_on_worker(self: Arc<Self>, line: &[u8], out: &Outgoing) -> Result<(), Error> {
        let (line, out) = (line.to_vec(), out.clone());
        crate::runtime::on_worker(async move { self.post_simple(&line, &out).await }).await
    }
}

/// A caller waiting for its answer does the direct path's I/O itself (see `direct`).
impl super::Driven for HttpTransport {
    fn send_driven(
        self: Arc<Self>,
        message: Vec<u8>,
        request: super::DrivenRequest,
    ) -> BoxFuture<'static, Result<(), Error>> {
        self.send_lines(message, Some(request))
    }

    fn uses_request_shape(&self) -> bool {
        true
    }

    fn drive(&self, wait: Duration, _also: Option<std::os::fd::RawFd>) -> super::Drive {
        match &self.direct {
            Some(direct) if direct.drive(self, wait) => super::Drive::Turned,
            _ => super::Drive::Finished,
        }
    }

    fn leave_call(&self, _could_drive: bool) {
        if let Some(direct) = &self.direct {
            direct.leave();
        }
    }
}

impl Transport for HttpTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        self.send_lines(message, None)
    }

    /// The direct path's requests are the caller's to drive (when it is on).
    fn driven(self: Arc<Self>) -> Option<Arc<dyn super::Driven>> {
        if self.direct.is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn credential(&self) -> u64 {
        match &self.credentials {
            Some(c) => self.credential ^ c.identity().rotate_left(17),
            None => self.credential,
        }
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.closed.swap(true, Ordering::SeqCst) {
                return;
            }
            for (_, task) in self.inflight.lock().drain() {
                task.abort();
            }
            for task in self.background.lock().drain(..) {
                task.abort();
            }
            if let Some(direct) = &self.direct {
                direct.close();
            }
            let session = self.state.lock().session.clone();
            if session.is_some() {
                // End the session; 200, 202, 404 (already gone) and 405 (not allowed) all do.
                // The credentials as they are: no refresh or authorization to end a session.
                let applied = self
                    .credentials
                    .as_ref()
                    .map(|c| {
                        c.apply(&credentials::Request {
                            method: "DELETE",
                            url: self.url.as_str(),
                            body: None,
                        })
                    })
                    .unwrap_or_default();
                let delete = self
                    .base(self.http.delete(self.url.clone()), None, None, &applied)
                    .send();
                let grace = self.limits.shutdown_grace.max(Duration::from_millis(500));
                let _ = crate::runtime::on_worker(async move {
                    let _ = tokio::time::timeout(grace, delete).await;
                    Ok(())
                })
                .await;
            }
        })
    }
}

impl Drop for HttpTransport {
    fn drop(&mut self) {
        for (_, task) in self.inflight.get_mut().drain() {
            task.abort();
        }
        for task in self.background.get_mut().drain(..) {
            task.abort();
        }
    }
}
