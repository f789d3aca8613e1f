//! One downstream client's session: the server role of the session core.
//!
//! The core frames each line and routes answers and progress; this role answers what every MCP
//! server answers itself — the handshake of the legacy era (`initialize`, the version
//! negotiated as the lifecycle says: the client's if we speak it, else our newest), the modern
//! era's `server/discover`, `ping`, `logging/setLevel` — and hands every other request to the
//! [`Handler`] in a task of its own, with a cancel that the client's `notifications/cancelled`
//! fires (a cancelled request is not answered, as the spec asks). While it serves a request the
//! handler may reach the client through its [`Downstream`]: progress for the request's token,
//! log messages at the level the client set, and requests of its own (sampling, elicitation,
//! roots) — refused at once when the client did not declare the capability, never left hanging.

use crate::error::{Error, ErrorKind, Result};
use crate::protocol::era::{self, LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::protocol::{self, codes, Outgoing, RawJson, LOG_LEVELS};
use crate::session::cancel::{CancelSignal, Cancels};
use crate::session::inbound::Dispatch;
use crate::session::outbound::Request;
use crate::session::pending::Delivered;
use crate::session::{Peer, Session};
use crate::transport::{BoxFuture, Inbound, Transport};
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// What a server offers, and how it serves a request.
pub(crate) trait Handler: Send + Sync + 'static {
    /// The server's capabilities, `serverInfo` and `instructions`, as `initialize` and
    /// `server/discover` give them.
    fn offer(&self) -> Offer;

    /// Serves one request. `Err` is the JSON-RPC error object the client gets (an upstream's
    /// passed on untouched).
    fn handle(&self, call: Call) -> BoxFuture<'static, std::result::Result<RawJson, Value>>;

    /// A client set its log level (`logging/setLevel`, which the session answers itself): a
    /// relay passes it on.
    fn level_set(&self, _level: &str) {}
}

/// What a server offers a client.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    pub(crate) capabilities: Value,
    /// The experimental `tasks` capability of 2025-11-25, offered to clients of that revision
    /// alone (the 2026-07-28 era has the tasks extension instead).
    pub(crate) legacy_tasks: Option<Value>,
    pub(crate) server_info: Value,
    pub(crate) instructions: Option<String>,
}

/// One request of the client, as the handler gets it.
pub(crate) struct Call {
    /// The request's id, as the client wrote it.
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Option<Value>,
    /// Fired when the client cancels the request (or the session ends).
    pub(crate) cancel: Arc<CancelSignal>,
    /// The way back to the client while serving it.
    pub(crate) downstream: Downstream,
}

/// The client, as a handler serving one of its requests reaches it.
#[derive(Clone)]
pub(crate) struct Downstream {
    session: Weak<ServerSession>,
    /// The request's progress token, when the client asked for progress.
    progress_token: Option<Value>,
}

/// The era a client opened with, and what it declared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ClientEra {
    /// Nothing yet (a stdio client may probe with `server/discover` first).
    Unknown,
    /// `initialize` with the version negotiated, the client's capabilities and info.
    Legacy {
        version: String,
        capabilities: Value,
        client_info: Value,
    },
    /// Per-request `_meta` (2026-07-28): each request carries its own capabilities.
    Modern { version: String },
}

/// One downstream client's session (see the module's documentation).
pub(crate) struct ServerSession {
    session: Session,
    handler: Arc<dyn Handler>,
    era: Mutex<ClientEra>,
    /// The client's requests being served, by their id's JSON text, each with its cancel.
    in_flight: Mutex<HashMap<String, Arc<CancelSignal>>>,
    /// The level of log messages the client asked for (`logging/setLevel`); none before.
    log_level: Mutex<Option<String>>,
    /// A legacy client said `notifications/initialized`: notifications may go to it.
    initialized: std::sync::atomic::AtomicBool,
    /// How long a request of ours to the client may wait for its answer.
    ask_timeout: Duration,
    /// This process's number for the session (in the log, beside what is done for it).
    serial: u64,
    /// A legacy client's `caller`, made once (its info is the session's).
    caller: std::sync::OnceLock<Arc<str>>,
    /// The handler's tasks still running (a cancelled one too, until it has told its
    /// upstream), so that closing waits for them to finish what a cancel asks of them.
    running: Running,
}

/// The revision whose clients may be offered the experimental `tasks` capability.
const TASKS_VERSION: &str = "2025-11-25";

/// How long closing a session waits for its handler's tasks to finish after their cancel (a
/// relayed call's is one `notifications/cancelled` upstream; a host tool may ignore it).
const SETTLE: Duration = Duration::from_secs(2);

/// A count of running tasks that can be waited on until it is zero.
#[derive(Default)]
struct Running {
    count: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// One running task, counted until it is dropped.
struct RunningGuard(Arc<ServerSession>);

impl Running {
    fn start(session: &Arc<ServerSession>) -> RunningGuard {
        session
            .running
            .count
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RunningGuard(session.clone())
    }

    /// Resolves once no task runs.
    async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let running = &self.0.running;
        if running
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            running.idle.notify_waiters();
        }
    }
}

/// The number of the next session.
static NEXT_SESSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl ServerSession {
    /// A session for the client at the other end of the transport `make` builds.
    pub(crate) fn new(
        name: Option<&str>,
        handler: Arc<dyn Handler>,
        ask_timeout: Duration,
        make: impl FnOnce(Weak<dyn Inbound>) -> Arc<dyn Transport>,
    ) -> Arc<ServerSession> {
        let session = Arc::new(ServerSession {
            session: Session::new(name, Peer::Client),
            handler,
            era: Mutex::new(ClientEra::Unknown),
            in_flight: Mutex::new(HashMap::new()),
            log_level: Mutex::new(None),
            initialized: std::sync::atomic::AtomicBool::new(false),
            ask_timeout,
            serial: NEXT_SESSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            caller: std::sync::OnceLock::new(),
            running: Running::default(),
        });
        let sink = Arc::downgrade(&session) as Weak<dyn Inbound>;
        session.session.set_transport(make(sink));
        session
    }

    /// Whether the session ended (the client closed its end, or `close`).
    pub(crate) fn is_closed(&self) -> bool {
        self.session.is_closed()
    }

    /// The client, as a server reaches it outside any request (`list_changed`, log messages).
    pub(crate) fn downstream(self: &Arc<Self>) -> Downstream {
        Downstream {
            session: Arc::downgrade(self),
            progress_token: None,
        }
    }

    /// Whether the client may be sent notifications of its own accord (`list_changed`, log
    /// messages): a legacy client once it said `notifications/initialized`, a modern one always.
    pub(crate) fn ready(&self) -> bool {
        match &*self.era.lock() {
            ClientEra::Modern { .. } => true,
            ClientEra::Legacy { .. } => self.initialized.load(std::sync::atomic::Ordering::SeqCst),
            ClientEra::Unknown => false,
        }
    }

    /// Resolves once the session has ended.
    pub(crate) async fn closed(&self) {
        self.session.closed().await
    }

    /// The era the client opened with.
    pub(crate) fn era(&self) -> ClientEra {
        self.era.lock().clone()
    }

    /// Ends the session: requests being served are cancelled (and given a while to tell their
    /// upstreams so), our requests to the client fail.
    pub(crate) async fn close(&self) {
        self.end(Error::closed("the server closed the session"));
        let _ = tokio::time::timeout(SETTLE, self.running.idle()).await;
        if let Some(t) = self.session.transport_if_set() {
            t.close().await;
        }
    }

    fn end(&self, reason: Error) {
        if self.session.shut(&reason).is_some() {
            for (_, cancel) in self.in_flight.lock().drain() {
                cancel.fire();
            }
        }
    }

    /// The answers the session gives itself; `None`: the handler's.
    fn own_answer(
        &self,
        method: &str,
        params: Option<&Value>,
    ) -> Option<std::result::Result<Value, Value>> {
        Some(match method {
            "initialize" => self.initialize(params),
            "ping" => Ok(json!({})),
            "server/discover" => Ok(self.discover()),
            "logging/setLevel" => match params.and_then(|p| p.get("level")).and_then(Value::as_str)
            {
                Some(level) if LOG_LEVELS.contains(&level) => {
                    *self.log_level.lock() = Some(level.to_string());
                    self.handler.level_set(level);
                    Ok(json!({}))
                }
                _ => Err(rpc_error(
                    codes::INVALID_PARAMS,
                    format!("logging/setLevel needs a `level`, one of {LOG_LEVELS:?}"),
                )),
            },
            _ => return None,
        })
    }

    /// The legacy handshake: the client's version if we speak it, else our newest legacy one.
    fn initialize(&self, params: Option<&Value>) -> std::result::Result<Value, Value> {
        let asked = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                rpc_error(
                    codes::INVALID_PARAMS,
                    "initialize needs a string `protocolVersion`",
                )
            })?;
        let version = if LEGACY_VERSIONS.contains(&asked) {
            asked
        } else {
            LEGACY_VERSIONS[0]
        };
        let param = |k: &str| params.and_then(|p| p.get(k)).cloned();
        *self.era.lock() = ClientEra::Legacy {
            version: version.to_string(),
            capabilities: param("capabilities").unwrap_or_else(|| json!({})),
            client_info: param("clientInfo").unwrap_or(Value::Null),
        };
        let mut offer = self.handler.offer();
        if let (Some(tasks), Some(c)) = (
            offer.legacy_tasks.filter(|_| version == TASKS_VERSION),
            offer.capabilities.as_object_mut(),
        ) {
            c.insert("tasks".into(), tasks);
        }
        let mut result = Map::new();
        result.insert("protocolVersion".into(), json!(version));
        result.insert("capabilities".into(), offer.capabilities);
        result.insert("serverInfo".into(), offer.server_info);
        if let Some(instructions) = offer.instructions {
            result.insert("instructions".into(), json!(instructions));
        }
        Ok(Value::Object(result))
    }

    /// `server/discover` (2026-07-28): what we are, for a client that has not opened yet.
    fn discover(&self) -> Value {
        let offer = self.handler.offer();
        let mut result = Map::new();
        result.insert("resultType".into(), json!("complete"));
        result.insert("supportedVersions".into(), json!(MODERN_VERSIONS));
        // Not cached: what the server offers follows its upstreams.
        result.insert("ttlMs".into(), json!(0));
        result.insert("cacheScope".into(), json!("public"));
        result.insert("capabilities".into(), offer.capabilities);
        result.insert(
            "_meta".into(),
            json!({ era::META_SERVER_INFO: offer.server_info }),
        );
        if let Some(instructions) = offer.instructions {
            result.insert("instructions".into(), json!(instructions));
        }
        Value::Object(result)
    }

    /// A modern request names its era in its `_meta`: the session follows it.
    fn note_modern(&self, params: Option<&Value>) {
        let version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(era::META_PROTOCOL_VERSION))
            .and_then(Value::as_str);
        if let Some(version) = version.filter(|v| era::is_modern(v)) {
            let mut current = self.era.lock();
            if !matches!(*current, ClientEra::Legacy { .. }) {
                *current = ClientEra::Modern {
                    version: version.to_string(),
                };
                // Log messages only at the level the request asks for (none if it asks none).
                let level = params
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(era::META_LOG_LEVEL))
                    .and_then(Value::as_str)
                    .filter(|l| LOG_LEVELS.contains(l));
                *self.log_level.lock() = level.map(str::to_string);
            }
        }
    }

    /// Serves a request through the handler in a task of its own; answered once, unless the
    /// client cancelled it first.
    fn serve(self: &Arc<Self>, id: Value, method: String, params: Option<Value>) {
        let key = id.to_string();
        let cancel = CancelSignal::new();
        {
            let mut in_flight = self.in_flight.lock();
            if in_flight.contains_key(&key) {
                drop(in_flight);
                // Ids must be unique among a client's requests in flight.
                self.session.reply(
                    id,
                    Err(rpc_error(
                        codes::INVALID_REQUEST,
                        format!("request id {key} is already in use by a request in flight"),
                    )),
                );
                return;
            }
            in_flight.insert(key.clone(), cancel.clone());
        }
        let progress_token = params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
            .cloned();
        let call = Call {
            id: id.clone(),
            method,
            params,
            cancel: cancel.clone(),
            downstream: Downstream {
                session: Arc::downgrade(self),
                progress_token,
            },
        };
        let method = call.method.clone();
        let served = self.handler.handle(call);
        let this = self.clone();
        let running = Running::start(self);
        crate::runtime::spawn(async move {
            let _running = running;
            // The handler runs to its end: a cancel reaches it through its signal (a relayed
            // call then cancels its upstream request), never by dropping it halfway.
            let outcome = served.await;
            // Whoever takes the request out answers it (a cancelled one was taken already).
            if this.in_flight.lock().remove(&key).is_some() {
                this.send_answer(id, &method, outcome);
            }
        });
    }

    /// Answers a client's request with a result the handler gave as text — for a 2026-07-28
    /// client, with what that era asks of every result that a legacy upstream did not write.
    fn send_answer(&self, id: Value, method: &str, outcome: std::result::Result<RawJson, Value>) {
        match outcome {
            Ok(result) => {
                let modern = matches!(*self.era.lock(), ClientEra::Modern { .. });
                match modern.then(|| completed(method, result.as_str())).flatten() {
                    Some(text) => self.session.reply_raw(&id, &text),
                    None => self.session.reply_raw(&id, result.as_str()),
                }
            }
            Err(error) => self.session.reply(id, Err(error)),
        }
    }

    /// The client's capability at `path` (`["sampling"]`, `["elicitation", "url"]`), as it
    /// declared it at `initialize` (a modern client is never sent requests).
    fn client_declares(&self, path: &[&str]) -> bool {
        match &*self.era.lock() {
            ClientEra::Legacy { capabilities, .. } => protocol::declares(capabilities, path),
            _ => false,
        }
    }
}

/// The capability a client must have declared to be asked `method` (`None`: a server does
/// not ask a client that).
pub(crate) fn needs(method: &str, params: Option<&Value>) -> Option<&'static [&'static str]> {
    Some(match method {
        "sampling/createMessage" => &["sampling"],
        "roots/list" => &["roots"],
        "elicitation/create" => match params.and_then(|p| p.get("mode")).and_then(Value::as_str) {
            Some("url") => &["elicitation", "url"],
            _ => &["elicitation"],
        },
        _ => return None,
    })
}

impl Downstream {
    /// Whether the client speaks the 2026-07-28 era (it is never sent requests).
    pub(crate) fn is_modern(&self) -> bool {
        self.session
            .upgrade()
            .is_some_and(|s| matches!(s.era(), ClientEra::Modern { .. }))
    }

    /// Whether the client asked for progress of the request being served.
    pub(crate) fn wants_progress(&self) -> bool {
        self.progress_token.is_some()
    }

    fn session(&self) -> Result<Arc<ServerSession>> {
        self.session
            .upgrade()
            .ok_or_else(|| Error::closed("the client's session has ended"))
    }

    /// Who the client is, for what is done for it upstream (`CallOptions::caller`): its name
    /// and version (from `initialize`, or a 2026-07-28 request's `_meta`) and its session's
    /// number — `"claude-ai 0.1.0 (session 3)"`.
    pub(crate) fn caller(&self, params: Option<&Value>) -> Option<Arc<str>> {
        let session = self.session.upgrade()?;
        let label = |info: &Value| -> Arc<str> {
            let short = |v: &Value| v.as_str().map(|s| s.chars().take(64).collect::<String>());
            let name = short(&info["name"]).unwrap_or_else(|| "a client".to_string());
            let version = short(&info["version"])
                .map(|v| format!(" {v}"))
                .unwrap_or_default();
            format!("{name}{version} (session {})", session.serial).into()
        };
        if let Some(made) = session.caller.get() {
            return Some(made.clone());
        }
        let opened = session.era.lock().clone();
        Some(match opened {
            ClientEra::Legacy { client_info, .. } => {
                session.caller.get_or_init(|| label(&client_info)).clone()
            }
            _ => label(
                params
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get(era::META_CLIENT_INFO))
                    .unwrap_or(&Value::Null),
            ),
        })
    }

    /// Whether both reach the same client (its session).
    pub(crate) fn same_client(&self, other: &Downstream) -> bool {
        Weak::ptr_eq(&self.session, &other.session)
    }

    /// Whether its client's session is open still.
    pub(crate) fn is_live(&self) -> bool {
        self.session.upgrade().is_some_and(|s| !s.is_closed())
    }

    /// Progress of the request being served, when the client asked for it (else nothing).
    pub(crate) async fn progress(&self, progress: Value) -> Result<()> {
        let Some(token) = &self.progress_token else {
            return Ok(());
        };
        let mut params = match progress {
            Value::Object(m) => m,
            other => {
                return Err(Error::invalid(format!(
                    "progress must be an object of `progress`, `total`, `message` (got {other})"
                )))
            }
        };
        params.insert("progressToken".into(), token.clone());
        let session = self.session()?;
        session
            .session
            .notify("notifications/progress", Some(&Value::Object(params)))
            .await
    }

    /// A log message for the client, if it asked for messages of `level` or above.
    pub(crate) async fn log(&self, level: &str, logger: Option<&str>, data: Value) -> Result<()> {
        let session = self.session()?;
        let wanted = session.log_level.lock().clone();
        let rank = |l: &str| LOG_LEVELS.iter().position(|x| *x == l);
        let Some(wanted) = wanted else { return Ok(()) };
        if rank(level).unwrap_or(0) < rank(&wanted).unwrap_or(0) {
            return Ok(());
        }
        let mut params = Map::new();
        params.insert("level".into(), json!(level));
        if let Some(logger) = logger {
            params.insert("logger".into(), json!(logger));
        }
        params.insert("data".into(), data);
        session
            .session
            .notify("notifications/message", Some(&Value::Object(params)))
            .await
    }

    /// A notification for the client (`list_changed`, a resource update).
    pub(crate) async fn notify(&self, method: &str, params: Option<&Value>) -> Result<()> {
        self.session()?.session.notify(method, params).await
    }

    /// Asks the client (`sampling/createMessage`, `elicitation/create`, `roots/list`): refused at
    /// once when it did not declare the capability; else its answer, under the session's timer
    /// and `cancels` (the request being served, cancelled, cancels this one too).
    pub(crate) async fn ask(
        &self,
        method: &str,
        params: Option<&Value>,
        cancels: &Cancels,
    ) -> Result<RawJson> {
        let session = self.session()?;
        let needs = needs(method, params).ok_or_else(|| {
            Error::invalid(format!(
                "a server asks a client only for sampling/createMessage, elicitation/create or roots/list, not {method:?}"
            ))
        })?;
        if matches!(session.era(), ClientEra::Modern { .. }) {
            return Err(Error::not_implemented(format!(
                "a 2026-07-28 client is not sent requests: the server's {method} goes back to it in an InputRequiredResult"
            )));
        }
        if !session.client_declares(needs) {
            return Err(Error::new(
                ErrorKind::Denied,
                format!(
                    "the client did not declare the {} capability, so it cannot be asked {method}",
                    needs.join(".")
                ),
            ));
        }
        let (id, answer) = session.session.pending.register();
        let message = Outgoing::request(id, method, 0).params(params).finish();
        session
            .session
            .request(Request {
                id,
                answer,
                method,
                message,
                shape: None,
                timeout: Some(session.ask_timeout),
                max_total: None,
                cancellable: true,
                cancels,
                progress: None,
                pause: None,
                caller: None,
            })
            .await
            .map_err(Error::from)
    }
}

impl Dispatch for ServerSession {
    fn session(&self) -> &Session {
        &self.session
    }

    fn request(self: &Arc<Self>, id: Value, method: String, params: Option<Value>) {
        if let Some(answer) = self.own_answer(&method, params.as_ref()) {
            return self.session.reply(id, answer);
        }
        self.note_modern(params.as_ref());
        self.serve(id, method, params);
    }

    fn notification(&self, method: String, params: Option<Value>, _tag: Option<&str>) {
        if method == "notifications/cancelled" {
            let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) else {
                return;
            };
            // Taken out: the task that serves it will not answer.
            if let Some(cancel) = self.in_flight.lock().remove(&id.to_string()) {
                cancel.fire();
            }
        }
        if method == "notifications/initialized" {
            self.initialized
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // `notifications/roots/list_changed`: nothing to do yet.
    }

    fn delivered(self: &Arc<Self>, _delivered: Delivered, _id: &RawValue) {}

    fn invalid(&self, line: &[u8], reason: String) {
        let text = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
        self.session.note_invalid(&text);
        tracing::debug!(target: "mcplug::server", "a message the server cannot act on: {reason}");
    }
}

impl Inbound for ServerSession {
    fn message(self: Arc<Self>, line: &[u8]) {
        crate::session::inbound::message(&self, line)
    }

    fn answer(self: Arc<Self>, line: &[u8], id: &str) -> bool {
        crate::session::inbound::answer(&self, line, id)
    }

    fn stderr(self: Arc<Self>, _line: String) {}

    fn request_failed(self: Arc<Self>, id: &str, error: Error) {
        crate::session::inbound::failed(&self, id, error)
    }

    fn closed(self: Arc<Self>, error: Error) {
        self.end(error);
    }
}

/// The results a 2026-07-28 client may cache, which must say for how long (`ttlMs`) and for
/// whom (`cacheScope`).
const CACHEABLE: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// A result as the 2026-07-28 era writes it: `resultType` (`complete` unless said), and on a
/// cacheable complete result `ttlMs` and `cacheScope` (0 and `private` — not cached — unless
/// the upstream said); `None` when it needs nothing added (or is no object).
fn completed(method: &str, text: &str) -> Option<String> {
    let members: HashMap<String, &RawValue> = serde_json::from_str(text).ok()?;
    let mut add = String::new();
    let complete = match members.get("resultType") {
        None => {
            add.push_str(r#""resultType":"complete","#);
            true
        }
        Some(t) => t.get() == r#""complete""#,
    };
    if complete && CACHEABLE.contains(&method) {
        if !members.contains_key("ttlMs") {
            add.push_str(r#""ttlMs":0,"#);
        }
        if !members.contains_key("cacheScope") {
            add.push_str(r#""cacheScope":"private","#);
        }
    }
    if add.is_empty() {
        return None;
    }
    let rest = text.trim_start().strip_prefix('{')?;
    if members.is_empty() {
        add.pop();
    }
    Some(format!("{{{add}{rest}"))
}

fn rpc_error(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

#[cfg(test)]
mod tests;
