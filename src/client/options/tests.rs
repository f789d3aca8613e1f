use super::{
    CallOptions, ConnectOptions, Limit, ServerSpec, DEFAULT_CONNECT_TIMEOUT, TASKS_EXTENSION,
};
use serde_json::json;
use std::time::Duration;

#[test]
fn no_options_declare_what_empty_options_declare() {
    let none = ConnectOptions::parse(None).unwrap();
    let empty = ConnectOptions::parse(Some(&json!({}))).unwrap();
    assert_eq!(none.modern_capabilities, empty.modern_capabilities);
    assert_eq!(none.legacy_capabilities, empty.legacy_capabilities);
    assert!(none.modern_capabilities["extensions"]
        .get(TASKS_EXTENSION)
        .is_some());
}

#[test]
fn limits_parse_and_name_the_field() {
    let o = CallOptions::parse(Some(&json!({"timeout_ms": 50, "tag": "t"}))).unwrap();
    assert_eq!(o.timeout, Limit::After(Duration::from_millis(50)));
    assert_eq!(
        CallOptions::parse(Some(&json!({"timeout_ms": null})))
            .unwrap()
            .timeout,
        Limit::Unbounded
    );
    let e = CallOptions::parse(Some(&json!({"timeout_ms": -1}))).unwrap_err();
    assert!(e.message.contains("timeout_ms"), "{e}");
    let e = CallOptions::parse(Some(&json!({"tag": 3}))).unwrap_err();
    assert!(e.message.contains("tag"), "{e}");
    let e = ConnectOptions::parse(Some(&json!({"protocol_versions": ["1999-01-01"]}))).unwrap_err();
    assert!(e.message.contains("1999-01-01"), "{e}");
}

#[test]
fn defaults_are_the_layered_timeouts() {
    let o = ConnectOptions::parse(None).unwrap();
    assert_eq!(o.connect_timeout, Some(Duration::from_secs(30)));
    assert_eq!(o.request_timeout, Some(Duration::from_secs(60)));
    assert_eq!(o.tool_timeout, None);
    let o = ConnectOptions::parse(Some(
        &json!({"tool_timeout_ms": 1000, "request_timeout_ms": null}),
    ))
    .unwrap();
    assert_eq!(o.tool_timeout, Some(Duration::from_secs(1)));
    assert_eq!(o.request_timeout, None);
}

#[test]
fn roots_imply_the_roots_capability() {
    let o = ConnectOptions::parse(Some(
        &json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]}),
    ))
    .unwrap();
    assert!(o.declares("roots"));
    assert!(ConnectOptions::parse(Some(&json!({"roots": [{"name": "x"}]}))).is_err());
}

#[test]
fn handlers_declare_their_capabilities_and_the_hosts_own_merge_over_them() {
    let caps = |v: serde_json::Value| ConnectOptions::parse(Some(&v)).map(|o| o.capabilities);
    assert_eq!(
        caps(
            json!({"handlers": ["sampling/createMessage", "elicitation/create", "roots/list",
                                 "notifications/message", "auth/authorize"]})
        )
        .unwrap(),
        json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}})
    );
    // One level deep for the three the engine acts on; `false` takes one away; others replace.
    assert_eq!(
        caps(
            json!({"handlers": ["sampling/createMessage", "elicitation/create", "roots/list"],
                    "capabilities": {"elicitation": {"url": true}, "sampling": {"tools": {}},
                                     "roots": false, "experimental": {"x": {}}}})
        )
        .unwrap(),
        json!({"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}},
               "experimental": {"x": {}}})
    );
    assert_eq!(
        caps(json!({"capabilities": {"elicitation": {"url": {}}}})).unwrap(),
        json!({"elicitation": {"url": {}}}),
        "without a handler, only what the host declared"
    );
    assert_eq!(caps(json!({"handlers": []})).unwrap(), json!({}));
    for bad in [json!({"handlers": "roots/list"}), json!({"handlers": [1]})] {
        let e = caps(bad).unwrap_err();
        assert!(
            e.message.contains("option `handlers` must be an array"),
            "{}",
            e.message
        );
    }
    let o = ConnectOptions::parse(Some(&json!({"handlers": ["sampling/createMessage"]}))).unwrap();
    assert!(o.declares("sampling") && !o.declares("elicitation"));
}

#[test]
fn server_spec_errors_name_the_field() {
    assert!(ServerSpec::parse(&json!({"args": []}))
        .unwrap_err()
        .message
        .contains("command"));
    assert!(ServerSpec::parse(&json!({"command": "x", "args": [1]}))
        .unwrap_err()
        .message
        .contains("args[0]"));
    assert!(ServerSpec::parse(&json!({"command": "x", "env": {"A": 1}}))
        .unwrap_err()
        .message
        .contains("env.A"));
    assert_eq!(
        ServerSpec::parse(&json!({"type": "sdk", "name": "x"}))
            .unwrap_err()
            .kind,
        crate::error::ErrorKind::InvalidArgument
    );
    for kind in ["http", "streamable-http", "sse", "sse-ide"] {
        let s = ServerSpec::parse(
            &json!({"type": kind, "url": "http://h:1/mcp", "headers": {"X-A": "b"}}),
        )
        .unwrap();
        assert_eq!(s.signature(), "url:http://h:1/mcp");
    }
    assert!(matches!(
        ServerSpec::parse(&json!({"type": "ws-ide", "url": "ws://h:1/"})).unwrap(),
        ServerSpec::Ws { .. }
    ));
    assert!(
        ServerSpec::parse(&json!({"type": "ws", "url": "http://h/"}))
            .unwrap_err()
            .message
            .contains("ws://")
    );
    assert!(ServerSpec::parse(&json!({"type": "http"}))
        .unwrap_err()
        .message
        .contains("url"));
    assert!(
        ServerSpec::parse(&json!({"type": "http", "url": "http://h/", "headers": {"A": 1}}))
            .unwrap_err()
            .message
            .contains("headers.A")
    );
    assert!(ServerSpec::parse(
        &json!({"type": "http", "url": "http://h/", "headers": {"A": "x\ny"}})
    )
    .unwrap_err()
    .message
    .contains("headers.A"));
    assert!(ServerSpec::parse(&json!({"type": "carrier-pigeon"}))
        .unwrap_err()
        .message
        .contains("carrier-pigeon"));
    let s = ServerSpec::parse(&json!({"command": "npx", "args": ["-y", "x"]})).unwrap();
    assert_eq!(s.signature(), r#"stdio:["npx","-y","x"]"#);
}

#[test]
fn connection_options_read_by_serde_name_the_bad_one() {
    let err = |v: serde_json::Value| ConnectOptions::parse(Some(&v)).unwrap_err().message;
    assert_eq!(
        err(json!({"tool_timeout_ms": 0})),
        "option `tool_timeout_ms` must be a positive number of milliseconds, or null for no limit (got 0)"
    );
    assert_eq!(
        err(json!({"tasks": "yes"})),
        "option `tasks` must be true or false (got \"yes\")"
    );
    assert_eq!(
        err(json!({"max_events": -1})),
        "option `max_events` must be a positive integer (got -1)"
    );
    assert!(err(json!({"conect_timeout_ms": 1})).contains("unknown option `conect_timeout_ms`"));
    // null is the default for a flag or a count, and no limit for a timeout.
    let o = ConnectOptions::parse(Some(
        &json!({"tasks": null, "cache": null, "max_events": null,
                                               "request_timeout_ms": null}),
    ))
    .unwrap();
    assert!(o.tasks && o.cache);
    assert_eq!(o.max_events, 10_000);
    assert_eq!(o.request_timeout, None);
}

#[test]
fn claude_codes_timeouts_from_the_environment_are_defaults_under_the_options() {
    let env = |name: &str| match name {
        "MCP_TIMEOUT" => Some("1500".to_string()),
        "MCP_TOOL_TIMEOUT" => Some(" 2500 ".to_string()),
        _ => None,
    };
    let o = ConnectOptions::parse_with(None, &env).unwrap();
    assert_eq!(o.connect_timeout, Some(Duration::from_millis(1500)));
    assert_eq!(o.tool_timeout, Some(Duration::from_millis(2500)));
    // An option says otherwise: it wins.
    let given = json!({"connect_timeout_ms": 700, "tool_timeout_ms": 800});
    let o = ConnectOptions::parse_with(Some(&given), &env).unwrap();
    assert_eq!(o.connect_timeout, Some(Duration::from_millis(700)));
    assert_eq!(o.tool_timeout, Some(Duration::from_millis(800)));
    // Unset or empty: the defaults.
    let unset = ConnectOptions::parse_with(None, &|_| None).unwrap();
    assert_eq!(unset.connect_timeout, Some(DEFAULT_CONNECT_TIMEOUT));
    assert_eq!(unset.tool_timeout, None);
    let empty = ConnectOptions::parse_with(None, &|_| Some(String::new())).unwrap();
    assert_eq!(empty.connect_timeout, Some(DEFAULT_CONNECT_TIMEOUT));
    // Not a number: refused, named.
    for bad in ["abc", "0", "-5", "1.5"] {
        let e = ConnectOptions::parse_with(None, &|n: &str| {
            (n == "MCP_TOOL_TIMEOUT").then(|| bad.to_string())
        })
        .unwrap_err();
        assert!(
            e.message.contains("MCP_TOOL_TIMEOUT") && e.message.contains(bad),
            "{}",
            e.message
        );
    }
}
