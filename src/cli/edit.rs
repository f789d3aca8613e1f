//! `add`, `add-json`, `remove`: one entry of a scope's file changed, the rest of it kept
//! (`mcplug::config::{add_server, remove_server}`).

use crate::{AddArgs, Ctx, Exit, Scope};
use mcplug::{config, Error, ErrorKind};
use serde_json::{json, Map, Value};
use std::path::Path;

/// `-e KEY=VALUE` pairs as an object.
fn env_object(pairs: &[String]) -> Result<Map<String, Value>, Error> {
    let mut env = Map::new();
    for p in pairs {
        match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                env.insert(k.to_string(), json!(v));
            }
            _ => {
                return Err(Error::invalid(format!(
                    "-e {p:?}: an environment variable is KEY=VALUE"
                )))
            }
        }
    }
    Ok(env)
}

/// `-H 'Name: value'` pairs as an object.
fn header_object(headers: &[String]) -> Result<Map<String, Value>, Error> {
    let mut out = Map::new();
    for h in headers {
        match h.split_once(':') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.insert(k.trim().to_string(), json!(v.trim()));
            }
            _ => {
                return Err(Error::invalid(format!(
                    "-H {h:?}: a header is 'Name: value'"
                )))
            }
        }
    }
    Ok(out)
}

/// The entry `add` writes: the shape Claude Code writes for the same command line.
pub fn entry_of(a: &AddArgs) -> Result<Value, Error> {
    let remote = a.transport.is_remote();
    if remote {
        if !a.env.is_empty() {
            return Err(Error::invalid(
                "-e sets a stdio server's environment; a remote server takes headers (-H)",
            ));
        }
        if !a.args.is_empty() {
            return Err(Error::invalid(format!(
                "a {} server is one URL; unexpected arguments after it: {}",
                a.transport.as_str(),
                a.args.join(" ")
            )));
        }
        let mut e = json!({"type": a.transport.as_str(), "url": a.command_or_url});
        let headers = header_object(&a.header)?;
        if !headers.is_empty() {
            e["headers"] = Value::Object(headers);
        }
        let mut oauth = Map::new();
        if let Some(id) = &a.client_id {
            oauth.insert("clientId".into(), json!(id));
        }
        if let Some(var) = &a.client_secret_env {
            oauth.insert("clientSecretEnv".into(), json!(var));
        }
        if let Some(port) = a.callback_port {
            oauth.insert("callbackPort".into(), json!(port));
        }
        if !oauth.is_empty() {
            e["oauth"] = Value::Object(oauth);
        }
        return Ok(e);
    }
    if !a.header.is_empty() {
        return Err(Error::invalid(
            "-H sets a remote server's headers; a stdio server takes environment variables (-e)",
        ));
    }
    if a.client_id.is_some() || a.client_secret_env.is_some() || a.callback_port.is_some() {
        return Err(Error::invalid(
            "OAuth options are for remote servers (--transport http, sse or ws)",
        ));
    }
    if a.command_or_url.starts_with("http://") || a.command_or_url.starts_with("https://") {
        tellln!(
            "mcplug: warning: {:?} looks like a URL; to add a remote server pass --transport http",
            a.command_or_url
        );
    }
    Ok(json!({
        "type": "stdio",
        "command": a.command_or_url,
        "args": a.args,
        "env": env_object(&a.env)?,
    }))
}

pub fn add(ctx: &Ctx, a: &AddArgs) -> Result<Exit, Error> {
    let entry = entry_of(a)?;
    write(ctx, a.scope, &a.name, entry)
}

pub fn add_json(ctx: &Ctx, scope: Scope, name: &str, text: &str) -> Result<Exit, Error> {
    let entry: Value = serde_json::from_str(text)
        .map_err(|e| Error::invalid(format!("the server entry is not JSON: {e}")))?;
    if !entry.is_object() {
        return Err(Error::invalid(format!(
            "the server entry must be a JSON object (got {entry})"
        )));
    }
    write(ctx, scope, name, entry)
}

/// `claude mcp add`'s rule for a new name: letters, digits, `-` and `_` (a name read from a
/// file someone else wrote is only held to the merge's rule).
fn check_new_name(name: &str) -> Result<(), Error> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(Error::invalid(format!(
            "invalid server name {name:?}: names can hold only letters, digits, hyphens and underscores"
        )));
    }
    Ok(())
}

fn write(ctx: &Ctx, scope: Scope, name: &str, entry: Value) -> Result<Exit, Error> {
    check_new_name(name)?;
    let kind = kind_of(&entry);
    let out = config::add_server(&json!({"scope": scope.as_str(), "name": name, "config": entry}))?;
    if ctx.json {
        crate::show::json(&out);
    } else {
        let what = match (entry.get("command"), entry.get("url")) {
            (Some(Value::String(c)), _) => {
                let mut words = vec![c.clone()];
                if let Some(Value::Array(args)) = entry.get("args") {
                    words.extend(args.iter().filter_map(|a| a.as_str().map(str::to_string)));
                }
                format!(" with command: {}", words.join(" "))
            }
            (_, Some(Value::String(u))) => format!(" with URL: {}", shown_url(u)),
            _ => String::new(),
        };
        sayln!(
            "Added {kind} MCP server {name}{what} to {} config",
            scope.as_str()
        );
        sayln!("File modified: {}", out["file"].as_str().unwrap_or("?"));
    }
    Ok(Exit::Ok)
}

/// An entry's transport as Claude Code names it (`type`, or stdio for a bare `command`).
pub fn kind_of(entry: &Value) -> &str {
    match mcplug::config::Kind::of(entry) {
        Some(k) => k.as_str(),
        None => entry["type"].as_str().unwrap_or("unknown"),
    }
}

/// A URL as it may be shown (query secrets masked, as the library logs it).
pub fn shown_url(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => url.to_string(),
    }
}

/// The scopes whose file holds a server of this name, in Claude Code's order of precedence.
fn scopes_holding(name: &str) -> Result<Vec<Scope>, Error> {
    let home = mcplug::config::user_home().ok_or_else(|| {
        Error::invalid("HOME is not an absolute path and the user database has no home directory")
    })?;
    let cwd = std::env::current_dir()
        .map_err(|e| Error::invalid(format!("the current directory is unknown: {e}")))?;
    let user = read_json(&home.join(".claude.json"))?;
    let project = read_json(&cwd.join(".mcp.json"))?;
    let has = |v: Option<&Value>| v.and_then(|s| s.get(name)).is_some();
    let mut out = Vec::new();
    let local = user
        .as_ref()
        .and_then(|u| u.get("projects"))
        .and_then(|p| p.get(cwd.display().to_string()))
        .and_then(|p| p.get("mcpServers"));
    if has(local) {
        out.push(Scope::Local);
    }
    if has(project.as_ref().and_then(|p| p.get("mcpServers"))) {
        out.push(Scope::Project);
    }
    if has(user.as_ref().and_then(|u| u.get("mcpServers"))) {
        out.push(Scope::User);
    }
    Ok(out)
}

fn read_json(path: &Path) -> Result<Option<Value>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            Error::new(
                ErrorKind::Config,
                format!("{} is not valid JSON: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::new(
            ErrorKind::Config,
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Claude Desktop's configuration file here (Linux; macOS keeps it under Application Support).
fn claude_desktop_file() -> Result<std::path::PathBuf, Error> {
    let home = mcplug::config::user_home().ok_or_else(|| {
        Error::invalid("HOME is not an absolute path and the user database has no home directory")
    })?;
    let mac = home.join("Library/Application Support/Claude/claude_desktop_config.json");
    Ok(if cfg!(target_os = "macos") {
        mac
    } else {
        home.join(".config/Claude/claude_desktop_config.json")
    })
}

/// `add-from-claude-desktop [-s SCOPE] [NAME…]`, as Claude Code's: every server of Claude
/// Desktop's configuration (or the ones named) added to the scope; a name the scope already
/// holds gets the first free suffix `_1`, `_2`, …; an entry the merge would refuse is skipped,
/// saying why.
pub fn add_from_claude_desktop(ctx: &Ctx, scope: Scope, names: &[String]) -> Result<Exit, Error> {
    let file = claude_desktop_file()?;
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Error::new(
            ErrorKind::NotFound,
            format!("no Claude Desktop configuration at {}: {e}", file.display()),
        )
    })?;
    let v: Value = serde_json::from_str(&config::strip_jsonc(&text)).map_err(|e| {
        Error::new(
            ErrorKind::Config,
            format!("{} is not valid JSON: {e}", file.display()),
        )
    })?;
    let servers = v
        .get("mcpServers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if let Some(missing) = names.iter().find(|n| !servers.contains_key(*n)) {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "Claude Desktop has no MCP server named {missing:?} ({}: {})",
                file.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ));
    }
    let mut added = Vec::new();
    let mut skipped = Vec::new();
    for (name, entry) in servers
        .iter()
        .filter(|(n, _)| names.is_empty() || names.contains(n))
    {
        let mut n = 0;
        loop {
            let candidate = if n == 0 {
                name.clone()
            } else {
                format!("{name}_{n}")
            };
            let out = config::add_server(
                &json!({"scope": scope.as_str(), "name": candidate, "config": entry}),
            );
            match out {
                Ok(_) => {
                    added.push(json!({"from": name, "name": candidate}));
                    break;
                }
                Err(e)
                    if e.kind == ErrorKind::Config
                        && e.message.contains("already has a server named") =>
                {
                    n += 1
                }
                Err(e) => {
                    skipped.push(json!({"name": name, "error": e.message}));
                    break;
                }
            }
        }
    }
    if ctx.json {
        crate::show::json(
            &json!({"file": file.display().to_string(), "scope": scope.as_str(), "added": added, "skipped": skipped}),
        );
    } else {
        if added.is_empty() {
            sayln!(
                "No MCP servers were added from Claude Desktop ({})",
                file.display()
            );
        } else {
            let list: Vec<String> = added
                .iter()
                .map(|a| {
                    let (from, to) = (
                        a["from"].as_str().unwrap_or(""),
                        a["name"].as_str().unwrap_or(""),
                    );
                    if from == to {
                        to.to_string()
                    } else {
                        format!("{from} (as {to})")
                    }
                })
                .collect();
            sayln!(
                "Added {} MCP server(s) from Claude Desktop to {} config: {}",
                added.len(),
                scope.as_str(),
                list.join(", ")
            );
        }
        for s in &skipped {
            tellln!(
                "Skipped {}: {}",
                s["name"].as_str().unwrap_or(""),
                s["error"].as_str().unwrap_or("")
            );
        }
    }
    Ok(if skipped.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

/// `approve NAME [--all]` / `reject NAME`: the project-server dialog's answer, written where
/// Claude Code writes it. A name no `.mcp.json` here (or above) holds is refused: it is a typo.
pub fn choose(ctx: &Ctx, name: &str, choice: &str) -> Result<Exit, Error> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::invalid(format!("the current directory is unknown: {e}")))?;
    let project: Vec<String> = cwd
        .ancestors()
        .map(|d| d.join(".mcp.json"))
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|t| serde_json::from_str::<Value>(&config::strip_jsonc(&t)).ok())
        .filter_map(|v| {
            v.get("mcpServers")?
                .as_object()
                .map(|m| m.keys().cloned().collect::<Vec<_>>())
        })
        .flatten()
        .collect();
    if !project.iter().any(|n| n == name) {
        let known = if project.is_empty() {
            "there is no .mcp.json here or above".to_string()
        } else {
            format!("the project servers are: {}", project.join(", "))
        };
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("no project (.mcp.json) server named {name:?}: {known}"),
        ));
    }
    let out = config::approve_project_server(&json!({"name": name, "choice": choice}))?;
    if ctx.json {
        crate::show::json(&out);
    } else {
        let what = match choice {
            "no" => "Rejected",
            "yes_all" => "Approved (with every future project server)",
            _ => "Approved",
        };
        sayln!("{what} project MCP server {name}");
        sayln!("File modified: {}", out["file"].as_str().unwrap_or("?"));
    }
    Ok(Exit::Ok)
}

/// `reset-project-choices`, as Claude Code's.
pub fn reset_choices(ctx: &Ctx) -> Result<Exit, Error> {
    let out = config::reset_project_choices(&json!({}))?;
    if ctx.json {
        crate::show::json(&out);
    } else if out["reset"].as_array().is_some_and(|r| !r.is_empty()) {
        sayln!("All project-scoped (.mcp.json) server approvals and rejections have been reset.");
        sayln!("They wait for approval again (mcplug approve NAME, or reject NAME).");
        sayln!("File modified: {}", out["file"].as_str().unwrap_or("?"));
    } else {
        sayln!("No project-scoped (.mcp.json) server choices to reset.");
    }
    Ok(Exit::Ok)
}

pub fn remove(ctx: &Ctx, name: &str, scope: Option<Scope>) -> Result<Exit, Error> {
    let scope = match scope {
        Some(s) => s,
        None => match scopes_holding(name)?.as_slice() {
            [] => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("no MCP server named {name:?} in the local, project or user config"),
                ))
            }
            [one] => *one,
            many => {
                let names: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
                return Err(Error::invalid(format!(
                    "MCP server {name:?} is in more than one scope ({}); name one with --scope",
                    names.join(", ")
                )));
            }
        },
    };
    let out = config::remove_server(&json!({"scope": scope.as_str(), "name": name}))?;
    if ctx.json {
        crate::show::json(&out);
    } else {
        sayln!("Removed MCP server {name} from {} config", scope.as_str());
        sayln!("File modified: {}", out["file"].as_str().unwrap_or("?"));
    }
    Ok(Exit::Ok)
}
