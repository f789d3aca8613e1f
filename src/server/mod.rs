//! The server half (issue 33): a manager's pool served as one MCP server ([`serve`]), each
//! downstream client's session on the session core ([`session`]), the relay of what it asks
//! ([`pool`]). Served over two descriptors (stdio, or a pair a host hands over); Streamable
//! HTTP and HTTP+SSE come next.

pub(crate) mod http;
pub(crate) mod pool;
pub(crate) mod session;

pub use pool::Names;

use crate::error::{Error, Result};
use crate::manager::Manager;
use crate::transport::fds::FdTransport;
use pool::PoolServer;
use serde_json::Value;
use session::{Handler, ServerSession};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// The longest line a client may send (a message of the stdio transport).
const MAX_LINE: usize = 64 << 20;

/// How long a request of ours to a client (sampling, elicitation, roots asked by an upstream)
/// may wait for its answer: a person may be answering.
const ASK_TIMEOUT: Duration = Duration::from_secs(600);

/// The keys of `serve`'s options.
const SERVE_KEYS: &[&str] = &["transport", "read_fd", "write_fd", "listen", "names"];

/// Where `transport: "http"` listens unless told.
const DEFAULT_LISTEN: &str = "127.0.0.1:0";

/// A manager's pool being served (see [`serve`]).
pub struct Server {
    pool: PoolServer,
    /// The client's session over descriptors, held here (the pool's state knows sessions
    /// weakly: each session holds the state through its handler).
    sessions: parking_lot::Mutex<Vec<Arc<ServerSession>>>,
    http: Option<http::HttpServing>,
}

/// Serves `manager`'s pool as one MCP server. `options`: `transport` — `"stdio"` (this
/// process's stdin and stdout), `"fds"` (`read_fd` and `write_fd`, the host's descriptors,
/// duplicated: they stay the host's) or `"http"` (Streamable HTTP at `/mcp` on `listen`,
/// default `127.0.0.1:0`: a port of its own); `names` — `"prefixed"` (default: the pool's
/// `mcp__<server>__<tool>`) or `"unprefixed"` (the servers' own names, the first server in
/// configuration order winning a collision). While it serves, the manager's events are the
/// server's: it routes them to its clients.
pub fn serve(manager: &Manager, options: &Value) -> Result<Server> {
    let o = options.as_object().ok_or_else(|| {
        Error::invalid(format!(
            "serve options must be a JSON object (got {options})"
        ))
    })?;
    if let Some(k) = o.keys().find(|k| !SERVE_KEYS.contains(&k.as_str())) {
        return Err(Error::invalid(format!(
            "serve options: unknown key {k:?}; the keys are {}",
            SERVE_KEYS.join(", ")
        )));
    }
    let names = match o.get("names") {
        None | Some(Value::Null) => Names::Prefixed,
        Some(Value::String(s)) => Names::parse(s)?,
        Some(v) => {
            return Err(Error::invalid(format!(
                "serve option `names` must be a string (got {v})"
            )))
        }
    };
    let transport = o.get("transport").and_then(Value::as_str);
    let only_for = |key: &str, transport: &str| -> Result<()> {
        match o.get(key) {
            Some(_) => Err(Error::invalid(format!(
                "serve option `{key}` is for `transport: \"{transport}\"` only"
            ))),
            None => Ok(()),
        }
    };
    match transport {
        Some("http") => {
            only_for("read_fd", "fds")?;
            only_for("write_fd", "fds")?;
            let listen = match o.get("listen") {
                None | Some(Value::Null) => DEFAULT_LISTEN,
                Some(Value::String(s)) => s.as_str(),
                Some(v) => {
                    return Err(Error::invalid(format!(
                        "serve option `listen` must be a \"host:port\" string (got {v})"
                    )))
                }
            };
            let pool = PoolServer::new(manager, names);
            let served =
                http::listen(listen, Arc::new(pool.handler()), pool.opener(), ASK_TIMEOUT)?;
            Ok(Server {
                pool,
                sessions: parking_lot::Mutex::new(Vec::new()),
                http: Some(served),
            })
        }
        Some("stdio") | Some("fds") => {
            only_for("listen", "http")?;
            let (read, write) = if transport == Some("stdio") {
                only_for("read_fd", "fds")?;
                only_for("write_fd", "fds")?;
                let dup = |fd: std::os::fd::BorrowedFd<'_>, which: &str| {
                    crate::sys::fd::dup_cloexec(fd)
                        .map_err(|e| Error::invalid(format!("{which} cannot be served: {e}")))
                };
                (
                    dup(std::io::stdin().as_fd(), "stdin")?,
                    dup(std::io::stdout().as_fd(), "stdout")?,
                )
            } else {
                (descriptor(o, "read_fd")?, descriptor(o, "write_fd")?)
            };
            let pool = PoolServer::new(manager, names);
            let session = serve_fds(Arc::new(pool.handler()), &read, &write, ASK_TIMEOUT)?;
            pool.opened(&session);
            Ok(Server {
                pool,
                sessions: parking_lot::Mutex::new(vec![session]),
                http: None,
            })
        }
        _ => Err(Error::invalid(format!(
            "serve option `transport` must be \"stdio\", \"fds\" or \"http\" (got {})",
            o.get("transport").unwrap_or(&Value::Null)
        ))),
    }
}

/// The host's descriptor `key` names, duplicated.
fn descriptor(o: &serde_json::Map<String, Value>, key: &str) -> Result<OwnedFd> {
    let given = o.get(key).unwrap_or(&Value::Null);
    let n = given
        .as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "serve option `{key}` must be a descriptor number (got {given})"
            ))
        })?;
    crate::sys::fd::dup_number(n).map_err(|e| {
        Error::invalid(format!(
            "serve option `{key}`: descriptor {n} cannot be used: {e}"
        ))
    })
}

impl Server {
    /// Where clients reach it (`http://HOST:PORT/mcp`, Streamable HTTP); `None` over
    /// descriptors.
    pub fn url(&self) -> Option<&str> {
        self.http.as_ref().map(http::HttpServing::url)
    }

    /// Resolves once it serves no more: over descriptors, when the client closed its end (or
    /// [`Server::close`]); over HTTP, at [`Server::close`].
    pub async fn done(&self) {
        if let Some(h) = &self.http {
            return h.done().await;
        }
        let sessions = self.sessions.lock().clone();
        for s in sessions {
            s.closed().await;
        }
    }

    /// Ends every client's session (their requests in flight are cancelled upstream), stops
    /// listening and stops taking the manager's events. The manager stays open: it is the
    /// host's.
    pub async fn close(&self) {
        if let Some(h) = &self.http {
            h.close().await;
        }
        let sessions = std::mem::take(&mut *self.sessions.lock());
        for s in sessions {
            s.close().await;
        }
        self.pool.stop();
    }
}

/// Serves `handler` to the client at the other end of two descriptors (a served process's
/// stdin and stdout): the session, until the client closes its end or the session is closed.
pub(crate) fn serve_fds(
    handler: Arc<dyn Handler>,
    read: impl AsFd,
    write: impl AsFd,
    ask_timeout: Duration,
) -> Result<Arc<ServerSession>> {
    let mut opened = None;
    let session = ServerSession::new(None, handler, ask_timeout, |sink| {
        match FdTransport::open(read, write, MAX_LINE, sink) {
            Ok(t) => {
                opened = Some(Ok(t.clone()));
                t as Arc<dyn crate::transport::Transport>
            }
            Err(e) => {
                opened = Some(Err(e));
                Arc::new(Unopened) as Arc<dyn crate::transport::Transport>
            }
        }
    });
    // Read only now that the session can answer: the client's `initialize` may be waiting
    // in the descriptor already (it was, while `mcplug serve` connected its upstreams).
    opened.expect("the transport was made")?.start();
    Ok(session)
}

/// The transport of a session whose descriptors could not be used: it never sends.
struct Unopened;

impl crate::transport::Transport for Unopened {
    fn send(
        self: Arc<Self>,
        _message: Vec<u8>,
    ) -> crate::transport::BoxFuture<'static, Result<()>> {
        Box::pin(async {
            Err(crate::error::Error::closed(
                "the descriptors could not be used",
            ))
        })
    }

    fn close(&self) -> crate::transport::BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

#[cfg(test)]
mod tests {
    use super::session::{Call, Offer};
    use super::*;
    use crate::protocol::RawJson;
    use crate::sys;
    use serde_json::{json, Value};

    struct Echo;

    impl Handler for Echo {
        fn offer(&self) -> Offer {
            Offer {
                legacy_tasks: None,
                capabilities: json!({"tools": {}}),
                server_info: json!({"name": "echo", "version": "1"}),
                instructions: None,
            }
        }
        fn handle(
            &self,
            call: Call,
        ) -> crate::transport::BoxFuture<'static, std::result::Result<RawJson, Value>> {
            Box::pin(async move { Ok(RawJson::from_value(&json!({"method": call.method}))) })
        }
    }

    fn lines(fd: &std::os::fd::OwnedFd, count: usize) -> Vec<Value> {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        while text.iter().filter(|b| **b == b'\n').count() < count {
            assert!(
                sys::fd::wait_ready(fd, sys::fd::Ready::Read, Duration::from_secs(5)),
                "the server answered within 5 s"
            );
            let n = sys::fd::read(fd, &mut buf).unwrap();
            assert!(n > 0, "the server closed its end");
            text.extend_from_slice(&buf[..n]);
        }
        text.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_handler_is_served_over_two_descriptors() {
        let (from_client, client_writes) = sys::fd::pipe(false).unwrap();
        let (client_reads, to_client) = sys::fd::pipe(false).unwrap();
        let session = serve_fds(
            Arc::new(Echo),
            &from_client,
            &to_client,
            Duration::from_secs(5),
        )
        .unwrap();
        drop((from_client, to_client));
        let requests = concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            "\n"
        );
        sys::fd::write(&client_writes, requests.as_bytes()).unwrap();
        let mut answers = lines(&client_reads, 2);
        answers.sort_by_key(|a| a["id"].as_u64());
        assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answers[0]["result"]["serverInfo"]["name"], "echo");
        assert_eq!(answers[1]["result"]["method"], "tools/list");
        // The client closes its end: the session ends.
        drop(client_writes);
        for _ in 0..100 {
            if session.is_closed() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            is_closed(&session),
            "the session ended with the client's end"
        );
    }

    /// A client writes before the server reads (as one does while `mcplug serve` connects
    /// its upstreams): every request waiting is answered. Repeated, since the reading could
    /// once beat the session to its transport and answer into nothing.
    #[tokio::test]
    async fn requests_written_before_the_server_started_are_answered() {
        for _ in 0..20 {
            let (from_client, client_writes) = sys::fd::pipe(false).unwrap();
            let (client_reads, to_client) = sys::fd::pipe(false).unwrap();
            let requests = concat!(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
                "\n",
                r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
                "\n"
            );
            sys::fd::write(&client_writes, requests.as_bytes()).unwrap();
            let session = serve_fds(
                Arc::new(Echo),
                &from_client,
                &to_client,
                Duration::from_secs(5),
            )
            .unwrap();
            let mut answers = lines(&client_reads, 2);
            answers.sort_by_key(|a| a["id"].as_u64());
            assert_eq!(answers[0]["result"]["protocolVersion"], "2025-11-25");
            assert_eq!(answers[1]["result"], serde_json::json!({}));
            session.close().await;
        }
    }

    fn is_closed(session: &ServerSession) -> bool {
        session.is_closed()
    }
}
