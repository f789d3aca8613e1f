//! The manager's options and the shapes of configuration it accepts.

use crate::client::options::ConnectOptions;
use crate::error::{Error, Result};
use serde_json::{Map, Value};
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
}

/// Claude Code's defaults: local 3, remote 20, descriptions 2,048 characters, output 25,000
/// tokens (about 4 characters each), three terminal errors.
const DEFAULT_MAX_OUTPUT_TOKENS: usize = 25_000;
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
        }
    }
}

fn uint(obj: &Map<String, Value>, key: &str, min: u64) -> Result<Option<u64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n >= min => Ok(Some(n)),
            _ => Err(Error::invalid(format!(
                "manager option `{key}` must be an integer >= {min} (got {v})"
            ))),
        },
    }
}

const KNOWN: &[&str] = &[
    "local_concurrency",
    "remote_concurrency",
    "connection",
    "max_description_chars",
    "max_output_tokens",
    "max_output_chars",
    "terminal_errors",
    "reconnect_initial_ms",
    "reconnect_max_ms",
    "reconnect_attempts",
    "disabled",
    "max_events",
];

impl ManagerOptions {
    pub fn parse(value: Option<&Value>) -> Result<Self> {
        let mut o = ManagerOptions::default();
        let obj = match value {
            None | Some(Value::Null) => return Ok(o),
            Some(Value::Object(m)) => m,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "`options_json` must be a JSON object (got {v})"
                )))
            }
        };
        if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(Error::invalid(format!(
                "unknown manager option `{k}` (known: {})",
                KNOWN.join(", ")
            )));
        }
        if let Some(n) = uint(obj, "local_concurrency", 1)? {
            o.local_concurrency = n as usize;
        }
        if let Some(n) = uint(obj, "remote_concurrency", 1)? {
            o.remote_concurrency = n as usize;
        }
        if let Some(c) = obj.get("connection").filter(|v| !v.is_null()) {
            // Checked now, so that a bad option is the manager's error, not every server's.
            ConnectOptions::parse(Some(c)).map_err(|e| {
                Error::invalid(format!("manager option `connection`: {}", e.message))
            })?;
            o.connection = Some(c.clone());
        }
        if let Some(n) = uint(obj, "max_description_chars", 1)? {
            o.max_description = n as usize;
        }
        match (obj.get("max_output_tokens"), obj.get("max_output_chars")) {
            (Some(t), Some(c)) if !t.is_null() && !c.is_null() => {
                return Err(Error::invalid(
                    "give `max_output_tokens` or `max_output_chars`, not both",
                ))
            }
            _ => {}
        }
        if obj.get("max_output_tokens") == Some(&Value::Null)
            || obj.get("max_output_chars") == Some(&Value::Null)
        {
            o.max_output_chars = None;
        }
        if let Some(n) = uint(obj, "max_output_tokens", 1)? {
            o.max_output_chars = Some(n as usize * CHARS_PER_TOKEN);
        }
        if let Some(n) = uint(obj, "max_output_chars", 1)? {
            o.max_output_chars = Some(n as usize);
        }
        if let Some(n) = uint(obj, "terminal_errors", 1)? {
            o.terminal_errors = n as u32;
        }
        if let Some(n) = uint(obj, "reconnect_initial_ms", 0)? {
            o.reconnect_initial = Duration::from_millis(n);
        }
        if let Some(n) = uint(obj, "reconnect_max_ms", 0)? {
            o.reconnect_max = Duration::from_millis(n);
        }
        if let Some(n) = uint(obj, "reconnect_attempts", 0)? {
            o.reconnect_attempts = n as u32;
        }
        if let Some(n) = uint(obj, "max_events", 1)? {
            o.max_events = n as usize;
        }
        match obj.get("disabled") {
            None | Some(Value::Null) => {}
            Some(Value::Array(names)) => {
                for n in names {
                    let Some(s) = n.as_str() else {
                        return Err(Error::invalid(format!(
                            "manager option `disabled` must be an array of server names (got {n})"
                        )));
                    };
                    o.disabled.insert(s.to_string());
                }
            }
            Some(v) => {
                return Err(Error::invalid(format!(
                    "manager option `disabled` must be an array of server names (got {v})"
                )))
            }
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
    fn backoff_doubles_and_is_capped() {
        let o = ManagerOptions::parse(Some(
            &json!({"reconnect_initial_ms": 100, "reconnect_max_ms": 350}),
        ))
        .unwrap();
        let ms: Vec<u128> = (1..=5).map(|a| o.backoff(a).as_millis()).collect();
        assert_eq!(ms, [0, 100, 200, 350, 350]);
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
        assert!(ManagerOptions::parse(Some(&json!({"local_concurency": 2})))
            .unwrap_err()
            .message
            .contains("unknown manager option `local_concurency`"));
    }
}
