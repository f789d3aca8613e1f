//! The merge: sources in, the servers to connect out, with the reason for every entry left out.
//!
//! Order of the steps (each entry leaves at the first one that excludes it):
//! 1. enterprise exclusivity — when a managed file is present, every other source is listed as
//!    `enterprise_exclusive` (even a malformed managed file: it exists, so nothing else loads);
//! 2. entry checks — `invalid`, with the file, line, column and JSON path;
//! 3. `${...}` expansion (warnings for what stays unresolved);
//! 4. project approval — `pending_approval` / `rejected`;
//! 5. names — the highest scope's whole entry wins, the others are `shadowed`;
//! 6. signatures — a plugin or claude.ai connector with the command or URL of a manual server
//!    (or of an earlier plugin) is a `duplicate`;
//! 7. policy — `denied`, `not_allowed` (sdk servers exempt).

use super::entry::{self, Kind, Syntax, Vars};
use super::policy::{self, PolicyEntry, Verdict};
use super::text::{locate, JsonPath, ParseError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// A host's file format, for the entries read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    ClaudeCode,
    VsCode,
    Cursor,
    Windsurf,
    ClaudeDesktop,
    Zed,
}

/// One source of servers: a file (or an explicitly given content) of one scope.
#[derive(Debug, Clone)]
pub struct Source {
    /// `enterprise`, `dynamic`, `local`, `project`, `user`, `plugin`, `claudeai`, or a host name.
    pub scope: String,
    /// Lower wins on a name conflict.
    pub rank: u32,
    pub file: Option<String>,
    /// The file's text (comments blanked), for line and column of an invalid entry.
    pub text: Option<String>,
    pub content: Result<Value, ParseError>,
    /// Where the servers object sits in the content (`mcpServers`, `servers`, ...).
    pub servers_at: JsonPath,
    pub format: Format,
    /// `${workspaceFolder}` for editor formats.
    pub workspace: Option<String>,
}

impl Source {
    pub fn label(&self) -> String {
        self.file
            .clone()
            .unwrap_or_else(|| format!("<{}>", self.scope))
    }
    fn manual(&self) -> bool {
        !matches!(self.scope.as_str(), "plugin" | "claudeai")
    }
}

/// Policy and approval settings, already gathered from wherever they came from.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub allowed: Option<Vec<PolicyEntry>>,
    pub denied: Vec<PolicyEntry>,
    pub enabled: Vec<String>,
    pub disabled: Vec<String>,
    pub enable_all: bool,
}

pub struct Inputs {
    pub sources: Vec<Source>,
    pub settings: Settings,
    pub env: HashMap<String, String>,
    pub home: Option<String>,
}

/// A server that passed the entry checks.
struct Candidate {
    name: String,
    source: usize,
    order: usize,
    config: Value,
    kind: Kind,
    signature: Option<String>,
}

struct Out {
    excluded: Vec<Value>,
    warnings: Vec<String>,
    errors: Vec<Value>,
}

impl Out {
    fn exclude(&mut self, name: &str, src: &Source, reason: &str, detail: String, extra: Value) {
        let mut e = Map::new();
        e.insert("name".into(), json!(name));
        e.insert("scope".into(), json!(src.scope));
        e.insert("reason".into(), json!(reason));
        e.insert("detail".into(), json!(detail));
        if let Some(f) = &src.file {
            e.insert("file".into(), json!(f));
        }
        if let Value::Object(m) = extra {
            e.extend(m);
        }
        self.excluded.push(Value::Object(e));
    }
}

pub fn run(inputs: &Inputs) -> Value {
    let mut out = Out {
        excluded: Vec::new(),
        warnings: Vec::new(),
        errors: Vec::new(),
    };
    let sources = &inputs.sources;

    // Files that are not JSON (or have no servers object): an error each; the others go on.
    let mut maps: Vec<Option<&Map<String, Value>>> = Vec::with_capacity(sources.len());
    for src in sources {
        maps.push(servers_of(src, &mut out));
    }

    // 1. Enterprise exclusivity.
    let enterprise = sources.iter().position(|s| s.scope == "enterprise");
    let mut candidates: Vec<Candidate> = Vec::new();
    let mut order = 0;
    // The bytes `${...}` values may add, for the whole merge (see `entry::MAX_MERGE_EXPANDED`).
    let mut budget = entry::Budget::merge();
    let mut over_budget = false;
    for (i, src) in sources.iter().enumerate() {
        let Some(map) = maps[i] else { continue };
        if let Some(e) = enterprise {
            if src.scope != "enterprise" {
                for name in map.keys() {
                    out.exclude(
                        name,
                        src,
                        "enterprise_exclusive",
                        format!(
                            "a managed configuration ({}) is present: only its servers load",
                            sources[e].label()
                        ),
                        json!({}),
                    );
                }
                continue;
            }
        }
        for (name, raw) in map {
            order += 1;
            // 2. Entry checks.
            let entry_path = src.servers_at.key(name);
            if let Err(message) = entry::check_name(name) {
                invalid(&mut out, src, name, &entry_path, message);
                continue;
            }
            let mut config = normalize(raw, src.format);
            let kind = match entry::validate(&config) {
                Ok(k) => k,
                Err(e) => {
                    invalid(&mut out, src, name, &entry_path.join(&e.at), e.message);
                    continue;
                }
            };
            // 3. Expansion — not of a project entry that is not approved (step 4 excludes it):
            // an untrusted file gets no look at the environment.
            let st = &inputs.settings;
            let approved = src.scope != "project"
                || (!st.disabled.iter().any(|n| n == name)
                    && (st.enable_all || st.enabled.iter().any(|n| n == name)));
            let vars = Vars {
                env: &inputs.env,
                home: inputs.home.as_deref(),
                workspace: src.workspace.as_deref(),
            };
            if approved {
                match entry::expand(&mut config, syntax_of(src.format), &vars, &mut budget) {
                    Ok(unresolved) => {
                        for var in unresolved {
                            out.warnings.push(unresolved_warning(name, src, &var));
                        }
                    }
                    Err(e) => {
                        let at = entry_path.join(&e.at);
                        // Also an error of the configuration (not just this entry's fate), once:
                        // `explain` and `list` then fail, saying where the limit was reached.
                        if !over_budget {
                            over_budget = true;
                            file_error(src, &mut out, &at, format!("{at}: {}", e.message));
                        }
                        invalid(&mut out, src, name, &at, e.message);
                        continue;
                    }
                }
            }
            let signature = entry::signature(&config, kind);
            candidates.push(Candidate {
                name: name.clone(),
                source: i,
                order,
                config,
                kind,
                signature,
            });
        }
    }

    // 4. Project approval.
    let st = &inputs.settings;
    candidates.retain(|c| {
        let src = &sources[c.source];
        if src.scope != "project" {
            return true;
        }
        if st.disabled.iter().any(|n| n == &c.name) {
            out.exclude(
                &c.name,
                src,
                "rejected",
                "disabled in disabledMcpjsonServers".into(),
                json!({}),
            );
            return false;
        }
        if st.enable_all || st.enabled.iter().any(|n| n == &c.name) {
            return true;
        }
        out.exclude(
            &c.name,
            src,
            "pending_approval",
            "a project server not approved yet: add it to enabledMcpjsonServers (or set \
             enableAllProjectMcpServers)"
                .into(),
            json!({}),
        );
        false
    });

    // 5. Names: by scope rank, then by the order of the sources (closest project file first).
    candidates.sort_by_key(|c| (sources[c.source].rank, c.source, c.order));
    let mut winners: Vec<Candidate> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for c in candidates {
        if let Some(&w) = by_name.get(&c.name) {
            let ws = &sources[winners[w].source];
            let src = &sources[c.source];
            out.exclude(
                &c.name,
                src,
                "shadowed",
                format!(
                    "shadowed by the entry of the same name in the {} scope ({})",
                    ws.scope,
                    ws.label()
                ),
                match &ws.file {
                    Some(f) => json!({"by": {"scope": ws.scope, "file": f}}),
                    None => json!({"by": {"scope": ws.scope}}),
                },
            );
            continue;
        }
        by_name.insert(c.name.clone(), winners.len());
        winners.push(c);
    }

    // 6. Signatures: manual servers win over plugins, plugins over connectors; first plugin wins.
    let mut seen: HashMap<String, (String, String)> = HashMap::new();
    for c in winners.iter().filter(|c| sources[c.source].manual()) {
        if let Some(sig) = &c.signature {
            seen.entry(sig.clone())
                .or_insert_with(|| (c.name.clone(), sources[c.source].scope.clone()));
        }
    }
    let mut kept: Vec<Candidate> = Vec::new();
    for c in winners {
        let src = &sources[c.source];
        if !src.manual() {
            if let Some(sig) = &c.signature {
                if let Some((other, other_scope)) = seen.get(sig) {
                    let what = if c.kind == Kind::Stdio {
                        "command"
                    } else {
                        "URL"
                    };
                    out.exclude(
                        &c.name,
                        src,
                        "duplicate",
                        format!("same {what} as '{other}' ({other_scope} scope), which is kept"),
                        json!({"duplicate_of": other, "signature": sig}),
                    );
                    continue;
                }
                seen.insert(sig.clone(), (c.name.clone(), src.scope.clone()));
            }
        }
        kept.push(c);
    }

    // 7. Policy.
    let mut servers = Map::new();
    for c in kept {
        let src = &sources[c.source];
        match policy::judge(
            &c.name,
            &c.config,
            c.kind,
            st.allowed.as_deref(),
            &st.denied,
        ) {
            Verdict::Allowed => {}
            Verdict::Denied(why) => {
                out.exclude(&c.name, src, "denied", why, json!({}));
                continue;
            }
            Verdict::NotAllowed(why) => {
                out.exclude(&c.name, src, "not_allowed", why, json!({}));
                continue;
            }
        }
        let mut s = Map::new();
        s.insert("scope".into(), json!(src.scope));
        s.insert("signature".into(), json!(c.signature));
        s.insert("config".into(), c.config);
        if let Some(f) = &src.file {
            s.insert("file".into(), json!(f));
        }
        servers.insert(c.name, Value::Object(s));
    }
    json!({"servers": servers, "excluded": out.excluded, "warnings": out.warnings, "errors": out.errors})
}

fn unresolved_warning(name: &str, src: &Source, var: &str) -> String {
    if let Some((v, why)) = var.split_once(" (its value would") {
        return format!(
            "server '{name}' ({} scope, {}): {v}: its value would{}",
            src.scope,
            src.label(),
            why.trim_end_matches(')')
        );
    }
    let why = if var.starts_with("${input:") {
        "is an input the editor prompts for, which mcplug cannot ask"
    } else {
        "is not set"
    };
    format!(
        "server '{name}' ({} scope, {}): {var} {why}; left as written",
        src.scope,
        src.label()
    )
}

fn invalid(out: &mut Out, src: &Source, name: &str, path: &JsonPath, message: String) {
    let mut extra = Map::new();
    extra.insert("path".into(), json!(path.to_string()));
    let mut place = src.label();
    if let Some(text) = &src.text {
        // The offending field if it is in the file (it may be a normalized one), else the entry.
        let found = locate(text, path).or_else(|| locate(text, &src.servers_at.key(name)));
        if let Some((line, column)) = found {
            extra.insert("line".into(), json!(line));
            extra.insert("column".into(), json!(column));
            place = format!("{place}:{line}:{column}");
        }
    }
    out.exclude(
        name,
        src,
        "invalid",
        format!("{place}: {path}: {message}"),
        Value::Object(extra),
    );
}

/// The servers object of a source, or `None` after recording why there is none.
fn servers_of<'a>(src: &'a Source, out: &mut Out) -> Option<&'a Map<String, Value>> {
    let content = match &src.content {
        Ok(v) => v,
        Err(e) => {
            out.errors
                .push(json!({"scope": src.scope, "file": e.file, "line": e.line,
                                   "column": e.column, "message": e.message}));
            return None;
        }
    };
    let mut v = content;
    if !v.is_object() {
        file_error(
            src,
            out,
            &JsonPath::default(),
            format!(
                "the file must hold a JSON object (got {})",
                entry::kind_of(v)
            ),
        );
        return None;
    }
    for (depth, seg) in src.servers_at.0.iter().enumerate() {
        let super::text::Seg::Key(k) = seg else {
            return None;
        };
        match v.get(k) {
            None | Some(Value::Null) => return None, // nothing configured here
            Some(next) => v = next,
        }
        if !v.is_object() {
            let at = JsonPath(src.servers_at.0[..=depth].to_vec());
            file_error(
                src,
                out,
                &at,
                format!("`{at}` must be an object (got {})", entry::kind_of(v)),
            );
            return None;
        }
    }
    v.as_object()
}

fn file_error(src: &Source, out: &mut Out, at: &JsonPath, message: String) {
    let mut e = json!({"scope": src.scope, "file": src.label(), "message": message});
    if let Some((line, column)) = src.text.as_deref().and_then(|t| locate(t, at)) {
        e["line"] = json!(line);
        e["column"] = json!(column);
    }
    out.errors.push(e);
}

fn syntax_of(format: Format) -> Syntax {
    match format {
        Format::ClaudeCode => Syntax::ClaudeCode,
        Format::VsCode | Format::Cursor | Format::Windsurf => Syntax::Editor,
        Format::ClaudeDesktop | Format::Zed => Syntax::None,
    }
}

/// Turns another host's entry into Claude Code's form (unknown fields kept).
fn normalize(raw: &Value, format: Format) -> Value {
    let mut v = raw.clone();
    let Some(obj) = v.as_object_mut() else {
        return v;
    };
    match format {
        Format::ClaudeCode | Format::ClaudeDesktop => {}
        Format::VsCode | Format::Cursor => {
            // These editors take a `url` without `type` as a remote (Streamable HTTP first).
            if obj.contains_key("url") && !obj.contains_key("type") {
                obj.insert("type".into(), json!("http"));
            }
        }
        Format::Windsurf => {
            if let Some(u) = obj.remove("serverUrl") {
                obj.insert("url".into(), u);
                obj.entry("type").or_insert(json!("http"));
            } else if obj.contains_key("url") && !obj.contains_key("type") {
                obj.insert("type".into(), json!("http"));
            }
        }
        Format::Zed => {
            // Older Zed: "command": {"path", "args", "env"}; newer: command/args/env at the top.
            if let Some(Value::Object(cmd)) = obj.get("command").cloned() {
                obj.remove("command");
                if let Some(p) = cmd.get("path") {
                    obj.insert("command".into(), p.clone());
                }
                for k in ["args", "env"] {
                    if let Some(x) = cmd.get(k) {
                        obj.insert(k.into(), x.clone());
                    }
                }
            }
            if obj.contains_key("url") && !obj.contains_key("type") {
                obj.insert("type".into(), json!("http"));
            }
        }
    }
    v
}
