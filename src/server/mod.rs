//! The server half (issue 33, part 2; not yet exported): one downstream client's session on the
//! session core, serving what a [`session::Handler`] offers. The transports that carry it to a
//! client (stdio, Streamable HTTP, HTTP+SSE) and what it serves (a manager's pool) come next.

// Nothing outside the tests calls into it until serving is exported (`mcplug serve`, next).
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod session;

use crate::error::Result;
use crate::transport::fds::FdTransport;
use session::{Handler, ServerSession};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

/// The longest line a client may send (a message of the stdio transport).
const MAX_LINE: usize = 64 << 20;

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
                opened = Some(Ok(()));
                t as Arc<dyn crate::transport::Transport>
            }
            Err(e) => {
                opened = Some(Err(e));
                Arc::new(Unopened) as Arc<dyn crate::transport::Transport>
            }
        }
    });
    opened.expect("the transport was made")?;
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

    fn is_closed(session: &ServerSession) -> bool {
        session.is_closed()
    }
}
