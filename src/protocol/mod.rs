//! JSON-RPC 2.0 framing, the pending-request table, and the rules of the two protocol eras.
//!
//! Messages stay `serde_json::Value` from the wire to the host: this layer reads only the
//! fields it must (`id`, `method`, `result`, `error`) and never reshapes the rest.

pub mod era;
pub mod pending;

use serde_json::Value;

/// What one incoming message is, by the JSON-RPC 2.0 rules.
#[derive(Debug)]
pub enum Incoming {
    /// A response to one of our requests (`result` or `error`, with our id).
    Response {
        id: Value,
        outcome: Result<Value, Value>,
    },
    /// A request from the server that needs an answer.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification from the server.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// Not a JSON-RPC message we can act on (a batch, a response without id, ...).
    Invalid {
        reason: &'static str,
        message: Value,
    },
}

/// Classifies one parsed message, taking ownership so that `params` and `result` move out
/// without a copy.
pub fn classify(message: Value) -> Incoming {
    let Value::Object(mut obj) = message else {
        return Incoming::Invalid {
            reason: "a JSON-RPC message must be a JSON object",
            message,
        };
    };
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params");
            match obj.remove("id") {
                Some(id) if id.is_string() || id.is_number() => {
                    Incoming::Request { id, method, params }
                }
                Some(Value::Null) | None => Incoming::Notification { method, params },
                Some(id) => {
                    obj.insert("id".into(), id);
                    obj.insert("method".into(), Value::String(method));
                    Incoming::Invalid {
                        reason: "a request id must be a string or a number",
                        message: Value::Object(obj),
                    }
                }
            }
        }
        Some(other) => {
            obj.insert("method".into(), other);
            Incoming::Invalid {
                reason: "`method` must be a string",
                message: Value::Object(obj),
            }
        }
        None => {
            let id = obj.remove("id").unwrap_or(Value::Null);
            if let Some(result) = obj.remove("result") {
                Incoming::Response {
                    id,
                    outcome: Ok(result),
                }
            } else if let Some(error) = obj.remove("error") {
                Incoming::Response {
                    id,
                    outcome: Err(error),
                }
            } else {
                obj.insert("id".into(), id);
                Incoming::Invalid {
                    reason: "a response needs `result` or `error`",
                    message: Value::Object(obj),
                }
            }
        }
    }
}

/// Serializes a request `{"jsonrpc":"2.0","id":id,"method":...,"params":...}` plus the newline
/// of the stdio framing, in one buffer.
pub fn encode_request(id: u64, method: &str, params: Option<&Value>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64 + method.len());
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    buf.extend_from_slice(id.to_string().as_bytes());
    buf.extend_from_slice(b",\"method\":");
    serde_json::to_writer(&mut buf, method).expect("a string always serializes");
    if let Some(params) = params {
        buf.extend_from_slice(b",\"params\":");
        serde_json::to_writer(&mut buf, params).expect("a Value always serializes");
    }
    buf.extend_from_slice(b"}\n");
    buf
}

pub fn encode_notification(method: &str, params: Option<&Value>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64 + method.len());
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":");
    serde_json::to_writer(&mut buf, method).expect("a string always serializes");
    if let Some(params) = params {
        buf.extend_from_slice(b",\"params\":");
        serde_json::to_writer(&mut buf, params).expect("a Value always serializes");
    }
    buf.extend_from_slice(b"}\n");
    buf
}

/// A response to a server's request: `result` on success, `error` otherwise.
pub fn encode_response(id: &Value, outcome: Result<&Value, &Value>) -> Vec<u8> {
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    serde_json::to_writer(&mut buf, id).expect("a Value always serializes");
    match outcome {
        Ok(result) => {
            buf.extend_from_slice(b",\"result\":");
            serde_json::to_writer(&mut buf, result).expect("a Value always serializes");
        }
        Err(error) => {
            buf.extend_from_slice(b",\"error\":");
            serde_json::to_writer(&mut buf, error).expect("a Value always serializes");
        }
    }
    buf.extend_from_slice(b"}\n");
    buf
}

/// JSON-RPC error codes this client sends or reads.
pub mod codes {
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_every_shape() {
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1,"result":{}})),
            Incoming::Response { outcome: Ok(_), .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}})),
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":"a","method":"ping"})),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","method":"notifications/x"})),
            Incoming::Notification { .. }
        ));
        assert!(matches!(classify(json!([1, 2])), Incoming::Invalid { .. }));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":[1],"method":"x"})),
            Incoming::Invalid { .. }
        ));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1})),
            Incoming::Invalid { .. }
        ));
    }

    #[test]
    fn encodes_valid_json_lines() {
        let params = json!({"name": "echo", "arguments": {"message": "a\nb"}});
        let line = encode_request(7, "tools/call", Some(&params));
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(
            line.iter().filter(|b| **b == b'\n').count(),
            1,
            "no embedded newline"
        );
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":params})
        );
        let v: Value =
            serde_json::from_slice(&encode_notification("notifications/initialized", None))
                .unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","method":"notifications/initialized"})
        );
        let v: Value =
            serde_json::from_slice(&encode_response(&json!("s1"), Ok(&json!({})))).unwrap();
        assert_eq!(v, json!({"jsonrpc":"2.0","id":"s1","result":{}}));
    }
}
