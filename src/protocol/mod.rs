//! JSON-RPC 2.0 framing, the pending-request table, and the rules of the two protocol eras.
//!
//! JSON passes through untouched: a response's `result` is kept as the very text the server sent
//! ([`RawJson`]), so the host gets it byte for byte (big numbers, key order and all) without a
//! parse into a tree and a serialization back. This layer reads only the fields it must (`id`,
//! `method`, `error`); requests and notifications from the server, which the engine inspects,
//! become `serde_json::Value`.

pub mod era;
pub mod pending;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

/// A JSON value kept as text, exactly as it arrived (already validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawJson(String);

impl RawJson {
    /// Copies validated JSON text, leaving room for the C string terminator the C ABI adds.
    pub fn copy_of(raw: &RawValue) -> Self {
        let text = raw.get();
        let mut s = String::with_capacity(text.len() + 1);
        s.push_str(text);
        RawJson(s)
    }
    /// Serializes a value (for results the engine builds itself).
    pub fn from_value(value: &Value) -> Self {
        RawJson(value.to_string())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn into_string(self) -> String {
        self.0
    }
    /// Parses into a tree, for callers that need to look inside.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

/// What one incoming line is, by the JSON-RPC 2.0 rules.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A response to one of our requests: the raw `result`, or the `error` object.
    Response {
        id: &'a RawValue,
        outcome: Result<&'a RawValue, Value>,
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
    /// Not a JSON-RPC message we can act on (not JSON, a batch, a response without id, ...).
    Invalid { reason: String },
}

/// The fields of a JSON-RPC message, borrowed from the line (unknown fields are skipped).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<Value>,
}

/// Parses one line. Responses are the hot path: their `result` is only validated and sliced,
/// never built into a tree.
pub fn parse(line: &[u8]) -> Incoming<'_> {
    // Checked as UTF-8 once, as a whole (read from bytes, serde_json checks every string);
    // bytes that are not UTF-8 are read as bytes, for serde_json's own error message.
    let parsed = match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    };
    let env: Envelope = match parsed {
        Ok(e) => e,
        Err(e) if e.is_data() => {
            return Incoming::Invalid {
                reason: format!("not a JSON-RPC message object: {e}"),
            }
        }
        Err(e) => {
            return Incoming::Invalid {
                reason: format!("not valid JSON: {e}"),
            }
        }
    };
    let id = env.id.filter(|id| id.get() != "null");
    match (env.method, id) {
        (Some(method), Some(id)) => {
            let id: Value = match serde_json::from_str(id.get()) {
                Ok(v @ (Value::String(_) | Value::Number(_))) => v,
                _ => {
                    return Incoming::Invalid {
                        reason: "a request id must be a string or a number".into(),
                    }
                }
            };
            Incoming::Request {
                id,
                method: method.into_owned(),
                params: params_value(env.params),
            }
        }
        (Some(method), None) => Incoming::Notification {
            method: method.into_owned(),
            params: params_value(env.params),
        },
        (None, Some(id)) => match (env.result, env.error) {
            (Some(result), _) => Incoming::Response {
                id,
                outcome: Ok(result),
            },
            (None, Some(error)) => Incoming::Response {
                id,
                outcome: Err(error),
            },
            (None, None) => Incoming::Invalid {
                reason: "a response needs `result` or `error`".into(),
            },
        },
        (None, None) => match env.error {
            // An error about a message the server could not read (id null): worth showing the host.
            Some(error) => Incoming::Invalid {
                reason: format!("the server reported an error without an id: {error}"),
            },
            None => Incoming::Invalid {
                reason: "neither a request, a notification nor a response".into(),
            },
        },
    }
}

fn params_value(raw: Option<&RawValue>) -> Option<Value> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// An outgoing message built straight into its buffer.
pub struct Outgoing {
    buf: Vec<u8>,
}

impl Outgoing {
    /// `{"jsonrpc":"2.0","id":N,"method":"..."` — follow with params, then [`Outgoing::finish`].
    pub fn request(id: u64, method: &str, size_hint: usize) -> Self {
        let mut buf = Vec::with_capacity(64 + method.len() + size_hint);
        buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        write_u64(&mut buf, id);
        buf.extend_from_slice(b",\"method\":");
        serde_json::to_writer(&mut buf, method).expect("a string always serializes");
        Outgoing { buf }
    }
    /// `,"params":<value>`
    pub fn params(mut self, params: Option<&Value>) -> Self {
        if let Some(p) = params {
            self.buf.extend_from_slice(b",\"params\":");
            serde_json::to_writer(&mut self.buf, p).expect("a Value always serializes");
        }
        self
    }
    /// Raw bytes, for callers that write valid JSON themselves.
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.buf.extend_from_slice(bytes);
        self
    }
    /// A decimal number.
    pub fn number(mut self, n: u64) -> Self {
        write_u64(&mut self.buf, n);
        self
    }
    /// A JSON string.
    pub fn string(mut self, s: &str) -> Self {
        serde_json::to_writer(&mut self.buf, s).expect("a string always serializes");
        self
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(b"}\n");
        self.buf
    }
}

/// Writes a decimal number without a temporary allocation.
pub fn write_u64(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Serializes a request `{"jsonrpc":"2.0","id":id,"method":...,"params":...}` plus the newline
/// of the stdio framing, in one buffer.
pub fn encode_request(id: u64, method: &str, params: Option<&Value>) -> Vec<u8> {
    Outgoing::request(id, method, 0).params(params).finish()
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
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// A URL-mode elicitation must complete before the request can be retried (2025-11-25).
    pub(crate) const URL_ELICITATION_REQUIRED: i64 = -32042;
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_every_shape() {
        let r =
            br#"{"jsonrpc":"2.0","id":1,"result":{"big":123456789012345678901234567890,"a":1.0}}"#;
        match parse(r) {
            Incoming::Response {
                id,
                outcome: Ok(result),
            } => {
                assert_eq!(id.get(), "1");
                assert_eq!(
                    result.get(),
                    r#"{"big":123456789012345678901234567890,"a":1.0}"#,
                    "untouched"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}"#),
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/x","params":{}}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":null,"method":"notifications/x"}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(parse(b"[1, 2]"), Incoming::Invalid { .. }));
        assert!(matches!(parse(b"not json"), Incoming::Invalid { .. }));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":[1],"method":"x"}"#),
            Incoming::Invalid { .. }
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1}"#),
            Incoming::Invalid { .. }
        ));
        match parse(br#"{"method":"a\u0062c","id":2}"#) {
            Incoming::Request { method, .. } => assert_eq!(method, "abc"),
            other => panic!("{other:?}"),
        }
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
