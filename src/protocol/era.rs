//! The protocol revisions this client speaks, and the per-request `_meta` of the modern era.

use serde_json::{Map, Value};

/// The modern (stateless, per-request `_meta`) revisions, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// The legacy (initialize handshake) revisions, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The log level a modern request asks for (2026-07-28: logging is per request).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// The `_meta` key that ties a notification to its `subscriptions/listen` request (its id).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

pub fn is_known(version: &str) -> bool {
    is_modern(version) || LEGACY_VERSIONS.contains(&version)
}

/// Which era a connection speaks, fixed at connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28 and later: every request carries the version, capabilities and client info.
    Modern { version: String },
    /// The initialize handshake set the version for the whole connection.
    Legacy { version: String },
}

impl Era {
    pub fn version(&self) -> &str {
        match self {
            Era::Modern { version } | Era::Legacy { version } => version,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Era::Modern { .. } => "modern",
            Era::Legacy { .. } => "legacy",
        }
    }
}

/// Adds the modern era's request `_meta` to `params` (creating both when absent), keeping every
/// field the caller already put there — including its own `_meta` entries.
pub fn stamp_modern_meta(
    params: Option<Value>,
    version: &str,
    capabilities: &Value,
    client_info: &Value,
) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        // Only objects are valid params in MCP; anything else was rejected before this point.
        _ => Map::new(),
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let meta = meta.as_object_mut().expect("made an object above");
    meta.insert(
        META_PROTOCOL_VERSION.into(),
        Value::String(version.to_string()),
    );
    meta.insert(META_CLIENT_CAPABILITIES.into(), capabilities.clone());
    meta.insert(META_CLIENT_INFO.into(), client_info.clone());
    Value::Object(params)
}

/// The requests on which the 2026-07-28 revision allows an `InputRequiredResult`.
pub fn allows_input_required(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// The `resultType` of a modern result, found without parsing most results: absent is `None`.
pub fn result_type(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    #[derive(serde::Deserialize)]
    struct ResultType<'a> {
        #[serde(rename = "resultType", borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
    }
    // One searcher for the process (building one per call cost ~1k instructions).
    static FINDER: once_cell::sync::Lazy<memchr::memmem::Finder<'static>> =
        once_cell::sync::Lazy::new(|| memchr::memmem::Finder::new(b"\"resultType\""));
    let bytes = text.as_bytes();
    let at = FINDER.find(bytes)?;
    if bytes[at..].starts_with(b"\"resultType\":\"complete\"")
        && FINDER.find(&bytes[at + 1..]).is_none()
    {
        return Some("complete".into());
    }
    serde_json::from_str::<ResultType>(text)
        .ok()
        .and_then(|r| r.result_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stamping_keeps_caller_fields() {
        let p = stamp_modern_meta(
            Some(json!({"name": "x", "_meta": {"progressToken": 3, "x-vendor": true}})),
            "2026-07-28",
            &json!({"roots": {}}),
            &json!({"name": "c", "version": "1"}),
        );
        assert_eq!(p["name"], "x");
        assert_eq!(p["_meta"]["progressToken"], 3);
        assert_eq!(p["_meta"]["x-vendor"], true);
        assert_eq!(p["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(p["_meta"][META_CLIENT_CAPABILITIES], json!({"roots": {}}));
        let p = stamp_modern_meta(None, "2026-07-28", &json!({}), &json!({}));
        assert!(p["_meta"].is_object());
    }

    #[test]
    fn result_types_are_found_without_a_parse_when_plain() {
        assert_eq!(result_type(r#"{"content":[]}"#), None);
        assert_eq!(
            result_type(r#"{"resultType":"complete","x":1}"#).as_deref(),
            Some("complete")
        );
        assert_eq!(
            result_type(r#"{"a":1,"resultType":"input_required"}"#).as_deref(),
            Some("input_required")
        );
        // The words inside content are not a resultType.
        assert_eq!(
            result_type(r#"{"content":[{"type":"text","text":"\"resultType\""}]}"#),
            None
        );
    }
}
