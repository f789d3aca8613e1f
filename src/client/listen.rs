//! `subscriptions/listen` (2026-07-28, `basic/patterns/subscriptions.mdx`): the modern era has
//! no GET stream and no `resources/subscribe`; a client that wants list changes and resource
//! updates opens one long-lived request whose answer never comes while it lasts.
//!
//! One stream per connection, carrying the union of what is wanted: the list changes the server
//! offers (`capabilities.{tools,prompts,resources}.listChanged`), once the host has a consumer
//! for them (connection option `listen`: `"auto"` opens it when the host first waits for events,
//! `true` right after connect, `false` never), and the resources the host subscribed to
//! (`resources/subscribe`/`resources/unsubscribe` through the generic request map onto the
//! stream's `resourceSubscriptions`, in every mode). A change of what is wanted opens a new
//! stream first and closes the old one once the new one is acknowledged, so nothing falls in a
//! gap; only the acknowledged stream's notifications reach the host (each carries its
//! `io.modelcontextprotocol/subscriptionId`, the request's id), as ordinary `notification`
//! events. The acknowledgement itself is the protocol's business, not a change: the host gets
//! `{"type": "listening", "subscription", "notifications", "reopened"}` instead (what the server
//! agreed to send; `reopened`: the stream follows one that ended, so changes may have been
//! missed in between — a host that keeps lists of its own lists them again).
//!
//! A stream that drops (the HTTP response stream broke, the server answered its request or sent
//! `notifications/cancelled` for it on stdio) is opened again after a delay that doubles with
//! each failure to re-open and each stream that did not last 10 s (1 s up to 30 s); what the
//! cache holds about what it covered is dropped, since its notifications may have been missed. A server that does not serve the
//! method (-32601) is not asked again: the host gets a `warning` event. Closing the connection
//! closes the stream (stdio: `notifications/cancelled`; HTTP: the response stream is closed).

use super::event::Event;
use super::options::CallOptions;
use super::{options, with_limit, Shared};
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::era::{self, Era};
use crate::protocol::{codes, RawJson};
use crate::session::pending::Outcome;
use options::ListenMode;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// The `_meta` key that ties a notification to its `subscriptions/listen` request.
pub(super) const SUBSCRIPTION_ID: &str = era::META_SUBSCRIPTION_ID;
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// The delay before a dropped stream is opened again; doubled after each failed attempt and
/// after each stream that did not last `HEALTHY` (a server that acknowledges and hangs up at
/// once is not asked again every second).
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);
const HEALTHY: Duration = Duration::from_secs(10);
/// Streams closed by this client whose late notifications are still recognized (and dropped).
const RETIRED_KEPT: usize = 8;

pub(super) struct Listen {
    inner: Mutex<Inner>,
    /// Wakes the listening task: what is wanted changed, or the connection closed.
    wake: Notify,
    /// What the last stream settled to, for `resources/subscribe` waiters.
    settled: watch::Sender<Settled>,
    /// The host waited for events once (option `listen` `"auto"`).
    consumer_seen: AtomicBool,
}

#[derive(Default)]
struct Inner {
    running: bool,
    shut: bool,
    /// Listen for the list changes the server offers.
    list_changes: bool,
    /// `resources/subscribe`d URIs.
    uris: BTreeSet<String>,
    /// Bumped by every change of what is wanted.
    version: u64,
    /// The request being opened, until the server acknowledges it.
    opening: Option<Opening>,
    /// The acknowledged stream: its notifications reach the host.
    active: Option<u64>,
    /// Streams closed by this client (newest last).
    retired: Vec<u64>,
    /// The last stream ended (rather than being replaced by a newer one): the next one follows
    /// a gap in which changes may have been missed.
    gap: bool,
    /// Why the server cannot be listened to (it does not serve the method).
    unsupported: Option<Error>,
}

struct Opening {
    id: u64,
    filter: Value,
    ack: oneshot::Sender<Value>,
}

/// How far the stream got: what `resources/subscribe` waits for.
#[derive(Clone, Default)]
struct Settled {
    /// The newest version of what is wanted that a stream was acknowledged for (or that needs
    /// no stream), and what that stream's acknowledgement honoured.
    acked: u64,
    honored: Value,
    /// The newest version that could not be listened for, and why.
    failed: Option<(u64, Error)>,
}

/// An open (or opening) listen request.
struct Stream {
    id: u64,
    filter: Value,
    answer: oneshot::Receiver<Outcome>,
    /// When the server acknowledged it.
    since: Instant,
}

impl Listen {
    pub(super) fn new() -> Self {
        Listen {
            inner: Mutex::new(Inner::default()),
            wake: Notify::new(),
            settled: watch::channel(Settled::default()).0,
            consumer_seen: AtomicBool::new(false),
        }
    }

    /// The connection is closing: the task ends.
    pub(super) fn shut(&self) {
        let mut inner = self.inner.lock();
        inner.shut = true;
        inner.opening = None;
        drop(inner);
        self.wake.notify_one();
        self.settled.send_modify(|s| {
            s.failed = Some((u64::MAX, Error::closed("the connection is closed")));
        });
    }

    fn retire(&self, id: u64) {
        let mut inner = self.inner.lock();
        if inner.active == Some(id) {
            inner.active = None;
        }
        if inner.opening.as_ref().is_some_and(|o| o.id == id) {
            inner.opening = None;
        }
        inner.retired.push(id);
        let n = inner.retired.len();
        if n > RETIRED_KEPT {
            inner.retired.drain(..n - RETIRED_KEPT);
        }
    }
}

/// The subscription id a notification carries (our ids are numbers; a server may echo one as
/// a string).
fn subscription_id(params: Option<&Value>) -> Option<u64> {
    let id = params?.get("_meta")?.get(SUBSCRIPTION_ID)?;
    id.as_u64()
        .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
}

/// What a notification is to the listen machinery.
pub(super) enum Route {
    /// Not a subscription's: deliver it as always.
    Plain,
    /// The active stream's: deliver it.
    Deliver,
    /// The acknowledgement of the stream being opened: this event instead.
    Acknowledged(Event),
    /// A stream this client closed or never opened: drop it.
    Drop,
}

impl Listen {
    fn is_modern_era(&self, conn: &Shared) -> bool {
        matches!(
            conn.era.read().as_ref().map(|s| &s.era),
            Some(Era::Modern { .. })
        )
    }

    /// The host waits for events: with `listen` `"auto"`, list changes are worth listening
    /// for now. Cheap after the first time.
    pub(super) fn events_wanted(&self, conn: &Arc<Shared>) {
        if conn.options.listen == ListenMode::Auto
            && !self.consumer_seen.load(Ordering::Relaxed)
            && !self.consumer_seen.swap(true, Ordering::Relaxed)
        {
            self.listen_for(conn, true, None);
        }
    }

    /// Right after connect, with `listen` `true`.
    pub(super) fn listen_at_connect(&self, conn: &Arc<Shared>) {
        if conn.options.listen == ListenMode::Always {
            self.listen_for(conn, true, None);
        }
    }

    /// Wants list changes (`list_changes`) and/or one more resource (`uri`) on the stream, and
    /// starts the task that keeps it open. Returns the new version of what is wanted.
    fn listen_for(&self, conn: &Arc<Shared>, list_changes: bool, uri: Option<&str>) -> u64 {
        if !self.is_modern_era(conn) {
            return 0;
        }
        let mut inner = self.inner.lock();
        if inner.shut {
            return inner.version;
        }
        let mut changed = false;
        if list_changes && !inner.list_changes {
            inner.list_changes = true;
            changed = true;
        }
        if let Some(uri) = uri {
            changed |= inner.uris.insert(uri.to_string());
        }
        if changed {
            inner.version += 1;
        }
        let version = inner.version;
        if !inner.running {
            inner.running = true;
            let weak = Arc::downgrade(conn);
            let listen = conn.listen.clone();
            crate::runtime::spawn(listen_task(weak, listen));
        }
        drop(inner);
        self.wake.notify_one();
        version
    }

    /// What the stream should carry now, and the version of that want: `None` when nothing.
    fn wanted(&self, conn: &Shared) -> (u64, Option<Value>) {
        let inner = self.inner.lock();
        let mut filter = Map::new();
        if inner.list_changes {
            for (cap, key) in [
                ("tools", "toolsListChanged"),
                ("prompts", "promptsListChanged"),
                ("resources", "resourcesListChanged"),
            ] {
                let offered = conn.host.server_capabilities.read()[cap]["listChanged"] == true;
                if offered {
                    filter.insert(key.into(), json!(true));
                }
            }
        }
        if !inner.uris.is_empty() {
            filter.insert(
                "resourceSubscriptions".into(),
                json!(inner.uris.iter().collect::<Vec<_>>()),
            );
        }
        let filter = (!filter.is_empty()).then_some(Value::Object(filter));
        (inner.version, filter)
    }

    /// Routes a notification that may belong to a stream (called for every notification of
    /// the modern era, on the thread that read it, before any later message is read).
    pub(super) fn route_listen(
        &self,
        conn: &Shared,
        method: &str,
        params: Option<&Value>,
    ) -> Route {
        let Some(id) = subscription_id(params) else {
            return Route::Plain;
        };
        let mut inner = self.inner.lock();
        if method == ACKNOWLEDGED {
            if inner.opening.as_ref().is_some_and(|o| o.id == id) {
                let opening = inner.opening.take().expect("checked");
                // From this message on, the new stream is the one the host hears; the old one
                // (if any) is closed by the task.
                if let Some(old) = inner.active.replace(id) {
                    inner.retired.push(old);
                }
                let reopened = std::mem::take(&mut inner.gap);
                drop(inner);
                let honored = params
                    .and_then(|p| p.get("notifications"))
                    .cloned()
                    .unwrap_or(json!({}));
                if reopened {
                    // Before the host hears of it, so that what it lists again is fresh.
                    self.forget_covered(conn, &opening.filter);
                }
                let event = Event::Listening {
                    subscription: id,
                    notifications: honored.clone(),
                    reopened,
                };
                let _ = opening.ack.send(honored);
                return Route::Acknowledged(event);
            }
            return Route::Drop;
        }
        if inner.active == Some(id) {
            Route::Deliver
        } else {
            if !inner.retired.contains(&id) {
                tracing::debug!(
                    method,
                    id,
                    "dropped a notification of a subscription this client does not have"
                );
            }
            Route::Drop
        }
    }

    /// A server's `notifications/cancelled` for a listen request (how a stdio server ends a
    /// subscription): the stream is over. Returns whether it was one of ours.
    pub(super) fn listen_cancelled_by_server(&self, conn: &Shared, request_id: &Value) -> bool {
        let Some(id) = request_id.as_u64() else {
            return false;
        };
        let ours = {
            let inner = self.inner.lock();
            inner.active == Some(id) || inner.opening.as_ref().is_some_and(|o| o.id == id)
        };
        if ours {
            let raw = RawValue::from_string(id.to_string()).expect("a number is JSON");
            let _ = conn.session.pending.complete(
                &raw,
                Err(Error::closed(
                    "the server ended the subscription (notifications/cancelled)",
                )),
            );
        }
        ours
    }

    /// `resources/subscribe` of the modern era: the URI joins the stream's
    /// `resourceSubscriptions`; returns `{}` once a stream carrying it is acknowledged.
    pub(super) async fn subscribe_resource(
        &self,
        conn: &Arc<Shared>,
        params: Option<&Value>,
        options: &CallOptions,
    ) -> Result<RawJson> {
        let uri = resource_uri("resources/subscribe", params)?;
        if let Some(e) = self.inner.lock().unsupported.clone() {
            return Err(e);
        }
        if !conn.host.server_declares(&["resources", "subscribe"]) {
            return Err(Error::invalid(format!(
                "resources/subscribe {uri:?}: the server does not offer resource subscriptions (its capabilities have no resources.subscribe)"
            )));
        }
        let mut settled = self.settled.subscribe();
        let version = self.listen_for(conn, false, Some(&uri));
        let timeout = options.timeout.or(conn.options.request_timeout);
        let wait = async {
            loop {
                {
                    let s = settled.borrow_and_update();
                    if s.acked >= version {
                        let honored = s.honored["resourceSubscriptions"]
                            .as_array()
                            .is_some_and(|l| l.iter().any(|u| u == uri.as_str()));
                        return if honored {
                            Ok(())
                        } else {
                            Err(Error::new(
                                ErrorKind::Denied,
                                format!("resources/subscribe {uri:?}: the server's acknowledgement of the subscription left the URI out"),
                            ))
                        };
                    }
                    if let Some((v, e)) = &s.failed {
                        if *v >= version {
                            return Err(e.clone());
                        }
                    }
                }
                if settled.changed().await.is_err() {
                    return Err(Error::closed("the connection is closed"));
                }
            }
        };
        let outcome = match with_limit(timeout, wait).await {
            Some(r) => r,
            None => Err(Error::timeout(format!(
                "resources/subscribe {uri:?}: the server did not acknowledge the subscription within {} ms",
                timeout.map(|t| t.as_millis()).unwrap_or_default()
            ))),
        };
        if outcome.is_err() {
            // Nothing changed for the host: the URI is not subscribed.
            self.drop_uri(&uri);
        }
        outcome.map(|()| RawJson::from_value(&json!({})))
    }

    /// `resources/unsubscribe` of the modern era: the URI leaves the stream (a new stream
    /// without it replaces the old one; none if nothing else is wanted). Returns `{}` at once.
    pub(super) fn unsubscribe_resource(&self, params: Option<&Value>) -> Result<RawJson> {
        let uri = resource_uri("resources/unsubscribe", params)?;
        self.drop_uri(&uri);
        Ok(RawJson::from_value(&json!({})))
    }

    fn drop_uri(&self, uri: &str) {
        let mut inner = self.inner.lock();
        if inner.uris.remove(uri) {
            inner.version += 1;
            drop(inner);
            self.wake.notify_one();
        }
    }

    /// Closes a stream of ours: forgotten, and the server told (stdio: `notifications/cancelled`;
    /// HTTP: the transport closes the request's response stream for it).
    async fn end_stream(&self, conn: &Shared, id: u64) {
        self.retire(id);
        if conn.session.pending.forget(id) {
            conn.session
                .send_cancelled(id, "the client closed the subscription")
                .await;
        }
    }

    /// Sends a `subscriptions/listen` request for `filter`; its acknowledgement arrives on `ack`.
    async fn open_stream(
        &self,
        conn: &Shared,
        filter: &Value,
    ) -> Result<(Stream, oneshot::Receiver<Value>)> {
        conn.check_open()?;
        let (id, answer) = conn.session.pending.register();
        let (tx, ack) = oneshot::channel();
        {
            let mut inner = self.inner.lock();
            if inner.shut {
                conn.session.pending.forget(id);
                return Err(Error::closed("the connection is closed"));
            }
            inner.opening = Some(Opening {
                id,
                filter: filter.clone(),
                ack: tx,
            });
        }
        let message = {
            let era = conn.era.read();
            conn.encode_params(
                id,
                "subscriptions/listen",
                Some(json!({ "notifications": filter })),
                false,
                era.as_ref(),
                None,
            )
        };
        crate::log::sent(conn.name(), &message);
        if let Err(e) = conn.transport()?.clone().send(message).await {
            self.retire(id);
            conn.session.pending.forget(id);
            return Err(e);
        }
        Ok((
            Stream {
                id,
                filter: filter.clone(),
                answer,
                since: Instant::now(),
            },
            ack,
        ))
    }

    /// Drops what the cache holds about what a stream covered: it may have missed changes.
    fn forget_covered(&self, conn: &Shared, filter: &Value) {
        for (key, method) in [
            ("toolsListChanged", "notifications/tools/list_changed"),
            ("promptsListChanged", "notifications/prompts/list_changed"),
            (
                "resourcesListChanged",
                "notifications/resources/list_changed",
            ),
        ] {
            if filter[key] == true {
                conn.cache.on_notification(method, None);
            }
        }
        if let Some(uris) = filter["resourceSubscriptions"].as_array() {
            for uri in uris.iter().filter_map(Value::as_str) {
                conn.cache.invalidate_resource(uri);
            }
        }
    }

    fn listen_failed(&self, version: u64, error: Error) {
        self.settled
            .send_modify(|s| s.failed = Some((version, error)));
    }

    /// The server does not serve `subscriptions/listen`: never asked again.
    fn listen_unsupported(&self, conn: &Shared, version: u64, error: Error) {
        let message = format!(
            "the server does not serve subscriptions/listen ({}): no list changes or resource updates will arrive",
            error.message
        );
        let e = Error {
            message: message.clone(),
            ..error
        };
        self.inner.lock().unsupported = Some(e.clone());
        self.listen_failed(version, e);
        conn.events
            .push_event(Event::warning("listen_unsupported", message));
    }
}

fn resource_uri(method: &str, params: Option<&Value>) -> Result<String> {
    params
        .and_then(|p| p.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| Error::invalid(format!("{method} needs params {{\"uri\": \"...\"}}")))
}

/// Whether a failed listen request says the server does not serve the method.
fn says_unsupported(e: &Error) -> bool {
    e.kind == ErrorKind::Rpc && e.code == Some(codes::METHOD_NOT_FOUND)
}

/// Sleeps `delay`, or less if the connection closes or what is wanted changes (a host's
/// `resources/subscribe` is not kept waiting for a backoff).
async fn pause(listen: &Listen, delay: Duration) {
    let _ = tokio::time::timeout(delay, listen.wake.notified()).await;
}

/// Keeps the connection's stream open while anything is wanted (see the module's text).
async fn listen_task(weak: Weak<Shared>, listen: Arc<Listen>) {
    let mut current: Option<Stream> = None;
    let mut retry = FIRST_RETRY;
    loop {
        let woken = listen.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let Some(shared) = weak.upgrade() else { return };
        if listen.inner.lock().shut || shared.check_open().is_err() {
            return;
        }
        if listen.inner.lock().unsupported.is_some() {
            return;
        }
        let (version, filter) = shared.listen.wanted(&shared);
        let Some(filter) = filter else {
            // Nothing to listen for (any more).
            if let Some(old) = current.take() {
                shared.listen.end_stream(&shared, old.id).await;
            }
            listen.settled.send_modify(|s| {
                s.acked = version;
                s.honored = json!({});
            });
            drop(shared);
            woken.await;
            continue;
        };
        if let Some(mut stream) = current.take() {
            if stream.filter == filter {
                // Up, with what is wanted: wait for it to end, or for the want to change.
                listen
                    .settled
                    .send_modify(|s| s.acked = s.acked.max(version));
                drop(shared);
                tokio::select! {
                    outcome = &mut stream.answer => {
                        let Some(shared) = weak.upgrade() else { return };
                        listen.retire(stream.id);
                        listen.inner.lock().gap = true;
                        // The server ended it gracefully (shutting down, or its backlog for this
                        // stream overflowed), or it dropped: listen again.
                        match outcome {
                            Ok(Err(_)) if shared.check_open().is_err() => return,
                            Ok(Err(e)) if says_unsupported(&e) => {
                                shared.listen.listen_unsupported(&shared, version, e);
                                return;
                            }
                            Ok(Err(e)) => {
                                tracing::debug!("the subscriptions/listen stream dropped: {}", e.message);
                            }
                            // Ok(Ok): the graceful end. Err: forgotten by someone else (only this
                            // task forgets its streams).
                            _ => {}
                        }
                        drop(shared);
                        let delay = if stream.since.elapsed() >= HEALTHY {
                            retry = FIRST_RETRY;
                            FIRST_RETRY
                        } else {
                            let delay = retry;
                            retry = (retry * 2).min(MAX_RETRY);
                            delay
                        };
                        pause(&listen, delay).await;
                    }
                    _ = &mut woken => current = Some(stream),
                }
                continue;
            }
            current = Some(stream);
        }
        // Open a stream with what is wanted now; the current one (if any) stays until the new
        // one is acknowledged.
        let ack_within = shared
            .options
            .request_timeout
            .unwrap_or(options::DEFAULT_REQUEST_TIMEOUT);
        let opened = shared.listen.open_stream(&shared, &filter).await;
        drop(shared);
        let failure = match opened {
            Err(e) => Some(e),
            Ok((mut stream, ack)) => {
                let outcome = tokio::select! {
                    honored = ack => honored.map_err(|_| Error::closed("the connection is closed")),
                    // Answered (or failed) before any acknowledgement.
                    outcome = &mut stream.answer => Err(match outcome {
                        Ok(Ok(_)) => Error::protocol("the server ended the subscription before acknowledging it"),
                        Ok(Err(e)) => e,
                        Err(_) => Error::closed("the connection is closed"),
                    }),
                    _ = tokio::time::sleep(ack_within) => Err(Error::timeout(format!(
                        "the server did not acknowledge subscriptions/listen within {} ms",
                        ack_within.as_millis()
                    ))),
                };
                let Some(shared) = weak.upgrade() else { return };
                match outcome {
                    Ok(honored) => {
                        stream.since = Instant::now();
                        if let Some(old) = current.replace(stream) {
                            shared.listen.end_stream(&shared, old.id).await;
                        }
                        listen.settled.send_modify(|s| {
                            s.acked = version;
                            s.honored = honored;
                        });
                        None
                    }
                    Err(e) => {
                        shared.listen.end_stream(&shared, stream.id).await;
                        Some(e)
                    }
                }
            }
        };
        if let Some(e) = failure {
            let Some(shared) = weak.upgrade() else { return };
            if shared.check_open().is_err() || listen.inner.lock().shut {
                return;
            }
            if says_unsupported(&e) {
                if let Some(old) = current.take() {
                    shared.listen.end_stream(&shared, old.id).await;
                }
                shared.listen.listen_unsupported(&shared, version, e);
                return;
            }
            tracing::debug!("subscriptions/listen failed: {}", e.message);
            shared.listen.listen_failed(version, e);
            drop(shared);
            pause(&listen, retry).await;
            retry = (retry * 2).min(MAX_RETRY);
        }
    }
}
