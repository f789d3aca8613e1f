//! The manager's options and the shapes of configuration it accepts.

use crate::client::options::ConnectOptions;
use crate::error::{Error, Result};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Local servers (stdio, in-process) connecting at once.
    pub local_concurrency: usize,
    /// Remote servers (http, sse, ws) connecting at once.
    pub remote_concurrency: usize,
    /// Connection options for every server (`mcplug_client_connect`'s `options_json`).
    pub connection: Option<Value>,
    pub max_description: usize,
    /// Tool output text is capped at this many characters (`None`: never).
    pub max_output_chars: Option<usize>,
    /// Consecutive terminal errors of one server's calls that close and reconnect it.
    pub terminal_errors: u32,
    pub reconnect_initial: Duration,
    pub reconnect_max: Duration,
    /// Attempts after a connection is lost before the server is left `failed` (0: never retry).
    pub reconnect_attempts: u32,
    pub disabled: HashSet<String>,
    pub max_events: usize,
    /// Base64 media (images, audio, blobs) of one result, in bytes of base64 (`None`: no limit).
    pub max_media_bytes: Option<usize>,
    /// `output_dir`: where an output over its limit is kept whole.
    pub keeper: Option<std::sync::Arc<super::hygiene::Keeper>>,
    /// `resource_tools`: Claude Code's `ListMcpResourcesTool` and `ReadMcpResourceTool` in the
    /// pool while a connected server offers resources.
    pub resource_tools: bool,
    /// `policy`: the allow/deny lists applied to every server the manager is given.
    pub policy: Option<crate::config::Policy>,
    /// `registry`: the base URL of the registry whose marks the servers get (M9).
    pub registry: Option<String>,
}

/// Claude Code's defaults: local 3, remote 20, descriptions 2,048 characters, output 25,000
/// tokens (about 4 characters each), three terminal errors.
const DEFAULT_MAX_OUTPUT_TOKENS: usize = 25_000;
/// The Anthropic API's limit for one image's base64 (5 MiB), the strictest of the model APIs.
const DEFAULT_MAX_MEDIA_BYTES: usize = 5 * 1024 * 1024;
/// `output_dir`'s size cap: the oldest kept outputs go first.
const DEFAULT_OUTPUT_DIR_MAX_BYTES: u64 = 1 << 30;
const CHARS_PER_TOKEN: usize = 4;

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            local_concurrency: 3,
            remote_concurrency: 20,
            connection: None,
            max_description: 2048,
            max_output_chars: Some(DEFAULT_MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN),
            terminal_errors: 3,
            reconnect_initial: Duration::from_millis(1000),
            reconnect_max: Duration::from_millis(30_000),
            reconnect_attempts: 5,
            disabled: HashSet::new(),
            max_events: 10_000,
            max_media_bytes: Some(DEFAULT_MAX_MEDIA_BYTES),
            keeper: None,
            resource_tools: false,
            policy: None,
            registry: None,
        }
    }
}

/// The manager's options as a host writes them, read by serde: an unknown key, or a value of
/// the wrong type or range, is refused with the path of the bad field (`disabled[2]`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOptions {
    #[serde(default)]
    local_concurrency: Option<AtLeast<1>>,
    #[serde(default)]
    remote_concurrency: Option<AtLeast<1>>,
    #[serde(default)]
    connection: Option<Value>,
    #[serde(default)]
    max_description_chars: Option<AtLeast<1>>,
    /// Absent: the default cap; `null`: no cap.
    #[serde(default, deserialize_with = "present")]
    max_output_tokens: Option<Option<AtLeast<1>>>,
    #[serde(default, deserialize_with = "present")]
    max_output_chars: Option<Option<AtLeast<1>>>,
    #[serde(default)]
    terminal_errors: Option<AtLeast<1>>,
    #[serde(default)]
    reconnect_initial_ms: Option<AtLeast<0>>,
    #[serde(default)]
    reconnect_max_ms: Option<AtLeast<0>>,
    #[serde(default)]
    reconnect_attempts: Option<AtLeast<0>>,
    #[serde(default)]
    disabled: Option<Vec<String>>,
    #[serde(default)]
    max_events: Option<AtLeast<1>>,
    /// Absent: the default limit; `null`: none.
    #[serde(default, deserialize_with = "present")]
    max_media_bytes: Option<Option<AtLeast<1>>>,
    #[serde(default)]
    output_dir: Option<String>,
    #[serde(default)]
    output_dir_max_bytes: Option<AtLeast<1>>,
    #[serde(default)]
    resource_tools: Option<bool>,
    #[serde(default)]
    policy: Option<Value>,
    #[serde(default)]
    registry: Option<Value>,
}

/// An integer of at least `MIN`.
struct AtLeast<const MIN: u64>(u64);

impl<'de, const MIN: u64> Deserialize<'de> for AtLeast<MIN> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match v.as_u64() {
            Some(n) if n >= MIN => Ok(AtLeast(n)),
            _ => Err(serde::de::Error::custom(format!(
                "must be an integer >= {MIN} (got {v})"
            ))),
        }
    }
}

/// A field that may be `null` on purpose: `Some(None)` when it is, `None` when it is absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The options of the manager's listing functions, one rule for all of them: every key is one
/// the function reads, any other is `invalid_argument` naming it and the keys there are (a
/// misspelt `{"sever": "x"}` must not list every server's tools as if no filter was asked).
#[derive(Debug, Clone, Default)]
pub struct ListingOptions {
    /// `server`: that server only.
    pub server: Option<String>,
    /// `max_results` of a search (at least 1), when given.
    pub max_results: Option<usize>,
    /// The call options of a listing that asks the servers (`timeout_ms`, ...).
    pub call: crate::client::options::CallOptions,
    /// `format` of a tool listing (`list_tools`, `search_tools`).
    pub format: crate::model::Format,
}

/// Which keys a listing function reads besides `server`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// The pool as it is (`list_tools`): `server` only.
    Pool,
    /// A search of the pool (`search_tools`): `server`, `max_results`.
    Search,
    /// A listing that asks the servers now (`list_resources`, `list_prompts`): `server` and a
    /// call's options.
    Servers,
}

impl ListingOptions {
    pub fn parse(value: Option<&Value>, listing: Listing) -> Result<Self> {
        use crate::client::options::{CallOptions, CALL_KEYS};
        use crate::shape::unknown_option;
        let mut o = ListingOptions::default();
        let obj = match value {
            None | Some(Value::Null) => return Ok(o),
            Some(Value::Object(obj)) => obj,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "`options_json` must be a JSON object (got {v})"
                )))
            }
        };
        let own: &[&str] = match listing {
            Listing::Pool => &["server", "format"],
            Listing::Servers => &["server"],
            Listing::Search => &["max_results", "server", "format"],
        };
        let call: &[&str] = if listing == Listing::Servers {
            CALL_KEYS
        } else {
            &[]
        };
        if let Some(key) = obj
            .keys()
            .find(|k| !own.contains(&k.as_str()) && !call.contains(&k.as_str()))
        {
            return Err(unknown_option(key, &[own, call]));
        }
        o.server = match obj.get("server") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                return Err(Error::invalid(format!(
                    "option `server` must be a string (got {v})"
                )))
            }
        };
        o.max_results = match obj.get("max_results") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => {
                    return Err(Error::invalid(format!(
                        "option `max_results` must be a whole number >= 1 (got {v})"
                    )))
                }
            },
        };
        if let Some(f) = obj.get("format").filter(|f| !f.is_null()) {
            o.format = crate::model::Format::parse(f)?;
        }
        if listing == Listing::Servers {
            o.call = CallOptions::parse_with(value, own)?;
            o.call.refuse_format("a resource or prompt listing")?;
        }
        Ok(o)
    }
}

impl ManagerOptions {
    /// The options a host gives (`None`: all defaults), over Claude Code's environment
    /// variable `MAX_MCP_OUTPUT_TOKENS`, a default under `max_output_tokens`/`max_output_chars`
    /// (and `MCP_TIMEOUT`/`MCP_TOOL_TIMEOUT` under `connection`, see `ConnectOptions::parse`).
    pub fn parse(value: Option<&Value>) -> Result<Self> {
        Self::parse_with(value, &crate::client::options::process_env)
    }

    pub(crate) fn parse_with(
        value: Option<&Value>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut o = ManagerOptions::default();
        if let Some(tokens) = crate::client::options::env_number(env, "MAX_MCP_OUTPUT_TOKENS")? {
            o.max_output_chars = Some((tokens as usize).saturating_mul(CHARS_PER_TOKEN));
        }
        // What the connections will read, refused now (the manager's error, not every server's).
        crate::client::options::env_number(env, "MCP_TIMEOUT")?;
        crate::client::options::env_number(env, "MCP_TOOL_TIMEOUT")?;
        let value = match value {
            None | Some(Value::Null) => return Ok(o),
            Some(v @ Value::Object(_)) => v,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "`options_json` must be a JSON object (got {v})"
                )))
            }
        };
        let raw: RawOptions = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                // An unknown key: serde names it and the keys there are.
                Error::invalid(format!("manager options: {}", e.inner()))
            } else {
                Error::invalid(format!("manager option `{path}` {}", e.inner()))
            }
        })?;
        let int = |n: Option<AtLeast<1>>| n.map(|n| n.0);
        if let Some(n) = int(raw.local_concurrency) {
            o.local_concurrency = n as usize;
        }
        if let Some(n) = int(raw.remote_concurrency) {
            o.remote_concurrency = n as usize;
        }
        if let Some(c) = raw.connection.filter(|v| !v.is_null()) {
            // Checked now, so that a bad option is the manager's error, not every server's.
            ConnectOptions::parse(Some(&c)).map_err(|e| {
                Error::invalid(format!("manager option `connection`: {}", e.message))
            })?;
            o.connection = Some(c);
        }
        if let Some(n) = int(raw.max_description_chars) {
            o.max_description = n as usize;
        }
        o.max_output_chars = match (raw.max_output_tokens, raw.max_output_chars) {
            (Some(Some(_)), Some(Some(_))) => {
                return Err(Error::invalid(
                    "give `max_output_tokens` or `max_output_chars`, not both",
                ))
            }
            (Some(Some(t)), _) => Some(t.0 as usize * CHARS_PER_TOKEN),
            (_, Some(Some(c))) => Some(c.0 as usize),
            (Some(None), _) | (_, Some(None)) => None,
            (None, None) => o.max_output_chars,
        };
        if let Some(n) = int(raw.terminal_errors) {
            o.terminal_errors = n as u32;
        }
        if let Some(n) = raw.reconnect_initial_ms {
            o.reconnect_initial = Duration::from_millis(n.0);
        }
        if let Some(n) = raw.reconnect_max_ms {
            o.reconnect_max = Duration::from_millis(n.0);
        }
        if let Some(n) = raw.reconnect_attempts {
            o.reconnect_attempts = n.0.min(u32::MAX as u64) as u32;
        }
        if let Some(n) = int(raw.max_events) {
            o.max_events = n as usize;
        }
        o.disabled.extend(raw.disabled.unwrap_or_default());
        o.resource_tools = raw.resource_tools.unwrap_or(false);
        o.registry = match raw.registry {
            None | Some(Value::Null) | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(super::registry::OFFICIAL.to_string()),
            Some(Value::String(base)) => {
                super::registry::Registry::new(&base)?;
                Some(base)
            }
            Some(v) => {
                return Err(Error::invalid(format!(
                    "manager option `registry` must be true or an http(s) URL (got {v})"
                )))
            }
        };
        if let Some(p) = raw.policy.filter(|p| !p.is_null()) {
            o.policy = Some(crate::config::Policy::parse(&p, "policy")?);
        }
        match raw.max_media_bytes {
            Some(Some(n)) => o.max_media_bytes = Some(n.0 as usize),
            Some(None) => o.max_media_bytes = None,
            None => {}
        }
        let cap_given = raw.output_dir_max_bytes.is_some();
        let cap = raw
            .output_dir_max_bytes
            .map_or(DEFAULT_OUTPUT_DIR_MAX_BYTES, |n| n.0);
        match raw.output_dir {
            Some(dir) if dir.is_empty() => {
                return Err(Error::invalid(
                    "manager option `output_dir` is empty: give a directory, or leave it out",
                ))
            }
            Some(dir) => {
                let keeper = super::hygiene::Keeper::open(std::path::Path::new(&dir), cap)?;
                o.keeper = Some(std::sync::Arc::new(keeper));
            }
            None if cap_given => {
                return Err(Error::invalid(
                    "manager option `output_dir_max_bytes` without `output_dir`",
                ))
            }
            None => {}
        }
        Ok(o)
    }

    /// The wait before reconnect attempt `attempt` (1-based): the first at once, then
    /// `initial`, doubling, capped at `max`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let factor = 1u32 << (attempt - 2).min(20);
        self.reconnect_initial
            .saturating_mul(factor)
            .min(self.reconnect_max)
    }
}

/// The servers of `config`, in order: a config file's content (`{"mcpServers": {...}}`), the
/// output of `mcplug_config_merge`/`discover` (`{"servers": {"<name>": {"config": {...}, ...}}}`),
/// or VS Code's `{"servers": {"<name>": {...entry...}}}`.
pub fn entries(config: &Value) -> Result<Vec<(String, Value)>> {
    let obj = config.as_object().ok_or_else(|| {
        Error::invalid(format!(
            "`config_json` must be a JSON object (got {config})"
        ))
    })?;
    let (key, servers) = match (obj.get("mcpServers"), obj.get("servers")) {
        (Some(s), _) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (None, None) => {
            return Err(Error::invalid(
                "`config_json` has neither `mcpServers` (a config file) nor `servers` (the output of mcplug_config_merge)",
            ))
        }
    };
    let servers = servers.as_object().ok_or_else(|| {
        Error::invalid(format!(
            "`{key}` must be an object of servers (got {servers})"
        ))
    })?;
    let mut out = Vec::with_capacity(servers.len());
    for (name, v) in servers {
        if name.is_empty() {
            return Err(Error::invalid(format!(
                "`{key}` has a server with an empty name"
            )));
        }
        let entry = match v.get("config") {
            Some(c) if key == "servers" && c.is_object() => c.clone(),
            _ => v.clone(),
        };
        if !entry.is_object() {
            return Err(Error::invalid(format!(
                "`{key}.{name}` must be a server entry object (got {entry})"
            )));
        }
        out.push((name.clone(), entry));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn max_mcp_output_tokens_is_a_default_under_the_options() {
        let env = |n: &str| (n == "MAX_MCP_OUTPUT_TOKENS").then(|| "100".to_string());
        let o = ManagerOptions::parse_with(None, &env).unwrap();
        assert_eq!(o.max_output_chars, Some(100 * CHARS_PER_TOKEN));
        let given = json!({"max_output_tokens": 7});
        let o = ManagerOptions::parse_with(Some(&given), &env).unwrap();
        assert_eq!(o.max_output_chars, Some(7 * CHARS_PER_TOKEN));
        let unset = ManagerOptions::parse_with(None, &|_| None).unwrap();
        assert_eq!(
            unset.max_output_chars,
            Some(DEFAULT_MAX_OUTPUT_TOKENS * CHARS_PER_TOKEN)
        );
        // A bad value of any of the three is the manager's error, named.
        for name in ["MAX_MCP_OUTPUT_TOKENS", "MCP_TIMEOUT", "MCP_TOOL_TIMEOUT"] {
            let e = ManagerOptions::parse_with(None, &|n: &str| (n == name).then(|| "soon".into()))
                .unwrap_err();
            assert!(e.message.contains(name), "{}", e.message);
        }
    }

    #[test]
    fn every_listing_refuses_a_key_it_does_not_read() {
        for (listing, keys) in [
            (Listing::Pool, "server"),
            (Listing::Search, "max_results, server"),
            (Listing::Servers, "all_pages, cache"),
        ] {
            let e = ListingOptions::parse(Some(&json!({"sever": "x"})), listing).unwrap_err();
            assert_eq!(
                e.kind,
                crate::error::ErrorKind::InvalidArgument,
                "{listing:?}"
            );
            assert!(
                e.message.contains("unknown option `sever`"),
                "{listing:?}: {}",
                e.message
            );
            assert!(e.message.contains(keys), "{listing:?}: {}", e.message);
        }
        // What one listing reads is unknown to another.
        for (listing, key) in [
            (Listing::Pool, json!({"max_results": 3})),
            (Listing::Pool, json!({"timeout_ms": 3})),
            (Listing::Search, json!({"timeout_ms": 3})),
            (Listing::Servers, json!({"max_results": 3})),
        ] {
            assert!(
                ListingOptions::parse(Some(&key), listing).is_err(),
                "{listing:?} {key}"
            );
        }
        let o = ListingOptions::parse(
            Some(&json!({"server": "a", "max_results": 2})),
            Listing::Search,
        )
        .unwrap();
        assert_eq!((o.server.as_deref(), o.max_results), (Some("a"), Some(2)));
        let o = ListingOptions::parse(
            Some(&json!({"server": "a", "timeout_ms": 5})),
            Listing::Servers,
        )
        .unwrap();
        assert_eq!(o.server.as_deref(), Some("a"));
        assert!(
            matches!(o.call.timeout, crate::client::options::Limit::After(d) if d.as_millis() == 5)
        );
        assert!(ListingOptions::parse(Some(&json!([])), Listing::Pool).is_err());
        assert!(ListingOptions::parse(Some(&json!({"server": 1})), Listing::Pool).is_err());
        assert!(ListingOptions::parse(Some(&json!({"max_results": 0})), Listing::Search).is_err());
        assert!(ListingOptions::parse(None, Listing::Pool)
            .unwrap()
            .server
            .is_none());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let o = ManagerOptions::parse(Some(
            &json!({"reconnect_initial_ms": 100, "reconnect_max_ms": 350}),
        ))
        .unwrap();
        let ms: Vec<u128> = (1..=5).map(|a| o.backoff(a).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 350, 350]);
    }

    #[test]
    fn a_bad_option_is_named_by_its_path() {
        let err = |v: Value| ManagerOptions::parse(Some(&v)).unwrap_err().message;
        assert_eq!(
            err(json!({"local_concurrency": 0})),
            "manager option `local_concurrency` must be an integer >= 1 (got 0)"
        );
        let e = err(json!({"disabled": ["a", 2]}));
        assert!(e.starts_with("manager option `disabled[1]` "), "{e}");
        let e = err(json!({"max_output_tokens": 10, "max_output_chars": 10}));
        assert!(e.contains("not both"), "{e}");
        let e = err(json!({"connection": {"tool_timeout_ms": "x"}}));
        assert!(e.starts_with("manager option `connection`: "), "{e}");
        // null takes the cap away; absent keeps the default.
        let o = ManagerOptions::parse(Some(&json!({"max_output_chars": null}))).unwrap();
        assert_eq!(o.max_output_chars, None);
        let o = ManagerOptions::parse(Some(
            &json!({"max_output_tokens": 10, "max_output_chars": null}),
        ))
        .unwrap();
        assert_eq!(o.max_output_chars, Some(40));
        let o = ManagerOptions::parse(Some(&json!({"disabled": ["a"], "reconnect_attempts": 0})))
            .unwrap();
        assert!(o.disabled.contains("a") && o.reconnect_attempts == 0);
        assert_eq!(
            ManagerOptions::parse(Some(&json!({})))
                .unwrap()
                .max_output_chars,
            Some(100_000)
        );
    }

    #[test]
    fn shapes_of_config() {
        let plain = entries(&json!({"mcpServers": {"a": {"command": "x"}}})).unwrap();
        assert_eq!(plain, [("a".to_string(), json!({"command": "x"}))]);
        let merged = entries(&json!({"servers": {"b": {"scope": "user", "config": {"type": "http", "url": "u"}}}, "excluded": []})).unwrap();
        assert_eq!(
            merged,
            [("b".to_string(), json!({"type": "http", "url": "u"}))]
        );
        let vscode = entries(&json!({"servers": {"c": {"command": "y"}}})).unwrap();
        assert_eq!(vscode[0].1, json!({"command": "y"}));
        assert!(entries(&json!({"x": 1}))
            .unwrap_err()
            .message
            .contains("mcpServers"));
        let e = ManagerOptions::parse(Some(&json!({"local_concurency": 2}))).unwrap_err();
        assert!(
            e.message.contains("unknown field `local_concurency`")
                && e.message.contains("`local_concurrency`"),
            "{}",
            e.message
        );
    }
}
