//! The host's side of an interactive authorization: `auth/authorize` requests, pulled by the
//! host and answered by it (C: `mcplug_auth_next_event` / `mcplug_auth_respond`).
//!
//! Why one queue for the process, not the client's own: a single client's first authorization
//! happens inside `mcplug_client_connect`, before the host holds the client's handle, so the
//! host could not pull that client's events; and a step-up in the middle of a blocking call
//! needs another thread to answer it anyway. One queue, pumped by one host thread (the bindings
//! start it when an `auth/authorize` handler is given), serves both. Each request names its
//! `server` and the connection's `auth_channel` (an option the host chose), so a host with many
//! connections knows whose it is.

use crate::error::{Error, ErrorKind, Result};
use crate::transport::BoxFuture;
use once_cell::sync::Lazy;
use parking_lot::{Condvar, Mutex};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Another place for a connection's `auth/authorize` requests than the process's queue: the
/// manager's, which hands the URL to the host's `authenticate` (or the pseudo-tool's caller)
/// and takes a captured callback URL from it. Called with the method and its params; answers
/// as the host would (`{}`, `{"callback_url"}`, or an error). An answer that never comes leaves
/// the loopback listener to take the callback.
#[derive(Clone)]
pub struct Hook(pub Arc<AskFn>);

/// What a hook is: the method and its params in, the host's answer out.
pub type AskFn = dyn Fn(&str, Value) -> BoxFuture<'static, Result<Value>> + Send + Sync;

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

struct Queue {
    events: Mutex<VecDeque<Value>>,
    ready: Condvar,
    waiting: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Result<Value>>>>,
    next: AtomicU64,
}

static QUEUE: Lazy<Queue> = Lazy::new(|| Queue {
    events: Mutex::new(VecDeque::new()),
    ready: Condvar::new(),
    waiting: Mutex::new(HashMap::new()),
    next: AtomicU64::new(1),
});

/// The most events kept for a host that does not pull them (older ones are dropped).
const MAX_EVENTS: usize = 256;

fn push(event: Value) {
    let mut events = QUEUE.events.lock();
    if events.len() >= MAX_EVENTS {
        events.pop_front();
    }
    events.push_back(event);
    QUEUE.ready.notify_all();
}

/// Asks the host (`method` with `params`) and waits up to `limit` for its answer: the result
/// object, or a `needs_auth` error when it declined, did not answer in time, or the wait was
/// dropped (the connect was cancelled: then the host is told the request was cancelled).
pub(crate) async fn ask(method: &str, params: Value, limit: Duration) -> Result<Value> {
    let id = format!("a{}", QUEUE.next.fetch_add(1, Ordering::Relaxed));
    let (tx, rx) = tokio::sync::oneshot::channel();
    QUEUE.waiting.lock().insert(id.clone(), tx);
    struct Withdraw<'a>(&'a str, &'a str, bool);
    impl Drop for Withdraw<'_> {
        fn drop(&mut self) {
            if QUEUE.waiting.lock().remove(self.0).is_some() && !self.2 {
                push(
                    json!({"type": "request_cancelled", "id": self.0, "method": self.1,
                            "reason": "the connection no longer waits for it"}),
                );
            }
        }
    }
    let mut guard = Withdraw(&id, method, false);
    push(json!({"type": "request", "id": id, "method": method, "params": params}));
    match tokio::time::timeout(limit, rx).await {
        Ok(Ok(answer)) => {
            guard.2 = true;
            answer
        }
        Ok(Err(_)) => Err(Error::new(
            ErrorKind::NeedsAuth,
            format!("{method}: the request was dropped"),
        )),
        Err(_) => {
            guard.2 = true;
            QUEUE.waiting.lock().remove(&id);
            push(json!({"type": "request_expired", "id": id, "method": method}));
            Err(Error::new(
                ErrorKind::NeedsAuth,
                format!(
                    "the host did not answer {method} within {} ms",
                    limit.as_millis()
                ),
            )
            .with_data(json!({"reason": "timeout"})))
        }
    }
}

/// The next event for the host, waiting up to `wait` (a host thread blocks here).
pub fn next_event(wait: Duration) -> Option<Value> {
    let deadline = Instant::now() + wait;
    let mut events = QUEUE.events.lock();
    loop {
        if let Some(e) = events.pop_front() {
            return Some(e);
        }
        if QUEUE.ready.wait_until(&mut events, deadline).timed_out() {
            return events.pop_front();
        }
    }
}

/// The host's answer to a request event: `{"id", "result": {...}}` or `{"id", "error":
/// {"code", "message"}}` (declined).
pub fn respond(response: &Value) -> Result<()> {
    let id = response.get("id").and_then(Value::as_str).ok_or_else(|| {
        Error::invalid("response_json needs the string `id` of the request event it answers")
    })?;
    let outcome = match (response.get("result"), response.get("error")) {
        (Some(r), None) if r.is_object() => Ok(r.clone()),
        (Some(_), None) => {
            return Err(Error::invalid(
                "response_json `result` must be an object ({} or {\"callback_url\": ...})",
            ))
        }
        (None, Some(e)) => {
            let message = e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            Err(Error::new(
                ErrorKind::NeedsAuth,
                format!("the host declined the authorization: {message}"),
            )
            .with_data(json!({"reason": "declined"})))
        }
        _ => {
            return Err(Error::invalid(
                "response_json needs exactly one of `result` or `error`",
            ))
        }
    };
    let Some(tx) = QUEUE.waiting.lock().remove(id) else {
        return Err(Error::invalid(format!(
            "no authorization request with id {id:?} is waiting for an answer (already answered, expired, cancelled, or never sent)"
        )));
    };
    let _ = tx.send(outcome);
    Ok(())
}
