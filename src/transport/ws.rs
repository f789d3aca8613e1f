//! WebSocket (`type: "ws"`): a custom transport no MCP revision defines, kept to JSON-RPC
//! framing — one message per text frame — with the subprotocol `mcp` and the entry's headers on
//! the handshake. The socket is the connection: when it closes, the connection is closed.

use super::remote::{self, RemoteConfig, RemoteLimits};
use super::{BoxFuture, Inbound, Transport};
use crate::error::Error;
use futures_util::stream::{SplitSink, StreamExt};
use futures_util::SinkExt;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::net::TcpStream;
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

pub struct WsTransport {
    url: String,
    writer: tokio::sync::Mutex<Option<SplitSink<Socket, Message>>>,
    reader: Mutex<Option<AbortHandle>>,
    closed: Arc<AtomicBool>,
    limits: RemoteLimits,
}

impl WsTransport {
    pub async fn connect(
        config: &RemoteConfig,
        limits: RemoteLimits,
        sink: Weak<dyn Inbound>,
    ) -> Result<Arc<Self>, Error> {
        let url = config.url.clone();
        match url.split(':').next() {
            Some("ws" | "wss") => {}
            _ => {
                return Err(Error::invalid(format!(
                    "server field `url` {url:?}: a ws server needs a ws:// or wss:// URL"
                )))
            }
        }
        let headers = remote::header_map(&config.headers)?;
        let (trust, proxies) = remote::route_of(config, &limits)?;
        let tunnel = reqwest::Url::parse(&url).ok().and_then(|u| {
            let proxy = proxies.for_url(&u)?.clone();
            let host = u
                .host_str()?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            Some((proxy, host, u.port_or_known_default()?))
        });
        let credentials = config.credentials.as_ref().map(|c| c.0.clone());
        let ws_config = WebSocketConfig::default()
            .max_message_size(Some(limits.max_message_bytes))
            .max_frame_size(Some(limits.max_message_bytes));
        let auth_request = super::credentials::Request {
            method: "GET",
            url: &url,
            body: None,
        };
        let mut retries = 0;
        let (socket, response) = loop {
            let mut request = url
                .as_str()
                .into_client_request()
                .map_err(|e| Error::invalid(format!("server field `url` {url:?}: {e}")))?;
            request.headers_mut().extend(headers.clone());
            request
                .headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
            // The credentials go on the upgrade request only (no DPoP on a WebSocket).
            let applied = match &credentials {
                Some(c) => super::credentials::applied(&**c, &auth_request).await?,
                None => Default::default(),
            };
            for (name, value) in &applied.headers {
                request.headers_mut().insert(name.clone(), value.clone());
            }
            let connector = Some(tokio_tungstenite::Connector::Rustls(trust.config.clone()));
            let handshake = async {
                match &tunnel {
                    // Through the proxy: a CONNECT tunnel, then TLS (wss) and the upgrade over it.
                    Some((proxy, host, port)) => {
                        let stream = super::proxy::connect_tunnel(
                            proxy,
                            host,
                            *port,
                            limits.connect_timeout,
                        )
                        .await?;
                        Ok(tokio_tungstenite::client_async_tls_with_config(
                            request,
                            stream,
                            Some(ws_config),
                            connector,
                        )
                        .await)
                    }
                    None => Ok(tokio_tungstenite::connect_async_tls_with_config(
                        request,
                        Some(ws_config),
                        true,
                        connector,
                    )
                    .await),
                }
            };
            let handshake = async {
                match handshake.await {
                    Ok(r) => r,
                    Err(e) => Err(tokio_tungstenite::tungstenite::Error::Io(
                        std::io::Error::other(ProxyFailure(e)),
                    )),
                }
            };
            match tokio::time::timeout(limits.connect_timeout, handshake).await {
                Ok(Ok(r)) => break r,
                Ok(Err(tokio_tungstenite::tungstenite::Error::Http(resp)))
                    if super::credentials::is_challenge(resp.status().as_u16())
                        && retries < super::credentials::MAX_RETRIES =>
                {
                    let refused = || {
                        let body = resp.body().as_deref().unwrap_or_default();
                        let what = "the WebSocket handshake";
                        super::remote::status_error("GET", &url, what, resp.status(), body)
                    };
                    let Some(c) = &credentials else {
                        return Err(refused());
                    };
                    retries += 1;
                    let status = resp.status().as_u16();
                    match c
                        .challenge(&applied, status, resp.headers(), &auth_request)
                        .await
                    {
                        super::credentials::Verdict::Retry => continue,
                        super::credentials::Verdict::Fail(e) => return Err(e),
                        super::credentials::Verdict::Pass => return Err(refused()),
                    }
                }
                Ok(Err(tokio_tungstenite::tungstenite::Error::Io(io)))
                    if io.get_ref().is_some_and(|i| i.is::<ProxyFailure>()) =>
                {
                    let inner = io.into_inner().expect("checked");
                    let failure = inner.downcast::<ProxyFailure>().expect("checked");
                    return Err(failure.0);
                }
                Ok(Err(e)) => {
                    if let Some(reason) = super::tls::reason(&e) {
                        let host = reqwest::Url::parse(&url)
                            .ok()
                            .and_then(|u| u.host_str().map(str::to_string))
                            .unwrap_or_default();
                        return Err(Error::transport(format!(
                            "the WebSocket handshake with {url}: the TLS connection to {host} failed: {reason} ({})",
                            trust.describe()
                        ))
                        .with_data(serde_json::json!({ "tls": reason })));
                    }
                    return Err(Error::transport(format!(
                        "the WebSocket handshake with {url} failed: {}",
                        remote::chain(&e)
                    )));
                }
                Err(_) => {
                    return Err(Error::transport(format!(
                        "the WebSocket handshake with {url} took longer than {} ms",
                        limits.connect_timeout.as_millis()
                    )))
                }
            }
        };
        if let Some(p) = response.headers().get("sec-websocket-protocol") {
            if p.as_bytes() != b"mcp" {
                return Err(Error::transport(format!(
                    "the WebSocket server at {url} chose the subprotocol {p:?}, not mcp"
                )));
            }
        }
        let (writer, mut read) = socket.split();
        let closed = Arc::new(AtomicBool::new(false));
        let reader_closed = closed.clone();
        let limit = limits.max_message_bytes;
        let reader_url = url.clone();
        let reader = crate::runtime::spawn(async move {
            let end = loop {
                match read.next().await {
                    Some(Ok(Message::Text(text))) => match sink.upgrade() {
                        Some(sink) => sink.message(text.as_bytes()),
                        None => return,
                    },
                    Some(Ok(Message::Binary(bytes))) => match sink.upgrade() {
                        Some(sink) => sink.message(&bytes),
                        None => return,
                    },
                    Some(Ok(Message::Close(frame))) => {
                        break Error::closed(match frame {
                            Some(f) => format!(
                                "the server closed the WebSocket {reader_url} ({}: {})",
                                u16::from(f.code),
                                f.reason
                            ),
                            None => format!("the server closed the WebSocket {reader_url}"),
                        })
                    }
                    Some(Ok(_)) => {} // ping/pong are answered by tungstenite
                    Some(Err(e)) => {
                        let text = remote::chain(&e);
                        break if text.contains("too long") || text.contains("too big") {
                            remote::too_large(
                                &format!("a WebSocket message from {reader_url}"),
                                limit,
                            )
                        } else {
                            Error::transport(format!("the WebSocket {reader_url} failed: {text}"))
                        };
                    }
                    None => break Error::closed(format!("the WebSocket {reader_url} ended")),
                }
            };
            if !reader_closed.load(Ordering::SeqCst) {
                if let Some(sink) = sink.upgrade() {
                    sink.closed(end);
                }
            }
        });
        Ok(Arc::new(WsTransport {
            url,
            writer: tokio::sync::Mutex::new(Some(writer)),
            reader: Mutex::new(Some(reader.abort_handle())),
            closed,
            limits,
        }))
    }
}

impl Transport for WsTransport {
    fn send(self: Arc<Self>, message: Vec<u8>) -> BoxFuture<'static, Result<(), Error>> {
        Box::pin(async move {
            let mut writer = self.writer.lock().await;
            let Some(w) = writer.as_mut() else {
                return Err(Error::closed("the connection is closed"));
            };
            for line in remote::lines(&message) {
                let text = String::from_utf8(line.to_vec())
                    .map_err(|_| Error::invalid("a message to send is not UTF-8"))?;
                w.send(Message::text(text)).await.map_err(|e| {
                    Error::transport(format!(
                        "sending on the WebSocket {} failed: {}",
                        self.url,
                        remote::chain(&e)
                    ))
                })?;
            }
            Ok(())
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.closed.store(true, Ordering::SeqCst);
            let grace = self.limits.shutdown_grace;
            if let Ok(mut writer) = tokio::time::timeout(grace, self.writer.lock()).await {
                if let Some(mut w) = writer.take() {
                    let _ = tokio::time::timeout(grace, w.close()).await;
                }
            }
            if let Some(reader) = self.reader.lock().take() {
                reader.abort();
            }
        })
    }
}

impl Drop for WsTransport {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.get_mut().take() {
            reader.abort();
        }
    }
}

/// A proxy's refusal, carried through tungstenite's error as it is.
#[derive(Debug)]
struct ProxyFailure(Error);

impl std::fmt::Display for ProxyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for ProxyFailure {}
