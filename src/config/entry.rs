//! One server entry: its checks (as Claude Code's schema has them), the expansion of `${...}`
//! variables, and its signature for deduplication.

use super::text::JsonPath;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Why an entry cannot be used: the JSON path (relative to the entry) and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryError {
    pub at: JsonPath,
    pub message: String,
}

fn err(at: JsonPath, message: impl Into<String>) -> EntryError {
    EntryError {
        at,
        message: message.into(),
    }
}

/// The transport an entry asks for: the one list every layer reads an entry's `type` by —
/// discovery and merge, the client's server spec, the manager, the command line's `--transport`
/// (and `index.d.ts`'s `ServerType`, held to [`Kind::TYPES`] by a test). A new transport is one
/// variant here, its names in `TYPES`, and its arm in `ServerSpec::parse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stdio,
    Http,
    Sse,
    Ws,
    Sdk,
}

impl Kind {
    /// Every `type` an entry may have, and the transport it names: each kind's own name first,
    /// then its aliases (`streamable-http`, as the registry writes it; Claude Code's IDE
    /// connections `sse-ide` and `ws-ide`, which carry an `ideName`).
    pub const TYPES: &'static [(&'static str, Kind)] = &[
        ("stdio", Kind::Stdio),
        ("http", Kind::Http),
        ("sse", Kind::Sse),
        ("ws", Kind::Ws),
        ("sdk", Kind::Sdk),
        ("streamable-http", Kind::Http),
        ("sse-ide", Kind::Sse),
        ("ws-ide", Kind::Ws),
    ];

    /// The kind a `type` string names.
    pub fn from_type(t: &str) -> Option<Kind> {
        Kind::TYPES.iter().find(|(n, _)| *n == t).map(|(_, k)| *k)
    }

    /// The kind of an entry: its `type`, or stdio without one. `None` for a `type` that is
    /// unknown or not a string.
    pub fn of(entry: &Value) -> Option<Kind> {
        match entry.get("type") {
            None | Some(Value::Null) => Some(Kind::Stdio),
            Some(Value::String(t)) => Kind::from_type(t),
            Some(_) => None,
        }
    }

    /// Its own name (what status and listings show, whichever alias the entry used).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
            Kind::Sse => "sse",
            Kind::Ws => "ws",
            Kind::Sdk => "sdk",
        }
    }

    /// A server reached over the network (authorized with OAuth, counted as remote).
    pub fn is_remote(self) -> bool {
        match self {
            Kind::Http | Kind::Sse | Kind::Ws => true,
            Kind::Stdio | Kind::Sdk => false,
        }
    }

    /// `"stdio", "http" (or "streamable-http"), …`: the known types, for error messages.
    pub fn known_types() -> String {
        let own: Vec<Kind> = Kind::TYPES
            .iter()
            .filter(|(n, k)| *n == k.as_str())
            .map(|(_, k)| *k)
            .collect();
        own.iter()
            .map(|k| {
                let aliases: Vec<String> = Kind::TYPES
                    .iter()
                    .filter(|(n, a)| a == k && *n != k.as_str())
                    .map(|(n, _)| format!("{n:?}"))
                    .collect();
                if aliases.is_empty() {
                    format!("{:?}", k.as_str())
                } else {
                    format!("{:?} (or {})", k.as_str(), aliases.join(", "))
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Checks a server's name: `__` would make `mcp__{server}__{tool}` ambiguous.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a server name must not be empty".into());
    }
    if name.contains("__") {
        return Err(format!(
            "server name {name:?} contains \"__\", which would make its tool names \
             (mcp__<server>__<tool>) ambiguous"
        ));
    }
    Ok(())
}

/// Checks an entry in Claude Code's format. Unknown fields are allowed (and kept).
/// `url_needs_type`: a `url` without `type` is an error (Claude Code's files), instead of http.
pub fn validate(entry: &Value) -> Result<Kind, EntryError> {
    let root = JsonPath::default();
    let obj = entry.as_object().ok_or_else(|| {
        err(
            root.clone(),
            format!("a server entry must be an object (got {})", kind_of(entry)),
        )
    })?;
    let kind = match obj.get("type") {
        None => {
            if obj.contains_key("url") {
                return Err(err(
                    root.key("url"),
                    "an entry with a `url` needs a `type` (\"http\", \"sse\" or \"ws\"); \
                     without one it would be taken for a stdio server",
                ));
            }
            Kind::Stdio
        }
        Some(Value::String(t)) => Kind::from_type(t).ok_or_else(|| {
            err(
                root.key("type"),
                format!("unknown type {t:?}; known types: {}", Kind::known_types()),
            )
        })?,
        Some(v) => {
            return Err(err(
                root.key("type"),
                format!("`type` must be a string (got {})", kind_of(v)),
            ))
        }
    };
    match kind {
        Kind::Stdio => {
            match obj.get("command") {
                Some(Value::String(c)) if !c.is_empty() => {}
                Some(Value::String(_)) => {
                    return Err(err(root.key("command"), "`command` must not be empty"))
                }
                Some(v) => {
                    return Err(err(
                        root.key("command"),
                        format!("`command` must be a string (got {})", kind_of(v)),
                    ))
                }
                None => return Err(err(root, "a stdio server needs a `command`")),
            }
            string_array(obj, "args")?;
            string_map(obj, "env")?;
            string_field(obj, "cwd")?;
        }
        Kind::Http | Kind::Sse | Kind::Ws => {
            match obj.get("url") {
                Some(Value::String(u)) if !u.is_empty() => {}
                Some(Value::String(_)) => {
                    return Err(err(root.key("url"), "`url` must not be empty"))
                }
                Some(v) => {
                    return Err(err(
                        root.key("url"),
                        format!("`url` must be a string (got {})", kind_of(v)),
                    ))
                }
                None => return Err(err(root, "a remote server (http, sse, ws) needs a `url`")),
            }
            string_map(obj, "headers")?;
            string_field(obj, "headersHelper")?;
            string_field(obj, "ideName")?;
            if let Some(o) = obj.get("oauth") {
                check_oauth(o)?;
            }
        }
        Kind::Sdk => {
            string_field(obj, "name")?;
        }
    }
    if let Some(t) = obj.get("timeout") {
        if !t.as_f64().is_some_and(|n| n > 0.0) {
            return Err(err(
                root.key("timeout"),
                format!("`timeout` must be a positive number of milliseconds (got {t})"),
            ));
        }
    }
    if let Some(a) = obj.get("alwaysLoad") {
        if !a.is_boolean() {
            return Err(err(
                root.key("alwaysLoad"),
                format!("`alwaysLoad` must be true or false (got {a})"),
            ));
        }
    }
    Ok(kind)
}

fn check_oauth(o: &Value) -> Result<(), EntryError> {
    let at = JsonPath::of_keys(&["oauth"]);
    let obj = o.as_object().ok_or_else(|| {
        err(
            at.clone(),
            format!("`oauth` must be an object (got {})", kind_of(o)),
        )
    })?;
    string_field(obj, "clientId").map_err(|e| prefix(&at, e))?;
    string_field(obj, "authServerMetadataUrl").map_err(|e| prefix(&at, e))?;
    if let Some(u) = obj.get("authServerMetadataUrl").and_then(Value::as_str) {
        if !u.starts_with("https://") {
            return Err(err(
                at.key("authServerMetadataUrl"),
                format!("`authServerMetadataUrl` must be an https URL (got {u:?})"),
            ));
        }
    }
    if let Some(p) = obj.get("callbackPort") {
        if !p.as_u64().is_some_and(|n| (1..=65535).contains(&n)) {
            return Err(err(
                at.key("callbackPort"),
                format!("`callbackPort` must be a port number 1-65535 (got {p})"),
            ));
        }
    }
    match obj.get("scopes") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(v) => {
            return Err(err(
                at.key("scopes"),
                format!("`scopes` must be a string or an array of strings (got {v})"),
            ))
        }
    }
    Ok(())
}

fn prefix(at: &JsonPath, e: EntryError) -> EntryError {
    EntryError {
        at: at.join(&e.at),
        message: e.message,
    }
}

fn string_field(obj: &Map<String, Value>, key: &str) -> Result<(), EntryError> {
    match obj.get(key) {
        None | Some(Value::String(_)) => Ok(()),
        Some(v) => Err(err(
            JsonPath::of_keys(&[key]),
            format!("`{key}` must be a string (got {})", kind_of(v)),
        )),
    }
}

fn string_array(obj: &Map<String, Value>, key: &str) -> Result<(), EntryError> {
    match obj.get(key) {
        None => Ok(()),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if !item.is_string() {
                    return Err(err(
                        JsonPath::of_keys(&[key]).index(i),
                        format!("`{key}` must hold strings (item {i} is {})", kind_of(item)),
                    ));
                }
            }
            Ok(())
        }
        Some(v) => Err(err(
            JsonPath::of_keys(&[key]),
            format!("`{key}` must be an array of strings (got {})", kind_of(v)),
        )),
    }
}

fn string_map(obj: &Map<String, Value>, key: &str) -> Result<(), EntryError> {
    match obj.get(key) {
        None => Ok(()),
        Some(Value::Object(m)) => {
            for (k, v) in m {
                if !v.is_string() {
                    return Err(err(
                        JsonPath::of_keys(&[key, k]),
                        format!("`{key}` values must be strings ({k:?} is {})", kind_of(v)),
                    ));
                }
            }
            Ok(())
        }
        Some(v) => Err(err(
            JsonPath::of_keys(&[key]),
            format!("`{key}` must be an object of strings (got {})", kind_of(v)),
        )),
    }
}

pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `stdio:["cmd","arg",...]` for a local server, `url:<url>` for a remote one, none for sdk.
pub fn signature(entry: &Value, kind: Kind) -> Option<String> {
    match kind {
        Kind::Stdio => {
            let mut argv = vec![entry.get("command")?.clone()];
            if let Some(Value::Array(args)) = entry.get("args") {
                argv.extend(args.iter().cloned());
            }
            Some(format!("stdio:{}", serde_json::to_string(&argv).ok()?))
        }
        Kind::Http | Kind::Sse | Kind::Ws => Some(format!("url:{}", entry.get("url")?.as_str()?)),
        Kind::Sdk => None,
    }
}

/// The command array of a stdio entry (for `serverCommand` policy entries).
pub fn command_array(entry: &Value) -> Option<Vec<String>> {
    let mut argv = vec![entry.get("command")?.as_str()?.to_string()];
    if let Some(Value::Array(args)) = entry.get("args") {
        argv.extend(args.iter().filter_map(|a| a.as_str().map(str::to_string)));
    }
    Some(argv)
}

/// How `${...}` is read in a host's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// Claude Code: `${VAR}` and `${VAR:-default}`.
    ClaudeCode,
    /// VS Code and Cursor: `${env:NAME}`, `${userHome}`, `${workspaceFolder}`, `${input:id}`
    /// (inputs are prompts of the editor: reported unresolved).
    Editor,
    /// No expansion at all (Claude Desktop, Zed).
    None,
}

/// What variables resolve against.
pub struct Vars<'a> {
    pub env: &'a HashMap<String, String>,
    pub home: Option<&'a str>,
    pub workspace: Option<&'a str>,
}

/// Expands variables in `command`, `args`, `env`, `url` and `headers` of an entry. Each variable
/// that cannot be resolved stays as written, and is named in the returned list. The bytes the
/// values add are taken from `budget`, the whole merge's: when a value does not fit in what is
/// left, the entry is an error naming that field (the entry is then not usable, half expanded).
pub fn expand(
    entry: &mut Value,
    syntax: Syntax,
    vars: &Vars,
    budget: &mut Budget,
) -> Result<Vec<String>, EntryError> {
    let mut missing = Vec::new();
    if syntax == Syntax::None {
        return Ok(missing);
    }
    let Some(obj) = entry.as_object_mut() else {
        return Ok(missing);
    };
    let mut field = |s: &mut String, at: JsonPath, missing: &mut Vec<String>| {
        *s = expand_str(s, syntax, vars, missing, budget).map_err(|over| err(at, over))?;
        Ok::<(), EntryError>(())
    };
    for key in ["command", "url"] {
        if let Some(Value::String(s)) = obj.get_mut(key) {
            field(s, JsonPath::of_keys(&[key]), &mut missing)?;
        }
    }
    if let Some(Value::Array(items)) = obj.get_mut("args") {
        for (i, item) in items.iter_mut().enumerate() {
            if let Value::String(s) = item {
                field(s, JsonPath::of_keys(&["args"]).index(i), &mut missing)?;
            }
        }
    }
    for key in ["env", "headers"] {
        if let Some(Value::Object(m)) = obj.get_mut(key) {
            for (name, v) in m.iter_mut() {
                if let Value::String(s) = v {
                    field(s, JsonPath::of_keys(&[key, name]), &mut missing)?;
                }
            }
        }
    }
    Ok(missing)
}

/// The longest a value may grow by expansion: `${A}${A}...` in a small file must not become
/// hundreds of megabytes. A variable whose value would pass it stays as written, and is named
/// among the unresolved ones (a warning).
const MAX_EXPANDED: usize = 1 << 20;

/// The most bytes that the values of variables may add in one merge, all fields of all entries
/// together: a per-field cap alone let 800 fields of 128 KiB each take a merge to half a
/// gigabyte. Eight fields at [`MAX_EXPANDED`]; real configurations use a few kilobytes.
pub(crate) const MAX_MERGE_EXPANDED: usize = 8 << 20;

/// What is left of one merge's [`MAX_MERGE_EXPANDED`] bytes of expanded values.
#[derive(Debug)]
pub struct Budget {
    left: usize,
}

impl Budget {
    /// A whole merge's budget.
    pub fn merge() -> Budget {
        Budget::of(MAX_MERGE_EXPANDED)
    }

    pub fn of(bytes: usize) -> Budget {
        Budget { left: bytes }
    }
}

/// `s` with its variables expanded; `Err` (saying so) when a value would take the merge past its
/// budget. `missing` gets each variable left as written (unresolved, or its value too long for
/// one field).
pub fn expand_str(
    s: &str,
    syntax: Syntax,
    vars: &Vars,
    missing: &mut Vec<String>,
    budget: &mut Budget,
) -> Result<String, String> {
    let mut out = String::with_capacity(s.len().min(MAX_EXPANDED));
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let whole = &rest[start..start + 2 + end + 1];
        match resolve(inner, syntax, vars) {
            Some(v) if out.len() + v.len() + rest.len() <= MAX_EXPANDED => {
                if v.len() > budget.left {
                    return Err(format!(
                        "expanding {whole} here ({} bytes) would take this configuration past {MAX_MERGE_EXPANDED} bytes of expanded variables in all (the limit of one merge); {} bytes were left",
                        v.len(),
                        budget.left
                    ));
                }
                budget.left -= v.len();
                out.push_str(&v);
            }
            Some(_) => {
                let note = format!("{whole} (its value would make the field longer than {MAX_EXPANDED} bytes; not expanded)");
                if !missing.iter().any(|m| m == &note) {
                    missing.push(note);
                }
                out.push_str(whole);
            }
            None => {
                if !missing.iter().any(|m| m == whole) {
                    missing.push(whole.to_string());
                }
                out.push_str(whole);
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve(inner: &str, syntax: Syntax, vars: &Vars) -> Option<String> {
    match syntax {
        Syntax::ClaudeCode => {
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            vars.env
                .get(name)
                .cloned()
                .or_else(|| default.map(str::to_string))
        }
        Syntax::Editor => {
            if let Some(name) = inner.strip_prefix("env:") {
                return vars.env.get(name).cloned();
            }
            match inner {
                "userHome" => vars.home.map(str::to_string),
                "workspaceFolder" => vars.workspace.map(str::to_string),
                "pathSeparator" | "/" => Some("/".into()),
                _ => None, // ${input:...}, ${config:...}, ${command:...}: the editor's own
            }
        }
        Syntax::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expansion_is_capped_in_bytes() {
        let mut env = HashMap::new();
        env.insert("A".to_string(), "x".repeat(300_000));
        let v = vars(&env);
        let mut missing = Vec::new();
        let out = expand_str(
            &"${A}".repeat(100),
            Syntax::ClaudeCode,
            &v,
            &mut missing,
            &mut Budget::merge(),
        )
        .unwrap();
        assert!(out.len() <= MAX_EXPANDED, "{}", out.len());
        assert!(out.ends_with("${A}"));
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].contains("longer than 1048576 bytes"));
    }

    #[test]
    fn expansion_is_capped_per_merge_naming_the_field() {
        let mut env = HashMap::new();
        env.insert("A".to_string(), "x".repeat(1000));
        let v = vars(&env);
        let mut budget = Budget::of(2500);
        let mut e = json!({"command": "${A}", "args": ["${A}", "${A}"]});
        let err = expand(&mut e, Syntax::ClaudeCode, &v, &mut budget).unwrap_err();
        assert_eq!(err.at.to_string(), "args[1]");
        assert!(err.message.contains("${A}"), "{}", err.message);
        assert!(
            err.message.contains("500 bytes were left"),
            "{}",
            err.message
        );
        // The budget is the merge's: what the next entry may still add.
        let mut small = json!({"env": {"K": "${A}"}});
        let err = expand(&mut small, Syntax::ClaudeCode, &v, &mut budget).unwrap_err();
        assert_eq!(err.at.to_string(), "env.K");
        // Text without variables costs nothing.
        let mut plain = json!({"command": "x".repeat(5000)});
        assert!(expand(&mut plain, Syntax::ClaudeCode, &v, &mut budget).is_ok());
    }

    fn vars(env: &HashMap<String, String>) -> Vars<'_> {
        Vars {
            env,
            home: Some("/home/me"),
            workspace: Some("/w"),
        }
    }

    #[test]
    fn claude_code_expansion_with_defaults_and_missing() {
        let env = HashMap::from([("TOKEN".to_string(), "t0k".to_string())]);
        let mut e = json!({"command": "${BIN:-npx}", "args": ["--t=${TOKEN}", "${NOPE}"],
                           "env": {"A": "${NOPE}-${TOKEN}"}, "cwd": "${TOKEN}"});
        let missing = expand(
            &mut e,
            Syntax::ClaudeCode,
            &vars(&env),
            &mut Budget::merge(),
        )
        .unwrap();
        assert_eq!(
            e,
            json!({"command": "npx", "args": ["--t=t0k", "${NOPE}"],
                             "env": {"A": "${NOPE}-t0k"}, "cwd": "${TOKEN}"})
        );
        assert_eq!(missing, vec!["${NOPE}".to_string()]);
    }

    #[test]
    fn editor_expansion() {
        let env = HashMap::from([("K".to_string(), "v".to_string())]);
        let mut e = json!({"command": "${userHome}/bin/x", "args": ["${workspaceFolder}", "${env:K}", "${input:key}", "${K}"]});
        let missing = expand(&mut e, Syntax::Editor, &vars(&env), &mut Budget::merge()).unwrap();
        assert_eq!(e["command"], "/home/me/bin/x");
        assert_eq!(e["args"], json!(["/w", "v", "${input:key}", "${K}"]));
        assert_eq!(
            missing,
            vec!["${input:key}".to_string(), "${K}".to_string()]
        );
    }

    #[test]
    fn validation_messages_name_the_field() {
        let bad = |v: Value| validate(&v).unwrap_err();
        let e = bad(json!({"url": "https://x"}));
        assert_eq!(e.at.to_string(), "url");
        assert!(e.message.contains("needs a `type`"));
        let e = bad(json!({"type": "tcp", "url": "x"}));
        assert!(e.message.contains("unknown type \"tcp\""), "{}", e.message);
        let e = bad(json!({"command": "x", "args": ["a", 1]}));
        assert_eq!(e.at.to_string(), "args[1]");
        let e = bad(json!({"type": "http", "url": "https://x", "oauth": {"callbackPort": 0}}));
        assert_eq!(e.at.to_string(), "oauth.callbackPort");
        assert_eq!(
            validate(&json!({"type": "streamable-http", "url": "u", "x-extra": 1})),
            Ok(Kind::Http)
        );
        assert!(check_name("a__b").is_err());
        assert!(check_name("plugin:p:s").is_ok());
    }

    #[test]
    fn signatures() {
        assert_eq!(
            signature(&json!({"command": "npx", "args": ["-y", "x"]}), Kind::Stdio).unwrap(),
            "stdio:[\"npx\",\"-y\",\"x\"]"
        );
        assert_eq!(
            signature(&json!({"url": "https://a/mcp"}), Kind::Http).unwrap(),
            "url:https://a/mcp"
        );
        assert_eq!(signature(&json!({"name": "s"}), Kind::Sdk), None);
    }
}
