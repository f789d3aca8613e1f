//! Discovery: which files are read, from a home, a working directory and a managed directory.
//!
//! Claude Code's files:
//! - enterprise: `<managed_dir>/managed-mcp.json` (exclusive when present) and the policy in
//!   `<managed_dir>/managed-settings.json`;
//! - user: `~/.claude.json` `mcpServers`;
//! - local: `~/.claude.json` `projects[<project>].mcpServers` (the working directory or its
//!   closest ancestor listed there), then `<cwd>/.claude/settings.local.json` `mcpServers`;
//! - project: every `.mcp.json` from the working directory up to the root, the closest first;
//! - settings (policy and approval): `managed-settings.json`, the `settings` option,
//!   `.claude/settings.local.json`, `.claude/settings.json` (deny entries only: a repository must
//!   not approve its own servers), `~/.claude/settings.json`, and the `projects[...]` entry.
//!
//! Other hosts, on request (`hosts`), each its own scope below `user` in the order given:
//! `vscode` (`.vscode/mcp.json` found upward, `~/.config/Code/User/mcp.json`; key `servers`),
//! `cursor` (`.cursor/mcp.json` found upward, `~/.cursor/mcp.json`), `windsurf`
//! (`~/.codeium/windsurf/mcp_config.json`), `claude_desktop` (`~/.config/Claude/
//! claude_desktop_config.json`, on macOS `~/Library/Application Support/Claude/`), `zed`
//! (`.zed/settings.json` found upward, `~/.config/zed/settings.json`; key `context_servers`,
//! JSON with comments).

use super::merge::{self, Format, Inputs, Settings, Source};
use super::text::{self, JsonPath, ParseError};
use super::{config_error, env_map, fold_settings, SettingsTrust, SCOPES};
use crate::error::Error;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub const HOSTS: [&str; 5] = ["vscode", "cursor", "windsurf", "claude_desktop", "zed"];

/// Where another host keeps its MCP servers, and how it writes them.
struct HostSource {
    name: &'static str,
    /// A workspace's file, looked for in the working directory and up (the closest wins).
    workspace: Option<&'static str>,
    /// The user's file, under the home directory.
    global: &'static str,
    /// Where the servers are in the file.
    servers_at: &'static [&'static str],
    format: Format,
    /// JSON with comments and trailing commas (VS Code's and Zed's files).
    comments: bool,
}

/// The hosts of `HOSTS`, in that order.
const HOST_SOURCES: [HostSource; 5] = [
    HostSource {
        name: "vscode",
        workspace: Some(".vscode/mcp.json"),
        global: ".config/Code/User/mcp.json",
        servers_at: &["servers"],
        format: Format::VsCode,
        comments: true,
    },
    HostSource {
        name: "cursor",
        workspace: Some(".cursor/mcp.json"),
        global: ".cursor/mcp.json",
        servers_at: &["mcpServers"],
        format: Format::Cursor,
        comments: false,
    },
    HostSource {
        name: "windsurf",
        workspace: None,
        global: ".codeium/windsurf/mcp_config.json",
        servers_at: &["mcpServers"],
        format: Format::Windsurf,
        comments: false,
    },
    HostSource {
        name: "claude_desktop",
        workspace: None,
        global: if cfg!(target_os = "macos") {
            "Library/Application Support/Claude/claude_desktop_config.json"
        } else {
            ".config/Claude/claude_desktop_config.json"
        },
        servers_at: &["mcpServers"],
        format: Format::ClaudeDesktop,
        comments: false,
    },
    HostSource {
        name: "zed",
        workspace: Some(".zed/settings.json"),
        global: ".config/zed/settings.json",
        servers_at: &["context_servers"],
        format: Format::Zed,
        comments: true,
    },
];

fn default_managed_dir() -> &'static str {
    if cfg!(target_os = "macos") {
        "/Library/Application Support/ClaudeCode"
    } else if cfg!(windows) {
        "C:\\Program Files\\ClaudeCode"
    } else {
        "/etc/claude-code"
    }
}

struct Options {
    home: PathBuf,
    cwd: PathBuf,
    managed_dir: PathBuf,
    hosts: Vec<String>,
    /// Only the servers the host gives (and the enterprise's), as Claude Code's
    /// `--strict-mcp-config`: no file of a scope's is a source of servers, though the settings
    /// files still give the policy.
    strict: bool,
}

fn opt_str<'a>(o: &'a Value, key: &str) -> Result<Option<&'a str>, Error> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(Error::invalid(format!(
            "option `{key}` must be a string (got {v})"
        ))),
    }
}

fn parse_options(o: &Value) -> Result<Options, Error> {
    if !o.is_object() {
        return Err(Error::invalid("`options_json` must be a JSON object"));
    }
    let home = super::home_option(opt_str(o, "home")?)?;
    let cwd = match opt_str(o, "cwd")? {
        Some(c) => PathBuf::from(c),
        None => std::env::current_dir().map_err(|e| {
            Error::invalid(format!(
                "no `cwd` option and the current directory is unknown: {e}"
            ))
        })?,
    };
    let managed_dir = PathBuf::from(opt_str(o, "managed_dir")?.unwrap_or(default_managed_dir()));
    let mut hosts = Vec::new();
    match o.get("hosts") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for h in items {
                match h.as_str() {
                    Some(name) if HOSTS.contains(&name) => hosts.push(name.to_string()),
                    _ => {
                        return Err(Error::invalid(format!(
                            "option `hosts`: unknown host {h}; known: {}",
                            HOSTS.join(", ")
                        )))
                    }
                }
            }
        }
        Some(v) => {
            return Err(Error::invalid(format!(
                "option `hosts` must be an array (got {v})"
            )))
        }
    }
    let strict = match o.get("strict_mcp_config") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(Error::invalid(format!(
                "option `strict_mcp_config` must be true or false (got {v})"
            )))
        }
    };
    Ok(Options {
        home,
        cwd,
        managed_dir,
        hosts,
        strict,
    })
}

type Read = Option<Result<(Value, String), ParseError>>;

/// A file's content: `None` when it does not exist. Regular files only (a FIFO or a device
/// under a config file's name is an error naming it, never a wait or an endless read), at most
/// `MAX_CONFIG_BYTES`.
fn read(path: &Path, comments: bool) -> Read {
    let label = path.display().to_string();
    let failed = |message: String| ParseError {
        file: label.clone(),
        line: 0,
        column: 0,
        message,
    };
    match crate::sys::fs::read_regular(path, super::edit::MAX_CONFIG_BYTES) {
        Ok(None) => None,
        Ok(Some(bytes)) => Some(match String::from_utf8(bytes) {
            Ok(t) => text::parse(&label, &t, comments),
            Err(e) => Err(failed(format!(
                "not UTF-8 text (bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ))),
        }),
        // The message names the path; the error's `file` does too.
        Err(e) => Some(Err(failed(
            e.strip_prefix(&format!("{label} "))
                .unwrap_or(&e)
                .to_string(),
        ))),
    }
}

/// The closest ancestor of `cwd` (itself included) holding `rel`.
fn find_up(cwd: &Path, rel: &str) -> Option<PathBuf> {
    cwd.ancestors().map(|d| d.join(rel)).find(|p| p.exists())
}

struct Collector {
    sources: Vec<Source>,
    files: Vec<Value>,
    /// Files of the user's scopes are not sources (`strict_mcp_config`).
    strict: bool,
}

impl Collector {
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        scope: &str,
        rank: u32,
        path: &Path,
        servers_at: JsonPath,
        format: Format,
        workspace: Option<&Path>,
        read_result: Read,
    ) {
        let Some(result) = read_result else { return };
        if self.strict && scope != "enterprise" {
            return;
        }
        self.files
            .push(json!({"file": path.display().to_string(), "scope": scope, "role": "servers"}));
        let (content, text) = match result {
            Ok((v, t)) => (Ok(v), Some(t)),
            Err(e) => (Err(e), None),
        };
        self.sources.push(Source {
            scope: scope.into(),
            rank,
            file: Some(path.display().to_string()),
            text,
            content,
            servers_at,
            format,
            workspace: workspace.map(|w| w.display().to_string()),
        });
    }
}

/// Reads the configuration from disk and merges it. Options (all optional): `home`, `cwd`,
/// `managed_dir`, `hosts`, `env`, `settings` (extra policy/approval settings from the host),
/// `dynamic`, `plugin`, `claudeai` (contents given by the host, as in [`super::merge`]),
/// `strict_mcp_config` (only the servers given and the enterprise's; the policy still applies).
/// The result is the merge's, plus `files` (every file found, with its scope and role).
pub fn discover(options: &Value) -> Result<Value, Error> {
    let o = parse_options(options)?;
    let env = match options.get("env") {
        None | Some(Value::Null) => std::env::vars().collect(),
        Some(v) => env_map(v, "env")?,
    };
    let mut c = Collector {
        sources: Vec::new(),
        files: Vec::new(),
        strict: o.strict,
    };
    let mut settings_errors: Vec<Value> = Vec::new();
    let mcp = || JsonPath::of_keys(&["mcpServers"]);

    // Enterprise.
    let managed = o.managed_dir.join("managed-mcp.json");
    c.add(
        "enterprise",
        0,
        &managed,
        mcp(),
        Format::ClaudeCode,
        None,
        read(&managed, false),
    );

    // Explicit ones from the host.
    for scope in ["dynamic", "plugin", "claudeai"] {
        match options.get(scope) {
            None | Some(Value::Null) => {}
            Some(v @ Value::Object(_)) => {
                let rank = SCOPES
                    .iter()
                    .find(|(s, _)| *s == scope)
                    .map_or(0, |(_, r)| *r);
                c.sources.push(Source {
                    scope: scope.into(),
                    rank,
                    file: None,
                    text: None,
                    content: Ok(v.clone()),
                    servers_at: mcp(),
                    format: Format::ClaudeCode,
                    workspace: None,
                });
            }
            Some(v) => {
                return Err(Error::invalid(format!(
                    "option `{scope}` must be a config object (got {v})"
                )))
            }
        }
    }

    // ~/.claude.json: user, and local under projects[<project>].
    let claude_json = o.home.join(".claude.json");
    let claude_read = read(&claude_json, false);
    let project_key = match &claude_read {
        Some(Ok((v, _))) => v
            .get("projects")
            .and_then(Value::as_object)
            .and_then(|projects| {
                o.cwd
                    .ancestors()
                    .map(|a| a.display().to_string())
                    .find(|k| projects.contains_key(k))
            }),
        _ => None,
    };
    if let Some(key) = &project_key {
        c.add(
            "local",
            10,
            &claude_json,
            JsonPath::of_keys(&["projects", key, "mcpServers"]),
            Format::ClaudeCode,
            None,
            claude_read.clone(),
        );
    }
    let settings_local = o.cwd.join(".claude/settings.local.json");
    let settings_local_read = read(&settings_local, false);
    c.add(
        "local",
        11,
        &settings_local,
        mcp(),
        Format::ClaudeCode,
        None,
        settings_local_read.clone(),
    );
    let mut rank = 20;
    for dir in o.cwd.ancestors() {
        let p = dir.join(".mcp.json");
        if let Some(r) = read(&p, false) {
            c.add(
                "project",
                rank,
                &p,
                mcp(),
                Format::ClaudeCode,
                Some(dir),
                Some(r),
            );
            rank = (rank + 1).min(29);
        }
    }
    c.add(
        "user",
        30,
        &claude_json,
        mcp(),
        Format::ClaudeCode,
        None,
        claude_read.clone(),
    );

    // Other hosts.
    for (i, name) in o.hosts.iter().enumerate() {
        let host = HOST_SOURCES
            .iter()
            .find(|h| h.name == name)
            .expect("checked against HOSTS");
        let base = 40 + 5 * i as u32;
        let servers_at = || JsonPath::of_keys(host.servers_at);
        let global = o.home.join(host.global);
        if let Some(rel) = host.workspace {
            if let Some(p) = find_up(&o.cwd, rel).filter(|p| *p != global) {
                // The workspace is the folder holding the host's folder (`.vscode/`, ...).
                let ws = p.parent().and_then(Path::parent).map(Path::to_path_buf);
                let content = read(&p, host.comments);
                c.add(
                    host.name,
                    base,
                    &p,
                    servers_at(),
                    host.format,
                    ws.as_deref(),
                    content,
                );
            }
        }
        let content = read(&global, host.comments);
        c.add(
            host.name,
            base + 1,
            &global,
            servers_at(),
            host.format,
            None,
            content,
        );
    }

    // Settings, the most authoritative first (the first allowlist set is the one used).
    let mut settings = Settings::default();
    let managed_settings = o.managed_dir.join("managed-settings.json");
    match read(&managed_settings, false) {
        None => {}
        Some(Ok((v, _))) => {
            c.files.push(json!({"file": managed_settings.display().to_string(), "scope": "enterprise", "role": "settings"}));
            fold_settings(
                &mut settings,
                &v,
                Some(&managed_settings.display().to_string()),
                SettingsTrust::All,
            )?;
        }
        // Policy fails closed: an unreadable managed policy is an error, not "no policy".
        Some(Err(e)) => {
            return Err(config_error(format!(
                "the managed settings cannot be read: {e}"
            )))
        }
    }
    if let Some(v) = options.get("settings").filter(|v| !v.is_null()) {
        fold_settings(&mut settings, v, None, SettingsTrust::All)?;
    }
    let settings_files: [(&str, PathBuf, Read, SettingsTrust); 3] = [
        (
            "local",
            settings_local.clone(),
            settings_local_read,
            SettingsTrust::All,
        ),
        (
            "project",
            o.cwd.join(".claude/settings.json"),
            read(&o.cwd.join(".claude/settings.json"), false),
            SettingsTrust::DenyOnly,
        ),
        (
            "user",
            o.home.join(".claude/settings.json"),
            read(&o.home.join(".claude/settings.json"), false),
            SettingsTrust::All,
        ),
    ];
    for (scope, path, r, trust) in settings_files {
        match r {
            None => {}
            Some(Ok((v, _))) => {
                c.files.push(
                    json!({"file": path.display().to_string(), "scope": scope, "role": "settings"}),
                );
                fold_settings(&mut settings, &v, Some(&path.display().to_string()), trust)?;
            }
            // settings.local.json is also a server source: its error is reported once, there.
            Some(Err(_)) if path == settings_local => {}
            Some(Err(e)) => {
                settings_errors.push(json!({"scope": scope, "file": e.file, "line": e.line, "column": e.column, "message": e.message}));
            }
        }
    }
    if let (Some(Ok((v, _))), Some(key)) = (&claude_read, &project_key) {
        let entry = &v["projects"][key];
        let approval: serde_json::Map<String, Value> = entry
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| {
                        matches!(
                            k.as_str(),
                            "enabledMcpjsonServers"
                                | "disabledMcpjsonServers"
                                | "enableAllProjectMcpServers"
                        )
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let label = format!("{} (projects[{key:?}])", claude_json.display());
        fold_settings(
            &mut settings,
            &Value::Object(approval),
            Some(&label),
            SettingsTrust::All,
        )?;
    }

    let mut result = merge::run(&Inputs {
        sources: c.sources,
        settings,
        env,
        home: Some(o.home.display().to_string()),
    });
    if let Some(errors) = result.get_mut("errors").and_then(Value::as_array_mut) {
        errors.extend(settings_errors);
    }
    result["files"] = Value::Array(c.files);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::{HOSTS, HOST_SOURCES};

    #[test]
    fn every_known_host_has_its_sources() {
        let names: Vec<&str> = HOST_SOURCES.iter().map(|h| h.name).collect();
        assert_eq!(names, HOSTS);
    }
}
