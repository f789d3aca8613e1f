//! Authorization in the manager (`mcplug_manager_authenticate`, the `authenticate` pseudo-tool). The manager never starts an
//! authorization on its own, as in Claude Code: its connects are not interactive, so a remote
//! server without a usable token settles `needs-auth` (its state event carries the `auth`
//! details of the error) and its only pool tool is `mcp__<server>__authenticate`. The host's
//! `authenticate(server)` — or a call of that pseudo-tool — connects it once more, this time
//! allowed to authorize: the flow's `auth/authorize` request comes here (not to the process's
//! queue), its URL goes back to the caller at once, the loopback listener takes the browser's
//! callback (or a later `authenticate(server, {"callback_url"})` hands over one the host
//! captured), and once the server is connected its tools replace the pseudo-tool.

use super::event::ManagerEvent;
use super::{Authorizing, Inner, Manager, Mode, Server, Spec, State};
use crate::auth::host::Hook;
use crate::client::options::ConnectOptions;
use crate::error::{Error, ErrorKind, Result};
use crate::protocol::RawJson;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// The options of `authenticate`.
#[derive(Default)]
struct AuthenticateOptions {
    /// The redirect URL (with `code`, `state`, `iss`) the host captured itself.
    callback_url: Option<String>,
    /// Wait until the authorization has ended, not only until its URL is known.
    wait: bool,
    timeout: Option<Duration>,
}

impl AuthenticateOptions {
    fn parse(options: Option<&Value>) -> Result<AuthenticateOptions> {
        let mut o = AuthenticateOptions::default();
        let obj = match options {
            None | Some(Value::Null) => return Ok(o),
            Some(Value::Object(obj)) => obj,
            Some(v) => {
                return Err(Error::invalid(format!(
                    "the options of authenticate must be a JSON object (got {v})"
                )))
            }
        };
        for (k, v) in obj {
            match (k.as_str(), v) {
                (_, Value::Null) => {}
                ("callback_url", Value::String(u)) if !u.is_empty() => {
                    o.callback_url = Some(u.clone())
                }
                ("wait", Value::Bool(b)) => o.wait = *b,
                ("timeout_ms", v) if v.as_u64().is_some() => {
                    o.timeout = v.as_u64().map(Duration::from_millis)
                }
                ("callback_url" | "wait" | "timeout_ms", v) => {
                    return Err(Error::invalid(format!(
                        "authenticate option `{k}` has the wrong type (got {v}): `callback_url` is a non-empty string, `wait` true or false, `timeout_ms` a non-negative integer"
                    )))
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "unknown authenticate option `{k}` (known: callback_url, wait, timeout_ms)"
                    )))
                }
            }
        }
        Ok(o)
    }
}

impl Manager {
    /// Authorizes a remote server (the host asked). Returns once the authorization's URL is
    /// known — the status with `"authorization": {"url", "redirect_uri", "issuer", "scope"?}`
    /// while the server is `pending` — or once the attempt has ended (with `wait`, only then):
    /// the status of the now `connected` server, or its error. A server already `connected` is
    /// left as it is; one whose authorization is under way gives that one's URL again. With
    /// `callback_url`, hands the redirect the host captured to the authorization under way and
    /// waits for it to end.
    pub async fn authenticate(&self, name: &str, options: Option<&Value>) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let server = inner
            .server(name)
            .ok_or_else(|| inner.unknown_server(name))?;
        let opts = AuthenticateOptions::parse(options)?;
        remote_url(&server)?;
        if let Some(url) = opts.callback_url {
            let under_way = server.st.lock().authorizing.clone();
            let Some(tx) = under_way.and_then(|a| a.callback.lock().take()) else {
                return Err(Error::invalid(format!(
                    "no authorization of server {name:?} is waiting for its callback (`callback_url` completes one that authenticate started, whose URL the user opened)"
                )));
            };
            let _ = tx.send(url);
            return inner.settled(&server, opts.timeout).await;
        }
        let authorizing = {
            // One caller at a time decides: two at once share one authorization.
            let _gate = server.auth_gate.lock().await;
            inner.check_open()?;
            let (state, under_way) = {
                let st = server.st.lock();
                (st.state, st.authorizing.clone())
            };
            match (state, under_way) {
                (State::Disabled, _) => {
                    return Err(Error::invalid(format!(
                        "server {name:?} is disabled: enable it before authorizing it"
                    )))
                }
                (State::Connected, _) => return Ok(inner.status_of(&server)),
                (State::Pending, Some(a)) => a,
                _ => {
                    inner.stop(&server, Some(State::Pending)).await;
                    let a = Arc::new(Authorizing {
                        request: watch::channel(None).0,
                        callback: Mutex::new(None),
                    });
                    server.st.lock().authorizing = Some(a.clone());
                    inner.emit_state(&server);
                    inner.start(&server, Mode::Authorize);
                    a
                }
            }
        };
        if opts.wait {
            return inner.settled(&server, opts.timeout).await;
        }
        let mut request = authorizing.request.subscribe();
        let asked = async {
            let _ = request.wait_for(Option::is_some).await;
        };
        tokio::select! {
            _ = asked => {
                let status = inner.status_of(&server);
                if status.get("authorization").is_some() {
                    return Ok(status);
                }
                // Settled in between: its outcome.
                inner.settled(&server, opts.timeout).await
            }
            settled = inner.settled(&server, opts.timeout) => settled,
        }
    }

    /// Forgets the server's stored credentials (tokens, registrations, the needs-auth mark),
    /// closes its connection (which held the token) and connects it again without authorizing:
    /// a server that needs authorization is `needs-auth` after it. Returns the status with
    /// `"forgotten": true|false` (false: nothing was stored). A disabled server stays disabled.
    pub async fn logout(&self, name: &str) -> Result<Value> {
        let inner = &self.inner;
        inner.check_open()?;
        let server = inner
            .server(name)
            .ok_or_else(|| inner.unknown_server(name))?;
        let url = remote_url(&server)?;
        let options = ConnectOptions::parse(inner.options.connection.as_ref())?;
        let _gate = server.auth_gate.lock().await;
        let disabled = server.st.lock().state == State::Disabled;
        if !disabled {
            inner.stop(&server, Some(State::Pending)).await;
        }
        let forgotten = crate::auth::logout(&url, &options.auth);
        if !disabled {
            inner.emit_state(&server);
            inner.start(&server, Mode::Once);
        }
        let forgotten = forgotten?;
        if !disabled {
            inner
                .until(|| server.st.lock().state != State::Pending)
                .await;
        }
        let mut status = inner.status_of(&server);
        status["forgotten"] = json!(forgotten);
        Ok(status)
    }
}

/// The URL of a remote server (what its credentials are stored under).
fn remote_url(server: &Server) -> Result<String> {
    let remote = match &server.spec {
        Ok(Spec::Client(spec)) => spec.remote(),
        Ok(Spec::Sdk) => None,
        Err(e) => {
            return Err(Error::invalid(format!(
                "server {:?} has no usable entry ({}): nothing to authorize",
                server.name, e.message
            )))
        }
    };
    match remote {
        Some(config) => Ok(config.url.clone()),
        None => Err(Error::invalid(format!(
            "server {:?} is a {} server: only remote servers (http, sse, ws) are authorized",
            server.name,
            server.kind()
        ))),
    }
}

impl Inner {
    /// The status entry of one server, with its name.
    fn status_of(&self, server: &Server) -> Value {
        let mut status = server.status(&self.pool.read());
        status["server"] = json!(server.name);
        status
    }

    /// Waits until the server's attempt has ended: its status when it is connected, else its
    /// error.
    async fn settled(&self, server: &Server, limit: Option<Duration>) -> Result<Value> {
        let done = self.until(|| server.st.lock().state != State::Pending);
        match limit {
            Some(l) => {
                if tokio::time::timeout(l, done).await.is_err() {
                    return Err(Error::timeout(format!(
                        "server {:?} was still authorizing after {} ms",
                        server.name,
                        l.as_millis()
                    )));
                }
            }
            None => done.await,
        }
        self.check_open()?;
        let st = server.st.lock();
        match (&st.state, &st.error) {
            (State::Connected, _) => {
                drop(st);
                Ok(self.status_of(server))
            }
            (_, Some(e)) => Err(e.clone()),
            (state, None) => Err(Error::closed(format!(
                "server {:?} is {} (the authorization was stopped)",
                server.name,
                state.as_str()
            ))),
        }
    }

    /// Where the authorization of one `authenticate` attempt asks the host: the URL goes to
    /// the `authenticate` caller (the status's `authorization`) and out as the event
    /// `{"type": "auth", "server", "state": "authorizing", "url", "redirect_uri", "issuer",
    /// "scope"?}`; a callback URL the host hands over later is the answer. Without one, the
    /// loopback listener takes the browser's callback.
    pub(super) fn authorize_hook(self: &Arc<Self>, server: &Server, a: Arc<Authorizing>) -> Hook {
        let inner: Weak<Inner> = Arc::downgrade(self);
        let name = server.name.clone();
        Hook(Arc::new(move |_method: &str, params: Value| {
            let inner = inner.clone();
            let name = name.clone();
            let a = a.clone();
            Box::pin(async move {
                // Only the authorization the host or the model asked for may ask the user: once
                // it has ended, the connection it made answers a later 401 with needs_auth (the
                // manager then makes the server needs-auth again), never a new browser flow.
                let current = inner
                    .upgrade()
                    .and_then(|i| i.server(&name))
                    .is_some_and(|s| {
                        s.st.lock()
                            .authorizing
                            .as_ref()
                            .is_some_and(|now| Arc::ptr_eq(now, &a))
                    });
                if !current {
                    return Err(Error::new(
                        ErrorKind::NeedsAuth,
                        format!(
                            "server {name:?} needs authorization again; the manager authorizes only when asked (authenticate)"
                        ),
                    )
                    .with_data(json!({"reason": "no_token"})));
                }
                let (tx, rx) = oneshot::channel();
                *a.callback.lock() = Some(tx);
                let mut about = serde_json::Map::new();
                for k in ["url", "redirect_uri", "issuer", "scope"] {
                    if let Some(v) = params.get(k) {
                        about.insert(k.into(), v.clone());
                    }
                }
                let event = ManagerEvent::Auth {
                    server: name,
                    state: "authorizing",
                    about,
                };
                a.request.send_replace(Some(params));
                if let Some(inner) = inner.upgrade() {
                    inner.emit(event);
                    inner.changed.notify_waiters();
                }
                match rx.await {
                    Ok(url) => Ok(json!({ "callback_url": url })),
                    // Nobody will hand one over: the listener's callback ends the flow.
                    Err(_) => std::future::pending().await,
                }
            })
        }))
    }

    /// A call of the `authenticate` pseudo-tool: the flow starts and the result is the URL
    /// for the user, as text (or, when no user was needed, that the server is connected).
    pub(super) async fn call_authenticate(self: &Arc<Self>, server: &str) -> Result<RawJson> {
        let me = Manager {
            inner: self.clone(),
        };
        let status = me.authenticate(server, None).await?;
        let text = match status
            .get("authorization")
            .and_then(|a| a.get("url"))
            .and_then(Value::as_str)
        {
            Some(url) => format!(
                "Ask the user to open this URL in a browser to authorize the MCP server {server:?}:\n{url}\nOnce they have, its tools replace this one."
            ),
            None => {
                let tools: Vec<&str> = status
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                format!(
                    "The MCP server {server:?} is authorized and connected; its tools are: {}",
                    if tools.is_empty() {
                        "(none)".to_string()
                    } else {
                        tools.join(", ")
                    }
                )
            }
        };
        Ok(RawJson::from_value(
            &json!({"content": [{"type": "text", "text": text}]}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        assert!(AuthenticateOptions::parse(None)
            .unwrap()
            .callback_url
            .is_none());
        let o = AuthenticateOptions::parse(Some(
            &json!({"callback_url": "http://localhost:1/callback?code=x", "wait": true, "timeout_ms": 5}),
        ))
        .unwrap();
        assert!(o.wait);
        assert_eq!(o.timeout, Some(Duration::from_millis(5)));
        for bad in [
            json!({"wait": 1}),
            json!({"callback_url": ""}),
            json!({"timeout_ms": -1}),
            json!({"nope": true}),
            json!([1]),
        ] {
            let e = AuthenticateOptions::parse(Some(&bad)).err().unwrap();
            assert_eq!(e.kind, crate::error::ErrorKind::InvalidArgument, "{bad}");
        }
    }
}
