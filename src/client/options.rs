//! Connection options and per-call options, parsed from the host's JSON with errors that name
//! the offending field.

pub use super::spec::ServerSpec;
use crate::error::{Error, Result};
use crate::protocol::era;
pub use crate::shape::Limit;
use crate::shape::{as_object, bool_of, count, flag, limit_of, unknown_option, usize_of};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The connection options whose shape serde checks (an error names the option); the ones with
/// rules of their own stay JSON values, checked by [`ConnectOptions::parse`]. The auth options
/// in the same object are `AuthOptions`'; `tag` is the C ABI's.
#[derive(Deserialize)]
struct RawConnect {
    #[serde(default)]
    connect_timeout_ms: Limit,
    #[serde(default)]
    request_timeout_ms: Limit,
    #[serde(default)]
    tool_timeout_ms: Limit,
    #[serde(default)]
    host_request_timeout_ms: Limit,
    #[serde(default)]
    discover_timeout_ms: Limit,
    #[serde(default)]
    shutdown_grace_ms: Limit,
    client_info: Option<Value>,
    capabilities: Option<Value>,
    handlers: Option<Value>,
    roots: Option<Value>,
    log_level: Option<Value>,
    protocol_versions: Option<Value>,
    listen: Option<Value>,
    cancel_token: Option<Value>,
    tls: Option<Value>,
    proxy: Option<Value>,
    #[serde(default, deserialize_with = "flag")]
    tasks: Option<bool>,
    #[serde(default, deserialize_with = "flag")]
    elicitation_defaults: Option<bool>,
    #[serde(default, deserialize_with = "flag")]
    validate_arguments: Option<bool>,
    #[serde(default, deserialize_with = "flag")]
    cache: Option<bool>,
    #[serde(default, deserialize_with = "count")]
    max_input_rounds: Option<usize>,
    #[serde(default, deserialize_with = "count")]
    max_message_bytes: Option<usize>,
    #[serde(default, deserialize_with = "count")]
    max_events: Option<usize>,
    #[serde(default, deserialize_with = "count")]
    max_list_bytes: Option<usize>,
}

/// Options of one connection (`options_json` of `mcplug_client_connect`).
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub connect_timeout: Option<Duration>,
    pub request_timeout: Option<Duration>,
    pub tool_timeout: Option<Duration>,
    /// How long a server's request waits for the host's answer before the server gets an error.
    pub host_request_timeout: Duration,
    pub client_info: Value,
    /// What the host declared (`sampling`, `elicitation`, `roots`, `experimental`, ...), normalized
    /// (`true` is `{}`, `false` is absent), plus `roots` when roots are given.
    pub capabilities: Value,
    /// What the client declares in the `initialize` handshake: `capabilities`, plus the `tasks`
    /// the engine itself serves (client-hosted sampling/elicitation tasks) when `tasks` is on.
    pub legacy_capabilities: Value,
    /// What the client declares in each modern request's `_meta`: `capabilities`, plus the
    /// `io.modelcontextprotocol/tasks` extension when `tasks` is on.
    pub modern_capabilities: Value,
    /// Roots answered automatically to `roots/list`, when the host gives them.
    pub roots: Option<Value>,
    /// Whether the engine takes part in tasks (see `tasks`): tool calls that become tasks are
    /// awaited, and (legacy) the server may have the client run its requests as tasks.
    pub tasks: bool,
    /// The log level asked of the server from the start (`logging/setLevel`, or per request).
    pub log_level: Option<String>,
    /// How many `InputRequiredResult` rounds (and -32042 retries) one call may take.
    pub max_input_rounds: usize,
    /// `discover_timeout_ms`: how long the `server/discover` probe waits.
    pub discover_timeout: Duration,
    /// Fill a form elicitation's schema `default`s into an accepted answer's content where the
    /// host left them out.
    pub elicitation_defaults: bool,
    /// Versions the client may negotiate, newest first.
    pub modern_versions: Vec<String>,
    pub legacy_versions: Vec<String>,
    pub max_message_bytes: usize,
    pub max_events: usize,
    /// `max_list_bytes`: the most bytes of page text one listing of every page takes (`None`:
    /// the default, see [`ConnectOptions::list_limit`]).
    pub max_list_bytes: Option<usize>,
    /// The events are taken by the engine (a manager's pump), not a host: they stay typed
    /// values in the queue (`EventQueue::with_consumer`). Not a host's option.
    pub engine_consumer: bool,
    pub shutdown_grace: Duration,
    /// Check a tool call's arguments against the tool's `inputSchema` before sending (the
    /// default of the per-call option).
    pub validate_arguments: bool,
    /// Keep results the server marks cacheable (2026-07-28 `ttlMs`/`cacheScope`, see
    /// `client/cache.rs`) and answer from them while they are fresh.
    pub cache: bool,
    /// When a modern connection opens its `subscriptions/listen` stream of list changes.
    pub listen: ListenMode,
    /// Authorization (OAuth) of remote servers: the store, interactive or not, its limits.
    pub auth: crate::auth::AuthOptions,
    /// `tls`: the trust and client certificate of every remote server of the connection (a
    /// server entry's own `tls` fields win).
    pub tls: Option<crate::transport::tls::TlsOptions>,
    /// `proxy`: every remote server's proxy (a URL, or `false` for none), over the environment
    /// (a server entry's own `proxy` wins).
    pub proxy: Option<crate::transport::proxy::ProxySetting>,
    /// The signal of the connect's `cancel_token` (see `client/cancel.rs`): cancels the connect.
    pub(crate) cancel: Option<OwnCancel>,
}

/// The connection option `listen`: when the list changes the server offers are listened for
/// (2026-07-28 `subscriptions/listen`; see `client/listen.rs`). Resource subscriptions
/// (`resources/subscribe`) open the stream in every mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenMode {
    /// `"auto"`: once the host waits for events (it has a consumer for what would arrive).
    #[default]
    Auto,
    /// `true`: right after connect.
    Always,
    /// `false`: never.
    Never,
}

pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The `server/discover` probe waits this long by default (`discover_timeout_ms`; never more
/// than half the connect budget) before a silent server is taken for a legacy one. A server
/// that ignores unknown methods costs this much on its first connect in a process (then it is
/// known to be legacy).
pub const MAX_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The most `InputRequiredResult` rounds one call takes before the server is called broken.
const DEFAULT_MAX_INPUT_ROUNDS: usize = 16;
/// The extension identifier of tasks in the 2026-07-28 era.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
pub use crate::protocol::LOG_LEVELS;

/// A log level the host gave, checked against the eight MCP levels.
pub fn parse_log_level(value: &Value, what: &str) -> Result<String> {
    match value.as_str() {
        Some(level) if LOG_LEVELS.contains(&level) => Ok(level.to_string()),
        _ => Err(Error::invalid(format!(
            "{what} must be one of {} (got {value})",
            LOG_LEVELS.join(", ")
        ))),
    }
}

/// Roots as the host gives them: `[{"uri": "file://...", "name"?: "..."}]`.
pub fn parse_roots(value: &Value, what: &str) -> Result<Value> {
    let list = value.as_array().ok_or_else(|| {
        Error::invalid(format!(
            "{what} must be an array of {{uri, name}} (got {value})"
        ))
    })?;
    for (i, r) in list.iter().enumerate() {
        let Some(obj) = r.as_object() else {
            return Err(Error::invalid(format!(
                "{what}[{i}] must be an object {{uri, name}} (got {r})"
            )));
        };
        match obj.get("uri").and_then(Value::as_str) {
            Some(uri) if uri.starts_with("file://") => {}
            Some(uri) => {
                return Err(Error::invalid(format!(
                    "{what}[{i}].uri must be a file:// URI, as MCP requires of roots (got {uri:?})"
                )))
            }
            None => return Err(Error::invalid(format!("{what}[{i}] needs a string `uri`"))),
        }
        if obj.get("name").is_some_and(|n| !n.is_string()) {
            return Err(Error::invalid(format!("{what}[{i}].name must be a string")));
        }
    }
    Ok(value.clone())
}

/// The capability a handler for a server's request declares (what it can answer): sampling;
/// elicitation in form mode; roots, whose changes the host announces.
const CAPABILITY_OF_HANDLER: &[(&str, &str, &str)] = &[
    ("sampling/createMessage", "sampling", "{}"),
    ("elicitation/create", "elicitation", r#"{"form": {}}"#),
    ("roots/list", "roots", r#"{"listChanged": true}"#),
];

/// The capabilities the host's handlers imply: option `handlers` names the methods the host
/// answers through a handler (a binding sends the ones it was given). A method that implies no
/// capability (a notification's, `auth/authorize`) declares nothing.
fn handler_capabilities(handlers: &Value) -> Result<Map<String, Value>> {
    let bad = || {
        Error::invalid(format!(
            "option `handlers` must be an array of method names, such as [\"sampling/createMessage\", \"roots/list\"] (got {handlers})"
        ))
    };
    let mut out = Map::new();
    for method in handlers.as_array().ok_or_else(bad)? {
        let method = method.as_str().ok_or_else(bad)?;
        if let Some((_, capability, declared)) =
            CAPABILITY_OF_HANDLER.iter().find(|(m, _, _)| *m == method)
        {
            let declared = serde_json::from_str(declared).expect("a constant's JSON");
            out.insert(capability.to_string(), declared);
        }
    }
    Ok(out)
}

/// The capabilities declared at connect: those the handlers imply, then the host's own
/// `capabilities` over them (`sampling`, `elicitation` and `roots` merge one level deep, so
/// `{"elicitation": {"url": {}}}` adds URL mode to the form mode of an elicitation handler;
/// `false` leaves a capability out).
fn merge_capabilities(implied: Map<String, Value>, explicit: Option<&Value>) -> Result<Value> {
    let mut out = implied;
    let explicit = match explicit {
        None | Some(Value::Null) => return Ok(Value::Object(out)),
        Some(v) => as_object(v, "option `capabilities`")?,
    };
    for (key, value) in explicit {
        let nested = matches!(key.as_str(), "sampling" | "elicitation" | "roots");
        match (out.get_mut(key), value) {
            (Some(Value::Object(before)), Value::Object(more)) if nested => {
                for (k, v) in more {
                    before.insert(k.clone(), v.clone());
                }
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

/// A capability flag as the host may write it: `true` or an object declares it (`true` is `{}`),
/// `false` or `null` leaves it out.
fn capability_flag(value: &Value, what: &str) -> Result<Option<Value>> {
    match value {
        Value::Bool(true) => Ok(Some(json!({}))),
        Value::Bool(false) | Value::Null => Ok(None),
        Value::Object(_) => Ok(Some(value.clone())),
        other => Err(Error::invalid(format!(
            "{what} must be an object, true or false (got {other})"
        ))),
    }
}

/// The host's `capabilities` option, normalized and checked: the capabilities the engine acts on
/// (`sampling` with `tools`, `elicitation` with `form`/`url`, `roots` with `listChanged`) must
/// have their spec shapes; anything else (`experimental`, other `extensions`) passes through.
fn normalize_capabilities(caps: &Value) -> Result<Value> {
    let obj = as_object(caps, "option `capabilities`")?;
    let mut out = Map::new();
    for (key, value) in obj {
        let what = format!("capability `{key}`");
        match key.as_str() {
            "sampling" | "elicitation" | "roots" => {
                let Some(mut declared) = capability_flag(value, &what)? else {
                    continue;
                };
                let inner = declared.as_object_mut().expect("a flag is an object");
                let subs: &[&str] = match key.as_str() {
                    "sampling" => &["tools", "context"],
                    "elicitation" => &["form", "url"],
                    _ => &[],
                };
                for sub in subs {
                    if let Some(v) = inner.get(*sub).cloned() {
                        match capability_flag(&v, &format!("capability `{key}.{sub}`"))? {
                            Some(v) => {
                                inner.insert(sub.to_string(), v);
                            }
                            None => {
                                inner.remove(*sub);
                            }
                        }
                    }
                }
                if key == "elicitation"
                    && inner.is_empty()
                    && value.as_object().is_some_and(|m| !m.is_empty())
                {
                    return Err(Error::invalid(
                        "capability `elicitation` declares neither `form` nor `url`; an elicitation capability must support at least one mode",
                    ));
                }
                if key == "roots" {
                    if let Some(v) = inner.get("listChanged") {
                        if !v.is_boolean() {
                            return Err(Error::invalid(format!(
                                "capability `roots.listChanged` must be true or false (got {v})"
                            )));
                        }
                    }
                }
                out.insert(key.clone(), declared);
            }
            "tasks" => {
                return Err(Error::invalid(
                    "capability `tasks` is declared by the engine itself (it serves the tasks it declares): use the connection option `tasks` (true or false) instead",
                ))
            }
            "extensions" => {
                let ext = as_object(value, "capability `extensions`")?;
                if ext.contains_key(TASKS_EXTENSION) {
                    return Err(Error::invalid(format!(
                        "capability `extensions.{TASKS_EXTENSION}` is declared by the engine itself: use the connection option `tasks` (true or false) instead"
                    )));
                }
                out.insert(key.clone(), value.clone());
            }
            "experimental" => {
                as_object(value, "capability `experimental`")?;
                out.insert(key.clone(), value.clone());
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(Value::Object(out))
}

impl Default for ConnectOptions {
    fn default() -> Self {
        let mut o = ConnectOptions {
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            tool_timeout: None,
            host_request_timeout: DEFAULT_REQUEST_TIMEOUT,
            client_info: json!({"name": "mcplug", "version": env!("CARGO_PKG_VERSION")}),
            capabilities: json!({}),
            legacy_capabilities: json!({}),
            modern_capabilities: json!({}),
            roots: None,
            tasks: true,
            log_level: None,
            max_input_rounds: DEFAULT_MAX_INPUT_ROUNDS,
            discover_timeout: MAX_PROBE_TIMEOUT,
            elicitation_defaults: false,
            modern_versions: era::MODERN_VERSIONS.iter().map(|s| s.to_string()).collect(),
            legacy_versions: era::LEGACY_VERSIONS.iter().map(|s| s.to_string()).collect(),
            max_message_bytes: 32 << 20,
            max_events: 10_000,
            max_list_bytes: None,
            engine_consumer: false,
            shutdown_grace: Duration::from_millis(500),
            validate_arguments: false,
            cache: true,
            listen: ListenMode::Auto,
            auth: Default::default(),
            tls: None,
            proxy: None,
            cancel: None,
        };
        o.derive_capabilities();
        o
    }
}

impl ConnectOptions {
    /// How a connection with these options to `server` goes now: its proxy and TLS trust —
    /// `{"proxy": URL|null (no credentials), "proxy_from", "trust": [sources],
    /// "client_certificate": where from|null}`. `None` for a stdio server.
    pub fn route(&self, server: &ServerSpec) -> Result<Option<Value>> {
        let Some(remote) = server.remote() else {
            return Ok(None);
        };
        let proxies = crate::transport::proxy::Proxies::resolve(
            remote.proxy.as_deref(),
            self.proxy.as_ref(),
        )?;
        let trust = crate::transport::tls::trust_for(remote.tls.as_deref(), self.tls.as_ref())?;
        let url = crate::transport::remote::parse_url(&remote.url)?;
        Ok(Some(json!({
            "proxy": proxies.for_url(&url).map(crate::transport::proxy::shown),
            "proxy_from": proxies.from,
            "trust": trust.sources,
            "client_certificate": trust.client_cert,
        })))
    }
}

/// The keys of a connection's options (`tag` is read by the C ABI); any other is refused.
pub const CONNECT_KEYS: &[&str] = &[
    "connect_timeout_ms",
    "request_timeout_ms",
    "tool_timeout_ms",
    "host_request_timeout_ms",
    "client_info",
    "capabilities",
    "handlers",
    "roots",
    "log_level",
    "protocol_versions",
    "tasks",
    "max_input_rounds",
    "discover_timeout_ms",
    "elicitation_defaults",
    "max_message_bytes",
    "max_events",
    "max_list_bytes",
    "shutdown_grace_ms",
    "validate_arguments",
    "cache",
    "listen",
    "tag",
    "cancel_token",
    "format",
    "tls",
    "proxy",
];

/// A Claude Code environment variable that holds a whole number (`MCP_TIMEOUT` and
/// `MCP_TOOL_TIMEOUT` in milliseconds, `MAX_MCP_OUTPUT_TOKENS`), read through `env`: `None`
/// when unset or empty; anything but a number above 0 is refused, named.
pub(crate) fn env_number(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<u64>> {
    let Some(text) = env(name).filter(|t| !t.trim().is_empty()) else {
        return Ok(None);
    };
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(Error::invalid(format!(
            "environment variable {name} must be a whole number above 0 (got {text:?})"
        ))),
    }
}

/// The process's environment, as `env_number` reads it.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

impl ConnectOptions {
    /// The options a host gives (`None`: all defaults), over Claude Code's environment
    /// variables `MCP_TIMEOUT` (the connect timeout) and `MCP_TOOL_TIMEOUT` (a tool call's),
    /// both in milliseconds, which are defaults under what the options say.
    pub fn parse(value: Option<&Value>) -> Result<Self> {
        Self::parse_with(value, &process_env)
    }

    pub(crate) fn parse_with(
        value: Option<&Value>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut o = ConnectOptions::default();
        if let Some(ms) = env_number(env, "MCP_TIMEOUT")? {
            o.connect_timeout = Some(Duration::from_millis(ms));
        }
        if let Some(ms) = env_number(env, "MCP_TOOL_TIMEOUT")? {
            o.tool_timeout = Some(Duration::from_millis(ms));
        }
        let Some(value) = value else { return Ok(o) };
        if value.is_null() {
            return Ok(o);
        }
        let obj = as_object(value, "options_json")?;
        if let Some(k) = obj.keys().find(|k| {
            !CONNECT_KEYS.contains(&k.as_str()) && !crate::auth::AUTH_KEYS.contains(&k.as_str())
        }) {
            return Err(unknown_option(k, &[CONNECT_KEYS, crate::auth::AUTH_KEYS]));
        }
        let raw: RawConnect = serde_path_to_error::deserialize(value)
            .map_err(|e| Error::invalid(format!("option `{}` {}", e.path(), e.inner())))?;
        o.connect_timeout = raw.connect_timeout_ms.or(o.connect_timeout);
        o.request_timeout = raw.request_timeout_ms.or(o.request_timeout);
        o.tool_timeout = raw.tool_timeout_ms.or(o.tool_timeout);
        if let Some(d) = raw.host_request_timeout_ms.or(Some(o.host_request_timeout)) {
            o.host_request_timeout = d;
        } else {
            return Err(Error::invalid("option `host_request_timeout_ms` cannot be unbounded: a server's request must always get an answer"));
        }
        if let Some(info) = &raw.client_info {
            let m = as_object(info, "option `client_info`")?;
            if !m.get("name").is_some_and(Value::is_string)
                || !m.get("version").is_some_and(Value::is_string)
            {
                return Err(Error::invalid(
                    "option `client_info` needs string fields `name` and `version`",
                ));
            }
            o.client_info = info.clone();
        }
        let implied = match &raw.handlers {
            None => Map::new(),
            Some(handlers) => handler_capabilities(handlers)?,
        };
        if !implied.is_empty() || raw.capabilities.is_some() {
            let declared = merge_capabilities(implied, raw.capabilities.as_ref())?;
            o.capabilities = normalize_capabilities(&declared)?;
        }
        if let Some(roots) = &raw.roots {
            o.roots = Some(parse_roots(roots, "option `roots`")?);
            let caps = o
                .capabilities
                .as_object_mut()
                .expect("normalized to an object");
            caps.entry("roots")
                .or_insert_with(|| json!({"listChanged": true}));
        }
        o.tasks = raw.tasks.unwrap_or(true);
        if let Some(v) = &raw.log_level {
            o.log_level = Some(parse_log_level(v, "option `log_level`")?);
        }
        if let Some(n) = raw.max_input_rounds {
            o.max_input_rounds = n;
        }
        match raw.discover_timeout_ms {
            Limit::After(d) => o.discover_timeout = d,
            Limit::Default => {}
            Limit::Unbounded => {
                return Err(Error::invalid(
                    "option `discover_timeout_ms` cannot be unbounded: a server that never answers would hold the connect",
                ))
            }
        }
        o.elicitation_defaults = raw.elicitation_defaults.unwrap_or(false);
        if let Some(versions) = &raw.protocol_versions {
            let list = versions
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| {
                    Error::invalid(
                        "option `protocol_versions` must be a non-empty array of version strings",
                    )
                })?;
            let mut modern = Vec::new();
            let mut legacy = Vec::new();
            for v in list {
                let s = v.as_str().unwrap_or_default();
                if era::is_modern(s) {
                    modern.push(s.to_string());
                } else if era::is_known(s) {
                    legacy.push(s.to_string());
                } else {
                    return Err(Error::invalid(format!(
                        "option `protocol_versions` names {v}, which this client does not speak (it speaks {} and {})",
                        era::MODERN_VERSIONS.join(", "),
                        era::LEGACY_VERSIONS.join(", ")
                    )));
                }
            }
            // Newest first, whatever order the host used.
            modern.sort_by(|a, b| b.cmp(a));
            legacy.sort_by(|a, b| b.cmp(a));
            o.modern_versions = modern;
            o.legacy_versions = legacy;
        }
        if let Some(n) = raw.max_message_bytes {
            o.max_message_bytes = n;
        }
        if let Some(n) = raw.max_events {
            o.max_events = n;
        }
        o.max_list_bytes = raw.max_list_bytes;
        if let Limit::After(d) = raw.shutdown_grace_ms {
            o.shutdown_grace = d;
        }
        o.derive_capabilities();
        o.validate_arguments = raw.validate_arguments.unwrap_or(false);
        o.cache = raw.cache.unwrap_or(true);
        o.auth = crate::auth::AuthOptions::parse(obj)?;
        if let Some(t) = &raw.tls {
            o.tls = crate::transport::tls::TlsOptions::parse(t, "option `tls`")?;
        }
        if let Some(p) = &raw.proxy {
            o.proxy = crate::transport::proxy::ProxySetting::parse(p, "option `proxy`")?;
        }
        o.listen = match &raw.listen {
            None => ListenMode::Auto,
            Some(Value::Bool(true)) => ListenMode::Always,
            Some(Value::Bool(false)) => ListenMode::Never,
            Some(Value::String(s)) if s == "auto" => ListenMode::Auto,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "option `listen` must be true, false or \"auto\" (got {v})"
                )))
            }
        };
        if let Some(v) = &raw.cancel_token {
            o.cancel = cancel_token_of(v)?.map(OwnCancel);
        }
        Ok(o)
    }

    /// The most bytes of page text one listing of every page takes: `max_list_bytes`, by
    /// default 64 MiB or twice `max_message_bytes` when that is more.
    pub fn list_limit(&self) -> usize {
        self.max_list_bytes
            .unwrap_or_else(|| super::pages::default_max_list_bytes(self.max_message_bytes))
    }

    /// A server entry's own `timeout` (milliseconds, as other clients' configs write it): the
    /// limit of each of that server's requests and tool calls, over the connection's options.
    pub fn apply_entry(&mut self, entry: &Value) {
        if let Some(ms) = entry.get("timeout").and_then(Value::as_f64) {
            if ms > 0.0 && ms.is_finite() {
                let d = Duration::from_millis(ms.ceil() as u64);
                self.request_timeout = Some(d);
                self.tool_timeout = Some(d);
            }
        }
    }

    /// The capabilities of each era from what the host declared and the `tasks` option.
    fn derive_capabilities(&mut self) {
        let mut legacy = self.capabilities.clone();
        let mut modern = self.capabilities.clone();
        if self.tasks {
            // Legacy: the engine hosts the tasks of the server requests the host serves.
            let mut requests = Map::new();
            if self.declares("sampling") {
                requests.insert("sampling".into(), json!({"createMessage": {}}));
            }
            if self.declares("elicitation") {
                requests.insert("elicitation".into(), json!({"create": {}}));
            }
            if !requests.is_empty() {
                legacy["tasks"] = json!({"list": {}, "cancel": {}, "requests": requests});
            }
            let caps = modern.as_object_mut().expect("normalized to an object");
            let ext = caps.entry("extensions").or_insert_with(|| json!({}));
            if let Some(ext) = ext.as_object_mut() {
                ext.insert(TASKS_EXTENSION.into(), json!({}));
            }
        }
        self.legacy_capabilities = legacy;
        self.modern_capabilities = modern;
    }

    /// Whether the host declared a capability (a key of `capabilities`).
    pub fn declares(&self, capability: &str) -> bool {
        self.capabilities
            .get(capability)
            .is_some_and(|v| !v.is_null())
    }

    /// Whether the host declared `capability.sub` (`sampling.tools`, `elicitation.url`, ...).
    pub fn declares_sub(&self, capability: &str, sub: &str) -> bool {
        self.capabilities
            .get(capability)
            .and_then(|c| c.get(sub))
            .is_some_and(|v| !v.is_null())
    }

    /// Elicitation modes: `{}` is form only (the spec's backwards-compatible reading).
    pub fn elicitation_form(&self) -> bool {
        self.declares("elicitation")
            && (self.declares_sub("elicitation", "form")
                || !self.declares_sub("elicitation", "url"))
    }

    pub fn elicitation_url(&self) -> bool {
        self.declares_sub("elicitation", "url")
    }

    /// Whether `notifications/roots/list_changed` was declared (legacy era).
    pub fn roots_list_changed(&self) -> bool {
        self.capabilities
            .get("roots")
            .and_then(|r| r.get("listChanged"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// Options of one blocking call (`options_json` of list/call/request).
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    pub timeout: Limit,
    pub tag: Option<String>,
    /// Ask the server for progress notifications (a progress token is attached).
    pub progress: bool,
    /// Each progress notification restarts the timeout.
    pub reset_timeout_on_progress: bool,
    /// With `reset_timeout_on_progress`: the limit that progress can never extend past.
    pub max_total_timeout: Option<Duration>,
    /// For list requests: return this one page instead of following every page.
    pub cursor: Option<String>,
    /// For the generic request: follow `nextCursor` and concatenate the pages.
    pub all_pages: bool,
    /// For a started call: queue it, to be written with the next call that is not deferred or
    /// with `flush` (many calls, one write).
    pub defer: bool,
    /// Whether a tool call may become a task, and what the host gets then.
    pub task: TaskMode,
    /// The task lifetime asked of a legacy server when the call is made a task.
    pub task_ttl: Option<u64>,
    /// A started call's own cancel (`cancel_call`), or the signal of the call's `cancel_token`;
    /// besides the tag.
    pub(crate) own_cancel: Option<OwnCancel>,
    /// For tool calls: check the arguments against the tool's `inputSchema` before sending
    /// (`None`: the connection's `validate_arguments`).
    pub validate_arguments: Option<bool>,
    /// `Some(false)`: a cacheable request goes to the server even when a fresh cached result
    /// is there (the new result replaces it).
    pub cache: Option<bool>,
    /// A served client's request relayed to this server (`mcplug serve`, both 2026-07-28): its
    /// `_meta` entries (capabilities, client info, log level) go instead of the connection's,
    /// and what the server answers — an `InputRequiredResult`, a task, a URL elicitation error
    /// — comes back as it was, for that client to resolve. No cache, no schema checks.
    pub(crate) relayed: Option<std::sync::Arc<serde_json::Map<String, serde_json::Value>>>,
    /// Who the request is made for (`mcplug serve`: the served client, see
    /// `server::session::Downstream::caller`): named in the log; where a gateway's per-client
    /// authorization will look.
    pub(crate) caller: Option<std::sync::Arc<str>>,
    /// `format`: a tool call's result (and a tool listing) as a model API takes it; only the
    /// functions that call or list tools accept it.
    pub format: crate::model::Format,
}

/// A started call's cancel signal, carried in its options.
#[derive(Clone)]
pub(crate) struct OwnCancel(pub(crate) std::sync::Arc<crate::client::cancel::CancelSignal>);

impl CallOptions {
    /// The signal a started call is cancelled by (`cancel_call`): its `cancel_token`'s when it
    /// names one (so that both reach it), else a new one; kept as the call's own.
    pub(crate) fn started_cancel(&mut self) -> std::sync::Arc<crate::client::cancel::CancelSignal> {
        let signal = match self.own_cancel.take() {
            Some(token) => token.0,
            None => crate::client::cancel::CancelSignal::new(),
        };
        self.own_cancel = Some(OwnCancel(signal.clone()));
        signal
    }
}

impl std::fmt::Debug for OwnCancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnCancel")
    }
}

/// The per-call option `task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskMode {
    /// Absent: a legacy tool the server lists as `taskSupport: "required"` is called as a task;
    /// a modern server decides. A task is awaited and its result returned.
    #[default]
    Auto,
    /// `true`: ask a legacy server for a task when it offers them; await it.
    Await,
    /// `"handle"`: ask for a task and return the task itself (`tasks/get` etc. are the host's).
    Handle,
    /// `false`: never ask a legacy server for a task.
    Never,
}

/// The keys of a call's options; any other is refused.
pub const CALL_KEYS: &[&str] = &[
    "timeout_ms",
    "tag",
    "progress",
    "reset_timeout_on_progress",
    "max_total_timeout_ms",
    "cursor",
    "all_pages",
    "defer",
    "task",
    "task_ttl_ms",
    "validate_arguments",
    "cache",
    "cancel_token",
];

impl CallOptions {
    /// One pass over the given keys (a call's options are parsed on every call: looking up each
    /// known key in the map cost more than the call's own encoding). An unknown key is
    /// `invalid_argument`.
    pub fn parse(value: Option<&Value>) -> Result<Self> {
        Self::parse_with(value, &[])
    }

    /// The same, for a function that reads the keys `extra` itself (a listing's `server`).
    pub fn parse_with(value: Option<&Value>, extra: &[&str]) -> Result<Self> {
        let mut o = CallOptions::default();
        let Some(value) = value else { return Ok(o) };
        if value.is_null() {
            return Ok(o);
        }
        let obj = as_object(value, "options_json")?;
        for (key, v) in obj {
            if !o.apply(key, v)? && !extra.contains(&key.as_str()) {
                return Err(unknown_option(key, &[CALL_KEYS, extra]));
            }
        }
        Ok(o)
    }

    /// Parses `options_json` text without building a map of it: only the keys present are
    /// looked at (the common per-call options, such as `{"defer":true}`, cost a few hundred
    /// instructions instead of a tree). `None` when the text is not a plain object of options
    /// (malformed, not an object, a key twice): then [`CallOptions::parse`] of the parsed value
    /// says what is wrong.
    pub fn parse_fast(text: &str) -> Option<Result<Self>> {
        // A derived struct also accepts an array (its fields by position): objects only.
        if !text.trim_start().starts_with('{') {
            return None;
        }
        let wire: Wire = serde_json::from_str(text).ok()?;
        let mut o = CallOptions::default();
        for (key, raw) in [
            ("timeout_ms", wire.timeout_ms),
            ("tag", wire.tag),
            ("progress", wire.progress),
            ("reset_timeout_on_progress", wire.reset_timeout_on_progress),
            ("max_total_timeout_ms", wire.max_total_timeout_ms),
            ("cursor", wire.cursor),
            ("all_pages", wire.all_pages),
            ("defer", wire.defer),
            ("task", wire.task),
            ("task_ttl_ms", wire.task_ttl_ms),
            ("validate_arguments", wire.validate_arguments),
            ("cache", wire.cache),
            ("cancel_token", wire.cancel_token),
            ("format", wire.format),
        ] {
            let Some(raw) = raw else { continue };
            let v: Value = serde_json::from_str(raw.get()).ok()?;
            if let Err(e) = o.apply(key, &v) {
                return Some(Err(e));
            }
        }
        Some(Ok(o))
    }

    /// `format` set by a function that neither calls nor lists tools: `invalid_argument`
    /// naming `what` the options were given to.
    pub fn refuse_format(&self, what: &str) -> Result<()> {
        if self.format == crate::model::Format::Mcp {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "option `format` is for call_tool, list_tools and search_tools, not {what}"
        )))
    }

    /// Applies one option; whether `key` is one.
    fn apply(&mut self, key: &str, v: &Value) -> Result<bool> {
        let o = self;
        match key {
            "timeout_ms" => o.timeout = limit_of(key, v)?,
            "tag" => match v {
                Value::Null => {}
                Value::String(s) if !s.is_empty() => o.tag = Some(s.clone()),
                v => {
                    return Err(Error::invalid(format!(
                        "option `tag` must be a non-empty string (got {v})"
                    )))
                }
            },
            "progress" => o.progress = bool_of(key, v)?.unwrap_or(false),
            "reset_timeout_on_progress" => {
                o.reset_timeout_on_progress = bool_of(key, v)?.unwrap_or(false)
            }
            "max_total_timeout_ms" => o.max_total_timeout = limit_of(key, v)?.or(None),
            "cursor" => match v {
                Value::Null => {}
                Value::String(s) => o.cursor = Some(s.clone()),
                v => {
                    return Err(Error::invalid(format!(
                        "option `cursor` must be a string (got {v})"
                    )))
                }
            },
            "all_pages" => o.all_pages = bool_of(key, v)?.unwrap_or(false),
            "defer" => o.defer = bool_of(key, v)?.unwrap_or(false),
            "task" => {
                o.task = match v {
                    Value::Null => TaskMode::Auto,
                    Value::Bool(true) => TaskMode::Await,
                    Value::Bool(false) => TaskMode::Never,
                    Value::String(s) if s == "handle" => TaskMode::Handle,
                    Value::String(s) if s == "await" => TaskMode::Await,
                    v => {
                        return Err(Error::invalid(format!(
                            "option `task` must be true, false, \"await\" or \"handle\" (got {v})"
                        )))
                    }
                }
            }
            "task_ttl_ms" => o.task_ttl = usize_of(key, v)?.map(|n| n as u64),
            "validate_arguments" => o.validate_arguments = bool_of(key, v)?,
            "cache" => o.cache = bool_of(key, v)?,
            "cancel_token" => {
                if let Some(signal) = cancel_token_of(v)? {
                    o.own_cancel = Some(OwnCancel(signal));
                }
            }
            "format" => {
                if !v.is_null() {
                    o.format = crate::model::Format::parse(v)?;
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The keys of a call's options, each kept as raw text (`null` included) if present. Another
/// key fails this parse, and the general one then names it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    #[serde(borrow, default, deserialize_with = "raw")]
    timeout_ms: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    tag: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    progress: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    reset_timeout_on_progress: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    max_total_timeout_ms: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    cursor: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    all_pages: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    defer: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    task: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    task_ttl_ms: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    validate_arguments: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    cache: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    cancel_token: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "raw")]
    format: Option<&'a RawValue>,
}

fn raw<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

/// The option `cancel_token`: the signal of a token of `mcplug_cancel_token_new`.
pub(crate) fn cancel_token_of(
    v: &Value,
) -> Result<Option<std::sync::Arc<crate::client::cancel::CancelSignal>>> {
    match v {
        Value::Null => Ok(None),
        v => match v.as_u64().filter(|&t| t > 0) {
            Some(token) => crate::client::cancel::token_signal(token).map(Some).ok_or_else(|| {
                Error::invalid(format!(
                    "option `cancel_token`: there is no cancel token {token} (never made by mcplug_cancel_token_new, or freed)"
                ))
            }),
            None => Err(Error::invalid(format!(
                "option `cancel_token` must be a token of mcplug_cancel_token_new (got {v})"
            ))),
        },
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fast_parse_tests;
