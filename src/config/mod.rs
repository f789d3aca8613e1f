//! MCP server configuration the way Claude Code has it: scopes and their files, the merge (the
//! highest scope's whole entry wins), enterprise exclusivity, signature dedup, allow/deny policy,
//! `${VAR}` expansion, project approval — and an explanation for every entry left out. Other
//! hosts' files (VS Code, Cursor, Windsurf, Claude Desktop, Zed) are read on request.
//!
//! - [`merge`]: pure; every source given explicitly (the `mcplug_config_merge` input);
//! - [`discover`]: reads the files from a home, a working directory and a managed directory;
//! - [`add_server`] / [`remove_server`]: edit one scope's file, keeping the rest of it.
//!
//! Plain Rust, no C: `ffi::config` translates.

mod discover;
mod edit;
mod entry;
mod merge;
mod policy;
mod text;

pub use discover::discover;
pub use edit::{add_server, approve_project_server, remove_server, reset_project_choices};
pub use entry::Kind;
pub use text::{strip_jsonc, JsonPath, ParseError};

/// An allow/deny policy given with servers that come from no merge (a raw `mcpServers` given
/// to the manager, the CLI's `--mcp-config`): Claude Code applies its policy to those too.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    allowed: Option<Vec<policy::PolicyEntry>>,
    denied: Vec<policy::PolicyEntry>,
}

impl Policy {
    /// `{"allowedMcpServers": [...]?, "deniedMcpServers": [...]?}`, each entry as in
    /// `managed-settings.json`; `what` names the option in errors. An entry that cannot be
    /// read fails the whole policy (closed, never open).
    pub fn parse(v: &Value, what: &str) -> Result<Policy, Error> {
        let obj = v.as_object().ok_or_else(|| {
            Error::invalid(format!("`{what}` must be an object with allowedMcpServers and/or deniedMcpServers (got {v})"))
        })?;
        if let Some(k) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "allowedMcpServers" | "deniedMcpServers"))
        {
            return Err(crate::shape::unknown_option(
                k,
                &[&["allowedMcpServers", "deniedMcpServers"]],
            ));
        }
        let list = |key: &str| {
            obj.get(key)
                .map(|l| policy::parse_list(l, key, None))
                .transpose()
                .map_err(|e| Error::invalid(format!("`{what}`: {e}")))
        };
        Ok(Policy {
            allowed: list("allowedMcpServers")?,
            denied: list("deniedMcpServers")?.unwrap_or_default(),
        })
    }

    /// `None` when the server may be used; else the merge's reason (`denied`, `not_allowed`)
    /// and why. An entry that is no valid server entry is left to whoever connects it (its
    /// error is that one's).
    pub fn refuses(&self, name: &str, entry: &Value) -> Option<(&'static str, String)> {
        let kind = entry::validate(entry).ok()?;
        match policy::judge(name, entry, kind, self.allowed.as_deref(), &self.denied) {
            policy::Verdict::Allowed => None,
            policy::Verdict::Denied(why) => Some(("denied", why)),
            policy::Verdict::NotAllowed(why) => Some(("not_allowed", why)),
        }
    }
}

use crate::error::{Error, ErrorKind};
use merge::{Format, Inputs, Settings, Source};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The scopes a merge input may hold, and their precedence on a name conflict (lower wins).
/// `dynamic` (given by the host at run time) is on top; `enterprise` is never merged with others.
const SCOPES: [(&str, u32); 7] = [
    ("enterprise", 0),
    ("dynamic", 0),
    ("local", 10),
    ("project", 20),
    ("user", 30),
    ("plugin", 90),
    ("claudeai", 95),
];

/// What the fuzz target of URL patterns runs.
pub(crate) fn fuzz_url_matches(pattern: &str, url: &str) -> bool {
    policy::url_matches(pattern, url) | policy::wildcard(pattern, url)
}

/// What the fuzz target of `${VAR}` expansion runs (both syntaxes, a few variables).
pub(crate) fn fuzz_expand(text: &str) -> usize {
    let env: HashMap<String, String> = [("A", "x".repeat(1000)), ("B", "${A}${A}".into())]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let vars = entry::Vars {
        env: &env,
        home: Some("/home/f"),
        workspace: Some("/w"),
    };
    let mut missing = Vec::new();
    let mut budget = entry::Budget::merge();
    let mut len = |syntax| {
        entry::expand_str(text, syntax, &vars, &mut missing, &mut budget).map_or(0, |s| s.len())
    };
    len(entry::Syntax::ClaudeCode) + len(entry::Syntax::Editor)
}

/// The user's home directory, as every host of the library finds it: `$HOME` when it is an
/// absolute path, else the password database's (an empty or relative `HOME` is ignored; it would
/// make the working directory's `.claude.json` pass for the user's). `None` when neither has one.
pub fn user_home() -> Option<std::path::PathBuf> {
    crate::sys::user::home()
}

/// The `home` option of discovery and edits: the one given, else [`user_home`].
pub(crate) fn home_option(given: Option<&str>) -> Result<std::path::PathBuf, Error> {
    match given {
        Some(home) => Ok(home.into()),
        None => user_home().ok_or_else(|| {
            Error::invalid(
                "no `home` option, HOME is not an absolute path (unset, empty or relative), and \
                 the user database has no home directory",
            )
        }),
    }
}

pub(crate) fn config_error(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Config, message)
}

/// Merges explicitly given sources in Claude Code's order (enterprise, local, project, user,
/// plugin, claude.ai; policy over all). Each scope holds a file's
/// content as an object, or its text as a string (then a malformed one is reported with line
/// and column in `errors`, and the other scopes still merge). Errors: `invalid_argument` (the
/// input's shape), `config` (a policy entry that cannot be read: policy fails closed).
pub fn merge(sources: &Value) -> Result<Value, Error> {
    let obj = sources.as_object().ok_or_else(|| {
        Error::invalid(format!(
            "`sources_json` must be a JSON object (got {})",
            entry::kind_of(sources)
        ))
    })?;
    let mut list = Vec::new();
    for key in obj.keys() {
        let known = SCOPES.iter().any(|(s, _)| s == key) || key == "settings" || key == "env";
        if !known {
            return Err(Error::invalid(format!(
                "`sources_json` has an unknown key {key:?}; the keys are enterprise, dynamic, \
                 local, project, user, plugin, claudeai, settings, env"
            )));
        }
    }
    for (scope, rank) in SCOPES {
        match obj.get(scope) {
            None | Some(Value::Null) => {}
            Some(v @ Value::Object(_)) => list.push(explicit_source(scope, rank, Ok(v.clone()), None)),
            Some(Value::String(text)) => {
                let label = format!("<{scope}>");
                let parsed = text::parse(&label, text, false);
                let kept = parsed.as_ref().ok().map(|(_, t)| t.clone());
                list.push(explicit_source(scope, rank, parsed.map(|(v, _)| v), kept));
            }
            Some(v) => {
                return Err(Error::invalid(format!(
                    "`{scope}` must be a config file's content (an object) or its text (a string), got {}",
                    entry::kind_of(v)
                )))
            }
        }
    }
    let mut settings = Settings::default();
    match obj.get("settings") {
        None | Some(Value::Null) => {}
        Some(v) => fold_settings(&mut settings, v, None, SettingsTrust::All)?,
    }
    let env = match obj.get("env") {
        None | Some(Value::Null) => std::env::vars().collect(),
        Some(v) => env_map(v, "env")?,
    };
    Ok(merge::run(&Inputs {
        sources: list,
        settings,
        env,
        home: None,
    }))
}

fn explicit_source(
    scope: &str,
    rank: u32,
    content: Result<Value, ParseError>,
    text: Option<String>,
) -> Source {
    Source {
        scope: scope.to_string(),
        rank,
        file: None,
        text,
        content,
        servers_at: JsonPath::of_keys(&["mcpServers"]),
        format: Format::ClaudeCode,
        workspace: None,
    }
}

pub(crate) fn env_map(v: &Value, what: &str) -> Result<HashMap<String, String>, Error> {
    let m = v.as_object().ok_or_else(|| {
        Error::invalid(format!(
            "`{what}` must be an object of strings (got {})",
            entry::kind_of(v)
        ))
    })?;
    m.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(Error::invalid(format!(
                "`{what}.{k}` must be a string (got {})",
                entry::kind_of(other)
            ))),
        })
        .collect()
}

/// Which settings keys a settings file may set. A repository's `.claude/settings.json` must not
/// approve its own `.mcp.json` servers, nor widen the allowlist.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum SettingsTrust {
    All,
    /// Deny entries only (a project's shared settings).
    DenyOnly,
}

/// Adds one settings object's policy and approval keys to `acc`. The allowlist is the first one
/// set (callers fold the most authoritative file first); deny lists and approvals add up.
pub(crate) fn fold_settings(
    acc: &mut Settings,
    v: &Value,
    file: Option<&str>,
    trust: SettingsTrust,
) -> Result<(), Error> {
    let where_ = |k: &str| match file {
        Some(f) => format!("`{k}` in {f}"),
        None => format!("`settings.{k}`"),
    };
    let obj: &Map<String, Value> = v.as_object().ok_or_else(|| {
        config_error(format!(
            "settings{} must be an object (got {})",
            file.map(|f| format!(" ({f})")).unwrap_or_default(),
            entry::kind_of(v)
        ))
    })?;
    if let Some(d) = obj.get("deniedMcpServers").filter(|d| !d.is_null()) {
        acc.denied
            .extend(policy::parse_list(d, "deniedMcpServers", file).map_err(config_error)?);
    }
    if trust == SettingsTrust::DenyOnly {
        return Ok(());
    }
    if let Some(a) = obj.get("allowedMcpServers").filter(|a| !a.is_null()) {
        let list = policy::parse_list(a, "allowedMcpServers", file).map_err(config_error)?;
        if acc.allowed.is_none() {
            acc.allowed = Some(list);
        }
    }
    for (key, into) in [
        ("enabledMcpjsonServers", &mut acc.enabled),
        ("disabledMcpjsonServers", &mut acc.disabled),
    ] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let name = item.as_str().ok_or_else(|| {
                        config_error(format!(
                            "{} must hold server names (strings), got {item}",
                            where_(key)
                        ))
                    })?;
                    into.push(name.to_string());
                }
            }
            Some(other) => {
                return Err(config_error(format!(
                    "{} must be an array of names (got {})",
                    where_(key),
                    entry::kind_of(other)
                )))
            }
        }
    }
    match obj.get("enableAllProjectMcpServers") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => acc.enable_all |= b,
        Some(other) => {
            return Err(config_error(format!(
                "{} must be true or false (got {other})",
                where_("enableAllProjectMcpServers")
            )))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 800 fields of 128 KiB each took one merge to half a gigabyte: the merge stops adding at
    /// its limit, and says at which field.
    #[test]
    fn expansion_is_bounded_per_merge() {
        let value = "v".repeat(128 << 10);
        let servers: serde_json::Map<String, Value> = (0..800)
            .map(|i| (format!("s{i:03}"), json!({"command": "${BIG}"})))
            .collect();
        let out = merge(&json!({
            "user": {"mcpServers": servers},
            "env": {"BIG": value},
        }))
        .unwrap();
        let kept = out["servers"].as_object().unwrap();
        let expanded: usize = kept
            .values()
            .map(|s| s["config"]["command"].as_str().unwrap().len())
            .sum();
        assert!(expanded <= entry::MAX_MERGE_EXPANDED, "{expanded}");
        assert_eq!(kept.len(), entry::MAX_MERGE_EXPANDED / value.len());
        let errors = out["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let first_over = format!("mcpServers.s{:03}.command", kept.len());
        let message = errors[0]["message"].as_str().unwrap();
        assert!(message.contains(&first_over), "{message}");
        assert!(message.contains("${BIG}"), "{message}");
        let invalid = out["excluded"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["reason"] == "invalid")
            .count();
        assert_eq!(invalid, 800 - kept.len());
    }
}
