//! The engine through its Rust API (below the C ABI), against the project's fault-injecting
//! server: era negotiation in every branch, per-request `_meta`, timeouts, cancellation, server
//! death, message limits, and server-to-client requests.

use mcplug::queue::Pulled;
use mcplug::runtime::block_on;
use mcplug::{CallOptions, Client, ConnectOptions, ErrorKind, ServerSpec};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn fault(mode: &str) -> ServerSpec {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/fault_server.py");
    ServerSpec::parse(&json!({"command": "python3", "args": [script, mode]})).unwrap()
}

fn connect(mode: &str, options: Value) -> mcplug::Result<(Client, Value)> {
    let spec = fault(mode);
    block_on(Client::connect(
        &spec,
        ConnectOptions::parse(Some(&options)).unwrap(),
        None,
    ))
}

fn opts(v: Value) -> CallOptions {
    CallOptions::parse(Some(&v)).unwrap()
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn call(c: &Client, name: &str, args: Value, options: Value) -> mcplug::Result<Value> {
    let args = serde_json::value::to_raw_value(&args).unwrap();
    block_on(c.call_tool(name, Some(&args), &opts(options))).and_then(|r| r.value())
}

#[test]
fn legacy_server_negotiates_its_version() {
    let (c, info) = connect("normal", json!({})).unwrap();
    assert_eq!(info["era"], "legacy");
    assert_eq!(info["protocol_version"], "2025-11-25");
    assert_eq!(info["server_info"]["name"], "fault-server");
    assert_eq!(info["instructions"], "mode normal");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "hi"}), json!({})).unwrap()),
        "Echo: hi"
    );
    // Legacy requests carry no modern _meta.
    assert_eq!(
        text_of(&call(&c, "last_meta", json!({}), json!({})).unwrap()),
        "null"
    );
    block_on(c.close());

    let (c, info) = connect("old", json!({})).unwrap();
    assert_eq!(info["protocol_version"], "2024-11-05");
    block_on(c.close());
}

#[test]
fn a_version_we_do_not_speak_is_a_protocol_error() {
    let e = connect("bad-version", json!({})).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(e.message.contains("1999-01-01"), "{e}");
}

#[test]
fn modern_server_gets_meta_on_every_request() {
    let (c, info) = connect(
        "modern",
        json!({"client_info": {"name": "engine-test", "version": "9"}}),
    )
    .unwrap();
    assert_eq!(info["era"], "modern");
    assert_eq!(info["protocol_version"], "2026-07-28");
    assert_eq!(info["server_info"]["name"], "fault-server-modern");
    let meta: Value = serde_json::from_str(&text_of(
        &call(&c, "last_meta", json!({}), json!({"progress": true})).unwrap(),
    ))
    .unwrap();
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"]["name"],
        "engine-test"
    );
    assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
    assert!(
        meta["progressToken"].is_number(),
        "progress: true attaches a token: {meta}"
    );
    block_on(c.close());
}

#[test]
fn era_negotiation_branches() {
    // -32022 naming only versions we lack: a clear protocol error, no fallback.
    let e = connect("future-only", json!({})).err().unwrap();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
    assert!(e.message.contains("2099-01-01"), "{e}");
    // discover answered with legacy versions only: fall back to initialize.
    let (c, info) = connect("discover-legacy", json!({})).unwrap();
    assert_eq!(info["era"], "legacy");
    block_on(c.close());
    // The host restricts negotiation to legacy: no probe, so even a modern-capable server goes legacy.
    let (c, info) = connect("modern", json!({"protocol_versions": ["2025-11-25"]})).unwrap();
    assert_eq!(info["era"], "legacy");
    block_on(c.close());
    // Modern only, against a legacy server: a clear error rather than a silent downgrade.
    let e = connect("normal", json!({"protocol_versions": ["2026-07-28"]}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
}

#[test]
fn a_silent_server_hits_the_connect_timeout() {
    let t = Instant::now();
    let e = connect("hang-init", json!({"connect_timeout_ms": 600}))
        .err()
        .unwrap();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_that_stops_reading_is_described_by_how_it_ended() {
    // The server answers the handshake, closes its stdin, and exits with 3 a moment later after
    // saying why: the next write fails with a broken pipe while its stdout is still open. The error says how the server ended and what it said (as when its stdout ends
    // first), not just that the pipe broke.
    let script = r#"
import json, os, sys, time
req = json.loads(sys.stdin.readline())
print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"protocolVersion": "2025-11-25",
      "capabilities": {"tools": {}}, "serverInfo": {"name": "quitter", "version": "1"}}}), flush=True)
os.close(0)
time.sleep(0.1)
print("no config found", file=sys.stderr, flush=True)
sys.exit(3)
"#;
    let spec = ServerSpec::parse(&json!({"command": "python3", "args": ["-c", script]})).unwrap();
    let connected = block_on(Client::connect(
        &spec,
        ConnectOptions::parse(Some(&json!({"protocol_versions": ["2025-11-25"]}))).unwrap(),
        None,
    ));
    // Usually `notifications/initialized` meets the broken pipe; if it got in first, the next
    // request does.
    let e = match connected {
        Err(e) => e,
        Ok((c, _)) => {
            let e = block_on(c.list_tools(&opts(json!({})))).err().unwrap();
            block_on(c.close());
            e
        }
    };
    assert_eq!(e.kind, ErrorKind::Closed, "{e}");
    assert!(e.message.contains("exit code 3"), "{e}");
    assert!(e.message.contains("no config found"), "{e}");
}

#[test]
fn an_answer_written_in_pieces_survives_the_readers_wake_ups() {
    // A caller waiting alone reads the pipe with a blocking read, which the library's waker ends
    // every drive slice (20 ms) by writing a byte no UTF-8 text contains. Here the server writes
    // its answer line in parts 45 ms apart, so those bytes land inside the line: the reader must
    // drop them wherever they are, and the answer must come through whole.
    let (c, _) = connect("normal", json!({})).unwrap();
    let message = "naïve café ".repeat(40);
    for pieces in [2, 5] {
        let r = call(
            &c,
            "dribble",
            json!({"message": message, "pieces": pieces, "pause_ms": 45}),
            json!({}),
        )
        .unwrap();
        assert_eq!(text_of(&r), message, "{pieces} pieces");
    }
    // And the stream is still in step: the next answer is the next call's.
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "after"}), json!({})).unwrap()),
        "Echo: after"
    );
    // A blocked read still ends at the call's deadline.
    let t = Instant::now();
    let e = call(&c, "sleep", json!({"ms": 3000}), json!({"timeout_ms": 150})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    block_on(c.close());
}

#[test]
fn a_call_timeout_cancels_on_the_server_and_keeps_the_connection() {
    let (c, _) = connect("normal", json!({})).unwrap();
    let e = call(&c, "sleep", json!({"ms": 5000}), json!({"timeout_ms": 100})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout);
    let ids: Vec<Value> = serde_json::from_str(&text_of(
        &call(&c, "cancelled_ids", json!({}), json!({})).unwrap(),
    ))
    .unwrap();
    assert_eq!(
        ids.len(),
        1,
        "notifications/cancelled reached the server: {ids:?}"
    );
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "still"}), json!({})).unwrap()),
        "Echo: still"
    );
    block_on(c.close());
}

#[test]
fn cancel_by_tag_from_another_thread() {
    let (c, _) = connect("normal", json!({})).unwrap();
    let canceller = std::thread::spawn(|| {
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(10));
            if mcplug::client::cancel::cancel("engine-cancel-tag") > 0 {
                return true;
            }
        }
        false
    });
    let e = call(
        &c,
        "sleep",
        json!({"ms": 10000}),
        json!({"tag": "engine-cancel-tag"}),
    )
    .unwrap_err();
    assert!(canceller.join().unwrap());
    assert_eq!(e.kind, ErrorKind::Cancelled);
    let ids = text_of(&call(&c, "cancelled_ids", json!({}), json!({})).unwrap());
    assert_ne!(ids, "[]", "the server was told");
    block_on(c.close());
}

#[test]
fn server_death_fails_pending_calls_at_once() {
    let (c, _) = connect("normal", json!({})).unwrap();
    let c = std::sync::Arc::new(c);
    let slow = {
        let c = c.clone();
        std::thread::spawn(move || call(&c, "sleep", json!({"ms": 30000}), json!({})))
    };
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let e = call(&c, "crash", json!({}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Closed);
    assert!(e.message.contains("exit code 3"), "{e}");
    assert_eq!(slow.join().unwrap().unwrap_err().kind, ErrorKind::Closed);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "failed within a second"
    );
    // The event stream ends with `closed`.
    let mut saw_closed = false;
    loop {
        match c.next_event(Some(Duration::from_secs(2))) {
            Pulled::Event(e) => saw_closed |= e.contains("\"type\":\"closed\""),
            Pulled::Closed => break,
            Pulled::TimedOut => panic!("the queue must close"),
        }
    }
    assert!(saw_closed);
}

#[test]
fn an_oversized_message_is_a_clear_error() {
    let (c, _) = connect("normal", json!({"max_message_bytes": 4096})).unwrap();
    assert!(call(&c, "big", json!({"bytes": 1000}), json!({})).is_ok());
    let e = call(&c, "big", json!({"bytes": 100_000}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Transport, "{e}");
    assert!(e.message.contains("max_message_bytes"), "{e}");
    assert_eq!(
        call(&c, "echo", json!({"message": "x"}), json!({}))
            .unwrap_err()
            .kind,
        ErrorKind::Transport
    );
}

#[test]
fn server_requests_reach_the_host_or_get_an_error() {
    // roots given by the host: answered without bothering it.
    let (c, _) = connect(
        "normal",
        json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
    )
    .unwrap();
    let r = text_of(&call(&c, "ask", json!({"method": "roots/list"}), json!({})).unwrap());
    assert!(r.contains("file:///work"), "{r}");
    // A capability the host did not declare: -32601 to the server.
    let r = text_of(
        &call(
            &c,
            "ask",
            json!({"method": "sampling/createMessage"}),
            json!({}),
        )
        .unwrap(),
    );
    assert!(r.contains("-32601"), "{r}");
    // Ping is answered by the library.
    let r = text_of(&call(&c, "ask", json!({"method": "ping"}), json!({})).unwrap());
    assert_eq!(r, r#"{"result": {}}"#);
    block_on(c.close());

    // Declared: the request becomes an event; the host's answer goes back to the server.
    let (c, _) = connect(
        "normal",
        json!({"capabilities": {"sampling": {}}, "host_request_timeout_ms": 300}),
    )
    .unwrap();
    let c = std::sync::Arc::new(c);
    let host = {
        let c = c.clone();
        std::thread::spawn(move || loop {
            if let Pulled::Event(e) = c.next_event(Some(Duration::from_secs(5))) {
                let e: Value = serde_json::from_str(&e).unwrap();
                if e["type"] == "request" {
                    assert_eq!(e["method"], "sampling/createMessage");
                    let answer = json!({"id": e["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "from host"}}});
                    block_on(c.respond(&answer)).unwrap();
                    // A second answer to the same id is refused clearly.
                    assert_eq!(
                        block_on(c.respond(&answer)).unwrap_err().kind,
                        ErrorKind::InvalidArgument
                    );
                    return;
                }
            } else {
                panic!("no request event");
            }
        })
    };
    let r = text_of(
        &call(
            &c,
            "ask",
            json!({"method": "sampling/createMessage", "params": {"maxTokens": 5}}),
            json!({}),
        )
        .unwrap(),
    );
    host.join().unwrap();
    assert!(r.contains("from host"), "{r}");
    // Nobody answers: the server gets an error after host_request_timeout_ms, not a hang.
    let r = text_of(
        &call(
            &c,
            "ask",
            json!({"method": "sampling/createMessage"}),
            json!({}),
        )
        .unwrap(),
    );
    assert!(r.contains("did not answer"), "{r}");
    block_on(c.close());
}

#[test]
fn many_threads_one_connection() {
    let (c, _) = connect("normal", json!({})).unwrap();
    let c = std::sync::Arc::new(c);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let msg = format!("t{t}-{i}");
                    let r = call(&c, "echo", json!({"message": msg}), json!({})).unwrap();
                    assert_eq!(text_of(&r), format!("Echo: {msg}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    block_on(c.close());
}

#[test]
fn a_server_that_stops_reading_cannot_hold_a_caller_or_the_close() {
    let (c, _) = connect("normal", json!({"shutdown_grace_ms": 200})).unwrap();
    assert_eq!(
        text_of(&call(&c, "stop_reading", json!({}), json!({})).unwrap()),
        "ok"
    );
    let big = "y".repeat(4 << 20); // far more than a pipe holds
    let t = Instant::now();
    let e = call(
        &c,
        "echo",
        json!({"message": big}),
        json!({"timeout_ms": 300}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    // A second call queues behind the stuck write and times out too.
    let e = call(
        &c,
        "echo",
        json!({"message": "small"}),
        json!({"timeout_ms": 300}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    let t = Instant::now();
    block_on(c.close());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "close took {:?}",
        t.elapsed()
    );
}

#[test]
fn pagination_is_followed_to_the_end() {
    let (c, _) = connect("normal", json!({})).unwrap();
    let all = block_on(c.list_tools(&opts(json!({}))))
        .unwrap()
        .value()
        .unwrap();
    let n = all["tools"].as_array().unwrap().len();
    block_on(c.close());

    let (c, _) = connect("paged", json!({})).unwrap();
    let paged = block_on(c.list_tools(&opts(json!({}))))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(
        paged["tools"], all["tools"],
        "every page, in order, \"\" being a valid cursor"
    );
    assert!(n > 4, "the fixture has several pages");
    // One page on request, as the server sent it.
    let first = block_on(c.list_tools(&opts(json!({"cursor": ""}))))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(first["tools"].as_array().unwrap().len(), 2);
    assert!(first["nextCursor"].is_string());
    // The generic request follows pages only when asked.
    let one = block_on(c.request("tools/list", None, &opts(json!({}))))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(one["nextCursor"], "");
    let every = block_on(c.request("tools/list", None, &opts(json!({"all_pages": true}))))
        .unwrap()
        .value()
        .unwrap();
    assert_eq!(every["tools"].as_array().unwrap().len(), n);
    block_on(c.close());

    let (c, _) = connect("loop-cursor", json!({})).unwrap();
    let e = block_on(c.list_tools(&opts(json!({})))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Protocol);
    assert!(e.message.contains("twice"), "{e}");
    block_on(c.close());
}

#[test]
fn a_2025_03_26_batch_is_taken_apart() {
    let (c, info) = connect("batch", json!({})).unwrap();
    assert_eq!(info["protocol_version"], "2025-03-26");
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "b"}), json!({})).unwrap()),
        "Echo: b"
    );
    let mut saw_log = false;
    while let Pulled::Event(e) = c.next_event(Some(Duration::from_millis(500))) {
        saw_log |= e.contains("notifications/message") && e.contains("batched");
        if saw_log {
            break;
        }
    }
    assert!(saw_log, "the batch's notification became an event");
    block_on(c.close());
}

/// The `ask` tool's answer: what the client answered the server's request, as JSON.
fn asked(c: &Client, method: &str, params: Value) -> Value {
    let r = text_of(
        &call(
            c,
            "ask",
            json!({"method": method, "params": params, "wait_ms": 5000}),
            json!({}),
        )
        .unwrap(),
    );
    serde_json::from_str(&r).unwrap_or_else(|e| panic!("{e}: {r}"))
}

#[test]
fn a_legacy_server_can_have_the_client_run_its_requests_as_tasks() {
    let (c, _) = connect(
        "normal",
        json!({"capabilities": {"sampling": {}, "elicitation": {"form": true}}}),
    )
    .unwrap();
    let c = std::sync::Arc::new(c);
    // The host answers the sampling request a moment after it arrives, as a person would.
    let host = {
        let c = c.clone();
        std::thread::spawn(move || loop {
            match c.next_event(Some(Duration::from_secs(10))) {
                Pulled::Event(e) => {
                    let e: Value = serde_json::from_str(&e).unwrap();
                    if e["type"] == "request" {
                        assert_eq!(e["method"], "sampling/createMessage");
                        assert_eq!(
                            e["params"]["task"]["ttl"], 60000,
                            "the event is the request as sent"
                        );
                        std::thread::sleep(Duration::from_millis(200));
                        let answer = json!({"id": e["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "from host"}, "model": "m"}});
                        block_on(c.respond(&answer)).unwrap();
                        return;
                    }
                }
                _ => panic!("no request event"),
            }
        })
    };
    let created = asked(
        &c,
        "sampling/createMessage",
        json!({"task": {"ttl": 60000}, "messages": [], "maxTokens": 5}),
    );
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    let id = task["taskId"].as_str().unwrap().to_string();
    // tasks/result blocks until the host answered, then is what the request would have returned.
    let result = asked(&c, "tasks/result", json!({"taskId": id}));
    assert_eq!(result["result"]["content"]["text"], "from host", "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    host.join().unwrap();
    let got = asked(&c, "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    let listed = asked(&c, "tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"].as_array().unwrap().len(), 1);
    // A finished task cannot be cancelled; an unknown one is unknown.
    let refused = asked(&c, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let unknown = asked(&c, "tasks/get", json!({"taskId": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // A mode the client did not declare: -32602, as the elicitation spec asks.
    let url = asked(
        &c,
        "elicitation/create",
        json!({"mode": "url", "url": "https://example.com", "message": "m", "elicitationId": "e"}),
    );
    assert_eq!(url["error"]["code"], -32602, "{url}");
    assert!(url["error"]["message"]
        .as_str()
        .unwrap()
        .contains("elicitation.url"));
    // Sampling with tools needs sampling.tools.
    let tools = asked(
        &c,
        "sampling/createMessage",
        json!({"messages": [], "maxTokens": 5, "tools": []}),
    );
    assert_eq!(tools["error"]["code"], -32602, "{tools}");
    block_on(c.close());

    // With tasks off, the engine hosts no task: the server's task request is refused as a method
    // the client does not serve, and a task-augmented request is served as a plain one.
    let (c, _) = connect(
        "normal",
        json!({"capabilities": {"sampling": {}}, "tasks": false, "host_request_timeout_ms": 300}),
    )
    .unwrap();
    let got = asked(&c, "tasks/get", json!({"taskId": "x"}));
    assert_eq!(got["error"]["code"], -32601, "{got}");
    let plain = asked(
        &c,
        "sampling/createMessage",
        json!({"task": {"ttl": 1000}, "messages": [], "maxTokens": 5}),
    );
    // Nobody answers here: the host timer's error, not a task.
    assert!(
        plain["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{plain}"
    );
    block_on(c.close());
}

#[test]
fn connect_options_for_what_the_host_serves_are_checked() {
    let bad = |v: Value| ConnectOptions::parse(Some(&v)).unwrap_err();
    assert!(bad(json!({"capabilities": {"sampling": 1}}))
        .message
        .contains("capability `sampling`"));
    assert!(
        bad(json!({"capabilities": {"elicitation": {"form": false, "url": false}}}))
            .message
            .contains("neither")
    );
    assert!(bad(json!({"capabilities": {"tasks": {}}}))
        .message
        .contains("option `tasks`"));
    assert!(bad(json!({"roots": [{"uri": "/tmp"}]}))
        .message
        .contains("file://"));
    assert!(bad(json!({"log_level": "verbose"}))
        .message
        .contains("emergency"));
    assert!(bad(json!({"max_input_rounds": 0}))
        .message
        .contains("max_input_rounds"));
    let o = ConnectOptions::parse(Some(
        &json!({"capabilities": {"sampling": {"tools": true}, "elicitation": true}}),
    ))
    .unwrap();
    assert_eq!(o.capabilities["sampling"], json!({"tools": {}}));
    assert!(o.elicitation_form() && !o.elicitation_url());
    // The engine declares the tasks it serves, per era.
    assert_eq!(
        o.legacy_capabilities["tasks"]["requests"],
        json!({"sampling": {"createMessage": {}}, "elicitation": {"create": {}}})
    );
    assert_eq!(
        o.modern_capabilities["extensions"]["io.modelcontextprotocol/tasks"],
        json!({})
    );
    let off = ConnectOptions::parse(Some(
        &json!({"capabilities": {"sampling": {}}, "tasks": false}),
    ))
    .unwrap();
    assert!(off.legacy_capabilities.get("tasks").is_none());
    assert!(off.modern_capabilities.get("extensions").is_none());
    let e = CallOptions::parse(Some(&json!({"task": "later"}))).unwrap_err();
    assert!(e.message.contains("handle"), "{e}");
}

#[test]
fn a_modern_log_level_rides_every_request() {
    let (c, _) = connect("modern", json!({"log_level": "notice"})).unwrap();
    let meta = |c: &Client| -> Value {
        serde_json::from_str(&text_of(
            &call(c, "last_meta", json!({}), json!({})).unwrap(),
        ))
        .unwrap()
    };
    let m = meta(&c);
    assert_eq!(m["io.modelcontextprotocol/logLevel"], "notice", "{m}");
    assert_eq!(
        m["io.modelcontextprotocol/clientCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"],
        json!({}),
        "tasks on: the extension is declared"
    );
    let r = block_on(c.set_log_level(&json!("warning"), &CallOptions::default())).unwrap();
    assert_eq!(r["sent"], "per request");
    assert_eq!(meta(&c)["io.modelcontextprotocol/logLevel"], "warning");
    // The generic path carries it too.
    let raw = block_on(c.request(
        "tools/call",
        Some(json!({"name": "last_meta", "arguments": {}})),
        &CallOptions::default(),
    ))
    .unwrap()
    .value()
    .unwrap();
    let m: Value = serde_json::from_str(&text_of(&raw)).unwrap();
    assert_eq!(m["io.modelcontextprotocol/logLevel"], "warning");
    block_on(c.close());
}

#[test]
fn an_answer_that_cannot_be_read_fails_its_call_at_once() {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let cases: Vec<(Vec<u8>, &str, ErrorKind)> = vec![
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":@ID@,\"result\":{\"t\":\"\xff\"}}".to_vec(),
            "the server's answer could not be read",
            ErrorKind::Protocol,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":@ID@,"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#)
                .into_bytes(),
            "boom (the rest of the error object could not be read",
            ErrorKind::Rpc,
        ),
        (
            br#"{"jsonrpc":"2.0","id":@ID@}"#.to_vec(),
            "a response needs `result` or `error`",
            ErrorKind::Protocol,
        ),
    ];
    let (c, _) = connect("normal", json!({})).unwrap();
    for (line, want, kind) in cases {
        let t = Instant::now();
        let e = call(
            &c,
            "raw",
            json!({"b64": b64(&line)}),
            json!({"timeout_ms": 20000}),
        )
        .unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{want}: waited {:?}",
            t.elapsed()
        );
        assert!(e.message.contains(want), "{want}: {}", e.message);
        assert_eq!(e.kind, kind, "{want}: {}", e.message);
    }
    // A deep result is no error: it reaches the host as the text the server sent.
    let deep_result = format!(r#"{{"jsonrpc":"2.0","id":@ID@,"result":{{"d":{deep}}}}}"#);
    let args =
        serde_json::value::to_raw_value(&json!({"b64": b64(deep_result.as_bytes())})).unwrap();
    let raw = block_on(c.call_tool("raw", Some(&args), &opts(json!({})))).unwrap();
    assert!(raw.as_str().starts_with(r#"{"d":[[[["#));
    assert!(
        raw.value().is_err(),
        "and reading it into a tree says why, not null"
    );
    assert_eq!(
        text_of(&call(&c, "echo", json!({"message": "still"}), json!({})).unwrap()),
        "Echo: still"
    );
    block_on(c.close());
}

#[test]
fn a_server_that_never_answers_discover_costs_only_the_probe_bound() {
    let t = Instant::now();
    let (c, info) = connect("silent-discover", json!({"discover_timeout_ms": 300})).unwrap();
    assert_eq!(info["era"], "legacy");
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    block_on(c.close());
    let e = ConnectOptions::parse(Some(&json!({"discover_timeout_ms": null}))).unwrap_err();
    assert!(e.message.contains("discover_timeout_ms"), "{}", e.message);
}
