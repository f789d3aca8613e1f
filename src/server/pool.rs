//! A manager's pool served as one MCP server (`mcplug serve`): the [`Handler`] that relays each
//! request of a client to the upstream server it names, and the router that takes the
//! manager's events to the clients.
//!
//! What is relayed is passed on as the upstream wrote it: a tool's listing and result, a
//! resource, a prompt — only a name changes (the pool's `mcp__<server>__<tool>`, or none with
//! [`Names::Unprefixed`]). The client's cancel cancels the upstream call; the upstream's
//! progress reaches the client under the client's own token; what an upstream asks while a
//! client's call runs on it (sampling, elicitation, roots) is asked of that client; the
//! upstreams' log messages and `list_changed` reach every client.

use super::session::{Call, ClientEra, Downstream, Handler, Offer, ServerSession};
use crate::client::options::{CallOptions, OwnCancel};
use crate::error::{Error, ErrorKind};
use crate::manager::{pool, Manager};
use crate::protocol::{self, codes, era, RawJson};
use crate::session::cancel::{CancelSignal, Cancels};
use crate::transport::BoxFuture;
use parking_lot::Mutex;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::{mpsc, oneshot};

/// How the pool's tools and prompts are named to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// `mcp__<server>__<tool>`, the pool's own names (the default).
    Prefixed,
    /// The servers' own names; on a collision the first server in configuration order wins.
    Unprefixed,
}

impl Names {
    pub fn parse(text: &str) -> crate::error::Result<Names> {
        match text {
            "prefixed" => Ok(Names::Prefixed),
            "unprefixed" => Ok(Names::Unprefixed),
            other => Err(Error::invalid(format!(
                "`names` must be \"prefixed\" or \"unprefixed\" (got {other:?})"
            ))),
        }
    }
}

/// The pool, served.
pub(crate) struct PoolServer {
    state: Arc<State>,
    /// The tap through which the manager's events reach the router.
    tap: u64,
}

struct State {
    manager: Manager,
    names: Names,
    /// Every client's session, for what goes to all of them.
    sessions: Mutex<Vec<Weak<ServerSession>>>,
    /// Requests being relayed: the upstream server of each, and how to reach the client it
    /// serves (most recent last) — where that upstream's requests go.
    calls: Mutex<Vec<(u64, String, Route)>>,
    /// 2026-07-28 requests waiting for the client's answers (an `InputRequiredResult` went
    /// out), by their `requestState`.
    parked: Mutex<HashMap<String, Waiting>>,
    /// Relayed calls whose client asked for progress, by the tag of the upstream call.
    progress: Mutex<HashMap<String, Downstream>>,
    /// Upstream requests being asked of a client, by the manager's event id: their cancel.
    asking: Mutex<HashMap<String, Arc<CancelSignal>>>,
    next: AtomicU64,
    /// Events the tap passed to the router, and those the router delivered: a relayed call
    /// waits for the second to reach the first before it answers (its upstream's progress goes
    /// out before the answer).
    pushed: AtomicU64,
    routed: tokio::sync::watch::Sender<u64>,
    /// The 2026-07-28 clients' `subscriptions/listen` streams.
    listeners: Mutex<Vec<Listener>>,
    /// The legacy clients' resource subscriptions: who, and which URI.
    subscribed: Mutex<Vec<(Downstream, String)>>,
    /// The tasks upstreams created for clients (the latest `MAX_TASKS_KNOWN`).
    tasks: Mutex<std::collections::VecDeque<KnownTask>>,
    /// Ends the router.
    stop: Arc<CancelSignal>,
}

impl PoolServer {
    /// Serves `manager`'s pool: from now on the events that concern its clients reach them
    /// (the manager's tap), and the host keeps the rest.
    pub(crate) fn new(manager: &Manager, names: Names) -> PoolServer {
        let state = Arc::new(State {
            manager: manager.share(),
            names,
            sessions: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            parked: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            asking: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            pushed: AtomicU64::new(0),
            routed: tokio::sync::watch::channel(0).0,
            listeners: Mutex::new(Vec::new()),
            subscribed: Mutex::new(Vec::new()),
            tasks: Mutex::new(std::collections::VecDeque::new()),
            stop: CancelSignal::new(),
        });
        let (events, queued) = mpsc::unbounded_channel();
        let weak = Arc::downgrade(&state);
        let tap = manager.tap(Arc::new(move |event: &Value| {
            let Some(state) = weak.upgrade() else {
                return false;
            };
            match state.concerns(event) {
                None => false,
                Some(take) => {
                    state.pushed.fetch_add(1, Ordering::SeqCst);
                    let _ = events.send(event.clone());
                    take
                }
            }
        }));
        crate::runtime::spawn(route(Arc::downgrade(&state), queued, state.stop.clone()));
        PoolServer { state, tap }
    }

    /// A client's session joins (for notifications to every client).
    pub(crate) fn opened(&self, session: &Arc<ServerSession>) {
        self.state.opened(session)
    }

    /// What registers the sessions a transport opens itself (Streamable HTTP's).
    pub(crate) fn opener(&self) -> super::http::Opened {
        let state = self.state.clone();
        Box::new(move |session| state.opened(session))
    }

    /// Stops routing the manager's events: they are all the host's again.
    pub(crate) fn stop(&self) {
        self.state.manager.untap(self.tap);
        self.state.stop.fire();
    }

    /// What a client's session serves requests with.
    pub(crate) fn handler(&self) -> Relay {
        Relay(self.state.clone())
    }
}

/// The handler of every client's session: the relay to the pool.
pub(crate) struct Relay(Arc<State>);

impl Drop for PoolServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Handler for Relay {
    fn offer(&self) -> Offer {
        let instructions = self.0.manager.instructions();
        let mut capabilities = json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "prompts": {"listChanged": true},
            "completions": {},
            "logging": {},
        });
        // The extensions relayed, when an upstream has them.
        let mut extensions = Map::new();
        for id in [TASKS_EXTENSION, SKILLS_EXTENSION] {
            if !self
                .0
                .manager
                .servers_declaring(&["extensions", id])
                .is_empty()
            {
                extensions.insert(id.into(), json!({}));
            }
        }
        if !extensions.is_empty() {
            capabilities["extensions"] = Value::Object(extensions);
        }
        Offer {
            capabilities,
            legacy_tasks: self.0.legacy_tasks(),
            server_info: json!({"name": "mcplug", "version": env!("CARGO_PKG_VERSION")}),
            instructions: (!instructions.is_empty()).then(|| {
                instructions
                    .iter()
                    .map(|(server, text)| format!("## {server}\n{text}"))
                    .collect::<Vec<_>>()
                    .join("\n\n")
            }),
        }
    }

    fn handle(&self, call: Call) -> BoxFuture<'static, Result<RawJson, Value>> {
        let state = self.0.clone();
        Box::pin(async move { state.serve(call).await.map_err(|e| rpc_of(&e)) })
    }

    fn level_set(&self, level: &str) {
        let manager = self.0.manager.share();
        let level = level.to_string();
        crate::runtime::spawn(async move {
            for server in manager.servers_with("logging") {
                let params = json!({ "level": level });
                let asked = manager
                    .request(
                        &server,
                        "logging/setLevel",
                        Some(params),
                        &CallOptions::default(),
                    )
                    .await;
                if let Err(e) = asked {
                    tracing::debug!(target: "mcplug::server", "logging/setLevel on {server:?}: {}", e.message);
                }
            }
        });
    }
}

impl State {
    fn opened(&self, session: &Arc<ServerSession>) {
        let mut sessions = self.sessions.lock();
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Arc::downgrade(session));
    }

    async fn serve(self: &Arc<Self>, call: Call) -> crate::error::Result<RawJson> {
        let params = call.params.clone().unwrap_or_else(|| json!({}));
        match call.method.as_str() {
            "tools/list" => Ok(self.tools()),
            "tools/call" => self.call_tool(call, params).await,
            "resources/list" => self.merged("resources/list", "resources", "uri").await,
            "resources/templates/list" => {
                self.merged(
                    "resources/templates/list",
                    "resourceTemplates",
                    "uriTemplate",
                )
                .await
            }
            "resources/read" => {
                let uri = text_param(&params, "uri", &call.method)?;
                let server = self
                    .resource_owner(&uri, call.downstream.is_modern())
                    .await?;
                self.relay(&server, &call, params).await
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = text_param(&params, "uri", &call.method)?;
                let server = self
                    .resource_owner(&uri, call.downstream.is_modern())
                    .await?;
                let subscribe = call.method == "resources/subscribe";
                let downstream = call.downstream.clone();
                let answer = self.relay(&server, &call, params).await?;
                // Its updates go to the clients that subscribed (and are subscribed still).
                let mut subscribed = self.subscribed.lock();
                subscribed
                    .retain(|(d, u)| d.is_live() && !(u == &uri && d.same_client(&downstream)));
                if subscribe {
                    subscribed.push((downstream, uri));
                }
                Ok(answer)
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" if call.downstream.is_modern() => {
                let task = text_param(&params, "taskId", &call.method)?;
                let server = self.task_owner(&task)?;
                self.relay(&server, &call, params).await
            }
            "tasks/get" | "tasks/result" | "tasks/cancel" if !call.downstream.is_modern() => {
                let task = text_param(&params, "taskId", &call.method)?;
                let server = self.legacy_task_owner(&task, &call.downstream)?;
                self.relay(&server, &call, params).await
            }
            "tasks/list" if !call.downstream.is_modern() => self.legacy_tasks_listed(&call).await,
            "skills/list" => {
                let servers = self
                    .manager
                    .servers_declaring(&["extensions", SKILLS_EXTENSION]);
                match servers.as_slice() {
                    [only] => self.relay(only, &call, params).await,
                    _ => self.skills(&servers).await,
                }
            }
            "skills/get" => {
                let uri = text_param(&params, "uri", "skills/get")?;
                let server = self.skill_owner(&uri).await?;
                self.relay(&server, &call, params).await
            }
            "subscriptions/listen" if call.downstream.is_modern() => {
                self.listen(call, params).await
            }
            "prompts/list" => self.prompts().await,
            "prompts/get" => {
                let name = text_param(&params, "name", "prompts/get")?;
                let (server, own) = self.prompt_named(&name).await?;
                let mut params = params;
                params["name"] = json!(own);
                self.relay(&server, &call, params).await
            }
            "completion/complete" => {
                let reference = params.get("ref").cloned().unwrap_or(Value::Null);
                let mut params = params;
                let server = match reference["type"].as_str() {
                    Some("ref/prompt") => {
                        let name = text_param(&reference, "name", "completion/complete ref")?;
                        let (server, own) = self.prompt_named(&name).await?;
                        params["ref"]["name"] = json!(own);
                        server
                    }
                    Some("ref/resource") => {
                        let uri = text_param(&reference, "uri", "completion/complete ref")?;
                        self.resource_owner(&uri, call.downstream.is_modern())
                            .await?
                    }
                    _ => {
                        return Err(Error::invalid(
                            "completion/complete needs a `ref` of type \"ref/prompt\" or \"ref/resource\"",
                        ))
                    }
                };
                self.relay(&server, &call, params).await
            }
            other => Err(
                Error::new(ErrorKind::NotFound, format!("method not found: {other}"))
                    .with_code(codes::METHOD_NOT_FOUND),
            ),
        }
    }

    /// A 2026-07-28 client's `subscriptions/listen`: acknowledged with what will be sent (every
    /// list change it asked for, and updates of the resources it names), then open until the
    /// client goes away or the server stops; each notification on it names it
    /// (`subscriptionId`, the request's id).
    async fn listen(self: &Arc<Self>, call: Call, params: Value) -> crate::error::Result<RawJson> {
        let asked = params
            .get("notifications")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                Error::invalid(
                    "subscriptions/listen needs `notifications`, an object of what to send",
                )
                .with_code(codes::INVALID_PARAMS)
            })?;
        let mut honored = Map::new();
        for key in LIST_CHANGES.iter().map(|(key, _)| *key) {
            if asked.get(key) == Some(&json!(true)) {
                honored.insert(key.into(), json!(true));
            }
        }
        let uris = protocol::string_list(asked.get("resourceSubscriptions"));
        if asked.contains_key("resourceSubscriptions") {
            honored.insert("resourceSubscriptions".into(), json!(uris));
        }
        let tagged = json!({ era::META_SUBSCRIPTION_ID: call.id });
        call.downstream
            .notify(
                "notifications/subscriptions/acknowledged",
                Some(&json!({"notifications": honored, "_meta": tagged})),
            )
            .await?;
        // The upstreams send the updates of the resources named (a subscription of the
        // manager's, on whichever stream its era uses).
        for uri in &uris {
            if let Ok(server) = self.resource_owner(uri, true).await {
                let manager = self.manager.share();
                let uri = uri.clone();
                crate::runtime::spawn(async move {
                    let params = json!({ "uri": uri });
                    if let Err(e) = manager
                        .request(
                            &server,
                            "resources/subscribe",
                            Some(params),
                            &CallOptions::default(),
                        )
                        .await
                    {
                        tracing::debug!(target: "mcplug::server", "subscribing to {uri} on {server}: {}", e.message);
                    }
                });
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().push(Listener {
            n,
            id: call.id.clone(),
            downstream: call.downstream.clone(),
            wants: honored,
        });
        let _open = Listening(self.clone(), n);
        tokio::select! {
            _ = call.cancel.fired() => {}
            _ = self.stop.fired() => {}
        }
        Ok(RawJson::from_value(
            &json!({"resultType": "complete", "_meta": tagged}),
        ))
    }

    /// A notification to the listen streams that asked for it (`wants`: the filter's key for a
    /// list change; `None`: a resource update, for the streams naming its URI).
    async fn to_listeners(&self, method: &str, wants: Option<&str>, params: Option<&Value>) {
        let uri = params.and_then(|p| p["uri"].as_str());
        let streams: Vec<(Value, Downstream)> = self
            .listeners
            .lock()
            .iter()
            .filter(|l| match wants {
                Some(key) => l.wants.get(key) == Some(&json!(true)),
                None => l.wants["resourceSubscriptions"]
                    .as_array()
                    .is_some_and(|a| {
                        a.iter()
                            .any(|u| Some(u.as_str().unwrap_or_default()) == uri)
                    }),
            })
            .map(|l| (l.id.clone(), l.downstream.clone()))
            .collect();
        for (id, downstream) in streams {
            let mut p = params.cloned().unwrap_or_else(|| json!({}));
            if let Some(o) = p.as_object_mut() {
                o.insert("_meta".into(), json!({ era::META_SUBSCRIPTION_ID: id }));
            }
            let _ = downstream.notify(method, Some(&p)).await;
        }
    }

    /// The pool's tools, each as its server listed it with the name the client is to use.
    fn tools(&self) -> RawJson {
        let mut out = String::from(r#"{"tools":["#);
        for (i, (name, tool)) in self.served_tools(true).iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            renamed(tool.listed_text(), name, &mut out);
        }
        out.push_str("]}");
        RawJson::from_built(out)
    }

    /// The tool a client names: a lookup in the pool when prefixed (the hot path), a walk of
    /// the served tools when unprefixed.
    fn tool_named(&self, name: &str) -> Option<Arc<pool::PoolTool>> {
        match self.names {
            Names::Prefixed => {
                let pool = self.manager.pool();
                let at = *pool.by_name.get(name)?;
                Some(pool.tools[at].clone())
            }
            Names::Unprefixed => self
                .served_tools(false)
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t),
        }
    }

    /// The tools as served, with their names, in the order their servers listed them (servers
    /// in configuration order); the first of a name wins when unprefixed (the others are logged
    /// when `report`).
    fn served_tools(&self, report: bool) -> Vec<(String, Arc<pool::PoolTool>)> {
        let pool = self.manager.pool();
        let order = self.manager.server_names();
        let rank = |s: &str| order.iter().position(|n| n == s).unwrap_or(usize::MAX);
        let mut tools: Vec<&Arc<pool::PoolTool>> = pool.tools.iter().collect();
        tools.sort_by_key(|t| (rank(&t.server), t.listed_at()));
        match self.names {
            Names::Prefixed => tools
                .into_iter()
                .map(|t| (t.name.clone(), t.clone()))
                .collect(),
            Names::Unprefixed => {
                let mut seen: HashMap<&str, &str> = HashMap::new();
                let mut out = Vec::with_capacity(tools.len());
                for t in tools {
                    match seen.get(t.tool.as_str()) {
                        Some(_) if !report => {}
                        Some(first) => tracing::warn!(
                            target: "mcplug::server",
                            "tool {:?} of server {:?} is not served: server {first:?} has one of that name first",
                            t.tool, t.server
                        ),
                        None => {
                            seen.insert(&t.tool, &t.server);
                            out.push((t.tool.clone(), t.clone()));
                        }
                    }
                }
                out
            }
        }
    }

    async fn call_tool(
        self: &Arc<Self>,
        call: Call,
        params: Value,
    ) -> crate::error::Result<RawJson> {
        let name = text_param(&params, "name", "tools/call")?;
        let Some(tool) = self.tool_named(&name) else {
            if self.parks(&call, &params, None) {
                return self.resume(&call, &params).await;
            }
            return Err(
                Error::invalid(format!("unknown tool: {name}")).with_code(codes::INVALID_PARAMS)
            );
        };
        if self.parks(&call, &params, Some(&tool.server)) {
            return self.resume(&call, &params).await;
        }
        if let Some(meta) = self.passes_through(&call, &tool.server) {
            let mut upstream = params;
            upstream["name"] = json!(tool.tool);
            return self.pass_through(&call, &tool.server, upstream, meta).await;
        }
        if params.get("task").is_some() && self.runs_legacy_tasks(&call, &tool.server) {
            // A 2025-11-25 task: the upstream's CreateTaskResult goes back as it is, and the
            // client's `tasks/*` follow it there.
            let mut upstream = params;
            upstream["name"] = json!(tool.tool);
            let created = self.relay(&tool.server, &call, upstream).await?;
            if let Some(task) = crate::client::legacy_task_id(&created) {
                self.task_created(task, &tool.server, &call.downstream);
            }
            return Ok(created);
        }
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => None,
            Some(a) => Some(serde_json::value::to_raw_value(a).map_err(|e| {
                Error::invalid(format!("tools/call `arguments` cannot be written: {e}"))
            })?),
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut options = CallOptions {
            caller: call.downstream.caller(call.params.as_ref()),
            ..CallOptions::default()
        };
        // Kept until the answer is given: progress the upstream sent before it goes first.
        let _progress = self.track_progress(&call, n, &mut options);
        let manager = self.manager.share();
        let server = tool.server.clone();
        self.upstream(
            &call,
            &params,
            n,
            &server,
            options,
            move |options| async move {
                manager
                    .call_tool_as_sent(&tool.name, arguments.as_deref(), &options)
                    .await
            },
        )
        .await
    }

    /// Any other request, to one upstream server, its result as that server wrote it.
    async fn relay(
        self: &Arc<Self>,
        server: &str,
        call: &Call,
        params: Value,
    ) -> crate::error::Result<RawJson> {
        if self.parks(call, &params, Some(server)) {
            return self.resume(call, &params).await;
        }
        if let Some(meta) = self.passes_through(call, server) {
            return self.pass_through(call, server, params, meta).await;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let manager = self.manager.share();
        let (server_name, method) = (server.to_string(), call.method.clone());
        let upstream_params = for_upstream(&params);
        self.upstream(
            call,
            &params,
            n,
            server,
            CallOptions {
                caller: call.downstream.caller(call.params.as_ref()),
                ..CallOptions::default()
            },
            move |options| async move {
                manager
                    .request(&server_name, &method, Some(upstream_params), &options)
                    .await
            },
        )
        .await
    }

    /// When the client asked for progress: the upstream call `n` asks too, and its progress
    /// reaches the client (while the returned route is kept).
    fn track_progress(
        self: &Arc<Self>,
        call: &Call,
        n: u64,
        options: &mut CallOptions,
    ) -> Option<Tracked> {
        call.downstream.wants_progress().then(|| {
            let tag = format!("mcplug-serve:{n}");
            options.progress = true;
            options.tag = Some(tag.clone());
            Tracked::new(self.clone(), tag, call.downstream.clone())
        })
    }

    /// Whether a 2026-07-28 client's retry names a request this gateway parked (its upstream
    /// is legacy, or unknown): then its `requestState` is ours to resume. A 2026-07-28
    /// upstream's own `requestState` goes back to it.
    fn parks(&self, call: &Call, params: &Value, server: Option<&str>) -> bool {
        let Some(state) = params.get("requestState") else {
            return false;
        };
        call.downstream.is_modern()
            && (state
                .as_str()
                .is_some_and(|s| self.parked.lock().contains_key(s))
                || !server.is_some_and(|s| self.manager.speaks_modern(s)))
    }

    /// A 2026-07-28 client's request to a 2026-07-28 server is relayed as it is: the client's
    /// own `_meta` entries (capabilities, client info, log level) — what the upstream may ask
    /// of it, and whether it wants log messages — and the upstream's answer, input rounds and
    /// tasks included, for the client to resolve. `None` when the eras differ.
    fn passes_through(&self, call: &Call, server: &str) -> Option<Arc<Map<String, Value>>> {
        if !call.downstream.is_modern() || !self.manager.speaks_modern(server) {
            return None;
        }
        let mut meta = call
            .params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        meta.retain(|k, _| k.starts_with("io.modelcontextprotocol/"));
        meta.remove(era::META_PROTOCOL_VERSION);
        Some(Arc::new(meta))
    }

    /// Relays a request to a server of the client's era (see `passes_through`): its params
    /// as the client sent them but for the `_meta` the connection writes (the progress token
    /// is the connection's, its progress reaches the client under the client's own).
    async fn pass_through(
        self: &Arc<Self>,
        call: &Call,
        server: &str,
        mut params: Value,
        meta: Arc<Map<String, Value>>,
    ) -> crate::error::Result<RawJson> {
        if let Some(o) = params.as_object_mut() {
            if let Some(m) = o.get_mut("_meta").and_then(Value::as_object_mut) {
                m.retain(|k, _| !k.starts_with("io.modelcontextprotocol/") && k != "progressToken");
                if m.is_empty() {
                    o.remove("_meta");
                }
            }
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut options = CallOptions {
            relayed: Some(meta),
            own_cancel: Some(OwnCancel(call.cancel.clone())),
            caller: call.downstream.caller(call.params.as_ref()),
            ..CallOptions::default()
        };
        let _progress = self.track_progress(call, n, &mut options);
        // A 2026-07-28 server asks in its results; a request it sends anyway is refused.
        let (questions, _) = mpsc::unbounded_channel();
        let _call = Calling::new(
            self,
            n,
            server,
            Route::Input {
                questions,
                capabilities: json!({}),
                may_ask: false,
            },
        );
        let outcome = self
            .manager
            .relay(server, &call.method, Some(params), &options)
            .await;
        self.deliver().await;
        if let Ok(raw) = &outcome {
            if call.method == "tools/call"
                && era::result_type(raw.as_str()).as_deref() == Some("task")
            {
                #[derive(serde::Deserialize)]
                struct Created {
                    #[serde(rename = "taskId")]
                    task_id: String,
                }
                if let Ok(created) = serde_json::from_str::<Created>(raw.as_str()) {
                    self.task_created(created.task_id, server, &call.downstream);
                }
            }
        }
        outcome
    }

    /// A task an upstream created for a client: its `tasks/*` requests go to that upstream.
    fn task_created(&self, id: String, server: &str, downstream: &Downstream) {
        let mut tasks = self.tasks.lock();
        if tasks.len() >= MAX_TASKS_KNOWN {
            tasks.pop_front();
        }
        tasks.push_back(KnownTask {
            id,
            server: server.to_string(),
            downstream: downstream.clone(),
        });
    }

    /// The experimental `tasks` capability (2025-11-25) a client of that revision is offered:
    /// what the legacy upstreams that run tool calls as tasks offer between them; `None` when
    /// none does.
    fn legacy_tasks(&self) -> Option<Value> {
        let runs = self
            .manager
            .servers_declaring(&["tasks", "requests", "tools", "call"]);
        let runs: Vec<&String> = runs
            .iter()
            .filter(|s| !self.manager.speaks_modern(s))
            .collect();
        if runs.is_empty() {
            return None;
        }
        let mut tasks = json!({"requests": {"tools": {"call": {}}}});
        for part in ["list", "cancel"] {
            let declaring = self.manager.servers_declaring(&["tasks", part]);
            if runs.iter().any(|s| declaring.contains(s)) {
                tasks[part] = json!({});
            }
        }
        Some(tasks)
    }

    /// Whether a tool call of this legacy client that asks for a task is relayed as one: its
    /// upstream is legacy and runs tool calls as tasks. Otherwise the call runs as any other
    /// (the `task` asked for is ignored, as the spec lets a receiver that does not offer it).
    fn runs_legacy_tasks(&self, call: &Call, server: &str) -> bool {
        !call.downstream.is_modern()
            && !self.manager.speaks_modern(server)
            && self
                .manager
                .servers_declaring(&["tasks", "requests", "tools", "call"])
                .iter()
                .any(|s| s == server)
    }

    /// The upstream of a legacy client's task: one this client created through the gateway
    /// (another client's task is unknown to it, as the spec keeps tasks to their requestor).
    fn legacy_task_owner(
        &self,
        task: &str,
        downstream: &Downstream,
    ) -> crate::error::Result<String> {
        if let Some(t) = self
            .tasks
            .lock()
            .iter()
            .rev()
            .find(|t| t.id == task && t.downstream.same_client(downstream))
        {
            return Ok(t.server.clone());
        }
        let mut e =
            Error::invalid(format!("unknown taskId {task:?}")).with_code(codes::INVALID_PARAMS);
        e.data = Some(json!({ "taskId": task }));
        Err(e)
    }

    /// A legacy client's `tasks/list`: its own tasks, as their upstreams list them now (those
    /// that list tasks), in one page.
    async fn legacy_tasks_listed(&self, call: &Call) -> crate::error::Result<RawJson> {
        let mine: Vec<(String, String)> = self
            .tasks
            .lock()
            .iter()
            .filter(|t| t.downstream.same_client(&call.downstream))
            .map(|t| (t.id.clone(), t.server.clone()))
            .collect();
        let listing = self.manager.servers_declaring(&["tasks", "list"]);
        let mut servers: Vec<&String> = mine.iter().map(|(_, s)| s).collect();
        servers.sort();
        servers.dedup();
        let mut all = Vec::new();
        for server in servers.into_iter().filter(|s| listing.contains(s)) {
            let options = CallOptions {
                caller: call.downstream.caller(call.params.as_ref()),
                ..CallOptions::default()
            };
            let mut cursor: Option<Value> = None;
            // Every page, but never forever.
            for _ in 0..MAX_TASK_PAGES {
                let params = cursor.take().map(|c| json!({ "cursor": c }));
                let mut page = self
                    .manager
                    .request(server, "tasks/list", params, &options)
                    .await?
                    .value()?;
                if let Some(Value::Array(tasks)) = page.get_mut("tasks").map(Value::take) {
                    all.extend(tasks.into_iter().filter(|t| {
                        t["taskId"]
                            .as_str()
                            .is_some_and(|id| mine.iter().any(|(m, s)| m == id && s == server))
                    }));
                }
                match page.get("nextCursor") {
                    Some(c) if !c.is_null() => cursor = Some(c.clone()),
                    _ => break,
                }
            }
        }
        Ok(RawJson::from_value(&json!({ "tasks": all })))
    }

    /// The legacy client whose task an upstream's message names
    /// (`io.modelcontextprotocol/related-task` in its `_meta`, or the `taskId` of a status).
    fn task_client(&self, server: &str, task: Option<&str>) -> Option<Downstream> {
        let task = task?;
        self.tasks
            .lock()
            .iter()
            .rev()
            .find(|t| t.id == task && t.server == server && !t.downstream.is_modern())
            .map(|t| t.downstream.clone())
    }

    /// Every skill of every server with the skills extension (their first pages), not cached.
    async fn skills(&self, servers: &[String]) -> crate::error::Result<RawJson> {
        let mut all = Vec::new();
        for server in servers {
            match self
                .manager
                .request(server, "skills/list", None, &CallOptions::default())
                .await
                .and_then(|raw| raw.value())
            {
                Ok(mut listed) => {
                    if let Some(Value::Array(skills)) = listed.get_mut("skills").map(Value::take) {
                        all.extend(skills);
                    }
                }
                Err(e) => {
                    tracing::warn!(target: "mcplug::server", "skills/list of server {server:?} failed: {}", e.message)
                }
            }
        }
        Ok(RawJson::from_value(
            &json!({"skills": all, "ttlMs": 0, "cacheScope": "private"}),
        ))
    }

    /// The server that lists the skill at `uri`, else the only server with skills.
    async fn skill_owner(&self, uri: &str) -> crate::error::Result<String> {
        let servers = self
            .manager
            .servers_declaring(&["extensions", SKILLS_EXTENSION]);
        if let [only] = servers.as_slice() {
            return Ok(only.clone());
        }
        for server in &servers {
            let listed = self
                .manager
                .request(server, "skills/list", None, &CallOptions::default())
                .await
                .and_then(|raw| raw.value());
            if listed.is_ok_and(|l| {
                l["skills"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|s| s["uri"] == uri))
            }) {
                return Ok(server.clone());
            }
        }
        let mut e = Error::invalid(format!("no server has the skill {uri:?}"))
            .with_code(codes::INVALID_PARAMS);
        e.data = Some(json!({ "uri": uri }));
        Err(e)
    }

    /// The upstream a task belongs to: the one that created it, else the only one with the
    /// tasks extension (whose answer says whether it knows it).
    fn task_owner(&self, task: &str) -> crate::error::Result<String> {
        if let Some(t) = self.tasks.lock().iter().rev().find(|t| t.id == task) {
            return Ok(t.server.clone());
        }
        if let [only] = self
            .manager
            .servers_declaring(&["extensions", TASKS_EXTENSION])
            .as_slice()
        {
            return Ok(only.clone());
        }
        let mut e =
            Error::invalid(format!("unknown taskId {task:?}")).with_code(codes::INVALID_PARAMS);
        e.data = Some(json!({ "taskId": task }));
        Err(e)
    }

    /// Runs a request on `server` for the client's `call`. What the upstream asks meanwhile
    /// goes to the client: a legacy one is asked on its session; a 2026-07-28 one gets an
    /// `InputRequiredResult` (the upstream request runs on, parked under the `requestState`
    /// until the client's retry brings the answers).
    async fn upstream<F, Fut>(
        self: &Arc<Self>,
        call: &Call,
        params: &Value,
        n: u64,
        server: &str,
        mut options: CallOptions,
        go: F,
    ) -> crate::error::Result<RawJson>
    where
        F: FnOnce(CallOptions) -> Fut,
        Fut: std::future::Future<Output = crate::error::Result<RawJson>> + Send + 'static,
    {
        if !call.downstream.is_modern() {
            options.own_cancel = Some(OwnCancel(call.cancel.clone()));
            let _call = Calling::new(self, n, server, Route::Ask(call.downstream.clone()));
            let outcome = go(options).await;
            // What the upstream sent before its answer (progress, logs) goes out before it.
            self.deliver().await;
            return outcome;
        }
        // The upstream request outlives this client request when it asks for input: it has a
        // cancel of its own, fired by this request's cancel while it waits, or at expiry.
        let cancel = CancelSignal::new();
        options.own_cancel = Some(OwnCancel(cancel.clone()));
        let (questions_tx, questions) = mpsc::unbounded_channel();
        let route = Route::Input {
            questions: questions_tx,
            capabilities: params
                .get("_meta")
                .and_then(|m| m.get(era::META_CLIENT_CAPABILITIES))
                .cloned()
                .unwrap_or_else(|| json!({})),
            may_ask: matches!(
                call.method.as_str(),
                "tools/call" | "prompts/get" | "resources/read"
            ),
        };
        let calling = Calling::new(self, n, server, route);
        let (done, outcome) = oneshot::channel();
        let running = go(options);
        crate::runtime::spawn(async move {
            let out = running.await;
            drop(calling);
            let _ = done.send(out);
        });
        let waiting = Waiting {
            method: call.method.clone(),
            name: routed_name(params),
            outcome,
            questions,
            pending: Vec::new(),
            asked: 0,
            cancel,
        };
        self.round(call, waiting).await
    }

    /// Waits for the upstream's outcome, or for its first questions: then parks the request
    /// and answers the client with an `InputRequiredResult`.
    async fn round(self: &Arc<Self>, call: &Call, mut w: Waiting) -> crate::error::Result<RawJson> {
        tokio::select! {
            out = &mut w.outcome => {
                self.deliver().await;
                out.unwrap_or_else(|_| Err(Error::closed("the upstream request ended without an answer")))
            }
            Some(q) = w.questions.recv() => {
                let mut asked = vec![q];
                while let Ok(q) = w.questions.try_recv() {
                    asked.push(q);
                }
                for q in asked {
                    w.asked += 1;
                    w.pending.push((format!("q{}", w.asked), q));
                }
                Ok(self.park(w))
            }
            _ = call.cancel.fired() => {
                w.cancel.fire();
                Err(Error::new(ErrorKind::Cancelled, "the client cancelled the request"))
            }
        }
    }

    /// Keeps `w` under a new `requestState` (until the retry, or expiry) and gives the
    /// `InputRequiredResult` that asks its pending questions.
    fn park(self: &Arc<Self>, w: Waiting) -> RawJson {
        let token = crate::auth::jws::random_b64url(24);
        let mut requests = Map::new();
        for (key, q) in &w.pending {
            requests.insert(
                key.clone(),
                json!({"method": q.method, "params": q.params.clone().unwrap_or_else(|| json!({}))}),
            );
        }
        let result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": token,
        });
        self.parked.lock().insert(token.clone(), w);
        let state = Arc::downgrade(self);
        crate::runtime::spawn(async move {
            tokio::time::sleep(super::ASK_TIMEOUT).await;
            let expired = state.upgrade().and_then(|s| s.parked.lock().remove(&token));
            if let Some(w) = expired {
                w.cancel.fire();
            }
        });
        RawJson::from_value(&result)
    }

    /// A 2026-07-28 client's retry: its `inputResponses` answer the parked upstream's
    /// questions; a question left unanswered is asked again.
    async fn resume(
        self: &Arc<Self>,
        call: &Call,
        params: &Value,
    ) -> crate::error::Result<RawJson> {
        let token = params["requestState"].as_str().unwrap_or_default();
        let parked = self.parked.lock().remove(token);
        let Some(mut w) = parked else {
            return Err(Error::invalid(
                "`requestState` names no request waiting for input (unknown, answered or expired)",
            )
            .with_code(codes::INVALID_PARAMS));
        };
        if w.method != call.method || w.name != routed_name(params) {
            w.cancel.fire();
            return Err(Error::invalid(format!(
                "`requestState` belongs to another request ({} {})",
                w.method,
                w.name.as_deref().unwrap_or("")
            ))
            .with_code(codes::INVALID_PARAMS));
        }
        let responses = params
            .get("inputResponses")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let mut unanswered = Vec::new();
        for (key, q) in std::mem::take(&mut w.pending) {
            match responses.get(&key) {
                Some(answer) => {
                    let response = json!({"id": q.id, "result": answer});
                    if let Err(e) = self.manager.respond(&response).await {
                        tracing::debug!(target: "mcplug::server", "answering {} upstream: {}", q.method, e.message);
                    }
                }
                None => unanswered.push((key, q)),
            }
        }
        if !unanswered.is_empty() {
            w.pending = unanswered;
            return Ok(self.park(w));
        }
        self.round(call, w).await
    }

    /// Every page of `method` of every server that has resources, merged; `key` names an item
    /// (a URI served by two servers is the first's).
    async fn merged(&self, method: &str, field: &str, key: &str) -> crate::error::Result<RawJson> {
        let mut items: Vec<Value> = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (server, listed) in self.each_listing(method, field).await {
            for item in listed {
                let id = item[key].as_str().unwrap_or_default().to_string();
                if let Some(first) = seen.get(&id) {
                    tracing::warn!(target: "mcplug::server", "{key} {id:?} of server {server:?} is not served: server {first:?} has it first");
                    continue;
                }
                seen.insert(id, server.clone());
                items.push(item);
            }
        }
        Ok(RawJson::from_value(&json!({ field: items })))
    }

    /// `method`'s `field` of every connected server with the capability it needs, in
    /// configuration order (a server that fails to list is left out, and logged).
    async fn each_listing(&self, method: &str, field: &str) -> Vec<(String, Vec<Value>)> {
        let capability = method.split('/').next().unwrap_or_default();
        let options = CallOptions {
            all_pages: true,
            ..CallOptions::default()
        };
        let mut out = Vec::new();
        for server in self.manager.servers_with(capability) {
            match self.manager.request(&server, method, None, &options).await {
                Ok(raw) => {
                    let items = raw
                        .value()
                        .ok()
                        .and_then(|mut v| v.get_mut(field).map(Value::take))
                        .and_then(|v| match v {
                            Value::Array(a) => Some(a),
                            _ => None,
                        })
                        .unwrap_or_default();
                    out.push((server, items));
                }
                Err(e) => {
                    tracing::warn!(target: "mcplug::server", "{method} of server {server:?} failed: {}", e.message)
                }
            }
        }
        out
    }

    /// The server a resource URI belongs to: the first that lists it, else the first whose
    /// template it fits, else the only server with resources (a server may serve URIs it does
    /// not list; its own answer says whether it has it). Else not found, as the client's era
    /// says it: -32602 in 2026-07-28 (SEP-2164), -32002 before, `data.uri` in both.
    async fn resource_owner(&self, uri: &str, modern: bool) -> crate::error::Result<String> {
        for (server, listed) in self.each_listing("resources/list", "resources").await {
            if listed.iter().any(|r| r["uri"] == uri) {
                return Ok(server);
            }
        }
        for (server, listed) in self
            .each_listing("resources/templates/list", "resourceTemplates")
            .await
        {
            if listed
                .iter()
                .filter_map(|t| t["uriTemplate"].as_str())
                .any(|t| fits_template(t, uri))
            {
                return Ok(server);
            }
        }
        if let [only] = self.manager.servers_with("resources").as_slice() {
            return Ok(only.clone());
        }
        let mut e = Error::new(
            ErrorKind::NotFound,
            format!("no server has the resource {uri:?}"),
        )
        .with_code(if modern {
            codes::INVALID_PARAMS
        } else {
            codes::RESOURCE_NOT_FOUND
        });
        e.data = Some(json!({ "uri": uri }));
        Err(e)
    }

    /// Every server's prompts, named as the client sees them.
    async fn prompts(&self) -> crate::error::Result<RawJson> {
        let mut items = Vec::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (server, listed) in self.each_listing("prompts/list", "prompts").await {
            for mut prompt in listed {
                let own = prompt["name"].as_str().unwrap_or_default().to_string();
                let name = self.prompt_name(&server, &own);
                if let Some(first) = seen.get(&name) {
                    tracing::warn!(target: "mcplug::server", "prompt {name:?} of server {server:?} is not served: server {first:?} has it first");
                    continue;
                }
                seen.insert(name.clone(), server.clone());
                prompt["name"] = json!(name);
                items.push(prompt);
            }
        }
        Ok(RawJson::from_value(&json!({ "prompts": items })))
    }

    fn prompt_name(&self, server: &str, own: &str) -> String {
        match self.names {
            Names::Prefixed => pool::pool_name(server, own),
            Names::Unprefixed => own.to_string(),
        }
    }

    /// The server and own name of the prompt a client names.
    async fn prompt_named(&self, name: &str) -> crate::error::Result<(String, String)> {
        for (server, listed) in self.each_listing("prompts/list", "prompts").await {
            for prompt in listed {
                let own = prompt["name"].as_str().unwrap_or_default();
                if self.prompt_name(&server, own) == name {
                    return Ok((server, own.to_string()));
                }
            }
        }
        Err(Error::invalid(format!("unknown prompt: {name}")).with_code(codes::INVALID_PARAMS))
    }

    fn live_sessions(&self) -> Vec<Arc<ServerSession>> {
        self.sessions
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|s| !s.is_closed() && s.ready())
            .collect()
    }

    /// Whether `event` concerns the clients: `None` not at all; `Some(true)` it is theirs alone
    /// (the host never sees it); `Some(false)` the host sees it too. Called by the manager's tap,
    /// as the event is queued: it only looks.
    fn concerns(&self, event: &Value) -> Option<bool> {
        match event["type"].as_str()? {
            "notification" => match event["method"].as_str()? {
                // A relayed call's progress (tagged by `call_tool`).
                "notifications/progress" => {
                    let tag = event["tag"].as_str()?;
                    let known = self.progress.lock().contains_key(tag);
                    if !known {
                        tracing::debug!(target: "mcplug::server", tag, "progress of no relayed call");
                    }
                    known.then_some(true)
                }
                "notifications/message" | "notifications/resources/updated" => Some(false),
                "notifications/tasks/status" => self
                    .task_client(
                        event["server"].as_str()?,
                        event["params"]["taskId"].as_str(),
                    )
                    .map(|_| true),
                _ => None,
            },
            // An upstream asks while a client's request runs on it (a host's own sdk tool
            // calls, `tools/call`, are the host's).
            "request" if event["method"] != "tools/call" => {
                let server = event["server"].as_str()?;
                if self.task_client(server, related_task(event)).is_some() {
                    return Some(true);
                }
                self.calls
                    .lock()
                    .iter()
                    .any(|(_, s, _)| s == server)
                    .then_some(true)
            }
            "request_cancelled" | "request_expired" => {
                let id = event["id"].as_str()?;
                self.asking.lock().contains_key(id).then_some(true)
            }
            "tools_changed" | "state" | "removed" | "resources_changed" | "prompts_changed" => {
                Some(false)
            }
            _ => None,
        }
    }

    /// Waits (a moment at most) until the router has delivered every event the tap passed it
    /// so far.
    async fn deliver(&self) {
        let target = self.pushed.load(Ordering::SeqCst);
        let mut routed = self.routed.subscribe();
        if tokio::time::timeout(
            std::time::Duration::from_secs(1),
            routed.wait_for(|n| *n >= target),
        )
        .await
        .is_err()
        {
            tracing::warn!(target: "mcplug::server", "an answer goes out before what its upstream sent first: the router is behind");
        }
    }

    /// One event of the manager, to the clients it concerns.
    async fn route(self: &Arc<Self>, event: Value) {
        let kind = event["type"].as_str().unwrap_or_default();
        let server = event["server"].as_str().unwrap_or_default().to_string();
        tracing::debug!(target: "mcplug::server", kind, server, method = event["method"].as_str(), tag = event["tag"].as_str(), "routing");
        match kind {
            "notification" => self.route_notification(&server, event).await,
            "request" => self.ask_downstream(server, event),
            "request_cancelled" | "request_expired" => {
                if let Some(cancel) = event["id"]
                    .as_str()
                    .and_then(|id| self.asking.lock().remove(id))
                {
                    cancel.fire();
                }
            }
            "tools_changed" | "state" | "removed" => {
                self.to_all("notifications/tools/list_changed", None).await
            }
            "resources_changed" => {
                self.to_all("notifications/resources/list_changed", None)
                    .await
            }
            "prompts_changed" => {
                self.to_all("notifications/prompts/list_changed", None)
                    .await
            }
            _ => {}
        }
    }

    async fn route_notification(self: &Arc<Self>, server: &str, event: Value) {
        let params = event.get("params").cloned().unwrap_or_else(|| json!({}));
        match event["method"].as_str().unwrap_or_default() {
            "notifications/progress" => {
                let Some(tag) = event["tag"].as_str() else {
                    return;
                };
                let Some(downstream) = self.progress.lock().get(tag).cloned() else {
                    return;
                };
                let mut progress = params;
                if let Some(p) = progress.as_object_mut() {
                    p.remove("progressToken");
                }
                let _ = downstream.progress(progress).await;
            }
            "notifications/message" => {
                let level = params["level"].as_str().unwrap_or("info").to_string();
                let data = params.get("data").cloned().unwrap_or(Value::Null);
                for s in self.live_sessions() {
                    let _ = s.downstream().log(&level, Some(server), data.clone()).await;
                }
            }
            "notifications/tasks/status" => {
                // To the client whose task it is.
                if let Some(d) = self.task_client(server, params["taskId"].as_str()) {
                    let _ = d.notify("notifications/tasks/status", Some(&params)).await;
                }
            }
            "notifications/resources/updated" => {
                // To the legacy clients that subscribed to it, and the listen streams naming it.
                let uri = params["uri"].as_str().unwrap_or_default().to_string();
                let to: Vec<Downstream> = self
                    .subscribed
                    .lock()
                    .iter()
                    .filter(|(d, u)| *u == uri && d.is_live())
                    .map(|(d, _)| d.clone())
                    .collect();
                for d in to {
                    let _ = d
                        .notify("notifications/resources/updated", Some(&params))
                        .await;
                }
                self.to_listeners("notifications/resources/updated", None, Some(&params))
                    .await
            }
            _ => {}
        }
    }

    /// A notification to every legacy client, and to the listen streams that asked for it.
    async fn to_all(&self, method: &str, params: Option<Value>) {
        // A 2026-07-28 client gets only what its listen streams asked for.
        for s in self.live_sessions() {
            if !matches!(s.era(), ClientEra::Modern { .. }) {
                let _ = s.downstream().notify(method, params.as_ref()).await;
            }
        }
        if let Some((key, _)) = LIST_CHANGES.iter().find(|(_, m)| *m == method) {
            self.to_listeners(method, Some(key), params.as_ref()).await
        } else if method == "notifications/resources/updated" {
            self.to_listeners(method, None, params.as_ref()).await
        }
    }

    /// An upstream's request (sampling, elicitation, roots) to the client whose request runs on
    /// that upstream (the latest), else to the latest client; answered with what the client
    /// said, or with an error — never left waiting.
    fn ask_downstream(self: &Arc<Self>, server: String, event: Value) {
        let Some(id) = event["id"].as_str().map(str::to_string) else {
            return;
        };
        let method = event["method"].as_str().unwrap_or_default().to_string();
        let params = event.get("params").cloned();
        // A task's request goes to the client whose task it is (its `tasks/result` waits).
        let route = match self.task_client(&server, related_task(&event)) {
            Some(d) => Some(Route::Ask(d)),
            None => {
                let calls = self.calls.lock();
                calls
                    .iter()
                    .rev()
                    .find(|(_, s, _)| *s == server)
                    .map(|(_, _, r)| r.clone())
            }
        };
        let state = self.clone();
        let refused = id.clone();
        let refuse = move |why: Error| {
            let state = state.clone();
            let id = refused.clone();
            crate::runtime::spawn(async move {
                let _ = state
                    .manager
                    .respond(&json!({"id": id, "error": rpc_of(&why)}))
                    .await;
            });
        };
        match route {
            None => refuse(Error::closed("no client is connected to ask")),
            Some(Route::Input {
                questions,
                capabilities,
                may_ask,
            }) => {
                let needs = super::session::needs(&method, params.as_ref());
                if !may_ask {
                    refuse(Error::not_implemented(format!(
                        "a 2026-07-28 client can be asked for input only during tools/call, prompts/get or resources/read, not for this request's {method}"
                    )));
                } else if !needs.is_some_and(|path| protocol::declares(&capabilities, path)) {
                    refuse(Error::new(
                        ErrorKind::Denied,
                        format!("the client did not declare the capability to be asked {method}"),
                    ));
                } else if questions
                    .send(Question {
                        id: id.clone(),
                        method,
                        params,
                    })
                    .is_err()
                {
                    refuse(Error::closed("the client's request has ended"));
                }
            }
            Some(Route::Ask(downstream)) => self.ask_on_session(downstream, id, method, params),
        }
    }

    /// Asks a legacy client on its session, and answers the upstream with what it said.
    fn ask_on_session(
        self: &Arc<Self>,
        downstream: Downstream,
        id: String,
        method: String,
        params: Option<Value>,
    ) {
        let cancel = CancelSignal::new();
        self.asking.lock().insert(id.clone(), cancel.clone());
        let state = self.clone();
        crate::runtime::spawn(async move {
            let cancels = Cancels {
                tag: None,
                own: Some(cancel),
            };
            let answer = downstream.ask(&method, params.as_ref(), &cancels).await;
            if state.asking.lock().remove(&id).is_none() {
                return; // withdrawn by the upstream
            }
            let response = match answer.and_then(|raw| raw.value()) {
                Ok(result) => json!({ "id": id, "result": result }),
                Err(e) => json!({ "id": id, "error": rpc_of(&e) }),
            };
            if let Err(e) = state.manager.respond(&response).await {
                tracing::debug!(target: "mcplug::server", "answering {method}: {}", e.message);
            }
        });
    }
}

/// Delivers the events the tap passed, in order, until `stop`.
async fn route(
    state: Weak<State>,
    mut queued: mpsc::UnboundedReceiver<Value>,
    stop: Arc<CancelSignal>,
) {
    loop {
        let event = tokio::select! {
            e = queued.recv() => e,
            _ = stop.fired() => return,
        };
        let (Some(event), Some(s)) = (event, state.upgrade()) else {
            return;
        };
        s.route(event).await;
        s.routed.send_modify(|n| *n += 1);
    }
}

/// How an upstream's request reaches the client a relayed request serves.
#[derive(Clone)]
enum Route {
    /// A legacy client: asked on its session.
    Ask(Downstream),
    /// A 2026-07-28 client: the question goes back in an `InputRequiredResult` (if the
    /// request may carry one, and the client declared the capability in its `_meta`).
    Input {
        questions: mpsc::UnboundedSender<Question>,
        capabilities: Value,
        may_ask: bool,
    },
}

/// An upstream's request, as the manager's event gave it.
struct Question {
    /// The manager's event id (what `respond` answers).
    id: String,
    method: String,
    params: Option<Value>,
}

/// A 2026-07-28 request whose upstream request runs on between the client's rounds.
struct Waiting {
    method: String,
    /// What the request names (its tool, prompt or URI): a retry must name the same.
    name: Option<String>,
    outcome: oneshot::Receiver<crate::error::Result<RawJson>>,
    questions: mpsc::UnboundedReceiver<Question>,
    /// The questions put to the client, by their key in `inputRequests`.
    pending: Vec<(String, Question)>,
    asked: u64,
    cancel: Arc<CancelSignal>,
}

/// The tasks extension (SEP-2663): relayed between 2026-07-28 ends.
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The skills extension (SEP-2640): its methods relayed.
const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// How many tasks' upstreams the gateway remembers.
const MAX_TASKS_KNOWN: usize = 4096;

/// How many pages of an upstream's `tasks/list` a client's listing reads at most.
const MAX_TASK_PAGES: usize = 64;

/// A task an upstream created for a client.
struct KnownTask {
    id: String,
    /// The upstream that has it.
    server: String,
    /// The client it was created for.
    downstream: Downstream,
}

/// The task an upstream's request (an event of the manager) says it is made for.
fn related_task(event: &Value) -> Option<&str> {
    event["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].as_str()
}

/// What a `subscriptions/listen` filter names, and the list change each key asks for.
const LIST_CHANGES: &[(&str, &str)] = &[
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    (
        "resourcesListChanged",
        "notifications/resources/list_changed",
    ),
];

/// A 2026-07-28 client's open `subscriptions/listen` stream.
struct Listener {
    n: u64,
    /// The listen request's id: its notifications' `subscriptionId`.
    id: Value,
    downstream: Downstream,
    /// What was acknowledged.
    wants: Map<String, Value>,
}

/// A listen stream's registration, removed with it.
struct Listening(Arc<State>, u64);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.listeners.lock().retain(|l| l.n != self.1);
    }
}

/// A relayed request, known to the router while it runs (where its upstream's requests go).
struct Calling {
    state: Arc<State>,
    n: u64,
}

impl Calling {
    fn new(state: &Arc<State>, n: u64, server: &str, route: Route) -> Calling {
        state.calls.lock().push((n, server.to_string(), route));
        Calling {
            state: state.clone(),
            n,
        }
    }
}

impl Drop for Calling {
    fn drop(&mut self) {
        self.state.calls.lock().retain(|(n, _, _)| *n != self.n);
    }
}

/// A relayed call's progress route, removed with it.
struct Tracked {
    state: Arc<State>,
    tag: String,
}

impl Tracked {
    fn new(state: Arc<State>, tag: String, d: Downstream) -> Self {
        state.progress.lock().insert(tag.clone(), d);
        Tracked { state, tag }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.state.progress.lock().remove(&self.tag);
    }
}

/// What a request names that its retry must name too.
fn routed_name(params: &Value) -> Option<String> {
    params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A client's params as an upstream gets them: without what belongs to the client's own
/// exchange with us (its era's `_meta` keys, its progress token, its input rounds).
fn for_upstream(params: &Value) -> Value {
    let mut p = params.clone();
    if let Some(o) = p.as_object_mut() {
        o.remove("inputResponses");
        o.remove("requestState");
        if let Some(meta) = o.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/") && k != "progressToken");
            if meta.is_empty() {
                o.remove("_meta");
            }
        }
    }
    p
}

/// A string member of a request's params, or an error naming it.
fn text_param(params: &Value, key: &str, what: &str) -> crate::error::Result<String> {
    params[key].as_str().map(str::to_string).ok_or_else(|| {
        Error::invalid(format!("{what} needs a string `{key}`")).with_code(codes::INVALID_PARAMS)
    })
}

/// Whether `uri` fits a URI template (RFC 6570, read loosely: the literal text around its
/// expressions must match, each expression matching anything).
fn fits_template(template: &str, uri: &str) -> bool {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        parts.push(&rest[..open]);
        match rest[open..].find('}') {
            Some(close) => rest = &rest[open + close + 1..],
            None => return false,
        }
    }
    parts.push(rest);
    if parts.len() == 1 {
        return template == uri;
    }
    let mut at = 0;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            if !uri.starts_with(part) {
                return false;
            }
            at = part.len();
        } else if i == parts.len() - 1 && !part.is_empty() {
            return uri.len() >= at + part.len() && uri.ends_with(part);
        } else {
            match uri[at..].find(part) {
                Some(found) => at += found + part.len(),
                None => return false,
            }
        }
    }
    true
}

/// The JSON-RPC error a client gets for `e`: an upstream's own code, message and data as they
/// were; the engine's errors under the code that fits.
fn rpc_of(e: &Error) -> Value {
    let code = e.code.unwrap_or(match e.kind {
        ErrorKind::InvalidArgument | ErrorKind::NotFound => codes::INVALID_PARAMS,
        _ => codes::INTERNAL_ERROR,
    });
    let mut error = Map::new();
    error.insert("code".into(), json!(code));
    error.insert("message".into(), json!(e.message));
    if let Some(data) = &e.data {
        error.insert("data".into(), data.clone());
    }
    Value::Object(error)
}

/// A tool as its server listed it, with `name` replaced (members in their order, the others'
/// values as written).
fn renamed(tool: &RawValue, name: &str, out: &mut String) {
    let members = match serde_json::from_str::<Members<'_>>(tool.get()) {
        Ok(m) => m.0,
        Err(_) => return out.push_str(tool.get()),
    };
    out.push('{');
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        if key == "name" {
            out.push_str(&Value::String(name.to_string()).to_string());
        } else {
            out.push_str(value.get());
        }
    }
    out.push('}');
}

/// An object's members in order, their values as text.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_served_as_listed_but_for_its_name() {
        let tool = RawValue::from_string(
            r#"{"inputSchema":{"type":"object"},"name":"echo","description":"Says \u00e9 back","x":1.50}"#.into(),
        )
        .unwrap();
        let mut out = String::new();
        renamed(&tool, "mcp__s__echo", &mut out);
        assert_eq!(
            out,
            r#"{"inputSchema":{"type":"object"},"name":"mcp__s__echo","description":"Says \u00e9 back","x":1.50}"#
        );
    }

    #[test]
    fn uri_templates_fit_loosely() {
        assert!(fits_template(
            "test://static/resource/{id}",
            "test://static/resource/7"
        ));
        assert!(fits_template("file:///{path}.txt", "file:///a/b.txt"));
        assert!(!fits_template("file:///{path}.txt", "file:///a/b.md"));
        assert!(!fits_template("test://x/{id}", "other://x/1"));
        assert!(fits_template("plain://same", "plain://same"));
    }
}
