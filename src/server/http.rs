//! Serving over Streamable HTTP (`mcplug serve --http`): one endpoint, `/mcp`, for both eras.
//!
//! - **2025-11-25 and older** (a client that opens with `initialize`): a session per client,
//!   named by the `Mcp-Session-Id` the answer to `initialize` gives; each POSTed request is
//!   answered on its own response — `application/json` when nothing else was said before the
//!   answer, else `text/event-stream` carrying what concerns the request (its progress, log
//!   messages, the requests an upstream asks the client through it) and then the answer; a GET
//!   opens the stream of what concerns no request (`list_changed`); DELETE ends the session.
//!   Each SSE event has an id: a client whose stream broke GETs with `Last-Event-ID` and gets
//!   what that stream carried since (a broken POST stream's request is answered there).
//! - **2026-07-28** (a request whose `params._meta` names a modern version): stateless — every
//!   POST is a session of its own that ends with its answer, and closing the response cancels
//!   the request. The `MCP-Protocol-Version` and `Mcp-Method` headers must agree with the body.
//!
//! - **HTTP+SSE** (2024-11-05's transport, for old clients): a GET of `/sse` opens a session
//!   and its stream, whose first event (`endpoint`) names where to POST (`/messages?sessionId=…`);
//!   every message of the session, answers included, goes on that stream, and each POST is
//!   answered 202. The session ends with its stream.
//!
//! Every request is checked against DNS rebinding first: a `Host` that is not the address the
//! server listens on (or, on loopback, `localhost`) and an `Origin` that is not a loopback origin
//! get 403. Answers to what is not MCP use the status the spec asks (406, 415, 400, 404, 405).

use super::session::{Handler, ServerSession};
use crate::error::{Error, Result};
use crate::protocol::codes;
use crate::protocol::era::{self, LEGACY_VERSIONS};
use crate::session::cancel::CancelSignal;
use crate::transport::{BoxFuture, Inbound, Transport};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

type Body = BoxBody<Bytes, Infallible>;

/// The largest body a client may POST.
const MAX_BODY: usize = 16 << 20;

/// The path of the endpoint.
pub(crate) const PATH: &str = "/mcp";

/// The legacy HTTP+SSE transport's stream, and where its clients POST.
pub(crate) const SSE_PATH: &str = "/sse";
const MESSAGES_PATH: &str = "/messages";

/// A code of the 2026-07-28 era: a header disagrees with the body.
const HEADER_MISMATCH: i64 = -32020;

/// Methods of the handshake eras that a 2026-07-28 request may not use (404, -32601).
const REMOVED_IN_2026: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Registers each new legacy session with whoever notifies every client (the pool's router).
pub(crate) type Opened = Box<dyn Fn(&Arc<ServerSession>) + Send + Sync>;

/// A Streamable HTTP endpoint being served.
pub(crate) struct HttpServing {
    url: String,
    shared: Arc<Http>,
}

struct Http {
    handler: Arc<dyn Handler>,
    opened: Opened,
    ask_timeout: Duration,
    /// The legacy sessions, by their `Mcp-Session-Id`.
    sessions: Mutex<HashMap<String, Legacy>>,
    /// The HTTP+SSE sessions, by their `sessionId`.
    sse_sessions: Mutex<HashMap<String, Legacy>>,
    /// The `Host` values (without port) a request may name.
    hosts: Vec<String>,
    loopback: bool,
    stop: Arc<CancelSignal>,
}

#[derive(Clone)]
struct Legacy {
    session: Arc<ServerSession>,
    wire: Arc<Wire>,
}

/// Listens on `listen` (`host:port`; port 0 picks one) and serves `handler` at `/mcp`.
pub(crate) fn listen(
    listen: &str,
    handler: Arc<dyn Handler>,
    opened: Opened,
    ask_timeout: Duration,
) -> Result<HttpServing> {
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(listen)
        .map_err(|e| {
            Error::invalid(format!(
                "serve option `listen` {listen:?} is no address: {e}"
            ))
        })?
        .collect();
    let addr = *addrs.first().ok_or_else(|| {
        Error::invalid(format!("serve option `listen` {listen:?} names no address"))
    })?;
    let std_listener = std::net::TcpListener::bind(addr)
        .map_err(|e| Error::transport(format!("cannot listen on {addr}: {e}")))?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| Error::transport(format!("cannot listen on {addr}: {e}")))?;
    let local = std_listener
        .local_addr()
        .map_err(|e| Error::transport(format!("cannot listen on {addr}: {e}")))?;
    let listener = {
        let _rt = crate::runtime::handle().enter();
        tokio::net::TcpListener::from_std(std_listener)
            .map_err(|e| Error::transport(format!("cannot listen on {addr}: {e}")))?
    };
    let loopback = local.ip().is_loopback();
    let mut hosts = vec![host_of(&local)];
    if loopback {
        hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
    }
    let shared = Arc::new(Http {
        handler,
        opened,
        ask_timeout,
        sessions: Mutex::new(HashMap::new()),
        sse_sessions: Mutex::new(HashMap::new()),
        hosts,
        loopback,
        stop: CancelSignal::new(),
    });
    crate::runtime::spawn(accept(
        listener,
        Arc::downgrade(&shared),
        shared.stop.clone(),
    ));
    Ok(HttpServing {
        url: format!("http://{local}{PATH}"),
        shared,
    })
}

impl HttpServing {
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Stops listening and ends every session.
    pub(crate) async fn close(&self) {
        self.shared.stop.fire();
        let mut sessions: Vec<Legacy> = self
            .shared
            .sessions
            .lock()
            .drain()
            .map(|(_, s)| s)
            .collect();
        sessions.extend(self.shared.sse_sessions.lock().drain().map(|(_, s)| s));
        for s in sessions {
            s.session.close().await;
        }
    }

    /// Resolves once closed.
    pub(crate) async fn done(&self) {
        self.shared.stop.fired().await
    }
}

fn host_of(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}

async fn accept(listener: tokio::net::TcpListener, http: Weak<Http>, stop: Arc<CancelSignal>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.fired() => return,
        };
        let Ok((tcp, _)) = accepted else {
            // Out of descriptors, say: a moment before the next try.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Some(http) = http.upgrade() else { return };
        let stop = stop.clone();
        crate::runtime::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let http = http.clone();
                async move { Ok::<_, Infallible>(http.answer(req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.fired() => {}
            }
        });
    }
}

impl Http {
    async fn answer(self: &Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if let Some(refused) = self.rebinding(req.headers()) {
            return refused;
        }
        match (req.uri().path(), req.method()) {
            (PATH, _) => {}
            (SSE_PATH, &Method::GET) => return self.open_sse(req.headers()),
            (MESSAGES_PATH, &Method::POST) => return self.post_message(req).await,
            (SSE_PATH, _) | (MESSAGES_PATH, _) => {
                let allowed = if req.uri().path() == SSE_PATH {
                    "GET"
                } else {
                    "POST"
                };
                let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
                r.headers_mut()
                    .insert("allow", HeaderValue::from_static(allowed));
                return r;
            }
            _ => return status_only(StatusCode::NOT_FOUND),
        }
        match *req.method() {
            Method::POST => self.post(req).await,
            Method::GET => self.get(req.headers()),
            Method::DELETE => self.delete(req.headers()).await,
            _ => {
                let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
                r.headers_mut()
                    .insert("allow", HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    /// 403 for a request a web page may have made through DNS rebinding: a `Host` we do not
    /// answer to, or a browser's `Origin` that is not this machine (on loopback).
    fn rebinding(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let host_name = strip_port(host);
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host_name)) {
            return Some(error_status(
                StatusCode::FORBIDDEN,
                None,
                -32000,
                &format!("Forbidden: Host {host:?} is not this server's"),
            ));
        }
        if let Some(origin) = headers.get("origin") {
            let origin = origin.to_str().unwrap_or("");
            let name = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .map(strip_port);
            let allowed = match name {
                Some(n) if self.loopback => ["localhost", "127.0.0.1", "[::1]"]
                    .iter()
                    .any(|h| h.eq_ignore_ascii_case(n)),
                Some(n) => self.hosts.iter().any(|h| h.eq_ignore_ascii_case(n)),
                None => false,
            };
            if !allowed {
                return Some(error_status(
                    StatusCode::FORBIDDEN,
                    None,
                    -32000,
                    &format!("Forbidden: Origin {origin:?} may not use this server"),
                ));
            }
        }
        None
    }

    async fn post(self: &Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let headers = req.headers().clone();
        let accept = header(&headers, "accept");
        if !(accepts(accept, "application/json") && accepts(accept, "text/event-stream")) {
            return error_status(
                StatusCode::NOT_ACCEPTABLE,
                None,
                -32000,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            );
        }
        let body = match json_body(&headers, req.into_body()).await {
            Ok(b) => b,
            Err(refused) => return *refused,
        };
        let message: Peek = match serde_json::from_slice(&body) {
            Ok(m) => m,
            Err(e) => {
                let batch = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
                let why = if batch {
                    "Parse error: one JSON-RPC message per POST (batches are not accepted)"
                        .to_string()
                } else {
                    format!("Parse error: {e}")
                };
                return error_status(StatusCode::BAD_REQUEST, None, codes::PARSE_ERROR, &why);
            }
        };
        let claim = message.modern_claim();
        if let Some(version) = claim {
            return self.post_modern(&headers, &message, version, body).await;
        }
        if let Some(v) = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
        {
            if era::is_modern(v) {
                return error_status(
                    StatusCode::BAD_REQUEST,
                    message.id.as_deref(),
                    codes::INVALID_PARAMS,
                    &format!(
                        "MCP-Protocol-Version {v} needs the request's params._meta (\"{}\")",
                        era::META_PROTOCOL_VERSION
                    ),
                );
            }
            if message.method.as_deref() != Some("initialize") && !LEGACY_VERSIONS.contains(&v) {
                return error_status(
                    StatusCode::BAD_REQUEST,
                    message.id.as_deref(),
                    -32000,
                    &format!(
                        "Bad Request: Unsupported protocol version: {v} (supported versions: {})",
                        LEGACY_VERSIONS.join(", ")
                    ),
                );
            }
        }
        if message.method.as_deref() == Some("initialize") {
            if headers.contains_key("mcp-session-id") {
                return error_status(
                    StatusCode::BAD_REQUEST,
                    message.id.as_deref(),
                    codes::INVALID_REQUEST,
                    "Bad Request: initialize opens a session; it is not sent on one",
                );
            }
            return self.initialize(&message, body).await;
        }
        let legacy = match self.session_of(&headers, message.id.as_deref()) {
            Ok(l) => l,
            Err(refused) => return *refused,
        };
        relay(&legacy.session, &legacy.wire, &message, body, None).await
    }

    /// `initialize`: a new legacy session, named in the answer's `Mcp-Session-Id`.
    async fn initialize(self: &Arc<Self>, message: &Peek, body: Bytes) -> Response<Body> {
        let wire = Wire::resumable();
        let transport = wire.clone();
        let session = ServerSession::new(None, self.handler.clone(), self.ask_timeout, move |_| {
            transport as Arc<dyn Transport>
        });
        let id = crate::auth::jws::random_b64url(24);
        let mut answer = relay(&session, &wire, message, body, None).await;
        if answer.status() == StatusCode::OK && !session.is_closed() {
            (self.opened)(&session);
            self.sessions
                .lock()
                .insert(id.clone(), Legacy { session, wire });
            answer.headers_mut().insert(
                "mcp-session-id",
                HeaderValue::from_str(&id).expect("base64url is a valid header value"),
            );
        }
        answer
    }

    /// A 2026-07-28 request: a session of its own, ended with its answer.
    async fn post_modern(
        self: &Arc<Self>,
        headers: &HeaderMap,
        message: &Peek,
        version: &str,
        body: Bytes,
    ) -> Response<Body> {
        let id = message.id.as_deref();
        let said = header(headers, "mcp-protocol-version");
        if said != version {
            return error_status(
                StatusCode::BAD_REQUEST,
                id,
                HEADER_MISMATCH,
                &format!("Header mismatch: MCP-Protocol-Version header value {said:?} does not match body value {version:?}"),
            );
        }
        let method = message.method.as_deref().unwrap_or("");
        let said = header(headers, "mcp-method");
        if said != method {
            return error_status(
                StatusCode::BAD_REQUEST,
                id,
                HEADER_MISMATCH,
                &format!("Header mismatch: Mcp-Method header value {said:?} does not match body value {method:?}"),
            );
        }
        if let Some(name) = message.routed_name() {
            let said = decode_header_value(header(headers, "mcp-name"));
            if said.as_deref() != Some(name) {
                return error_status(
                    StatusCode::BAD_REQUEST,
                    id,
                    HEADER_MISMATCH,
                    &format!(
                        "Header mismatch: Mcp-Name header value does not match body value {name:?}"
                    ),
                );
            }
        }
        let has_capabilities = message
            .params
            .as_ref()
            .and_then(|p| p.meta.as_ref())
            .and_then(|m| m.get(era::META_CLIENT_CAPABILITIES))
            .is_some_and(Value::is_object);
        if !has_capabilities {
            return error_status(
                StatusCode::BAD_REQUEST,
                id,
                codes::INVALID_PARAMS,
                &format!(
                    "params._meta needs \"{}\" (an object): a 2026-07-28 request says what its client can do",
                    era::META_CLIENT_CAPABILITIES
                ),
            );
        }
        if REMOVED_IN_2026.contains(&method) {
            return error_status(
                StatusCode::NOT_FOUND,
                id,
                codes::METHOD_NOT_FOUND,
                &format!("Method not found: {method} is not part of the 2026-07-28 protocol"),
            );
        }
        if !era::MODERN_VERSIONS.contains(&version) {
            return json_response(
                StatusCode::BAD_REQUEST,
                &json!({"jsonrpc": "2.0", "id": message.id_value(), "error": {
                    "code": codes::UNSUPPORTED_PROTOCOL_VERSION,
                    "message": format!("Unsupported protocol version: {version}"),
                    "data": {"supported": era::MODERN_VERSIONS, "requested": version}}}),
            );
        }
        let wire = Wire::new();
        let transport = wire.clone();
        let session = ServerSession::new(None, self.handler.clone(), self.ask_timeout, move |_| {
            transport as Arc<dyn Transport>
        });
        // Closing the response (the client went away) cancels the request: the session ends.
        let ends = EndsWith(session.clone());
        relay(&session, &wire, message, body, Some(ends)).await
    }

    fn session_of(
        &self,
        headers: &HeaderMap,
        id: Option<&str>,
    ) -> std::result::Result<Legacy, Box<Response<Body>>> {
        let Some(name) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Err(Box::new(error_status(
                StatusCode::BAD_REQUEST,
                id,
                -32000,
                "Bad Request: Mcp-Session-Id header is required",
            )));
        };
        let found = self.sessions.lock().get(name).cloned();
        match found {
            Some(l) if !l.session.is_closed() => Ok(l),
            _ => Err(Box::new(error_status(
                StatusCode::NOT_FOUND,
                id,
                -32001,
                "Session not found",
            ))),
        }
    }

    /// The stream of what concerns no request, for a legacy session.
    fn get(&self, headers: &HeaderMap) -> Response<Body> {
        if !accepts(header(headers, "accept"), "text/event-stream") {
            return error_status(
                StatusCode::NOT_ACCEPTABLE,
                None,
                -32000,
                "Not Acceptable: Client must accept text/event-stream",
            );
        }
        if !headers.contains_key("mcp-session-id") {
            // The 2026-07-28 era has no GET stream.
            let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
            r.headers_mut()
                .insert("allow", HeaderValue::from_static("POST"));
            return r;
        }
        let legacy = match self.session_of(headers, None) {
            Ok(l) => l,
            Err(refused) => return *refused,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        // A client back after a stream broke: what it missed, then the stream goes on here.
        if let Some(after) = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return match legacy.wire.resume(after, tx) {
                Some(()) => sse(rx, None),
                None => error_status(
                    StatusCode::CONFLICT,
                    None,
                    -32000,
                    &format!("Conflict: event {after} is not one this session can resume from (unknown, or too old)"),
                ),
            };
        }
        {
            let mut get = legacy.wire.get.lock();
            if get.as_ref().is_some_and(|g| !g.is_closed()) {
                return error_status(
                    StatusCode::CONFLICT,
                    None,
                    -32000,
                    "Conflict: Only one SSE stream is allowed per session",
                );
            }
            *get = Some(tx);
        }
        sse(rx, None)
    }

    /// HTTP+SSE: a new session, its stream the response; the first event says where to POST.
    fn open_sse(self: &Arc<Self>, headers: &HeaderMap) -> Response<Body> {
        if !accepts(header(headers, "accept"), "text/event-stream") {
            return error_status(
                StatusCode::NOT_ACCEPTABLE,
                None,
                -32000,
                "Not Acceptable: Client must accept text/event-stream",
            );
        }
        let wire = Wire::single_stream();
        let (tx, rx) = mpsc::unbounded_channel();
        *wire.get.lock() = Some(tx);
        let transport = wire.clone();
        let session = ServerSession::new(None, self.handler.clone(), self.ask_timeout, move |_| {
            transport as Arc<dyn Transport>
        });
        let id = crate::auth::jws::random_b64url(24);
        (self.opened)(&session);
        self.sse_sessions.lock().insert(
            id.clone(),
            Legacy {
                session: session.clone(),
                wire,
            },
        );
        let endpoint = Bytes::from(format!(
            "event: endpoint\ndata: {MESSAGES_PATH}?sessionId={id}\n\n"
        ));
        let gone = SseGone {
            http: Arc::downgrade(self),
            id,
            session,
        };
        let stream = futures_util::stream::unfold(
            (rx, Some(endpoint), gone),
            |(mut rx, first, gone)| async move {
                if let Some(b) = first {
                    return Some((Ok(Frame::data(b)), (rx, None, gone)));
                }
                let out = rx.recv().await?;
                Some((Ok(Frame::data(event(&out))), (rx, None, gone)))
            },
        );
        sse_response(stream)
    }

    /// HTTP+SSE: a message of a session's client; what it causes goes on the session's
    /// stream.
    async fn post_message(self: &Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let id = req
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|kv| kv.strip_prefix("sessionId="))
            .unwrap_or("")
            .to_string();
        let Some(legacy) = self.sse_sessions.lock().get(&id).cloned() else {
            return error_status(
                StatusCode::NOT_FOUND,
                None,
                -32001,
                "Session not found: open one with a GET of /sse",
            );
        };
        let headers = req.headers().clone();
        let body = match json_body(&headers, req.into_body()).await {
            Ok(b) => b,
            Err(refused) => return *refused,
        };
        if let Err(e) = serde_json::from_slice::<Peek>(&body) {
            return error_status(
                StatusCode::BAD_REQUEST,
                None,
                codes::PARSE_ERROR,
                &format!("Parse error: {e}"),
            );
        }
        legacy.session.clone().message(&body);
        status_only(StatusCode::ACCEPTED)
    }

    async fn delete(&self, headers: &HeaderMap) -> Response<Body> {
        let legacy = match self.session_of(headers, None) {
            Ok(l) => l,
            Err(refused) => return *refused,
        };
        if let Some(name) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.sessions.lock().remove(name);
        }
        legacy.session.close().await;
        status_only(StatusCode::OK)
    }
}

/// A POST's body, once its `Content-Type` says JSON (else 415) and it is read whole (`MAX_BODY`
/// at most, else 400).
async fn json_body(
    headers: &HeaderMap,
    body: Incoming,
) -> std::result::Result<Bytes, Box<Response<Body>>> {
    let content_type = header(headers, "content-type");
    if !content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    {
        return Err(Box::new(error_status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            -32000,
            "Unsupported Media Type: Content-Type must be application/json",
        )));
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => Err(Box::new(error_status(
            StatusCode::BAD_REQUEST,
            None,
            codes::PARSE_ERROR,
            &format!("the body could not be read: {e}"),
        ))),
    }
}

/// Hands one POSTed message to `session` and answers the POST: 202 for a notification or a
/// response; for a request, its answer alone as JSON, or — once something else concerning the
/// request goes first — an SSE stream of those messages and then the answer.
async fn relay(
    session: &Arc<ServerSession>,
    wire: &Arc<Wire>,
    message: &Peek,
    body: Bytes,
    ends: Option<EndsWith>,
) -> Response<Body> {
    let Some(id) = message.id.as_deref().filter(|_| message.method.is_some()) else {
        // A notification, or the client's answer to a request of ours.
        if message.method.as_deref() == Some("notifications/cancelled") {
            if let Some(request) = message
                .params
                .as_ref()
                .and_then(|p| p.request_id.as_deref())
            {
                wire.forget(&id_key(request));
            }
        }
        session.clone().message(&body);
        return status_only(StatusCode::ACCEPTED);
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    wire.posts.lock().push(Post {
        id: id_key(id),
        token: message.progress_token(),
        tx,
    });
    session.clone().message(&body);
    match rx.recv().await {
        Some(out) if out.last => {
            let answer = out.message;
            // A 2026-07-28 error says its kind in the HTTP status too.
            let status = if ends.is_some() {
                status_of_error(&answer)
            } else {
                StatusCode::OK
            };
            drop(ends);
            json_bytes(status, answer)
        }
        Some(first) => sse(rx, Some((first, ends))),
        None => {
            drop(ends);
            status_only(StatusCode::ACCEPTED)
        }
    }
}

/// An SSE response of what comes on `rx`, `first` first; ends after the answer (or when the
/// session lets go of it). `ends` is dropped with the stream.
fn sse(rx: mpsc::UnboundedReceiver<Out>, first: Option<(Out, Option<EndsWith>)>) -> Response<Body> {
    let (first, ends) = match first {
        Some((b, e)) => (Some(b), e),
        None => (None, None),
    };
    let stream = futures_util::stream::unfold(
        (rx, first, ends, false),
        |(mut rx, first, ends, done)| async move {
            if done {
                return None;
            }
            let out = match first {
                Some(out) => out,
                None => rx.recv().await?,
            };
            let last = out.last;
            Some((Ok(Frame::data(event(&out))), (rx, None, ends, last)))
        },
    );
    sse_response(stream)
}

/// A `text/event-stream` response of `stream`'s frames.
fn sse_response<S>(stream: S) -> Response<Body>
where
    S: futures_util::Stream<Item = std::result::Result<Frame<Bytes>, Infallible>>
        + Send
        + Sync
        + 'static,
{
    let mut r = Response::new(StreamBody::new(stream).boxed());
    let h = r.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        "cache-control",
        HeaderValue::from_static("no-cache, no-transform"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// An HTTP+SSE session's end, with its stream (the client went away, or the server closed).
struct SseGone {
    http: Weak<Http>,
    id: String,
    session: Arc<ServerSession>,
}

impl Drop for SseGone {
    fn drop(&mut self) {
        if let Some(http) = self.http.upgrade() {
            http.sse_sessions.lock().remove(&self.id);
        }
        let session = self.session.clone();
        crate::runtime::spawn(async move { session.close().await });
    }
}

fn event(out: &Out) -> Bytes {
    let text = String::from_utf8_lossy(&out.message);
    let mut frame = String::with_capacity(text.len() + 40);
    if let Some(id) = out.id {
        frame.push_str(&format!("id: {id}\n"));
    }
    let mut out = frame;
    out.push_str("event: message\ndata: ");
    out.push_str(text.trim_end());
    out.push_str("\n\n");
    Bytes::from(out)
}

/// Ends a 2026-07-28 request's session when dropped (its answer was given, or its response
/// closed: the spec's cancel).
struct EndsWith(Arc<ServerSession>);

impl Drop for EndsWith {
    fn drop(&mut self) {
        let session = self.0.clone();
        crate::runtime::spawn(async move { session.close().await });
    }
}

/// What the session sends, on its way to a response stream.
struct Out {
    message: Bytes,
    /// Its SSE event id (a legacy session's streams can be resumed from it).
    id: Option<u64>,
    /// The answer of the request the stream is for: the stream ends after it.
    last: bool,
}

/// Which of a legacy session's streams an event went on.
#[derive(Clone, PartialEq, Eq)]
enum Stream {
    Get,
    /// A POST's response, by its request's id (JSON text).
    Post(String),
}

/// What a legacy session sent on its SSE streams lately, to replay to a client that comes back
/// with `Last-Event-ID` after its stream broke (the latest `REPLAY_EVENTS`, `REPLAY_BYTES` at
/// most).
#[derive(Default)]
struct Replay {
    next: u64,
    kept: std::collections::VecDeque<(u64, Stream, Bytes, bool)>,
    bytes: usize,
}

const REPLAY_EVENTS: usize = 1024;
const REPLAY_BYTES: usize = 4 << 20;

impl Replay {
    fn keep(&mut self, stream: Stream, message: &Bytes, last: bool) -> u64 {
        self.next += 1;
        self.kept
            .push_back((self.next, stream, message.clone(), last));
        self.bytes += message.len();
        while self.kept.len() > REPLAY_EVENTS || self.bytes > REPLAY_BYTES {
            match self.kept.pop_front() {
                Some((_, _, m, _)) => self.bytes -= m.len(),
                None => break,
            }
        }
        self.next
    }

    /// The stream event `after` went on, and what went on it since; `None` if it is not kept.
    fn since(&self, after: u64) -> Option<(Stream, Vec<Out>)> {
        let stream = self.kept.iter().find(|k| k.0 == after)?.1.clone();
        let events = self
            .kept
            .iter()
            .filter(|k| k.0 > after && k.1 == stream)
            .map(|(seq, _, m, last)| Out {
                message: m.clone(),
                id: Some(*seq),
                last: *last,
            })
            .collect();
        Some((stream, events))
    }
}

/// A POSTed request whose response is open: what concerns it goes there.
struct Post {
    /// Its id as JSON text.
    id: String,
    /// Its progress token as JSON text, when it asked for progress.
    token: Option<String>,
    tx: mpsc::UnboundedSender<Out>,
}

/// The transport of one session over HTTP: each message the session sends goes to the response
/// stream it concerns.
struct Wire {
    /// HTTP+SSE: every message goes on the one stream (`get`).
    single: bool,
    /// A legacy Streamable HTTP session's: what its streams carried, for resumption (a POST's
    /// response that broke stays its request's until the answer, kept here).
    replay: Option<Mutex<Replay>>,
    posts: Mutex<Vec<Post>>,
    /// The GET stream (legacy), for what concerns no request.
    get: Mutex<Option<mpsc::UnboundedSender<Out>>>,
    closed: AtomicBool,
}

impl Wire {
    fn new() -> Arc<Wire> {
        Arc::new(Wire {
            single: false,
            replay: None,
            posts: Mutex::new(Vec::new()),
            get: Mutex::new(None),
            closed: AtomicBool::new(false),
        })
    }

    /// A legacy session's: its SSE events have ids, and a broken stream can be resumed.
    fn resumable() -> Arc<Wire> {
        Arc::new(Wire {
            single: false,
            replay: Some(Mutex::new(Replay::default())),
            posts: Mutex::new(Vec::new()),
            get: Mutex::new(None),
            closed: AtomicBool::new(false),
        })
    }

    fn single_stream() -> Arc<Wire> {
        Arc::new(Wire {
            single: true,
            replay: None,
            posts: Mutex::new(Vec::new()),
            get: Mutex::new(None),
            closed: AtomicBool::new(false),
        })
    }

    /// Sends `message` on `stream` (kept for replay first, on a resumable session).
    fn emit(&self, stream: Stream, tx: &mpsc::UnboundedSender<Out>, message: Bytes, last: bool) {
        let id = self
            .replay
            .as_ref()
            .map(|r| r.lock().keep(stream, &message, last));
        let _ = tx.send(Out { message, id, last });
    }

    /// A client back after its stream broke (`Last-Event-ID: after`): what it missed on that
    /// stream, and the stream goes on in `tx` (`None`: the id is not kept).
    fn resume(&self, after: u64, tx: mpsc::UnboundedSender<Out>) -> Option<()> {
        let mut posts = self.posts.lock();
        let mut get = self.get.lock();
        let (stream, missed) = self.replay.as_ref()?.lock().since(after)?;
        let ended = missed.iter().any(|o| o.last);
        for out in missed {
            let _ = tx.send(out);
        }
        // The client's return says the old stream is gone (the server may not have seen it
        // break yet): the stream goes on here.
        match stream {
            _ if ended => {}
            Stream::Get => *get = Some(tx),
            Stream::Post(id) => {
                if let Some(post) = posts.iter_mut().find(|p| p.id == id) {
                    post.tx = tx;
                }
            }
        }
        Some(())
    }

    /// A request the client cancelled: its response ends without an answer.
    fn forget(&self, id: &str) {
        self.posts.lock().retain(|p| p.id != id);
    }

    fn route(&self, message: Vec<u8>) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed("the client's session has ended"));
        }
        let peek: Peek = serde_json::from_slice(&message)
            .map_err(|e| Error::protocol(format!("an outgoing message is not JSON-RPC: {e}")))?;
        let bytes = Bytes::from(message);
        if self.single {
            return match self.get.lock().as_ref().filter(|g| !g.is_closed()) {
                Some(g) => {
                    self.emit(Stream::Get, g, bytes, false);
                    Ok(())
                }
                None => Err(Error::closed("the client's stream has ended")),
            };
        }
        let mut posts = self.posts.lock();
        if self.replay.is_none() {
            posts.retain(|p| !p.tx.is_closed());
        }
        if peek.method.is_none() {
            // An answer: to the response of its request, which it ends.
            let key = id_key(peek.id.as_deref().unwrap_or("null"));
            if let Some(at) = posts.iter().position(|p| p.id == key) {
                let post = posts.remove(at);
                self.emit(Stream::Post(post.id), &post.tx, bytes, true);
            }
            return Ok(());
        }
        let method = peek.method.as_deref().unwrap_or("");
        // A `subscriptions/listen` stream's notification: on that request's response.
        let subscription = peek
            .params
            .as_ref()
            .and_then(|p| p.meta.as_ref())
            .and_then(|m| m.get(era::META_SUBSCRIPTION_ID))
            .map(|id| id_key(&id.to_string()));
        let to = if let Some(id) = subscription {
            posts.iter().find(|p| p.id == id)
        } else if method == "notifications/progress" {
            let token = peek.progress_token();
            posts.iter().find(|p| p.token.is_some() && p.token == token)
        } else if method.ends_with("/list_changed") || method == "notifications/resources/updated" {
            None
        } else {
            // A log message, or a request of ours: with the request being served (the latest).
            posts.last()
        };
        if let Some(post) = to {
            self.emit(Stream::Post(post.id.clone()), &post.tx, bytes, false);
            return Ok(());
        }
        drop(posts);
        let get = self.get.lock();
        match get.as_ref() {
            Some(g) if !g.is_closed() => {
                self.emit(Stream::Get, g, bytes, false);
                Ok(())
            }
            // The GET stream broke: a notification is kept for the client's return.
            Some(g) if self.replay.is_some() && peek.id.is_none() => {
                self.emit(Stream::Get, g, bytes, false);
                Ok(())
            }
            _ if peek.id.is_some() => Err(Error::closed(
                "the client has no open stream to be asked on",
            )),
            _ => Ok(()),
        }
    }
}

impl Transport for Wire {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<()>> {
        let sent = self.route(message);
        Box::pin(async move { sent })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.closed.store(true, Ordering::SeqCst);
        self.posts.lock().clear();
        *self.get.lock() = None;
        Box::pin(async {})
    }
}

/// The members of a message the HTTP layer looks at.
#[derive(serde::Deserialize)]
struct Peek {
    #[serde(default, deserialize_with = "raw_text")]
    id: Option<String>,
    method: Option<String>,
    params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
struct PeekParams {
    #[serde(rename = "_meta")]
    meta: Option<HashMap<String, Value>>,
    name: Option<String>,
    uri: Option<String>,
    #[serde(rename = "taskId")]
    task_id: Option<String>,
    #[serde(rename = "requestId", default, deserialize_with = "raw_text")]
    request_id: Option<String>,
    #[serde(rename = "progressToken", default, deserialize_with = "raw_text")]
    progress_token: Option<String>,
}

fn raw_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    let raw: Option<Box<RawValue>> = serde::Deserialize::deserialize(d)?;
    Ok(raw.map(|r| r.get().to_string()))
}

impl Peek {
    fn modern_claim(&self) -> Option<&str> {
        self.params
            .as_ref()?
            .meta
            .as_ref()?
            .get(era::META_PROTOCOL_VERSION)?
            .as_str()
    }

    /// The progress token of a request (in `_meta`), or of a progress notification, as JSON
    /// text in one spelling.
    fn progress_token(&self) -> Option<String> {
        let p = self.params.as_ref()?;
        if let Some(t) = &p.progress_token {
            return Some(id_key(t));
        }
        p.meta.as_ref()?.get("progressToken").map(Value::to_string)
    }

    /// What `Mcp-Name` must say for this request.
    fn routed_name(&self) -> Option<&str> {
        let p = self.params.as_ref()?;
        match self.method.as_deref()? {
            "tools/call" | "prompts/get" => p.name.as_deref(),
            "resources/read" => p.uri.as_deref(),
            // The tasks extension (SEP-2663) names the task.
            "tasks/get" | "tasks/update" | "tasks/cancel" => p.task_id.as_deref(),
            _ => None,
        }
    }

    fn id_value(&self) -> Value {
        self.id
            .as_deref()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null)
    }
}

/// An id (or token) as JSON text in one spelling, so that `1`, `1.0` and ` 1` compare alike
/// with how the session writes it back.
fn id_key(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| text.to_string())
}

/// A header's value, `=?base64?…?=` decoded (SEP-2243); `None` when it is absent or malformed.
fn decode_header_value(text: &str) -> Option<String> {
    use base64::Engine;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    match text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(text.to_string()),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or("")
}

/// Whether an `Accept` header takes `media` (`*/*` and `type/*` included).
fn accepts(accept: &str, media: &str) -> bool {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    accept.split(',').any(|item| {
        let m = item.split(';').next().unwrap_or("").trim();
        m.eq_ignore_ascii_case(media) || m == "*/*" || m.eq_ignore_ascii_case(&format!("{kind}/*"))
    })
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_inclusive(']').next().unwrap_or(host);
    }
    host.split(':').next().unwrap_or(host)
}

/// The HTTP status of a 2026-07-28 answer: 404 for a method not found, 400 for what the
/// request got wrong (its params, headers, version or the capabilities it declared), else 200
/// (a tool's failure is a result; other errors stay in-band).
fn status_of_error(answer: &[u8]) -> StatusCode {
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Code>,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    match serde_json::from_slice::<Answer>(answer)
        .ok()
        .and_then(|a| a.error)
    {
        Some(Code {
            code: codes::METHOD_NOT_FOUND,
        }) => StatusCode::NOT_FOUND,
        Some(Code {
            code: codes::INVALID_PARAMS | codes::INVALID_REQUEST | codes::PARSE_ERROR,
        })
        | Some(Code {
            code: HEADER_MISMATCH | -32021 | codes::UNSUPPORTED_PROTOCOL_VERSION,
        }) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn status_only(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = status;
    r
}

fn json_bytes(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    json_bytes(status, Bytes::from(body.to_string()))
}

/// An HTTP error with a JSON-RPC error body (`id` when the request had one).
fn error_status(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response<Body> {
    let id = id
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .unwrap_or(Value::Null);
    json_response(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_are_read_as_media_ranges() {
        assert!(accepts(
            "application/json, text/event-stream",
            "text/event-stream"
        ));
        assert!(accepts("*/*", "application/json"));
        assert!(accepts("text/*;q=0.5", "text/event-stream"));
        assert!(!accepts("application/json", "text/event-stream"));
    }

    #[test]
    fn a_2026_error_says_its_kind_in_the_status() {
        let answer = |code: i64| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#)
        };
        assert_eq!(
            status_of_error(answer(-32601).as_bytes()),
            StatusCode::NOT_FOUND
        );
        for code in [-32602, -32020, -32021, -32022] {
            assert_eq!(
                status_of_error(answer(code).as_bytes()),
                StatusCode::BAD_REQUEST
            );
        }
        assert_eq!(status_of_error(answer(-32603).as_bytes()), StatusCode::OK);
        assert_eq!(
            status_of_error(br#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#),
            StatusCode::OK
        );
    }

    #[test]
    fn hosts_lose_their_port() {
        assert_eq!(strip_port("127.0.0.1:8808"), "127.0.0.1");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
        assert_eq!(strip_port("localhost"), "localhost");
    }

    #[test]
    fn routed_header_values_decode() {
        assert_eq!(decode_header_value("echo").as_deref(), Some("echo"));
        assert_eq!(decode_header_value("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode_header_value("=?base64?!!?="), None);
        assert_eq!(decode_header_value(""), None);
    }
}
