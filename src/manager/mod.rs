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

pub mod hygiene;
pub mod options;
pub mod pool;

use crate::client::events::{EventQueue, Pulled};
use crate::client::options::{CallOptions, ConnectOptions, ServerSpec};
use crate::client::{cancel, Client};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use options::ManagerOptions;
use parking_lot::{Mutex, RwLock};
use pool::{Pool, PoolLimits};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::{watch, Semaphore};

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
    /// Notified on every state change (after its event is queued).
    changed: tokio::sync::Notify,
    /// Tells this manager's cancel tags apart from every other's.
    id: u64,
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

struct Server {
    name: String,
    entry: Value,
    remote: bool,
    spec: std::result::Result<ServerSpec, Error>,
    st: Mutex<ServerState>,
    /// Consecutive terminal errors of calls on the current connection.
    errors: AtomicU32,
}

struct ServerState {
    state: State,
    error: Option<Error>,
    client: Option<Arc<Client>>,
    info: Option<Value>,
    tools: Vec<Value>,
    /// The reconnect attempt under way (0: none).
    attempt: u32,
    /// Bumped by every connect attempt series and every deliberate close.
    gen: u64,
    /// The task connecting this server now, and its cancel tag.
    task: Option<(String, tokio::task::JoinHandle<()>)>,
}

/// Errors that mean the connection itself is broken (M5), as opposed to a tool failing.
fn is_terminal(e: &Error) -> bool {
    matches!(e.kind, ErrorKind::Transport | ErrorKind::Closed)
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
}

impl Manager {
    pub fn new(options: ManagerOptions) -> Manager {
        let limits = PoolLimits {
            max_description: options.max_description,
        };
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
                changed: tokio::sync::Notify::new(),
                id: NEXT_MANAGER.fetch_add(1, Ordering::Relaxed),
            }),
        }
    }

    /// Takes a configuration (see `options::entries`) and starts every server in it; returns at
    /// once with the status. A server already known with the same entry is left as it is; one
    /// whose entry changed is reconnected; one no longer in the configuration is closed and
    /// removed (event `{"type": "removed", "server"}`).
    pub async fn connect(&self, config: &Value) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let entries = options::entries(config)?;
        let mut start = Vec::new();
        let mut gone = Vec::new();
        {
            let mut servers = inner.servers.lock();
            let mut next: Vec<Arc<Server>> = Vec::with_capacity(entries.len());
            for (name, entry) in entries {
                if let Some(old) = servers.iter().find(|s| s.name == name) {
                    if old.entry == entry {
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
        for old in gone {
            let still = inner.servers.lock().iter().any(|s| s.name == old.name);
            inner.stop(&old, None).await;
            if !still {
                inner.push(json!({"type": "removed", "server": old.name}), true);
            }
        }
        for server in start {
            let initial = server.st.lock().state;
            inner.emit_state(&server);
            if initial == State::Pending {
                inner.start(&server, Mode::Once);
            }
        }
        inner.rebuild_pool();
        Ok(self.status())
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
        let pool = self.inner.pool.read().clone();
        let mut out = Map::new();
        for s in self.inner.servers.lock().iter() {
            out.insert(s.name.clone(), s.status(&pool));
        }
        json!({ "servers": out, "tools": pool.tools.len() })
    }

    /// The pool: `{"tools": [...], "dropped": [...]}` (optionally one server's tools only).
    pub fn list_tools(&self, server: Option<&str>) -> Value {
        let pool = self.inner.pool.read().clone();
        let tools: Vec<&Value> = pool
            .tools
            .iter()
            .filter(|t| server.is_none_or(|s| s == t.server))
            .map(|t| &t.entry)
            .collect();
        json!({ "tools": tools, "dropped": pool.dropped })
    }

    /// Routes a call by its pool name; the result is cleaned and capped (`hygiene.rs`).
    pub async fn call_tool(
        &self,
        pool_name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let inner = &self.inner;
        inner.check_open()?;
        let (server_name, tool) = {
            let pool = inner.pool.read();
            match pool.get(pool_name) {
                Some(t) => (t.server.clone(), t.tool.clone()),
                None => return Err(inner.unknown_tool(pool_name)),
            }
        };
        let server = inner
            .server(&server_name)
            .ok_or_else(|| inner.unknown_tool(pool_name))?;
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
        match client.call_tool(&tool, arguments, options).await {
            Ok(result) => {
                server.errors.store(0, Ordering::Relaxed);
                Ok(inner.clean(result))
            }
            Err(e) => {
                if is_terminal(&e) {
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
        inner.rebuild_pool();
        inner.start(&server, Mode::Once);
        inner
            .until(|| server.st.lock().state != State::Pending)
            .await;
        let pool = inner.pool.read().clone();
        Ok(server.status(&pool))
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
            inner.rebuild_pool();
        }
        let pool = inner.pool.read().clone();
        Ok(server.status(&pool))
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
        inner.events.close_with(Some(
            &json!({"type": "closed", "reason": "the manager was closed by the host"}),
        ));
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
        let spec = ServerSpec::parse(&spec_entry);
        let remote = matches!(
            entry.get("type").and_then(Value::as_str),
            Some("http" | "streamable-http" | "sse" | "sse-ide" | "ws" | "ws-ide")
        );
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
            st: Mutex::new(ServerState {
                state,
                error,
                client: None,
                info: None,
                tools: Vec::new(),
                attempt: 0,
                gen: 0,
                task: None,
            }),
            errors: AtomicU32::new(0),
        }
    }

    fn kind(&self) -> &str {
        self.entry
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("stdio")
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
        }
        if st.attempt > 0 {
            v["attempt"] = json!(st.attempt);
        }
        if let Some(info) = &st.info {
            for k in ["server_info", "protocol_version", "era"] {
                if let Some(x) = info.get(k) {
                    v[k] = x.clone();
                }
            }
        }
        v
    }
}

impl Routes {
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

    fn unknown_server(&self, name: &str) -> Error {
        Error::new(
            ErrorKind::NotFound,
            format!("no server named {name:?} in the manager"),
        )
    }

    fn unknown_tool(&self, pool_name: &str) -> Error {
        // Say why, when the name belongs to a server that is not connected.
        for s in self.servers.lock().iter() {
            let prefix = format!("mcp__{}__", pool::normalize(&s.name));
            if pool_name.starts_with(&prefix) {
                let st = s.st.lock();
                if st.state != State::Connected {
                    return Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "no tool {pool_name:?} in the pool: server {:?} is {}",
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

    fn push(&self, event: Value, droppable: bool) {
        self.events.push(&event, droppable);
    }

    fn emit_state(&self, server: &Server) {
        let pool = self.pool.read().clone();
        let mut event = json!({"type": "state", "server": server.name});
        if let Value::Object(status) = server.status(&pool) {
            for (k, v) in status {
                event[k] = v;
            }
        }
        self.push(event, false);
        self.changed.notify_waiters();
    }

    fn rebuild_pool(&self) {
        let servers: Vec<(String, bool, Vec<Value>)> = self
            .servers
            .lock()
            .iter()
            .filter_map(|s| {
                let st = s.st.lock();
                (st.state == State::Connected).then(|| (s.name.clone(), false, st.tools.clone()))
            })
            .collect();
        *self.pool.write() = Arc::new(Pool::build(&servers, &self.limits));
    }

    fn clean(&self, result: RawJson) -> RawJson {
        let text = result.as_str();
        // Byte length bounds character count; an escaped character may be a dangerous one.
        let risky = text.len() > self.options.max_output_chars.unwrap_or(usize::MAX)
            || text.contains("\\u")
            || text.chars().any(hygiene::is_dangerous);
        if !risky {
            return result;
        }
        let mut v = result.value();
        hygiene::clean_result(&mut v, self.options.max_output_chars);
        RawJson::from_value(&v)
    }

    fn cancel_tag(&self, server: &str, gen: u64) -> String {
        format!("\u{1}mcplug-manager/{}/{server}/{gen}", self.id)
    }

    /// Ends the server's current connection or connect task (waiting for its process to be
    /// gone) and moves it to `to` (`None`: leaves the state as it is, for removal and close).
    async fn stop(&self, server: &Arc<Server>, to: Option<State>) {
        let (client, task) = {
            let mut st = server.st.lock();
            st.gen += 1;
            if let Some(to) = to {
                st.state = to;
                st.error = None;
                st.attempt = 0;
                st.info = None;
                st.tools.clear();
            }
            (st.client.take(), st.task.take())
        };
        self.routes.lock().forget_server(&server.name);
        if let Some(c) = client {
            c.close().await;
        }
        if let Some((tag, handle)) = task {
            // The task sees the new generation at its next step; one inside Client::connect is
            // cancelled by its tag (retried: the tag is registered once the process started).
            let mut handle = handle;
            loop {
                cancel::cancel(&tag);
                match tokio::time::timeout(Duration::from_millis(50), &mut handle).await {
                    Ok(_) => break,
                    Err(_) => continue,
                }
            }
        }
        server.errors.store(0, Ordering::Relaxed);
    }

    /// Starts a connect task for the server's current generation.
    fn start(self: &Arc<Self>, server: &Arc<Server>, mode: Mode) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let mut st = server.st.lock();
        let gen = st.gen;
        let tag = self.cancel_tag(&server.name, gen);
        let me = self.clone();
        let s = server.clone();
        let t = tag.clone();
        let handle = crate::runtime::spawn(async move { me.run_connect(s, gen, mode, t).await });
        st.task = Some((tag, handle));
    }

    /// Waits until `done` holds, re-checking whenever a state changes.
    async fn until(&self, done: impl Fn() -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done() || self.closed.load(Ordering::SeqCst) {
                return;
            }
            changed.await;
        }
    }

    fn current(&self, server: &Server, gen: u64) -> bool {
        server.st.lock().gen == gen && !self.closed.load(Ordering::SeqCst)
    }

    async fn run_connect(self: Arc<Self>, server: Arc<Server>, gen: u64, mode: Mode, tag: String) {
        let spec = match &server.spec {
            Ok(s) => s.clone(),
            Err(e) => {
                self.settle_failed(&server, gen, e.clone());
                return;
            }
        };
        let mut shutdown = self.shutdown.subscribe();
        let mut attempt: u32 = if mode == Mode::Reconnect { 1 } else { 0 };
        loop {
            if attempt > 0 {
                {
                    let mut st = server.st.lock();
                    if st.gen != gen {
                        return;
                    }
                    st.state = State::Pending;
                    st.attempt = attempt;
                }
                self.emit_state(&server);
                let wait = self.options.backoff(attempt);
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.changed() => return,
                }
            }
            if !self.current(&server, gen) {
                return;
            }
            let sem = if server.remote {
                &self.remote
            } else {
                &self.local
            };
            let permit = tokio::select! {
                p = sem.clone().acquire_owned() => p,
                _ = shutdown.changed() => return,
            };
            let Ok(permit) = permit else { return };
            if !self.current(&server, gen) {
                return;
            }
            let options = match ConnectOptions::parse(self.options.connection.as_ref()) {
                Ok(o) => o,
                Err(e) => {
                    self.settle_failed(&server, gen, e);
                    return;
                }
            };
            let outcome = Client::connect(&spec, options, Some(&tag)).await;
            drop(permit);
            let outcome = match outcome {
                Ok((client, info)) => self.list_first_tools(client, info).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok((client, info, tools)) => {
                    let client = Arc::new(client);
                    let stale = {
                        let mut st = server.st.lock();
                        let stale = st.gen != gen || self.closed.load(Ordering::SeqCst);
                        if !stale {
                            st.state = State::Connected;
                            st.error = None;
                            st.attempt = 0;
                            st.info = Some(info);
                            st.tools = tools;
                            st.client = Some(client.clone());
                        }
                        stale
                    };
                    if stale {
                        client.close().await;
                        return;
                    }
                    server.errors.store(0, Ordering::Relaxed);
                    crate::runtime::spawn(pump(Arc::downgrade(&self), server.clone(), client, gen));
                    self.rebuild_pool();
                    self.emit_state(&server);
                    return;
                }
                Err(e) => {
                    if mode == Mode::Reconnect
                        && attempt < self.options.reconnect_attempts
                        && e.kind != ErrorKind::NeedsAuth
                        && e.kind != ErrorKind::Cancelled
                    {
                        {
                            let mut st = server.st.lock();
                            if st.gen != gen {
                                return;
                            }
                            st.error = Some(e);
                        }
                        attempt += 1;
                        continue;
                    }
                    self.settle_failed(&server, gen, e);
                    return;
                }
            }
        }
    }

    /// The first `tools/list` of a new connection (none when the server has no tools).
    async fn list_first_tools(
        &self,
        client: Client,
        info: Value,
    ) -> Result<(Client, Value, Vec<Value>)> {
        let has_tools = info
            .get("capabilities")
            .and_then(|c| c.get("tools"))
            .is_some_and(|t| !t.is_null());
        if !has_tools {
            return Ok((client, info, Vec::new()));
        }
        match client.list_tools(&CallOptions::default()).await {
            Ok(list) => {
                let tools = tools_of(list);
                Ok((client, info, tools))
            }
            Err(e) => {
                client.close().await;
                Err(Error::new(
                    e.kind,
                    format!("connected, but tools/list failed: {}", e.message),
                ))
            }
        }
    }

    fn settle_failed(&self, server: &Server, gen: u64, e: Error) {
        {
            let mut st = server.st.lock();
            if st.gen != gen {
                return;
            }
            st.state = state_for(&e);
            st.error = Some(e);
            st.attempt = 0;
            st.client = None;
            st.tools.clear();
        }
        self.rebuild_pool();
        self.emit_state(server);
    }

    /// The connection of generation `gen` is lost (its process exited, or too many terminal
    /// errors): its tools leave the pool, the state is `failed` with why, and a reconnect
    /// series starts.
    fn lost(self: &Arc<Self>, server: &Arc<Server>, gen: u64, why: Error) {
        let client = {
            let mut st = server.st.lock();
            if st.gen != gen || st.state != State::Connected || self.closed.load(Ordering::SeqCst) {
                return;
            }
            st.gen += 1;
            st.state = State::Failed;
            st.error = Some(why);
            st.tools.clear();
            st.client.take()
        };
        self.routes.lock().forget_server(&server.name);
        self.rebuild_pool();
        self.emit_state(server);
        let me = self.clone();
        let s = server.clone();
        crate::runtime::spawn(async move {
            if let Some(c) = client {
                c.close().await;
            }
            if me.options.reconnect_attempts > 0 {
                me.start(&s, Mode::Reconnect);
            }
        });
    }

    /// A server's event, on its way to the host.
    fn forward(self: &Arc<Self>, server: &Arc<Server>, gen: u64, text: &str) -> Option<Error> {
        let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "closed" => {
                let reason = event
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("the connection closed")
                    .to_string();
                let k = event
                    .get("kind")
                    .and_then(Value::as_str)
                    .and_then(ErrorKind::from_name)
                    .unwrap_or(ErrorKind::Closed);
                return Some(Error::new(k, reason));
            }
            "request" => {
                let inner_id = event
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let id = {
                    let mut r = self.routes.lock();
                    r.next += 1;
                    let id = format!("m{}", r.next);
                    r.by_id
                        .insert(id.clone(), (server.name.clone(), gen, inner_id.clone()));
                    r.by_inner
                        .insert((server.name.clone(), gen, inner_id), id.clone());
                    id
                };
                event.insert("id".into(), json!(id));
            }
            "request_expired" | "request_cancelled" => {
                let inner_id = event
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let mut r = self.routes.lock();
                if let Some(id) = r.by_inner.remove(&(server.name.clone(), gen, inner_id)) {
                    r.by_id.remove(&id);
                    event.insert("id".into(), json!(id));
                }
            }
            // A tools list change, or a 2026-07-28 listen stream opened again after it ended
            // (changes in between may have been missed).
            "notification"
                if event.get("method").and_then(Value::as_str)
                    == Some("notifications/tools/list_changed") =>
            {
                let me = self.clone();
                let s = server.clone();
                crate::runtime::spawn(async move { me.relist(s, gen).await });
            }
            "listening" if event.get("reopened") == Some(&Value::Bool(true)) => {
                let me = self.clone();
                let s = server.clone();
                crate::runtime::spawn(async move { me.relist(s, gen).await });
            }
            _ => {}
        }
        let droppable = !matches!(kind.as_str(), "request" | "completion");
        event.insert("server".into(), json!(server.name));
        self.push(Value::Object(event), droppable);
        None
    }

    /// `notifications/tools/list_changed`: the server's tools again, and the new pool.
    async fn relist(self: Arc<Self>, server: Arc<Server>, gen: u64) {
        let client = {
            let st = server.st.lock();
            if st.gen != gen {
                return;
            }
            st.client.clone()
        };
        let Some(client) = client else { return };
        let listed = client.list_tools(&CallOptions::default()).await;
        let tools = match listed {
            Ok(list) => tools_of(list),
            Err(e) => {
                self.push(
                    json!({"type": "warning", "server": server.name, "reason": "relist_failed",
                           "message": format!("tools/list after list_changed failed: {}", e.message)}),
                    true,
                );
                return;
            }
        };
        {
            let mut st = server.st.lock();
            if st.gen != gen || st.state != State::Connected {
                return;
            }
            st.tools = tools;
        }
        self.rebuild_pool();
        let pool = self.pool.read().clone();
        let mine: Vec<Value> = pool
            .tools
            .iter()
            .filter(|t| t.server == server.name)
            .map(|t| json!(t.name))
            .collect();
        self.push(
            json!({"type": "tools_changed", "server": server.name, "tools": mine, "pool": pool.names()}),
            false,
        );
    }
}

fn tools_of(list: RawJson) -> Vec<Value> {
    match list.value().get_mut("tools").map(Value::take) {
        Some(Value::Array(tools)) => tools,
        _ => Vec::new(),
    }
}

/// Moves one connection's events into the manager's queue until the connection ends; an end
/// the manager did not ask for is a lost connection.
async fn pump(inner: Weak<Inner>, server: Arc<Server>, client: Arc<Client>, gen: u64) {
    let fd = match client.event_fd() {
        // SAFETY: event_fd returns a new descriptor that only this task owns.
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(_) => return,
    };
    // SAFETY: the OwnedFd is moved in and lives exactly as long as the AsyncFd.
    let Ok(ready) = (unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }) else {
        return;
    };
    let mut end: Option<Error> = None;
    'outer: loop {
        let Ok(mut guard) = ready.readable().await else {
            break;
        };
        loop {
            match client.next_event(Some(Duration::ZERO)) {
                Pulled::Event(text) => {
                    let Some(inner) = inner.upgrade() else { return };
                    if let Some(e) = inner.forward(&server, gen, &text) {
                        end = Some(e);
                    }
                }
                Pulled::TimedOut => break,
                Pulled::Closed => break 'outer,
            }
        }
        guard.clear_ready();
    }
    let Some(inner) = inner.upgrade() else { return };
    let why = end.unwrap_or_else(|| Error::closed("the connection closed"));
    inner.lost(&server, gen, why);
}
