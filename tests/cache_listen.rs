//! Result caching (2026-07-28 `ttlMs`/`cacheScope`) and `subscriptions/listen` through the
//! engine's Rust API: against the Python SDK 2.3 server of the 2026-07-28 era over stdio and
//! Streamable HTTP (tests/servers/modern_server.py: its caching hints with `--cache-ttl-ms`,
//! its listen streams, tools that change its tools and its note resource with or without
//! telling), and the fault server's modern-listen modes for what the SDK does not do (a stdio
//! teardown by `notifications/cancelled`, a notification of a subscription nobody opened, an
//! acknowledgement that leaves a URI out, no listen at all).

#[path = "support/peers.rs"]
mod peers;

use mcplug::queue::Pulled;
use mcplug::runtime::block_on;
use mcplug::{CallOptions, Client, ConnectOptions, ErrorKind, ServerSpec};
use peers::{modern_http_on, repo, Peer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn modern_stdio(extra: &[&str]) -> Value {
    let python = repo().join(".deps/venv/bin/python");
    assert!(python.exists(), "run tests/install-deps.sh first");
    let mut args = vec![json!(repo()
        .join("tests/servers/modern_server.py")
        .to_str()
        .unwrap())];
    args.extend(extra.iter().map(|a| json!(a)));
    json!({"command": python.to_str().unwrap(), "args": args})
}

fn fault(mode: &str) -> Value {
    let script = repo().join("tests/servers/fault_server.py");
    json!({"command": "python3", "args": [script.to_str().unwrap(), mode]})
}

fn connect(server: Value, options: Value) -> Client {
    let spec = ServerSpec::parse(&server).unwrap();
    let (c, info) = block_on(Client::connect(
        &spec,
        ConnectOptions::parse(Some(&options)).unwrap(),
        None,
    ))
    .unwrap();
    assert_eq!(info["era"], "modern", "{info}");
    c
}

fn opts(v: Value) -> CallOptions {
    CallOptions::parse(Some(&v)).unwrap()
}

fn request(c: &Client, method: &str, params: Value, options: Value) -> mcplug::Result<String> {
    block_on(c.request(method, Some(params), &opts(options))).map(|r| r.into_string())
}

fn call(c: &Client, name: &str, args: Value) -> Value {
    let args = serde_json::value::to_raw_value(&args).unwrap();
    block_on(c.call_tool(name, Some(&args), &opts(json!({}))))
        .unwrap()
        .value()
        .unwrap()
}

fn tool_names(c: &Client, options: Value) -> Vec<String> {
    let list: Value =
        serde_json::from_str(&request(c, "tools/list", json!({}), options).unwrap()).unwrap();
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn note(c: &Client, options: Value) -> String {
    let r: Value = serde_json::from_str(
        &request(
            c,
            "resources/read",
            json!({"uri": "note://current"}),
            options,
        )
        .unwrap(),
    )
    .unwrap();
    r["contents"][0]["text"].as_str().unwrap().to_string()
}

/// Pulls events until one matches (other events are skipped); panics after `within`.
fn wait_for(c: &Client, within: Duration, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.next_event(Some(left)) {
            Pulled::Event(e) => {
                let e: Value = serde_json::from_str(&e).unwrap();
                if pred(&e) {
                    return e;
                }
            }
            Pulled::TimedOut => panic!("no {what} within {within:?}"),
            Pulled::Closed => panic!("the connection closed while waiting for {what}"),
        }
    }
}

/// The notifications (by method) that arrive within `within`.
fn notifications_within(c: &Client, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while let Pulled::Event(e) =
        c.next_event(Some(deadline.saturating_duration_since(Instant::now())))
    {
        let e: Value = serde_json::from_str(&e).unwrap();
        if e["type"] == "notification" {
            seen.push(e);
        }
    }
    seen
}

fn is_notification(e: &Value, method: &str) -> bool {
    e["type"] == "notification" && e["method"] == method
}

/// The event that says the listen stream is up (the server's acknowledgement).
fn is_listening(e: &Value) -> bool {
    e["type"] == "listening"
}

const SUB_ID: &str = "io.modelcontextprotocol/subscriptionId";
const WAIT: Duration = Duration::from_secs(10);

/// Everything the cache and the listen stream do for a host, on one connection to the SDK
/// server: hits, the per-call bypass, invalidation by list_changed and by resources/updated
/// (after resources/subscribe), and unsubscribe.
fn cache_and_listen(server: Value) {
    let c = connect(server, json!({"listen": true}));
    let ack = wait_for(&c, WAIT, "the acknowledgement", is_listening);
    let honored = &ack["notifications"];
    assert_eq!(honored["toolsListChanged"], true, "{ack}");
    assert_eq!(honored["promptsListChanged"], true, "{ack}");
    assert_eq!(honored["resourcesListChanged"], true, "{ack}");
    assert!(honored.get("resourceSubscriptions").is_none(), "{ack}");
    assert_eq!(ack["reopened"], false, "{ack}");
    // The server's acknowledgement itself is not passed on as a notification.
    assert!(notifications_within(&c, Duration::from_millis(200)).is_empty());

    // A listed result is served from the cache: a tool added without telling is not in it.
    let first = request(&c, "tools/list", json!({}), json!({})).unwrap();
    assert!(first.contains("\"ttlMs\":60000"), "{first}");
    call(&c, "add_tool", json!({"name": "quiet_one"}));
    let again = request(&c, "tools/list", json!({}), json!({})).unwrap();
    assert_eq!(again, first, "the cached result, byte for byte");
    assert!(!tool_names(&c, json!({})).contains(&"quiet_one".to_string()));
    // ... unless the host bypasses it; the fresh result replaces the cached one.
    assert!(tool_names(&c, json!({"cache": false})).contains(&"quiet_one".to_string()));
    assert!(tool_names(&c, json!({})).contains(&"quiet_one".to_string()));
    // The list_tools call and all_pages share the same cached pages.
    call(&c, "add_tool", json!({"name": "quiet_two"}));
    let listed = block_on(c.list_tools(&opts(json!({}))))
        .unwrap()
        .value()
        .unwrap();
    assert!(!listed.to_string().contains("quiet_two"), "{listed}");

    // A change the server tells of reaches the host as an event, and the cache forgets.
    call(&c, "add_tool", json!({"name": "loud_one", "notify": true}));
    let changed = wait_for(&c, WAIT, "tools/list_changed", |e| {
        is_notification(e, "notifications/tools/list_changed")
    });
    assert_eq!(
        changed["params"]["_meta"][SUB_ID], ack["subscription"],
        "{changed}"
    );
    let names = tool_names(&c, json!({}));
    assert!(
        names.contains(&"loud_one".to_string()) && names.contains(&"quiet_two".to_string()),
        "{names:?}"
    );

    // resources/read: private, kept for this connection.
    assert_eq!(note(&c, json!({})), "first");
    call(&c, "set_note", json!({"text": "second"}));
    assert_eq!(note(&c, json!({})), "first", "served from the cache");
    // Subscribing (the modern era has no resources/subscribe: the listen stream carries it).
    let r = request(
        &c,
        "resources/subscribe",
        json!({"uri": "note://current"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(r, "{}");
    let ack2 = wait_for(&c, WAIT, "the new acknowledgement", is_listening);
    assert_eq!(
        ack2["notifications"]["resourceSubscriptions"],
        json!(["note://current"]),
        "{ack2}"
    );
    assert_ne!(ack2["subscription"], ack["subscription"], "a new stream");
    assert_eq!(
        ack2["reopened"], false,
        "a planned switch leaves no gap: {ack2}"
    );
    call(&c, "set_note", json!({"text": "third", "notify": true}));
    let updated = wait_for(&c, WAIT, "resources/updated", |e| {
        is_notification(e, "notifications/resources/updated")
    });
    assert_eq!(updated["params"]["uri"], "note://current");
    assert_eq!(updated["params"]["_meta"][SUB_ID], ack2["subscription"]);
    assert_eq!(note(&c, json!({})), "third", "the update made it stale");

    // Unsubscribed: no more updates, and the cached read stays.
    let r = request(
        &c,
        "resources/unsubscribe",
        json!({"uri": "note://current"}),
        json!({}),
    )
    .unwrap();
    assert_eq!(r, "{}");
    wait_for(&c, WAIT, "the acknowledgement without the URI", |e| {
        is_listening(e) && e["notifications"]["resourceSubscriptions"].is_null()
    });
    call(&c, "set_note", json!({"text": "fourth", "notify": true}));
    let seen = notifications_within(&c, Duration::from_millis(800));
    assert!(
        !seen
            .iter()
            .any(|e| e["method"] == "notifications/resources/updated"),
        "{seen:?}"
    );
    // (A late update on the closed stream would still make the cached read stale: it is news
    // all the same. Asked fresh, the note is the new one.)
    assert_eq!(note(&c, json!({"cache": false})), "fourth");
    block_on(c.close());
}

#[test]
fn cache_and_listen_over_stdio() {
    cache_and_listen(modern_stdio(&["--cache-ttl-ms", "60000"]));
}

#[test]
fn cache_and_listen_over_streamable_http() {
    let port = peers::free_port();
    let _peer = modern_http_on(port, &["--cache-ttl-ms", "60000"]);
    cache_and_listen(json!({"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")}));
}

#[test]
fn fresh_until_the_ttl_ends_and_never_without_one() {
    let c = connect(modern_stdio(&["--cache-ttl-ms", "1500"]), json!({}));
    assert_eq!(note(&c, json!({})), "first");
    call(&c, "set_note", json!({"text": "second"}));
    assert_eq!(note(&c, json!({})), "first");
    std::thread::sleep(Duration::from_millis(1600));
    assert_eq!(note(&c, json!({})), "second", "stale after 1500 ms");
    block_on(c.close());

    // ttlMs 0 (the SDK's default): nothing is kept.
    let c = connect(modern_stdio(&[]), json!({}));
    assert_eq!(note(&c, json!({})), "first");
    call(&c, "set_note", json!({"text": "second"}));
    assert_eq!(note(&c, json!({})), "second");
    block_on(c.close());

    // The connection option `cache: false`: nothing is kept either.
    let c = connect(
        modern_stdio(&["--cache-ttl-ms", "60000"]),
        json!({"cache": false}),
    );
    assert_eq!(note(&c, json!({})), "first");
    call(&c, "set_note", json!({"text": "second"}));
    assert_eq!(note(&c, json!({})), "second");
    block_on(c.close());
}

#[test]
fn private_results_stay_with_their_credentials() {
    let port = peers::free_port();
    let _peer = modern_http_on(port, &["--cache-ttl-ms", "60000"]);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let alice = connect(
        json!({"type": "http", "url": url, "headers": {"Authorization": "Bearer alice"}}),
        json!({}),
    );
    let bob = connect(
        json!({"type": "http", "url": url, "headers": {"Authorization": "Bearer bob"}}),
        json!({}),
    );
    assert_eq!(note(&alice, json!({})), "first");
    call(&alice, "set_note", json!({"text": "for bob"}));
    assert_eq!(note(&bob, json!({})), "for bob", "not alice's cached read");
    assert_eq!(note(&alice, json!({})), "first", "alice's own");
    block_on(alice.close());
    block_on(bob.close());
}

#[test]
fn a_stream_the_server_ends_is_opened_again() {
    // Gracefully (the SDK answers the listen request).
    let c = connect(modern_stdio(&["--cache-ttl-ms", "60000"]), json!({}));
    // The "auto" mode: the stream opens once the host waits for events.
    let ack = wait_for(&c, WAIT, "the acknowledgement", is_listening);
    call(&c, "add_tool", json!({"name": "before"}));
    assert!(!tool_names(&c, json!({})).is_empty());
    call(&c, "end_subscriptions", json!({}));
    let ack2 = wait_for(&c, WAIT, "a second acknowledgement", is_listening);
    assert_ne!(ack2["subscription"], ack["subscription"]);
    assert_eq!(ack2["reopened"], true, "{ack2}");
    call(&c, "add_tool", json!({"name": "after", "notify": true}));
    let changed = wait_for(&c, WAIT, "tools/list_changed", |e| {
        is_notification(e, "notifications/tools/list_changed")
    });
    assert_eq!(changed["params"]["_meta"][SUB_ID], ack2["subscription"]);
    block_on(c.close());
}

#[test]
fn the_stream_follows_a_restarted_http_server() {
    let port = peers::free_port();
    let peer = modern_http_on(port, &["--cache-ttl-ms", "60000"]);
    let c = connect(
        json!({"type": "http", "url": format!("http://127.0.0.1:{port}/mcp")}),
        json!({"listen": true}),
    );
    wait_for(&c, WAIT, "the acknowledgement", is_listening);
    call(&c, "add_tool", json!({"name": "gone_with_the_server"}));
    assert!(tool_names(&c, json!({})).contains(&"gone_with_the_server".to_string()));
    drop::<Peer>(peer);
    let _peer = modern_http_on(port, &["--cache-ttl-ms", "60000"]);
    // The stream broke with the server; it is opened again on the new one.
    let again = wait_for(
        &c,
        Duration::from_secs(30),
        "an acknowledgement from the new server",
        is_listening,
    );
    assert_eq!(again["reopened"], true, "{again}");
    // What the cache held of the old server's lists may have changed unseen: gone.
    assert!(!tool_names(&c, json!({})).contains(&"gone_with_the_server".to_string()));
    call(
        &c,
        "add_tool",
        json!({"name": "new_server_tool", "notify": true}),
    );
    wait_for(&c, WAIT, "tools/list_changed from the new server", |e| {
        is_notification(e, "notifications/tools/list_changed")
    });
    assert!(tool_names(&c, json!({})).contains(&"new_server_tool".to_string()));
    block_on(c.close());
}

fn text_json(result: &Value) -> Value {
    serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap()
}

#[test]
fn subscription_ids_acknowledgements_and_a_stdio_teardown() {
    let c = connect(fault("modern-listen"), json!({"listen": true}));
    let ack = wait_for(&c, WAIT, "the acknowledgement", is_listening);
    let first_id = ack["subscription"].as_u64().unwrap();
    // Only the notification of our stream reaches the host, not one of a stream we never had.
    call(&c, "list_changed", json!({}));
    let seen = notifications_within(&c, Duration::from_millis(500));
    let changes: Vec<_> = seen
        .iter()
        .filter(|e| e["method"] == "notifications/tools/list_changed")
        .collect();
    assert_eq!(changes.len(), 1, "{seen:?}");
    assert_eq!(changes[0]["params"]["_meta"][SUB_ID], first_id);

    // An acknowledgement that leaves the URI out: the subscription is refused, nothing kept.
    let e = request(
        &c,
        "resources/subscribe",
        json!({"uri": "deny://x"}),
        json!({}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Denied, "{e:?}");
    assert!(e.message.contains("deny://x"), "{}", e.message);
    let e = request(&c, "resources/subscribe", json!({}), json!({})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert_eq!(
        request(
            &c,
            "resources/subscribe",
            json!({"uri": "ok://y"}),
            json!({})
        )
        .unwrap(),
        "{}"
    );
    let state = text_json(&call(&c, "listens", json!({})));
    let listens = state["listens"].as_array().unwrap().clone();
    assert!(listens.len() >= 3, "{state}");
    let newest = listens.last().unwrap().as_u64().unwrap();
    // Every stream but the newest was closed the stdio way (notifications/cancelled).
    for id in &listens[..listens.len() - 1] {
        assert!(
            state["cancelled"].as_array().unwrap().contains(id),
            "{id} not cancelled: {state}"
        );
    }

    // The server ends the newest with notifications/cancelled: a new one is opened.
    call(&c, "end_listen", json!({}));
    let again = wait_for(&c, WAIT, "a new acknowledgement", |e| {
        is_listening(e) && e["subscription"].as_u64() > Some(newest)
    });
    assert_eq!(
        again["notifications"]["resourceSubscriptions"],
        json!(["ok://y"]),
        "the subscriptions are kept: {again}"
    );
    block_on(c.close());

    // A server with nothing to listen for (no listChanged offered) is never asked (it would
    // answer -32601, and the host would get a warning).
    let c = connect(fault("modern"), json!({"listen": true}));
    call(&c, "echo", json!({"message": "x"}));
    let deadline = Instant::now() + Duration::from_millis(500);
    while let Pulled::Event(e) =
        c.next_event(Some(deadline.saturating_duration_since(Instant::now())))
    {
        assert!(!e.contains("\"warning\""), "{e}");
    }
    block_on(c.close());
}

#[test]
fn a_server_without_listen_gets_a_warning_not_a_loop() {
    let c = connect(fault("modern-nolisten"), json!({"listen": true}));
    let w = wait_for(&c, WAIT, "the warning", |e| e["type"] == "warning");
    assert_eq!(w["reason"], "listen_unsupported", "{w}");
    let e = request(
        &c,
        "resources/subscribe",
        json!({"uri": "a://b"}),
        json!({}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rpc, "{e:?}");
    assert_eq!(e.code, Some(-32601));
    block_on(c.close());
}

#[test]
fn legacy_resources_subscribe_goes_to_the_server() {
    let spec = ServerSpec::parse(&fault("normal")).unwrap();
    let (c, info) = block_on(Client::connect(&spec, ConnectOptions::default(), None)).unwrap();
    assert_eq!(info["era"], "legacy");
    let e = request(
        &c,
        "resources/subscribe",
        json!({"uri": "a://b"}),
        json!({}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Rpc);
    assert!(e.message.contains("resources/subscribe"), "{}", e.message);
    block_on(c.close());
}

#[test]
fn a_manager_lists_again_when_a_stream_was_reopened() {
    use mcplug::manager::{options::ManagerOptions, Manager};
    let m = Manager::new(ManagerOptions::default());
    let config = json!({"mcpServers": {"m": modern_stdio(&["--cache-ttl-ms", "60000"])}});
    block_on(m.connect(&config)).unwrap();
    block_on(m.wait_settled(Some(Duration::from_secs(30)))).unwrap();
    let pool_has = |name: &str| {
        m.list_tools(None)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.to_string().contains(name))
    };
    let call = |tool: &str, args: Value| {
        let args = serde_json::value::to_raw_value(&args).unwrap();
        block_on(m.call_tool(tool, Some(&args), &opts(json!({})))).unwrap()
    };
    // The manager pumps the connection's events, so its stream opens by itself.
    let deadline = Instant::now() + WAIT;
    let mut listening = 0;
    let mut wait_listening = |reopened: bool| loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match m.next_event(Some(left)) {
            Pulled::Event(e) => {
                let e: Value = serde_json::from_str(&e).unwrap();
                if e["type"] == "listening" {
                    listening += 1;
                    assert_eq!(e["server"], "m", "{e}");
                    assert_eq!(e["reopened"], reopened, "{e}");
                    return;
                }
            }
            other => panic!("no listening event ({})", matches!(other, Pulled::TimedOut)),
        }
    };
    wait_listening(false);
    call("mcp__m__add_tool", json!({"name": "added_quietly"}));
    assert!(!pool_has("added_quietly"), "nobody told the manager");
    // The stream ends and is opened again: what changed meanwhile may have been missed, so the
    // manager lists the server's tools again.
    call("mcp__m__end_subscriptions", json!({}));
    wait_listening(true);
    let until = Instant::now() + WAIT;
    while !pool_has("added_quietly") {
        assert!(Instant::now() < until, "the pool was not listed again");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listening, 2);
    block_on(m.close());
}
