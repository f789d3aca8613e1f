//! The legacy era's session over Streamable HTTP: resuming a broken stream with
//! `Last-Event-ID`, a new session after a 404, and the GET stream that carries the server's own
//! messages.

use super::headers::SESSION;
use super::remote::{status_error, Events, Outgoing};
use super::{note_event, remote, HttpTransport, Posted, DEFAULT_RETRY, LAST_EVENT_ID, MAX_RESUMES};
use crate::error::Error;
use reqwest::header::{HeaderValue, ACCEPT};
use serde_json::Value;
use std::sync::atomic::Ordering;

impl HttpTransport {
    /// GET with `Last-Event-ID`: the rest of a stream that broke.
    pub(super) async fn resume(&self, last_id: &str, what: &str) -> Result<Events, Error> {
        let resp = self
            .send_authorized("GET", None, "GET (resuming a stream)", true, |applied| {
                self.base(self.http.get(self.url.clone()), None, None, applied)
                    .header(ACCEPT, "text/event-stream")
                    .header(LAST_EVENT_ID, last_id)
            })
            .await?;
        let status = resp.status();
        if !status.is_success() || !remote::is_content_type(&resp, "text/event-stream") {
            let body = remote::error_body(resp).await;
            return Err(status_error(
                "GET",
                self.url.as_str(),
                "resuming a stream",
                status,
                &body,
            ));
        }
        Ok(Events::new(
            resp,
            self.limits.max_message_bytes,
            what.to_string(),
        ))
    }

    /// The server answered 404 to the session `lost`: start a new one (initialize again, the
    /// same request the engine sent at connect; `notifications/initialized`), once for all the
    /// requests that saw it.
    pub(super) async fn renew_session(&self, lost: HeaderValue) -> Result<(), Error> {
        let _one = self.reinit.lock().await;
        if self.state.lock().session.as_ref() != Some(&lost) {
            return Ok(()); // another request already did
        }
        let Some((init, id)) = self.state.lock().initialize.clone() else {
            return Err(Error::transport(format!(
                "HTTP 404 from POST {}: the server lost the session, and no initialize request is known to start another",
                self.url
            )));
        };
        {
            let mut state = self.state.lock();
            state.session = None;
            state.legacy_version = None;
        }
        let out = Outgoing::peek(&init);
        let renew = async {
            let resp = match self.post(&init, &out).await? {
                Posted::Answer(resp) => resp,
                // Both need a session sent with the request.
                Posted::SessionLost(_) | Posted::Refused(..) => unreachable!("no session was sent"),
            };
            let status = resp.status();
            if !status.is_success() {
                let body = remote::error_body(resp).await;
                return Err(status_error(
                    "POST",
                    self.url.as_str(),
                    "initialize",
                    status,
                    &body,
                ));
            }
            self.state.lock().session = resp.headers().get(SESSION).cloned();
            let answer = self.read_answer(resp, &out, &id, false).await?;
            let answer = answer.ok_or_else(|| {
                Error::transport("the new session's initialize got no answer in its POST")
            })?;
            let v: Value = serde_json::from_slice(&answer).map_err(|e| {
                Error::protocol(format!(
                    "the new session's initialize answer is not JSON: {e}"
                ))
            })?;
            if let Some(error) = v.get("error") {
                return Err(Error::from_rpc(error));
            }
            let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            self.post_simple(initialized, &Outgoing::peek(initialized))
                .await?;
            self.sessions.fetch_add(1, Ordering::Relaxed);
            Ok(())
        };
        match tokio::time::timeout(self.limits.connect_timeout, renew).await {
            Ok(Ok(())) => {
                self.start_listening();
                Ok(())
            }
            Ok(Err(e)) => Err(Error::transport(format!(
                "the server lost the session (HTTP 404 from {}), and starting a new one failed: {}",
                self.url, e.message
            ))),
            Err(_) => Err(Error::transport(format!(
                "the server lost the session (HTTP 404 from {}), and starting a new one took longer than {} ms",
                self.url,
                self.limits.connect_timeout.as_millis()
            ))),
        }
    }

    /// Opens the GET stream of server-initiated messages (legacy era), once per session. The
    /// receiver (when a stream starts) resolves once the server answered the first GET.
    pub(super) fn start_listening(&self) -> Option<tokio::sync::oneshot::Receiver<()>> {
        {
            let mut state = self.state.lock();
            if state.get_running || state.session.is_none() && state.legacy_version.is_none() {
                return None;
            }
            state.get_running = true;
        }
        let (answered, ready) = tokio::sync::oneshot::channel();
        let me = self.me();
        let task = crate::runtime::spawn(async move {
            me.listen(answered).await;
            me.state.lock().get_running = false;
        });
        self.background.lock().push(task.abort_handle());
        Some(ready)
    }

    pub(super) async fn listen(&self, answered: tokio::sync::oneshot::Sender<()>) {
        let mut answered = Some(answered);
        let mut retry = DEFAULT_RETRY;
        let mut failures = 0;
        let what = format!("the GET stream of {}", self.url);
        while !self.closed.load(Ordering::SeqCst) && failures < MAX_RESUMES {
            let last = self.state.lock().get_last_event.clone();
            let sent = self
                .send_authorized(
                    "GET",
                    None,
                    "GET (the stream of server messages)",
                    true,
                    |applied| {
                        let req = self
                            .base(self.http.get(self.url.clone()), None, None, applied)
                            .header(ACCEPT, "text/event-stream");
                        match &last {
                            Some(last) => req.header(LAST_EVENT_ID, last.as_str()),
                            None => req,
                        }
                    },
                )
                .await;
            if let Some(a) = answered.take() {
                let _ = a.send(());
            }
            match sent {
                Ok(resp)
                    if resp.status().is_success()
                        && remote::is_content_type(&resp, "text/event-stream") =>
                {
                    let mut events = Events::new(resp, self.limits.max_message_bytes, what.clone());
                    let mut last_id = last;
                    while let Some(Ok(event)) = events.next().await {
                        note_event(&event, &mut last_id, &mut retry);
                        self.state.lock().get_last_event = last_id.clone();
                        if !event.data.trim().is_empty() {
                            failures = 0;
                            self.deliver(event.data.as_bytes());
                        }
                    }
                    failures += 1;
                }
                // 405: the server offers no GET stream; 404: not for this session.
                Ok(resp) if matches!(resp.status().as_u16(), 404 | 405) => return,
                Ok(resp) => {
                    tracing::debug!("GET stream of {}: HTTP {}", self.url, resp.status());
                    failures += 1;
                }
                Err(e) => {
                    tracing::debug!("GET stream of {}: {}", self.url, e.message);
                    failures += 1;
                }
            }
            tokio::time::sleep(retry).await;
        }
    }
}
