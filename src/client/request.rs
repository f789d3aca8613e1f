//! One request on the wire: its encoding for each era, its own timer, its cancel, and the
//! check of what came back.

use super::options::CallOptions;
use super::{cancel, EraState, Shared};
use crate::error::{Error, Result};
use crate::protocol::era::Era;
use crate::protocol::{era, Outgoing, RawJson};
use crate::session::outbound::{Failed, Request};
use crate::session::ProgressRoute;
use crate::transport::RequestShape;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// What a request carries. Tool calls, the hot path, are written straight into the message
/// buffer with the host's arguments as the raw text it gave.
pub(super) enum Body<'a> {
    Params(Option<Value>),
    ToolCall {
        name: &'a str,
        arguments: Option<&'a RawValue>,
        /// More members of `params`, as JSON text (`"inputResponses":{...},"requestState":"..."`
        /// of a multi-round retry, or a legacy `"task":{...}`); see `client/mrtr.rs`.
        extra: Option<&'a str>,
    },
}

/// How one request is sent; the public calls fill it from the host's options.
pub(super) struct Send<'a> {
    pub(super) method: &'a str,
    pub(super) body: Body<'a>,
    pub(super) timeout: Option<Duration>,
    /// May this request be cancelled with `notifications/cancelled`? (Never `initialize`.)
    pub(super) cancellable: bool,
    /// The caller resolves `input_required`/`task` results itself (`mrtr.rs`), so the
    /// request's own `resultType` check lets them through.
    pub(super) resolves: bool,
    pub(super) options: Option<&'a CallOptions>,
    /// A handshake's: its timer does not count the time the connection's credentials are being
    /// obtained (a login that waits on a person), and starts again, whole, after it.
    pub(super) pausable: bool,
}

impl Shared {
    /// Sends one request and waits for its answer, its own timer, or a cancel (see
    /// `session::outbound`); the client encodes it for the era and checks what came back.
    pub(super) async fn send_request(&self, send: Send<'_>) -> Result<RawJson> {
        self.check_open()?;
        let options = send.options;
        let cancels = cancel::Cancels {
            tag: options.and_then(|o| o.tag.as_deref()).map(cancel::register),
            own: options.and_then(|o| o.own_cancel.as_ref().map(|c| c.0.clone())),
        };
        // Cancelled before it entered (a cancel token fired while the call was queued): nothing
        // is sent.
        if cancels.is_fired() {
            return Err(Error::cancelled_by_host(send.method));
        }
        let (id, answer) = self.session.pending.register();
        let wants_progress = options.is_some_and(|o| o.progress);
        let progress = options.filter(|o| o.progress).map(|o| ProgressRoute {
            tag: o.tag.clone(),
            reset: o.reset_timeout_on_progress.then(|| Arc::new(Notify::new())),
        });
        let (message, modern, shape) = {
            let era = self.era.read();
            let modern = era.as_ref().and_then(|s| s.modern_meta.as_deref());
            let (message, shape) = match send.body {
                Body::Params(params) => (
                    self.encode_params(
                        id,
                        send.method,
                        params,
                        wants_progress,
                        era.as_ref(),
                        options.and_then(|o| o.relayed.as_deref()),
                    ),
                    None,
                ),
                Body::ToolCall {
                    name,
                    arguments,
                    extra,
                } => (
                    encode_tool_call(id, name, arguments, extra, wants_progress, modern),
                    // A tool call's name and version, for a transport that routes by them.
                    self.session
                        .driven()
                        .filter(|d| d.uses_request_shape())
                        .map(|_| RequestShape {
                            method: "tools/call",
                            name: name.to_string(),
                            // The version the message's `_meta` was stamped with.
                            version: match era.as_ref().map(|s| &s.era) {
                                Some(Era::Modern { version }) if modern.is_some() => {
                                    Some(version.clone())
                                }
                                _ => None,
                            },
                        }),
                ),
            };
            (message, modern.is_some(), shape)
        };
        // Started calls deferred by the host go out first, in the same write.
        let (message, deferred) = self.started.take_deferred(message);
        let outcome = self
            .session
            .request(Request {
                id,
                answer,
                method: send.method,
                message,
                shape,
                timeout: send.timeout,
                max_total: options.and_then(|o| o.max_total_timeout),
                cancellable: send.cancellable,
                cancels: &cancels,
                progress,
                pause: send.pausable.then_some(&*self.obtaining),
                caller: options.and_then(|o| o.caller.as_deref()),
            })
            .await;
        let result = match outcome {
            Ok(result) => result,
            Err(Failed {
                error,
                unsent: true,
            }) => {
                self.started.fail_deferred(self, deferred, &error);
                return Err(error);
            }
            Err(failed) => return Err(failed.error),
        };
        if modern && !send.resolves {
            check_result_type(send.method, result)
        } else {
            Ok(result)
        }
    }

    /// A request whose params the engine holds as a tree: the progress token and (modern era)
    /// the per-request `_meta` are merged into whatever `_meta` the caller gave — a relayed
    /// request's own entries instead of the connection's (see `CallOptions::relayed`).
    pub(super) fn encode_params(
        &self,
        id: u64,
        method: &str,
        mut params: Option<Value>,
        wants_progress: bool,
        era: Option<&EraState>,
        relayed: Option<&Map<String, Value>>,
    ) -> Vec<u8> {
        if wants_progress {
            let mut p = match params.take() {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            let meta = p.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("progressToken".into(), json!(id));
            }
            params = Some(Value::Object(p));
        }
        if let Some(EraState {
            era: Era::Modern { version },
            ..
        }) = era
        {
            if let Some(relayed) = relayed {
                let mut p = match params.take() {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if !meta.is_object() {
                    *meta = json!({});
                }
                if let Some(meta) = meta.as_object_mut() {
                    for (key, value) in relayed {
                        meta.insert(key.clone(), value.clone());
                    }
                    meta.insert(era::META_PROTOCOL_VERSION.into(), json!(version));
                }
                params = Some(Value::Object(p));
            } else {
                params = Some(era::stamp_modern_meta(
                    params,
                    version,
                    &self.options.modern_capabilities,
                    &self.options.client_info,
                ));
            }
            if let Some(level) = relayed
                .is_none()
                .then(|| self.host.log_level.read().clone())
                .flatten()
            {
                if let Some(meta) = params
                    .as_mut()
                    .and_then(|p| p.get_mut("_meta"))
                    .and_then(Value::as_object_mut)
                {
                    meta.entry(era::META_LOG_LEVEL)
                        .or_insert_with(|| json!(level));
                }
            }
        }
        Outgoing::request(id, method, 0)
            .params(params.as_ref())
            .finish()
    }
}

/// Writes a `tools/call` request straight into its buffer: the host's arguments are copied as
/// the text it gave, and the modern `_meta` is the fragment serialized at connect.
pub(super) fn encode_tool_call(
    id: u64,
    name: &str,
    arguments: Option<&RawValue>,
    extra: Option<&str>,
    progress: bool,
    modern_meta: Option<&str>,
) -> Vec<u8> {
    let args_len = arguments.map_or(0, |a| a.get().len()) + extra.map_or(0, str::len);
    let mut out = Outgoing::request(
        id,
        "tools/call",
        args_len + name.len() + modern_meta.map_or(0, str::len) + 48,
    )
    .raw(b",\"params\":{");
    if modern_meta.is_some() || progress {
        out = out.raw(b"\"_meta\":{");
        if let Some(meta) = modern_meta {
            out = out.raw(meta.as_bytes());
            if progress {
                out = out.raw(b",");
            }
        }
        if progress {
            out = out.raw(b"\"progressToken\":").number(id);
        }
        out = out.raw(b"},");
    }
    out = out.raw(b"\"name\":").string(name);
    if let Some(args) = arguments {
        out = out.raw(b",\"arguments\":").raw(args.get().as_bytes());
    }
    if let Some(extra) = extra {
        out = out.raw(b",").raw(extra.as_bytes());
    }
    out.raw(b"}").finish()
}

/// The modern era's `resultType` of a request whose caller does not resolve it (see
/// `client/mrtr.rs`, which handles `input_required` and `task` for the host's calls): absent or
/// "complete" is a final result; anything else is an error that says why.
pub(super) fn check_result_type(method: &str, result: RawJson) -> Result<RawJson> {
    match era::result_type(result.as_str()).as_deref() {
        None | Some("complete") => Ok(result),
        Some("input_required") if era::allows_input_required(method) => Err(Error::not_implemented(format!(
            "the server answered {method} with an InputRequiredResult (multi round-trip request) on a path that does not resolve it; use the client's request or call_tool"
        ))),
        Some("input_required") => Err(Error::protocol(format!(
            "the server answered {method} with an InputRequiredResult, which the protocol allows only on tools/call, prompts/get and resources/read"
        ))),
        Some("task") => Err(Error::protocol(format!(
            "the server answered {method} with a task, which only tools/call may become"
        ))),
        Some(other) => Err(Error::protocol(format!("{method}: unknown resultType {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn tool_call_encoding_is_valid_json_in_every_era() {
        let args: &RawValue =
            serde_json::from_str(r#" {"message": "a\nb", "n": 123456789012345678901234567890} "#)
                .unwrap();
        let meta = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"x"}"#;
        for (progress, modern) in [
            (false, None),
            (true, None),
            (false, Some(meta)),
            (true, Some(meta)),
        ] {
            let line = encode_tool_call(7, "na\"me", Some(args), None, progress, modern);
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
            let text = std::str::from_utf8(&line).unwrap();
            let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(v["id"], 7);
            assert_eq!(v["params"]["name"], "na\"me");
            assert!(
                text.contains("123456789012345678901234567890"),
                "arguments copied verbatim: {text}"
            );
            assert_eq!(
                v["params"]["_meta"]["progressToken"].as_u64(),
                progress.then_some(7)
            );
            assert_eq!(
                v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str(),
                modern.map(|_| "2026-07-28")
            );
        }
        let v: Value =
            serde_json::from_slice(&encode_tool_call(1, "t", None, None, false, None)).unwrap();
        assert_eq!(v["params"], json!({"name": "t"}));
        let extra = r#""inputResponses":{"k":{"action":"accept"}},"requestState":"s""#;
        let v: Value = serde_json::from_slice(&encode_tool_call(
            2,
            "t",
            Some(args),
            Some(extra),
            false,
            None,
        ))
        .unwrap();
        assert_eq!(v["params"]["requestState"], "s");
        assert_eq!(v["params"]["inputResponses"]["k"]["action"], "accept");
    }

    #[test]
    fn result_type_is_checked_without_parsing_plain_results() {
        let ok = RawJson::from_value(&json!({"content": []}));
        assert!(check_result_type("tools/call", ok).is_ok());
        let done = RawJson::from_value(&json!({"resultType": "complete"}));
        assert!(check_result_type("tools/call", done).is_ok());
        let mrtr = RawJson::from_value(&json!({"resultType": "input_required"}));
        assert_eq!(
            check_result_type("tools/call", mrtr.clone())
                .unwrap_err()
                .kind,
            ErrorKind::NotImplemented
        );
        assert_eq!(
            check_result_type("tools/list", mrtr).unwrap_err().kind,
            ErrorKind::Protocol
        );
        let odd = RawJson::from_value(&json!({"resultType": "banana"}));
        assert_eq!(
            check_result_type("tools/call", odd).unwrap_err().kind,
            ErrorKind::Protocol
        );
        // The words inside content are not a resultType.
        let text =
            RawJson::from_value(&json!({"content": [{"type": "text", "text": "\"resultType\""}]}));
        assert!(check_result_type("tools/call", text).is_ok());
    }
}
