//! What the peer sends: the framing of each incoming line, for either role.
//!
//! An answer goes to the pending table (and what became of it to the role: a started call's
//! answer is the role's to queue); a progress notification of one of our requests restarts its
//! timer when it asked for that, and reaches the role labelled with the request's tag; every
//! other request and notification goes to the role's [`Dispatch`]. A JSON-RPC batch (2025-03-26
//! only) is handled message by message.

use super::pending::Delivered;
use super::Session;
use crate::error::Error;
use crate::protocol::{self, codes, Incoming, RawJson};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::sync::Arc;

/// What a role does with the messages the core does not handle itself.
pub(crate) trait Dispatch: Send + Sync {
    fn session(&self) -> &Session;

    /// A request of the peer; answered once, by the role, through [`Session::reply`].
    fn request(self: &Arc<Self>, id: Value, method: String, params: Option<Value>);

    /// A notification of the peer. `tag`: a progress notification of one of our requests that
    /// carries a tag.
    fn notification(&self, method: String, params: Option<Value>, tag: Option<&str>);

    /// What became of an answer the pending table took (a started call's is the role's).
    fn delivered(self: &Arc<Self>, delivered: Delivered, id: &RawValue);

    /// A line the core could not act on (`reason` says why).
    fn invalid(&self, line: &[u8], reason: String);
}

/// Handles one incoming line (a message, or a batch of them).
pub(crate) fn message<D: Dispatch>(role: &Arc<D>, line: &[u8]) {
    // JSON-RPC batches exist only in 2025-03-26 (which a client must accept); they hold
    // ordinary messages, handled one by one.
    if line.first() == Some(&b'[') {
        if let Ok(batch) = serde_json::from_slice::<Vec<&RawValue>>(line) {
            for item in batch {
                handle(role, item.get().as_bytes(), None);
            }
            return;
        }
    }
    handle(role, line, None);
}

/// Handles one incoming line; whether it was the answer to our request `id` (JSON text).
pub(crate) fn answer<D: Dispatch>(role: &Arc<D>, line: &[u8], id: &str) -> bool {
    if line.first() == Some(&b'[') {
        let is = crate::transport::remote::response_id(line).as_deref() == Some(id);
        message(role, line);
        return is;
    }
    handle(role, line, Some(id))
}

/// Our request `id` (JSON text) failed below JSON-RPC (its HTTP request did).
pub(crate) fn failed<D: Dispatch>(role: &Arc<D>, id: &str, error: Error) {
    if let Ok(id) = serde_json::from_str::<Box<RawValue>>(id) {
        let delivered = role.session().pending.complete(&id, Err(error));
        role.delivered(delivered, &id);
    }
}

/// Handles one message; whether it was the answer to the request `answer_to` (JSON text).
fn handle<D: Dispatch>(role: &Arc<D>, line: &[u8], answer_to: Option<&str>) -> bool {
    let session = role.session();
    crate::log::received(session.name(), line);
    let answers = |id: &RawValue| answer_to.is_some_and(|a| id.get().trim() == a);
    match protocol::parse(line) {
        Incoming::Response { id, outcome } => {
            let outcome = match outcome {
                Ok(result) => Ok(RawJson::copy_of(result)),
                Err(error) => Err(Error::from_rpc(&error)),
            };
            let delivered = session.pending.complete(id, outcome);
            role.delivered(delivered, id);
            return answers(id);
        }
        Incoming::Request {
            id,
            method,
            params: Ok(params),
        } => role.request(id, method, params),
        Incoming::Request {
            id,
            method,
            params: Err(why),
        } => session.reply(
            id,
            Err(json!({"code": codes::INVALID_PARAMS,
                       "message": format!("the {} could not read the {method} request: {why}", session.peer().us())})),
        ),
        Incoming::Notification {
            method,
            params: Ok(params),
        } => {
            let tag = (method == "notifications/progress")
                .then(|| session.progress_of(params.as_ref()))
                .flatten();
            role.notification(method, params, tag.as_deref());
        }
        Incoming::Notification {
            method,
            params: Err(why),
        } => role.invalid(line, format!("the notification {method}: {why}")),
        Incoming::Invalid { reason, answers: id } => {
            role.invalid(line, reason.clone());
            if let Some(id) = id {
                // It answers a request of ours: that request fails now, not at its timeout.
                let delivered = session.pending.complete(
                    &id,
                    Err(Error::protocol(format!(
                        "the {}'s answer could not be read: {reason}",
                        session.peer().as_str()
                    ))),
                );
                role.delivered(delivered, &id);
                return answers(&id);
            }
        }
    }
    false
}

impl Session {
    /// A progress notification of one of our requests: its timer starts again when it asked for
    /// that; the request's tag, if it has one.
    fn progress_of(&self, params: Option<&Value>) -> Option<String> {
        let token = token_key(params?.get("progressToken")?);
        let routes = self.progress.lock();
        let route = routes.get(&token)?;
        if let Some(reset) = &route.reset {
            reset.notify_one();
        }
        route.tag.clone()
    }
}

fn token_key(token: &Value) -> String {
    match token {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
