//! One request on the wire: its encoding for each era, its own timer, its cancel, and the
//! check of what came back.

use super::options::CallOptions;
use super::{cancel, EraState, ProgressRoute, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol;
use crate::protocol::era::Era;
use crate::protocol::{era, Outgoing, RawJson};
use crate::transport::{Drive, Driven, DrivenRequest, RequestShape};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a caller driving the transport blocks at a time before it looks at its timer and
/// its cancel again.
const DRIVE_SLICE: Duration = Duration::from_millis(20);

/// Leaves the transport's set of waiting callers however the wait ends.
pub(super) struct LeaveCall<'a>(pub(super) &'a dyn Driven, pub(super) bool);

impl Drop for LeaveCall<'_> {
    fn drop(&mut self) {
        self.0.leave_call(self.1);
    }
}

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
    /// Sends one request and waits for its answer, its own timer, or a cancel.
    pub(super) async fn send_request(&self, send: Send<'_>) -> Result<RawJson> {
        self.check_open()?;
        let options = send.options;
        let guard = cancel::Cancels {
            tag: options.and_then(|o| o.tag.as_deref()).map(cancel::register),
            own: options.and_then(|o| o.own_cancel.as_ref().map(|c| c.0.clone())),
        };
        // Cancelled before it entered (a cancel token fired while the call was queued): nothing
        // is sent.
        if guard.is_fired() {
            return Err(Error::cancelled_by_host(send.method));
        }
        let (id, mut answer) = self.pending.register();
        if self.closed.load(Ordering::SeqCst) {
            self.pending.forget(id);
            self.check_open()?;
        }

        let wants_progress = options.is_some_and(|o| o.progress);
        let reset = options
            .filter(|o| o.reset_timeout_on_progress && o.progress)
            .map(|_| Arc::new(Notify::new()));
        if wants_progress {
            self.progress.lock().insert(
                id.to_string(),
                ProgressRoute {
                    tag: options.and_then(|o| o.tag.clone()),
                    reset: reset.clone(),
                },
            );
        }
        // A tool call's name, for a transport that drives it (`RequestShape`).
        let (message, modern, tool_call) = {
            let era = self.era.read();
            let modern = era.as_ref().and_then(|s| s.modern_meta.as_deref());
            let (message, tool_call) = match send.body {
                Body::Params(params) => (
                    self.encode_params(id, send.method, params, wants_progress, era.as_ref()),
                    None,
                ),
                Body::ToolCall {
                    name,
                    arguments,
                    extra,
                } => (
                    encode_tool_call(id, name, arguments, extra, wants_progress, modern),
                    Some(name),
                ),
            };
            (message, modern.is_some(), tool_call)
        };

        let outcome = async {
            let start = Instant::now();
            let mut deadline = send.timeout.map(|t| start + t);
            // A pausable timer's start: moved past each obtaining of credentials.
            let mut timer_start = start;
            let pausable = send.timeout.filter(|_| send.pausable);
            let hard_deadline = options.and_then(|o| o.max_total_timeout).map(|m| start + m);
            if let (Some(d), Some(h)) = (deadline, hard_deadline) {
                deadline = Some(d.min(h));
            }
            // The send counts against the same timer and cancel: a server that stopped reading
            // must not hold a caller past its timeout.
            // Started calls deferred by the host go out first, in the same write.
            let (message, deferred) = self.take_deferred(message);
            tracing::debug!(target: "mcplug::client", server = self.name.as_deref().unwrap_or(""), id, method = send.method, "request");
            crate::log::sent(self.name.as_deref(), &message);
            // On a host thread, read the transport ourselves while we wait (see
            // transport/stdio_read.rs, transport/http/direct.rs): then no runtime thread has to
            // wake us for the answer.
            let transport = self.transport()?.clone();
            let driven = self.driven();
            let can_drive = reset.is_none() && crate::runtime::on_host_thread() && driven.is_some();
            // A message that fits the pipe goes out at once from this thread, with no send
            // future, timer or cancel to race against it.
            let sent = if driven.is_some_and(|d| d.send_now(&message)) {
                Ok(())
            } else {
                let mut sending = if let Some(d) = driven.filter(|_| can_drive) {
                    let shape = tool_call.filter(|_| d.uses_request_shape()).map(|name| RequestShape {
                        method: "tools/call",
                        name: name.to_string(),
                        // The version the message's `_meta` was stamped with.
                        version: match self.era.read().as_ref().map(|s| &s.era) {
                            Some(Era::Modern { version }) if modern => Some(version.clone()),
                            _ => None,
                        },
                    });
                    d.clone().send_driven(message, DrivenRequest { id, shape })
                } else {
                    transport.clone().send(message)
                };
                let sent = tokio::select! {
                    r = &mut sending => Some(r),
                    _ = sleep_until_opt(deadline) => None,
                    _ = guard.fired() => None,
                };
                match sent {
                    Some(r) => r,
                    None => {
                        self.pending.forget(id);
                        // Let the half-written message finish (never leave a partial line), then tell
                        // the server to drop it.
                        let transport = self.transport()?.clone();
                        let cancellable = send.cancellable;
                        crate::runtime::spawn(async move {
                            if sending.await.is_ok() && cancellable {
                                let msg = protocol::encode_notification(
                                    "notifications/cancelled",
                                    Some(&json!({"requestId": id, "reason": "timed out or cancelled while sending"})),
                                );
                                crate::log::sent(None, &msg);
                                let _ = transport.send(msg).await;
                            }
                        });
                        return Err(if guard.is_fired() {
                            Error::cancelled_by_host(send.method)
                        } else {
                            Error::timeout(format!(
                                "{} timed out after {} ms while still being sent (the server is not reading its input)",
                                send.method,
                                send.timeout.map(millis).unwrap_or_default()
                            ))
                        });
                    }
                }
            };
            if let Err(e) = sent {
                self.fail_deferred(deferred, &e);
                self.pending.forget(id);
                if e.kind == ErrorKind::Closed {
                    // The pipe broke because the server is gone: its exit status and last
                    // stderr lines, which the transport is gathering, say more than EPIPE.
                    return Err(self.close_reason_soon(e).await);
                }
                return Err(self.check_open().err().unwrap_or(e));
            }
            if let Some(d) = driven {
                d.enter_call(can_drive);
            }
            let _leave = driven.map(|d| LeaveCall(&**d, can_drive));
            if let Some(d) = driven.filter(|_| can_drive) {
                // A cancel from another thread ends this thread's blocked read at once.
                // (Nothing to do, and nothing to allocate, for a call that nothing can cancel.)
                let _interrupt = (guard.any() && d.drive_interruptible()).then(|| {
                    let t = d.clone();
                    guard.interrupt_while(Arc::new(move || t.interrupt_drive()))
                });
                loop {
                    match answer.try_recv() {
                        Ok(r) => return r,
                        Err(oneshot::error::TryRecvError::Closed) => return Err(self.answer_lost()),
                        Err(oneshot::error::TryRecvError::Empty) => {}
                    }
                    let now = Instant::now();
                    if deadline.is_some_and(|d| now >= d) {
                        if let Some(later) = self.paused_deadline(send.method, pausable, &mut timer_start, now) {
                            deadline = Some(later);
                            continue;
                        }
                        match self.timed_out(id, send.method, send.timeout, send.cancellable).await {
                            Some(e) => return Err(e),
                            None => deadline = None,
                        }
                    }
                    if guard.is_fired() {
                        if let Some(e) = self.cancelled_by_host(id, send.method, send.cancellable).await {
                            return Err(e);
                        }
                    }
                    let slice = deadline.map_or(DRIVE_SLICE, |d| d.saturating_duration_since(now).min(DRIVE_SLICE));
                    match d.drive(slice, None) {
                        // Let whatever encloses this call (a connect's own timer and cancel)
                        // look at its own futures between turns.
                        Drive::Turned => tokio::task::yield_now().await,
                        Drive::Busy => {
                            let baton = d.baton().expect("a drivable transport has a baton");
                            tokio::select! {
                                biased;
                                r = &mut answer => return r.unwrap_or_else(|_| Err(self.answer_lost())),
                                _ = baton.notified() => {}
                                // Only a request with a timer needs to wake for it; the driver
                                // hands over the baton whenever it leaves.
                                _ = sleep_until_opt(deadline) => {}
                                _ = guard.fired() => {}
                            }
                        }
                        Drive::Finished => break,
                    }
                }
            }
            loop {
                tokio::select! {
                    biased;
                    r = &mut answer => return r.unwrap_or_else(|_| Err(self.answer_lost())),
                    _ = sleep_until_opt(deadline) => {
                        if let Some(later) = self.paused_deadline(send.method, pausable, &mut timer_start, Instant::now()) {
                            deadline = Some(later);
                            continue;
                        }
                        match self.timed_out(id, send.method, send.timeout, send.cancellable).await {
                            Some(e) => return Err(e),
                            // The answer won the race; take it on the next turn.
                            None => deadline = None,
                        }
                    }
                    _ = guard.fired() => {
                        if let Some(e) = self.cancelled_by_host(id, send.method, send.cancellable).await {
                            return Err(e);
                        }
                    }
                    _ = notified_opt(reset.as_deref()) => {
                        if let Some(t) = send.timeout {
                            let mut d = Instant::now() + t;
                            if let Some(h) = hard_deadline { d = d.min(h); }
                            deadline = Some(d);
                        }
                    }
                }
            }
        }
        .await;
        if wants_progress {
            self.progress.lock().remove(&id.to_string());
        }
        let result = outcome?;
        if modern && !send.resolves {
            check_result_type(send.method, result)
        } else {
            Ok(result)
        }
    }

    /// A pausable request's timer ran out at `now`: where it ends instead when credentials were
    /// being obtained since it started (see `Obtaining::extended`), or `None`: it has run out.
    fn paused_deadline(
        &self,
        method: &str,
        pausable: Option<Duration>,
        timer_start: &mut Instant,
        now: Instant,
    ) -> Option<Instant> {
        let timeout = pausable?;
        let later = self.obtaining.extended(*timer_start, timeout, now)?;
        *timer_start = later - timeout;
        tracing::debug!(target: "mcplug::client", server = self.name.as_deref().unwrap_or(""),
            method, "the timer starts again: credentials were being obtained");
        Some(later)
    }

    /// Why a request's answer channel closed without an answer: the connection's end.
    fn answer_lost(&self) -> Error {
        self.check_open()
            .err()
            .unwrap_or_else(|| Error::closed("the connection is closed"))
    }

    /// The request's timer ran out: forget it and tell the server. `None` when its answer won
    /// the race (it is then in the channel).
    async fn timed_out(
        &self,
        id: u64,
        method: &str,
        timeout: Option<Duration>,
        cancellable: bool,
    ) -> Option<Error> {
        if !self.pending.forget(id) {
            return None;
        }
        let limit = timeout.map(millis).unwrap_or_default();
        if cancellable {
            self.send_cancelled(id, "timeout").await;
        }
        Some(Error::timeout(format!(
            "{method} timed out after {limit} ms{}",
            if cancellable {
                " (the server was sent notifications/cancelled)"
            } else {
                ""
            }
        )))
    }

    /// The host cancelled by tag: forget the request and tell the server. `None` when its
    /// answer won the race.
    async fn cancelled_by_host(&self, id: u64, method: &str, cancellable: bool) -> Option<Error> {
        if !self.pending.forget(id) {
            return None;
        }
        if cancellable {
            self.send_cancelled(id, "cancelled by the host").await;
        }
        Some(Error::cancelled_by_host(method))
    }

    /// A request whose params the engine holds as a tree: the progress token and (modern era)
    /// the per-request `_meta` are merged into whatever `_meta` the caller gave.
    pub(super) fn encode_params(
        &self,
        id: u64,
        method: &str,
        mut params: Option<Value>,
        wants_progress: bool,
        era: Option<&EraState>,
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
            params = Some(era::stamp_modern_meta(
                params,
                version,
                &self.options.modern_capabilities,
                &self.options.client_info,
            ));
            if let Some(level) = &*self.host.log_level.read() {
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

    pub(super) async fn send_cancelled(&self, id: u64, reason: &str) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let msg = protocol::encode_notification(
            "notifications/cancelled",
            Some(&json!({"requestId": id, "reason": reason})),
        );
        crate::log::sent(self.name.as_deref(), &msg);
        if let Ok(t) = self.transport() {
            let _ = t.clone().send(msg).await;
        }
    }
}

fn millis(d: Duration) -> u128 {
    d.as_millis()
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
    match super::mrtr::result_type(result.as_str()).as_deref() {
        None | Some("complete") => Ok(result),
        Some("input_required") if super::mrtr::allows_input_required(method) => Err(Error::not_implemented(format!(
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

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn notified_opt(n: Option<&Notify>) {
    match n {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
