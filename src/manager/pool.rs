//! The tool pool: every connected server's tools under one flat namespace, the way Claude Code
//! names them (`mcp__{server}__{tool}`), with the flags a host needs and a reverse map from a
//! pool name to the server and tool it stands for.
//!
//! Names: each part has every character outside `[a-zA-Z0-9_-]` replaced by `_`; a name longer
//! than 64 characters keeps its first 55 and ends with `_` and 8 hex digits of a hash of the
//! original server and tool names, so two long names that share a prefix stay apart, the same
//! way on every run.
//!
//! One rule gives a name to what it names, for tools and prompts alike ([`settle`]): names are
//! not reversible (`mcp__x__y__z` is server `x`'s tool `y__z` and server `x__y`'s tool `z`), so a
//! name that two servers' tools (or prompts) come out as goes to neither — each is reported in
//! `dropped` (reason `collision`, naming the other servers), and a call by that name is refused
//! naming them; routing it to either would let one server capture the other's name. Two tools of
//! one server with one name: the first in the pool's order keeps it (host tools first, then
//! server tools, each group sorted by name; ties by server then tool name) and the other is
//! reported (reason `duplicate`).

use super::hygiene;
use crate::error::{Error, ErrorKind};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

/// One tool as its server listed it: the text it sent, kept whole. Trees cost ten times the
/// text and more: 100,000 small tools (7 MB listed) held 460 MiB as trees and pool entries.
pub type Listed = Box<RawValue>;

/// The members of a listed tool a pool entry passes on as the server wrote them, in this order.
const PASSED: [&str; 5] = [
    "title",
    "inputSchema",
    "outputSchema",
    "annotations",
    "_meta",
];

/// The longest tool name the model APIs accept.
const MAX_NAME: usize = 64;
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

/// Whether `name` can be a name [`pool_name`] makes for something of `server`: it begins with
/// `mcp__{server}__` (normalized) as written, or, for a shortened name, with as much of it as
/// the shortening kept. Who can claim a name is asked of these servers only.
pub fn may_name(server: &str, name: &str) -> bool {
    let prefix = format!("mcp__{}__", normalize(server));
    let kept = MAX_NAME - HASH_HEX - 1;
    if prefix.len() > kept {
        return name.len() == MAX_NAME && name.starts_with(&prefix[..kept]);
    }
    name.starts_with(&prefix)
}

/// One claim on a qualified name: `own`, a tool's (or prompt's) own name on `server`, comes out
/// as `name`.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub name: &'a str,
    pub server: &'a str,
    pub own: &'a str,
}

/// The one rule, for tools and prompts (`what`: `"tool"` or `"prompt"`, the key of the own name
/// in a `dropped` entry): which `claims` (in the caller's order) keep their names. A name
/// claimed from more than one server is given to none (each claim dropped, reason `collision`);
/// within one server the first claim keeps it (the later ones dropped, reason `duplicate`).
/// Returns, for each claim, whether it keeps its name, and the `dropped` entries in order.
pub fn settle(claims: &[Claim<'_>], what: &str) -> (Vec<bool>, Vec<Value>) {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::with_capacity(claims.len());
    for (i, c) in claims.iter().enumerate() {
        by_name.entry(c.name).or_default().push(i);
    }
    let mut keep = vec![false; claims.len()];
    let mut dropped = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let same = &by_name[c.name];
        let mut servers: Vec<&str> = same.iter().map(|&j| claims[j].server).collect();
        servers.sort_unstable();
        servers.dedup();
        let (reason, detail) = if servers.len() > 1 {
            let named: Vec<String> = servers.iter().map(|s| format!("{s:?}")).collect();
            (
                "collision",
                format!(
                    "a {what} of each of the servers {} comes out as {:?} (the name cannot tell them apart): it goes to none of them",
                    named.join(", "),
                    c.name
                ),
            )
        } else if same[0] != i {
            let first = &claims[same[0]];
            (
                "duplicate",
                format!(
                    "the name is taken by {what} {:?} of server {:?}",
                    first.own, first.server
                ),
            )
        } else {
            keep[i] = true;
            continue;
        };
        dropped.push(json!({
            "name": c.name, "server": c.server, what: c.own,
            "reason": reason, "detail": detail,
        }));
    }
    (keep, dropped)
}

/// The error of a call by a name [`settle`] gave to none (`dropped`: its `collision` entries),
/// or `None` when no collision took it: `not_found`, naming the servers, `data.collision` the
/// entries.
pub fn collided(name: &str, dropped: &[&Value]) -> Option<Error> {
    if dropped.is_empty() {
        return None;
    }
    let mut servers: Vec<String> = dropped
        .iter()
        .filter_map(|d| d["server"].as_str())
        .map(|s| format!("{s:?}"))
        .collect();
    servers.sort_unstable();
    servers.dedup();
    let mut e = Error::new(
        ErrorKind::NotFound,
        format!(
            "{name:?} names something of each of the servers {} (the name cannot tell them apart): it is routed to none of them; call them by their servers (request) or rename one server",
            servers.join(", ")
        ),
    );
    e.data = Some(json!({ "name": name, "collision": dropped }));
    Some(e)
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
    /// The manager's own tools over every server's resources (`resource_tools`): Claude Code's
    /// `ListMcpResourcesTool` and `ReadMcpResourceTool`, named as they are (no prefix).
    Resources,
}

/// Claude Code's names for the resource tools.
pub const LIST_RESOURCES_TOOL: &str = "ListMcpResourcesTool";
pub const READ_RESOURCE_TOOL: &str = "ReadMcpResourceTool";

/// The resource tools as listed (one list, so that a rebuild sees them unchanged).
pub fn resource_tools() -> Arc<Vec<Listed>> {
    static TOOLS: once_cell::sync::Lazy<Arc<Vec<Listed>>> = once_cell::sync::Lazy::new(|| {
        Arc::new(listed(&[
            json!({
                "name": LIST_RESOURCES_TOOL,
                "description": "Lists the resources of the connected MCP servers. Each resource \
                    object includes a `server` field naming the server it is from; give `server` to \
                    list one server's resources only.",
                "inputSchema": {"type": "object", "properties": {
                    "server": {"type": "string", "description": "Only this server's resources"}
                }},
                "annotations": {"readOnlyHint": true},
            }),
            json!({
                "name": READ_RESOURCE_TOOL,
                "description": "Reads a resource of an MCP server, named by the server and the \
                    resource's URI (as ListMcpResourcesTool lists them).",
                "inputSchema": {"type": "object", "properties": {
                    "server": {"type": "string", "description": "The server's name"},
                    "uri": {"type": "string", "description": "The resource's URI"}
                }, "required": ["server", "uri"]},
                "annotations": {"readOnlyHint": true},
            }),
        ]))
    });
    TOOLS.clone()
}

/// The pseudo-tool of a server in `needs-auth` (M10): calling it starts the authorization.
pub const AUTHENTICATE: &str = "authenticate";

/// The tool list of a server in `needs-auth`: the pseudo-tool alone.
pub fn authenticate_tools(server: &str) -> Vec<Listed> {
    listed(&[json!({
        "name": AUTHENTICATE,
        "description": format!(
            "The MCP server {server:?} needs authorization before its tools can be used. Call this \
             tool to start it: it returns a URL for the user to open in a browser. Once they have \
             authorized, this tool is replaced by the server's own tools."
        ),
        "inputSchema": {"type": "object", "properties": {}},
    })])
}

/// Tools as listed, from trees (an in-process server's, the pseudo-tool).
pub fn listed(tools: &[Value]) -> Vec<Listed> {
    tools
        .iter()
        .filter_map(|t| serde_json::value::to_raw_value(t).ok())
        .collect()
}

/// One tool of the pool: what the host is handed for it, as small fields and spans of the text
/// its server listed (shared with the server's part), so the pool costs about what was sent.
#[derive(Debug, Clone)]
pub struct PoolTool {
    pub name: String,
    pub server: String,
    pub tool: String,
    /// Host (in-process) tools sort before server tools.
    pub host: bool,
    /// The `authenticate` pseudo-tool of a server in `needs-auth`.
    pub auth: bool,
    /// One of the manager's resource tools (`resource_tools`).
    pub resources: bool,
    /// The server's tools as listed, and this one's index there.
    listed: Arc<Vec<Listed>>,
    index: usize,
    description: Description,
    /// Characters cut from the description (0: none).
    pub description_cut: usize,
    /// Where `title`, `inputSchema`, `outputSchema`, `annotations`, `_meta` are in the tool's text.
    passed: [Option<Span>; PASSED.len()],
    pub read_only: bool,
    pub destructive: bool,
    pub always_load: bool,
    pub search_hint: Option<String>,
}

/// A member's value in a tool's text: its byte offset and length.
#[derive(Debug, Clone, Copy)]
struct Span(u32, u32);

#[derive(Debug, Clone)]
enum Description {
    /// The server's own string, which cleaning and the cap left as it was.
    Listed(Span),
    /// Cleaned or cut (or there was none: empty).
    Made(String),
}

impl PoolTool {
    /// The entry as a tree (search results, the command line, tests); [`Serialize`] writes the
    /// same as text without one.
    pub fn entry(&self) -> Value {
        // Serializing into a tree fails only on a map key that is not a string: there is none.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The tool as its server listed it, untouched (what serving hands a client).
    pub fn listed_text(&self) -> &RawValue {
        &self.listed[self.index]
    }

    /// Where its server listed it (0 first).
    pub fn listed_at(&self) -> usize {
        self.index
    }

    /// The description the host is handed (cleaned and capped).
    pub fn description(&self) -> Cow<'_, str> {
        match &self.description {
            Description::Listed(span) => {
                Cow::Owned(serde_json::from_str(self.member(*span).get()).unwrap_or_default())
            }
            Description::Made(text) => Cow::Borrowed(text),
        }
    }

    /// A member of the tool's text as the server wrote it.
    fn member(&self, Span(at, len): Span) -> &RawValue {
        let text = self.listed[self.index].get();
        let at = at as usize;
        // The span was a member's value when the pool was built from this very text.
        serde_json::from_str(&text[at..at + len as usize]).unwrap_or_else(|_| null())
    }
}

fn null() -> &'static RawValue {
    static NULL: once_cell::sync::Lazy<Box<RawValue>> =
        once_cell::sync::Lazy::new(|| RawValue::from_string("null".into()).expect("JSON"));
    &NULL
}

/// The host's view of one tool: pool name, origin, cleaned and capped description, the members
/// passed on as the server sent them, and the flags.
impl Serialize for PoolTool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.fields(&mut map)?;
        map.end()
    }
}

impl PoolTool {
    fn fields<M: serde::ser::SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("server", &self.server)?;
        map.serialize_entry("tool", &self.tool)?;
        match &self.description {
            Description::Listed(span) => map.serialize_entry("description", self.member(*span))?,
            Description::Made(text) => map.serialize_entry("description", text)?,
        }
        if self.description_cut > 0 {
            map.serialize_entry("description_cut", &self.description_cut)?;
        }
        for (key, span) in PASSED.iter().zip(&self.passed) {
            if let Some(span) = span {
                map.serialize_entry(key, self.member(*span))?;
            }
        }
        map.serialize_entry("read_only", &self.read_only)?;
        map.serialize_entry("destructive", &self.destructive)?;
        map.serialize_entry("always_load", &self.always_load)?;
        map.serialize_entry("search_hint", &self.search_hint)?;
        if self.auth {
            map.serialize_entry("authenticate", &true)?;
        }
        Ok(())
    }
}

/// What the manager's `list_tools` returns: `{"tools": [...], "dropped": [...]}`, each tool
/// with its server's registry mark when a registry knows the server.
#[derive(serde::Serialize)]
pub struct Listing<'a> {
    pub tools: Vec<Marked<'a>>,
    pub dropped: &'a [Value],
}

/// A pool entry and its server's registry mark (`registry`), if any.
pub struct Marked<'a>(pub &'a PoolTool, pub Option<&'a Value>);

impl Serialize for Marked<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.0.fields(&mut map)?;
        if let Some(mark) = self.1 {
            map.serialize_entry("registry", mark)?;
        }
        map.end()
    }
}

/// The pool, and the reverse map.
#[derive(Debug, Default, Clone)]
pub struct Pool {
    pub tools: Vec<Arc<PoolTool>>,
    pub dropped: Vec<Value>,
    pub by_name: HashMap<String, usize>,
    /// Each server's part as it was built, for the next build: a server whose tools did not
    /// change is not built again (a manager of 1,000 servers rebuilds at every state change).
    parts: HashMap<String, Part>,
}

/// One server's tools, as listed and as built for the pool.
#[derive(Debug, Clone)]
struct Part {
    source: Source,
    listed: Arc<Vec<Listed>>,
    built: Vec<Arc<PoolTool>>,
}

impl Pool {
    /// Builds the pool from each server's tools as the server listed them (`(server, host,
    /// tools)`), in any order: the pool's order is its own.
    pub fn build(servers: &[(String, Source, Vec<Value>)], limits: &PoolLimits) -> Pool {
        let servers: Vec<(String, Source, Arc<Vec<Listed>>)> = servers
            .iter()
            .map(|(name, source, tools)| (name.clone(), *source, Arc::new(listed(tools))))
            .collect();
        Pool::default()
            .rebuild(&servers, limits)
            .unwrap_or_default()
    }

    /// The pool of `servers` (as [`Pool::build`]), reusing this one's parts for the servers
    /// whose listed tools are the same (`Arc::ptr_eq`); `None` when nothing changed at all.
    /// A change costs building the changed servers' entries, and a sort and a map of
    /// reference-counted entries for the rest.
    pub fn rebuild(
        &self,
        servers: &[(String, Source, Arc<Vec<Listed>>)],
        limits: &PoolLimits,
    ) -> Option<Pool> {
        let same = |name: &String, source: Source, listed: &Arc<Vec<Listed>>| {
            self.parts
                .get(name)
                // The `authenticate` pseudo-tool depends on the server's name alone.
                .filter(|p| {
                    p.source == source && (source == Source::Auth || Arc::ptr_eq(&p.listed, listed))
                })
        };
        if servers.len() == self.parts.len()
            && servers
                .iter()
                .all(|(name, source, listed)| same(name, *source, listed).is_some())
        {
            return None;
        }
        let mut parts = HashMap::with_capacity(servers.len());
        let mut all: Vec<Arc<PoolTool>> = Vec::new();
        for (server, source, listed) in servers {
            let built = match same(server, *source, listed) {
                Some(part) => part.built.clone(),
                None => build_part(server, *source, listed, limits),
            };
            all.extend(built.iter().cloned());
            parts.insert(
                server.clone(),
                Part {
                    source: *source,
                    listed: listed.clone(),
                    built,
                },
            );
        }
        all.sort_by(|a, b| {
            b.host
                .cmp(&a.host)
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.server.cmp(&b.server))
                .then_with(|| a.tool.cmp(&b.tool))
        });
        let claims: Vec<Claim<'_>> = all
            .iter()
            .map(|t| Claim {
                name: &t.name,
                server: &t.server,
                own: &t.tool,
            })
            .collect();
        let (keep, dropped) = settle(&claims, "tool");
        let mut pool = Pool {
            parts,
            dropped,
            ..Pool::default()
        };
        pool.by_name.reserve(all.len());
        for (t, keep) in all.into_iter().zip(keep) {
            if keep {
                pool.by_name.insert(t.name.clone(), pool.tools.len());
                pool.tools.push(t);
            }
        }
        Some(pool)
    }

    pub fn get(&self, name: &str) -> Option<&PoolTool> {
        self.by_name.get(name).map(|&i| &*self.tools[i])
    }

    /// Why `name` is not in the pool though tools came out as it: the `dropped` entries of a
    /// collision (reason `collision`), if any.
    pub fn collision(&self, name: &str) -> Vec<&Value> {
        self.dropped
            .iter()
            .filter(|d| d["name"] == name && d["reason"] == "collision")
            .collect()
    }

    pub fn names(&self) -> Vec<Value> {
        self.tools.iter().map(|t| json!(t.name)).collect()
    }
}

/// One server's tools as pool entries. A listed tool that is not an object with a string
/// `name` is left out.
fn build_part(
    server: &str,
    source: Source,
    listed: &Arc<Vec<Listed>>,
    limits: &PoolLimits,
) -> Vec<Arc<PoolTool>> {
    let mut built = Vec::with_capacity(listed.len());
    for index in 0..listed.len() {
        if let Some(tool) = pool_tool(server, source, listed, index, limits) {
            built.push(Arc::new(tool));
        }
    }
    built
}

/// The pool's entry for one listed tool, read from its text without a tree.
fn pool_tool(
    server: &str,
    source: Source,
    listed: &Arc<Vec<Listed>>,
    index: usize,
    limits: &PoolLimits,
) -> Option<PoolTool> {
    let text = listed[index].get();
    let members = Members::of(&listed[index])?;
    let tool: String = members.string("name")?;
    // Where a member's value is in `text` (it is a slice of it); a tool over 4 GiB is no tool.
    let span = |v: &RawValue| -> Option<Span> {
        let at = (v.get().as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        Some(Span(
            u32::try_from(at).ok()?,
            u32::try_from(v.get().len()).ok()?,
        ))
    };
    let listed_description = members.get("description");
    let raw = members.string("description").unwrap_or_default();
    let (cleaned, description_cut) =
        hygiene::cap_description(&hygiene::clean(&raw), limits.max_description);
    let description = match listed_description.and_then(span) {
        Some(at) if cleaned == raw && description_cut == 0 && !raw.is_empty() => {
            Description::Listed(at)
        }
        _ => Description::Made(cleaned),
    };
    let annotations = members.get("annotations").and_then(Members::of);
    let meta = members.get("_meta").and_then(Members::of);
    let is_true = |m: &Option<Members<'_>>, key: &str| {
        m.as_ref()
            .and_then(|m| m.get(key))
            .is_some_and(|v| v.get() == "true")
    };
    let mut passed = [None; PASSED.len()];
    for (slot, key) in passed.iter_mut().zip(PASSED) {
        *slot = members.get(key).and_then(span);
    }
    Some(PoolTool {
        name: if source == Source::Resources {
            tool.clone()
        } else {
            pool_name(server, &tool)
        },
        server: server.to_string(),
        host: source == Source::Host,
        auth: source == Source::Auth,
        resources: source == Source::Resources,
        listed: listed.clone(),
        index,
        description,
        description_cut,
        passed,
        read_only: is_true(&annotations, "readOnlyHint"),
        destructive: is_true(&annotations, "destructiveHint"),
        always_load: is_true(&meta, "anthropic/alwaysLoad"),
        search_hint: meta
            .as_ref()
            .and_then(|m| m.string("anthropic/searchHint"))
            .map(|h| hygiene::clean(&h)),
        tool,
    })
}

/// The members of a JSON object, borrowed from its text; as in a tree, the last of a key
/// written twice is the one that counts.
struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Members<'a> {
    /// `None` when `raw` is not an object.
    fn of(raw: &'a RawValue) -> Option<Members<'a>> {
        serde_json::from_str(raw.get()).ok()
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The member's string (`None` when absent or not a string).
    fn string(&self, key: &str) -> Option<String> {
        serde_json::from_str(self.get(key)?.get()).ok()
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<Cow<'de, str>, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Each)
    }
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
        let q = &pool.get("mcp__a__q").unwrap().entry();
        assert_eq!(q["destructive"], true);
        assert_eq!(q["read_only"], false);
        assert_eq!(q["always_load"], true);
        assert_eq!(q["search_hint"], "finder");
        assert_eq!(pool.get("mcp__b__a_b").unwrap().entry()["read_only"], true);
        assert_eq!(
            pool.get("mcp__b__z").unwrap().entry()["inputSchema"],
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
        let e = &pool.tools[0].entry();
        let d = e["description"].as_str().unwrap();
        assert_eq!(d.chars().count(), 100);
        assert!(d.ends_with("[truncated]"), "{d}");
        assert!(e["description_cut"].as_u64().unwrap() > 4900);
    }

    #[test]
    fn entries_pass_the_servers_text_on_and_read_it_without_a_tree() {
        let raw = |text: &str| RawValue::from_string(text.to_string()).unwrap();
        let listed = Arc::new(vec![
            // Members as written (spacing, key order, big numbers), an escaped key, a duplicate
            // (the last counts, as in a tree), the flags.
            raw(
                r#"{"name":"a","description":"first","inputSchema":{"type":"object","z":1,"a":12345678901234567890} ,"description":"Done \u00e9","annotations":{"readOnlyHint":true},"_m\u0065ta":{"anthropic/alwaysLoad":true,"anthropic/searchHint":"find\u202e it"}}"#,
            ),
            raw(r#""not a tool""#),
            raw(r#"{"description":"no name"}"#),
            raw(r#"{"name":7}"#),
            raw(r#"{"name":"b","description":"x\u200by"}"#),
        ]);
        let built = build_part("s", Source::Server, &listed, &limits());
        assert_eq!(built.len(), 2, "only objects with a string name");
        let text = serde_json::to_string(&*built[0]).unwrap();
        assert_eq!(
            text,
            r#"{"name":"mcp__s__a","server":"s","tool":"a","description":"Done \u00e9","inputSchema":{"type":"object","z":1,"a":12345678901234567890},"annotations":{"readOnlyHint":true},"_meta":{"anthropic/alwaysLoad":true,"anthropic/searchHint":"find\u202e it"},"read_only":true,"destructive":false,"always_load":true,"search_hint":"find it"}"#
        );
        assert_eq!(built[0].description(), "Done é");
        // Cleaned: its own text, not the server's.
        assert_eq!(built[1].entry()["description"], "xy");
        assert_eq!(built[1].description(), "xy");
    }

    #[test]
    fn a_rebuild_builds_only_the_servers_that_changed() {
        let tools = |names: &[&str]| -> Arc<Vec<Listed>> {
            let trees: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
            Arc::new(listed(&trees))
        };
        let a = tools(&["x", "y"]);
        let b = tools(&["z"]);
        let servers = vec![
            ("a".to_string(), Source::Server, a.clone()),
            ("b".to_string(), Source::Server, b.clone()),
        ];
        let first = Pool::default().rebuild(&servers, &limits()).unwrap();
        assert_eq!(
            first.names(),
            vec![json!("mcp__a__x"), json!("mcp__a__y"), json!("mcp__b__z")]
        );
        // Nothing changed: no new pool.
        assert!(first.rebuild(&servers, &limits()).is_none());
        // b relisted: a's entries are the same allocations, b's are new.
        let b2 = tools(&["w"]);
        let servers = vec![
            ("a".to_string(), Source::Server, a.clone()),
            ("b".to_string(), Source::Server, b2),
        ];
        let second = first.rebuild(&servers, &limits()).unwrap();
        assert_eq!(
            second.names(),
            vec![json!("mcp__a__x"), json!("mcp__a__y"), json!("mcp__b__w")]
        );
        let ax = |p: &Pool| p.tools[p.by_name["mcp__a__x"]].clone();
        assert!(Arc::ptr_eq(&ax(&first), &ax(&second)));
        // b gone, then needing authorization: its pseudo-tool, built once for its name.
        let auth = vec![
            ("a".to_string(), Source::Server, a.clone()),
            (
                "b".to_string(),
                Source::Auth,
                Arc::new(authenticate_tools("b")),
            ),
        ];
        let third = second.rebuild(&auth, &limits()).unwrap();
        assert!(third.get("mcp__b__authenticate").unwrap().auth);
        let again = vec![
            ("a".to_string(), Source::Server, a),
            (
                "b".to_string(),
                Source::Auth,
                Arc::new(authenticate_tools("b")),
            ),
        ];
        assert!(third.rebuild(&again, &limits()).is_none());
        // Fewer servers is a change.
        assert_eq!(
            third.rebuild(&again[..1], &limits()).unwrap().tools.len(),
            2
        );
    }

    #[test]
    fn a_name_two_servers_make_goes_to_neither() {
        // mcp__x__y__z is server x's y__z and server x__y's z: neither captures it, in any order.
        for order in [[0, 1], [1, 0]] {
            let all = [
                (
                    "x".to_string(),
                    Source::Server,
                    vec![json!({"name": "y__z"}), json!({"name": "k"})],
                ),
                (
                    "x__y".to_string(),
                    Source::Server,
                    vec![json!({"name": "z"})],
                ),
            ];
            let servers: Vec<_> = order.iter().map(|&i| all[i].clone()).collect();
            let pool = Pool::build(&servers, &limits());
            assert!(pool.get("mcp__x__y__z").is_none(), "routed to neither");
            assert_eq!(pool.names(), vec![json!("mcp__x__k")]);
            assert_eq!(
                pool.dropped.len(),
                2,
                "reported for both: {:?}",
                pool.dropped
            );
            let mut who: Vec<(&str, &str)> = pool
                .dropped
                .iter()
                .map(|d| (d["server"].as_str().unwrap(), d["tool"].as_str().unwrap()))
                .collect();
            who.sort();
            assert_eq!(who, [("x", "y__z"), ("x__y", "z")]);
            for d in &pool.dropped {
                assert_eq!(d["reason"], "collision");
                let detail = d["detail"].as_str().unwrap();
                assert!(
                    detail.contains("\"x\"") && detail.contains("\"x__y\""),
                    "{detail}"
                );
            }
            let e = collided("mcp__x__y__z", &pool.collision("mcp__x__y__z")).unwrap();
            assert_eq!(e.kind, ErrorKind::NotFound);
            assert!(e.message.contains("\"x__y\""), "{}", e.message);
            assert!(collided("mcp__x__k", &pool.collision("mcp__x__k")).is_none());
        }
        // The same rule for prompts (the one function).
        let claims = [
            Claim {
                name: "mcp__x__y__z",
                server: "x__y",
                own: "z",
            },
            Claim {
                name: "mcp__x__y__z",
                server: "x",
                own: "y__z",
            },
            Claim {
                name: "mcp__x__q",
                server: "x",
                own: "q",
            },
        ];
        let (keep, dropped) = settle(&claims, "prompt");
        assert_eq!(keep, [false, false, true]);
        assert_eq!(dropped[0]["prompt"], "z");
        // Who may make a name: its server's prefix as written (or as much as a shortening kept).
        assert!(may_name("x", "mcp__x__y__z") && may_name("x__y", "mcp__x__y__z"));
        assert!(!may_name("x__y", "mcp__x__k") && !may_name("y", "mcp__x__y__z"));
        let long = "s".repeat(70);
        assert!(may_name(&long, &pool_name(&long, "t")));
    }
}
