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
    /// The headers for `request`: the credentials held now, whatever their age — a request
    /// always carries the token held (a token due for refresh is still good until it expires,
    /// and the server, not the clock, says when it is not). Never blocks and does no I/O: a
    /// host thread's direct path calls it.
    fn apply(&self, request: &Request<'_>) -> Applied;
    /// Whether the credentials should be brought up to date before they are applied (a
    /// refresh is due, a helper has not run yet): the caller then awaits
    /// [`Credentials::prepare`] on the runtime first. Never blocks and does no I/O.
    fn due(&self) -> bool;
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

/// Applies `credentials` to `request`, bringing them up to date first when they are due: the
/// request then carries whatever is held, refreshed or not.
pub async fn applied(
    credentials: &dyn Credentials,
    request: &Request<'_>,
) -> Result<Applied, Error> {
    if credentials.due() {
        credentials.prepare().await?;
    }
    Ok(credentials.apply(request))
}

/// Whether a connection's credentials are being obtained — a refresh, a helper's run, an
/// authorization that waits on a person — and when that last ended. A handshake's timer does
/// not count that time (`client/request.rs`): a login slower than the `server/discover` probe's
/// 5 s must not pass for a silent legacy server.
#[derive(Debug)]
pub struct Obtaining {
    state: tokio::sync::watch::Sender<Pause>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Pause {
    /// Obtainings under way.
    busy: usize,
    /// When the last one ended.
    ended: Option<tokio::time::Instant>,
}

impl Default for Obtaining {
    fn default() -> Self {
        Obtaining {
            state: tokio::sync::watch::Sender::new(Pause::default()),
        }
    }
}

/// One obtaining under way; its end is noted when dropped (however the work ended).
pub struct ObtainingGuard<'a>(&'a Obtaining);

impl Drop for ObtainingGuard<'_> {
    fn drop(&mut self) {
        self.0.state.send_modify(|p| {
            p.busy -= 1;
            p.ended = Some(tokio::time::Instant::now());
        });
    }
}

impl Obtaining {
    pub fn enter(&self) -> ObtainingGuard<'_> {
        self.state.send_modify(|p| p.busy += 1);
        ObtainingGuard(self)
    }

    /// Where a timer started at `started` for `timeout` now ends, counting no time during which
    /// credentials were obtained: it starts again, whole, after the last obtaining (and a
    /// timer that runs out while one is under way starts again from now). `None`: it has run
    /// out.
    pub fn extended(
        &self,
        started: tokio::time::Instant,
        timeout: std::time::Duration,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let pause = *self.state.borrow();
        if pause.busy > 0 {
            return Some(now + timeout);
        }
        match pause.ended {
            Some(ended) if ended > started && ended + timeout > now => Some(ended + timeout),
            _ => None,
        }
    }
}

/// Credentials whose obtaining is watched (see [`Obtaining`]): every `prepare` and every
/// judged challenge counts as obtaining, whatever the credentials do inside.
pub struct Watched {
    pub inner: Arc<dyn Credentials>,
    pub obtaining: Arc<Obtaining>,
}

impl Credentials for Watched {
    fn apply(&self, request: &Request<'_>) -> Applied {
        self.inner.apply(request)
    }

    fn due(&self) -> bool {
        self.inner.due()
    }

    fn prepare(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let _obtaining = self.obtaining.enter();
            self.inner.prepare().await
        })
    }

    fn identity(&self) -> u64 {
        self.inner.identity()
    }

    fn challenge<'a>(
        &'a self,
        sent: &'a Applied,
        status: u16,
        headers: &'a HeaderMap,
        request: &'a Request<'a>,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(async move {
            let _obtaining = self.obtaining.enter();
            self.inner.challenge(sent, status, headers, request).await
        })
    }
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
    use super::{send, Obtaining};
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_timer_counts_no_time_spent_obtaining_credentials() {
        let o = Obtaining::default();
        let t = Duration::from_secs(5);
        let start = Instant::now();
        // Nothing obtained: it runs out.
        assert_eq!(o.extended(start, t, start + t), None);
        // Runs out while a login is under way: it starts again from now.
        let login = o.enter();
        let at = start + t;
        assert_eq!(o.extended(start, t, at), Some(at + t));
        let before = Instant::now();
        drop(login);
        let after = Instant::now();
        // The login ended after the timer started: the timer starts again, whole, from its end.
        let got = o.extended(start, t, start + t).expect("extended");
        assert!(got >= before + t && got <= after + t, "{got:?}");
        // A timer started after the login ended is not extended by it.
        let later = Instant::now() + Duration::from_millis(1);
        assert_eq!(o.extended(later, t, later + t), None);
    }

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
