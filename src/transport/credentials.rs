//! The seam between the remote transports and what supplies their credentials (OAuth, in
//! `crate::auth`): every HTTP request a remote transport makes — each POST, the GET stream,
//! session renewal, resumption, the HTTP+SSE stream and its POSTs, the WebSocket upgrade — asks
//! it for the headers of that request, and hands it the 401/403 that came back.
//!
//! Why per request, not once: a token is refreshed while the connection lives, a DPoP proof is
//! bound to one request (method, URL, a fresh `jti`), and a challenge is judged against the token
//! that request carried (`Applied::sent`), not the one current when the answer came: another
//! request may have refreshed meanwhile, and must not be refreshed again.

use super::BoxFuture;
use crate::error::Error;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;

/// One HTTP request, as the credentials need to see it.
pub struct Request<'a> {
    /// `GET`, `POST`, `DELETE`.
    pub method: &'a str,
    pub url: &'a str,
    /// The body (a DPoP proof of an MCP request digests it).
    pub body: Option<&'a [u8]>,
}

/// The credential headers of one request, and the token they came from.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Which token was sent (0: none): an answer's challenge is judged against it.
    pub sent: u64,
    /// Which run of the entry's `headersHelper` the headers came from (0: none).
    pub generation: u64,
}

/// What a transport does with a request that was answered 401 or 403.
#[derive(Debug)]
pub enum Verdict {
    /// Send it again, with the credentials applied anew.
    Retry,
    /// Give up: the request fails with this error (`needs_auth`, mostly).
    Fail(Error),
    /// Not the credentials' business (a 403 that is no scope challenge): the answer goes on
    /// as it came.
    Pass,
}

/// The credentials of one remote connection.
pub trait Credentials: Send + Sync {
    /// The headers for `request`, now. `None` when the credentials must be brought up to date
    /// first (a refresh is due): the caller then awaits [`Credentials::prepare`] on the runtime
    /// and applies again. Never blocks and does no I/O: a host thread's direct path calls it.
    fn apply(&self, request: &Request<'_>) -> Option<Applied>;
    /// Brings the credentials up to date (a refresh due before expiry). Runtime only.
    fn prepare(&self) -> BoxFuture<'_, Result<(), Error>>;
    /// Who the credentials are (issuer, client, grant), for the cache of private results: it
    /// changes with a new authorization, not with a refresh of the same one. 0: nobody yet.
    fn identity(&self) -> u64;
    /// A request that carried `sent` was answered `status` (401 or 403) with `headers`:
    /// whether to send it again (after a refresh, a new authorization, a DPoP nonce) or fail.
    /// May take long (an interactive authorization); runs on the runtime only.
    fn challenge<'a>(
        &'a self,
        sent: &'a Applied,
        status: u16,
        headers: &'a HeaderMap,
        request: &'a Request<'a>,
    ) -> BoxFuture<'a, Verdict>;
}

/// A connection's credentials, as a remote config carries them.
#[derive(Clone)]
pub struct Shared(pub Arc<dyn Credentials>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials")
    }
}

/// How many times one request is sent again after a 401/403 (a refresh, an authorization, a
/// nonce, a step-up): the credentials bound their own retries; this bounds a loop between a
/// server that keeps refusing and credentials that keep saying "retry".
pub(crate) const MAX_RETRIES: usize = 4;

/// Whether an answer's status is one the credentials judge.
pub fn is_challenge(status: u16) -> bool {
    status == 401 || status == 403
}

/// Applies `credentials` to `request`, bringing them up to date first when they ask for it.
pub async fn applied(
    credentials: &dyn Credentials,
    request: &Request<'_>,
) -> Result<Applied, Error> {
    if let Some(a) = credentials.apply(request) {
        return Ok(a);
    }
    credentials.prepare().await?;
    Ok(credentials.apply(request).unwrap_or_default())
}

/// Sends the request `build` makes with `credentials` applied (when there are any); a 401/403
/// goes to them, and they say whether it is sent again (refreshed, authorized, with a nonce)
/// or fails. Bounded by [`MAX_RETRIES`]. Runtime only. `what` names the request in errors.
///
/// `repeatable`: the request may be sent once more when it is lost to a stale keep-alive
/// connection — one the server closed as the request went out ("connection closed before
/// message completed"), which a busy or slow host meets near the server's keep-alive timeout.
/// For GETs, and for handshakes a server that saw them twice is none the worse for
/// (`server/discover`, `initialize`): never for a call, which may have run.
///
/// Boxed: its state (reqwest's pending request, a challenge's) stays on the heap, so the futures
/// that await it stay small — a host thread with a small stack polls some of them, and a debug
/// build copies a large future several times on its way there.
pub fn send<'a, B>(
    credentials: Option<&'a dyn Credentials>,
    method: &'a str,
    url: &'a str,
    body: Option<&'a [u8]>,
    what: &'a str,
    repeatable: bool,
    build: B,
) -> BoxFuture<'a, Result<reqwest::Response, Error>>
where
    B: Fn(&Applied) -> reqwest::RequestBuilder + Send + Sync + 'a,
{
    Box::pin(async move {
        let send = |applied: &Applied| {
            let request = build(applied);
            // The same request again, for a stale connection (a body in memory always clones).
            let again = if repeatable {
                request.try_clone()
            } else {
                None
            };
            async move {
                match (request.send().await, again) {
                    (Err(e), Some(again)) if super::remote::is_stale_connection(&e) => {
                        tracing::debug!(target: "mcplug::transport", "{what} {url}: the connection was closed as the request went out; sent again");
                        again.send().await
                    }
                    (sent, _) => sent,
                }
                .map_err(|e| super::remote::request_error(what, url, &e))
            }
        };
        let Some(creds) = credentials else {
            return send(&Applied::default()).await;
        };
        let request = Request { method, url, body };
        let mut retries = 0;
        loop {
            let applied = applied(creds, &request).await?;
            let resp = send(&applied).await?;
            let status = resp.status().as_u16();
            if !is_challenge(status) || retries >= MAX_RETRIES {
                return Ok(resp);
            }
            retries += 1;
            match creds
                .challenge(&applied, status, resp.headers(), &request)
                .await
            {
                Verdict::Retry => {
                    let _ = super::remote::error_body(resp).await;
                }
                Verdict::Pass => return Ok(resp),
                Verdict::Fail(e) => return Err(e),
            }
        }
    })
}

/// Adds the credential headers to a request being built.
pub fn with(builder: reqwest::RequestBuilder, applied: &Applied) -> reqwest::RequestBuilder {
    applied.headers.iter().fold(builder, |b, (name, value)| {
        b.header(name.clone(), value.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::send;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server whose first connection reads the request and closes without an answer (as a
    /// server closing an idle keep-alive connection does, just as a request arrives); every
    /// later one answers 200. Returns its URL and how many requests it read.
    async fn closes_the_first() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let counted = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.ends_with(b"}") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                if counted.fetch_add(1, Ordering::SeqCst) > 0 {
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                    let _ = sock.write_all(answer).await;
                }
            }
        });
        (url, seen)
    }

    #[test]
    fn only_a_repeatable_request_is_sent_again_after_a_stale_connection() {
        crate::runtime::block_on(async {
            let http = reqwest::Client::new();
            let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#;
            for repeatable in [true, false] {
                let (url, seen) = closes_the_first().await;
                let sent = send(
                    None,
                    "POST",
                    &url,
                    Some(body),
                    "POST (x)",
                    repeatable,
                    |_| http.post(&url).body(body.to_vec()),
                )
                .await;
                if repeatable {
                    assert_eq!(sent.expect("sent again").status(), 200);
                    assert_eq!(seen.load(Ordering::SeqCst), 2);
                } else {
                    let e = sent.expect_err("not sent again").to_string();
                    assert!(e.contains("POST (x)"), "{e}");
                    assert_eq!(seen.load(Ordering::SeqCst), 1);
                }
            }
        });
    }
}
