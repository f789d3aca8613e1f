//! An in-memory transport: the client's messages go to a [`MemoryServer`] in the same process,
//! and what that server sends arrives as from a real one. The unit tests of the client's core
//! paths (negotiation, requests, inbound requests, listen, tasks) run over it, with no process,
//! socket or pipe.

use super::{remote, BoxFuture, Inbound, Transport};
use crate::error::Error;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// The client's side: what [`crate::client::Client::connect_with`] sends through.
/// `to_server` is `None` once closed.
pub(crate) struct MemoryTransport {
    to_server: Mutex<Option<mpsc::UnboundedSender<Value>>>,
}

/// The server's side, held by a test.
pub(crate) struct MemoryServer {
    from_client: mpsc::UnboundedReceiver<Value>,
    client: Arc<Mutex<Option<Weak<dyn Inbound>>>>,
}

/// A transport factory for `connect_with`, and the server its messages reach.
pub(crate) fn pair() -> (
    impl FnOnce(Weak<dyn Inbound>) -> Arc<dyn Transport>,
    MemoryServer,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let client: Arc<Mutex<Option<Weak<dyn Inbound>>>> = Arc::new(Mutex::new(None));
    let slot = client.clone();
    let make = move |sink: Weak<dyn Inbound>| {
        *slot.lock() = Some(sink);
        Arc::new(MemoryTransport {
            to_server: Mutex::new(Some(tx)),
        }) as Arc<dyn Transport>
    };
    let server = MemoryServer {
        from_client: rx,
        client,
    };
    (make, server)
}

impl Transport for MemoryTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            let to = self.to_server.lock().clone();
            let Some(to) = to else {
                return Err(Error::closed("the in-memory transport is closed"));
            };
            for line in remote::lines(&message) {
                let value: Value = serde_json::from_slice(line)
                    .map_err(|e| Error::protocol(format!("the client sent no JSON: {e}")))?;
                to.send(value)
                    .map_err(|_| Error::closed("the in-memory server is gone"))?;
            }
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.to_server.lock().take();
        Box::pin(async {})
    }
}

impl MemoryServer {
    /// The client's next message; panics after 5 s without one (a test that hangs says where).
    pub(crate) async fn next(&mut self) -> Value {
        match tokio::time::timeout(Duration::from_secs(5), self.from_client.recv()).await {
            Ok(Some(v)) => v,
            Ok(None) => panic!("the client closed the in-memory transport"),
            Err(_) => panic!("the client sent nothing within 5 s"),
        }
    }

    /// The client's next message, or `None` when it sends nothing within `wait`.
    pub(crate) async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        tokio::time::timeout(wait, self.from_client.recv())
            .await
            .ok()
            .flatten()
    }

    fn sink(&self) -> Arc<dyn Inbound> {
        let sink = self.client.lock().clone();
        sink.and_then(|w| w.upgrade())
            .expect("the client is connected")
    }

    /// Sends a message to the client, as a server would.
    pub(crate) fn send(&self, message: Value) {
        self.sink().message(message.to_string().as_bytes());
    }

    /// Answers request `request` with `result`.
    pub(crate) fn answer(&self, request: &Value, result: Value) {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    /// Answers request `request` with a JSON-RPC error.
    pub(crate) fn fail(&self, request: &Value, code: i64, message: &str) {
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": request["id"],
            "error": {"code": code, "message": message}}));
    }

    /// The server ends the connection (as a process that exits).
    pub(crate) fn hang_up(&self, why: &str) {
        self.sink().closed(Error::closed(why.to_string()));
    }
}

/// A server dropped (its test's script ended, or panicked on a failed check) hangs up: the
/// client's pending calls fail `closed` rather than wait forever.
impl Drop for MemoryServer {
    fn drop(&mut self) {
        let sink = self.client.lock().take().and_then(|w| w.upgrade());
        if let Some(sink) = sink {
            sink.closed(Error::closed("the in-memory server is gone"));
        }
    }
}
