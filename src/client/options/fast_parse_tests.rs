use super::{CallOptions, ConnectOptions};
use serde_json::{json, Value};

/// The text path and the tree path agree on every option, and on every error.
#[test]
fn parse_fast_agrees_with_parse() {
    let cases = [
        r#"{}"#,
        r#"{"defer":true}"#,
        r#"{"timeout_ms":null,"tag":"t","progress":true,"reset_timeout_on_progress":false}"#,
        r#"{"timeout_ms":250,"max_total_timeout_ms":1000,"cursor":"c\u00e9","all_pages":true}"#,
        r#"{"task":"handle","task_ttl_ms":5000,"validate_arguments":false}"#,
        r#"{"task":true}"#,
        r#"{"task":null}"#,
        r#"{"tag":""}"#,
        r#"{"timeout_ms":0}"#,
        r#"{"timeout_ms":"5"}"#,
        r#"{"defer":1}"#,
        r#"{"task":"maybe"}"#,
        r#"{"cursor":5}"#,
    ];
    for text in cases {
        let tree: Value = serde_json::from_str(text).unwrap();
        let slow = CallOptions::parse(Some(&tree)).map(|o| format!("{o:?}"));
        let fast = CallOptions::parse_fast(text)
            .unwrap_or_else(|| panic!("{text} is a plain object of options"))
            .map(|o| format!("{o:?}"));
        match (&slow, &fast) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
            (Err(a), Err(b)) => assert_eq!(a.message, b.message, "{text}"),
            _ => panic!("{text}: {slow:?} vs {fast:?}"),
        }
    }
    // Not a plain object of known options: the tree path reports it.
    for text in [
        r#"5"#,
        r#"[1]"#,
        r#"{"tag":"a","tag":"b"}"#,
        r#"{"#,
        r#"{"timeout":1000}"#,
    ] {
        assert!(CallOptions::parse_fast(text).is_none(), "{text}");
    }
}

#[test]
fn unknown_options_are_refused_by_name() {
    let e = CallOptions::parse(Some(&json!({"timeout": 1000}))).unwrap_err();
    assert_eq!(e.kind, crate::error::ErrorKind::InvalidArgument);
    assert!(
        e.message.contains("unknown option `timeout`") && e.message.contains("timeout_ms"),
        "{}",
        e.message
    );
    assert!(
        CallOptions::parse_with(Some(&json!({"server": "a", "timeout_ms": 5})), &["server"])
            .is_ok()
    );
    let e = ConnectOptions::parse(Some(&json!({"conect_timeout_ms": 5}))).unwrap_err();
    assert!(
        e.message.contains("unknown option `conect_timeout_ms`")
            && e.message.contains("auth_store"),
        "{}",
        e.message
    );
    assert!(ConnectOptions::parse(Some(
        &json!({"tag": "t", "auth_store": "memory", "headers_helper_timeout_ms": 5})
    ))
    .is_ok());
}
