//! The client's core paths over the in-memory transport (`transport::memory`): era negotiation,
//! requests and their pages, what the server asks of the host in both eras, cancellation and the
//! end of a connection — each test plays the server itself, message by message, so it checks
//! exactly what the client sends.

use super::options::{CallOptions, ConnectOptions};
use super::Client;
use crate::error::ErrorKind;
use crate::protocol::era::META_PROTOCOL_VERSION;
use crate::queue::Pulled;
use crate::transport::memory::{self, MemoryServer};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A signature of its own per connect: the era cache must not carry one test's server into another.
fn signature() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "memory-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn options(value: Value) -> ConnectOptions {
    ConnectOptions::parse(Some(&value)).expect("valid options")
}

/// Connects while `serve` plays the server's side of the handshake (and whatever follows), on
/// the runtime; returns the client, its connect result and the server task.
async fn connect<F, Fut, T>(
    opts: ConnectOptions,
    serve: F,
) -> (Arc<Client>, Value, tokio::task::JoinHandle<T>)
where
    F: FnOnce(MemoryServer) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let (make, server) = memory::pair();
    let task = tokio::spawn(serve(server));
    let (client, info) = match Client::connect_with(Some("mem"), opts, &signature(), make).await {
        Ok(connected) => connected,
        // The server's script failed a check (and hung up): its panic says which.
        Err(e) => match task.await {
            Err(panic) if panic.is_panic() => std::panic::resume_unwind(panic.into_panic()),
            _ => panic!("connect failed: {e:?}"),
        },
    };
    (Arc::new(client), info, task)
}

/// A modern server's side of the probe: `server/discover` answered with 2026-07-28.
async fn discover_modern(server: &mut MemoryServer, capabilities: Value) {
    let probe = server.next().await;
    assert_eq!(probe["method"], "server/discover", "{probe}");
    assert_eq!(
        probe["params"]["_meta"][META_PROTOCOL_VERSION],
        "2026-07-28"
    );
    server.answer(
        &probe,
        json!({"supportedVersions": ["2026-07-28"], "capabilities": capabilities,
               "serverInfo": {"name": "memory", "version": "1"}}),
    );
}

/// A legacy server's side: `server/discover` refused, then `initialize` and `initialized`.
async fn handshake_legacy(server: &mut MemoryServer, capabilities: Value) -> Value {
    let probe = server.next().await;
    assert_eq!(probe["method"], "server/discover");
    server.fail(&probe, -32601, "Method not found");
    let init = server.next().await;
    assert_eq!(init["method"], "initialize", "{init}");
    server.answer(
        &init,
        json!({"protocolVersion": init["params"]["protocolVersion"], "capabilities": capabilities,
               "serverInfo": {"name": "memory", "version": "1"}}),
    );
    let initialized = server.next().await;
    assert_eq!(initialized["method"], "notifications/initialized");
    assert!(initialized.get("id").is_none(), "a notification has no id");
    init
}

/// The next host event, parsed (within 5 s).
fn next_event(client: &Client) -> Value {
    match client.next_event(Some(Duration::from_secs(5))) {
        Pulled::Event(text) => serde_json::from_str(&text).expect("an event is JSON"),
        Pulled::TimedOut => panic!("no event within 5 s"),
        Pulled::Closed => panic!("the event queue is closed"),
    }
}

fn raw(text: &str) -> Box<serde_json::value::RawValue> {
    serde_json::value::RawValue::from_string(text.to_string()).unwrap()
}

#[test]
fn a_modern_server_is_found_by_discover_and_its_results_pass_through() {
    crate::runtime::block_on(async {
        let (client, info, task) = connect(options(json!({})), |mut server| async move {
            discover_modern(&mut server, json!({"tools": {}})).await;
            let call = server.next().await;
            assert_eq!(call["method"], "tools/call");
            assert_eq!(call["params"]["name"], "echo");
            assert_eq!(call["params"]["arguments"], json!({"text": "hi"}));
            // Every modern request says its version.
            assert_eq!(call["params"]["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
            server.answer(
                &call,
                json!({"content": [{"type": "text", "text": "hi"}], "x-unknown": {"kept": true}}),
            );
            server
        })
        .await;
        assert_eq!(info["era"], "modern", "{info}");
        assert_eq!(info["protocol_version"], "2026-07-28");
        let args = raw(r#"{"text":"hi"}"#);
        let result = client
            .call_tool("echo", Some(&args), &CallOptions::default())
            .await
            .expect("called");
        // A field no SDK type knows is the server's own text, untouched.
        let result = result.value().unwrap();
        assert_eq!(result["x-unknown"], json!({"kept": true}), "{result}");
        assert_eq!(result["content"][0]["text"], "hi");
        task.await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_server_that_refuses_discover_gets_the_legacy_handshake_and_pages_are_followed() {
    crate::runtime::block_on(async {
        let (client, info, task) = connect(options(json!({})), |mut server| async move {
            let init = handshake_legacy(&mut server, json!({"tools": {}})).await;
            assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
            let first = server.next().await;
            assert_eq!(first["method"], "tools/list");
            assert!(first["params"].get("cursor").is_none(), "{first}");
            server.answer(&first, json!({"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "page-2"}));
            let second = server.next().await;
            assert_eq!(second["method"], "tools/list");
            assert_eq!(second["params"]["cursor"], "page-2");
            server.answer(&second, json!({"tools": [{"name": "b", "inputSchema": {"type": "object"}}]}));
            server
        })
        .await;
        assert_eq!(info["era"], "legacy", "{info}");
        assert_eq!(info["protocol_version"], "2025-11-25");
        let all = CallOptions {
            all_pages: true,
            ..Default::default()
        };
        let listed = client
            .request("tools/list", None, &all)
            .await
            .expect("listed");
        let listed = listed.value().unwrap();
        let names: Vec<&str> = listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        task.await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_legacy_servers_request_reaches_the_host_and_the_hosts_answer_the_server() {
    crate::runtime::block_on(async {
        let opts = options(json!({"capabilities": {"sampling": {}}}));
        let (client, _, task) = connect(opts, |mut server| async move {
            let init = handshake_legacy(&mut server, json!({})).await;
            // The capability the host declared went into the handshake.
            assert!(
                init["params"]["capabilities"].get("sampling").is_some(),
                "{init}"
            );
            server.send(
                json!({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage",
                               "params": {"messages": [], "maxTokens": 5}}),
            );
            let answer = server.next().await;
            assert_eq!(answer["id"], 7, "{answer}");
            assert_eq!(answer["result"]["content"]["text"], "from the host");
            server
        })
        .await;
        let event = next_event(&client);
        assert_eq!(event["type"], "request", "{event}");
        assert_eq!(event["method"], "sampling/createMessage");
        assert_eq!(event["params"]["maxTokens"], 5);
        client
            .respond(
                &json!({"id": event["id"], "result": {"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "from the host"}}}),
            )
            .await
            .expect("answered");
        task.await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_modern_input_required_result_is_fulfilled_by_the_host_and_the_call_retried() {
    crate::runtime::block_on(async {
        let opts = options(json!({"capabilities": {"elicitation": {}}}));
        let (client, _, task) = connect(opts, |mut server| async move {
            discover_modern(&mut server, json!({"tools": {}})).await;
            let call = server.next().await;
            assert_eq!(call["method"], "tools/call");
            server.answer(&call, json!({"resultType": "input_required", "requestState": "round-1",
                "inputRequests": {"who": {"method": "elicitation/create", "params": {
                    "mode": "form", "message": "Your name?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}));
            let retry = server.next().await;
            assert_eq!(retry["method"], "tools/call", "{retry}");
            assert_ne!(retry["id"], call["id"], "a retry is a new request");
            assert_eq!(retry["params"]["requestState"], "round-1", "the state comes back byte for byte");
            assert_eq!(retry["params"]["inputResponses"]["who"]["action"], "accept");
            assert_eq!(retry["params"]["inputResponses"]["who"]["content"]["name"], "Ada");
            server.answer(&retry, json!({"resultType": "complete", "content": [{"type": "text", "text": "hello Ada"}]}));
            server
        })
        .await;
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call_tool("greet", None, &CallOptions::default())
                    .await
            }
        });
        let event = tokio::task::spawn_blocking({
            let client = client.clone();
            move || next_event(&client)
        })
        .await
        .unwrap();
        assert_eq!(event["type"], "request", "{event}");
        assert_eq!(event["method"], "elicitation/create");
        assert_eq!(event["params"]["message"], "Your name?");
        client
            .respond(&json!({"id": event["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
            .await
            .expect("answered");
        let result = call.await.unwrap().expect("the call ends complete");
        assert!(result.as_str().contains("hello Ada"), "{}", result.as_str());
        task.await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_cancelled_call_tells_the_server_and_fails_cancelled() {
    crate::runtime::block_on(async {
        let (client, _, mut task) = connect(options(json!({})), |mut server| async move {
            handshake_legacy(&mut server, json!({"tools": {}})).await;
            server
        })
        .await;
        let mut server = (&mut task).await.unwrap();
        let tagged = CallOptions {
            tag: Some("core-test-cancel".into()),
            ..Default::default()
        };
        let call = tokio::spawn({
            let client = client.clone();
            async move { client.call_tool("slow", None, &tagged).await }
        });
        let sent = server.next().await;
        assert_eq!(sent["method"], "tools/call");
        assert_eq!(crate::client::cancel::cancel("core-test-cancel"), 1);
        let e = call.await.unwrap().expect_err("cancelled");
        assert_eq!(e.kind, ErrorKind::Cancelled, "{e:?}");
        let note = server.next().await;
        assert_eq!(note["method"], "notifications/cancelled", "{note}");
        assert_eq!(note["params"]["requestId"], sent["id"]);
        // An answer that comes after the cancel goes nowhere, and breaks nothing.
        server.answer(&sent, json!({"content": []}));
        let ping = tokio::spawn({
            let client = client.clone();
            async move { client.request("ping", None, &CallOptions::default()).await }
        });
        let p = server.next().await;
        assert_eq!(p["method"], "ping");
        server.answer(&p, json!({}));
        ping.await.unwrap().expect("the connection goes on");
        client.close().await;
    });
}

#[test]
fn the_end_of_the_connection_fails_every_pending_request_at_once() {
    crate::runtime::block_on(async {
        let (client, _, task) = connect(options(json!({})), |mut server| async move {
            discover_modern(&mut server, json!({"tools": {}})).await;
            server
        })
        .await;
        let mut server = task.await.unwrap();
        let calls: Vec<_> = (0..3)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .call_tool(&format!("t{i}"), None, &CallOptions::default())
                        .await
                })
            })
            .collect();
        for _ in 0..3 {
            assert_eq!(server.next().await["method"], "tools/call");
        }
        server.hang_up("the server exited");
        for call in calls {
            let e = call.await.unwrap().expect_err("failed");
            assert_eq!(e.kind, ErrorKind::Closed, "{e:?}");
        }
        assert!(client.is_closed());
        assert!(server
            .next_within(Duration::from_millis(50))
            .await
            .is_none());
    });
}

#[test]
fn a_listen_stream_is_opened_acknowledged_and_only_its_notifications_reach_the_host() {
    use super::listen::SUBSCRIPTION_ID;
    crate::runtime::block_on(async {
        let opts = options(json!({"listen": true}));
        let (client, _, task) = connect(opts, |mut server| async move {
            discover_modern(&mut server, json!({"tools": {"listChanged": true}})).await;
            let listen = server.next().await;
            assert_eq!(listen["method"], "subscriptions/listen", "{listen}");
            // Only what the server offers is asked for.
            assert_eq!(listen["params"]["notifications"], json!({"toolsListChanged": true}));
            let id = listen["id"].clone();
            server.send(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {SUBSCRIPTION_ID: id}, "notifications": {"toolsListChanged": true}}}));
            // Another stream's notification is not this connection's business.
            server.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {SUBSCRIPTION_ID: 424242}}}));
            server.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                "params": {"_meta": {SUBSCRIPTION_ID: id}}}));
            (server, id)
        })
        .await;
        let (_server, id) = task.await.unwrap();
        let listening = next_event(&client);
        assert_eq!(listening["type"], "listening", "{listening}");
        assert_eq!(listening["subscription"], id);
        assert_eq!(
            listening["notifications"],
            json!({"toolsListChanged": true})
        );
        assert_eq!(listening["reopened"], false);
        let changed = next_event(&client);
        assert_eq!(changed["type"], "notification", "{changed}");
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(
            changed["params"]["_meta"][SUBSCRIPTION_ID], id,
            "the acknowledged stream's, not the other"
        );
        assert!(
            matches!(
                client.next_event(Some(Duration::from_millis(100))),
                Pulled::TimedOut
            ),
            "nothing else reaches the host"
        );
        client.close().await;
    });
}

#[test]
fn a_legacy_tool_call_that_becomes_a_task_is_polled_and_its_result_fetched() {
    crate::runtime::block_on(async {
        let tasks = json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}});
        let (client, _, task) = connect(options(json!({})), move |mut server| async move {
            handshake_legacy(&mut server, tasks).await;
            let call = server.next().await;
            assert_eq!(call["method"], "tools/call");
            assert!(
                call["params"]["task"].is_object(),
                "a task is asked for: {call}"
            );
            server.answer(
                &call,
                json!({"task": {"taskId": "t-1", "status": "working", "pollInterval": 10}}),
            );
            let get = server.next().await;
            assert_eq!(get["method"], "tasks/get", "{get}");
            assert_eq!(get["params"]["taskId"], "t-1");
            server.answer(&get, json!({"taskId": "t-1", "status": "completed"}));
            let result = server.next().await;
            assert_eq!(result["method"], "tasks/result", "{result}");
            assert_eq!(result["params"]["taskId"], "t-1");
            server.answer(
                &result,
                json!({"content": [{"type": "text", "text": "done late"}]}),
            );
            server
        })
        .await;
        let awaited = CallOptions {
            task: super::options::TaskMode::Await,
            ..Default::default()
        };
        let result = client
            .call_tool("long", None, &awaited)
            .await
            .expect("the task's result");
        assert!(result.as_str().contains("done late"), "{}", result.as_str());
        task.await.unwrap();
        client.close().await;
    });
}

#[test]
fn a_listing_whose_pages_never_end_stops_at_max_list_bytes() {
    crate::runtime::block_on(async {
        let (client, _info, task) = connect(
            options(json!({"max_list_bytes": 1 << 20})),
            |mut server| async move {
                handshake_legacy(&mut server, json!({"tools": {}})).await;
                // Pages of 64 KiB, each with a new 16 KiB cursor, for ever: the client must stop.
                let filler = "d".repeat(48 << 10);
                let mut asked = 0;
                loop {
                    let list = server.next().await;
                    if list["method"] != "tools/list" {
                        return (asked, list);
                    }
                    asked += 1;
                    let cursor = format!("{asked}-{}", "c".repeat(16 << 10));
                    server.answer(
                        &list,
                        json!({"tools": [{"name": format!("t{asked}"), "description": filler,
                                          "inputSchema": {"type": "object"}}],
                               "nextCursor": cursor}),
                    );
                }
            },
        )
        .await;
        let e = client
            .list_tools(&CallOptions::default())
            .await
            .expect_err("an endless listing fails");
        assert_eq!(e.kind, ErrorKind::Denied, "{e:?}");
        assert!(e.message.contains("max_list_bytes"), "{}", e.message);
        assert!(e.message.contains("1048576 bytes"), "{}", e.message);
        // The connection still works: the next request is an ordinary one.
        let ping = tokio::spawn({
            let client = client.clone();
            async move { client.request("ping", None, &CallOptions::default()).await }
        });
        let (asked, next) = task.await.unwrap();
        // 1 MiB of 64 KiB pages: the 16th page passes it, none is asked for after.
        assert_eq!(asked, 16, "pages asked for");
        assert_eq!(next["method"], "ping");
        ping.abort();
        client.close().await;
    });
}
