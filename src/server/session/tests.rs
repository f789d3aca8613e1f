//! The server session over the in-memory transport, the test playing the downstream client
//! message by message: the handshake of each era, requests served and answered once, a
//! client's cancel, what the server asks of the client, progress and log levels, the end.

use super::*;
use crate::transport::memory::{self, MemoryServer};
use std::sync::atomic::{AtomicBool, Ordering};

/// A handler with a few tools of its own: `echo` answers its params; `wait` waits for its
/// cancel (and notes it); `sample` asks the client for a sampling; `beat` sends progress, a
/// debug and an error log message, then answers.
struct Tools {
    cancelled: Arc<AtomicBool>,
}

impl Handler for Tools {
    fn offer(&self) -> Offer {
        Offer {
            legacy_tasks: None,
            capabilities: json!({"tools": {}, "logging": {}}),
            server_info: json!({"name": "test-tools", "version": "1"}),
            instructions: Some("be kind".into()),
        }
    }

    fn handle(&self, call: Call) -> BoxFuture<'static, std::result::Result<RawJson, Value>> {
        let cancelled = self.cancelled.clone();
        Box::pin(async move {
            let fail =
                |e: Error| json!({"code": -32000, "message": e.message, "data": e.kind.as_str()});
            match call.method.as_str() {
                "echo" => Ok(RawJson::from_value(&call.params.unwrap_or(Value::Null))),
                "wait" => {
                    call.cancel.fired().await;
                    cancelled.store(true, Ordering::SeqCst);
                    Ok(RawJson::from_value(&json!({"late": true})))
                }
                "sample" => {
                    let cancels = Cancels {
                        tag: None,
                        own: Some(call.cancel.clone()),
                    };
                    let answer = call
                        .downstream
                        .ask(
                            "sampling/createMessage",
                            Some(&json!({"messages": [], "maxTokens": 5})),
                            &cancels,
                        )
                        .await
                        .map_err(fail)?;
                    Ok(RawJson::from_value(
                        &json!({"sampled": answer.value().unwrap()}),
                    ))
                }
                "beat" => {
                    let d = &call.downstream;
                    d.progress(json!({"progress": 1, "total": 2}))
                        .await
                        .map_err(fail)?;
                    d.log("debug", Some("t"), json!("quiet"))
                        .await
                        .map_err(fail)?;
                    d.log("error", Some("t"), json!("loud"))
                        .await
                        .map_err(fail)?;
                    d.notify("notifications/tools/list_changed", None)
                        .await
                        .map_err(fail)?;
                    Ok(RawJson::from_value(&json!({"done": true})))
                }
                other => Err(json!({"code": -32601, "message": format!("no {other}")})),
            }
        })
    }
}

fn serve() -> (Arc<ServerSession>, MemoryServer, Arc<AtomicBool>) {
    let cancelled = Arc::new(AtomicBool::new(false));
    let (make, client) = memory::pair();
    let handler = Arc::new(Tools {
        cancelled: cancelled.clone(),
    });
    let session = ServerSession::new(Some("downstream"), handler, Duration::from_secs(5), make);
    (session, client, cancelled)
}

/// Whether `flag` is set within 500 ms.
async fn soon(flag: &AtomicBool) -> bool {
    for _ in 0..50 {
        if flag.load(Ordering::SeqCst) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    flag.load(Ordering::SeqCst)
}

fn send(session: &Arc<ServerSession>, message: Value) {
    Arc::clone(session).message(message.to_string().as_bytes());
}

async fn initialize(session: &Arc<ServerSession>, client: &mut MemoryServer, caps: Value) {
    send(
        session,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": {"name": "c"}}}),
    );
    let answer = client.next().await;
    assert_eq!(
        answer["result"]["protocolVersion"], "2025-06-18",
        "{answer}"
    );
}

#[tokio::test]
async fn initialize_negotiates_the_clients_version_or_our_newest() {
    let (session, mut client, _) = serve();
    initialize(&session, &mut client, json!({"sampling": {}})).await;
    assert!(matches!(session.era(), ClientEra::Legacy { version, .. } if version == "2025-06-18"));
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}),
    );
    let answer = client.next().await;
    assert_eq!(answer["result"]["protocolVersion"], LEGACY_VERSIONS[0]);
    assert_eq!(answer["result"]["serverInfo"]["name"], "test-tools");
    assert_eq!(answer["result"]["instructions"], "be kind");
    assert_eq!(answer["result"]["capabilities"]["tools"], json!({}));
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}),
    );
    assert_eq!(client.next().await["error"]["code"], codes::INVALID_PARAMS);
}

#[tokio::test]
async fn discover_answers_before_any_handshake_and_a_modern_request_sets_the_era() {
    let (session, mut client, _) = serve();
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {}}),
    );
    let answer = client.next().await;
    assert_eq!(
        answer["result"]["supportedVersions"],
        json!(MODERN_VERSIONS)
    );
    assert_eq!(answer["result"]["resultType"], "complete");
    assert_eq!(
        answer["result"]["_meta"][era::META_SERVER_INFO]["name"],
        "test-tools"
    );
    assert_eq!(session.era(), ClientEra::Unknown);
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": {"_meta": {
            era::META_PROTOCOL_VERSION: "2026-07-28"}, "x": 1}}),
    );
    assert_eq!(client.next().await["result"]["x"], 1);
    assert_eq!(
        session.era(),
        ClientEra::Modern {
            version: "2026-07-28".into()
        }
    );
}

#[tokio::test]
async fn a_request_is_served_and_its_result_passed_on_as_written() {
    let (session, mut client, _) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"big": 12345678901234567890u64, "s": "é"}}),
    );
    let answer = client.next().await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["result"]["s"], "é");
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 8, "method": "nothing"}),
    );
    let answer = client.next().await;
    assert_eq!(
        answer["error"],
        json!({"code": -32601, "message": "no nothing"})
    );
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
    );
    assert_eq!(client.next().await["result"], json!({}));
}

#[tokio::test]
async fn a_cancelled_request_is_cancelled_and_never_answered() {
    let (session, mut client, cancelled) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 9, "method": "wait"}),
    );
    // The same id again while it is in flight is refused.
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 9, "method": "echo"}),
    );
    let refused = client.next().await;
    assert_eq!(
        refused["error"]["code"],
        codes::INVALID_REQUEST,
        "{refused}"
    );
    send(
        &session,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}),
    );
    assert!(
        client
            .next_within(Duration::from_millis(300))
            .await
            .is_none(),
        "a cancelled request gets no answer"
    );
    assert!(
        cancelled.load(Ordering::SeqCst),
        "the handler saw its cancel"
    );
}

#[tokio::test]
async fn the_server_asks_a_client_that_declared_the_capability_and_refuses_otherwise() {
    let (session, mut client, _) = serve();
    initialize(&session, &mut client, json!({"sampling": {}})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 10, "method": "sample"}),
    );
    let asked = client.next().await;
    assert_eq!(asked["method"], "sampling/createMessage");
    assert_eq!(asked["params"]["maxTokens"], 5);
    client.answer(
        &asked,
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"}}),
    );
    let answer = client.next().await;
    assert_eq!(answer["id"], 10);
    assert_eq!(answer["result"]["sampled"]["content"]["text"], "hi");

    let (session, mut client, _) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 11, "method": "sample"}),
    );
    let answer = client.next().await;
    assert_eq!(answer["id"], 11, "refused at once, nothing asked: {answer}");
    assert_eq!(answer["error"]["data"], "denied");
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .contains("did not declare the sampling capability"));
}

#[tokio::test]
async fn progress_goes_to_the_requests_token_and_logs_above_the_clients_level() {
    let (session, mut client, _) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 12, "method": "logging/setLevel", "params": {"level": "warning"}}),
    );
    assert_eq!(client.next().await["result"], json!({}));
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 13, "method": "beat", "params": {"_meta": {"progressToken": "tok"}}}),
    );
    let progress = client.next().await;
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "tok");
    assert_eq!(progress["params"]["total"], 2);
    let log = client.next().await;
    assert_eq!(
        log["method"], "notifications/message",
        "the debug message was held back"
    );
    assert_eq!(log["params"]["level"], "error");
    assert_eq!(log["params"]["logger"], "t");
    assert_eq!(
        client.next().await["method"],
        "notifications/tools/list_changed"
    );
    assert_eq!(client.next().await["result"]["done"], true);
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 14, "method": "logging/setLevel", "params": {"level": "loud"}}),
    );
    assert_eq!(client.next().await["error"]["code"], codes::INVALID_PARAMS);
}

#[tokio::test]
async fn the_end_of_the_session_cancels_what_it_serves() {
    let (session, mut client, cancelled) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 15, "method": "wait"}),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    client.hang_up("the client went away");
    assert!(
        soon(&cancelled).await,
        "the handler saw its cancel within 500 ms"
    );
    assert!(session.session.check_open().is_err());
}

#[tokio::test]
async fn closing_the_session_cancels_what_it_serves_and_answers_nothing_more() {
    let (session, mut client, cancelled) = serve();
    initialize(&session, &mut client, json!({})).await;
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 16, "method": "wait"}),
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    session.close().await;
    assert!(
        soon(&cancelled).await,
        "the handler saw its cancel within 500 ms"
    );
    send(
        &session,
        json!({"jsonrpc": "2.0", "id": 17, "method": "ping"}),
    );
    assert!(client
        .next_within(Duration::from_millis(200))
        .await
        .is_none());
}

#[test]
fn a_modern_result_gets_what_the_era_asks_and_keeps_the_rest() {
    assert_eq!(
        super::completed("tools/call", r#"{"content":[]}"#).as_deref(),
        Some(r#"{"resultType":"complete","content":[]}"#)
    );
    assert_eq!(
        super::completed("tools/list", "{}").as_deref(),
        Some(r#"{"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#)
    );
    assert_eq!(
        super::completed(
            "resources/read",
            r#"{"resultType":"complete","ttlMs":5,"cacheScope":"public","contents":[]}"#
        ),
        None
    );
    assert_eq!(
        super::completed(
            "tools/call",
            r#"{"resultType":"input_required","requestState":"s"}"#
        ),
        None
    );
}
