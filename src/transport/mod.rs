//! Transports turn bytes into messages and back, and nothing more.
//!
//! A transport is a pair of message streams plus a few verbs: [`Transport::send`] one framed
//! message, [`Transport::close`] gracefully; what arrives goes to an [`Inbound`] sink that the
//! connection provides. The sink is held weakly, so a transport never keeps its connection alive.

pub mod credentials;
pub mod http;
#[cfg(test)]
pub(crate) mod memory;
pub mod param_headers;
pub mod remote;
pub mod sse;
pub mod stdio;
mod stdio_read;
mod stdio_wake;
pub mod ws;

use crate::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a transport hands to its connection.
pub trait Inbound: Send + Sync {
    /// One framed message (a line, without its newline), not yet parsed: the connection parses
    /// it, so a response's result can stay the text the server sent.
    fn message(self: std::sync::Arc<Self>, line: &[u8]);
    /// Like [`Inbound::message`], from a transport that waits for the answer to its request
    /// `id` (JSON text): whether this message was that answer (read off the connection's own
    /// parse, so the message is not parsed twice).
    fn answer(self: std::sync::Arc<Self>, line: &[u8], id: &str) -> bool {
        let is = remote::response_id(line).as_deref() == Some(id);
        self.message(line);
        is
    }
    /// A line the server wrote to its stderr (stdio only).
    fn stderr(self: std::sync::Arc<Self>, line: String);
    /// A request the transport could not deliver or get an answer to (remote transports: the
    /// POST failed, the server answered with an HTTP error, the response stream broke): the
    /// request with this id (JSON text) fails with `error`, the connection stays.
    fn request_failed(self: std::sync::Arc<Self>, id: &str, error: Error);
    /// The transport is finished (the server exited, a pipe broke, a message was too big).
    /// Called at most once.
    fn closed(self: std::sync::Arc<Self>, error: Error);
}

/// The request a caller drives (see [`Transport::send_driven`]): the last message of what it
/// sends.
pub struct DrivenRequest {
    pub id: u64,
    /// When the caller wrote the request itself (a `tools/call`): what a transport would read
    /// back from it, so that it need not.
    pub shape: Option<RequestShape>,
}

pub struct RequestShape {
    pub method: &'static str,
    /// `params.name`.
    pub name: String,
    /// The modern `_meta` protocol version, when the request carries one.
    pub version: Option<String>,
}

/// What one turn of [`Transport::drive`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drive {
    /// Read what there was, or waited the time given: look at your answer again.
    Turned,
    /// Another caller is reading: wait for your answer or for the baton.
    Busy,
    /// The stream has ended, or this transport cannot be driven: wait the ordinary way.
    Finished,
}

pub trait Transport: Send + Sync {
    /// Sends one message, already serialized with its trailing newline. The future owns what it
    /// needs, so a caller that stops waiting (timeout, cancel) can let it finish in the background
    /// instead of dropping it halfway through a message, which would corrupt the stream.
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>>;
    /// Closes gracefully and releases everything (for stdio: the whole process group is gone
    /// and reaped when this returns). Idempotent.
    fn close(&self) -> BoxFuture<'_, ()>;
    /// Like [`Transport::send`], from a caller (a host thread) that then waits for the answer
    /// to its `request` in it (the last message), calling [`Transport::drive`] between the
    /// turns of its wait and [`Transport::leave_call`] when it stops: a transport may leave
    /// that request's I/O to the caller's own thread (Streamable HTTP: see `http::direct`).
    fn send_driven(
        self: Arc<Self>,
        message: Vec<u8>,
        _request: DrivenRequest,
    ) -> BoxFuture<'static, Result<(), Error>> {
        self.send(message)
    }
    /// Sends a small message at once from the calling thread, if that can be done without
    /// waiting: `true` when it went out whole, `false` when nothing was sent (the caller then
    /// sends it the ordinary way). Saves a caller the send future and its timer and cancel race
    /// when the message fits the pipe (stdio).
    fn send_now(&self, _message: &[u8]) -> bool {
        false
    }
    /// Whether [`Transport::send_driven`] uses a [`DrivenRequest`]'s `shape` (which saves it a
    /// parse of the message); a caller builds one only for a transport that does.
    fn uses_request_shape(&self) -> bool {
        false
    }
    /// Whether a caller waiting for an answer may read the incoming side itself, on its own
    /// thread, with [`Transport::drive`] (stdio: see `stdio_read`). Every caller that waits for
    /// an answer brackets its wait with [`Transport::enter_call`] and [`Transport::leave_call`],
    /// saying whether it can drive, so the transport knows who reads.
    fn drivable(&self) -> bool {
        false
    }
    fn enter_call(&self, _can_drive: bool) {}
    fn leave_call(&self, _could_drive: bool) {}
    /// One turn: read and deliver what arrives within `wait`, unless another caller is reading;
    /// the turn also ends when `also` (a descriptor of the caller's) becomes readable.
    /// Blocks the calling thread: only ever called from a host thread, never a runtime worker.
    fn drive(&self, _wait: std::time::Duration, _also: Option<std::os::fd::RawFd>) -> Drive {
        Drive::Finished
    }
    /// Whether a turn of [`Transport::drive`] without `also` can be ended early from another
    /// thread with [`Transport::interrupt_drive`] (stdio, where the reader blocks in `read`).
    fn drive_interruptible(&self) -> bool {
        false
    }
    /// Ends the current or the next turn of [`Transport::drive`] at once (a spurious early end
    /// is harmless: the driver looks at what it waits for and drives again).
    fn interrupt_drive(&self) {}
    /// A started call (nobody blocks on it) is in flight / has finished: while any is, something
    /// must read even when no caller waits.
    fn ticket_started(&self) {}
    fn ticket_finished(&self) {}
    /// Started calls in flight.
    fn tickets(&self) -> usize {
        0
    }
    /// For a host whose own event loop reads the incoming side: a new descriptor of it (stdio:
    /// the server's stdout), which the host reads, handing every chunk in order to
    /// [`Transport::feed`]; nobody else reads until [`Transport::host_release`]. `None` when this
    /// transport has no such side.
    fn host_reader(&self) -> Option<Result<std::os::fd::RawFd, Error>> {
        None
    }
    /// A chunk the host read from the descriptor of [`Transport::host_reader`].
    fn feed(&self, _data: &[u8]) {}
    /// The host stopped reading (the end of the stream, an error, closing): the transport reads
    /// again by itself.
    fn host_release(&self) {}
    /// Notified when the caller that was driving leaves, so that a waiting one takes over.
    fn baton(&self) -> Option<&tokio::sync::Notify> {
        None
    }
    /// Resolves once every diagnostic line (stderr) the server wrote was delivered.
    fn drained(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// The last lines of diagnostics (stderr) kept for error messages.
    fn diagnostics_tail(&self) -> Vec<String> {
        Vec::new()
    }
    /// A fingerprint of the credentials this transport sends now (for a remote one, every
    /// header it adds to its requests): results the server marked `"private"` are served from
    /// the connection's cache only under the same fingerprint (see `client/cache.rs`). A
    /// transport whose headers change (a refreshed token) must return a new one.
    fn credential(&self) -> u64 {
        0
    }
}
