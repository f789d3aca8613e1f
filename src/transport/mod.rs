//! Transports turn bytes into messages and back, and nothing more.
//!
//! A transport is a pair of message streams plus a few verbs: [`Transport::send`] one framed
//! message, [`Transport::close`] gracefully; what arrives goes to an [`Inbound`] sink that the
//! connection provides. The sink is held weakly, so a transport never keeps its connection alive.

pub mod credentials;
pub(crate) mod fds;
pub mod http;
#[cfg(test)]
pub(crate) mod memory;
pub mod param_headers;
pub mod proxy;
pub mod remote;
pub mod sse;
pub mod stdio;
mod stdio_read;
mod stdio_wake;
pub mod tls;
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

/// The request a caller drives (see [`Driven::send_driven`]): the last message of what it
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

/// What one turn of [`Driven::drive`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drive {
    /// Read what there was, or waited the time given: look at your answer again.
    Turned,
    /// Another caller is reading: wait for your answer or for the baton.
    Busy,
    /// The stream has ended, or this transport cannot be driven: wait the ordinary way.
    Finished,
}

/// What every transport does: send a message, close, and say what it knows of its server. The
/// caller-driven fast paths are optional capabilities ([`Driven`], [`HostRead`]), asked for once
/// when the client takes the transport.
pub trait Transport: Send + Sync {
    /// Sends one message, already serialized with its trailing newline. The future owns what it
    /// needs, so a caller that stops waiting (timeout, cancel) can let it finish in the background
    /// instead of dropping it halfway through a message, which would corrupt the stream.
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>>;
    /// Closes gracefully and releases everything (for stdio: the whole process group is gone
    /// and reaped when this returns). Idempotent.
    fn close(&self) -> BoxFuture<'_, ()>;
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
    /// This transport's caller-driven paths, if it has them (see [`Driven`]).
    fn driven(self: Arc<Self>) -> Option<Arc<dyn Driven>> {
        None
    }
    /// The host's own reading of the incoming side, if this transport has one (see
    /// [`HostRead`]).
    fn host_read(self: Arc<Self>) -> Option<Arc<dyn HostRead>> {
        None
    }
}

/// A transport whose incoming side a waiting caller (a host thread) may read itself, on its own
/// thread, instead of waiting for a runtime thread to hand it the answer (stdio: see
/// `stdio_read`; Streamable HTTP: see `http::direct`).
pub trait Driven: Send + Sync {
    /// Like [`Transport::send`], from a caller that then waits for the answer to its `request`
    /// in it (the last message), calling [`Driven::drive`] between the turns of its wait and
    /// [`Driven::leave_call`] when it stops: a transport may leave that request's I/O to the
    /// caller's own thread.
    fn send_driven(
        self: Arc<Self>,
        message: Vec<u8>,
        request: DrivenRequest,
    ) -> BoxFuture<'static, Result<(), Error>>;
    /// Sends a small message at once from the calling thread, if that can be done without
    /// waiting: `true` when it went out whole, `false` when nothing was sent (the caller then
    /// sends it the ordinary way). Saves a caller the send future and its timer and cancel race
    /// when the message fits the pipe (stdio).
    fn send_now(&self, _message: &[u8]) -> bool {
        false
    }
    /// Whether [`Driven::send_driven`] uses a [`DrivenRequest`]'s `shape` (which saves it a
    /// parse of the message); a caller builds one only for a transport that does.
    fn uses_request_shape(&self) -> bool {
        false
    }
    /// Every caller that waits for an answer brackets its wait with these, saying whether it
    /// can drive, so the transport knows who reads.
    fn enter_call(&self, _can_drive: bool) {}
    fn leave_call(&self, _could_drive: bool) {}
    /// One turn: read and deliver what arrives within `wait`, unless another caller is reading;
    /// the turn also ends when `also` (a descriptor of the caller's) becomes readable.
    /// Blocks the calling thread: only ever called from a host thread, never a runtime worker.
    fn drive(&self, wait: std::time::Duration, also: Option<std::os::fd::RawFd>) -> Drive;
    /// Whether a turn of [`Driven::drive`] without `also` can be ended early from another
    /// thread with [`Driven::interrupt_drive`] (stdio, where the reader blocks in `read`).
    fn drive_interruptible(&self) -> bool {
        false
    }
    /// Ends the current or the next turn of [`Driven::drive`] at once (a spurious early end
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
    /// Notified when the caller that was driving leaves, so that a waiting one takes over.
    fn baton(&self) -> Option<&tokio::sync::Notify> {
        None
    }
}

/// A transport whose incoming side a host's own event loop may read (stdio: the server's
/// stdout).
pub trait HostRead: Send + Sync {
    /// A new descriptor of the incoming side, which the host reads, handing every chunk in order
    /// to [`HostRead::feed`]; nobody else reads until [`HostRead::host_release`].
    fn host_reader(&self) -> Result<std::os::fd::RawFd, Error>;
    /// A chunk the host read from the descriptor of [`HostRead::host_reader`].
    fn feed(&self, data: &[u8]);
    /// The host stopped reading (the end of the stream, an error, closing): the transport reads
    /// again by itself.
    fn host_release(&self);
}
