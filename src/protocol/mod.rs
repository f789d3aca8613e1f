//! JSON-RPC 2.0 framing, the pending-request table, and the rules of the two protocol eras.
//!
//! JSON passes through untouched: a response's `result` is kept as the very text the server sent
//! ([`RawJson`]), so the host gets it byte for byte (big numbers, key order and all) without a
//! parse into a tree and a serialization back. This layer reads only the fields it must (`id`,
//! `method`, `error`); requests and notifications from the server, which the engine inspects,
//! become `serde_json::Value`.

pub mod era;

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
    /// JSON text the engine wrote itself from valid pieces (valid by construction).
    pub(crate) fn from_built(text: String) -> Self {
        RawJson(text)
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn into_string(self) -> String {
        self.0
    }
    /// Parses into a tree, for callers that need to look inside. A value it cannot build
    /// (nesting deeper than serde_json's limit of 128) is a `protocol` error, never a `null`.
    pub fn value(&self) -> crate::error::Result<Value> {
        tree(&self.0).map_err(|e| {
            crate::error::Error::protocol(format!(
                "a result of the server's could not be read into a tree: {e}"
            ))
        })
    }
}

/// How deep a JSON text nests, read without recursing (strings skipped): what decides where a
/// tree of it may be built.
pub fn depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < text.len() {
        match text[i] {
            b'"' => {
                i += 1;
                while i < text.len() && text[i] != b'"' {
                    i += if text[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// Deeper than this, a tree is built on a spare stack (see [`tree`]).
const BUILT_IN_PLACE: usize = 24;

/// Whether a tree of `text` can be built on the caller's stack (see [`tree`]).
pub fn shallow(text: &[u8]) -> bool {
    depth(text) <= BUILT_IN_PLACE
}

/// A JSON text as a tree. Building one recurses once per level of nesting (in serde_json, up to
/// its limit of 128), which overflows a small host stack — a 128 KiB thread, in a debug build,
/// well before that: a text nesting deeper than a few dozen levels is built on a thread with a
/// stack of the library's own ([`crate::runtime::on_spare_stack`]).
pub fn tree(text: &str) -> Result<Value, String> {
    if shallow(text.as_bytes()) {
        return serde_json::from_str(text).map_err(|e| e.to_string());
    }
    crate::runtime::on_spare_stack(|| serde_json::from_str(text).map_err(|e| e.to_string()))?
}

/// What one incoming line is, by the JSON-RPC 2.0 rules.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A response to one of our requests: the raw `result`, or the `error` object.
    Response {
        id: &'a RawValue,
        outcome: Result<&'a RawValue, Value>,
    },
    /// A request from the server that needs an answer. `params` it could not read (nested
    /// too deep) are the reason, for a -32602 answer.
    Request {
        id: Value,
        method: String,
        params: Result<Option<Value>, String>,
    },
    /// A notification from the server.
    Notification {
        method: String,
        params: Result<Option<Value>, String>,
    },
    /// Not a JSON-RPC message we can act on (not JSON, a batch, a response without id, ...).
    /// `answers`: the id of the request it answers, when that could still be read (a response
    /// with invalid UTF-8 or too deep a nesting somewhere): that request fails with `reason`.
    Invalid {
        reason: String,
        answers: Option<Box<RawValue>>,
    },
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
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// An error object's fields, for one whose whole cannot be built into a tree.
#[derive(Deserialize)]
struct ShallowError<'a> {
    code: Option<i64>,
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
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
        Err(e) => {
            let reason = if e.is_data() {
                format!("not a JSON-RPC message object: {e}")
            } else {
                format!("not valid JSON: {e}")
            };
            return Incoming::Invalid {
                reason,
                answers: salvage_response_id(line),
            };
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
                        answers: None,
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
                outcome: Err(error_value(error)),
            },
            (None, None) => Incoming::Invalid {
                reason: "a response needs `result` or `error`".into(),
                answers: RawValue::from_string(id.get().to_string()).ok(),
            },
        },
        (None, None) => match env.error {
            // An error about a message the server could not read (id null): worth showing the host.
            Some(error) => Incoming::Invalid {
                reason: format!(
                    "the server reported an error without an id: {}",
                    error_value(error)
                ),
                answers: None,
            },
            None => Incoming::Invalid {
                reason: "neither a request, a notification nor a response".into(),
                answers: None,
            },
        },
    }
}

fn params_value(raw: Option<&RawValue>) -> Result<Option<Value>, String> {
    match raw {
        None => Ok(None),
        Some(r) => serde_json::from_str(r.get())
            .map(Some)
            .map_err(|e| format!("its params could not be read: {e}")),
    }
}

/// An error object as a tree; one that cannot be built (its `data` nested too deep) keeps its
/// `code` and `message`, and says why its `data` is gone.
fn error_value(raw: &RawValue) -> Value {
    match serde_json::from_str(raw.get()) {
        Ok(v) => v,
        Err(e) => {
            let shallow: Option<ShallowError> = serde_json::from_str(raw.get()).ok();
            let (code, message) = shallow
                .map(|s| (s.code, s.message.map(Cow::into_owned)))
                .unwrap_or((None, None));
            serde_json::json!({
                "code": code.unwrap_or(-32603),
                "message": format!(
                    "{} (the rest of the error object could not be read: {e})",
                    message.unwrap_or_else(|| "(no message)".into())
                ),
            })
        }
    }
}

/// The `id` of a response that could not be parsed — invalid UTF-8 somewhere, nesting deeper
/// than the parser goes, a bad value after the id — when its top-level `id` is still readable
/// (and it has no `method`: a request's id is not ours). A scan of the top level, not a parse:
/// no recursion, whatever the nesting.
pub fn salvage_response_id(line: &[u8]) -> Option<Box<RawValue>> {
    let mut i = 0;
    let ws = |i: &mut usize| {
        while *i < line.len() && line[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    // The end of the string starting at `i` (its opening quote): the index after its close.
    let string_end = |mut i: usize| -> Option<usize> {
        i += 1;
        while i < line.len() {
            match line[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    ws(&mut i);
    if line.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut id: Option<Box<RawValue>> = None;
    loop {
        ws(&mut i);
        if line.get(i) != Some(&b'"') {
            break;
        }
        let key_end = string_end(i)?;
        let key = &line[i + 1..key_end - 1];
        i = key_end;
        ws(&mut i);
        if line.get(i) != Some(&b':') {
            break;
        }
        i += 1;
        ws(&mut i);
        let start = i;
        // Skip the value: a string, a scalar, or a nested value counted by its brackets.
        match line.get(i) {
            Some(b'"') => i = string_end(i)?,
            Some(b'{' | b'[') => {
                let mut depth = 0usize;
                while i < line.len() {
                    match line[i] {
                        b'"' => {
                            i = string_end(i).unwrap_or(line.len());
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            Some(_) => {
                while i < line.len() && !matches!(line[i], b',' | b'}') {
                    i += 1;
                }
            }
            None => break,
        }
        match key {
            b"method" => return None,
            b"id" => {
                let text = std::str::from_utf8(&line[start..i]).ok()?.trim();
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::String(_) | Value::Number(_)) => {
                        id = RawValue::from_string(text.to_string()).ok();
                    }
                    _ => return None,
                }
            }
            _ => {}
        }
        ws(&mut i);
        if line.get(i) != Some(&b',') {
            break;
        }
        i += 1;
    }
    id
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

#[cfg(test)]
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

/// The strings of a JSON array (what is not a string left out; not an array: none).
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `capabilities` declares the capability at `path` (`["sampling"]`,
/// `["elicitation", "url"]`): each step present and not null.
pub fn declares(capabilities: &Value, path: &[&str]) -> bool {
    let mut at = capabilities;
    for key in path {
        match at.get(key) {
            Some(v) if !v.is_null() => at = v,
            _ => return false,
        }
    }
    true
}

/// The syslog levels of MCP logging, least severe first.
pub const LOG_LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A response whose result is JSON text already (a server passing a result on untouched).
pub fn encode_raw_response(id: &Value, result: &str) -> Vec<u8> {
    let mut buf = Vec::with_capacity(result.len() + 48);
    buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    serde_json::to_writer(&mut buf, id).expect("a Value always serializes");
    buf.extend_from_slice(b",\"result\":");
    buf.extend_from_slice(result.as_bytes());
    buf.extend_from_slice(b"}\n");
    buf
}

/// JSON-RPC error codes this client sends or reads.
pub mod codes {
    pub(crate) const PARSE_ERROR: i64 = -32700;
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// A URL-mode elicitation must complete before the request can be retried (2025-11-25).
    pub(crate) const URL_ELICITATION_REQUIRED: i64 = -32042;
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    /// `resources/read` of a URI no server has.
    pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
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
    fn an_unreadable_answer_still_names_its_request() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let cases: Vec<(Vec<u8>, Option<&str>)> = vec![
            (
                format!(r#"{{"jsonrpc":"2.0","id":7,"result":{deep}}}"#).into_bytes(),
                Some("7"),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"t\":\"\xff\"}}".to_vec(),
                Some(r#""a""#),
            ),
            (
                br#"{"id": 12 , "result": {"x": [1, 2, }"#.to_vec(),
                Some("12"),
            ),
            (
                br#"{"result": {"s": "}\"{"}, "id": 3, "x": tru}"#.to_vec(),
                Some("3"),
            ),
            (
                br#"{"method": "x", "id": 4, "params": nope}"#.to_vec(),
                None,
            ),
            (br#"{"id": {"a": 1}, "result": nope}"#.to_vec(), None),
            (b"not json".to_vec(), None),
        ];
        for (line, want) in &cases {
            let got = salvage_response_id(line);
            assert_eq!(
                got.as_deref().map(RawValue::get),
                *want,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A deep result is no parse error at all: it stays raw text.
        assert!(matches!(parse(&cases[0].0), Incoming::Response { .. }));
        match parse(&cases[1].0) {
            Incoming::Invalid {
                answers: Some(id), ..
            } => assert_eq!(id.get(), r#""a""#),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn depth_is_read_without_recursing_and_deep_trees_build_off_the_callers_stack() {
        assert_eq!(depth(br#"{"a":[1,{"b":"[[[\"{"}]}"#), 3);
        assert_eq!(depth(b"5"), 0);
        let deep = format!("{}{}", "[".repeat(120), "]".repeat(120));
        assert_eq!(depth(deep.as_bytes()), 120);
        let built = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || tree(&deep).is_ok())
            .unwrap()
            .join()
            .expect("no overflow on a 64 KiB stack");
        assert!(built);
    }

    #[test]
    fn a_deep_error_keeps_its_code_and_message() {
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32000,"message":"boom","data":{deep}}}}}"#
        );
        match parse(line.as_bytes()) {
            Incoming::Response {
                outcome: Err(e), ..
            } => {
                assert_eq!(e["code"], -32000);
                let m = e["message"].as_str().unwrap();
                assert!(
                    m.starts_with("boom (the rest of the error object could not be read"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{deep}}}"#);
        match parse(line.as_bytes()) {
            Incoming::Request {
                params: Err(why), ..
            } => assert!(why.contains("recursion limit"), "{why}"),
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
