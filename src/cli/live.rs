//! The verbs that connect: `list`, `get`, `tools`, `call`, `login` — and `logout` and `explain`,
//! which read the same merged configuration. Each reads the configuration Claude Code would
//! (`mcplug::config::discover`: this directory, this `HOME`, the managed file), connects through
//! one `Manager`, and closes it (every child process stopped) before printing its verdict.

use crate::edit::{kind_of, shown_url};
use crate::show::{self, Spinner};
use crate::{Ctx, Exit};
use mcplug::client::options::Limit;
use mcplug::manager::{Manager, ManagerOptions};
use mcplug::{CallOptions, Error, ErrorKind};
use serde_json::{json, Map, Value};
use std::future::Future;

/// The merged configuration (with the `--mcp-config` files' servers as the `dynamic` scope,
/// and nothing else under `--strict-mcp-config`), its warnings and errors on stderr (text mode).
pub(crate) fn discover(ctx: &Ctx) -> Result<Value, Error> {
    let d = mcplug::config::discover(&discover_options(ctx))?;
    if !ctx.json {
        for w in d["warnings"].as_array().into_iter().flatten() {
            tellln!("mcplug: warning: {}", w.as_str().unwrap_or_default());
        }
        for e in d["errors"].as_array().into_iter().flatten() {
            tellln!("mcplug: {}", show::config_error(e));
        }
    }
    Ok(d)
}

fn servers(d: &Value) -> &Map<String, Value> {
    static EMPTY: once_cell::sync::Lazy<Map<String, Value>> = once_cell::sync::Lazy::new(Map::new);
    d["servers"].as_object().unwrap_or(&EMPTY)
}

/// The one server `name` of the configuration, or why there is none.
pub(crate) fn one(d: &Value, name: &str) -> Result<Value, Error> {
    if let Some(s) = servers(d).get(name) {
        return Ok(s.clone());
    }
    let left_out = d["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name);
    Err(match left_out {
        Some(e) => Error::new(
            ErrorKind::NotFound,
            format!(
                "MCP server {name:?} is configured but left out: {} ({})",
                e["detail"].as_str().unwrap_or_default(),
                e["reason"].as_str().unwrap_or_default()
            ),
        ),
        None => Error::new(
            ErrorKind::NotFound,
            format!("no MCP server named {name:?} (see `mcplug list`)"),
        ),
    })
}

/// A manager for one command: no reconnects (a command is one attempt), the connect timeout
/// from `--timeout`, nothing declared that would need a person to answer (no sampling,
/// elicitation or roots).
fn manager(ctx: &Ctx) -> Manager {
    let ms = ctx.timeout.as_millis() as u64;
    Manager::new(ManagerOptions {
        connection: Some(json!({"connect_timeout_ms": ms, "tool_timeout_ms": ms})),
        reconnect_attempts: 0,
        registry: ctx.registry.clone(),
        ..ManagerOptions::default()
    })
}

/// Runs `body` with the manager connected to `config`, and closes it whatever happens.
fn with_servers<T, F, Fut>(
    ctx: &Ctx,
    config: &Value,
    spin: Option<&str>,
    body: F,
) -> Result<T, Error>
where
    F: FnOnce(Manager, Value) -> Fut,
    Fut: Future<Output = (Manager, Result<T, Error>)>,
{
    let m = manager(ctx);
    let spinner = spin.filter(|_| !ctx.json).map(Spinner::start);
    mcplug::runtime::block_on(async move {
        let settled = match m.connect(config).await {
            Ok(_) => match m.wait_settled(Some(ctx.timeout)).await {
                Ok(s) => Ok(s),
                // Still pending: reported as such.
                Err(e) if e.kind == ErrorKind::Timeout => Ok(m.status()),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        // `--registry`: its marks too (its fetch has a short timeout of its own).
        let settled = match settled {
            Ok(_) if ctx.registry.is_some() => {
                m.registry_settled(ctx.timeout).await;
                Ok(m.status())
            }
            other => other,
        };
        drop(spinner);
        let (m, out) = match settled {
            Ok(status) => body(m, status).await,
            Err(e) => (m, Err(e)),
        };
        m.close().await;
        out
    })
}

pub fn list(ctx: &Ctx) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    // A configuration file that could not be read (unreadable, over the size limit, malformed)
    // fails the listing, as it fails `explain`: its servers are missing from what is shown.
    let config_failed = d["errors"].as_array().is_some_and(|e| !e.is_empty());
    let base = if config_failed {
        Exit::Failed
    } else {
        Exit::Ok
    };
    let pending: Vec<&Value> = d["excluded"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "pending_approval")
        .collect();
    if servers(&d).is_empty() && pending.is_empty() {
        if ctx.json {
            show::json(&listing_json(json!([]), &d));
        } else {
            sayln!("No MCP servers configured. Use `mcplug add` to add a server.");
        }
        return Ok(base);
    }
    let status = with_servers(
        ctx,
        &d,
        Some("Checking MCP server health…"),
        |m, s| async move { (m, Ok(s)) },
    )?;
    let mut rows = Vec::new();
    let mut exit = base;
    for (name, s) in servers(&d) {
        let st = &status["servers"][name];
        let state = st["state"].as_str().unwrap_or("failed");
        exit = worse(exit, exit_of_state(state));
        rows.push(row(name, s, st));
    }
    for p in pending {
        rows.push(json!({
            "name": p["name"], "scope": p["scope"], "file": p["file"], "state": "pending-approval",
            "detail": p["detail"],
        }));
    }
    if ctx.json {
        let mut out = listing_json(json!(rows), &d);
        if let Some(r) = status.get("registry") {
            out["registry"] = r.clone();
        }
        show::json(&out);
    } else {
        if let Some(e) = status["registry"]["error"].as_str() {
            tellln!(
                "mcplug: warning: the registry {} could not be read: {e}",
                status["registry"]["url"].as_str().unwrap_or_default()
            );
        }
        for (r, entry) in rows.iter().zip(
            servers(&d)
                .values()
                .map(|s| Some(&s["config"]))
                .chain(std::iter::repeat(None)),
        ) {
            sayln!(
                "{}: {} - {}{}",
                r["name"].as_str().unwrap_or_default(),
                entry
                    .map(show::target)
                    .unwrap_or_else(|| "(project .mcp.json)".into()),
                show::verdict(r),
                show::registry_mark(&r["registry"])
            );
        }
    }
    Ok(exit)
}

/// One server's line of `list --json`.
fn row(name: &str, s: &Value, st: &Value) -> Value {
    let mut r = json!({
        "name": name, "scope": s["scope"], "file": s["file"],
        "transport": kind_of(&s["config"]),
        "state": st["state"].as_str().unwrap_or("failed"),
    });
    for k in [
        "error",
        "server_info",
        "protocol_version",
        "era",
        "authorization",
        "registry",
    ] {
        if let Some(v) = st.get(k) {
            r[k] = v.clone();
        }
    }
    if let Some(t) = st["tools"].as_array() {
        r["tools"] = json!(t.len());
    }
    r
}

fn exit_of_state(state: &str) -> Exit {
    match state {
        "connected" | "disabled" => Exit::Ok,
        "needs-auth" => Exit::NeedsAuth,
        _ => Exit::Failed,
    }
}

/// The more telling of two outcomes: a failure beats needing authentication beats success.
/// `list --json`: the rows, and the configuration's errors when there are any (why it failed).
fn listing_json(rows: Value, d: &Value) -> Value {
    let mut out = json!({ "servers": rows });
    if d["errors"].as_array().is_some_and(|e| !e.is_empty()) {
        out["errors"] = d["errors"].clone();
    }
    out
}

fn worse(a: Exit, b: Exit) -> Exit {
    let rank = |e: Exit| match e {
        Exit::Ok => 0,
        Exit::NeedsAuth => 1,
        _ => 2,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// A configuration of the one server.
pub(crate) fn only(name: &str, s: &Value) -> Value {
    json!({"servers": {name: s}})
}

pub fn get(ctx: &Ctx, name: &str) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    let s = one(&d, name)?;
    let status = with_servers(
        ctx,
        &only(name, &s),
        None,
        |m, st| async move { (m, Ok(st)) },
    )?;
    let st = &status["servers"][name];
    let mut r = row(name, &s, st);
    // A remote server's proxy and trust, as its connection decided them.
    let entry = s["config"].clone();
    if let Ok(Some(route)) = mcplug::ServerSpec::parse(&entry)
        .and_then(|spec| mcplug::ConnectOptions::parse(None)?.route(&spec))
    {
        r["network"] = route;
    }
    if ctx.json {
        r["config"] = s["config"].clone();
        show::json(&r);
    } else {
        say!("{}", show::details(name, &s, &r));
    }
    Ok(exit_of_state(r["state"].as_str().unwrap_or("failed")))
}

/// The server's error as an `Error` (its kind from the status's error object).
fn server_error(name: &str, st: &Value) -> Error {
    let state = st["state"].as_str().unwrap_or("failed");
    let message = st["error"]["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("it is {state}"));
    let kind = match state {
        "needs-auth" => ErrorKind::NeedsAuth,
        "pending" => ErrorKind::Timeout,
        _ => ErrorKind::Transport,
    };
    let hint = if kind == ErrorKind::NeedsAuth {
        format!(" (run `mcplug login {name}`)")
    } else {
        String::new()
    };
    Error::new(
        kind,
        format!("server {name:?} did not connect: {message}{hint}"),
    )
}

pub fn tools(ctx: &Ctx, name: Option<&str>) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    let config = match name {
        Some(n) => only(n, &one(&d, n)?),
        None => d.clone(),
    };
    let owned = name.map(str::to_string);
    let (status, listed) = with_servers(ctx, &config, Some("Connecting…"), |m, st| async move {
        let listed = m.list_tools(owned.as_deref());
        (m, Ok((st, listed)))
    })?;
    let mut exit = Exit::Ok;
    for (server, st) in status["servers"].as_object().into_iter().flatten() {
        let state = st["state"].as_str().unwrap_or("failed");
        if state != "connected" {
            exit = worse(exit, exit_of_state(state));
            if !ctx.json {
                tellln!("mcplug: {}", server_error(server, st).message);
            }
        }
    }
    if ctx.json {
        show::json(&listed);
    } else {
        for t in listed["tools"].as_array().into_iter().flatten() {
            sayln!(
                "{}  {}",
                t["name"].as_str().unwrap_or_default(),
                show::first_line(t["description"].as_str().unwrap_or_default(), 100)
            );
        }
    }
    Ok(exit)
}

/// The arguments of `call`: a JSON object, from the command line or (`-`) stdin.
fn arguments(text: Option<&str>) -> Result<Box<serde_json::value::RawValue>, Error> {
    let text = match text {
        None => "{}".to_string(),
        Some("-") => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| {
                Error::invalid(format!("cannot read the arguments from stdin: {e}"))
            })?;
            s
        }
        Some(t) => t.to_string(),
    };
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| Error::invalid(format!("the tool's arguments are not JSON: {e}")))?;
    if !v.is_object() {
        return Err(Error::invalid(format!(
            "the tool's arguments must be a JSON object (got {v})"
        )));
    }
    Ok(serde_json::value::to_raw_value(&v).expect("a Value serializes"))
}

pub fn call(ctx: &Ctx, name: &str, tool: &str, args: Option<&str>) -> Result<Exit, Error> {
    let args = arguments(args)?;
    let d = discover(ctx)?;
    let s = one(&d, name)?;
    let (server, tool_name) = (name.to_string(), tool.to_string());
    let timeout = ctx.timeout;
    let result = with_servers(ctx, &only(name, &s), None, |m, st| async move {
        let st = &st["servers"][&server];
        if st["state"] != "connected" {
            return (m, Err(server_error(&server, st)));
        }
        let listed = m.list_tools(Some(&server));
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        let Some(entry) = tools.iter().find(|t| t["tool"] == tool_name.as_str()) else {
            let names: Vec<&str> = tools.iter().filter_map(|t| t["tool"].as_str()).collect();
            return (
                m,
                Err(Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "server {server:?} has no tool {tool_name:?} (its tools: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                )),
            );
        };
        let pool_name = entry["name"].as_str().unwrap_or_default().to_string();
        let mut options = CallOptions::default();
        options.timeout = Limit::After(timeout);
        let out = m.call_tool(&pool_name, Some(&args), &options).await;
        (
            m,
            out.map(|raw| serde_json::from_str::<Value>(raw.as_str()).unwrap_or(Value::Null)),
        )
    })?;
    let failed = result["isError"] == true;
    if ctx.json {
        show::json(&result);
    } else {
        let text = show::content(&result);
        if failed {
            tellln!("mcplug: the tool returned an error:");
            tell!("{text}");
        } else {
            say!("{text}");
        }
    }
    Ok(if failed { Exit::Failed } else { Exit::Ok })
}

/// The remote URL of a configured server.
fn remote_url(name: &str, s: &Value) -> Result<String, Error> {
    match s["config"]["url"].as_str() {
        Some(u) => Ok(u.to_string()),
        None => Err(Error::invalid(format!(
            "server {name:?} is a {} server: only remote servers (http, sse, ws) log in",
            kind_of(&s["config"])
        ))),
    }
}

pub fn login(ctx: &Ctx, name: &str) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    let s = one(&d, name)?;
    remote_url(name, &s)?;
    let owned = name.to_string();
    let wait_ms = ctx.timeout.as_millis() as u64;
    let json_out = ctx.json;
    let st = with_servers(ctx, &only(name, &s), None, |m, st| async move {
        let now = st["servers"][&owned].clone();
        if now["state"] == "connected" {
            return (m, Ok(now));
        }
        let started = match m.authenticate(&owned, None).await {
            Ok(v) => v,
            Err(e) => return (m, Err(e)),
        };
        let Some(url) = started["authorization"]["url"].as_str() else {
            // Ended at once (connected, or failed before any URL).
            return (m, Ok(started));
        };
        if !json_out {
            tellln!("Opening your browser to authorize {owned}.");
            tellln!("If it does not open, visit:\n\n  {url}\n");
        }
        show::open_browser(url);
        let done = m
            .authenticate(&owned, Some(&json!({"wait": true, "timeout_ms": wait_ms})))
            .await;
        (m, done)
    })?;
    let state = st["state"].as_str().unwrap_or("failed");
    if ctx.json {
        show::json(&st);
    } else if state == "connected" {
        sayln!("✓ Authenticated {name}");
    } else {
        return Err(server_error(name, &st));
    }
    Ok(exit_of_state(state))
}

pub fn logout(ctx: &Ctx, name: &str) -> Result<Exit, Error> {
    let d = discover(ctx)?;
    let s = one(&d, name)?;
    let url = remote_url(name, &s)?;
    let options = mcplug::AuthOptions::parse(&Map::new())?;
    let forgotten = mcplug::logout(&url, &options)?;
    if ctx.json {
        show::json(&json!({"name": name, "forgotten": forgotten}));
    } else if forgotten {
        sayln!(
            "Removed the stored credentials of {name} ({})",
            shown_url(&url)
        );
    } else {
        sayln!("No stored credentials for {name}");
    }
    Ok(Exit::Ok)
}

pub fn explain(ctx: &Ctx) -> Result<Exit, Error> {
    let d = mcplug::config::discover(&discover_options(ctx))?;
    if ctx.json {
        show::json(&d);
    } else {
        say!("{}", show::explanation(&d));
    }
    Ok(if d["errors"].as_array().is_some_and(|e| !e.is_empty()) {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn discover_options(ctx: &Ctx) -> Value {
    match &ctx.given {
        Some(servers) => json!({
            "dynamic": {"mcpServers": servers},
            "strict_mcp_config": ctx.strict,
        }),
        None => json!({}),
    }
}

/// The servers of the `--mcp-config` files, later files over earlier ones.
pub(crate) fn given_servers(files: &[String]) -> Result<Map<String, Value>, Error> {
    let mut out = Map::new();
    for file in files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| Error::invalid(format!("--mcp-config {file}: cannot be read: {e}")))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Error::invalid(format!("--mcp-config {file}: not JSON: {e}")))?;
        let servers = v
            .get("mcpServers")
            .and_then(Value::as_object)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "--mcp-config {file}: no `mcpServers` object of servers"
                ))
            })?;
        for (name, entry) in servers {
            out.insert(name.clone(), entry.clone());
        }
    }
    Ok(out)
}
