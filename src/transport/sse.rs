//! The deprecated HTTP+SSE transport of 2024-11-05 (`type: "sse"`): a GET opens an SSE stream
//! whose first event, `endpoint`, names the URL to POST messages to; everything the server
//! sends arrives on that stream as `message` events. The stream is the connection: when it
//! ends, the connection is closed.

use super::credentials::{self, Credentials};
use super::remote::{self, parse_url, status_error, Events, Outgoing, RemoteConfig, RemoteLimits};
use super::{BoxFuture, Inbound, Transport};
use crate::error::Error;
use parking_lot::Mutex;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::task::AbortHandle;

pub struct SseTransport {
    http: reqwest::Client,
    url: reqwest::Url,
    /// Where messages are POSTed (the `endpoint` event).
    endpoint: reqwest::Url,
    headers: HeaderMap,
    credentials: Option<Arc<dyn Credentials>>,
    limits: RemoteLimits,
    reader: Mutex<Option<AbortHandle>>,
    closed: Arc<AtomicBool>,
}

impl SseTransport {
    /// Opens the stream and waits (within the connect limit) for its `endpoint` event.
    pub async fn connect(
        config: &RemoteConfig,
        limits: RemoteLimits,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<Self>, Error> {
        let url = parse_url(&config.url)?;
        let headers = remote::header_map(&config.headers)?;
        let (trust, proxies) = remote::route_of(config, &limits)?;
        let via = proxies.for_url(&url).map(super::proxy::shown);
        let http = remote::http_client(
            &limits,
            !config.headers.is_empty() || config.headers_helper.is_some(),
            &trust,
            &proxies,
            &url,
        )?;
        let credentials = config.credentials.as_ref().map(|c| c.0.clone());
        let open = async {
            let what = "GET (the SSE stream)";
            let resp = credentials::send(
                credentials.as_deref(),
                "GET",
                url.as_str(),
                None,
                what,
                true,
                |applied| {
                    let get = http.get(url.clone()).headers(headers.clone());
                    credentials::with(get, applied).header(ACCEPT, "text/event-stream")
                },
            )
            .await
            .map_err(|e| super::proxy::annotate(trust.annotate(e), via.as_deref()))?;
            let status = resp.status();
            if !status.is_success() {
                let body = remote::error_body(resp).await;
                return Err(status_error(
                    "GET",
                    url.as_str(),
                    "the SSE stream",
                    status,
                    &body,
                ));
            }
            if !remote::is_content_type(&resp, "text/event-stream") {
                return Err(Error::transport(format!(
                    "GET {url} answered with Content-Type {:?}, not text/event-stream: not an HTTP+SSE server",
                    resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("none")
                )));
            }
            let mut events = Events::new(
                resp,
                limits.max_message_bytes,
                format!("the SSE stream of {url}"),
            );
            loop {
                match events.next().await {
                    Some(Ok(event)) if event.name.as_deref() == Some("endpoint") => {
                        let endpoint = url.join(event.data.trim()).map_err(|e| {
                            Error::protocol(format!(
                                "the `endpoint` event of {url} is not a URL ({:?}): {e}",
                                event.data
                            ))
                        })?;
                        if endpoint.origin() != url.origin() {
                            return Err(Error::protocol(format!(
                                "the `endpoint` event of {url} points to another origin ({endpoint}); refusing to send messages there"
                            )));
                        }
                        return Ok((endpoint, events));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e.into()),
                    None => {
                        return Err(Error::transport(format!(
                            "the SSE stream of {url} ended before its `endpoint` event"
                        )))
                    }
                }
            }
        };
        let (endpoint, mut events) = match tokio::time::timeout(limits.connect_timeout, open).await
        {
            Ok(r) => r?,
            Err(_) => {
                return Err(Error::transport(format!(
                    "GET {url}: no `endpoint` event within {} ms",
                    limits.connect_timeout.as_millis()
                )))
            }
        };
        let closed = Arc::new(AtomicBool::new(false));
        let reader_closed = closed.clone();
        let stream_url = url.to_string();
        let reader = crate::runtime::spawn(async move {
            let end = loop {
                match events.next().await {
                    Some(Ok(event)) => {
                        if matches!(event.name.as_deref(), None | Some("message"))
                            && !event.data.trim().is_empty()
                        {
                            match sink.upgrade() {
                                Some(sink) => sink.message(event.data.as_bytes()),
                                None => return,
                            }
                        }
                    }
                    Some(Err(e)) => break e.into(),
                    None => {
                        break Error::closed(format!(
                            "the server ended the SSE stream of {stream_url}"
                        ))
                    }
                }
            };
            if !reader_closed.load(Ordering::SeqCst) {
                if let Some(sink) = sink.upgrade() {
                    sink.closed(end);
                }
            }
        });
        Ok(Arc::new(SseTransport {
            http,
            url,
            endpoint,
            headers,
            credentials,
            limits,
            reader: Mutex::new(Some(reader.abort_handle())),
            closed,
        }))
    }
}

impl Transport for SseTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            if self.closed.load(Ordering::SeqCst) {
                return Err(Error::closed("the connection is closed"));
            }
            for line in remote::lines(&message) {
                let out = Outgoing::peek(line);
                let what = out.method().to_string();
                let me = self.clone();
                let line = line.to_vec();
                let what2 = what.clone();
                // On a runtime thread: see `runtime::on_worker`.
                let post = crate::runtime::on_worker(async move {
                    let (this, what) = (me, what2);
                    let resp = credentials::send(
                        this.credentials.as_deref(),
                        "POST",
                        this.endpoint.as_str(),
                        Some(&line),
                        &format!("POST ({what})"),
                        what == "initialize",
                        |applied| {
                            let post = this.http.post(this.endpoint.clone());
                            credentials::with(post.headers(this.headers.clone()), applied)
                                .header(CONTENT_TYPE, "application/json")
                                .body(line.clone())
                        },
                    )
                    .await?;
                    let status = resp.status();
                    let body = remote::error_body(resp).await;
                    if status.is_success() {
                        Ok(())
                    } else {
                        Err(status_error(
                            "POST",
                            this.endpoint.as_str(),
                            &what,
                            status,
                            &body,
                        ))
                    }
                });
                // A request's answer comes on the stream, under the caller's timer; the POST
                // itself is only accepted.
                let limit = self.limits.connect_timeout;
                match tokio::time::timeout(limit, post).await {
                    Ok(r) => r?,
                    Err(_) => {
                        return Err(Error::transport(format!(
                            "POST {} ({what}) was not accepted within {} ms",
                            self.endpoint,
                            limit.as_millis()
                        )))
                    }
                }
            }
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.closed.store(true, Ordering::SeqCst);
            if let Some(reader) = self.reader.lock().take() {
                reader.abort();
            }
            tracing::debug!("closed the SSE stream of {}", self.url);
        })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.get_mut().take() {
            reader.abort();
        }
    }
}
