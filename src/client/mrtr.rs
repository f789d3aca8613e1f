//! A host's call that may take more than one round trip: multi round-trip requests (2026-07-28,
//! `InputRequiredResult`), the URL-elicitation-required error (-32042) of 2025-11-25, and tool
//! calls that become tasks (`tasks.rs`).
//!
//! Every input the server needs reaches the host through the one interface legacy server
//! requests use: a `request` event with an id, answered with `respond`, under the host timer.
//! The call then goes out again with a new JSON-RPC id, carrying the answers and the server's
//! `requestState` byte for byte. Rounds are bounded (`max_input_rounds`); the host's cancel (by
//! tag) reaches every wait.

use super::options::CallOptions;
use super::request::{Body, Send};
use super::{cancel, cancels_fired, tasks, HostAnswer, InputRounds, Shared};
use crate::client::options::TaskMode;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::era::{self, Era};
use crate::protocol::{codes, RawJson};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What a host's call sends: params as a tree, or a tool call with the host's raw arguments.
pub(super) enum Call<'a> {
    Params(Option<Value>),
    Tool {
        name: &'a str,
        arguments: Option<&'a RawValue>,
    },
}

/// The parts of an `InputRequiredResult` the client acts on; `requestState` stays raw text so
/// that it is echoed exactly as the server wrote it.
#[derive(serde::Deserialize)]
struct InputRequired<'a> {
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<Map<String, Value>>,
    #[serde(rename = "requestState", borrow, default)]
    request_state: Option<&'a RawValue>,
}

/// The members a retry adds to the original params.
#[derive(Default)]
struct Extra {
    input_responses: Option<Map<String, Value>>,
    /// The server's `requestState`, as the JSON text it sent.
    request_state: Option<String>,
    /// A legacy task augmentation, `{"ttl": N}` or `{}`.
    task: Option<Value>,
}

impl Extra {
    fn is_empty(&self) -> bool {
        self.input_responses.is_none() && self.request_state.is_none() && self.task.is_none()
    }

    /// `"inputResponses":{...},"requestState":"...","task":{...}` for a tool call's buffer.
    fn fragment(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if let Some(r) = &self.input_responses {
            let answers = serde_json::to_string(r).expect("a JSON map always serializes");
            parts.push(format!("\"inputResponses\":{answers}"));
        }
        if let Some(s) = &self.request_state {
            parts.push(format!("\"requestState\":{s}"));
        }
        if let Some(t) = &self.task {
            parts.push(format!("\"task\":{t}"));
        }
        Some(parts.join(","))
    }

    /// The original params with these members added (a copy: the next round starts again from
    /// the original).
    fn apply(&self, params: &Option<Value>) -> Result<Option<Value>> {
        if self.is_empty() {
            return Ok(params.clone());
        }
        let mut p = match params {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        if let Some(r) = &self.input_responses {
            p.insert("inputResponses".into(), Value::Object(r.clone()));
        }
        if let Some(s) = &self.request_state {
            let state = serde_json::from_str(s).map_err(|e| {
                Error::protocol(format!("the server's requestState is not valid JSON: {e}"))
            })?;
            p.insert("requestState".into(), state);
        }
        if let Some(t) = &self.task {
            p.insert("task".into(), t.clone());
        }
        Ok(Some(Value::Object(p)))
    }
}

/// What a call of a method may go through on this connection.
struct CallKind {
    modern: bool,
    tool_call: bool,
    /// `InputRequiredResult` rounds (2026-07-28, on the methods that allow them).
    input_rounds: bool,
    /// The -32042 URL-elicitation retry (the host serves URL elicitations).
    url_retry: bool,
}

impl InputRounds {
    fn call_kind(&self, conn: &Shared, method: &str) -> CallKind {
        let modern = matches!(
            conn.era.read().as_ref().map(|s| &s.era),
            Some(Era::Modern { .. })
        );
        CallKind {
            modern,
            tool_call: method == "tools/call",
            input_rounds: modern && era::allows_input_required(method),
            url_retry: conn.host.url_elicitation,
        }
    }

    /// One host call (`request`, `call_tool`): sent, and resolved through as many rounds as the
    /// server needs. `timeout` is each request's own limit; a task's whole wait is bounded by it
    /// from the first request on. `first`: the first round's outcome, when it already came (a
    /// started call resumed, see `started.rs`); it was sent without a legacy task augmentation.
    pub(super) async fn call(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        call: Call<'_>,
        timeout: Option<Duration>,
        options: &CallOptions,
        mut first: Option<Result<RawJson>>,
    ) -> Result<RawJson> {
        let CallKind {
            modern,
            tool_call,
            input_rounds,
            url_retry,
        } = self.call_kind(conn, method);
        // A relayed request: its client resolves what comes back.
        let relayed = options.relayed.is_some();
        let (input_rounds, url_retry) = (input_rounds && !relayed, url_retry && !relayed);
        // A call whose params ask for a task already (a host's own `request`, a served client's
        // relayed call): its task is the caller's, its CreateTaskResult returned as it is.
        let asked_task = matches!(&call, Call::Params(Some(p)) if p.get("task").is_some());
        let task = if tool_call && !modern && first.is_none() && !relayed && !asked_task {
            let name = match &call {
                Call::Tool { name, .. } => Some(*name),
                Call::Params(p) => p
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str),
            };
            conn.host.task_augmentation(conn, name, options).await?
        } else {
            None
        };
        let tasks_possible =
            tool_call && !relayed && ((modern && conn.options.tasks) || task.is_some());

        // The common case: one request, nothing to resolve (no copy of anything).
        if !input_rounds && !url_retry && !tasks_possible {
            if let Some(outcome) = first {
                return outcome;
            }
            let body = match call {
                Call::Params(params) => Body::Params(params),
                Call::Tool { name, arguments } => Body::ToolCall {
                    name,
                    arguments,
                    extra: None,
                },
            };
            return conn
                .send_request(Send {
                    method,
                    body,
                    timeout,
                    cancellable: true,
                    resolves: relayed,
                    options: Some(options),
                    pausable: false,
                })
                .await;
        }

        let deadline = timeout.map(|t| Instant::now() + t);
        // The first round, sent from this small future: most calls end here. The rounds that
        // follow (input, tasks, URL elicitations) run in a boxed future of their own, so that
        // the common call does not carry (and move around) their state.
        if first.is_none() && task.is_none() {
            let body = match &call {
                Call::Params(params) => Body::Params(params.clone()),
                Call::Tool { name, arguments } => Body::ToolCall {
                    name,
                    arguments: *arguments,
                    extra: None,
                },
            };
            let outcome = conn
                .send_request(Send {
                    method,
                    body,
                    timeout,
                    cancellable: true,
                    resolves: modern,
                    options: Some(options),
                    pausable: false,
                })
                .await;
            let done = match &outcome {
                Ok(r) => {
                    !modern
                        || matches!(
                            era::result_type(r.as_str()).as_deref(),
                            None | Some("complete")
                        )
                }
                Err(e) => {
                    let url_elicitation = url_retry
                        && e.kind == ErrorKind::Rpc
                        && e.code == Some(codes::URL_ELICITATION_REQUIRED);
                    !(url_elicitation || conn.tools.retries_on_headers(conn, method, e))
                }
            };
            if done {
                return outcome;
            }
            first = Some(outcome);
        }
        // -32020 (SEP-2243): the headers did not match the tool's schema as the server has it
        // (or the tool was never listed here): list the tools again and send the call once more.
        if let Some(Err(e)) = &first {
            if conn.tools.retries_on_headers(conn, method, e) {
                if let Err(relist) = Box::pin(conn.tools.relist_for_headers(conn, options)).await {
                    tracing::debug!(error = %relist, "listing the tools again after -32020 failed");
                    return first.expect("checked above");
                }
                first = None;
            }
        }
        Box::pin(self.call_rounds(conn, method, call, timeout, options, first, task, deadline))
            .await
    }

    /// The rounds of a call after its first answer asked for more (or a legacy task call).
    #[allow(clippy::too_many_arguments)]
    async fn call_rounds(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        call: Call<'_>,
        timeout: Option<Duration>,
        options: &CallOptions,
        mut first: Option<Result<RawJson>>,
        task: Option<Value>,
        deadline: Option<Instant>,
    ) -> Result<RawJson> {
        let CallKind {
            modern,
            tool_call,
            input_rounds,
            url_retry,
        } = self.call_kind(conn, method);
        let guard = Some(cancel::Cancels {
            tag: options.tag.as_deref().map(cancel::register),
            own: options.own_cancel.as_ref().map(|c| c.0.clone()),
        });
        let mut extra = Extra {
            task,
            ..Default::default()
        };
        let legacy_task = extra.task.is_some();
        let mut rounds = 0usize;
        let mut state_only_wait = Duration::from_millis(50);
        loop {
            let fragment;
            let body = match &call {
                Call::Params(params) => Body::Params(extra.apply(params)?),
                Call::Tool { name, arguments } => {
                    fragment = extra.fragment();
                    Body::ToolCall {
                        name,
                        arguments: *arguments,
                        extra: fragment.as_deref(),
                    }
                }
            };
            let outcome = match first.take() {
                Some(outcome) => outcome,
                None => {
                    conn.send_request(Send {
                        method,
                        body,
                        timeout,
                        cancellable: true,
                        resolves: modern,
                        options: Some(options),
                        pausable: false,
                    })
                    .await
                }
            };
            let result = match outcome {
                Ok(r) => r,
                Err(e)
                    if url_retry
                        && e.kind == ErrorKind::Rpc
                        && e.code == Some(codes::URL_ELICITATION_REQUIRED) =>
                {
                    rounds += 1;
                    self.check_rounds(conn, method, rounds)?;
                    // Boxed: the rare rounds stay out of the common call's future.
                    Box::pin(self.complete_url_elicitations(conn, method, e, guard.as_ref()))
                        .await?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if legacy_task {
                return match tasks::legacy_created_task(&result) {
                    Some(_) if options.task == TaskMode::Handle => Ok(result),
                    Some(created) => {
                        Box::pin(conn.host.await_task(
                            conn,
                            method,
                            created,
                            false,
                            deadline,
                            options,
                            guard.as_ref(),
                        ))
                        .await
                    }
                    // The server ran it as a plain call after all.
                    None => Ok(result),
                };
            }
            if !modern {
                return Ok(result);
            }
            match era::result_type(result.as_str()).as_deref() {
                None | Some("complete") => return Ok(result),
                Some("input_required") if input_rounds => {
                    rounds += 1;
                    self.check_rounds(conn, method, rounds)?;
                    let asked: InputRequired = serde_json::from_str(result.as_str())
                        .map_err(|e| {
                            Error::protocol(format!(
                                "{method}: a malformed InputRequiredResult ({e})"
                            ))
                        })?;
                    if let Some(state) = asked.request_state {
                        if !state.get().starts_with('"') {
                            return Err(Error::protocol(format!(
                                "{method}: the InputRequiredResult's requestState is not a string: {}",
                                state.get()
                            )));
                        }
                    }
                    extra.request_state = asked.request_state.map(|s| s.get().to_string());
                    match asked.input_requests.filter(|r| !r.is_empty()) {
                        Some(requests) => {
                            state_only_wait = Duration::from_millis(50);
                            let answers =
                                Box::pin(self.fulfil(conn, method, &requests, guard.as_ref())).await?;
                            extra.input_responses = Some(answers);
                        }
                        None => {
                            if extra.request_state.is_none() {
                                return Err(Error::protocol(format!(
                                    "{method}: an InputRequiredResult with neither inputRequests nor requestState"
                                )));
                            }
                            // Only state: the server asks for a plain retry (load shedding, say).
                            extra.input_responses = None;
                            tokio::select! {
                                _ = tokio::time::sleep(state_only_wait) => {}
                                _ = cancels_fired(guard.as_ref()) => {
                                    return Err(Error::cancelled_by_host(method));
                                }
                            }
                            state_only_wait = (state_only_wait * 2).min(Duration::from_millis(250));
                        }
                    }
                }
                Some("task") if tool_call => {
                    if options.task == TaskMode::Handle {
                        return Ok(result);
                    }
                    let created = result.value()?;
                    return Box::pin(conn.host.await_task(conn,
                        method,
                        created,
                        true,
                        deadline,
                        options,
                        guard.as_ref(),
                    ))
                    .await;
                }
                Some("input_required") => {
                    return Err(Error::protocol(format!(
                        "the server answered {method} with an InputRequiredResult, which the protocol allows only on tools/call, prompts/get and resources/read"
                    )))
                }
                Some("task") => {
                    return Err(Error::protocol(format!(
                        "the server answered {method} with a task, which only tools/call may become"
                    )))
                }
                Some(other) => {
                    return Err(Error::protocol(format!(
                        "{method}: unknown resultType {other:?}"
                    )))
                }
            }
        }
    }

    pub(super) fn check_rounds(&self, conn: &Shared, method: &str, rounds: usize) -> Result<()> {
        let max = conn.options.max_input_rounds;
        if rounds > max {
            return Err(Error::protocol(format!(
                "{method}: the server still asked for more input after {max} rounds; stopping (connection option `max_input_rounds`)"
            )));
        }
        Ok(())
    }

    /// Answers the input requests of one round: roots the host set are answered here, the rest
    /// go to the host as `request` events, all at once. The first error ends the round (the
    /// other requests are withdrawn from the host).
    pub(super) async fn fulfil(
        &self,
        conn: &Arc<Shared>,
        call_method: &str,
        requests: &Map<String, Value>,
        guard: Option<&cancel::Cancels>,
    ) -> Result<Map<String, Value>> {
        let mut answers = Map::new();
        let mut admitted = Vec::new();
        // Every request is checked before any reaches the host.
        for (key, request) in requests {
            let Some(method) = request.get("method").and_then(Value::as_str) else {
                return Err(Error::protocol(format!(
                    "{call_method}: input request {key:?} has no method: {request}"
                )));
            };
            let params = request.get("params");
            match conn.host.admit_host_request(conn, method, params) {
                Ok(Some(answer)) => {
                    answers.insert(key.clone(), answer);
                }
                Ok(None) => admitted.push((key, method, params.cloned())),
                Err(refusal) => {
                    return Err(Error::protocol(format!(
                        "the server's answer to {call_method} asks for {method} (input request {key:?}), which this client cannot give: {}",
                        refusal.message
                    )))
                }
            }
        }
        let mut waiting = Vec::with_capacity(admitted.len());
        for (key, method, params) in admitted {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let id = self.to_host(conn, HostAnswer::Call(tx), method.to_string(), params);
            waiting.push((key.clone(), id, rx));
        }
        let ids: Vec<String> = waiting.iter().map(|(_, id, _)| id.clone()).collect();
        for (i, (key, _, rx)) in waiting.into_iter().enumerate() {
            let got = tokio::select! {
                r = rx => r,
                _ = cancels_fired(guard) => {
                    self.withdraw_host_requests(conn, &ids[i..], "the call was cancelled by the host");
                    return Err(Error::cancelled_by_host(call_method));
                }
            };
            match got {
                Ok(Ok(answer)) => {
                    answers.insert(key, answer);
                }
                Ok(Err(e)) => {
                    self.withdraw_host_requests(
                        conn,
                        &ids[i + 1..],
                        "another input request of the same call failed",
                    );
                    return Err(e);
                }
                // The connection closed while the host had the request.
                Err(_) => {
                    return Err(conn
                        .check_open()
                        .err()
                        .unwrap_or_else(|| Error::closed("the connection is closed")))
                }
            }
        }
        Ok(answers)
    }

    /// A -32042 error: the server needs URL-mode elicitations completed before the request can
    /// succeed. Each goes to the host as `elicitation/create`; when the host accepted them all,
    /// the caller retries. Otherwise the server's error stands.
    async fn complete_url_elicitations(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        error: Error,
        guard: Option<&cancel::Cancels>,
    ) -> Result<()> {
        let list = error
            .data
            .as_ref()
            .and_then(|d| d.get("elicitations"))
            .and_then(Value::as_array)
            .filter(|l| !l.is_empty());
        let Some(list) = list else {
            return Err(error);
        };
        let mut requests = Map::new();
        for (i, elicitation) in list.iter().enumerate() {
            let url_mode = elicitation.get("mode").and_then(Value::as_str) == Some("url");
            if !url_mode || elicitation.get("url").and_then(Value::as_str).is_none() {
                // Not what the spec allows in this error: leave it to the host as it came.
                return Err(error);
            }
            requests.insert(
                i.to_string(),
                json!({"method": "elicitation/create", "params": elicitation}),
            );
        }
        let answers = self.fulfil(conn, method, &requests, guard).await?;
        let declined: Vec<&str> = answers
            .values()
            .filter_map(|a| a.get("action").and_then(Value::as_str))
            .filter(|a| *a != "accept")
            .collect();
        if declined.is_empty() && answers.values().all(|a| a.get("action").is_some()) {
            return Ok(());
        }
        let mut error = error;
        error.message.push_str(&format!(
            " (the host did not complete the URL elicitation it asked for: {})",
            if declined.is_empty() {
                "no action"
            } else {
                declined[0]
            }
        ));
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_echoes_the_state_byte_for_byte_and_adds_the_answers() {
        let mut extra = Extra {
            request_state: Some(r#""a\u00e9\"b""#.into()),
            ..Default::default()
        };
        let mut answers = Map::new();
        answers.insert("k".into(), json!({"action": "accept"}));
        extra.input_responses = Some(answers);
        let fragment = extra.fragment().unwrap();
        assert!(
            fragment.contains(r#""requestState":"a\u00e9\"b""#),
            "{fragment}"
        );
        let params = extra
            .apply(&Some(json!({"name": "p", "arguments": {}})))
            .unwrap()
            .unwrap();
        assert_eq!(params["requestState"], "a\u{e9}\"b");
        assert_eq!(params["inputResponses"]["k"]["action"], "accept");
        assert_eq!(params["name"], "p");
        assert!(Extra::default().fragment().is_none());
    }
}
