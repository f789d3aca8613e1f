//! What the server sends on its own: its requests (answered by the library, or handed to the host
//! under a timer) and its notifications (events; cancellation routed) — the client's
//! [`Dispatch`] of the session core, which frames each line and routes answers and progress.

use super::event::Event;
use super::{listen, HostAnswer, HostRequest, InputRounds, Shared, Shutdown};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::codes;
use crate::session::inbound::{self, Dispatch};
use crate::session::pending::Delivered;
use crate::session::Session;
use crate::transport::Inbound;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Shared {
    pub(super) fn reply(&self, id: Value, outcome: std::result::Result<Value, Value>) {
        self.session.reply(id, outcome)
    }

    pub(super) fn on_server_request(
        self: &Arc<Self>,
        id: Value,
        method: String,
        params: Option<Value>,
    ) {
        match method.as_str() {
            "ping" => return self.reply(id, Ok(json!({}))),
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
                if self.host.hosted.hosts_tasks(self) =>
            {
                return self
                    .host
                    .hosted
                    .on_task_request(self, id, &method, params.as_ref());
            }
            _ => {}
        }
        match self.host.admit_host_request(self, &method, params.as_ref()) {
            Ok(Some(answer)) => self.reply(id, Ok(answer)),
            Ok(None) => {
                if self
                    .host
                    .hosted
                    .hosts_task_for(self, &method, params.as_ref())
                {
                    self.host.hosted.start_hosted_task(self, id, method, params);
                } else {
                    self.rounds
                        .to_host(self, HostAnswer::Server(id), method, params);
                }
            }
            Err(refusal) => self.reply(
                id,
                Err(json!({"code": refusal.code, "message": refusal.message})),
            ),
        }
    }
}

impl InputRounds {
    /// Hands a request the host must answer to it as an event, under a timer: if the host does
    /// not answer in time, the server (or the waiting call, or the hosted task) gets an error
    /// instead of waiting forever. Returns the event id.
    pub(super) fn to_host(
        &self,
        conn: &Arc<Shared>,
        answer: HostAnswer,
        method: String,
        params: Option<Value>,
    ) -> String {
        let event_id = format!("s{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let limit = conn.options.host_request_timeout;
        let weak = Arc::downgrade(conn);
        let timer_id = event_id.clone();
        let timer = crate::runtime::spawn(async move {
            tokio::time::sleep(limit).await;
            let Some(shared) = weak.upgrade() else { return };
            let entry = shared.rounds.waiting.lock().remove(&timer_id);
            if let Some(entry) = entry {
                let message = format!(
                    "the host did not answer {} within {} ms",
                    entry.method,
                    limit.as_millis()
                );
                let method = entry.method.clone();
                shared.rounds.deliver(
                    &shared,
                    entry,
                    Err(json!({"code": codes::INTERNAL_ERROR, "message": message})),
                    Some(Error::timeout(message.clone())),
                );
                shared.events.push_event(Event::RequestExpired {
                    id: timer_id,
                    method,
                });
            }
        });
        let defaults = if conn.options.elicitation_defaults && method == "elicitation/create" {
            schema_defaults(params.as_ref())
        } else {
            None
        };
        self.waiting.lock().insert(
            event_id.clone(),
            HostRequest {
                answer,
                method: method.clone(),
                defaults,
                timer,
            },
        );
        conn.events.push_event(Event::Request {
            id: event_id.clone(),
            method: method.to_string(),
            params,
        });
        event_id
    }

    /// Sends an answer where it belongs. `local` is the error a waiting call gets instead of
    /// the JSON-RPC error object (a timeout, say).
    fn deliver(
        &self,
        conn: &Shared,
        entry: HostRequest,
        outcome: std::result::Result<Value, Value>,
        local: Option<Error>,
    ) {
        entry.timer.abort();
        match entry.answer {
            HostAnswer::Server(id) => conn.reply(id, outcome),
            HostAnswer::Call(tx) => {
                let _ = tx.send(
                    outcome.map_err(|e| local.unwrap_or_else(|| host_refused(&entry.method, &e))),
                );
            }
            HostAnswer::Task(task_id) => {
                conn.host.hosted.finish_hosted_task(conn, &task_id, outcome)
            }
        }
    }

    /// Forgets host requests a call no longer waits for (it was cancelled or failed), and tells
    /// the host so that it can close whatever it showed the user.
    pub(super) fn withdraw_host_requests(&self, conn: &Shared, ids: &[String], reason: &str) {
        for id in ids {
            let entry = self.waiting.lock().remove(id);
            if let Some(entry) = entry {
                entry.timer.abort();
                conn.events.push_event(Event::RequestCancelled {
                    id: id.clone(),
                    method: entry.method,
                    reason: reason.to_string(),
                });
            }
        }
    }

    pub(super) async fn respond(&self, conn: &Shared, response: &Value) -> Result<()> {
        let obj = response
            .as_object()
            .ok_or_else(|| Error::invalid("response_json must be a JSON object"))?;
        let event_id = obj.get("id").and_then(Value::as_str).ok_or_else(|| {
            Error::invalid("response_json needs the string `id` of the request event it answers")
        })?;
        let mut outcome = match (obj.get("result"), obj.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => {
                let code_ok = e.get("code").is_some_and(|c| c.as_i64().is_some());
                let msg_ok = e.get("message").is_some_and(Value::is_string);
                if !code_ok || !msg_ok {
                    return Err(Error::invalid(
                        "response_json `error` needs an integer `code` and a string `message`",
                    ));
                }
                Err(e.clone())
            }
            _ => {
                return Err(Error::invalid(
                    "response_json needs exactly one of `result` or `error`",
                ))
            }
        };
        conn.check_open()?;
        let entry = self.waiting.lock().remove(event_id);
        let Some(entry) = entry else {
            return Err(Error::invalid(format!(
                "no server request with id {event_id:?} is waiting for an answer (already answered, expired, cancelled, or never sent)"
            )));
        };
        if let (Some(defaults), Ok(result)) = (&entry.defaults, &mut outcome) {
            fill_defaults(result, defaults);
        }
        if let HostAnswer::Server(id) = &entry.answer {
            // Sent here rather than spawned, so that a broken pipe is this call's error.
            entry.timer.abort();
            return conn.session.reply_now(id, outcome.as_ref()).await;
        }
        self.deliver(conn, entry, outcome, None);
        Ok(())
    }
}

impl Shared {
    pub(super) fn on_notification(
        &self,
        method: String,
        params: Option<Value>,
        progress_tag: Option<&str>,
    ) {
        // What it says changed is stale in the cache, whichever stream it came on.
        self.cache.on_notification(&method, params.as_ref());
        match self.listen.route_listen(self, &method, params.as_ref()) {
            listen::Route::Drop => return,
            listen::Route::Acknowledged(event) => return self.events.push_event(event),
            listen::Route::Plain | listen::Route::Deliver => {}
        }
        let (mut tag, mut cancels) = (None, None);
        match method.as_str() {
            // Routed by the session (`session::inbound`): its request's tag labels it.
            "notifications/progress" => tag = progress_tag.map(|t| json!(t)),
            "notifications/cancelled" => {
                // The server gave up on one of its requests to the host: forget it. (Or, in
                // the modern era on stdio, it ended a subscription of ours.)
                if let Some(rid) = params.as_ref().and_then(|p| p.get("requestId")) {
                    if self.listen.listen_cancelled_by_server(self, rid) {
                        let params = Some(params.clone().unwrap_or(Value::Null));
                        self.events.push_event(Event::notification(method, params));
                        return;
                    }
                    let mut hr = self.rounds.waiting.lock();
                    let found = hr
                        .iter()
                        .find(|(_, r)| matches!(&r.answer, HostAnswer::Server(id) if id == rid))
                        .map(|(k, _)| k.clone());
                    if let Some(k) = found {
                        if let Some(r) = hr.remove(&k) {
                            r.timer.abort();
                        }
                        cancels = Some(k);
                    }
                }
            }
            "notifications/tools/list_changed" => {
                // The tools' schemas, and (legacy tasks) which tools need a task, are known
                // again only from a new list.
                self.tools.schemas.forget();
                *self.host.tool_tasks.lock() = None;
            }
            m if !self.host.admits_notification(m) => {
                tracing::debug!(
                    method = m,
                    "dropped a channel notification from a server that did not declare it"
                );
                return;
            }
            _ => {}
        }
        self.events.push_event(Event::Notification {
            method,
            tag,
            cancels,
            params,
        });
    }
}

impl Inbound for Shared {
    fn message(self: Arc<Self>, line: &[u8]) {
        inbound::message(&self, line)
    }

    fn answer(self: Arc<Self>, line: &[u8], id: &str) -> bool {
        inbound::answer(&self, line, id)
    }

    fn stderr(self: Arc<Self>, line: String) {
        self.events.push_event(Event::Stderr { line });
    }

    fn request_failed(self: Arc<Self>, id: &str, error: Error) {
        inbound::failed(&self, id, error)
    }

    fn closed(self: Arc<Self>, mut error: Error) {
        if let Some(line) = self.session.take_last_invalid() {
            error.message.push_str(&format!(
                "; it also wrote non-JSON to stdout, last: {line:?}"
            ));
        }
        tracing::debug!(target: "mcplug::client", server = self.name().unwrap_or(""),
            kind = error.kind.as_str(), "the connection ended: {}", error.message);
        self.shut(error, Shutdown::Transport);
    }
}

/// The client's role in the session: the server's requests and notifications, and the answers
/// to started calls.
impl Dispatch for Shared {
    fn session(&self) -> &Session {
        &self.session
    }

    fn request(self: &Arc<Self>, id: Value, method: String, params: Option<Value>) {
        self.on_server_request(id, method, params)
    }

    fn notification(&self, method: String, params: Option<Value>, tag: Option<&str>) {
        self.on_notification(method, params, tag)
    }

    fn delivered(self: &Arc<Self>, delivered: Delivered, id: &RawValue) {
        self.started.ticket_delivered(self, delivered, id)
    }

    /// A message the client cannot act on: an `invalid_message` event (its first 4 KiB).
    fn invalid(&self, line: &[u8], reason: String) {
        let text = String::from_utf8_lossy(&line[..line.len().min(4096)]).into_owned();
        self.session.note_invalid(&text);
        self.events.push_event(Event::InvalidMessage {
            error: reason,
            line: text,
        });
    }
}

/// The `default` of each property of a form elicitation's `requestedSchema`.
fn schema_defaults(params: Option<&Value>) -> Option<Map<String, Value>> {
    let params = params?;
    if params.get("mode").and_then(Value::as_str).unwrap_or("form") != "form" {
        return None;
    }
    let properties = params
        .get("requestedSchema")?
        .get("properties")?
        .as_object()?;
    let defaults: Map<String, Value> = properties
        .iter()
        .filter_map(|(k, p)| p.get("default").map(|d| (k.clone(), d.clone())))
        .collect();
    (!defaults.is_empty()).then_some(defaults)
}

/// An accepted elicitation answer gets the schema's defaults where the host gave no value.
fn fill_defaults(result: &mut Value, defaults: &Map<String, Value>) {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return;
    }
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    let content = obj.entry("content").or_insert_with(|| json!({}));
    if let Some(content) = content.as_object_mut() {
        for (k, v) in defaults {
            content.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// The error of a call whose input request the host answered with an error: the host refused
/// to provide what the server needs.
pub(super) fn host_refused(method: &str, error: &Value) -> Error {
    let mut e = Error::new(
        ErrorKind::Denied,
        format!(
            "the host answered the server's {method} with an error: {}",
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
        ),
    );
    e.code = error.get("code").and_then(Value::as_i64);
    e.data = error.get("data").cloned();
    e
}
