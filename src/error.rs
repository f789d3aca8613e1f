//! The one error type of the engine. Every failure a host can see has a stable `kind`
//! (snake_case, part of the public contract) and a human message; errors that came from
//! the server as JSON-RPC errors also carry its `code` and `data`.

use serde_json::{json, Map, Value};
use std::fmt;

/// The stable error kinds. Their snake_case names are the `kind` field of the error
/// object in the C ABI and the exception classes in the bindings; the C status numbers
/// are fixed in `ffi::mcplug_status`; what each means is [`ErrorKind::meaning`], the one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidArgument,
    Timeout,
    Cancelled,
    Closed,
    Transport,
    Protocol,
    Rpc,
    NeedsAuth,
    Denied,
    Config,
    Panic,
    NotFound,
    NotImplemented,
    InvalidResult,
}

/// Every kind, in the order of their C status numbers (private: cbindgen exports public
/// constants into the header).
const ALL_KINDS: [ErrorKind; 14] = [
    ErrorKind::InvalidArgument,
    ErrorKind::Timeout,
    ErrorKind::Cancelled,
    ErrorKind::Closed,
    ErrorKind::Transport,
    ErrorKind::Protocol,
    ErrorKind::Rpc,
    ErrorKind::NeedsAuth,
    ErrorKind::Denied,
    ErrorKind::Config,
    ErrorKind::Panic,
    ErrorKind::NotFound,
    ErrorKind::NotImplemented,
    ErrorKind::InvalidResult,
];

/// The one table of what each kind means (its C status number is its place in [`ALL_KINDS`]):
/// the header's comments, `mcplug_error_kinds` and the bindings' tables come from here.
impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl ErrorKind {
    /// What an error of this kind means, for every binding's documentation.
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "the caller passed something unusable (NULL, invalid UTF-8, malformed JSON, an unknown or bad option); the message names it",
            ErrorKind::Timeout => "a local timer ran out (connect, request, tool call, or a wait for events)",
            ErrorKind::Cancelled => "the host cancelled the call (its tag, its cancel token, its started call's cancel)",
            ErrorKind::Closed => "the connection is closed: the server exited, or the handle was closed — or this process is a child forked after mcplug started in its parent, where every call returns it (`data`: `{\"reason\": \"forked\", \"parent_pid\"}`) and freeing a handle does nothing",
            ErrorKind::Transport => "the transport failed: the server could not start, a pipe or socket broke, an HTTP error status (then `data.http_status` is its number), a message too large",
            ErrorKind::Protocol => "the server broke the protocol (handshake, version, a malformed message or result)",
            ErrorKind::Rpc => "the server answered with a JSON-RPC error; `code`, `message` and `data` are its own",
            ErrorKind::NeedsAuth => "the server needs authorization (OAuth) first; `data` says what it asked for",
            ErrorKind::Denied => "refused, though everything worked: the host answered the server's input request with an error, the server left a subscription out of its acknowledgement, or a limit of the library (a skill over 512 files or 16 MiB)",
            ErrorKind::Config => "a configuration could not be read, merged or written; the message names the file and field",
            ErrorKind::Panic => "a bug in mcplug was caught at the boundary; the handle may still be used or freed",
            ErrorKind::NotFound => "nothing matched: no call carries that tag, no such server, tool, task or token",
            ErrorKind::NotImplemented => "a feature this version of mcplug does not implement",
            ErrorKind::InvalidResult => "the server's result breaks what it declared: a tool's structuredContent does not match its outputSchema; `data` has `tool`, `errors` and the untouched `result`",
        }
    }

    /// Every kind with its C status number and meaning, as JSON: `[{"kind", "status", "meaning"}]`.
    pub fn table() -> Value {
        Value::Array(
            ALL_KINDS
                .iter()
                .enumerate()
                .map(|(i, k)| json!({"kind": k.as_str(), "status": i + 1, "meaning": k.meaning()}))
                .collect(),
        )
    }

    /// The kind named by its snake_case name (an error object's `kind`).
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        ALL_KINDS.into_iter().find(|k| k.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Closed => "closed",
            ErrorKind::Transport => "transport",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Rpc => "rpc",
            ErrorKind::NeedsAuth => "needs_auth",
            ErrorKind::Denied => "denied",
            ErrorKind::Config => "config",
            ErrorKind::Panic => "panic",
            ErrorKind::NotFound => "not_found",
            ErrorKind::NotImplemented => "not_implemented",
            ErrorKind::InvalidResult => "invalid_result",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// JSON-RPC error code, for `Rpc` errors (and protocol errors that carry one).
    pub code: Option<i64>,
    /// JSON-RPC error data, passed through untouched.
    pub data: Option<Value>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error; a URL in `message` has its secrets masked (see `redact`).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: redacted(message.into()),
            code: None,
            data: None,
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }
    pub fn closed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Closed, message)
    }
    /// `what` (a method, "connect", "the call") was cancelled by the host: its tag, its cancel
    /// token, or its handle closing.
    pub fn cancelled_by_host(what: &str) -> Self {
        Self::new(
            ErrorKind::Cancelled,
            format!("{what} was cancelled by the host"),
        )
    }
    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transport, message)
    }
    pub fn protocol(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Protocol, message)
    }
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotImplemented, message)
    }

    /// The same error with `data` (a `needs_auth` error's details, say).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The HTTP status a server answered with, for a `transport` error that is such an answer
    /// (`data.http_status`): the server is there and spoke; its connection is not broken.
    pub fn http_status(&self) -> Option<u16> {
        if self.kind != ErrorKind::Transport {
            return None;
        }
        let status = self.data.as_ref()?.get("http_status")?.as_u64()?;
        u16::try_from(status).ok()
    }

    /// Whether the connection itself failed (reset, refused, timed out at the socket, a broken
    /// pipe, a closed stream, the process gone), as opposed to an answer the server gave (an HTTP
    /// error status, a JSON-RPC error, a tool's `isError`): what Claude Code counts toward its
    /// reconnect.
    pub fn is_connection_failure(&self) -> bool {
        match self.kind {
            ErrorKind::Closed => true,
            ErrorKind::Transport => self.http_status().is_none(),
            _ => false,
        }
    }

    /// The same error with the JSON-RPC `code` a served client gets for it.
    pub fn with_code(mut self, code: i64) -> Self {
        self.code = Some(code);
        self
    }

    /// A JSON-RPC error object from the server, kept whole: `code`, `message`, `data`.
    pub fn from_rpc(error: &Value) -> Self {
        let code = error.get("code").and_then(Value::as_i64);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(the server's error had no message)")
            .to_string();
        Error {
            kind: ErrorKind::Rpc,
            message: redacted(message),
            code,
            data: error.get("data").cloned(),
        }
    }

    /// The error object of the C ABI: `{"error": {"kind", "message", "code"?, "data"?}}`.
    pub fn to_json(&self) -> Value {
        let mut e = Map::new();
        e.insert("kind".into(), json!(self.kind.as_str()));
        // Again: a message may have been extended since the error was made.
        e.insert("message".into(), json!(crate::redact::urls(&self.message)));
        if let Some(code) = self.code {
            e.insert("code".into(), json!(code));
        }
        if let Some(data) = &self.data {
            e.insert("data".into(), data.clone());
        }
        json!({ "error": e })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            self.kind.as_str(),
            crate::redact::urls(&self.message)
        )?;
        if let Some(code) = self.code {
            write!(f, " (code {code})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

fn redacted(message: String) -> String {
    match crate::redact::urls(&message) {
        std::borrow::Cow::Owned(r) => r,
        std::borrow::Cow::Borrowed(_) => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_status_is_an_answer_not_a_broken_connection() {
        let answered = Error::transport("HTTP 503").with_data(json!({"http_status": 503}));
        assert_eq!(answered.http_status(), Some(503));
        assert!(!answered.is_connection_failure());
        assert!(Error::transport("connection reset by peer").is_connection_failure());
        assert!(Error::closed("the server exited").is_connection_failure());
        for answer in [
            Error::from_rpc(&json!({"code": -32603, "message": "boom"})),
            Error::timeout("no answer in 60 s"),
            Error::new(ErrorKind::NeedsAuth, "401").with_data(json!({"http_status": 401})),
        ] {
            assert!(!answer.is_connection_failure(), "{answer}");
            assert_eq!(answer.http_status(), None);
        }
    }

    #[test]
    fn rpc_error_keeps_code_and_data() {
        let e = Error::from_rpc(&json!({"code": -32602, "message": "bad", "data": {"x": 1}}));
        assert_eq!(e.kind, ErrorKind::Rpc);
        assert_eq!(
            e.to_json(),
            json!({"error": {"kind": "rpc", "message": "bad", "code": -32602, "data": {"x": 1}}})
        );
    }

    #[test]
    fn every_kind_is_found_by_its_name() {
        for k in ALL_KINDS {
            assert_eq!(ErrorKind::from_name(k.as_str()), Some(k));
        }
        assert_eq!(ErrorKind::from_name("nonsense"), None);
    }

    #[test]
    fn local_error_has_no_code() {
        let e = Error::timeout("request timed out after 5 ms");
        assert_eq!(
            e.to_json(),
            json!({"error": {"kind": "timeout", "message": "request timed out after 5 ms"}})
        );
    }
}
