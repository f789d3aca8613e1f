//! One server: connect (era negotiation), requests with their own timers, cancellation,
//! progress, pagination, and the host's event queue.
//!
//! A [`Client`] owns a transport and a pending-request table. Everything the server sends that is
//! not an answer to a host call becomes an event the host pulls; a server's request that needs the
//! host (sampling, elicitation, roots without a fixed list) waits for `respond` under its own timer
//! and is answered with an error if the host never does, so the server never hangs on us.

pub(crate) mod cache;
pub use crate::session::cancel;
pub mod event;
pub mod options;

mod host;
pub(crate) mod hosted_tasks;
mod inbound;
mod listen;
mod mrtr;
mod negotiate;
mod pages;
mod request;
mod schema;
mod skills;
mod spec;
pub(crate) use skills::fuzz_frontmatter;
pub(crate) use tasks::legacy_task_id;
#[cfg(test)]
mod core_tests;
mod factory;
pub(crate) mod started;
mod tasks;
mod tool_headers;
mod validator;

use crate::error::{Error, Result};
use crate::protocol::era::Era;
use crate::protocol::RawJson;
use crate::queue::{EventQueue, Pulled};
use crate::session::{Peer, Session};
use crate::transport::stdio::Started;
use crate::transport::{Inbound, Transport};
pub use event::Event;
use options::{CallOptions, ConnectOptions, ServerSpec};
use parking_lot::{Mutex, RwLock};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};
use std::time::Duration;

pub struct Client {
    shared: Arc<Shared>,
}

/// What the server asks of the host: its requests (and a modern call's input requests) that wait
/// for the host's `respond`, by event id; a host call resolved through its rounds (`mrtr.rs`).
struct InputRounds {
    waiting: Mutex<HashMap<String, HostRequest>>,
    next_id: AtomicU64,
}

/// What the client learned of the tools from the `tools/list` results seen.
struct ToolCatalog {
    /// The tools' input and output schemas.
    schemas: schema::ToolSchemas,
    /// Streamable HTTP: the tools' `x-mcp-header` parameters (see `tool_headers`).
    headers: Option<Arc<crate::transport::param_headers::ParamHeaders>>,
}

/// A request of the server that waits for the host's `respond`, under its own timer.
struct HostRequest {
    answer: HostAnswer,
    method: String,
    /// A form elicitation's schema defaults, filled into an accepted answer's content where the
    /// host left them out (connection option `elicitation_defaults`).
    defaults: Option<Map<String, Value>>,
    timer: tokio::task::JoinHandle<()>,
}

/// Where the host's answer goes.
enum HostAnswer {
    /// To the server, as the JSON-RPC response to its request (legacy era).
    Server(Value),
    /// To a call waiting on it: an input request of an `InputRequiredResult`, a task's input,
    /// or a URL elicitation a -32042 error asked for.
    Call(tokio::sync::oneshot::Sender<Result<Value>>),
    /// Into a task this client runs for the server (a task-augmented legacy request).
    Task(String),
}

struct Shared {
    options: ConnectOptions,
    /// The transport, the pending requests, their progress routes, the close state.
    session: Session,
    /// The host's started calls running as tasks or deferred (see `started`).
    started: started::StartedCalls,
    events: EventQueue<Event>,
    /// What the server asks of the host, and the rounds of a call (see `mrtr.rs`).
    rounds: InputRounds,
    /// Roots, log level, server capabilities and hosted tasks (see `host.rs`).
    host: host::HostState,
    era: Negotiated,
    tools: ToolCatalog,
    /// The skills extension: held entries and loaded skills (see `skills`).
    skills: skills::Skills,
    /// Results the server marked cacheable (see `cache.rs`).
    cache: cache::ResultCache,
    /// The `subscriptions/listen` stream of the modern era (see `listen.rs`).
    listen: Arc<listen::Listen>,
    /// Whether the credentials are being obtained (a remote connection's): the handshake's
    /// timers do not count that time (see `request.rs`).
    obtaining: Arc<crate::transport::credentials::Obtaining>,
}

/// The era negotiated at connect (see `negotiate.rs`); empty before.
#[derive(Default)]
struct Negotiated(RwLock<Option<EraState>>);

impl std::ops::Deref for Negotiated {
    type Target = RwLock<Option<EraState>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// The negotiated era, and for the modern era the request `_meta` entries, serialized once.
struct EraState {
    era: Era,
    /// `"io.modelcontextprotocol/protocolVersion":...,"...clientCapabilities":...,"...clientInfo":...`
    modern_meta: Option<String>,
}

/// The `mcplug::client` record of a connect: the server's name and transport, a stdio server's
/// command (never its arguments or environment, which may hold secrets), a remote URL with its
/// secrets masked (never its headers).
#[cold]
fn log_connect(spec: &ServerSpec) {
    let name = spec.name().unwrap_or("");
    match spec {
        ServerSpec::Stdio { config, .. } => {
            tracing::debug!(target: "mcplug::client", server = name,
            transport = "stdio", command = %config.command, "connecting")
        }
        ServerSpec::Http { config, .. }
        | ServerSpec::Sse { config, .. }
        | ServerSpec::Ws { config, .. } => {
            let transport = match spec {
                ServerSpec::Http { .. } => "http",
                ServerSpec::Sse { .. } => "sse",
                _ => "ws",
            };
            tracing::debug!(target: "mcplug::client", server = name, transport,
                url = %crate::redact::urls(&config.url), "connecting")
        }
    }
}

/// A remote spec with its credentials (OAuth, lazy: nothing happens before a 401), unless the
/// entry sends its own `Authorization` (a token the server refuses then fails the connect: no
/// OAuth behind the host's back). A server found to need authorization within the cache's time
/// fails at once when the connection cannot authorize (no probe). An entry with a
/// `headersHelper` has its headers supplied by it (see `auth::helper`), with OAuth behind it.
fn with_credentials(spec: &ServerSpec, shared: &Arc<Shared>) -> Result<ServerSpec> {
    let mut spec = spec.clone();
    let config = match &mut spec {
        ServerSpec::Http { config, .. }
        | ServerSpec::Sse { config, .. }
        | ServerSpec::Ws { config, .. } => config,
        ServerSpec::Stdio { .. } => return Ok(spec),
    };
    let static_authorization = config
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    let oauth = if static_authorization {
        None
    } else {
        let weak = Arc::downgrade(shared);
        let notify = Box::new(move |event: crate::auth::AuthEvent| {
            if let Some(shared) = weak.upgrade() {
                shared.events.push_event(Event::Auth(event));
            }
        });
        // Every OAuth request trusts what the server's connection trusts.
        let trust = crate::transport::tls::TlsChoice {
            entry: config.tls.as_deref().cloned(),
            connection: shared.options.tls.clone(),
        };
        Some(crate::auth::OAuth::new(
            &config.url,
            shared.name(),
            config.oauth.as_ref(),
            &shared.options.auth,
            trust,
            crate::transport::proxy::Proxies::resolve(
                config.proxy.as_deref(),
                shared.options.proxy.as_ref(),
            )?,
            notify,
        )?)
    };
    let credentials: Option<Arc<dyn crate::transport::credentials::Credentials>> =
        match &config.headers_helper {
            Some(command) => {
                let helper = crate::auth::helper::HeadersHelper::new(
                    command,
                    shared.name(),
                    &config.url,
                    shared.options.auth.helper_timeout,
                    &config.headers,
                    oauth.map(|o| o as Arc<dyn crate::transport::credentials::Credentials>),
                )?;
                // Sent by the helper, which replaces those of the same name.
                config.headers.clear();
                Some(Arc::new(helper))
            }
            None => match oauth {
                Some(oauth) => {
                    if let Some(e) = oauth.cached_needs_auth() {
                        return Err(e);
                    }
                    Some(oauth)
                }
                None => None,
            },
        };
    config.credentials = credentials.map(|inner| {
        crate::transport::credentials::Shared(Arc::new(crate::transport::credentials::Watched {
            inner,
            obtaining: shared.obtaining.clone(),
        }))
    });
    Ok(spec)
}

/// The spec's backwards compatibility: an `http` entry whose server refused `initialize` the way
/// an HTTP+SSE server does (400, 404, 405 without an MCP error) is tried as `sse` at the same
/// URL, a connection of its own.
fn connect_as_sse<'a>(
    spec: &'a ServerSpec,
    options: ConnectOptions,
    tag: Option<&'a str>,
    refusal: String,
) -> crate::transport::BoxFuture<'a, Result<(Client, Value)>> {
    Box::pin(async move {
        let ServerSpec::Http { name, config } = spec else {
            unreachable!("only an http entry falls back")
        };
        let sse = ServerSpec::Sse {
            name: name.clone(),
            config: config.clone(),
        };
        Client::connect_started(&sse, options, tag, None)
            .await
            .map_err(|mut e| {
                e.message = format!(
                    "{refusal}; as an HTTP+SSE server it failed too: {}",
                    e.message
                );
                e
            })
    })
}

/// A connection's state, before its transport is set (`http`: a Streamable HTTP connection,
/// which keeps the tools' parameter headers).
fn new_shared(name: Option<&str>, options: ConnectOptions, http: bool) -> Arc<Shared> {
    let cache_enabled = options.cache;
    Arc::new(Shared {
        events: EventQueue::with_consumer(options.max_events, options.engine_consumer),
        host: host::HostState::new(&options),
        session: Session::new(name, Peer::Server),
        options,
        started: Default::default(),
        rounds: InputRounds {
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        },
        era: Negotiated::default(),
        tools: ToolCatalog {
            schemas: schema::ToolSchemas::default(),
            headers: http.then(Default::default),
        },
        skills: Default::default(),
        cache: cache::ResultCache::new(cache_enabled),
        listen: Arc::new(listen::Listen::new()),
        obtaining: Default::default(),
    })
}

impl Client {
    /// Starts the server and negotiates the protocol era. The connect result gives the
    /// negotiated version, the server's info, capabilities and instructions.
    pub async fn connect(
        spec: &ServerSpec,
        options: ConnectOptions,
        tag: Option<&str>,
    ) -> Result<(Client, Value)> {
        Self::connect_started(spec, options, tag, None).await
    }

    /// Starts a stdio spec's server on the calling thread, before (and without) the runtime, for
    /// [`Client::connect_started`]; `None` for the other transports. See [`Started`].
    pub fn start_server(spec: &ServerSpec) -> Result<Option<Started>> {
        match spec {
            ServerSpec::Stdio { config, .. } => Started::start(config).map(Some),
            _ => Ok(None),
        }
    }

    /// [`Client::connect`] to a stdio server that `started` already started (from `spec`'s
    /// config, with no runtime needed: see [`Started`]); for other specs `started` is unused.
    pub async fn connect_started(
        spec: &ServerSpec,
        options: ConnectOptions,
        tag: Option<&str>,
        started: Option<Started>,
    ) -> Result<(Client, Value)> {
        crate::log::init();
        if tracing::enabled!(target: "mcplug::client", tracing::Level::DEBUG) {
            log_connect(spec);
        }
        let original = spec;
        let http_spec = matches!(spec, ServerSpec::Http { .. });
        let shared = new_shared(spec.name(), options, http_spec);
        let sink: Weak<dyn Inbound> = Arc::downgrade(&shared) as Weak<dyn Inbound>;
        let authorized;
        let spec = match spec {
            ServerSpec::Stdio { .. } => spec,
            _ => {
                authorized = with_credentials(spec, &shared)?;
                &authorized
            }
        };
        let (transport, http) = factory::transport_for(&shared, spec, started, sink).await?;
        shared.session.set_transport(transport);
        let client = Client { shared };

        // An interactive authorization inside the connect has its own limit on top.
        let authorizing = !matches!(spec, ServerSpec::Stdio { .. });
        let outcome = client
            .negotiated(tag, &spec.era_cache_key(), authorizing)
            .await;
        match outcome {
            Ok(info) => Ok((client, info)),
            Err(e) => {
                client.close().await;
                // An http entry refused as an HTTP+SSE server would be is connected again as
                // one, with the same options (this connect's tag handed on, not held twice).
                if let Some(refusal) = http.and_then(|h| h.refused_initialize()) {
                    let options = client.shared.options.clone();
                    return connect_as_sse(original, options, tag, refusal).await;
                }
                Err(e)
            }
        }
    }

    /// The negotiation of a connect whose transport is set, within the connect's limit (with an
    /// interactive authorization's on top when `authorizing`) and until its cancel; a connected
    /// client then opens its `subscriptions/listen` stream when it should.
    async fn negotiated(
        &self,
        tag: Option<&str>,
        signature: &str,
        authorizing: bool,
    ) -> Result<Value> {
        let guard = cancel::Cancels {
            tag: tag.map(cancel::register),
            own: self.shared.options.cancel.as_ref().map(|c| c.0.clone()),
        };
        // Boxed: its state would otherwise sit inline in the connect future, which a host
        // thread with a small stack polls (tests/c/remote.c).
        let negotiate = Box::pin(self.shared.era.negotiate(&self.shared, signature));
        let limit = match self.shared.options.connect_timeout {
            Some(l) if authorizing && self.shared.options.auth.interactive => {
                Some(l + self.shared.options.auth.timeout)
            }
            l => l,
        };
        let outcome = tokio::select! {
            r = with_limit(limit, negotiate) => match r {
                Some(r) => r,
                None => Err(self.shared.connect_timed_out()),
            },
            _ = guard.fired() => Err(Error::cancelled_by_host("connect")),
        };
        let server = self.shared.name().unwrap_or("");
        match &outcome {
            Ok(info) => tracing::debug!(target: "mcplug::client", server,
                era = info.get("era").and_then(serde_json::Value::as_str).unwrap_or(""),
                version = info.get("protocol_version").and_then(serde_json::Value::as_str).unwrap_or(""),
                "connected"),
            Err(e) => tracing::debug!(target: "mcplug::client", server, kind = e.kind.as_str(),
                "connect failed: {}", e.message),
        }
        if outcome.is_ok() {
            self.shared.listen.listen_at_connect(&self.shared);
        }
        outcome
    }

    /// Connects over a transport of the caller's own, made by `make` from the connection's
    /// inbound sink (what the transport delivers every message it reads to): an in-process
    /// server, a transport this crate does not have (the unit tests' in-memory one). The client
    /// asks it for its optional capabilities ([`crate::transport::Driven`],
    /// [`crate::transport::HostRead`]) once. `signature` keys the era cache: connections with the
    /// same signature reach the same server.
    pub async fn connect_with(
        name: Option<&str>,
        options: ConnectOptions,
        signature: &str,
        make: impl FnOnce(Weak<dyn Inbound>) -> Arc<dyn Transport>,
    ) -> Result<(Client, Value)> {
        crate::log::init();
        let shared = new_shared(name, options, false);
        let sink: Weak<dyn Inbound> = Arc::downgrade(&shared) as Weak<dyn Inbound>;
        shared.session.set_transport(make(sink));
        let client = Client { shared };
        match client.negotiated(None, signature, false).await {
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

    /// A served client's request (`CallOptions::relayed`, `mcplug serve`): passed on, and its
    /// answer passed back, as they are — no cache, no schema checks, no input rounds. Apart
    /// from `request`, so that the host's requests carry none of it (a host thread's stack is
    /// the host's).
    pub(crate) async fn relay(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let timeout = options.timeout.or(self.shared.options.request_timeout);
        self.shared
            .rounds
            .call(
                &self.shared,
                method,
                mrtr::Call::Params(params),
                timeout,
                options,
                None,
            )
            .await
    }

    /// Any request, with the host's per-call options; `default_timeout` is the layer's default
    /// (request or tool timeout). Returns the result untouched. `tools/list` results teach the
    /// client the tools' schemas, and `tools/call` is checked as [`Client::call_tool`] checks it.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        if let Some(handled) = self
            .modern_subscription(method, params.as_ref(), options)
            .await
        {
            return handled;
        }
        if options.all_pages {
            if let Some(field) = page_field(method) {
                let mut all =
                    RawJson::from_value(&self.list_all(method, field, params, options).await?);
                if method == "tools/list" {
                    all = self.shared.tools.screen_tools(&self.shared, all, true);
                    self.shared
                        .tools
                        .schemas
                        .learn(all.as_str(), true, &self.shared.events);
                }
                return Ok(all);
            }
            return Err(Error::invalid(format!(
                "option `all_pages` only applies to list methods, not {method:?}"
            )));
        }
        // What the schema checks need from the params, before they move into the request.
        let (tool, first_page) = match method {
            "tools/call" => {
                let tool = params.as_ref().and_then(|p| p.get("name")?.as_str());
                let tool = tool.map(str::to_string);
                if let Some(tool) = &tool {
                    self.shared.tools.check_tool_headers(&self.shared, tool)?;
                    if options
                        .validate_arguments
                        .unwrap_or(self.shared.options.validate_arguments)
                    {
                        let args = params.as_ref().and_then(|p| p.get("arguments"));
                        self.shared.tools.schemas.check_argument_value(
                            tool,
                            args,
                            &self.shared.events,
                        )?;
                    }
                }
                (tool, false)
            }
            "tools/list" => (
                None,
                params
                    .as_ref()
                    .and_then(|p| p.get("cursor"))
                    .is_none_or(Value::is_null),
            ),
            _ => (None, false),
        };
        let timeout = options.timeout.or(self.shared.options.request_timeout);
        let mut result = match self
            .shared
            .cache
            .cache_key(&self.shared, method, params.as_ref())
        {
            Some(key) => {
                self.shared
                    .cache
                    .fetch_cacheable(&self.shared, key, method, params, timeout, options)
                    .await?
            }
            None => {
                self.shared
                    .rounds
                    .call(
                        &self.shared,
                        method,
                        mrtr::Call::Params(params),
                        timeout,
                        options,
                        None,
                    )
                    .await?
            }
        };
        if let Some(tool) = tool {
            self.shared
                .tools
                .schemas
                .check_result(&tool, &result, &self.shared.events)?;
        } else if method == "tools/list" {
            let complete = first_page && !has_next_cursor(result.as_str());
            result = self
                .shared
                .tools
                .screen_tools(&self.shared, result, complete);
            self.shared
                .tools
                .schemas
                .learn(result.as_str(), first_page, &self.shared.events);
        }
        Ok(result)
    }

    /// `tools/call`: tool calls have their own timeout layer (unbounded unless the host sets one).
    /// `arguments` is the JSON object of arguments, as validated raw text.
    ///
    /// With `validate_arguments` (per call, or the connection's default), the arguments are
    /// checked against the tool's `inputSchema` first: `invalid_argument`, nothing sent. A result
    /// that breaks the tool's `outputSchema` is `invalid_result` (see `schema.rs`); either check
    /// needs the tool to have been seen in a `tools/list` result.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let shared = &self.shared;
        shared.validate_arguments(name, arguments, options)?;
        let timeout = options.timeout.or(shared.options.tool_timeout);
        // As checked_tool_call, one future less deep (each level is copied when it starts).
        let result = shared
            .rounds
            .call(
                shared,
                "tools/call",
                mrtr::Call::Tool { name, arguments },
                timeout,
                options,
                None,
            )
            .await?;
        shared
            .tools
            .schemas
            .check_result(name, &result, &shared.events)?;
        crate::model::tool_result_raw(result, options.format)
    }

    /// `tools/list`, every page, as `{"tools": [...]}`; with `options.cursor`, that one page as
    /// the server sent it.
    pub async fn list_tools(&self, options: &CallOptions) -> Result<RawJson> {
        let shared = &self.shared;
        if let Some(cursor) = &options.cursor {
            let timeout = options.timeout.or(shared.options.request_timeout);
            let params = Some(json!({ "cursor": cursor }));
            let key = shared
                .cache
                .cache_key(shared, "tools/list", params.as_ref());
            let page = shared
                .cache
                .fetch_page(shared, key, "tools/list", params, timeout, options)
                .await?;
            if self.shared.host.wants_tool_tasks() {
                if let Some(Value::Array(tools)) = page.value()?.get("tools") {
                    self.shared.host.remember_tools(tools, false);
                }
            }
            let page = shared.tools.screen_tools(shared, page, false);
            shared
                .tools
                .schemas
                .learn(page.as_str(), false, &shared.events);
            return crate::model::listing_raw(page, options.format);
        }
        let all = self.list_all("tools/list", "tools", None, options).await?;
        let all = shared
            .tools
            .screen_tools(shared, RawJson::from_value(&all), true);
        shared
            .tools
            .schemas
            .learn(all.as_str(), true, &shared.events);
        crate::model::listing_raw(all, options.format)
    }

    /// Follows `nextCursor` to the end (`""` is a valid cursor; a missing one ends the list) and
    /// returns `{field: [every item]}`. A fresh timer per page; the listing is bounded (see
    /// `pages.rs`: its bytes by `max_list_bytes`, its pages, its cursors kept as hashes).
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
        let mut pages = pages::Pages::new(method, self.shared.options.list_limit());
        loop {
            let params = Some(Value::Object(base.clone()));
            let key = self
                .shared
                .cache
                .cache_key(&self.shared, method, params.as_ref());
            let page = self
                .shared
                .cache
                .fetch_page(&self.shared, key, method, params, timeout, options)
                .await?;
            pages.page(page.as_str().len())?;
            let mut page = page.value()?;
            match page.get_mut(field).map(Value::take) {
                Some(Value::Array(list)) => items.extend(list),
                None | Some(Value::Null) => {}
                Some(other) => {
                    return Err(Error::protocol(format!(
                        "{method} result field `{field}` is not an array: {other}"
                    )))
                }
            }
            match page.get_mut("nextCursor").map(Value::take) {
                None | Some(Value::Null) => {
                    if method == "tools/list" && self.shared.host.wants_tool_tasks() {
                        self.shared.host.remember_tools(&items, true);
                    }
                    let mut out = Map::new();
                    out.insert(field.to_string(), Value::Array(items));
                    return Ok(Value::Object(out));
                }
                Some(Value::String(cursor)) => {
                    pages.next(&cursor)?;
                    base.insert("cursor".into(), Value::String(cursor));
                }
                Some(other) => {
                    return Err(Error::protocol(format!(
                        "{method}: `nextCursor` is not a string: {other}"
                    )))
                }
            }
        }
    }

    /// `resources/subscribe` and `resources/unsubscribe` on a modern connection: the era has
    /// no such methods; the URI joins (or leaves) the `subscriptions/listen` stream instead.
    /// `None`: any other request, or a legacy connection (sent to the server as is).
    async fn modern_subscription(
        &self,
        method: &str,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Option<Result<RawJson>> {
        if !matches!(method, "resources/subscribe" | "resources/unsubscribe")
            || !matches!(self.era(), Some(Era::Modern { .. }))
        {
            return None;
        }
        Some(if method == "resources/subscribe" {
            self.shared
                .listen
                .subscribe_resource(&self.shared, params, options)
                .await
        } else {
            self.shared.listen.unsubscribe_resource(params)
        })
    }

    /// Sends a notification to the server.
    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<()> {
        self.shared.session.notify(method, params.as_ref()).await
    }

    /// Waits for the next event (`None`: forever).
    pub fn next_event(&self, wait: Option<Duration>) -> Pulled {
        self.shared.listen.events_wanted(&self.shared);
        match self.shared.started.drive_for_events(&self.shared, wait) {
            Some(started::Waited::Ready) => self.shared.events.pull(Some(Duration::ZERO)),
            Some(started::Waited::TimedOut) => Pulled::TimedOut,
            None => self.shared.events.pull(wait),
        }
    }

    /// The next event as queued (a value, when the connection was made with
    /// `engine_consumer`), without waiting: for the engine's own consumer, which awaits
    /// `events_changed` when there is none.
    pub fn next_item(&self) -> crate::queue::PulledItem<Event> {
        self.shared.listen.events_wanted(&self.shared);
        match self
            .shared
            .started
            .drive_for_events(&self.shared, Some(Duration::ZERO))
        {
            Some(started::Waited::TimedOut) => crate::queue::PulledItem::Empty,
            _ => self.shared.events.pull_item(),
        }
    }

    /// The host's answer to a server's request event: `{"id", "result"}` or `{"id", "error"}`.
    pub async fn respond(&self, response: &Value) -> Result<()> {
        self.shared.rounds.respond(&self.shared, response).await
    }

    /// Replaces the roots answered to `roots/list` (a list of `{uri, name}`, or `{"roots": [...]}`;
    /// `null` hands `roots/list` to the host again) and, on a legacy connection that declared
    /// `roots.listChanged`, sends `notifications/roots/list_changed`. Returns `{"notified": bool}`.
    pub async fn set_roots(&self, roots: &Value) -> Result<Value> {
        self.shared.host.set_roots(&self.shared, roots).await
    }

    /// Asks the server for log messages at `level` and above: `logging/setLevel` on a legacy
    /// connection; on a modern one the level rides every later request's `_meta`.
    pub async fn set_log_level(&self, level: &Value, options: &CallOptions) -> Result<Value> {
        self.shared
            .host
            .set_log_level(&self.shared, level, options)
            .await
    }

    /// Closes gracefully: pending calls fail with `closed`, waiting event pulls return `closed`,
    /// and the server (its whole process group) is gone when this returns.
    pub async fn close(&self) {
        let reason = Error::closed("the client was closed by the host");
        self.shared.shut(reason.clone(), Shutdown::Host);
        if let Some(t) = self.shared.session.transport_if_set() {
            t.close().await;
            // What the server wrote to stderr before it went (it may race its last answer on
            // another pipe) is still delivered, before the final event.
            let _ = tokio::time::timeout(Duration::from_millis(200), t.drained()).await;
        }
        self.shared.events.close_with_event(Event::closed(&reason));
    }

    /// Fails pending calls and wakes event waiters at once, without waiting for the server to
    /// exit; with `abandon_events`, queued events are dropped so that every waiter sees the end
    /// now (a handle about to be freed).
    pub fn begin_close(&self, abandon_events: bool) {
        if abandon_events {
            // First, so that no waiter can be handed the final `closed` event in between.
            self.shared.events.abandon();
        }
        self.shared.shut(
            Error::closed("the client was closed by the host"),
            Shutdown::Host,
        );
    }

    pub fn is_closed(&self) -> bool {
        self.shared.session.is_closed()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // A listening task that waits for something to listen to ends.
        self.listen.shut();
    }
}

/// Who ends a connection: the host (close/free), or the transport (the server went away).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    Host,
    Transport,
}

/// Whether a list result names a next page (a `nextCursor` that is not null).
fn has_next_cursor(listing: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Next {
        #[serde(rename = "nextCursor")]
        next: Option<Value>,
    }
    serde_json::from_str::<Next>(listing).is_ok_and(|n| n.next.is_some_and(|c| !c.is_null()))
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

/// Resolves when the host cancels (by tag, or a started call's own cancel); never without one.
async fn cancels_fired(cancels: Option<&cancel::Cancels>) {
    match cancels {
        Some(c) => c.fired().await,
        None => std::future::pending().await,
    }
}

impl Shared {
    /// With `validate_arguments` (per call, or the connection's default), a tool call's
    /// arguments are checked against its `inputSchema` before anything is sent.
    fn validate_arguments(
        &self,
        name: &str,
        arguments: Option<&RawValue>,
        options: &CallOptions,
    ) -> Result<()> {
        self.tools.check_tool_headers(self, name)?;
        if options
            .validate_arguments
            .unwrap_or(self.options.validate_arguments)
        {
            self.tools
                .schemas
                .check_arguments(name, arguments, &self.events)?;
        }
        Ok(())
    }

    /// A tool call resolved through its rounds (`mrtr::call`), its result checked against the
    /// tool's `outputSchema`. `first`: the first round's outcome when it already came.
    async fn checked_tool_call(
        self: &Arc<Self>,
        name: &str,
        arguments: Option<&RawValue>,
        timeout: Option<Duration>,
        options: &CallOptions,
        first: Option<Result<RawJson>>,
    ) -> Result<RawJson> {
        let result = self
            .rounds
            .call(
                self,
                "tools/call",
                mrtr::Call::Tool { name, arguments },
                timeout,
                options,
                first,
            )
            .await?;
        self.tools
            .schemas
            .check_result(name, &result, &self.events)?;
        Ok(result)
    }

    fn remote_limits(&self) -> crate::transport::remote::RemoteLimits {
        crate::transport::remote::RemoteLimits {
            max_message_bytes: self.options.max_message_bytes,
            // An unbounded connect still bounds each TCP connect and handshake.
            connect_timeout: self
                .options
                .connect_timeout
                .unwrap_or(options::DEFAULT_CONNECT_TIMEOUT),
            shutdown_grace: self.options.shutdown_grace,
            tls: self.options.tls.clone(),
            proxy: self.options.proxy.clone(),
        }
    }

    /// The connection's name, for logs and messages.
    fn name(&self) -> Option<&str> {
        self.session.name()
    }

    fn transport(&self) -> Result<&Arc<dyn Transport>> {
        self.session.transport()
    }

    fn check_open(&self) -> Result<()> {
        self.session.check_open()
    }

    fn connect_timed_out(&self) -> Error {
        Error::timeout(format!(
            "connect timed out after {} ms: the server did not complete the handshake{}",
            self.options
                .connect_timeout
                .map(|d| d.as_millis())
                .unwrap_or_default(),
            self.session.stderr_hint()
        ))
    }

    /// Marks the connection closed with `reason`: every pending call fails with it at once,
    /// requests waiting for the host are dropped, and event waiters see the end.
    fn shut(&self, reason: Error, by: Shutdown) {
        let Some(tickets) = self.session.shut(&reason) else {
            return;
        };
        self.listen.shut();
        self.started.drop_deferred();
        self.started.fail_started(self, tickets, &reason);
        for (_, r) in self.rounds.waiting.lock().drain() {
            r.timer.abort();
        }
        self.host.hosted.clear();
        if by == Shutdown::Host {
            // The host's close() ends the event stream itself, once the server is gone.
            return;
        }
        self.events.close_with_event(Event::closed(&reason));
        {
            // The server went away by itself: still reap it and anything left in its group.
            if let Some(t) = self.session.transport_if_set().cloned() {
                crate::runtime::spawn(async move { t.close().await });
            }
        }
    }
}
