//! Tasks this client runs for a legacy (2025-11-25) server: a `sampling/createMessage` or
//! `elicitation/create` that carries `task` is answered at once with a `CreateTaskResult`, goes
//! to the host as the same `request` event as ever, and the host's answer becomes the task's
//! result. The server polls `tasks/get`, blocks on `tasks/result`, lists and cancels; the engine
//! answers all of it. Declared (`tasks.requests.*`) only for the requests the host serves, and
//! only with the `tasks` option on.

use super::{HostAnswer, Shared};
use crate::protocol;
use crate::protocol::codes;
use crate::protocol::era::Era;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// How often the server is told to poll a task of ours.
const POLL_INTERVAL_MS: u64 = 500;
/// A task's lifetime when the server asks for none, and the most it may ask for.
const DEFAULT_TTL_MS: u64 = 300_000;
const MAX_TTL_MS: u64 = 3_600_000;

#[derive(Default)]
pub(super) struct Store {
    tasks: Mutex<HashMap<String, Hosted>>,
    next: AtomicU64,
}

struct Hosted {
    /// The task as the protocol shows it (`taskId`, `status`, timestamps, `ttl`, ...).
    task: Value,
    /// The host's answer, once there is one.
    outcome: Option<std::result::Result<Value, Value>>,
    /// The host request event that feeds it, while the host has not answered.
    event_id: Option<String>,
    done: Arc<Notify>,
    /// Forgets the task when its lifetime ends.
    expiry: Option<tokio::task::JoinHandle<()>>,
}

impl Store {
    /// The connection ended: stop every timer and wake every blocked `tasks/result`, so that
    /// nothing outlives it.
    pub(super) fn clear(&self) {
        let tasks: Vec<Hosted> = self.tasks.lock().drain().map(|(_, t)| t).collect();
        for t in tasks {
            if let Some(expiry) = t.expiry {
                expiry.abort();
            }
            t.done.notify_waiters();
        }
    }
}

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

impl Store {
    /// Whether this connection runs tasks for the server (legacy era, `tasks` on, and a
    /// task-capable request the host serves).
    pub(super) fn hosts_tasks(&self, conn: &Shared) -> bool {
        conn.options.legacy_capabilities.get("tasks").is_some()
            && matches!(
                conn.era.read().as_ref().map(|s| &s.era),
                Some(Era::Legacy { .. })
            )
    }

    /// Whether this server request asks to be run as a task that we declared we run.
    pub(super) fn hosts_task_for(
        &self,
        conn: &Shared,
        method: &str,
        params: Option<&Value>,
    ) -> bool {
        let asked = params
            .and_then(|p| p.get("task"))
            .is_some_and(Value::is_object);
        let path = match method {
            "sampling/createMessage" => ["sampling", "createMessage"],
            "elicitation/create" => ["elicitation", "create"],
            _ => return false,
        };
        asked
            && self.hosts_tasks(conn)
            && conn
                .options
                .legacy_capabilities
                .get("tasks")
                .and_then(|t| t.get("requests"))
                .and_then(|r| r.get(path[0]))
                .and_then(|r| r.get(path[1]))
                .is_some()
    }

    /// Creates the task, answers the server with it, and hands the request to the host.
    pub(super) fn start_hosted_task(
        &self,
        conn: &Arc<Shared>,
        rpc_id: Value,
        method: String,
        params: Option<Value>,
    ) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let task_id = format!("mcplug-task-{}-{n}", std::process::id());
        let ttl = params
            .as_ref()
            .and_then(|p| p.get("task"))
            .and_then(|t| t.get("ttl"))
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TTL_MS)
            .min(MAX_TTL_MS);
        let now = iso8601_now();
        let task = json!({
            "taskId": task_id,
            "status": "working",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttl": ttl,
            "pollInterval": POLL_INTERVAL_MS,
        });
        self.tasks.lock().insert(
            task_id.clone(),
            Hosted {
                task: task.clone(),
                outcome: None,
                event_id: None,
                done: Arc::new(Notify::new()),
                expiry: None,
            },
        );
        conn.reply(rpc_id, Ok(json!({ "task": task })));
        let event_id = conn
            .rounds
            .to_host(conn, HostAnswer::Task(task_id.clone()), method, params);
        if let Some(t) = self.tasks.lock().get_mut(&task_id) {
            if t.outcome.is_none() {
                t.event_id = Some(event_id);
            }
        }
        // The task is forgotten after its lifetime, answered or not.
        let weak = Arc::downgrade(conn);
        let expired_id = task_id.clone();
        let expiry = crate::runtime::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ttl)).await;
            if let Some(shared) = weak.upgrade() {
                let gone = shared.host.hosted.tasks.lock().remove(&expired_id);
                if let Some(gone) = gone {
                    gone.done.notify_waiters();
                    if let Some(id) = gone.event_id {
                        shared.rounds.withdraw_host_requests(
                            &shared,
                            &[id],
                            "its task's lifetime ended",
                        );
                    }
                }
            }
        });
        match self.tasks.lock().get_mut(&task_id) {
            Some(t) => t.expiry = Some(expiry),
            None => expiry.abort(),
        }
    }

    /// The host answered (or its timer ran out): the task is completed or failed.
    pub(super) fn finish_hosted_task(
        &self,
        conn: &Shared,
        task_id: &str,
        outcome: std::result::Result<Value, Value>,
    ) {
        let snapshot = {
            let mut tasks = self.tasks.lock();
            let Some(t) = tasks.get_mut(task_id) else {
                return;
            };
            if terminal(t.task["status"].as_str().unwrap_or_default()) {
                return;
            }
            t.task["status"] = json!(if outcome.is_ok() {
                "completed"
            } else {
                "failed"
            });
            t.task["lastUpdatedAt"] = json!(iso8601_now());
            if let Err(e) = &outcome {
                if let Some(m) = e.get("message") {
                    t.task["statusMessage"] = m.clone();
                }
            }
            t.outcome = Some(outcome);
            t.event_id = None;
            t.done.notify_waiters();
            t.task.clone()
        };
        self.notify_task_status(conn, snapshot);
    }

    fn notify_task_status(&self, conn: &Shared, task: Value) {
        let Some(transport) = conn.session.transport_if_set().cloned() else {
            return;
        };
        if conn.session.is_closed() {
            return;
        }
        let msg = protocol::encode_notification("notifications/tasks/status", Some(&task));
        crate::log::sent(conn.name(), &msg);
        crate::runtime::spawn(async move {
            let _ = transport.send(msg).await;
        });
    }

    /// The server's `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel`.
    pub(super) fn on_task_request(
        &self,
        conn: &Arc<Shared>,
        id: Value,
        method: &str,
        params: Option<&Value>,
    ) {
        if method == "tasks/list" {
            let tasks: Vec<Value> = self.tasks.lock().values().map(|t| t.task.clone()).collect();
            return conn.reply(id, Ok(json!({ "tasks": tasks })));
        }
        let Some(task_id) = params.and_then(|p| p.get("taskId")).and_then(Value::as_str) else {
            return conn.reply(
                id,
                Err(json!({"code": codes::INVALID_PARAMS, "message": format!("{method} needs a string taskId")})),
            );
        };
        let unknown = || {
            Err(
                json!({"code": codes::INVALID_PARAMS, "message": format!("no task {task_id:?} (unknown, or its lifetime ended)")}),
            )
        };
        match method {
            "tasks/get" => {
                let task = self.tasks.lock().get(task_id).map(|t| t.task.clone());
                match task {
                    Some(task) => conn.reply(id, Ok(task)),
                    None => conn.reply(id, unknown()),
                }
            }
            "tasks/cancel" => {
                let outcome = {
                    let mut tasks = self.tasks.lock();
                    match tasks.get_mut(task_id) {
                        None => Err(None),
                        Some(t) if terminal(t.task["status"].as_str().unwrap_or_default()) => {
                            Err(Some(t.task["status"].clone()))
                        }
                        Some(t) => {
                            t.task["status"] = json!("cancelled");
                            t.task["statusMessage"] = json!("cancelled by the server");
                            t.task["lastUpdatedAt"] = json!(iso8601_now());
                            t.done.notify_waiters();
                            Ok((t.task.clone(), t.event_id.take()))
                        }
                    }
                };
                match outcome {
                    Ok((task, event)) => {
                        if let Some(event) = event {
                            conn.rounds.withdraw_host_requests(conn, &[event], "the server cancelled its task");
                        }
                        conn.reply(id, Ok(task));
                    }
                    Err(None) => conn.reply(id, unknown()),
                    Err(Some(status)) => conn.reply(
                        id,
                        Err(json!({"code": codes::INVALID_PARAMS, "message": format!("task {task_id:?} is already {status} and cannot be cancelled")})),
                    ),
                }
            }
            _ => {
                // tasks/result: the task's outcome, once it has one (the server blocks on it).
                let Some(done) = self.tasks.lock().get(task_id).map(|t| t.done.clone()) else {
                    return conn.reply(id, unknown());
                };
                let weak = Arc::downgrade(conn);
                let task_id = task_id.to_string();
                crate::runtime::spawn(async move {
                    loop {
                        let notified = done.notified();
                        let Some(shared) = weak.upgrade() else { return };
                        let answer = shared.host.hosted.task_result(&task_id);
                        match answer {
                            Some(answer) => return shared.reply(id, answer),
                            None if shared.session.is_closed() => return,
                            None => {}
                        }
                        drop(shared);
                        notified.await;
                    }
                });
            }
        }
    }

    /// What `tasks/result` answers for a task that ended; `None` while it runs.
    fn task_result(&self, task_id: &str) -> Option<std::result::Result<Value, Value>> {
        let tasks = self.tasks.lock();
        let Some(t) = tasks.get(task_id) else {
            return Some(Err(
                json!({"code": codes::INVALID_PARAMS, "message": format!("no task {task_id:?} (its lifetime ended)")}),
            ));
        };
        let related = json!({ "io.modelcontextprotocol/related-task": { "taskId": task_id } });
        match (&t.outcome, t.task["status"].as_str().unwrap_or_default()) {
            (_, "cancelled") => Some(Err(
                json!({"code": codes::INTERNAL_ERROR, "message": format!("task {task_id:?} was cancelled")}),
            )),
            (Some(Ok(result)), _) => {
                let mut result = result.clone();
                if let Some(obj) = result.as_object_mut() {
                    let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                    if let (Some(meta), Some(rel)) = (meta.as_object_mut(), related.as_object()) {
                        meta.extend(rel.clone());
                    }
                }
                Some(Ok(result))
            }
            (Some(Err(error)), _) => Some(Err(error.clone())),
            (None, _) => None,
        }
    }
}

/// The current UTC time as ISO 8601 (`2025-11-25T10:30:00.123Z`), without a date library.
pub(crate) fn iso8601_now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    iso8601(since.as_secs(), since.subsec_millis())
}

fn iso8601(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso8601_utc() {
        assert_eq!(iso8601(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(iso8601(1_764_066_600, 0), "2025-11-25T10:30:00.000Z");
    }
}
