//! Without its validator library (libmcplug_schema, loaded on the first schema compile), the
//! engine still works: a tool's schema is then not used, the host is told why and where the
//! library was looked for, and the tool is called unchecked. A process loads the library once,
//! so this is a test binary of its own, which points MCPLUG_SCHEMA_LIBRARY at nothing.

use mcplug::queue::Pulled;
use mcplug::runtime::block_on;
use mcplug::{CallOptions, Client, ConnectOptions, ServerSpec};
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn a_missing_validator_library_is_named_and_nothing_else_fails() {
    let missing = std::env::temp_dir().join("mcplug-no-such-dir/libmcplug_schema.so");
    // Set before anything in this process compiles a schema (this binary's only test).
    std::env::set_var("MCPLUG_SCHEMA_LIBRARY", &missing);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/servers/fault_server.py");
    let spec =
        ServerSpec::parse(&json!({"command": "python3", "args": [script, "normal"]})).unwrap();
    let (c, _) = block_on(Client::connect(
        &spec,
        ConnectOptions::parse(None).unwrap(),
        None,
    ))
    .unwrap();
    block_on(c.list_tools(&CallOptions::default())).unwrap();

    let mut warning = None;
    while let Pulled::Event(text) = c.next_event(Some(Duration::from_millis(500))) {
        let event: Value = serde_json::from_str(&text).unwrap();
        if event["type"] == "warning" {
            warning = Some(event);
            break;
        }
    }
    let warning = warning.expect("a warning for the weather tool's outputSchema");
    assert_eq!(warning["reason"], "invalid_schema");
    assert_eq!(warning["tool"], "weather");
    let message = warning["message"].as_str().unwrap();
    for part in [
        "libmcplug_schema.so",
        missing.to_str().unwrap(),
        "not there",
        "MCPLUG_SCHEMA_LIBRARY",
    ] {
        assert!(message.contains(part), "{part:?} is not in {message:?}");
    }

    // Unchecked: a result that breaks the schema comes back as the server sent it.
    let args = serde_json::value::to_raw_value(&json!({"mode": "bad"})).unwrap();
    let result = block_on(c.call_tool("weather", Some(&args), &CallOptions::default()))
        .expect("no check without the library")
        .value()
        .unwrap();
    assert_eq!(result["structuredContent"]["temperature"], "hot");
    block_on(c.close());
}
