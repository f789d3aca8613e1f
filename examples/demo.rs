//! The mcplug demo: a host connects to an MCP server, lists its tools and calls them — through the
//! very C ABI a C, Python or Node host uses (JSON in, JSON out, opaque handle, pulled events).
//!
//!     cargo run --release --example demo            # the host, against the bundled server
//!     cargo run --release --example demo -- --serve # just the bundled server, on stdio
//!     cargo run --release --example demo -- node path/to/server.js   # the host, against any stdio server
//!
//! The bundled server is this same program started with `--serve`: a small dual-era MCP server
//! (it answers both the 2026-07-28 `server/discover` probe and the legacy `initialize`), so the
//! demo needs nothing installed.

use mcplug::ffi::client::*;
use mcplug::ffi::*;
use serde_json::{json, Value};
use std::ffi::{c_char, CStr, CString};
use std::io::{BufRead, Write};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        serve();
        return;
    }
    let server = if args.is_empty() {
        let me = std::env::current_exe().expect("the demo's own path");
        json!({"name": "demo", "command": me, "args": ["--serve"]})
    } else {
        json!({"command": args[0], "args": &args[1..]})
    };
    if let Err(e) = host(&server) {
        eprintln!("demo failed: {e}");
        std::process::exit(1);
    }
}

/// One C-ABI call's outcome: the status and the JSON it wrote to `out` (freed here).
fn take(status: mcplug_status, out: *mut c_char) -> Result<Value, String> {
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    unsafe { mcplug_string_free(out) };
    let value: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if status == mcplug_status::MCPLUG_OK {
        Ok(value)
    } else {
        Err(format!("{status:?}: {}", value["error"]))
    }
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn host(server: &Value) -> Result<(), String> {
    let version = unsafe { CStr::from_ptr(mcplug_version()) }.to_string_lossy();
    println!("mcplug {version} (ABI {})", mcplug_abi_version());

    let mut client: *mut mcplug_client = std::ptr::null_mut();
    let mut out: *mut c_char = std::ptr::null_mut();
    let server_json = c(&server.to_string());
    let options = c(
        r#"{"connect_timeout_ms": 10000, "client_info": {"name": "mcplug-demo", "version": "1.0"}}"#,
    );
    let info = take(
        unsafe {
            mcplug_client_connect(
                server_json.as_ptr(),
                options.as_ptr(),
                &mut client,
                &mut out,
            )
        },
        out,
    )?;
    println!(
        "connected to {} {} — protocol {} ({} era)",
        info["server_info"]["name"].as_str().unwrap_or("?"),
        info["server_info"]["version"].as_str().unwrap_or(""),
        info["protocol_version"].as_str().unwrap_or("?"),
        info["era"].as_str().unwrap_or("?"),
    );

    // Events (progress, logs, stderr) are pulled by the host; here a thread prints them.
    let handle = client as usize;
    let events = std::thread::spawn(move || loop {
        let mut out: *mut c_char = std::ptr::null_mut();
        let status =
            unsafe { mcplug_client_next_event(handle as *mut mcplug_client, 1000, &mut out) };
        match take(status, out) {
            Ok(event) => match event["type"].as_str() {
                Some("notification") if event["method"] == "notifications/progress" => {
                    let p = &event["params"];
                    println!(
                        "  … progress {}/{} {}",
                        p["progress"],
                        p["total"],
                        p["message"].as_str().unwrap_or("")
                    );
                }
                Some("notification") => println!(
                    "  … {} {}",
                    event["method"].as_str().unwrap_or(""),
                    event["params"]
                ),
                Some("stderr") => {
                    println!("  [server stderr] {}", event["line"].as_str().unwrap_or(""))
                }
                _ => {}
            },
            Err(_) if status == mcplug_status::MCPLUG_TIMEOUT => continue,
            Err(_) => return,
        }
    });

    let tools = take(
        unsafe { mcplug_client_list_tools(client, std::ptr::null(), &mut out) },
        out,
    )?;
    let list = tools["tools"].as_array().cloned().unwrap_or_default();
    println!("{} tools:", list.len());
    for t in &list {
        println!(
            "  - {}: {}",
            t["name"].as_str().unwrap_or("?"),
            t["description"].as_str().unwrap_or("")
        );
    }

    let call = |name: &str, args: Value, options: &str| -> Result<Value, String> {
        let (n, a, o) = (c(name), c(&args.to_string()), c(options));
        let mut out: *mut c_char = std::ptr::null_mut();
        take(
            unsafe {
                mcplug_client_call_tool(client, n.as_ptr(), a.as_ptr(), o.as_ptr(), &mut out)
            },
            out,
        )
    };
    let show = |name: &str, r: &Result<Value, String>| match r {
        Ok(v) => println!(
            "{name} → {}",
            v["content"][0]["text"]
                .as_str()
                .map(str::to_string)
                .unwrap_or(v.to_string())
        ),
        Err(e) => println!("{name} → error {e}"),
    };
    if list.iter().any(|t| t["name"] == "countdown") {
        show(
            "echo",
            &call("echo", json!({"message": "hello from a C-ABI host"}), "{}"),
        );
        show("add", &call("add", json!({"a": 2, "b": 40}), "{}"));
        show(
            "countdown",
            &call(
                "countdown",
                json!({"from": 3}),
                r#"{"progress": true, "tag": "demo-countdown"}"#,
            ),
        );
        show(
            "slow (timeout 200 ms)",
            &call("countdown", json!({"from": 5}), r#"{"timeout_ms": 200}"#),
        );
        show("no-such-tool", &call("no-such-tool", json!({}), "{}"));
    } else if list.iter().any(|t| t["name"] == "echo") {
        show(
            "echo",
            &call("echo", json!({"message": "hello from a C-ABI host"}), "{}"),
        );
    }

    unsafe { mcplug_client_free(client) };
    events.join().ok();
    println!("closed; the server process is gone");
    Ok(())
}

// ---- the bundled server: a small dual-era MCP server on stdio ----

fn serve() {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let send = |msg: Value| {
        let mut o = stdout.lock();
        let _ = writeln!(o, "{msg}");
        let _ = o.flush();
    };
    eprintln!("demo server ready");
    let tools = json!([
        {"name": "echo", "description": "Echoes a message back",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
        {"name": "add", "description": "Adds two numbers",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
         "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}},
        {"name": "countdown", "description": "Counts down one step every 100 ms, reporting progress",
         "inputSchema": {"type": "object", "properties": {"from": {"type": "integer"}}}},
    ]);
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id").cloned(), msg["method"].as_str()) else {
            continue;
        };
        let params = &msg["params"];
        let result = match method {
            "server/discover" => json!({
                "supportedVersions": ["2026-07-28", "2025-11-25"],
                "capabilities": {"tools": {}},
                "instructions": "A demo server bundled with mcplug.",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "mcplug-demo-server", "version": mcplug::VERSION}},
            }),
            "initialize" => json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcplug-demo-server", "version": mcplug::VERSION},
            }),
            "ping" => json!({}),
            "tools/list" => json!({"tools": tools}),
            "tools/call" => {
                let args = &params["arguments"];
                match params["name"].as_str() {
                    Some("echo") => {
                        json!({"content": [{"type": "text", "text": format!("Echo: {}", args["message"].as_str().unwrap_or(""))}]})
                    }
                    Some("add") => {
                        let sum =
                            args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                        json!({"content": [{"type": "text", "text": sum.to_string()}], "structuredContent": {"sum": sum}})
                    }
                    Some("countdown") => {
                        let from = args["from"].as_u64().unwrap_or(3);
                        let token = params["_meta"]["progressToken"].clone();
                        for step in 1..=from {
                            std::thread::sleep(std::time::Duration::from_millis(100));
                            if !token.is_null() {
                                send(
                                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                                    "progressToken": token, "progress": step, "total": from, "message": format!("{} left", from - step)}}),
                                );
                            }
                        }
                        json!({"content": [{"type": "text", "text": "liftoff"}]})
                    }
                    other => {
                        send(
                            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": format!("Unknown tool: {}", other.unwrap_or("(none)"))}}),
                        );
                        continue;
                    }
                }
            }
            _ => {
                send(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("Method not found: {method}")}}),
                );
                continue;
            }
        };
        send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
}
