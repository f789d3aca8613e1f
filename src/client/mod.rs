//! One server: connect (era negotiation), requests with their own timers, cancellation,
//! progress, pagination, and the host's event queue.
//!
//! A [`Client`] owns a transport and a pending-request table. Everything the server sends that is
//! not an answer to a host call becomes an event the host pulls; a server's request that needs the
//! host (sampling, elicitation, roots without a fixed list) waits for `respond` under its own timer
//! and is answered with an error if the host never does, so the server never hangs on us.

pub mod cancel;
pub mod events;
pub mod options;

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::era::{self, Era};
use crate::protocol::pending::PendingTable;
use crate::protocol::{self, codes, Incoming, Outgoing, RawJson};
use crate::transport::stdio::{StdioLimits, StdioTransport};
use crate::transport::{Inbound, Transport};
use events::{EventQueue, Pulled};
use once_cell::sync::{Lazy, OnceCell};
use options::{CallOptions, ConnectOptions, ServerSpec};
use parking_lot::{Mutex, RwLock};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Servers (by signature) already found to be legacy: later connections skip the
/// `server/discover` probe, which a silent legacy server would make them wait for.
static LEGACY_SERVERS: Lazy<Mutex<HashSet<String>>> = Lazy::new(Default::default);

/// The most pages a list call follows before it calls the server broken.
const MAX_PAGES: usize = 10_000;

pub struct Client {
    shared: Arc<Shared>,
}

struct HostRequest {
    rpc_id: Value,
    timer: tokio::task::JoinHandle<()>,
}

struct ProgressRoute {
    tag: Option<String>,
    reset: Option<Arc<Notify>>,
}

struct Shared {
    options: ConnectOptions,
    name: Option<String>,
    transport: OnceCell<Arc<dyn Transport>>,
    pending: PendingTable,
    events: EventQueue,
    host_requests: Mutex<HashMap<String, HostRequest>>,
    next_event_id: AtomicU64,
    progress: Mutex<HashMap<String, ProgressRoute>>,
    era: RwLock<Option<EraState>>,
    closed: AtomicBool,
    close_reason: Mutex<Option<Error>>,
    /// The last non-JSON line the server wrote to stdout, for the message when it dies.
    last_invalid: Mutex<Option<String>>,
}

/// The negotiated era, and for the modern era the request `_meta` entries, serialized once.
struct EraState {
    era: Era,
    /// `"io.modelcontextprotocol/protocolVersion":...,"...clientCapabilities":...,"...clientInfo":...`
    modern_meta: Option<String>,
}

/// What a request carries. Tool calls, the hot path, are written straight into the message
/// buffer with the host's arguments as the raw text it gave.
enum Body<'a> {
    Params(Option<Value>),
    ToolCall {
        name: &'a str,
        arguments: Option<&'a RawValue>,
    },
}

/// How one request is sent; the public calls fill it from the host's options.
struct Send<'a> {
    method: &'a str,
    body: Body<'a>,
    timeout: Option<Duration>,
    /// May this request be cancelled with `notifications/cancelled`? (Never `initialize`.)
    cancellable: bool,
    options: Option<&'a CallOptions>,
}

impl Client {
    /// Starts the server and negotiates the protocol era. The connect result gives the
    /// negotiated version, the server's info, capabilities and instructions.
    pub async fn connect(
        spec: &ServerSpec,
        options: ConnectOptions,
        tag: Option<&str>,
    ) -> Result<(Client, Value)> {
        let shared = Arc::new(Shared {
            events: EventQueue::new(options.max_events),
            name: spec.name().map(str::to_string),
            options,
            transport: OnceCell::new(),
            pending: PendingTable::new(),
            host_requests: Mutex::new(HashMap::new()),
            next_event_id: AtomicU64::new(1),
            progress: Mutex::new(HashMap::new()),
            era: RwLock::new(None),
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            last_invalid: Mutex::new(None),
        });
        let sink: Weak<dyn Inbound> = Arc::downgrade(&shared) as Weak<dyn Inbound>;
        let transport: Arc<dyn Transport> = match spec {
            ServerSpec::Stdio { config, .. } => StdioTransport::spawn(
                config,
                StdioLimits {
                    max_message_bytes: shared.options.max_message_bytes,
                    shutdown_grace: shared.options.shutdown_grace,
                },
                sink,
            )?,
        };
        let _ = shared.transport.set(transport);
        let client = Client { shared };

        let guard = tag.map(cancel::register);
        let signature = spec.era_cache_key();
        let negotiate = client.shared.negotiate(&signature);
        let limit = client.shared.options.connect_timeout;
        let outcome = tokio::select! {
            r = with_limit(limit, negotiate) => match r {
                Some(r) => r,
                None => Err(Error::timeout(format!(
                    "connect timed out after {} ms: the server did not complete the handshake{}",
                    limit.map(|d| d.as_millis()).unwrap_or_default(),
                    client.shared.stderr_hint()
                ))),
            },
            _ = cancelled(guard.as_ref()) => Err(Error::new(ErrorKind::Cancelled, "connect was cancelled by the host")),
        };
        match outcome {
            Ok(info) => Ok((client, info)),
            Err(e) => {
                client.close().await;
                Err(e)
            }
        }
    }

    /// The era and version negotiated at connect.
    pub fn era(&self) -> Option<Era> {
        self.shared.era.read().as_ref().map(|s| s.era.clone())
    }

    /// Any request, with the host's per-call options; `default_timeout` is the layer's default
    /// (request or tool timeout). Returns the result untouched.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        if options.all_pages {
            if let Some(field) = page_field(method) {
                let all = self.list_all(method, field, params, options).await?;
                return Ok(RawJson::from_value(&all));
            }
            return Err(Error::invalid(format!(
                "option `all_pages` only applies to list methods, not {method:?}"
            )));
        }
        let timeout = options.timeout.or(self.shared.options.request_timeout);
        self.shared
            .send_request(Send {
                method,
                body: Body::Params(params),
                timeout,
                cancellable: true,
                options: Some(options),
            })
            .await
    }

    /// `tools/call`: tool calls have their own timeout layer (unbounded unless the host sets one).
    /// `arguments` is the JSON object of arguments, as validated raw text.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let timeout = options.timeout.or(self.shared.options.tool_timeout);
        self.shared
            .send_request(Send {
                method: "tools/call",
                body: Body::ToolCall { name, arguments },
                timeout,
                cancellable: true,
                options: Some(options),
            })
            .await
    }

    /// `tools/list`, every page, as `{"tools": [...]}`; with `options.cursor`, that one page as
    /// the server sent it.
    pub async fn list_tools(&self, options: &CallOptions) -> Result<RawJson> {
        if let Some(cursor) = &options.cursor {
            let timeout = options.timeout.or(self.shared.options.request_timeout);
            return self
                .shared
                .send_request(Send {
                    method: "tools/list",
                    body: Body::Params(Some(json!({ "cursor": cursor }))),
                    timeout,
                    cancellable: true,
                    options: Some(options),
                })
                .await;
        }
        let all = self.list_all("tools/list", "tools", None, options).await?;
        Ok(RawJson::from_value(&all))
    }

    /// Follows `nextCursor` to the end (`""` is a valid cursor; a missing one ends the list) and
    /// returns `{field: [every item]}`. A fresh timer per page.
    async fn list_all(
        &self,
        method: &str,
        field: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<Value> {
        let timeout = options.timeout.or(self.shared.options.request_timeout);
        let mut base = match params {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(other) => {
                return Err(Error::invalid(format!(
                    "params of {method} must be an object (got {other})"
                )))
            }
        };
        let mut items = Vec::new();
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let mut page = self
                .shared
                .send_request(Send {
                    method,
                    body: Body::Params(Some(Value::Object(base.clone()))),
                    timeout,
                    cancellable: true,
                    options: Some(options),
                })
                .await?
                .value();
            match page.get_mut(field).map(Value::take) {
                Some(Value::Array(list)) => items.extend(list),
                None | Some(Value::Null) => {}
                Some(other) => {
                    return Err(Error::protocol(format!(
                        "{method} result field `{field}` is not an array: {other}"
                    )))
                }
            }
            match page.get("nextCursor") {
                None | Some(Value::Null) => {
                    let mut out = Map::new();
                    out.insert(field.to_string(), Value::Array(items));
                    return Ok(Value::Object(out));
                }
                Some(Value::String(cursor)) => {
                    if !seen.insert(cursor.clone()) {
                        return Err(Error::protocol(format!(
                            "{method}: the server sent the cursor {cursor:?} twice; stopping instead of looping"
                        )));
                    }
                    base.insert("cursor".into(), Value::String(cursor.clone()));
                }
                Some(other) => {
                    return Err(Error::protocol(format!(
                        "{method}: `nextCursor` is not a string: {other}"
                    )))
                }
            }
        }
        Err(Error::protocol(format!(
            "{method}: more than {MAX_PAGES} pages; stopping"
        )))
    }

    /// Sends a notification to the server.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<()> {
        self.shared.check_open()?;
        let msg = protocol::encode_notification(method, params.as_ref());
        self.shared.transport()?.clone().send(msg).await
    }

    /// Waits for the next event (`None`: forever).
    pub fn next_event(&self, wait: Option<Duration>) -> Pulled {
        self.shared.events.pull(wait)
    }

    /// The host's answer to a server's request event: `{"id", "result"}` or `{"id", "error"}`.
    pub async fn respond(&self, response: &Value) -> Result<()> {
        self.shared.respond(response).await
    }

    /// Closes gracefully: pending calls fail with `closed`, waiting event pulls return `closed`,
    /// and the server (its whole process group) is gone when this returns.
    pub async fn close(&self) {
        self.shared
            .shut(Error::closed("the client was closed by the host"), false);
        if let Some(t) = self.shared.transport.get() {
            t.close().await;
        }
    }

    /// Fails pending calls and wakes event waiters at once, without waiting for the server to
    /// exit; with `abandon_events`, queued events are dropped so that every waiter sees the end
    /// now (a handle about to be freed).
    pub fn begin_close(&self, abandon_events: bool) {
        if abandon_events {
            // First, so that no waiter can be handed the final `closed` event in between.
            self.shared.events.abandon();
        }
        self.shared
            .shut(Error::closed("the client was closed by the host"), false);
    }

    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }
}

/// The array field of each paginated list method.
fn page_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/list" => Some("tools"),
        "resources/list" => Some("resources"),
        "resources/templates/list" => Some("resourceTemplates"),
        "prompts/list" => Some("prompts"),
        "tasks/list" => Some("tasks"),
        _ => None,
    }
}

async fn with_limit<F: std::future::Future>(limit: Option<Duration>, fut: F) -> Option<F::Output> {
    match limit {
        Some(d) => tokio::time::timeout(d, fut).await.ok(),
        None => Some(fut.await),
    }
}

async fn cancelled(guard: Option<&cancel::CancelGuard>) {
    match guard {
        Some(g) => g.signal.fired().await,
        None => std::future::pending().await,
    }
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
}

impl Shared {
    fn transport(&self) -> Result<&Arc<dyn Transport>> {
        self.transport
            .get()
            .ok_or_else(|| Error::closed("the connection has no transport"))
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self
                .close_reason
                .lock()
                .clone()
                .unwrap_or_else(|| Error::closed("the connection is closed")));
        }
        Ok(())
    }

    fn stderr_hint(&self) -> String {
        let tail = self
            .transport
            .get()
            .map(|t| t.diagnostics_tail())
            .unwrap_or_default();
        match tail.last() {
            Some(line) => {
                let mut line = line.clone();
                if line.len() > 300 {
                    let mut cut = 300;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                format!("; its last stderr line: {line}")
            }
            None => String::new(),
        }
    }

    /// Sends one request and waits for its answer, its own timer, or a cancel.
    async fn send_request(&self, send: Send<'_>) -> Result<RawJson> {
        self.check_open()?;
        let options = send.options;
        let guard = options.and_then(|o| o.tag.as_deref()).map(cancel::register);
        let (id, mut answer) = self.pending.register();
        if self.closed.load(Ordering::SeqCst) {
            self.pending.forget(id);
            self.check_open()?;
        }

        let wants_progress = options.is_some_and(|o| o.progress);
        let reset = options
            .filter(|o| o.reset_timeout_on_progress && o.progress)
            .map(|_| Arc::new(Notify::new()));
        if wants_progress {
            self.progress.lock().insert(
                id.to_string(),
                ProgressRoute {
                    tag: options.and_then(|o| o.tag.clone()),
                    reset: reset.clone(),
                },
            );
        }
        let (message, modern) = {
            let era = self.era.read();
            let modern = era.as_ref().and_then(|s| s.modern_meta.as_deref());
            let message = match send.body {
                Body::Params(params) => {
                    self.encode_params(id, send.method, params, wants_progress, era.as_ref())
                }
                Body::ToolCall { name, arguments } => {
                    encode_tool_call(id, name, arguments, wants_progress, modern)
                }
            };
            (message, modern.is_some())
        };

        let outcome = async {
            let start = Instant::now();
            let mut deadline = send.timeout.map(|t| start + t);
            let hard_deadline = options.and_then(|o| o.max_total_timeout).map(|m| start + m);
            if let (Some(d), Some(h)) = (deadline, hard_deadline) {
                deadline = Some(d.min(h));
            }
            // The send counts against the same timer and cancel: a server that stopped reading
            // must not hold a caller past its timeout.
            let mut sending = self.transport()?.clone().send(message);
            let sent = tokio::select! {
                r = &mut sending => Some(r),
                _ = sleep_until_opt(deadline) => None,
                _ = cancelled(guard.as_ref()) => None,
            };
            match sent {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    self.pending.forget(id);
                    return Err(self.check_open().err().unwrap_or(e));
                }
                None => {
                    self.pending.forget(id);
                    // Let the half-written message finish (never leave a partial line), then tell
                    // the server to drop it.
                    let transport = self.transport()?.clone();
                    let cancellable = send.cancellable;
                    crate::runtime::spawn(async move {
                        if sending.await.is_ok() && cancellable {
                            let msg = protocol::encode_notification(
                                "notifications/cancelled",
                                Some(&json!({"requestId": id, "reason": "timed out or cancelled while sending"})),
                            );
                            let _ = transport.send(msg).await;
                        }
                    });
                    return Err(if guard.as_ref().is_some_and(|g| g.signal.is_fired()) {
                        Error::new(ErrorKind::Cancelled, format!("{} was cancelled by the host", send.method))
                    } else {
                        Error::timeout(format!(
                            "{} timed out after {} ms while still being sent (the server is not reading its input)",
                            send.method,
                            send.timeout.map(millis).unwrap_or_default()
                        ))
                    });
                }
            }
            loop {
                tokio::select! {
                    biased;
                    r = &mut answer => {
                        return match r {
                            Ok(r) => r,
                            Err(_) => Err(self.check_open().err().unwrap_or_else(|| Error::closed("the connection is closed"))),
                        };
                    }
                    _ = sleep_until_opt(deadline) => {
                        if self.pending.forget(id) {
                            let limit = send.timeout.map(millis).unwrap_or_default();
                            if send.cancellable {
                                self.send_cancelled(id, "timeout").await;
                            }
                            return Err(Error::timeout(format!(
                                "{} timed out after {limit} ms{}",
                                send.method,
                                if send.cancellable { " (the server was sent notifications/cancelled)" } else { "" }
                            )));
                        }
                        // The answer won the race; take it on the next turn.
                        deadline = None;
                    }
                    _ = cancelled(guard.as_ref()) => {
                        if self.pending.forget(id) {
                            if send.cancellable {
                                self.send_cancelled(id, "cancelled by the host").await;
                            }
                            return Err(Error::new(ErrorKind::Cancelled, format!("{} was cancelled by the host", send.method)));
                        }
                    }
                    _ = notified_opt(reset.as_deref()) => {
                        if let Some(t) = send.timeout {
                            let mut d = Instant::now() + t;
                            if let Some(h) = hard_deadline { d = d.min(h); }
                            deadline = Some(d);
                        }
                    }
                }
            }
        }
        .await;
        if wants_progress {
            self.progress.lock().remove(&id.to_string());
        }
        let result = outcome?;
        if modern {
            check_result_type(send.method, result)
        } else {
            Ok(result)
        }
    }

    /// A request whose params the engine holds as a tree: the progress token and (modern era)
    /// the per-request `_meta` are merged into whatever `_meta` the caller gave.
    fn encode_params(
        &self,
        id: u64,
        method: &str,
        mut params: Option<Value>,
        wants_progress: bool,
        era: Option<&EraState>,
    ) -> Vec<u8> {
        if wants_progress {
            let mut p = match params.take() {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let meta = p.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("progressToken".into(), json!(id));
            }
            params = Some(Value::Object(p));
        }
        if let Some(EraState {
            era: Era::Modern { version },
            ..
        }) = era
        {
            params = Some(era::stamp_modern_meta(
                params,
                version,
                &self.options.capabilities,
                &self.options.client_info,
            ));
        }
        Outgoing::request(id, method, 0)
            .params(params.as_ref())
            .finish()
    }

    async fn send_cancelled(&self, id: u64, reason: &str) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let msg = protocol::encode_notification(
            "notifications/cancelled",
            Some(&json!({"requestId": id, "reason": reason})),
        );
        if let Ok(t) = self.transport() {
            let _ = t.clone().send(msg).await;
        }
    }

    /// The era negotiation of SPEC-CHECKLIST §1: probe `server/discover`, fall back to
    /// `initialize` on anything that is not positive evidence of a modern server.
    async fn negotiate(&self, signature: &str) -> Result<Value> {
        let opts = &self.options;
        let known_legacy = LEGACY_SERVERS.lock().contains(signature);
        let probed = !opts.modern_versions.is_empty() && !known_legacy;
        if probed {
            let probe_timeout = match opts.connect_timeout {
                Some(c) => options::MAX_PROBE_TIMEOUT.min(c / 2),
                None => options::MAX_PROBE_TIMEOUT,
            };
            let mut version = opts.modern_versions[0].clone();
            for attempt in 0..2 {
                let params =
                    era::stamp_modern_meta(None, &version, &opts.capabilities, &opts.client_info);
                let probe = self
                    .send_request(Send {
                        method: "server/discover",
                        body: Body::Params(Some(params)),
                        timeout: Some(probe_timeout),
                        cancellable: false,
                        options: None,
                    })
                    .await;
                match probe.map(|r| r.value()) {
                    Ok(result) => {
                        let supported = string_list(result.get("supportedVersions"));
                        if let Some(v) = opts.modern_versions.iter().find(|v| supported.contains(v))
                        {
                            return Ok(self.adopt_modern(v, result));
                        }
                        break; // answers discover but offers no modern version: a legacy advertisement
                    }
                    Err(e)
                        if e.kind == ErrorKind::Rpc
                            && e.code == Some(codes::UNSUPPORTED_PROTOCOL_VERSION) =>
                    {
                        let supported =
                            string_list(e.data.as_ref().and_then(|d| d.get("supported")));
                        if let Some(v) = opts.modern_versions.iter().find(|v| supported.contains(v))
                        {
                            if attempt == 0 {
                                version = v.clone();
                                continue;
                            }
                        }
                        if !supported.is_empty()
                            && !supported.iter().any(|v| opts.legacy_versions.contains(v))
                        {
                            return Err(Error::protocol(format!(
                                "the server supports protocol versions {supported:?}; this client offers {:?}",
                                opts.modern_versions.iter().chain(opts.legacy_versions.iter()).collect::<Vec<_>>()
                            )));
                        }
                        break;
                    }
                    // Any other JSON-RPC error, or silence: a legacy server.
                    Err(e) if e.kind == ErrorKind::Rpc || e.kind == ErrorKind::Timeout => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if opts.legacy_versions.is_empty() {
            return Err(Error::protocol(format!(
                "the server did not answer server/discover as a {} server, and protocol_versions allows no legacy version",
                opts.modern_versions.join("/")
            )));
        }
        let result = self.initialize().await;
        match result {
            Ok(info) => {
                // Only a probe that failed is evidence; a host that ruled out the modern era is not.
                if probed {
                    LEGACY_SERVERS.lock().insert(signature.to_string());
                }
                Ok(info)
            }
            Err(e) => {
                LEGACY_SERVERS.lock().remove(signature);
                Err(e)
            }
        }
    }

    async fn initialize(&self) -> Result<Value> {
        let opts = &self.options;
        let params = json!({
            "protocolVersion": opts.legacy_versions[0],
            "capabilities": opts.capabilities,
            "clientInfo": opts.client_info,
        });
        let result = self
            .send_request(Send {
                method: "initialize",
                body: Body::Params(Some(params)),
                timeout: opts.connect_timeout,
                cancellable: false,
                options: None,
            })
            .await?
            .value();
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !opts.legacy_versions.contains(&version) {
            return Err(Error::protocol(format!(
                "the server chose protocol version {version:?}, which this client does not offer (it offers {})",
                opts.legacy_versions.join(", ")
            )));
        }
        *self.era.write() = Some(EraState {
            era: Era::Legacy {
                version: version.clone(),
            },
            modern_meta: None,
        });
        self.transport()?
            .clone()
            .send(protocol::encode_notification(
                "notifications/initialized",
                None,
            ))
            .await?;
        Ok(json!({
            "name": self.name,
            "era": "legacy",
            "protocol_version": version,
            "server_info": result.get("serverInfo").cloned().unwrap_or(json!({})),
            "capabilities": result.get("capabilities").cloned().unwrap_or(json!({})),
            "instructions": result.get("instructions").cloned().unwrap_or(Value::Null),
            "result": result,
        }))
    }

    fn adopt_modern(&self, version: &str, result: Value) -> Value {
        // The per-request `_meta` entries, serialized once for the tool-call fast path.
        let mut fragment = Map::new();
        fragment.insert(era::META_PROTOCOL_VERSION.into(), json!(version));
        fragment.insert(
            era::META_CLIENT_CAPABILITIES.into(),
            self.options.capabilities.clone(),
        );
        fragment.insert(
            era::META_CLIENT_INFO.into(),
            self.options.client_info.clone(),
        );
        let text = Value::Object(fragment).to_string();
        let modern_meta = text[1..text.len() - 1].to_string();
        *self.era.write() = Some(EraState {
            era: Era::Modern {
                version: version.to_string(),
            },
            modern_meta: Some(modern_meta),
        });
        let server_info = result
            .get("_meta")
            .and_then(|m| m.get(era::META_SERVER_INFO))
            .or_else(|| result.get("serverInfo"))
            .cloned()
            .unwrap_or(json!({}));
        json!({
            "name": self.name,
            "era": "modern",
            "protocol_version": version,
            "server_info": server_info,
            "capabilities": result.get("capabilities").cloned().unwrap_or(json!({})),
            "instructions": result.get("instructions").cloned().unwrap_or(Value::Null),
            "supported_versions": result.get("supportedVersions").cloned().unwrap_or(json!([])),
            "result": result,
        })
    }

    fn reply(&self, id: Value, outcome: std::result::Result<Value, Value>) {
        let Some(transport) = self.transport.get().cloned() else {
            return;
        };
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let msg = match &outcome {
            Ok(r) => protocol::encode_response(&id, Ok(r)),
            Err(e) => protocol::encode_response(&id, Err(e)),
        };
        crate::runtime::spawn(async move {
            let _ = transport.send(msg).await;
        });
    }

    fn on_server_request(self: &Arc<Self>, id: Value, method: String, params: Option<Value>) {
        let capability = match method.as_str() {
            "ping" => return self.reply(id, Ok(json!({}))),
            "roots/list" => {
                if let Some(roots) = &self.options.roots {
                    return self.reply(id, Ok(json!({ "roots": roots })));
                }
                "roots"
            }
            "sampling/createMessage" => "sampling",
            "elicitation/create" => "elicitation",
            _ => {
                return self.reply(
                    id,
                    Err(json!({"code": codes::METHOD_NOT_FOUND, "message": format!("Method not found: {method}")})),
                )
            }
        };
        if !self.options.declares(capability) {
            return self.reply(
                id,
                Err(json!({
                    "code": codes::METHOD_NOT_FOUND,
                    "message": format!("Method not found: {method} (this client did not declare the {capability} capability)")
                })),
            );
        }
        self.to_host(id, method, params);
    }

    /// Hands a server's request to the host as an event, under a timer: if the host does not
    /// answer in time, the server gets an error instead of waiting forever.
    fn to_host(self: &Arc<Self>, rpc_id: Value, method: String, params: Option<Value>) {
        let event_id = format!("s{}", self.next_event_id.fetch_add(1, Ordering::Relaxed));
        let limit = self.options.host_request_timeout;
        let weak = Arc::downgrade(self);
        let timer_id = event_id.clone();
        let timer_method = method.clone();
        let timer = crate::runtime::spawn(async move {
            tokio::time::sleep(limit).await;
            let Some(shared) = weak.upgrade() else { return };
            let entry = shared.host_requests.lock().remove(&timer_id);
            if let Some(entry) = entry {
                shared.reply(
                    entry.rpc_id,
                    Err(json!({
                        "code": codes::INTERNAL_ERROR,
                        "message": format!("the host did not answer {timer_method} within {} ms", limit.as_millis())
                    })),
                );
                shared.events.push(
                    &json!({"type": "request_expired", "id": timer_id, "method": timer_method}),
                    true,
                );
            }
        });
        self.host_requests
            .lock()
            .insert(event_id.clone(), HostRequest { rpc_id, timer });
        let mut event = json!({"type": "request", "id": event_id, "method": method});
        if let Some(p) = params {
            event["params"] = p;
        }
        self.events.push(&event, false);
    }

    async fn respond(&self, response: &Value) -> Result<()> {
        let obj = response
            .as_object()
            .ok_or_else(|| Error::invalid("response_json must be a JSON object"))?;
        let event_id = obj.get("id").and_then(Value::as_str).ok_or_else(|| {
            Error::invalid("response_json needs the string `id` of the request event it answers")
        })?;
        let outcome = match (obj.get("result"), obj.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => {
                let code_ok = e.get("code").is_some_and(|c| c.as_i64().is_some());
                let msg_ok = e.get("message").is_some_and(Value::is_string);
                if !code_ok || !msg_ok {
                    return Err(Error::invalid(
                        "response_json `error` needs an integer `code` and a string `message`",
                    ));
                }
                Err(e.clone())
            }
            _ => {
                return Err(Error::invalid(
                    "response_json needs exactly one of `result` or `error`",
                ))
            }
        };
        self.check_open()?;
        let entry = self.host_requests.lock().remove(event_id);
        let Some(entry) = entry else {
            return Err(Error::invalid(format!(
                "no server request with id {event_id:?} is waiting for an answer (already answered, expired, cancelled by the server, or never sent)"
            )));
        };
        entry.timer.abort();
        let msg = match &outcome {
            Ok(r) => protocol::encode_response(&entry.rpc_id, Ok(r)),
            Err(e) => protocol::encode_response(&entry.rpc_id, Err(e)),
        };
        self.transport()?.clone().send(msg).await
    }

    fn on_notification(&self, method: String, params: Option<Value>) {
        let mut event = json!({"type": "notification", "method": method});
        match method.as_str() {
            "notifications/progress" => {
                let token = params
                    .as_ref()
                    .and_then(|p| p.get("progressToken"))
                    .map(token_key);
                if let Some(token) = token {
                    if let Some(route) = self.progress.lock().get(&token) {
                        if let Some(reset) = &route.reset {
                            reset.notify_one();
                        }
                        if let Some(tag) = &route.tag {
                            event["tag"] = json!(tag);
                        }
                    }
                }
            }
            "notifications/cancelled" => {
                // The server gave up on one of its requests to the host: forget it.
                if let Some(rid) = params.as_ref().and_then(|p| p.get("requestId")) {
                    let mut hr = self.host_requests.lock();
                    let found = hr
                        .iter()
                        .find(|(_, r)| &r.rpc_id == rid)
                        .map(|(k, _)| k.clone());
                    if let Some(k) = found {
                        if let Some(r) = hr.remove(&k) {
                            r.timer.abort();
                        }
                        event["cancels"] = json!(k);
                    }
                }
            }
            _ => {}
        }
        if let Some(p) = params {
            event["params"] = p;
        }
        self.events.push(&event, true);
    }

    /// Marks the connection closed with `reason`: every pending call fails with it at once,
    /// requests waiting for the host are dropped, and event waiters see the end.
    fn shut(&self, reason: Error, from_transport: bool) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        *self.close_reason.lock() = Some(reason.clone());
        self.pending.fail_all(&reason);
        for (_, r) in self.host_requests.lock().drain() {
            r.timer.abort();
        }
        self.progress.lock().clear();
        let mut last = json!({"type": "closed", "reason": reason.message});
        if reason.kind != ErrorKind::Closed {
            last["kind"] = json!(reason.kind.as_str());
        }
        self.events.close_with(Some(&last));
        if from_transport {
            // The server went away by itself: still reap it and anything left in its group.
            if let Some(t) = self.transport.get().cloned() {
                crate::runtime::spawn(async move { t.close().await });
            }
        }
    }
}

impl Inbound for Shared {
    fn message(self: Arc<Self>, line: &[u8]) {
        // JSON-RPC batches exist only in 2025-03-26 (which a client must accept); they hold
        // ordinary messages, handled one by one.
        if line.first() == Some(&b'[') {
            if let Ok(batch) = serde_json::from_slice::<Vec<&RawValue>>(line) {
                for item in batch {
                    self.handle_message(item.get().as_bytes());
                }
                return;
            }
        }
        self.handle_message(line);
    }

    fn stderr(self: Arc<Self>, line: String) {
        self.events
            .push(&json!({"type": "stderr", "line": line}), true);
    }

    fn closed(self: Arc<Self>, mut error: Error) {
        if let Some(line) = self.last_invalid.lock().take() {
            error.message.push_str(&format!(
                "; it also wrote non-JSON to stdout, last: {line:?}"
            ));
        }
        self.shut(error, true);
    }
}

impl Shared {
    fn handle_message(self: &Arc<Self>, line: &[u8]) {
        match protocol::parse(line) {
            Incoming::Response { id, outcome } => {
                let outcome = match outcome {
                    Ok(result) => Ok(RawJson::copy_of(result)),
                    Err(error) => Err(Error::from_rpc(&error)),
                };
                if !self.pending.complete(id, outcome) {
                    tracing::debug!(id = id.get(), "ignored a response to no pending request");
                }
            }
            Incoming::Request { id, method, params } => self.on_server_request(id, method, params),
            Incoming::Notification { method, params } => self.on_notification(method, params),
            Incoming::Invalid { reason } => {
                let text = String::from_utf8_lossy(&line[..line.len().min(4096)]).into_owned();
                *self.last_invalid.lock() = Some(text.chars().take(200).collect());
                self.events.push(
                    &json!({"type": "invalid_message", "error": reason, "line": text}),
                    true,
                );
            }
        }
    }
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Writes a `tools/call` request straight into its buffer: the host's arguments are copied as
/// the text it gave, and the modern `_meta` is the fragment serialized at connect.
fn encode_tool_call(
    id: u64,
    name: &str,
    arguments: Option<&RawValue>,
    progress: bool,
    modern_meta: Option<&str>,
) -> Vec<u8> {
    let args_len = arguments.map_or(0, |a| a.get().len());
    let mut out = Outgoing::request(
        id,
        "tools/call",
        args_len + name.len() + modern_meta.map_or(0, str::len) + 48,
    )
    .raw(b",\"params\":{");
    if modern_meta.is_some() || progress {
        out = out.raw(b"\"_meta\":{");
        if let Some(meta) = modern_meta {
            out = out.raw(meta.as_bytes());
            if progress {
                out = out.raw(b",");
            }
        }
        if progress {
            out = out.raw(b"\"progressToken\":").number(id);
        }
        out = out.raw(b"},");
    }
    out = out.raw(b"\"name\":").string(name);
    if let Some(args) = arguments {
        out = out.raw(b",\"arguments\":").raw(args.get().as_bytes());
    }
    out.raw(b"}").finish()
}

/// The modern era's `resultType`: absent or "complete" is a final result.
fn check_result_type(method: &str, result: RawJson) -> Result<RawJson> {
    #[derive(serde::Deserialize)]
    struct ResultType<'a> {
        #[serde(rename = "resultType", borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    // Most results have no resultType: find that out without parsing them.
    if !result.as_str().contains("\"resultType\"") {
        return Ok(result);
    }
    let found = serde_json::from_str::<ResultType>(result.as_str())
        .ok()
        .and_then(|r| r.result_type.map(|c| c.into_owned()));
    match found.as_deref() {
        None | Some("complete") => Ok(result),
        Some("input_required") => Err(Error::not_implemented(format!(
            "the server answered {method} with an InputRequiredResult (multi round-trip request), \
             which this version of mcplug does not handle yet"
        ))),
        Some("task") => Err(Error::not_implemented(format!(
            "the server answered {method} with a task, which this version of mcplug does not handle yet"
        ))),
        Some(other) => Err(Error::protocol(format!("{method}: unknown resultType {other:?}"))),
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn notified_opt(n: Option<&Notify>) {
    match n {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_encoding_is_valid_json_in_every_era() {
        let args: &RawValue =
            serde_json::from_str(r#" {"message": "a\nb", "n": 123456789012345678901234567890} "#)
                .unwrap();
        let meta = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x"}"#;
        for (progress, modern) in [
            (false, None),
            (true, None),
            (false, Some(meta)),
            (true, Some(meta)),
        ] {
            let line = encode_tool_call(7, "na\"me", Some(args), progress, modern);
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
            let text = std::str::from_utf8(&line).unwrap();
            let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(v["id"], 7);
            assert_eq!(v["params"]["name"], "na\"me");
            assert!(
                text.contains("123456789012345678901234567890"),
                "arguments copied verbatim: {text}"
            );
            assert_eq!(
                v["params"]["_meta"]["progressToken"].as_u64(),
                progress.then_some(7)
            );
            assert_eq!(
                v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str(),
                modern.map(|_| "2026-07-28")
            );
        }
        let v: Value =
            serde_json::from_slice(&encode_tool_call(1, "t", None, false, None)).unwrap();
        assert_eq!(v["params"], json!({"name": "t"}));
    }

    #[test]
    fn result_type_is_checked_without_parsing_plain_results() {
        let ok = RawJson::from_value(&json!({"content": []}));
        assert!(check_result_type("tools/call", ok).is_ok());
        let done = RawJson::from_value(&json!({"resultType": "complete"}));
        assert!(check_result_type("tools/call", done).is_ok());
        let mrtr = RawJson::from_value(&json!({"resultType": "input_required"}));
        assert_eq!(
            check_result_type("tools/call", mrtr).unwrap_err().kind,
            ErrorKind::NotImplemented
        );
        let odd = RawJson::from_value(&json!({"resultType": "banana"}));
        assert_eq!(
            check_result_type("tools/call", odd).unwrap_err().kind,
            ErrorKind::Protocol
        );
        // The words inside content are not a resultType.
        let text =
            RawJson::from_value(&json!({"content": [{"type": "text", "text": "\"resultType\""}]}));
        assert!(check_result_type("tools/call", text).is_ok());
    }
}
