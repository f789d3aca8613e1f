//! How the command line says things: lines of text for a person, a spinner on a terminal.

use crate::edit::{kind_of, shown_url};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A spinner on stderr while servers connect, only when stderr is a terminal; erased on drop.
pub struct Spinner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinner {
    pub fn start(label: &str) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let (stop, label) = (stop.clone(), label.to_string());
            std::thread::spawn(move || {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    eprint!("\r{} {label}", FRAMES[i % FRAMES.len()]);
                    let _ = std::io::stderr().flush();
                    i += 1;
                    std::thread::sleep(std::time::Duration::from_millis(80));
                }
                eprint!("\r\x1b[2K");
                let _ = std::io::stderr().flush();
            })
        });
        Spinner { stop, thread }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `--json`'s document on stdout, one line. serde_json escapes C0 controls in strings already;
/// DEL and the C1 controls (which some terminals act on) are escaped too, as `\u007f`, `\u009b`
/// — JSON's own escapes, so the document reads back the same.
pub fn json(value: &Value) {
    let text = value.to_string();
    if !text.chars().any(char::is_control) {
        println!("{text}");
        return;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    println!("{out}");
}

/// What a server is: its command line, or its URL and transport.
pub fn target(entry: &Value) -> String {
    if let Some(url) = entry["url"].as_str() {
        return format!("{} ({})", shown_url(url), kind_of(entry).to_uppercase());
    }
    let mut words = vec![entry["command"].as_str().unwrap_or_default().to_string()];
    for a in entry["args"].as_array().into_iter().flatten() {
        words.push(
            a.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| a.to_string()),
        );
    }
    words.join(" ")
}

/// A server's state, as `claude mcp list` shows it, with the reason when it did not connect.
pub fn verdict(row: &Value) -> String {
    let reason = row["error"]["message"].as_str().unwrap_or_default();
    match row["state"].as_str().unwrap_or_default() {
        "connected" => "✓ Connected".into(),
        "needs-auth" => format!(
            "⚠ Needs authentication (mcplug login {})",
            row["name"].as_str().unwrap_or_default()
        ),
        "pending-approval" => {
            "⏸ Pending approval (approve it in Claude Code, or set enabledMcpjsonServers)".into()
        }
        "disabled" => "○ Disabled".into(),
        "pending" => "… Still connecting".into(),
        _ if reason.is_empty() => "✗ Failed to connect".into(),
        _ => format!("✗ Failed to connect: {reason}"),
    }
}

pub fn scope_label(scope: &str) -> String {
    match scope {
        "local" => "Local config (private to you in this project)".into(),
        "project" => "Project config (shared via .mcp.json)".into(),
        "user" => "User config (available in all your projects)".into(),
        "enterprise" => "Enterprise config (managed by your organization)".into(),
        other => format!("{other} config"),
    }
}

/// `get`'s text: the entry (secrets' values hidden), its scope, its state.
pub fn details(name: &str, s: &Value, row: &Value) -> String {
    let entry = &s["config"];
    let mut out = String::new();
    let scope = s["scope"].as_str().unwrap_or_default();
    let _ = writeln!(out, "{name}:");
    let _ = writeln!(out, "  Scope: {}", scope_label(scope));
    if let Some(f) = s["file"].as_str() {
        let _ = writeln!(out, "  File: {f}");
    }
    let _ = writeln!(out, "  Status: {}", verdict(row));
    let _ = writeln!(out, "  Type: {}", kind_of(entry));
    if let Some(url) = entry["url"].as_str() {
        let _ = writeln!(out, "  URL: {}", shown_url(url));
    }
    if let Some(c) = entry["command"].as_str() {
        let _ = writeln!(out, "  Command: {c}");
        let args: Vec<String> = entry["args"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                a.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| a.to_string())
            })
            .collect();
        let _ = writeln!(out, "  Args: {}", args.join(" "));
    }
    for (title, key) in [("Environment", "env"), ("Headers", "headers")] {
        if let Some(map) = entry[key].as_object().filter(|m| !m.is_empty()) {
            let _ = writeln!(out, "  {title}:");
            for k in map.keys() {
                // Values are often secrets: named, not shown (`--json` prints the entry).
                let _ = writeln!(out, "    {k}=…");
            }
        }
    }
    if let Some(net) = row.get("network") {
        let proxy = match net["proxy"].as_str() {
            Some(p) => format!("through the proxy {p}"),
            None => "direct".to_string(),
        };
        let _ = writeln!(
            out,
            "  Network: {proxy} (proxies from {})",
            net["proxy_from"].as_str().unwrap_or_default()
        );
        let trust: Vec<&str> = net["trust"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let _ = writeln!(out, "  Trusted: {}", trust.join(", "));
        if let Some(c) = net["client_certificate"].as_str() {
            let _ = writeln!(out, "  Client certificate: {c}");
        }
    }
    if let Some(info) = row["server_info"].as_object() {
        let _ = writeln!(
            out,
            "  Server: {} {} (protocol {})",
            info.get("name").and_then(Value::as_str).unwrap_or("?"),
            info.get("version").and_then(Value::as_str).unwrap_or(""),
            row["protocol_version"].as_str().unwrap_or("?")
        );
    }
    if let Some(n) = row["tools"].as_u64() {
        let _ = writeln!(out, "  Tools: {n}");
    }
    if matches!(scope, "local" | "project" | "user") {
        let _ = writeln!(
            out,
            "\nTo remove this server, run: mcplug remove {name:?} -s {scope}"
        );
    }
    out
}

/// The first line of `text`, at most `max` characters.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A tool result for a person: its text plainly, other content named.
pub fn content(result: &Value) -> String {
    let mut out = String::new();
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    for b in &blocks {
        match b["type"].as_str().unwrap_or_default() {
            "text" => {
                let t = b["text"].as_str().unwrap_or_default();
                out.push_str(t);
                if !t.ends_with('\n') {
                    out.push('\n');
                }
            }
            "resource_link" => {
                let _ = writeln!(out, "[resource link {}]", b["uri"].as_str().unwrap_or("?"));
            }
            "resource" => {
                let r = &b["resource"];
                match r["text"].as_str() {
                    Some(t) => {
                        let _ =
                            writeln!(out, "[resource {}]\n{t}", r["uri"].as_str().unwrap_or("?"));
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "[resource {} (binary)]",
                            r["uri"].as_str().unwrap_or("?")
                        );
                    }
                }
            }
            other => {
                let size = b["data"].as_str().map(|d| d.len() * 3 / 4).unwrap_or(0);
                let _ = writeln!(
                    out,
                    "[{other} {}, about {size} bytes; --json shows it]",
                    b["mimeType"].as_str().unwrap_or("?")
                );
            }
        }
    }
    if blocks.is_empty() {
        if let Some(s) = result.get("structuredContent") {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(s).unwrap_or_default()
            );
        }
    }
    out
}

/// Opens `url` in the user's browser: `$BROWSER`, else the platform's opener. Never waits for
/// it (the login waits for the redirect); the child is reaped on a thread of its own.
pub fn open_browser(url: &str) {
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty());
    let program = opener.unwrap_or_else(|| {
        if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        }
        .to_string()
    });
    let mut words = program.split_whitespace();
    let Some(first) = words.next() else { return };
    let child = std::process::Command::new(first)
        .args(words)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match child {
        Ok(mut c) => {
            std::thread::spawn(move || {
                let _ = c.wait();
            });
        }
        Err(e) => {
            tellln!("mcplug: could not start a browser ({first}: {e}); open the URL yourself")
        }
    }
}

/// One entry of a discovery's `errors`: where, and what.
pub fn config_error(e: &Value) -> String {
    let mut at = e["file"].as_str().unwrap_or_default().to_string();
    if let Some(l) = e["line"].as_u64() {
        let _ = write!(at, ":{l}");
        if let Some(c) = e["column"].as_u64() {
            let _ = write!(at, ":{c}");
        }
    }
    let msg = e["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string());
    if at.is_empty() {
        msg
    } else {
        format!("{at}: {msg}")
    }
}

/// `explain`'s text: the servers kept, those left out and why, what the files said wrong.
pub fn explanation(d: &Value) -> String {
    let mut out = String::new();
    let servers = d["servers"].as_object();
    let _ = writeln!(out, "Servers in use ({}):", servers.map_or(0, |s| s.len()));
    for (name, s) in servers.into_iter().flatten() {
        let _ = writeln!(
            out,
            "  ✓ {name} — {} scope, {}: {}",
            s["scope"].as_str().unwrap_or("?"),
            s["file"].as_str().unwrap_or("given by the host"),
            target(&s["config"])
        );
    }
    let left: Vec<&Value> = d["excluded"].as_array().into_iter().flatten().collect();
    if !left.is_empty() {
        let _ = writeln!(out, "Left out ({}):", left.len());
        for e in left {
            let _ = writeln!(
                out,
                "  ✗ {} — {} scope, {}: {} ({})",
                e["name"].as_str().unwrap_or("?"),
                e["scope"].as_str().unwrap_or("?"),
                e["file"].as_str().unwrap_or("given by the host"),
                e["detail"].as_str().unwrap_or_default(),
                e["reason"].as_str().unwrap_or_default()
            );
        }
    }
    for w in d["warnings"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "Warning: {}", w.as_str().unwrap_or_default());
    }
    for e in d["errors"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "Error: {}", config_error(e));
    }
    let files: Vec<String> = d["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            format!(
                "{} ({})",
                f["file"].as_str().unwrap_or("?"),
                f["scope"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "Files read: {}",
        if files.is_empty() {
            "none".into()
        } else {
            files.join(", ")
        }
    );
    out
}

/// `list`'s mark of a server a registry knows: ` · registry: NAME` (and its status and message
/// when it is not active); empty for the others.
pub fn registry_mark(mark: &Value) -> String {
    let Some(name) = mark["name"].as_str() else {
        return String::new();
    };
    match mark["status"].as_str() {
        Some("active") | None => format!(" · registry: {name}"),
        Some(status) => match mark["statusMessage"].as_str() {
            Some(m) => format!(" · registry: {name} ({status}: {m})"),
            None => format!(" · registry: {name} ({status})"),
        },
    }
}
