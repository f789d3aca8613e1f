//! Tool calls that become tasks, awaited for the host: the experimental tasks of 2025-11-25
//! (the client asks for a task with `task` in the params, polls `tasks/get`, then fetches
//! `tasks/result`) and the `io.modelcontextprotocol/tasks` extension of the 2026-07-28 era (the
//! server decides; `tasks/get` carries the result, or the input it needs, which goes back with
//! `tasks/update`).
//!
//! Polling honours the server's interval. The call's timeout bounds the whole wait and the
//! host's cancel reaches it; either sends `tasks/cancel`.

use super::host::HostState;
use super::options::CallOptions;
use super::request::{Body, Send};
use super::{cancel, cancels_fired, pages, Shared};
use crate::client::options::TaskMode;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::{codes, RawJson};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Polling interval when the server suggests none.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// Bounds on the server's suggestion: never a busy loop, never a minute of deafness.
const MIN_POLL: Duration = Duration::from_millis(10);
const MAX_POLL: Duration = Duration::from_secs(30);

/// The task of a legacy `CreateTaskResult` (`{"task": {...}}`), if that is what came back.
pub(super) fn legacy_created_task(result: &RawJson) -> Option<Value> {
    let text = result.as_str();
    memchr::memmem::find(text.as_bytes(), b"\"task\"")?;
    let mut value = result.value().ok()?;
    let task = value.get_mut("task")?.take();
    task.get("taskId").and_then(Value::as_str)?;
    Some(task)
}

/// The id of the task a legacy `CreateTaskResult` names (a relayed one, `mcplug serve`).
pub(crate) fn legacy_task_id(result: &RawJson) -> Option<String> {
    legacy_created_task(result)?["taskId"]
        .as_str()
        .map(str::to_string)
}

impl HostState {
    /// A legacy server that runs tool calls as tasks, on a connection that takes part in tasks
    /// (found once, at connect: see `note_legacy_tool_tasks`).
    pub(super) fn wants_tool_tasks(&self) -> bool {
        self.legacy_tool_tasks.load(Ordering::Relaxed)
    }

    /// After the legacy handshake: does this server run tool calls as tasks for us?
    pub(super) fn note_legacy_tool_tasks(&self, conn: &Shared) {
        let capable = conn.options.tasks
            && conn
                .host
                .server_declares(&["tasks", "requests", "tools", "call"]);
        self.legacy_tool_tasks.store(capable, Ordering::Relaxed);
    }

    /// Legacy: whether this tool call asks for a task, and the `task` member it carries.
    pub(super) async fn task_augmentation(
        &self,
        conn: &Shared,
        tool: Option<&str>,
        options: &CallOptions,
    ) -> Result<Option<Value>> {
        let capable = self.wants_tool_tasks();
        let ask = match options.task {
            TaskMode::Never => false,
            TaskMode::Await => capable,
            TaskMode::Handle => {
                if !capable {
                    return Err(Error::invalid(if conn.options.tasks {
                        "option `task`: \"handle\": this server does not run tool calls as tasks (its capabilities lack tasks.requests.tools.call)"
                    } else {
                        "option `task`: \"handle\": this connection was made with `tasks: false`"
                    }));
                }
                true
            }
            TaskMode::Auto => match tool {
                Some(name) if capable => self.tool_requires_task(conn, name, options).await,
                _ => false,
            },
        };
        if !ask {
            return Ok(None);
        }
        Ok(Some(match options.task_ttl {
            Some(ttl) => json!({ "ttl": ttl }),
            None => json!({}),
        }))
    }

    /// Whether a legacy server listed the tool with `execution.taskSupport: "required"` (a call
    /// without a task would fail). Lists the tools once if they were never listed.
    async fn tool_requires_task(&self, conn: &Shared, name: &str, options: &CallOptions) -> bool {
        let required = |m: &HashMap<String, String>| m.get(name).is_some_and(|s| s == "required");
        let known = self.tool_tasks.lock().as_ref().map(required);
        match known {
            Some(required) => required,
            None => {
                if let Err(e) = self.list_tools_for_tasks(conn, options).await {
                    tracing::debug!(error = %e, "could not list tools to find which need tasks");
                    return false;
                }
                self.tool_tasks.lock().as_ref().is_some_and(required)
            }
        }
    }

    async fn list_tools_for_tasks(&self, conn: &Shared, options: &CallOptions) -> Result<()> {
        let list_options = CallOptions {
            tag: options.tag.clone(),
            ..Default::default()
        };
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = pages::Pages::new("tools/list", conn.options.list_limit());
        loop {
            let params = cursor.take().map(|c| json!({ "cursor": c }));
            let page = conn
                .send_request(Send {
                    method: "tools/list",
                    body: Body::Params(params),
                    timeout: conn.options.request_timeout,
                    cancellable: true,
                    resolves: false,
                    options: Some(&list_options),
                    pausable: false,
                })
                .await?;
            pages.page(page.as_str().len())?;
            let mut page = page.value()?;
            if let Some(Value::Array(list)) = page.get_mut("tools").map(Value::take) {
                tools.extend(list);
            }
            match page.get_mut("nextCursor").map(Value::take) {
                Some(Value::String(next)) => {
                    pages.next(&next)?;
                    cursor = Some(next);
                }
                _ => break,
            }
        }
        self.remember_tools(&tools, true);
        Ok(())
    }

    /// Awaits a task until it ends; returns what the call would have returned. `created` is the
    /// task (legacy: the `task` member of the result; modern: the result itself).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn await_task(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        created: Value,
        modern: bool,
        deadline: Option<Instant>,
        options: &CallOptions,
        guard: Option<&cancel::Cancels>,
    ) -> Result<RawJson> {
        let Some(task_id) = created.get("taskId").and_then(Value::as_str) else {
            return Err(Error::protocol(format!(
                "{method}: the server answered with a task that has no taskId: {created}"
            )));
        };
        let task_id = task_id.to_string();
        let outcome = self
            .follow_task(
                conn, method, &task_id, created, modern, deadline, options, guard,
            )
            .await;
        match outcome {
            Err(e) if matches!(e.kind, ErrorKind::Cancelled | ErrorKind::Timeout) => {
                // The server may stop the work; its answer does not change the call's error.
                let shared = conn.clone();
                let id = task_id.clone();
                crate::runtime::spawn(async move {
                    let _ = shared
                        .send_request(Send {
                            method: "tasks/cancel",
                            body: Body::Params(Some(json!({ "taskId": id }))),
                            timeout: shared.options.request_timeout,
                            cancellable: true,
                            resolves: false,
                            options: None,
                            pausable: false,
                        })
                        .await;
                });
                let mut e = e;
                e.message = if e.kind == ErrorKind::Cancelled {
                    format!("{method} was cancelled by the host; its task {task_id:?} was sent tasks/cancel")
                } else if e.message.starts_with(method) {
                    format!("{}; its task {task_id:?} was sent tasks/cancel", e.message)
                } else {
                    format!(
                        "{method}: {}; its task {task_id:?} was sent tasks/cancel",
                        e.message
                    )
                };
                Err(e)
            }
            other => other,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn follow_task(
        &self,
        conn: &Arc<Shared>,
        method: &str,
        task_id: &str,
        mut task: Value,
        modern: bool,
        deadline: Option<Instant>,
        options: &CallOptions,
        guard: Option<&cancel::Cancels>,
    ) -> Result<RawJson> {
        let poll_key = if modern {
            "pollIntervalMs"
        } else {
            "pollInterval"
        };
        let mut answered: HashSet<String> = HashSet::new();
        let mut rounds = 0usize;
        // The text of the last tasks/get answer: a completed task's result is taken from it.
        let mut last: Option<RawJson> = None;
        loop {
            let status = task
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("working")
                .to_string();
            match (status.as_str(), modern) {
                ("cancelled", _) => {
                    return Err(Error::new(
                        ErrorKind::Cancelled,
                        format!(
                            "{method}: the server cancelled its task {task_id:?}{}",
                            status_message(&task)
                        ),
                    ))
                }
                // Legacy: the result (or the error) comes from tasks/result, which also carries
                // the server's requests of an input_required task while it blocks.
                ("completed" | "failed" | "input_required", false) => {
                    return conn
                        .host
                        .task_request(conn, "tasks/result", task_id, deadline, None, options)
                        .await;
                }
                ("completed", true) => {
                    return completed_result(method, task_id, &task, last.as_ref())
                }
                ("failed", true) => {
                    let error = task.get("error").cloned().unwrap_or_else(
                        || json!({"code": codes::INTERNAL_ERROR, "message": "the task failed"}),
                    );
                    return Err(Error::from_rpc(&error));
                }
                ("input_required", true) => {
                    let fresh: Map<String, Value> = task
                        .get("inputRequests")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .filter(|(k, _)| !answered.contains(*k))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect()
                        })
                        .unwrap_or_default();
                    if !fresh.is_empty() {
                        rounds += 1;
                        conn.rounds.check_rounds(conn, method, rounds)?;
                        let answers = conn.rounds.fulfil(conn, method, &fresh, guard).await?;
                        answered.extend(answers.keys().cloned());
                        self.task_request(
                            conn,
                            "tasks/update",
                            task_id,
                            deadline,
                            Some(json!({ "inputResponses": answers })),
                            options,
                        )
                        .await?;
                    }
                }
                _ => {}
            }
            let wait = task
                .get(poll_key)
                .and_then(Value::as_u64)
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_POLL)
                .clamp(MIN_POLL, MAX_POLL);
            let timed_out = || {
                Error::timeout(format!(
                    "{method} timed out while its task {task_id:?} was still {status}"
                ))
            };
            let wake = Instant::now() + wait;
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(timed_out());
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.map_or(wake, |d| d.min(wake))) => {}
                _ = cancels_fired(guard) => {
                    return Err(Error::cancelled_by_host(method));
                }
            }
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(timed_out());
            }
            let raw = conn
                .host
                .task_request(conn, "tasks/get", task_id, deadline, None, options)
                .await?;
            task = raw.value()?;
            last = Some(raw);
        }
    }

    /// `tasks/get`, `tasks/update` or `tasks/result` for the task of a call: the call's tag
    /// cancels it, and it ends by the call's deadline (`tasks/get` and `tasks/update` also by
    /// the request timeout; `tasks/result` waits for the task's end).
    async fn task_request(
        &self,
        conn: &Shared,
        method: &str,
        task_id: &str,
        deadline: Option<Instant>,
        more: Option<Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let mut params = json!({ "taskId": task_id });
        if let Some(Value::Object(more)) = more {
            params.as_object_mut().expect("an object").extend(more);
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let timeout = if method == "tasks/result" {
            left
        } else {
            match (left, conn.options.request_timeout) {
                (Some(l), Some(r)) => Some(l.min(r)),
                (l, r) => l.or(r),
            }
        };
        let sub_options = CallOptions {
            tag: options.tag.clone(),
            ..Default::default()
        };
        conn.send_request(Send {
            method,
            body: Body::Params(Some(params)),
            timeout,
            cancellable: true,
            resolves: false,
            options: Some(&sub_options),
            pausable: false,
        })
        .await
    }
}

fn status_message(task: &Value) -> String {
    match task.get("statusMessage").and_then(Value::as_str) {
        Some(m) => format!(": {m}"),
        None => String::new(),
    }
}

/// The `result` of a completed modern task, as the text the server sent when there is one.
fn completed_result(
    method: &str,
    task_id: &str,
    task: &Value,
    raw: Option<&RawJson>,
) -> Result<RawJson> {
    #[derive(serde::Deserialize)]
    struct Completed<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    if let Some(done) = raw.and_then(|r| serde_json::from_str::<Completed>(r.as_str()).ok()) {
        if done.result.get().starts_with('{') {
            return Ok(RawJson::copy_of(done.result));
        }
    }
    match task.get("result") {
        Some(result) if result.is_object() => Ok(RawJson::from_value(result)),
        _ => Err(Error::protocol(format!(
            "{method}: the server's task {task_id:?} completed without a result object"
        ))),
    }
}
