use super::options::ManagerOptions;
use super::Manager;
use crate::client::options::CallOptions;
use crate::queue::Pulled;
use crate::runtime;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn events(m: &Manager) -> Vec<Value> {
    let mut out = Vec::new();
    while let Pulled::Event(text) = m.next_event(Some(Duration::ZERO)) {
        out.push(serde_json::from_str(&text).unwrap());
    }
    out
}

fn pool_names(m: &Manager) -> Vec<String> {
    m.list_tools(None)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn in_process_servers_connect_at_once_and_are_retooled_in_place() {
    let m = Manager::new(ManagerOptions::parse(None).unwrap());
    let config = |tools: Value| json!({"mcpServers": {"host": {"type": "sdk", "tools": tools}}});
    let status = runtime::block_on(m.connect(&config(json!([{"name": "a"}])))).unwrap();
    assert_eq!(status["servers"]["host"]["state"], "connected", "{status}");
    assert_eq!(pool_names(&m), ["mcp__host__a"]);
    events(&m);
    // The same server with other tools: new tools, no reconnect.
    runtime::block_on(m.connect(&config(json!([{"name": "b"}])))).unwrap();
    assert_eq!(pool_names(&m), ["mcp__host__b"]);
    let seen = events(&m);
    assert!(
        seen.iter().all(|e| e["type"] != "state"),
        "no state change: {seen:?}"
    );
    assert!(
        seen.iter().any(|e| e["type"] == "tools_changed"),
        "{seen:?}"
    );
    // A call is a request event; the host's answer is the result.
    let m = Arc::new(m);
    let m2 = m.clone();
    let caller = runtime::spawn(async move {
        m2.call_tool("mcp__host__b", None, &CallOptions::default())
            .await
    });
    let request = loop {
        match m.next_event(Some(Duration::from_secs(10))) {
            Pulled::Event(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "request" {
                    break v;
                }
            }
            _ => panic!("no request event for the host call"),
        }
    };
    assert_eq!(request["method"], "tools/call");
    assert_eq!(request["server"], "host");
    assert_eq!(request["params"], json!({"name": "b", "arguments": {}}));
    let bad = json!({"id": request["id"], "result": {"text": "no content"}});
    assert!(runtime::block_on(m.respond(&bad)).is_err());
    let good =
        json!({"id": request["id"], "result": {"content": [{"type": "text", "text": "ok"}]}});
    runtime::block_on(m.respond(&good)).unwrap();
    let result = runtime::block_on(caller).unwrap().unwrap();
    assert!(
        result.as_str().contains("\"text\":\"ok\""),
        "{}",
        result.as_str()
    );
    runtime::block_on(m.close());
}
