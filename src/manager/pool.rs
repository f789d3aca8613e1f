//! The tool pool: every connected server's tools under one flat namespace, the way Claude Code
//! names them (`mcp__{server}__{tool}`), with the flags a host needs and a reverse map from a
//! pool name to the server and tool it stands for.
//!
//! Names: each part has every character outside `[a-zA-Z0-9_-]` replaced by `_`; a name longer
//! than 64 characters keeps its first 55 and ends with `_` and 8 hex digits of a hash of the
//! original server and tool names, so two long names that share a prefix stay apart, the same
//! way on every run. Two tools whose names come out the same are a collision: the first in the
//! pool's order keeps the name (host tools first, then server tools, each group sorted by name;
//! ties by server then tool name) and the other is reported in `dropped`.

use super::hygiene;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The longest tool name the model APIs accept.
pub const MAX_NAME: usize = 64;
const HASH_HEX: usize = 8;

/// `[^a-zA-Z0-9_-]` -> `_`.
pub fn normalize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// FNV-1a, 64 bits: small, stable across runs and platforms (std's hasher is neither promised).
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for b in p.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The pool name of `tool` of `server`: `mcp__{server}__{tool}`, normalized, at most 64
/// characters (see the module's documentation for the shortening).
pub fn pool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", normalize(server), normalize(tool));
    if full.len() <= MAX_NAME {
        return full;
    }
    // All ASCII after normalization: byte offsets are character offsets.
    let keep = MAX_NAME - HASH_HEX - 1;
    let hash = fnv1a(&[server, tool]) >> 32;
    format!("{}_{:08x}", &full[..keep], hash as u32)
}

/// How the pool treats what servers send.
#[derive(Debug, Clone)]
pub struct PoolLimits {
    /// Descriptions longer than this many characters are cut (with a marker) to it.
    pub max_description: usize,
}

/// Where a server's tools in the pool come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The server listed them.
    Server,
    /// The host serves them (an in-process server); they sort before server tools.
    Host,
    /// The server needs authorization: its one tool is the `authenticate` pseudo-tool (M10),
    /// which the manager answers itself.
    Auth,
}

/// The pseudo-tool of a server in `needs-auth` (M10): calling it starts the authorization.
pub const AUTHENTICATE: &str = "authenticate";

/// The tool list of a server in `needs-auth`: the pseudo-tool alone.
pub fn authenticate_tools(server: &str) -> Vec<Value> {
    vec![json!({
        "name": AUTHENTICATE,
        "description": format!(
            "The MCP server {server:?} needs authorization before its tools can be used. Call this \
             tool to start it: it returns a URL for the user to open in a browser. Once they have \
             authorized, this tool is replaced by the server's own tools."
        ),
        "inputSchema": {"type": "object", "properties": {}},
    })]
}

/// One tool of the pool.
#[derive(Debug, Clone)]
pub struct PoolTool {
    pub name: String,
    pub server: String,
    pub tool: String,
    /// Host (in-process) tools sort before server tools.
    pub host: bool,
    /// The `authenticate` pseudo-tool of a server in `needs-auth`.
    pub auth: bool,
    /// The entry handed to the host (JSON).
    pub entry: Value,
}

/// What `list_tools` returns, and the reverse map.
#[derive(Debug, Default, Clone)]
pub struct Pool {
    pub tools: Vec<PoolTool>,
    pub dropped: Vec<Value>,
    pub by_name: HashMap<String, usize>,
}

impl Pool {
    /// Builds the pool from each server's tools as the server listed them (`(server, host,
    /// tools)`), in any order: the pool's order is its own.
    pub fn build(servers: &[(String, Source, Vec<Value>)], limits: &PoolLimits) -> Pool {
        let mut all: Vec<PoolTool> = Vec::new();
        for (server, source, tools) in servers {
            for t in tools {
                let Some(tool) = t.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let name = pool_name(server, tool);
                let mut entry = entry(&name, server, tool, t, limits);
                if *source == Source::Auth {
                    entry["authenticate"] = json!(true);
                }
                all.push(PoolTool {
                    entry,
                    name,
                    server: server.clone(),
                    tool: tool.to_string(),
                    host: *source == Source::Host,
                    auth: *source == Source::Auth,
                });
            }
        }
        all.sort_by(|a, b| {
            b.host
                .cmp(&a.host)
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.server.cmp(&b.server))
                .then_with(|| a.tool.cmp(&b.tool))
        });
        let mut pool = Pool::default();
        for t in all {
            if let Some(&first) = pool.by_name.get(&t.name) {
                let winner = &pool.tools[first];
                pool.dropped.push(json!({
                    "name": t.name, "server": t.server, "tool": t.tool,
                    "reason": "duplicate",
                    "detail": format!("the pool name is taken by tool {:?} of server {:?}", winner.tool, winner.server),
                }));
                continue;
            }
            pool.by_name.insert(t.name.clone(), pool.tools.len());
            pool.tools.push(t);
        }
        pool
    }

    pub fn get(&self, name: &str) -> Option<&PoolTool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    pub fn names(&self) -> Vec<Value> {
        self.tools.iter().map(|t| json!(t.name)).collect()
    }
}

/// The host's view of one tool: pool name, origin, cleaned and capped description, the
/// `inputSchema` (and `outputSchema`, `annotations`, `title`, `_meta`) as the server sent them,
/// and the flags.
fn entry(name: &str, server: &str, tool: &str, t: &Value, limits: &PoolLimits) -> Value {
    let mut e = Map::new();
    e.insert("name".into(), json!(name));
    e.insert("server".into(), json!(server));
    e.insert("tool".into(), json!(tool));
    let raw = t.get("description").and_then(Value::as_str).unwrap_or("");
    let (description, cut) = hygiene::cap_description(&hygiene::clean(raw), limits.max_description);
    e.insert("description".into(), json!(description));
    if cut > 0 {
        e.insert("description_cut".into(), json!(cut));
    }
    for key in [
        "title",
        "inputSchema",
        "outputSchema",
        "annotations",
        "_meta",
    ] {
        if let Some(v) = t.get(key) {
            e.insert(key.into(), v.clone());
        }
    }
    let hint = |k: &str| t.get("annotations").and_then(|a| a.get(k)) == Some(&Value::Bool(true));
    let meta = t.get("_meta");
    e.insert("read_only".into(), json!(hint("readOnlyHint")));
    e.insert("destructive".into(), json!(hint("destructiveHint")));
    e.insert(
        "always_load".into(),
        json!(meta.and_then(|m| m.get("anthropic/alwaysLoad")) == Some(&Value::Bool(true))),
    );
    let search_hint = meta
        .and_then(|m| m.get("anthropic/searchHint"))
        .and_then(Value::as_str)
        .map(hygiene::clean);
    e.insert("search_hint".into(), json!(search_hint));
    Value::Object(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> PoolLimits {
        PoolLimits {
            max_description: 2048,
        }
    }

    #[test]
    fn names_are_normalized_and_short() {
        assert_eq!(
            pool_name("my server", "get.item"),
            "mcp__my_server__get_item"
        );
        assert_eq!(pool_name("a-b", "c_d"), "mcp__a-b__c_d");
        assert_eq!(pool_name("s", "é"), "mcp__s___");
        let long_tool = "x".repeat(80);
        let a = pool_name("srv", &long_tool);
        let b = pool_name("srv", &format!("{long_tool}y"));
        assert_eq!(a.len(), 64);
        assert_eq!(b.len(), 64);
        assert_ne!(a, b, "two long names with one prefix stay apart");
        assert_eq!(a, pool_name("srv", &long_tool), "the same on every call");
        assert!(a.starts_with("mcp__srv__xxx"));
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        // Exactly 64 is kept as it is.
        let fit = "t".repeat(64 - "mcp__s__".len());
        assert_eq!(pool_name("s", &fit), format!("mcp__s__{fit}"));
    }

    #[test]
    fn order_first_wins_and_flags() {
        let servers = vec![
            (
                "b".to_string(),
                Source::Server,
                vec![
                    json!({"name": "z", "inputSchema": {"type": "object", "x": [1]}}),
                    json!({"name": "a.b", "annotations": {"readOnlyHint": true}}),
                ],
            ),
            (
                "a".to_string(),
                Source::Server,
                vec![
                    json!({"name": "q", "annotations": {"destructiveHint": true},
                    "_meta": {"anthropic/alwaysLoad": true, "anthropic/searchHint": "find\u{200b}er"}}),
                ],
            ),
            (
                "b".to_string(),
                Source::Server,
                vec![json!({"name": "a_b", "description": "later"})],
            ),
            ("h".to_string(), Source::Host, vec![json!({"name": "zz"})]),
        ];
        let pool = Pool::build(&servers, &limits());
        let names: Vec<&str> = pool.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["mcp__h__zz", "mcp__a__q", "mcp__b__a_b", "mcp__b__z"],
            "host tools first, then by name"
        );
        // "a.b" and "a_b" share a pool name: "a.b" sorts first and wins.
        assert_eq!(pool.get("mcp__b__a_b").unwrap().tool, "a.b");
        assert_eq!(pool.dropped.len(), 1);
        assert_eq!(pool.dropped[0]["tool"], "a_b");
        let q = &pool.get("mcp__a__q").unwrap().entry;
        assert_eq!(q["destructive"], true);
        assert_eq!(q["read_only"], false);
        assert_eq!(q["always_load"], true);
        assert_eq!(q["search_hint"], "finder");
        assert_eq!(pool.get("mcp__b__a_b").unwrap().entry["read_only"], true);
        assert_eq!(
            pool.get("mcp__b__z").unwrap().entry["inputSchema"],
            json!({"type": "object", "x": [1]}),
            "inputSchema untouched"
        );
    }

    #[test]
    fn long_descriptions_are_capped() {
        let servers = vec![(
            "s".to_string(),
            Source::Server,
            vec![json!({"name": "t", "description": "d".repeat(5000)})],
        )];
        let pool = Pool::build(
            &servers,
            &PoolLimits {
                max_description: 100,
            },
        );
        let e = &pool.tools[0].entry;
        let d = e["description"].as_str().unwrap();
        assert_eq!(d.chars().count(), 100);
        assert!(d.ends_with("[truncated]"), "{d}");
        assert!(e["description_cut"].as_u64().unwrap() > 4900);
    }
}
