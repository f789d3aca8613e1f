//! One server's connection over its life: connecting (in its concurrency slot), listing its
//! first tools, settling as connected, failed or needs-auth, forwarding its events into the
//! manager's queue, noticing it was lost and reconnecting with backoff, re-listing on
//! `list_changed`, and stopping. Each connection is one generation of its server; what a task
//! learns about an older generation is dropped.

use super::event::ManagerEvent;
use super::hygiene;
use super::pool::Listed;
use super::{state_for, HostCall, Inner, Mode, Server, Spec, State};
use crate::client::options::{CallOptions, ConnectOptions};
use crate::client::{cancel, Client, Event};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use crate::queue::{Item, PulledItem};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

impl Inner {
    /// Ends the server's current connection or connect task (waiting for its process to be
    /// gone) and moves it to `to` (`None`: leaves the state as it is, for removal and close).
    pub(super) async fn stop(&self, server: &Arc<Server>, to: Option<State>) {
        let (client, task) = self.change(server, |st| {
            st.gen += 1;
            st.authorizing = None;
            if let Some(to) = to {
                st.state = to;
                st.error = None;
                st.attempt = 0;
                st.info = None;
                st.tools = Arc::default();
            }
            (st.client.take(), st.task.take())
        });
        self.routes.lock().forget_server(&server.name);
        self.end_host_calls(Some(&server.name));
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
    pub(super) fn start(self: &Arc<Self>, server: &Arc<Server>, mode: Mode) {
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
    pub(super) async fn until(&self, done: impl Fn() -> bool) {
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

    pub(super) fn current(&self, server: &Server, gen: u64) -> bool {
        server.st.lock().gen == gen && !self.closed.load(Ordering::SeqCst)
    }

    pub(super) async fn run_connect(
        self: Arc<Self>,
        server: Arc<Server>,
        gen: u64,
        mode: Mode,
        tag: String,
    ) {
        let spec = match &server.spec {
            Ok(Spec::Client(s)) => s.clone(),
            Ok(Spec::Sdk) => {
                self.settle_sdk(&server, gen);
                return;
            }
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
            let mut options = match ConnectOptions::parse(self.options.connection.as_ref()) {
                Ok(o) => o,
                Err(e) => {
                    self.settle_failed(&server, gen, e);
                    return;
                }
            };
            // The manager never starts an authorization on its own (as Claude Code: the user
            // asks); a stored token is still used and refreshed.
            options.apply_entry(&server.entry);
            // Its events come to `pump` as values.
            options.engine_consumer = true;
            options.auth.interactive = mode == Mode::Authorize;
            options.auth.hook = None;
            if mode == Mode::Authorize {
                let authorizing = server.st.lock().authorizing.clone();
                if let Some(a) = authorizing {
                    options.auth.hook = Some(self.authorize_hook(&server, a));
                }
            }
            let outcome = Client::connect(&spec, options, Some(&tag)).await;
            drop(permit);
            let outcome = match outcome {
                Ok((client, info)) => self.list_first_tools(client, info).await,
                Err(e) => Err(e),
            };
            match outcome {
                Ok((client, mut info, tools)) => {
                    let client = Arc::new(client);
                    // The server's instructions reach a model: cleaned and capped as a
                    // description is (Claude Code caps them at the same 2,048 characters).
                    if let Some(Value::String(text)) = info.get_mut("instructions") {
                        let clean = hygiene::clean(text);
                        *text = hygiene::cap_description(&clean, self.options.max_description).0;
                    }
                    let stale = self.change(&server, |st| {
                        let stale = st.gen != gen || self.closed.load(Ordering::SeqCst);
                        if !stale {
                            st.state = State::Connected;
                            st.error = None;
                            st.attempt = 0;
                            st.authorizing = None;
                            st.info = Some(info);
                            st.tools = Arc::new(tools);
                            st.client = Some(client.clone());
                        }
                        stale
                    });
                    if stale {
                        client.close().await;
                        return;
                    }
                    server.errors.store(0, Ordering::Relaxed);
                    crate::runtime::spawn(pump(Arc::downgrade(&self), server.clone(), client, gen));
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
    pub(super) async fn list_first_tools(
        &self,
        client: Client,
        info: Value,
    ) -> Result<(Client, Value, Vec<Listed>)> {
        let has_tools = info
            .get("capabilities")
            .and_then(|c| c.get("tools"))
            .is_some_and(|t| !t.is_null());
        if !has_tools {
            return Ok((client, info, Vec::new()));
        }
        match client
            .list_tools(&CallOptions::default())
            .await
            .and_then(tools_of)
        {
            Ok(tools) => Ok((client, info, tools)),
            Err(e) => {
                client.close().await;
                Err(Error::new(
                    e.kind,
                    format!("connected, but tools/list failed: {}", e.message),
                ))
            }
        }
    }

    /// An in-process server is up as soon as it is started: its tools are the host's.
    pub(super) fn settle_sdk(&self, server: &Server, gen: u64) {
        let settled = self.change(server, |st| {
            if st.gen != gen || self.closed.load(Ordering::SeqCst) {
                return false;
            }
            st.state = State::Connected;
            st.error = None;
            st.attempt = 0;
            st.info = Some(json!({"server_info": {"name": server.name}, "era": "in-process"}));
            st.tools = Arc::new(super::pool::listed(&server.sdk_tools.lock()));
            true
        });
        if settled {
            self.emit_state(server);
        }
    }

    /// A call of an in-process server's tool: a request event for the host, answered with
    /// `respond`; the call's timeout and tag apply, and a call that ends without the answer
    /// tells the host with `request_cancelled`.
    pub(super) async fn host_call(
        &self,
        server: &Server,
        tool: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<Value> {
        {
            let st = server.st.lock();
            if st.state != State::Connected {
                return Err(Error::closed(format!(
                    "server {:?} is {}",
                    server.name,
                    st.state.as_str()
                )));
            }
        }
        let arguments: Value = match arguments {
            Some(raw) => serde_json::from_str(raw.get())
                .map_err(|e| Error::invalid(format!("`arguments_json` is not JSON: {e}")))?,
            None => json!({}),
        };
        let id = self.routes.lock().next_id();
        let (tx, rx) = oneshot::channel();
        self.host_calls.lock().insert(
            id.clone(),
            HostCall {
                server: server.name.clone(),
                answer: tx,
            },
        );
        self.emit(ManagerEvent::Request {
            server: server.name.clone(),
            id: id.clone(),
            method: "tools/call",
            params: json!({"name": tool, "arguments": arguments}),
        });
        let default_timeout = ConnectOptions::parse(self.options.connection.as_ref())
            .ok()
            .and_then(|o| o.tool_timeout);
        let limit = options.timeout.or(default_timeout);
        let cancels = cancel::Cancels {
            tag: options.tag.as_deref().map(cancel::register),
            own: options.own_cancel.as_ref().map(|o| o.0.clone()),
        };
        let cancelled = cancels.fired();
        let expired = async {
            match limit {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err(Error::closed(format!(
                "server {:?} was closed before the host answered the call", server.name)))),
            _ = cancelled => Err(Error::new(ErrorKind::Cancelled, format!(
                "the call of {tool:?} (in-process server {:?}) was cancelled", server.name))),
            _ = expired => Err(Error::timeout(format!(
                "the host did not answer the call of {tool:?} (in-process server {:?}) within {} ms",
                server.name, limit.unwrap_or_default().as_millis()))),
        };
        if self.host_calls.lock().remove(&id).is_some() {
            self.emit(ManagerEvent::RequestCancelled {
                server: server.name.clone(),
                id,
            });
        }
        outcome
    }

    /// Ends the host calls of one server (`None`: of all) with `closed`.
    pub(super) fn end_host_calls(&self, server: Option<&str>) {
        let ended: Vec<(String, HostCall)> = {
            let mut calls = self.host_calls.lock();
            let ids: Vec<String> = calls
                .iter()
                .filter(|(_, c)| server.is_none_or(|s| s == c.server))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| calls.remove(&id).map(|c| (id, c)))
                .collect()
        };
        for (id, call) in ended {
            let _ = call.answer.send(Err(Error::closed(format!(
                "server {:?} was closed before the host answered the call",
                call.server
            ))));
            self.emit(ManagerEvent::RequestCancelled {
                server: call.server,
                id,
            });
        }
    }

    pub(super) fn settle_failed(&self, server: &Server, gen: u64, e: Error) {
        let settled = self.change(server, |st| {
            if st.gen != gen {
                return false;
            }
            st.state = state_for(&e);
            st.error = Some(e);
            st.attempt = 0;
            st.authorizing = None;
            st.client = None;
            st.tools = Arc::default();
            true
        });
        if settled {
            self.emit_state(server);
        }
    }

    /// The connection of generation `gen` is lost (its process exited, or too many terminal
    /// errors): its tools leave the pool, the state is `failed` with why, and a reconnect
    /// series starts.
    pub(super) fn lost(self: &Arc<Self>, server: &Arc<Server>, gen: u64, why: Error) {
        let Some(client) = self.leave_connected(server, gen, State::Failed, why) else {
            return;
        };
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

    /// Moves the server of generation `gen`, if it is still that one and connected, to `state`
    /// with `why` (its tools out of the pool, its routes forgotten, the state event sent);
    /// `None` when it was not, else the client it had (to close).
    fn leave_connected(
        self: &Arc<Self>,
        server: &Arc<Server>,
        gen: u64,
        state: State,
        why: Error,
    ) -> Option<Option<Arc<Client>>> {
        let client = self.change(server, |st| {
            if st.gen != gen || st.state != State::Connected || self.closed.load(Ordering::SeqCst) {
                return None;
            }
            st.gen += 1;
            st.state = state;
            st.error = Some(why);
            st.tools = Arc::default();
            Some(st.client.take())
        })?;
        self.routes.lock().forget_server(&server.name);
        self.emit_state(server);
        Some(client)
    }

    /// The connected server of generation `gen` refused a call for want of authorization (a
    /// 401 after connect: its token revoked, a refresh refused): it goes `needs-auth` as at
    /// connect — its tools replaced by the `authenticate` pseudo-tool, `auth` in its state
    /// event — and is not reconnected until the host or the model authenticates.
    pub(super) fn lost_authorization(self: &Arc<Self>, server: &Arc<Server>, gen: u64, why: Error) {
        let Some(client) = self.leave_connected(server, gen, State::NeedsAuth, why) else {
            return;
        };
        crate::runtime::spawn(async move {
            if let Some(c) = client {
                c.close().await;
            }
        });
    }

    /// A server's event, on its way to the host, with the server's name; a request's id is
    /// replaced by the manager's own (the host answers the manager). The connection's end comes
    /// back as its error.
    pub(super) fn forward(
        self: &Arc<Self>,
        server: &Arc<Server>,
        gen: u64,
        item: Item<Event>,
    ) -> Option<Error> {
        let mut event = match item {
            Item::Event(event) => event,
            // Text queued as it is (a started call's completion): passed on as it came.
            Item::Text(text) => {
                if let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(&text) {
                    let droppable = event.get("type") != Some(&json!("completion"));
                    event.insert("server".into(), json!(server.name));
                    self.push(Value::Object(event), droppable);
                }
                return None;
            }
        };
        let droppable = event.droppable();
        match &mut event {
            Event::Closed { reason, kind } => {
                return Some(Error::new(
                    kind.unwrap_or(ErrorKind::Closed),
                    std::mem::take(reason),
                ));
            }
            Event::Request { id, .. } => {
                let inner_id = std::mem::take(id);
                let mut r = self.routes.lock();
                *id = r.next_id();
                r.by_id
                    .insert(id.clone(), (server.name.clone(), gen, inner_id.clone()));
                r.by_inner
                    .insert((server.name.clone(), gen, inner_id), id.clone());
            }
            Event::RequestExpired { id, .. } | Event::RequestCancelled { id, .. } => {
                let mut r = self.routes.lock();
                if let Some(outer) = r.by_inner.remove(&(server.name.clone(), gen, id.clone())) {
                    r.by_id.remove(&outer);
                    *id = outer;
                }
            }
            // A tools list change, or a 2026-07-28 listen stream opened again after it ended
            // (changes in between may have been missed).
            Event::Notification { method, .. } if method == "notifications/tools/list_changed" => {
                self.want_relist(server, gen);
            }
            Event::Listening { reopened: true, .. } => self.want_relist(server, gen),
            Event::Notification { method, .. } => {
                let changed = match method.as_str() {
                    "notifications/resources/list_changed" => Some(Changed::Resources),
                    "notifications/prompts/list_changed" => Some(Changed::Prompts),
                    _ => None,
                };
                if let Some(changed) = changed {
                    // After the notification itself, so a host sees the cause first.
                    self.push(with_server(event, &server.name), true);
                    let server = server.name.clone();
                    self.emit(match changed {
                        Changed::Resources => ManagerEvent::ResourcesChanged { server },
                        Changed::Prompts => ManagerEvent::PromptsChanged { server },
                    });
                    return None;
                }
            }
            _ => {}
        }
        self.push(with_server(event, &server.name), droppable);
        None
    }

    /// The server's tools are to be listed again (`list_changed`, a listen stream opened again):
    /// coalesced, one re-list in flight per server and at most one queued after it (see
    /// `relists.rs`), so a storm of notifications costs a few lists, not one each.
    fn want_relist(self: &Arc<Self>, server: &Arc<Server>, gen: u64) {
        if !server.relists.want(gen) {
            return;
        }
        let me = self.clone();
        let server = server.clone();
        crate::runtime::spawn(async move {
            let mut turn = super::relists::Running::new(&server.relists);
            let mut gen = gen;
            loop {
                me.clone().relist(server.clone(), gen).await;
                match turn.next() {
                    Some(next) => gen = next,
                    None => break,
                }
            }
        });
    }

    /// `notifications/tools/list_changed`: the server's tools again, and the new pool.
    pub(super) async fn relist(self: Arc<Self>, server: Arc<Server>, gen: u64) {
        let client = {
            let st = server.st.lock();
            if st.gen != gen {
                return;
            }
            st.client.clone()
        };
        let Some(client) = client else { return };
        let listed = client.list_tools(&CallOptions::default()).await;
        let tools = match listed.and_then(tools_of) {
            Ok(tools) => tools,
            Err(e) => {
                self.emit(ManagerEvent::Warning {
                    server: server.name.clone(),
                    reason: "relist_failed",
                    message: format!("tools/list after list_changed failed: {}", e.message),
                });
                return;
            }
        };
        let relisted = self.change(&server, |st| {
            if st.gen != gen || st.state != State::Connected {
                return false;
            }
            st.tools = Arc::new(tools);
            true
        });
        if !relisted {
            return;
        }
        let pool = self.pool.read().clone();
        let mine: Vec<Value> = pool
            .tools
            .iter()
            .filter(|t| t.server == server.name)
            .map(|t| json!(t.name))
            .collect();
        self.emit(ManagerEvent::ToolsChanged {
            server: server.name.clone(),
            tools: mine,
            pool: pool.names(),
        });
    }
}

/// Which list a `*_changed` event is about.
enum Changed {
    Resources,
    Prompts,
}

/// A connection's event as the manager's host reads it: with the server's name.
fn with_server(event: Event, server: &str) -> Value {
    let mut object = event.into_object();
    object.insert("server".into(), json!(server));
    Value::Object(object)
}

/// The tools of a `tools/list` result, each kept as the text the server sent (see
/// `pool::Listed`); no `tools` array: none.
pub(super) fn tools_of(list: RawJson) -> Result<Vec<Listed>> {
    #[derive(serde::Deserialize)]
    struct Listing {
        tools: Option<Box<RawValue>>,
    }
    let result: Listing = serde_json::from_str(list.as_str()).map_err(|e| {
        Error::protocol(format!(
            "the server's tools/list result could not be read: {e}"
        ))
    })?;
    Ok(result
        .tools
        .and_then(|tools| serde_json::from_str::<Vec<Listed>>(tools.get()).ok())
        .unwrap_or_default())
}

/// Moves one connection's events into the manager's queue until the connection ends; an end
/// the manager did not ask for is a lost connection.
pub(super) async fn pump(inner: Weak<Inner>, server: Arc<Server>, client: Arc<Client>, gen: u64) {
    let mut end: Option<Error> = None;
    'outer: loop {
        loop {
            let Some(inner) = inner.upgrade() else { return };
            let _order = server.forwarding.lock();
            match client.next_item() {
                PulledItem::Item(item) => {
                    if let Some(e) = inner.forward(&server, gen, item) {
                        end = Some(e);
                    }
                }
                PulledItem::Empty => break,
                PulledItem::Closed => break 'outer,
            }
        }
        client.events_changed().await;
    }
    let Some(inner) = inner.upgrade() else { return };
    let why = end.unwrap_or_else(|| Error::closed("the connection closed"));
    inner.lost(&server, gen, why);
}
