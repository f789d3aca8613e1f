//! Many servers: the connection manager (Claude Code's MCP manager, FEATURES M1–M7).
//!
//! `connect(config)` starts every server of a configuration at once, each in its own task, local
//! servers (stdio) `local_concurrency` at a time and remote ones (http, sse, ws)
//! `remote_concurrency` at a time: a slow or failing server holds one slot and nothing else, so
//! the others' tools are in the pool as soon as they are up. Each server has a state — `pending`,
//! `connected`, `failed` (with the error), `needs-auth`, `disabled` — and each change is an event
//! `{"type": "state", "server", "state", ...}`.
//!
//! The tool pool (see `pool.rs`) is rebuilt from the connected servers' tools whenever one
//! connects, goes, or says its tools changed; `call_tool(pool_name)` routes to the server.
//!
//! Every server's events come out of the manager's one queue with `"server"`; request events get
//! ids of the manager's own (`m1`, `m2`, ...: two servers both have an `s1`) and `respond` routes
//! the answer back. A connection that ends by itself (the process exited) or whose calls fail
//! with `terminal_errors` consecutive connection errors is closed and reconnected, the first
//! attempt at once, then after `reconnect_initial_ms` doubling up to `reconnect_max_ms`, at most
//! `reconnect_attempts` times. Each connection is one *generation* of its server: whatever a task
//! learns about an older generation (a late connect, a late event) is dropped.

mod authorize;
pub mod catalog;
pub mod event;
pub mod hygiene;
mod lifecycle;
pub mod options;
pub mod pool;
pub mod registry;
mod relists;
pub mod sdk;
pub mod search;

use crate::client::options::{CallOptions, ServerSpec};
use crate::client::{cancel, Client};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use crate::queue::{EventQueue, Pulled, PulledItem};
pub use event::ManagerEvent;
pub use options::ManagerOptions;
use parking_lot::{Mutex, RwLock};
use pool::{Pool, PoolLimits, Source};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch, Semaphore};

/// A server's state (M1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Pending,
    Connected,
    Failed,
    NeedsAuth,
    Disabled,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Connected => "connected",
            State::Failed => "failed",
            State::NeedsAuth => "needs-auth",
            State::Disabled => "disabled",
        }
    }
}

pub struct Manager {
    inner: Arc<Inner>,
}

struct Inner {
    options: ManagerOptions,
    limits: PoolLimits,
    /// In configuration order.
    servers: Mutex<Vec<Arc<Server>>>,
    events: EventQueue,
    routes: Mutex<Routes>,
    pool: RwLock<Arc<Pool>>,
    local: Arc<Semaphore>,
    remote: Arc<Semaphore>,
    /// Set once by `close`: every task stops at its next wait.
    shutdown: watch::Sender<bool>,
    closed: AtomicBool,
    /// The registry of option `registry` (M9), fetched at the first `connect`.
    registry: Option<Arc<registry::Registry>>,
    /// Notified on every state change (after its event is queued).
    changed: tokio::sync::Notify,
    /// Tells this manager's cancel tags apart from every other's.
    id: u64,
    /// Calls of in-process (sdk) servers' tools waiting for the host's answer, by event id.
    host_calls: Mutex<HashMap<String, HostCall>>,
    /// Started calls in flight: their number and their own cancel.
    started: Mutex<HashMap<u64, Arc<cancel::CancelSignal>>>,
    next_call: AtomicU64,
    /// What looks at each event before the host (a server serving this manager): by its id.
    taps: RwLock<Vec<(u64, Tap)>>,
}

/// Sees an event before it is queued for the host; `true`: it took it (the host never sees it).
pub(crate) type Tap = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

static NEXT_TAP: AtomicU64 = AtomicU64::new(1);

/// A host tool call in flight: its server, and where the host's answer goes.
struct HostCall {
    server: String,
    answer: oneshot::Sender<Result<Value>>,
}

static NEXT_MANAGER: AtomicU64 = AtomicU64::new(1);

/// The manager's ids for the servers' request events.
#[derive(Default)]
struct Routes {
    next: u64,
    /// Manager id -> (server, generation, the client's own id).
    by_id: HashMap<String, (String, u64, String)>,
    by_inner: HashMap<(String, u64, String), String>,
}

/// How a server is reached. One a server, and nearly every one a client's: the in-process
/// variant being small costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Spec {
    Client(ServerSpec),
    /// In-process: the host serves it (`sdk.rs`).
    Sdk,
}

struct Server {
    name: String,
    entry: Value,
    remote: bool,
    spec: std::result::Result<Spec, Error>,
    /// An in-process server's tools, as the host gave them last.
    sdk_tools: Mutex<Vec<Value>>,
    st: Mutex<ServerState>,
    /// Consecutive terminal errors of calls on the current connection.
    errors: AtomicU32,
    /// Held while one of its connection's events is taken and forwarded, so that the pump and
    /// a call draining the events before its own answer keep them in order.
    forwarding: Mutex<()>,
    /// Held while `authenticate` or `logout` decides what to do (one at a time).
    auth_gate: tokio::sync::Mutex<()>,
    /// Its tools re-listed after `list_changed`: one in flight, at most one queued.
    relists: relists::Relists,
}

struct ServerState {
    state: State,
    error: Option<Error>,
    client: Option<Arc<Client>>,
    info: Option<Value>,
    /// As listed (shared with the pool's part of this server: see `Pool::rebuild`).
    tools: Arc<Vec<pool::Listed>>,
    /// The reconnect attempt under way (0: none).
    attempt: u32,
    /// Bumped by every connect attempt series and every deliberate close.
    gen: u64,
    /// The task connecting this server now, and its cancel tag.
    task: Option<(String, tokio::task::JoinHandle<()>)>,
    /// The authorization the host asked for (`authenticate`), while its connect runs.
    authorizing: Option<Arc<Authorizing>>,
}

/// One authorization under way (M10): the request the flow made (the URL for the user), and
/// where a callback URL the host captured itself goes.
struct Authorizing {
    request: watch::Sender<Option<Value>>,
    callback: Mutex<Option<oneshot::Sender<String>>>,
}

fn state_for(e: &Error) -> State {
    if e.kind == ErrorKind::NeedsAuth {
        State::NeedsAuth
    } else {
        State::Failed
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One attempt: a failure leaves the server failed.
    Once,
    /// A lost connection: attempts with backoff.
    Reconnect,
    /// One attempt that may authorize (the host asked: `authenticate`, or the pseudo-tool).
    Authorize,
}

impl Manager {
    pub fn new(options: ManagerOptions) -> Manager {
        let limits = PoolLimits {
            max_description: options.max_description,
        };
        // The URL was checked when the options were read.
        let registry = options
            .registry
            .as_deref()
            .and_then(|base| registry::Registry::new(base).ok())
            .map(Arc::new);
        Manager {
            inner: Arc::new(Inner {
                events: EventQueue::new(options.max_events),
                local: Arc::new(Semaphore::new(options.local_concurrency)),
                remote: Arc::new(Semaphore::new(options.remote_concurrency)),
                options,
                limits,
                servers: Mutex::new(Vec::new()),
                routes: Mutex::new(Routes::default()),
                pool: RwLock::new(Arc::new(Pool::default())),
                shutdown: watch::channel(false).0,
                closed: AtomicBool::new(false),
                registry,
                changed: tokio::sync::Notify::new(),
                id: NEXT_MANAGER.fetch_add(1, Ordering::Relaxed),
                host_calls: Mutex::new(HashMap::new()),
                started: Mutex::new(HashMap::new()),
                next_call: AtomicU64::new(1),
                taps: RwLock::new(Vec::new()),
            }),
        }
    }

    /// Another handle on this manager (the server half serves it while the host keeps its own).
    pub(crate) fn share(&self) -> Manager {
        Manager {
            inner: self.inner.clone(),
        }
    }

    /// The pool as it is now.
    pub(crate) fn pool(&self) -> Arc<Pool> {
        self.inner.pool.read().clone()
    }

    /// The servers' names, in configuration order.
    pub(crate) fn server_names(&self) -> Vec<String> {
        self.inner
            .servers
            .lock()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// The connected servers (in configuration order) whose capabilities declare `path`
    /// (`["extensions", "io.modelcontextprotocol/tasks"]`).
    pub(crate) fn servers_declaring(&self, path: &[&str]) -> Vec<String> {
        self.inner
            .servers
            .lock()
            .iter()
            .filter(|s| {
                let st = s.st.lock();
                st.state == State::Connected
                    && st
                        .info
                        .as_ref()
                        .and_then(|i| i.get("capabilities"))
                        .is_some_and(|c| crate::protocol::declares(c, path))
            })
            .map(|s| s.name.clone())
            .collect()
    }

    /// Whether `server` is connected in the 2026-07-28 era (a served client's request to it can
    /// be relayed as it is, see `CallOptions::relayed`).
    pub(crate) fn speaks_modern(&self, server: &str) -> bool {
        self.inner.target(server).is_ok_and(|t| {
            matches!(
                t.client.era(),
                Some(crate::protocol::era::Era::Modern { .. })
            )
        })
    }

    /// The connected servers (in configuration order) whose capabilities include `capability`.
    pub(crate) fn servers_with(&self, capability: &str) -> Vec<String> {
        self.inner
            .targets(None, capability)
            .map(|ts| ts.into_iter().map(|t| t.server).collect())
            .unwrap_or_default()
    }

    /// Each connected server's `instructions`, in configuration order.
    pub(crate) fn instructions(&self) -> Vec<(String, String)> {
        self.inner
            .servers
            .lock()
            .iter()
            .filter_map(|s| {
                let st = s.st.lock();
                let text = st.info.as_ref()?.get("instructions")?.as_str()?;
                (st.state == State::Connected && !text.is_empty())
                    .then(|| (s.name.clone(), text.to_string()))
            })
            .collect()
    }

    /// Lets `tap` see every event (a connection's, or the manager's own) before the host does,
    /// and take the ones it answers for; until `untap` with the id this returns.
    pub(crate) fn tap(&self, tap: Tap) -> u64 {
        let id = NEXT_TAP.fetch_add(1, Ordering::Relaxed);
        self.inner.taps.write().push((id, tap));
        id
    }

    pub(crate) fn untap(&self, id: u64) {
        self.inner.taps.write().retain(|(t, _)| *t != id);
    }

    /// Takes a configuration (see `options::entries`) and starts every server in it; returns at
    /// once with the status. A server already known with the same entry is left as it is; one
    /// whose entry changed is reconnected; one no longer in the configuration is closed and
    /// removed (event `{"type": "removed", "server"}`).
    pub async fn connect(&self, config: &Value) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let mut entries = options::entries(config)?;
        if let Some(r) = &inner.registry {
            r.start(inner.shutdown.subscribe());
        }
        // Policy wherever servers come from (Claude Code applies it to a raw configuration too).
        let mut excluded = Vec::new();
        if let Some(policy) = &inner.options.policy {
            entries.retain(|(name, entry)| match policy.refuses(name, entry) {
                None => true,
                Some((reason, detail)) => {
                    excluded.push(json!({"name": name, "reason": reason, "detail": detail}));
                    false
                }
            });
        }
        let mut start = Vec::new();
        let mut gone = Vec::new();
        let mut retool = Vec::new();
        {
            let mut servers = inner.servers.lock();
            let mut next: Vec<Arc<Server>> = Vec::with_capacity(entries.len());
            for (name, entry) in entries {
                if let Some(old) = servers.iter().find(|s| s.name == name) {
                    if old.entry == entry {
                        next.push(old.clone());
                        continue;
                    }
                    if old.is_sdk() && sdk::same_but_tools(&old.entry, &entry) {
                        // The host's own server with other tools: replaced in place (calls in
                        // flight go on), not reconnected.
                        retool.push((old.clone(), entry.get("tools").cloned()));
                        next.push(old.clone());
                        continue;
                    }
                    gone.push(old.clone());
                }
                let server = Arc::new(Server::new(name, entry, &inner.options));
                next.push(server.clone());
                start.push(server);
            }
            for old in servers.iter() {
                if !next.iter().any(|s| Arc::ptr_eq(s, old))
                    && !gone.iter().any(|g| Arc::ptr_eq(g, old))
                {
                    gone.push(old.clone());
                }
            }
            *servers = next;
        }
        for (server, tools) in retool {
            let tools = tools.unwrap_or_else(|| json!([]));
            if *server.sdk_tools.lock() != tools.as_array().cloned().unwrap_or_default() {
                self.set_tools(&server.name, &tools)?;
            }
        }
        for old in gone {
            let still = inner.servers.lock().iter().any(|s| s.name == old.name);
            inner.stop(&old, None).await;
            if !still {
                inner.emit(ManagerEvent::Removed {
                    server: old.name.clone(),
                });
            }
        }
        for server in start {
            let (initial, gen) = {
                let st = server.st.lock();
                (st.state, st.gen)
            };
            if initial == State::Pending && server.is_sdk() {
                // Nothing to wait for: connected before connect returns.
                inner.settle_sdk(&server, gen);
                continue;
            }
            inner.emit_state(&server);
            if initial == State::Pending {
                inner.start(&server, Mode::Once);
            }
        }
        inner.rebuild_pool();
        let mut status = self.status();
        if !excluded.is_empty() {
            status["excluded"] = Value::Array(excluded);
        }
        Ok(status)
    }

    /// Waits until no server is `pending` (or `wait` ends); returns the status.
    pub async fn wait_settled(&self, wait: Option<Duration>) -> Result<Value> {
        let settled = self.inner.until(|| {
            !self
                .inner
                .servers
                .lock()
                .iter()
                .any(|s| s.st.lock().state == State::Pending)
        });
        match wait {
            Some(w) => {
                if tokio::time::timeout(w, settled).await.is_err() {
                    return Err(Error::timeout(format!(
                        "servers still pending after {} ms",
                        w.as_millis()
                    )));
                }
            }
            None => settled.await,
        }
        Ok(self.status())
    }

    /// `{"servers": {"<name>": {"state", "type", "error"?, "tools": [pool names], ...}}}`.
    pub fn status(&self) -> Value {
        // The read lock is held while the states are read: a state and the pool change together
        // under the write lock (`Inner::change`).
        let pool = self.inner.pool.read();
        let mut out = Map::new();
        let registry = self.inner.registry.as_deref();
        for s in self.inner.servers.lock().iter() {
            let mut st = s.status(&pool);
            if let Some(mark) = registry.and_then(|r| r.mark(&s.entry)) {
                st["registry"] = mark;
            }
            out.insert(s.name.clone(), st);
        }
        let mut v = json!({ "servers": out, "tools": pool.tools.len() });
        if let Some(r) = registry {
            v["registry"] = r.status();
        }
        v
    }

    /// Waits until the registry's fetch (option `registry`) has ended, or `timeout`; whether it
    /// had (true when there is no registry, or no fetch was started).
    pub async fn registry_settled(&self, timeout: Duration) -> bool {
        match &self.inner.registry {
            Some(r) => r.settled(timeout).await,
            None => true,
        }
    }

    /// Each server's registry mark, by server name (empty without option `registry`).
    fn registry_marks(&self) -> HashMap<String, Value> {
        let Some(r) = &self.inner.registry else {
            return HashMap::new();
        };
        self.inner
            .servers
            .lock()
            .iter()
            .filter_map(|s| Some((s.name.clone(), r.mark(&s.entry)?)))
            .collect()
    }

    /// The pool: `{"tools": [...], "dropped": [...]}` (optionally one server's tools only).
    pub fn list_tools(&self, server: Option<&str>) -> Value {
        let pool = self.inner.pool.read().clone();
        let marks = self.registry_marks();
        serde_json::to_value(Self::listing(&pool, server, &marks)).unwrap_or(Value::Null)
    }

    /// [`Manager::list_tools`] as JSON text, written straight from the pool (no tree: a pool of
    /// 100,000 tools is 20 MB of text, and ten times that as a tree).
    pub fn list_tools_text(&self, server: Option<&str>) -> String {
        let pool = self.inner.pool.read().clone();
        let marks = self.registry_marks();
        // Writing into a String fails only on a map key that is not a string: there is none.
        serde_json::to_string(&Self::listing(&pool, server, &marks)).unwrap_or_default()
    }

    fn listing<'a>(
        pool: &'a Pool,
        server: Option<&str>,
        marks: &'a HashMap<String, Value>,
    ) -> pool::Listing<'a> {
        pool::Listing {
            tools: pool
                .tools
                .iter()
                .filter(|t| server.is_none_or(|s| s == t.server))
                .map(|t| pool::Marked(t, marks.get(&t.server)))
                .collect(),
            dropped: &pool.dropped,
        }
    }

    /// Routes a call by its pool name; the result is cleaned and capped (`hygiene.rs`).
    pub async fn call_tool(
        &self,
        pool_name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        if options.format != crate::model::Format::Mcp {
            // Its own future, so that the common call's stays as small as it was (a host thread
            // with a small stack polls it in place).
            return Box::pin(self.call_tool_formatted(pool_name, arguments, options)).await;
        }
        let result = self
            .call_tool_as_sent(pool_name, arguments, options)
            .await?;
        self.inner.clean(result, hygiene::Shape::Tool, pool_name)
    }

    /// A call with `format`: the server's result in MCP's form, cleaned as such, then mapped.
    async fn call_tool_formatted(
        &self,
        pool_name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let mut plain = options.clone();
        plain.format = crate::model::Format::Mcp;
        let result = self.call_tool_as_sent(pool_name, arguments, &plain).await?;
        let cleaned = self.inner.clean(result, hygiene::Shape::Tool, pool_name)?;
        crate::model::tool_result_raw(cleaned, options.format)
    }

    /// Routes a call by its pool name; the result as the server sent it (serving relays it).
    pub(crate) async fn call_tool_as_sent(
        &self,
        pool_name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let inner = &self.inner;
        inner.check_open()?;
        let (server_name, tool, pseudo, resources) = {
            let pool = inner.pool.read();
            match pool.get(pool_name) {
                Some(t) => (t.server.clone(), t.tool.clone(), t.auth, t.resources),
                None => return Err(inner.no_tool(&pool, pool_name)),
            }
        };
        if pseudo {
            return inner.call_authenticate(&server_name).await;
        }
        if resources {
            return Box::pin(self.call_resource_tool(&tool, arguments, options)).await;
        }
        let server = inner
            .server(&server_name)
            .ok_or_else(|| inner.unknown_tool(pool_name))?;
        if server.is_sdk() {
            let result = inner.host_call(&server, &tool, arguments, options).await?;
            return Ok(RawJson::from_value(&result));
        }
        let (client, gen) = {
            let st = server.st.lock();
            match &st.client {
                Some(c) if st.state == State::Connected => (c.clone(), st.gen),
                _ => {
                    return Err(Error::closed(format!(
                        "server {:?} is {}",
                        server.name,
                        st.state.as_str()
                    )))
                }
            }
        };
        let outcome = client.call_tool(&tool, arguments, options).await;
        // What the server sent before its answer (progress, logs) goes out before it.
        inner.drain_events(&server, &client, gen);
        match outcome {
            Ok(result) => {
                server.errors.store(0, Ordering::Relaxed);
                Ok(result)
            }
            Err(e) if e.kind == ErrorKind::Closed && inner.closed.load(Ordering::SeqCst) => {
                Err(Error::closed(format!(
                    "the manager was closed by the host while {pool_name:?} was running"
                )))
            }
            // Authorization lost after connect (not a step-up to a wider scope, which the
            // connection asks for itself): needs-auth, as at connect.
            Err(e)
                if e.kind == ErrorKind::NeedsAuth
                    && e.data
                        .as_ref()
                        .and_then(|d| d.get("reason"))
                        .and_then(Value::as_str)
                        != Some("insufficient_scope") =>
            {
                server.errors.store(0, Ordering::Relaxed);
                inner.lost_authorization(&server, gen, e.clone());
                Err(e)
            }
            Err(e) => {
                if e.is_connection_failure() {
                    let n = server.errors.fetch_add(1, Ordering::Relaxed) + 1;
                    if n >= inner.options.terminal_errors {
                        let why = Error::new(
                            e.kind,
                            format!("{n} consecutive connection errors; the last: {}", e.message),
                        );
                        inner.lost(&server, gen, why);
                    }
                } else {
                    server.errors.store(0, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    /// Ranks the pool by a query (see `search.rs`).
    pub fn search_tools(
        &self,
        query: &str,
        max_results: usize,
        server: Option<&str>,
    ) -> Result<Value> {
        let pool = self.inner.pool.read().clone();
        let mut found = search::search(&pool, query, max_results, server)?;
        let marks = self.registry_marks();
        if !marks.is_empty() {
            for entry in found["tools"].as_array_mut().into_iter().flatten() {
                if let Some(mark) = entry["server"].as_str().and_then(|s| marks.get(s)) {
                    entry["registry"] = mark.clone();
                }
            }
        }
        Ok(found)
    }

    /// Replaces an in-process server's tools (event `tools_changed` when it is connected);
    /// returns its status entry.
    pub fn set_tools(&self, name: &str, tools: &Value) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let server = inner
            .server(name)
            .ok_or_else(|| inner.unknown_server(name))?;
        if !server.is_sdk() {
            return Err(Error::invalid(format!(
                "server {name:?} is not an in-process (\"type\": \"sdk\") server: its tools are its own"
            )));
        }
        if !tools.is_array() {
            return Err(Error::invalid(format!(
                "the tools of in-process server {name:?} must be an array (got {tools})"
            )));
        }
        let tools = sdk::parse_tools(Some(tools), name)?;
        *server.sdk_tools.lock() = tools.clone();
        let connected = inner.change(&server, |st| {
            let connected = st.state == State::Connected;
            if connected {
                st.tools = Arc::new(pool::listed(&tools));
            }
            connected
        });
        let pool = if connected {
            let pool = inner.pool.read().clone();
            inner.emit(ManagerEvent::ToolsChanged {
                server: name.to_string(),
                tools: pool
                    .tools
                    .iter()
                    .filter(|t| t.server == name)
                    .map(|t| json!(t.name))
                    .collect(),
                pool: pool.names(),
            });
            pool
        } else {
            inner.pool.read().clone()
        };
        Ok(server.status(&pool))
    }

    /// Starts a call by pool name without waiting: the outcome arrives once as the event
    /// `{"type": "completion", "call": N, "result" | "error"}` (also when the manager closes).
    /// A pool name that is not in the pool is refused at once.
    pub fn call_tool_start(
        &self,
        pool_name: &str,
        arguments: Option<Box<RawValue>>,
        mut options: CallOptions,
    ) -> Result<u64> {
        let inner = &self.inner;
        inner.check_open()?;
        {
            let pool = inner.pool.read();
            if pool.get(pool_name).is_none() {
                return Err(inner.no_tool(&pool, pool_name));
            }
        }
        let call = inner.next_call.fetch_add(1, Ordering::Relaxed);
        let signal = options.started_cancel();
        inner.started.lock().insert(call, signal);
        let me = Manager {
            inner: inner.clone(),
        };
        let name = pool_name.to_string();
        crate::runtime::spawn(async move {
            let outcome = me.call_tool(&name, arguments.as_deref(), &options).await;
            // Queued before the call leaves `started`: close waits for that to send `closed`.
            me.inner.events.push_text(
                crate::client::started::completion_text(call, &outcome),
                false,
            );
            me.inner.started.lock().remove(&call);
        });
        Ok(call)
    }

    /// Cancels a started call (its completion carries a `cancelled` error); false when no call
    /// of that number is in flight.
    pub fn cancel_call(&self, call: u64) -> bool {
        match self.inner.started.lock().get(&call) {
            Some(signal) => {
                signal.fire();
                true
            }
            None => false,
        }
    }

    /// Up to `max` events at once (see `EventQueue::pull_many`).
    pub fn next_events(&self, max: usize, wait: Option<Duration>) -> Pulled {
        self.inner.events.pull_many(max, wait)
    }

    /// The next event of any server (`None`: wait forever).
    pub fn next_event(&self, wait: Option<Duration>) -> Pulled {
        self.inner.events.pull(wait)
    }

    /// A descriptor readable while events wait (see `EventQueue::readiness_fd`).
    pub fn event_fd(&self) -> Result<i32> {
        self.inner
            .events
            .readiness_fd()
            .map_err(|e| Error::transport(format!("cannot create the event descriptor: {e}")))
    }

    /// Answers a request event by the manager's id.
    pub async fn respond(&self, response: &Value) -> Result<()> {
        let inner = &self.inner;
        let id = response
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::invalid("the response needs the event's `id` (a string)"))?;
        let host_call = inner.host_calls.lock().remove(id);
        if let Some(call) = host_call {
            let answer = sdk::answer(response, id);
            if let Err(e) = &answer {
                if e.kind == ErrorKind::InvalidArgument {
                    // A malformed answer: the call still waits for a good one.
                    inner.host_calls.lock().insert(id.to_string(), call);
                    return answer.map(|_| ());
                }
            }
            let _ = call.answer.send(answer);
            return Ok(());
        }
        let (server, gen, inner_id) =
            inner.routes.lock().by_id.get(id).cloned().ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!("no request event with id {id:?} is waiting for an answer"),
                )
            })?;
        let client = inner.server(&server).and_then(|s| {
            let st = s.st.lock();
            (st.gen == gen).then(|| st.client.clone()).flatten()
        });
        let client = client.ok_or_else(|| {
            Error::closed(format!(
                "the connection to server {server:?} that sent request {id:?} is gone"
            ))
        })?;
        let mut answer = response.clone();
        answer["id"] = json!(inner_id);
        client.respond(&answer).await?;
        inner.routes.lock().forget(&server, gen, &inner_id);
        Ok(())
    }

    /// Closes the connection (if any) and connects again, one attempt; returns the server's
    /// status when that attempt has settled.
    pub async fn reconnect(&self, name: &str) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let server = inner
            .server(name)
            .ok_or_else(|| inner.unknown_server(name))?;
        inner.stop(&server, Some(State::Pending)).await;
        inner.emit_state(&server);
        inner.start(&server, Mode::Once);
        inner
            .until(|| server.st.lock().state != State::Pending)
            .await;
        let status = server.status(&inner.pool.read());
        Ok(status)
    }

    /// Disables (closes, tools out of the pool) or enables (connects) a server.
    pub async fn set_enabled(&self, name: &str, on: bool) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let server = inner
            .server(name)
            .ok_or_else(|| inner.unknown_server(name))?;
        let state = server.st.lock().state;
        if on && state == State::Disabled {
            inner.stop(&server, Some(State::Pending)).await;
            inner.emit_state(&server);
            inner.start(&server, Mode::Once);
        } else if !on && state != State::Disabled {
            inner.stop(&server, Some(State::Disabled)).await;
            inner.emit_state(&server);
        }
        let status = server.status(&inner.pool.read());
        Ok(status)
    }

    /// Closes every connection (their processes are gone when this returns); the last event
    /// is `{"type": "closed"}`.
    pub async fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = inner.shutdown.send(true);
        inner.changed.notify_waiters();
        let servers: Vec<Arc<Server>> = inner.servers.lock().clone();
        let stops = servers.iter().map(|s| inner.stop(s, None));
        futures_util::future::join_all(stops).await;
        // Started calls end with their connections; their completions come before `closed`.
        for signal in inner.started.lock().values() {
            signal.fire();
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !inner.started.lock().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let closed = ManagerEvent::Closed {
            reason: "the manager was closed by the host".into(),
        };
        inner.events.close_with(Some(closed.to_text()));
    }

    /// Stops event waiters at once (a handle about to be freed).
    pub fn abandon_events(&self) {
        self.inner.events.abandon();
    }
}

impl Server {
    fn new(name: String, entry: Value, options: &ManagerOptions) -> Server {
        let mut spec_entry = entry.clone();
        let disabled_in_entry = spec_entry
            .as_object_mut()
            .and_then(|o| o.remove("disabled"))
            .is_some_and(|d| d == Value::Bool(true));
        if let Some(o) = spec_entry.as_object_mut() {
            o.insert("name".into(), json!(name));
        }
        let mut sdk_tools = Vec::new();
        let kind = crate::config::Kind::of(&entry);
        let spec = if kind == Some(crate::config::Kind::Sdk) {
            sdk::parse_tools(spec_entry.get("tools"), &name).map(|tools| {
                sdk_tools = tools;
                Spec::Sdk
            })
        } else {
            ServerSpec::parse(&spec_entry).map(Spec::Client)
        };
        let remote = kind.is_some_and(crate::config::Kind::is_remote);
        let (state, error) = match &spec {
            _ if disabled_in_entry || options.disabled.contains(&name) => (State::Disabled, None),
            Err(e) => (State::Failed, Some(e.clone())),
            Ok(_) => (State::Pending, None),
        };
        Server {
            name,
            entry,
            remote,
            spec,
            sdk_tools: Mutex::new(sdk_tools),
            st: Mutex::new(ServerState {
                state,
                error,
                client: None,
                info: None,
                tools: Arc::default(),
                attempt: 0,
                gen: 0,
                task: None,
                authorizing: None,
            }),
            errors: AtomicU32::new(0),
            forwarding: Mutex::new(()),
            auth_gate: tokio::sync::Mutex::new(()),
            relists: Default::default(),
        }
    }

    fn is_sdk(&self) -> bool {
        matches!(self.spec, Ok(Spec::Sdk))
    }

    /// Its transport's own name (`http` for an entry of type `streamable-http`); an unknown
    /// `type` as the entry has it (the server failed with an error naming it).
    fn kind(&self) -> &str {
        match crate::config::Kind::of(&self.entry) {
            Some(k) => k.as_str(),
            None => self.entry["type"].as_str().unwrap_or("unknown"),
        }
    }

    fn status(&self, pool: &Pool) -> Value {
        let st = self.st.lock();
        let mut v = json!({
            "state": st.state.as_str(),
            "transport": self.kind(),
            "tools": pool.tools.iter().filter(|t| t.server == self.name).map(|t| json!(t.name)).collect::<Vec<_>>(),
        });
        if let Some(e) = &st.error {
            v["error"] = e.to_json()["error"].clone();
            if st.state == State::NeedsAuth {
                v["auth"] = e.data.clone().unwrap_or_else(|| json!({}));
            }
        }
        if let Some(request) = st
            .authorizing
            .as_ref()
            .and_then(|a| a.request.borrow().clone())
        {
            v["authorization"] = request;
        }
        if st.attempt > 0 {
            v["attempt"] = json!(st.attempt);
        }
        if let Some(info) = &st.info {
            for k in ["server_info", "protocol_version", "era", "instructions"] {
                if let Some(x) = info.get(k).filter(|x| !x.is_null()) {
                    v[k] = x.clone();
                }
            }
        }
        v
    }
}

impl Routes {
    /// A new manager-wide event id.
    fn next_id(&mut self) -> String {
        self.next += 1;
        format!("m{}", self.next)
    }

    fn forget(&mut self, server: &str, gen: u64, inner: &str) {
        if let Some(id) = self
            .by_inner
            .remove(&(server.to_string(), gen, inner.to_string()))
        {
            self.by_id.remove(&id);
        }
    }

    fn forget_server(&mut self, server: &str) {
        self.by_inner.retain(|k, _| k.0 != server);
        self.by_id.retain(|_, v| v.0 != server);
    }
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::closed("the manager is closed"));
        }
        Ok(())
    }

    fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.servers.lock().iter().find(|s| s.name == name).cloned()
    }

    /// Forwards the events already waiting in one connection's queue (as the pump would).
    fn drain_events(self: &Arc<Self>, server: &Arc<Server>, client: &Client, gen: u64) {
        loop {
            let _order = server.forwarding.lock();
            match client.next_item() {
                PulledItem::Item(item) => {
                    if let Some(end) = self.forward(server, gen, item) {
                        // The connection's end: the pump will not see it now.
                        drop(_order);
                        self.lost(server, gen, end);
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// One connected server's connection, for a request to it.
    fn target(&self, name: &str) -> Result<catalog::Target> {
        self.check_open()?;
        let server = self.server(name).ok_or_else(|| self.unknown_server(name))?;
        if server.is_sdk() {
            return Err(Error::invalid(format!(
                "server {name:?} is in-process (\"type\": \"sdk\"): the host serves its tools, nothing else"
            )));
        }
        let st = server.st.lock();
        match &st.client {
            Some(c) if st.state == State::Connected => Ok(catalog::Target {
                server: server.name.clone(),
                client: c.clone(),
            }),
            _ => Err(Error::closed(format!(
                "server {name:?} is {}",
                st.state.as_str()
            ))),
        }
    }

    /// The connected servers (or the one named) whose capabilities include `capability`.
    fn targets(&self, only: Option<&str>, capability: &str) -> Result<Vec<catalog::Target>> {
        self.check_open()?;
        if let Some(name) = only {
            return Ok(vec![self.target(name)?]);
        }
        Ok(self
            .servers
            .lock()
            .iter()
            .filter_map(|s| {
                let st = s.st.lock();
                let has = st
                    .info
                    .as_ref()
                    .and_then(|i| i.get("capabilities"))
                    .and_then(|c| c.get(capability))
                    .is_some_and(|v| !v.is_null());
                match &st.client {
                    Some(c) if st.state == State::Connected && has => Some(catalog::Target {
                        server: s.name.clone(),
                        client: c.clone(),
                    }),
                    _ => None,
                }
            })
            .collect())
    }

    fn unknown_server(&self, name: &str) -> Error {
        Error::new(
            ErrorKind::NotFound,
            format!("no server named {name:?} in the manager"),
        )
    }

    /// Why `pool_name` is not in `pool`: a collision ([`pool::settle`]) names the servers;
    /// otherwise as [`Inner::unknown_tool`].
    fn no_tool(&self, pool: &Pool, pool_name: &str) -> Error {
        pool::collided(pool_name, &pool.collision(pool_name))
            .unwrap_or_else(|| self.unknown_tool(pool_name))
    }

    fn unknown_tool(&self, pool_name: &str) -> Error {
        // Say why, when the name belongs to a server that is not connected.
        for s in self.servers.lock().iter() {
            let prefix = format!("mcp__{}__", pool::normalize(&s.name));
            if pool_name.starts_with(&prefix) {
                let st = s.st.lock();
                if st.state != State::Connected {
                    let hint = if st.state == State::NeedsAuth {
                        format!(" (call {prefix}authenticate, or the host's authenticate, to authorize it)")
                    } else {
                        String::new()
                    };
                    return Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "no tool {pool_name:?} in the pool: server {:?} is {}{hint}",
                            s.name,
                            st.state.as_str()
                        ),
                    );
                }
            }
        }
        Error::new(
            ErrorKind::NotFound,
            format!("no tool {pool_name:?} in the pool"),
        )
    }

    /// A connection's event, made a value with the server's name (see `lifecycle::forward`).
    fn push(&self, event: Value, droppable: bool) {
        if !self.tapped(&event) {
            self.events.push(&event, droppable);
        }
    }

    /// Whether a tap took `event` (each sees it until one takes it).
    fn tapped(&self, event: &Value) -> bool {
        let taps = self.taps.read();
        taps.iter().any(|(_, tap)| tap(event))
    }

    /// An event of the manager's own.
    fn emit(&self, event: ManagerEvent) {
        if !self.taps.read().is_empty() {
            if let Ok(value) = serde_json::to_value(&event) {
                if self.tapped(&value) {
                    return;
                }
            }
        }
        match event.latest_key() {
            Some(key) => self
                .events
                .push_latest(event.to_text(), event.droppable(), &key),
            None => self.events.push_text(event.to_text(), event.droppable()),
        }
    }

    fn emit_state(&self, server: &Server) {
        let status = match server.status(&self.pool.read()) {
            Value::Object(status) => status,
            _ => Default::default(),
        };
        self.emit(ManagerEvent::State {
            server: server.name.clone(),
            status,
        });
        self.changed.notify_waiters();
    }

    /// Builds the pool from the servers' states now. Rebuilds are serialized under the pool's
    /// write lock (lock order: pool, servers, a server's state), so one computed from older
    /// states can never overwrite one computed from newer states (two servers connecting at
    /// once could leave the pool without the tools of the one that finished second).
    fn rebuild_pool(&self) {
        let mut pool = self.pool.write();
        self.rebuild_into(&mut pool);
    }

    /// Changes one server's state and rebuilds the pool, both under the pool's write lock: a
    /// reader holding the read lock (`status`) never sees a server `connected` whose tools are
    /// not yet in the pool, nor a server that left `connected` whose tools still are.
    fn change<R>(&self, server: &Server, f: impl FnOnce(&mut ServerState) -> R) -> R {
        let mut pool = self.pool.write();
        let r = f(&mut server.st.lock());
        self.rebuild_into(&mut pool);
        r
    }

    fn rebuild_into(&self, pool: &mut Arc<Pool>) {
        let mut any_resources = false;
        let mut servers: Vec<(String, Source, Arc<Vec<pool::Listed>>)> = self
            .servers
            .lock()
            .iter()
            .filter_map(|s| {
                let st = s.st.lock();
                any_resources |= st.state == State::Connected
                    && st
                        .info
                        .as_ref()
                        .and_then(|i| i.get("capabilities")?.get("resources"))
                        .is_some();
                match st.state {
                    State::Connected if s.is_sdk() => {
                        Some((s.name.clone(), Source::Host, st.tools.clone()))
                    }
                    State::Connected => Some((s.name.clone(), Source::Server, st.tools.clone())),
                    State::NeedsAuth => Some((
                        s.name.clone(),
                        Source::Auth,
                        Arc::new(pool::authenticate_tools(&s.name)),
                    )),
                    _ => None,
                }
            })
            .collect();
        if self.options.resource_tools && any_resources {
            // Named as Claude Code names them, outside every server's prefix.
            servers.push((String::new(), Source::Resources, pool::resource_tools()));
        }
        if let Some(rebuilt) = pool.rebuild(&servers, &self.limits) {
            *pool = Arc::new(rebuilt);
        }
    }

    /// A result as the host gets it (see `hygiene.rs`): `shape` says where its items are,
    /// `label` names a file an output over its limit is kept in. One that must be cleaned but
    /// cannot be read is a `protocol` error, never a `null`.
    fn clean(&self, result: RawJson, shape: hygiene::Shape, label: &str) -> Result<RawJson> {
        let text = result.as_str();
        let o = &self.options;
        // Byte length bounds character count and base64 bytes; an escaped character may be a
        // dangerous one.
        let bound = o
            .max_output_chars
            .unwrap_or(usize::MAX)
            .min(o.max_media_bytes.unwrap_or(usize::MAX));
        let risky =
            text.len() > bound || text.contains("\\u") || text.chars().any(hygiene::is_dangerous);
        if !risky {
            return Ok(result);
        }
        let mut v = result.value()?;
        let limits = hygiene::Limits {
            max_chars: o.max_output_chars,
            max_media_bytes: o.max_media_bytes,
            keep: o.keeper.as_deref(),
            label,
        };
        hygiene::clean_output(&mut v, shape, &limits);
        Ok(RawJson::from_value(&v))
    }

    fn cancel_tag(&self, server: &str, gen: u64) -> String {
        format!("\u{1}mcplug-manager/{}/{server}/{gen}", self.id)
    }
}

#[cfg(test)]
mod tests;
