//! The remote transports through the engine's Rust API: server-everything in `streamableHttp`
//! and `sse` modes, the Python SDK 2.3 server of the 2026-07-28 era over Streamable HTTP, and
//! the project's HTTP fault server for what no real server does on demand. Each server runs on a
//! free port of its own and is killed when its test ends.

#[path = "support/peers.rs"]
mod peers;

use mcplug::queue::Pulled;
use mcplug::runtime::block_on;
use mcplug::{CallOptions, Client, ConnectOptions, ErrorKind, ServerSpec};
use peers::{everything, everything_ws, fault_http, free_port, modern_http, Peer};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn connect(server: Value, options: Value) -> mcplug::Result<(Client, Value)> {
    let spec = ServerSpec::parse(&server)?;
    block_on(Client::connect(
        &spec,
        ConnectOptions::parse(Some(&options)).unwrap(),
        None,
    ))
}

fn opts(v: Value) -> CallOptions {
    CallOptions::parse(Some(&v)).unwrap()
}

fn call(c: &Client, name: &str, args: Value, options: Value) -> mcplug::Result<Value> {
    let args = serde_json::value::to_raw_value(&args).unwrap();
    block_on(c.call_tool(name, Some(&args), &opts(options))).and_then(|r| r.value())
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn tool_names(c: &Client) -> Vec<String> {
    let tools = block_on(c.list_tools(&opts(json!({}))))
        .unwrap()
        .value()
        .unwrap();
    tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Everything the spine showed over stdio, on one connection: tools, echo, progress, a
/// sampling request answered by the host, close.
fn exercise_everything(server: Value) {
    let (c, info) = connect(
        server,
        json!({"capabilities": {"sampling": {}}, "connect_timeout_ms": 10000}),
    )
    .unwrap();
    assert_eq!(info["era"], "legacy", "{info}");
    assert!(
        info["server_info"]["name"]
            .as_str()
            .unwrap()
            .contains("everything"),
        "{info}"
    );
    let names = tool_names(&c);
    assert!(names.len() >= 12, "{names:?}");
    for t in [
        "echo",
        "get-sum",
        "trigger-long-running-operation",
        "trigger-sampling-request",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} missing from {names:?}");
    }
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "over the wire"}), json!({})).unwrap()),
        "Echo: over the wire"
    );
    let c = Arc::new(c);

    // Progress: the notifications arrive as events before the answer.
    let r = call(
        &c,
        "trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
        json!({"progress": true, "tag": "lro"}),
    )
    .unwrap();
    assert!(text_of(&r).contains("completed"), "{r}");
    let mut progress = 0;
    while let Pulled::Event(e) = c.next_event(Some(Duration::from_millis(200))) {
        let e: Value = serde_json::from_str(&e).unwrap();
        if e["method"] == "notifications/progress" {
            assert_eq!(e["tag"], "lro");
            progress += 1;
        }
    }
    assert!(progress >= 2, "{progress} progress events");

    // Sampling: the server asks the host in the middle of a tool call.
    let host = {
        let c = c.clone();
        std::thread::spawn(move || loop {
            match c.next_event(Some(Duration::from_secs(10))) {
                Pulled::Event(e) => {
                    let e: Value = serde_json::from_str(&e).unwrap();
                    if e["type"] == "request" {
                        assert_eq!(e["method"], "sampling/createMessage");
                        let answer = json!({"id": e["id"], "result": {"role": "assistant", "model": "host-model", "content": {"type": "text", "text": "from the host"}}});
                        block_on(c.respond(&answer)).unwrap();
                        return;
                    }
                }
                _ => panic!("no sampling request"),
            }
        })
    };
    let r = call(
        &c,
        "trigger-sampling-request",
        json!({"prompt": "hello", "maxTokens": 10}),
        json!({"timeout_ms": 10000}),
    )
    .unwrap();
    host.join().unwrap();
    assert!(r.to_string().contains("from the host"), "{r}");
    block_on(c.close());
    assert_eq!(
        call(&c, "echo", json!({"message": "x"}), json!({}))
            .unwrap_err()
            .kind,
        ErrorKind::Closed
    );
}

#[test]
fn everything_over_streamable_http() {
    let peer = everything("streamableHttp");
    exercise_everything(
        json!({"type": "http", "url": format!("http://127.0.0.1:{}/mcp", peer.port)}),
    );
}

#[test]
fn the_get_stream_carries_what_the_server_sends_on_its_own() {
    let peer = everything("streamableHttp");
    let (c, _) = connect(
        json!({"type": "http", "url": format!("http://127.0.0.1:{}/mcp", peer.port)}),
        json!({}),
    )
    .unwrap();
    let uri = "demo://resource/static/document/architecture.md";
    block_on(c.request(
        "resources/subscribe",
        Some(json!({"uri": uri})),
        &opts(json!({})),
    ))
    .unwrap();
    call(&c, "toggle-subscriber-updates", json!({}), json!({})).unwrap();
    // server-everything sends an update at once, then every 5 s, long after the toggle's own
    // stream ended: the second can only come on the GET stream.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut updates = 0;
    while updates < 2 && Instant::now() < deadline {
        if let Pulled::Event(e) = c.next_event(Some(Duration::from_millis(500))) {
            let e: Value = serde_json::from_str(&e).unwrap();
            if e["method"] == "notifications/resources/updated" && e["params"]["uri"] == uri {
                updates += 1;
            }
        }
    }
    assert_eq!(
        updates, 2,
        "two notifications/resources/updated within 15 s"
    );
    block_on(c.close());
}

#[test]
fn everything_over_sse() {
    let peer = everything("sse");
    exercise_everything(
        json!({"type": "sse", "url": format!("http://127.0.0.1:{}/sse", peer.port)}),
    );
}

#[test]
fn everything_over_websocket() {
    let peer = everything_ws();
    let url = format!("ws://127.0.0.1:{}/", peer.port);
    exercise_everything(json!({"type": "ws", "url": url}));
    // The entry's headers ride the handshake (the bridge hands X-Test to the server's env).
    let (c, _) = connect(
        json!({"type": "ws-ide", "url": url, "headers": {"X-Test": "on the handshake"}}),
        json!({}),
    )
    .unwrap();
    let env = call(&c, "get-env", json!({}), json!({})).unwrap();
    assert!(env.to_string().contains("on the handshake"), "{env}");
    // Refused, and a server that is not there: clear errors.
    let closed = format!("ws://127.0.0.1:{}/", free_port());
    let e = connect(json!({"type": "ws", "url": closed}), json!({}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(e.message.contains(&closed), "{e:?}");
    block_on(c.close());
}

#[test]
fn an_http_entry_falls_back_to_sse_when_the_server_only_speaks_that() {
    let peer = everything("sse");
    let (c, info) = connect(
        json!({"type": "http", "url": format!("http://127.0.0.1:{}/sse", peer.port)}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info["era"], "legacy");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "fell back"}), json!({})).unwrap()),
        "Echo: fell back"
    );
    block_on(c.close());
}

#[test]
fn the_modern_era_over_streamable_http() {
    for extra in [&[][..], &["--json"][..]] {
        let peer = modern_http(extra);
        let url = format!("http://127.0.0.1:{}/mcp", peer.port);
        let (c, info) = connect(
            json!({"type": "http", "url": url}),
            json!({"capabilities": {"elicitation": {"form": {}}}}),
        )
        .unwrap();
        assert_eq!(info["era"], "modern", "{info}");
        assert_eq!(info["protocol_version"], "2026-07-28");
        let names = tool_names(&c);
        assert!(names.iter().any(|n| n == "echo"), "{names:?}");
        assert_eq!(
            text_of(&call(&c, "echo", json!({"message": "modern"}), json!({})).unwrap()),
            "Echo: modern"
        );
        // A name that is not header-safe goes as =?base64?...?= and still reaches the tool.
        let e = call(&c, "échø", json!({}), json!({})).unwrap();
        assert_eq!(e["isError"], true, "{e}");
        // A server request, modern style: an InputRequiredResult round answered by the host.
        let c = Arc::new(c);
        let host = {
            let c = c.clone();
            std::thread::spawn(move || loop {
                match c.next_event(Some(Duration::from_secs(10))) {
                    Pulled::Event(e) => {
                        let e: Value = serde_json::from_str(&e).unwrap();
                        if e["type"] == "request" {
                            assert_eq!(e["method"], "elicitation/create");
                            let answer = json!({"id": e["id"], "result": {"action": "accept", "content": {"name": "Ada"}}});
                            block_on(c.respond(&answer)).unwrap();
                            return;
                        }
                    }
                    _ => panic!("no elicitation"),
                }
            })
        };
        let r = call(&c, "greet", json!({}), json!({"timeout_ms": 10000})).unwrap();
        host.join().unwrap();
        assert_eq!(text_of(&r), "Hello, Ada!");
        block_on(c.close());
    }
}

/// SEP-2243 against the Python SDK, which checks `Mcp-Param-*` headers against the tool's schema
/// and answers -32020 when they do not match: `route`'s `region` is annotated `x-mcp-header`.
#[test]
fn tool_arguments_ride_in_headers_and_a_mismatch_lists_the_tools_again() {
    let peer = modern_http(&["--json"]);
    let url = format!("http://127.0.0.1:{}/mcp", peer.port);
    let (c, info) = connect(json!({"type": "http", "url": url}), json!({})).unwrap();
    assert_eq!(info["era"], "modern", "{info}");
    // A tool whose annotation is invalid is left out of the listing, with a warning event, and
    // refused when called by name.
    let names = tool_names(&c);
    assert!(names.iter().any(|n| n == "route"), "{names:?}");
    assert!(!names.iter().any(|n| n == "bad_header"), "{names:?}");
    let warning = loop {
        match c.next_event(Some(Duration::from_secs(5))) {
            Pulled::Event(e) => {
                let e: Value = serde_json::from_str(&e).unwrap();
                if e["type"] == "warning" && e["reason"] != "invalid_schema" {
                    break e;
                }
            }
            _ => panic!("no warning event"),
        }
    };
    assert_eq!(warning["reason"], "invalid_tool_headers", "{warning}");
    assert_eq!(warning["tool"], "bad_header", "{warning}");
    assert!(
        warning["message"].as_str().unwrap().contains("Bad Name"),
        "{warning}"
    );
    let e = call(&c, "bad_header", json!({"value": "v"}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e:?}");
    // The listing again: no second warning for the same tool and reason.
    tool_names(&c);
    while let Pulled::Event(e) = c.next_event(Some(Duration::from_millis(200))) {
        assert!(!e.contains("invalid_tool_headers"), "warned twice: {e}");
    }
    block_on(c.close());
    let (c, _) = connect(json!({"type": "http", "url": url}), json!({})).unwrap();
    // Never listed on this connection: sent without Mcp-Param-Region, which the server refuses
    // (-32020); the client lists the tools and sends the call again, with the header.
    let r = call(
        &c,
        "route",
        json!({"region": "eu-west1", "query": "q1"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(text_of(&r), "routed q1 to eu-west1", "{r}");
    // Known now: a value that is not plain ASCII (and ends in a space) goes base64-encoded, and
    // the server decodes it to the body's value.
    let r = call(
        &c,
        "route",
        json!({"region": "Zürich ", "query": "q2"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(text_of(&r), "routed q2 to Zürich ", "{r}");
    // The schema changes under the client (no list_changed): the header it sends is stale, the
    // server says so, and the call goes again with the new one.
    call(&c, "rezone", json!({}), json!({})).unwrap();
    let r = call(
        &c,
        "route",
        json!({"region": "ap", "query": "q3"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(text_of(&r), "routed q3 to zone ap", "{r}");
    // The same through a started call (its answer comes as a completion event).
    let (c2, _) = connect(json!({"type": "http", "url": url}), json!({})).unwrap();
    let args = serde_json::value::to_raw_value(&json!({"region": "sa", "query": "q4"})).unwrap();
    let n = block_on(c2.start_call_tool("route", Some(&args), &opts(json!({})))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        assert!(Instant::now() < deadline, "no completion");
        if let Pulled::Event(e) = c2.next_event(Some(Duration::from_secs(10))) {
            let e: Value = serde_json::from_str(&e).unwrap();
            if e["type"] == "completion" && e["call"] == n {
                break e;
            }
        }
    };
    assert_eq!(text_of(&done["result"]), "routed q4 to zone sa", "{done}");
    block_on(c.close());
    block_on(c2.close());
}

fn fault_url(peer: &Peer, path: &str) -> String {
    format!("http://127.0.0.1:{}{path}", peer.port)
}

fn stats(c: &Client) -> Value {
    serde_json::from_str(&text_of(&call(c, "stats", json!({}), json!({})).unwrap())).unwrap()
}

/// Three `echo_kept` calls (the fault server ends each response stream 0.5 s after its answer):
/// each answer comes at once, not after the stream's end, and once the end came the connection is
/// taken again: no new connection after the first `stats` call. Returns the stats after them.
fn answers_before_the_end_on_one_connection(c: &Client) -> Value {
    let before = stats(c)["connections"].as_u64().unwrap();
    for i in 0..3 {
        let t = Instant::now();
        let r = call(c, "echo_kept", json!({"message": i.to_string()}), json!({})).unwrap();
        assert_eq!(text_of(&r), format!("Echo: {i}"));
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(400),
            "the answer waited for the stream's end: {took:?}"
        );
        std::thread::sleep(Duration::from_millis(800)); // past the stream's end
    }
    let s = stats(c);
    assert_eq!(
        s["connections"].as_u64().unwrap(),
        before,
        "no new connection after the first stats call: {s}"
    );
    s
}

#[test]
fn sessions_headers_and_the_delete_on_close() {
    let peer = fault_http();
    let (c, info) = connect(
        json!({"type": "streamable-http", "url": fault_url(&peer, "/mcp"), "headers": {"X-Test": "yes"}}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info["protocol_version"], "2025-11-25");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "a"}), json!({})).unwrap()),
        "Echo: a"
    );
    let s = stats(&c);
    assert_eq!(s["initializes"], 1, "{s}");
    let h = &s["headers"];
    assert_eq!(h["X-Test"], "yes", "{s}");
    assert_eq!(h["MCP-Protocol-Version"], "2025-11-25", "{s}");
    assert!(
        h["Mcp-Session-Id"].as_str().is_some_and(|v| v.len() == 32),
        "{s}"
    );
    assert_eq!(h["Accept"], "application/json, text/event-stream");
    // Legacy requests carry no modern headers.
    assert!(h.get("Mcp-Method").is_none(), "{s}");
    block_on(c.close());
    let (c, _) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/mcp")}),
        json!({}),
    )
    .unwrap();
    assert_eq!(
        stats(&c)["deletes"],
        1,
        "the first session was DELETEd on close"
    );
    block_on(c.close());
}

#[test]
fn an_answer_comes_at_once_and_its_stream_is_read_to_the_end_keeping_the_connection() {
    // echo_kept ends its response stream 0.5 s after the answer, on a kept-alive connection: the
    // call returns with the answer, and the stream is read on to its end, so the next calls
    // reuse the connection (a stream dropped before its end closes its connection).
    let peer = fault_http();
    let (c, _) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/mcp")}),
        json!({}),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300)); // the GET stream's attempt (405) is over
    answers_before_the_end_on_one_connection(&c);
    block_on(c.close());
}

#[test]
fn a_lost_session_is_renewed_and_the_call_succeeds() {
    // 404 (the spec's answer), and 400 "No valid session ID" (the reference SDKs' servers).
    for path in ["/mcp", "/mcp400"] {
        lost_session_renewed(&fault_http(), path);
    }
}

fn lost_session_renewed(peer: &Peer, path: &str) {
    let (c, _) = connect(
        json!({"type": "http", "url": fault_url(peer, path)}),
        json!({}),
    )
    .unwrap();
    assert_eq!(
        text_of(&call(&c, "restart", json!({}), json!({})).unwrap()),
        "restarted"
    );
    // The server no longer knows the session: 404, a new initialize, the same call again.
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "again"}), json!({})).unwrap()),
        "Echo: again"
    );
    let s = stats(&c);
    assert_eq!(s["initializes"], 2, "{s}");
    block_on(c.close());
}

#[test]
fn a_cut_stream_is_resumed_with_last_event_id() {
    let peer = fault_http();
    let (c, _) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/mcp")}),
        json!({}),
    )
    .unwrap();
    let started = Instant::now();
    let r = call(
        &c,
        "cut_echo",
        json!({"message": "resumed"}),
        json!({"timeout_ms": 5000}),
    )
    .unwrap();
    assert_eq!(text_of(&r), "Echo: resumed");
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "the server's retry was honoured"
    );
    assert_eq!(stats(&c)["resumes"], 1);
    // Without event ids there is nothing to resume from: a clear error, at once.
    let started = Instant::now();
    let e = call(&c, "cut_noid", json!({}), json!({"timeout_ms": 5000})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(
        e.message.contains("ended before the answer") && e.message.contains("event ids"),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // The connection is still good.
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "b"}), json!({})).unwrap()),
        "Echo: b"
    );
    block_on(c.close());
}

#[test]
fn http_errors_refusals_slowness_and_size_are_clear_errors() {
    let peer = fault_http();
    // HTTP 500 on everything: connect fails naming the status and the URL.
    let url = fault_url(&peer, "/always500");
    let e = connect(json!({"type": "http", "url": url}), json!({}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(
        e.message.contains("500") && e.message.contains(&url),
        "{e:?}"
    );

    // HTTP 401 on a connection that may not authorize: needs_auth, with what a host needs to
    // authorize by itself (here no protected-resource metadata: the 2025-03-26 fallback).
    let url = fault_url(&peer, "/locked");
    let e = connect(
        json!({"type": "http", "url": url}),
        json!({"auth_store": "memory"}),
    )
    .err()
    .unwrap();
    assert_eq!(e.kind, ErrorKind::NeedsAuth, "{e:?}");
    assert!(
        e.message.contains("401") && e.message.contains(&url),
        "{e:?}"
    );
    assert_eq!(e.data.as_ref().unwrap()["reason"], "no_token", "{e:?}");

    // Connection refused: a clear error, quickly.
    let closed = format!("http://127.0.0.1:{}/mcp", free_port());
    let started = Instant::now();
    let e = connect(json!({"type": "http", "url": closed}), json!({}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(
        e.message.contains(&closed) && e.message.to_lowercase().contains("refused"),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let e = connect(json!({"type": "sse", "url": closed}), json!({}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");

    let (c, _) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/mcp")}),
        json!({"max_message_bytes": 100000}),
    )
    .unwrap();
    // A tool whose POST answers 500: that call fails, the connection stays.
    let e = call(&c, "fail500", json!({}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(
        e.message.contains("500") && e.message.contains("tool exploded"),
        "{e:?}"
    );
    // Slower than the timeout; an endless stream of keep-alives: timeouts, on time.
    for tool in ["slow", "endless"] {
        let started = Instant::now();
        let e = call(&c, tool, json!({"ms": 5000}), json!({"timeout_ms": 300})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Timeout, "{tool}: {e:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{tool}");
    }
    // Too big, as JSON and as an SSE event.
    for tool in ["big", "big_sse"] {
        let e = call(
            &c,
            tool,
            json!({"bytes": 300000}),
            json!({"timeout_ms": 5000}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Transport, "{tool}: {e:?}");
        assert!(e.message.contains("max_message_bytes"), "{tool}: {e:?}");
    }
    assert_eq!(
        text_of(&call(&c, "big", json!({"bytes": 1000}), json!({})).unwrap()).len(),
        1000
    );
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "ok"}), json!({})).unwrap()),
        "Echo: ok"
    );
    block_on(c.close());
}

/// A modern request from a caller that waits is POSTed and read on the caller's own thread
/// (transport/http/direct.rs): the fault server's modern endpoint shows that path keeps every
/// behaviour — answers over JSON and SSE, a stream's late end read for the connection's reuse,
/// timeouts and cancels that close the request's stream, the message limit, HTTP errors, a
/// stream cut before its answer, and callers on several threads at once.
#[test]
fn the_modern_era_direct_path_keeps_every_fault_clear() {
    let peer = fault_http();
    let (c, info) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/modern")}),
        json!({"max_message_bytes": 100000}),
    )
    .unwrap();
    assert_eq!(info["era"], "modern", "{info}");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "a"}), json!({})).unwrap()),
        "Echo: a"
    );
    // The stream's end comes 0.5 s after the answer: the call does not wait for it, and the
    // connection is taken again once it came.
    let s = answers_before_the_end_on_one_connection(&c);
    assert_eq!(s["headers"]["MCP-Protocol-Version"], "2026-07-28", "{s}");
    assert_eq!(s["headers"]["Mcp-Name"], "stats", "{s}");
    // Timeouts on time; the endless stream is closed (the modern era's cancellation).
    for tool in ["slow", "endless"] {
        let started = Instant::now();
        let e = call(&c, tool, json!({"ms": 3000}), json!({"timeout_ms": 300})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Timeout, "{tool}: {e:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{tool}");
    }
    // Cancelled by the host from another thread.
    let canceller = std::thread::spawn(|| {
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(10));
            if mcplug::client::cancel::cancel("direct-cancel-tag") > 0 {
                return true;
            }
        }
        false
    });
    let e = call(
        &c,
        "endless",
        json!({}),
        json!({"tag": "direct-cancel-tag"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Cancelled, "{e:?}");
    assert!(canceller.join().unwrap());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let closed = stats(&c)["endless_closed"].as_u64().unwrap();
        if closed >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the endless streams were not closed: {closed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Too big, as JSON and as an SSE event.
    for tool in ["big", "big_sse"] {
        let e = call(
            &c,
            tool,
            json!({"bytes": 300000}),
            json!({"timeout_ms": 5000}),
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Transport, "{tool}: {e:?}");
        assert!(e.message.contains("max_message_bytes"), "{tool}: {e:?}");
    }
    let e = call(&c, "fail500", json!({}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(
        e.message.contains("500") && e.message.contains("tool exploded"),
        "{e:?}"
    );
    let e = call(&c, "cut_noid", json!({}), json!({"timeout_ms": 5000})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e:?}");
    assert!(e.message.contains("ended before the answer"), "{e:?}");
    let e = call(&c, "nope", json!({}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rpc, "{e:?}");
    // Several callers at once, each on its own thread and its own connection.
    let c = Arc::new(c);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    let m = format!("{t}-{i}");
                    let tool = if i % 2 == 0 { "echo" } else { "big" };
                    let r = call(&c, tool, json!({"message": m, "bytes": 10}), json!({})).unwrap();
                    if tool == "echo" {
                        assert_eq!(text_of(&r), format!("Echo: {m}"));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    block_on(c.close());
    // A redirect is followed (by the general path, from then on).
    let (c, info) = connect(
        json!({"type": "http", "url": fault_url(&peer, "/redirect")}),
        json!({}),
    )
    .unwrap();
    assert_eq!(info["era"], "modern", "{info}");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "r"}), json!({})).unwrap()),
        "Echo: r"
    );
    block_on(c.close());
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Bodies that answer a call's POST but cannot be read as its answer, in both eras.
fn unreadable_answers() -> Vec<(Vec<u8>, &'static str)> {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    vec![
        (b"not json".to_vec(), "not JSON"),
        (Vec::new(), "an empty body"),
        (
            br#"{"jsonrpc":"2.0","id":987654,"result":{}}"#.to_vec(),
            "another request",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":@ID@,\"result\":{\"t\":\"\xff\"}}".to_vec(),
            "could not be read",
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":@ID@,"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#
            )
            .into_bytes(),
            "boom (the rest of the error object could not be read",
        ),
    ]
}

#[test]
fn an_answer_that_cannot_be_read_fails_its_call_at_once() {
    let peer = fault_http();
    for path in ["/mcp", "/modern"] {
        let (c, _) = connect(
            json!({"type": "http", "url": fault_url(&peer, path)}),
            json!({}),
        )
        .unwrap();
        for (body, want) in unreadable_answers() {
            let t = Instant::now();
            let e = call(
                &c,
                "raw",
                json!({"b64": b64(&body)}),
                json!({"timeout_ms": 20000}),
            )
            .unwrap_err();
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{path} {want}: waited {:?}",
                t.elapsed()
            );
            assert!(e.message.contains(want), "{path} {want}: {}", e.message);
            let kind = if want.starts_with("boom") {
                ErrorKind::Rpc
            } else {
                ErrorKind::Protocol
            };
            assert_eq!(e.kind, kind, "{path} {want}: {}", e.message);
        }
        assert_eq!(
            text_of(&call(&c, "echo", json!({"message": "still"}), json!({})).unwrap()),
            "Echo: still",
            "{path}: the connection goes on"
        );
        block_on(c.close());
    }
}
