//! The session core: what either end of an MCP connection needs, whichever role it plays.
//!
//! A [`Session`] holds the transport (and its optional caller-driven paths), the table of our
//! requests waiting for the peer's answers, the progress routes of those requests, and whether
//! (and why) the connection ended. [`outbound`] sends one request and waits for its answer — one
//! way of waiting, whoever asks (a host thread that reads the transport itself, a task, a
//! handshake whose timer pauses while credentials are obtained). [`inbound`] frames each incoming
//! line: an answer goes to the pending table, a progress notification to its route, and every
//! other request or notification to the role's [`inbound::Dispatch`].
//!
//! The client (`client/`) is one role: a `Client`'s state holds a `Session` and implements
//! `Dispatch`. Nothing here knows which role it serves, nor an era's encoding: a role encodes
//! its requests and hands the core the bytes.

pub mod cancel;
pub(crate) mod inbound;
pub(crate) mod outbound;
pub(crate) mod pending;

use crate::error::{Error, Result};
use crate::protocol;
use crate::transport::{Driven, HostRead, Transport};
use once_cell::sync::OnceCell;
use parking_lot::Mutex;
use pending::PendingTable;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// One connection's core (see the module's documentation).
pub(crate) struct Session {
    /// The peer's name in logs (a configured server's name).
    name: Option<String>,
    /// What the peer is ("server" to a client), for messages.
    peer: Peer,
    wire: Wire,
    pub(crate) pending: PendingTable,
    life: Life,
    /// The progress routes of our requests that asked for progress, by token.
    progress: Mutex<HashMap<String, ProgressRoute>>,
    /// The last line the peer wrote that was not JSON, for the message when it dies.
    last_invalid: Mutex<Option<String>>,
}

/// The transport, and its optional capabilities, asked for once when it is set.
#[derive(Default)]
struct Wire {
    transport: OnceCell<Arc<dyn Transport>>,
    driven: OnceCell<Option<Arc<dyn Driven>>>,
    host_read: OnceCell<Option<Arc<dyn HostRead>>>,
}

/// The role of the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    Server,
    /// The server half's (issue 33, part 2); the core's tests play it now.
    #[allow(dead_code)]
    Client,
}

impl Peer {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Peer::Server => "server",
            Peer::Client => "client",
        }
    }

    /// What we are to it.
    pub(crate) fn us(self) -> &'static str {
        match self {
            Peer::Server => "client",
            Peer::Client => "server",
        }
    }
}

/// Whether the connection ended, and why.
#[derive(Default)]
struct Life {
    closed: AtomicBool,
    /// Notified when `closed` is set.
    closed_now: Notify,
    reason: Mutex<Option<Error>>,
}

/// Where a request's progress notifications go: the tag the role labels them with, and the
/// request's timer to start again when it asked for that.
pub(crate) struct ProgressRoute {
    pub(crate) tag: Option<String>,
    pub(crate) reset: Option<Arc<Notify>>,
}

impl Session {
    pub(crate) fn new(name: Option<&str>, peer: Peer) -> Self {
        Session {
            name: name.map(str::to_string),
            peer,
            wire: Wire::default(),
            pending: PendingTable::new(),
            life: Life::default(),
            progress: Mutex::new(HashMap::new()),
            last_invalid: Mutex::new(None),
        }
    }

    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub(crate) fn peer(&self) -> Peer {
        self.peer
    }

    /// Takes the connection's transport, and asks it once for its optional capabilities.
    pub(crate) fn set_transport(&self, transport: Arc<dyn Transport>) {
        let _ = self.wire.driven.set(transport.clone().driven());
        let _ = self.wire.host_read.set(transport.clone().host_read());
        let _ = self.wire.transport.set(transport);
    }

    pub(crate) fn transport(&self) -> Result<&Arc<dyn Transport>> {
        self.wire
            .transport
            .get()
            .ok_or_else(|| Error::closed("the connection has no transport"))
    }

    /// The transport, if it was set.
    pub(crate) fn transport_if_set(&self) -> Option<&Arc<dyn Transport>> {
        self.wire.transport.get()
    }

    /// The transport's caller-driven paths, if it has them.
    pub(crate) fn driven(&self) -> Option<&Arc<dyn Driven>> {
        self.wire.driven.get().and_then(Option::as_ref)
    }

    /// The host's own reading of the transport's incoming side, if it has one.
    pub(crate) fn host_read(&self) -> Option<&Arc<dyn HostRead>> {
        self.wire.host_read.get().and_then(Option::as_ref)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.life.closed.load(Ordering::SeqCst)
    }

    /// Resolves once the connection is closed.
    pub(crate) async fn closed(&self) {
        loop {
            let notified = self.life.closed_now.notified();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// `Ok` while the connection is open; else why it ended.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(self
                .life
                .reason
                .lock()
                .clone()
                .unwrap_or_else(|| Error::closed("the connection is closed")));
        }
        Ok(())
    }

    /// The reason the connection closed, waiting a moment for the transport to report it;
    /// `fallback` if it does not.
    pub(crate) async fn close_reason_soon(&self, fallback: Error) -> Error {
        let wait = async {
            loop {
                let notified = self.life.closed_now.notified();
                if let Err(e) = self.check_open() {
                    return e;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_millis(500), wait)
            .await
            .unwrap_or(fallback)
    }

    /// Marks the connection closed with `reason` (the first time only: `None` after): every
    /// request waiting for an answer fails with it at once, and the progress routes go. Returns
    /// the started calls (tickets) among the pending requests, which the role completes.
    pub(crate) fn shut(&self, reason: &Error) -> Option<Vec<u64>> {
        if self.life.closed.swap(true, Ordering::SeqCst) {
            return None;
        }
        *self.life.reason.lock() = Some(reason.clone());
        self.life.closed_now.notify_waiters();
        let tickets = self.pending.fail_all(reason);
        self.progress.lock().clear();
        Some(tickets)
    }

    /// The transport's last diagnostic line (a stdio server's stderr), as a clause for an
    /// error message; empty when there is none.
    pub(crate) fn stderr_hint(&self) -> String {
        let tail = self
            .wire
            .transport
            .get()
            .map(|t| t.diagnostics_tail())
            .unwrap_or_default();
        match tail.last() {
            Some(line) => {
                let mut line = line.clone();
                if line.len() > 300 {
                    let mut cut = 300;
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                format!("; its last stderr line: {line}")
            }
            None => String::new(),
        }
    }

    /// Notes a line the peer wrote that was not a message we can act on.
    pub(crate) fn note_invalid(&self, text: &str) {
        *self.last_invalid.lock() = Some(text.chars().take(200).collect());
    }

    /// The last such line, taken (for the message when the connection ends).
    pub(crate) fn take_last_invalid(&self) -> Option<String> {
        self.last_invalid.lock().take()
    }

    /// Answers a request of the peer, in the background (a closed connection answers nothing).
    pub(crate) fn reply(&self, id: Value, outcome: std::result::Result<Value, Value>) {
        self.send_soon(protocol::encode_response(&id, outcome.as_ref()));
    }

    /// Answers a request of the peer with a result that is JSON text already (passed on as
    /// written), in the background.
    pub(crate) fn reply_raw(&self, id: &Value, result: &str) {
        self.send_soon(protocol::encode_raw_response(id, result));
    }

    /// Sends an encoded message in the background (a closed connection sends nothing).
    fn send_soon(&self, msg: Vec<u8>) {
        let Some(transport) = self.wire.transport.get().cloned() else {
            return;
        };
        if self.is_closed() {
            return;
        }
        crate::log::sent(self.name(), &msg);
        crate::runtime::spawn(async move {
            let _ = transport.send(msg).await;
        });
    }

    /// Answers a request of the peer now, so that a broken pipe is the caller's error.
    pub(crate) async fn reply_now(
        &self,
        id: &Value,
        outcome: std::result::Result<&Value, &Value>,
    ) -> Result<()> {
        let msg = protocol::encode_response(id, outcome);
        crate::log::sent(self.name(), &msg);
        self.transport()?.clone().send(msg).await
    }

    /// Sends a notification to the peer.
    pub(crate) async fn notify(&self, method: &str, params: Option<&Value>) -> Result<()> {
        self.check_open()?;
        let msg = protocol::encode_notification(method, params);
        crate::log::sent(self.name(), &msg);
        self.transport()?.clone().send(msg).await
    }

    /// Tells the peer we no longer wait for our request `id` (a closed connection tells nothing).
    pub(crate) async fn send_cancelled(&self, id: u64, reason: &str) {
        if self.is_closed() {
            return;
        }
        let msg = cancelled_notice(id, reason);
        crate::log::sent(self.name(), &msg);
        if let Ok(t) = self.transport() {
            let _ = t.clone().send(msg).await;
        }
    }
}

/// Our `notifications/cancelled` for our request `id`.
pub(crate) fn cancelled_notice(id: u64, reason: &str) -> Vec<u8> {
    protocol::encode_notification(
        "notifications/cancelled",
        Some(&json!({"requestId": id, "reason": reason})),
    )
}

#[cfg(test)]
mod tests;
