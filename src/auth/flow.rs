//! The interactive leg of the authorization code grant: PKCE (S256 only), `state`, the
//! authorization URL, the host's `auth/authorize` answer, the loopback listener that takes the
//! callback, and the RFC 9207 `iss` check — all in one in-process flow record, so the verifier,
//! state and issuer of one authorization never part (what loses them in browser SDKs).

use super::discovery::Discovered;
use super::jws;
use super::net::{auth_error, Net};
use crate::error::{Error, ErrorKind, Result};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The loopback listener of one authorization: bound before the redirect URI is registered or
/// sent, on 127.0.0.1 and ::1 alike (a browser resolves `localhost` to either).
pub(crate) struct Listener {
    listeners: Vec<TcpListener>,
    pub redirect_uri: String,
}

impl Listener {
    /// Binds `port` (0: any free one) on loopback; `host` names it in the redirect URI.
    pub(crate) async fn bind(host: &str, port: u16) -> Result<Listener> {
        let busy = |e: std::io::Error| {
            Error::new(
                ErrorKind::NeedsAuth,
                format!("cannot listen for the authorization callback on port {port} of 127.0.0.1: {e} (oauth.callbackPort names a port that must be free)"),
            )
        };
        let v4 = TcpListener::bind(("127.0.0.1", port)).await.map_err(busy)?;
        let port = v4.local_addr().map_err(busy)?.port();
        let mut listeners = vec![v4];
        // ::1 too when the machine has it; its absence is no error.
        if let Ok(v6) = TcpListener::bind(("::1", port)).await {
            listeners.push(v6);
        }
        Ok(Listener {
            listeners,
            redirect_uri: format!("http://{host}:{port}/callback"),
        })
    }

    /// Waits for the callback of the authorization whose `state` is given (the browser's
    /// redirect), judges it with `judge` (its URL to the code, or why not), answers the browser
    /// with a page that says which, and returns the judgement. Connections are served side by
    /// side, each with [`HEAD_TIME`] to send its request line: idle or slow ones delay nobody.
    /// A request for another path gets 404, and one whose `state` is not this authorization's
    /// (missing, or forged) gets 400: both are waited past, the real callback may still come.
    async fn callback(
        &self,
        state: &str,
        judge: &(dyn Fn(&str) -> Result<String> + Sync),
    ) -> Result<String> {
        let mut heads = tokio::task::JoinSet::new();
        loop {
            let accept = async {
                match self.listeners.as_slice() {
                    [one] => one.accept().await,
                    [a, b, ..] => tokio::select! { r = a.accept() => r, r = b.accept() => r },
                    [] => std::future::pending().await,
                }
            };
            tokio::select! {
                accepted = accept => {
                    let Ok((sock, _)) = accepted else { continue };
                    if heads.len() >= MAX_CONNECTIONS {
                        continue; // dropped: a flood is not waited on
                    }
                    heads.spawn(read_head(sock));
                }
                Some(read) = heads.join_next() => {
                    let Ok(Some((mut sock, target))) = read else { continue };
                    if !target.starts_with("/callback") {
                        answer(&mut sock, "404 Not Found", None).await;
                        continue;
                    }
                    let base = self.redirect_uri.trim_end_matches("/callback");
                    let url = format!("{base}{target}");
                    if query_value(&url, "state").as_deref() != Some(state) {
                        let page = page(
                            "Not this authorization",
                            "mcplug: this response does not belong to the authorization under way (its <code>state</code> does not match), so it was ignored. If you are signing in, finish in the window mcplug opened.",
                        );
                        answer(&mut sock, "400 Bad Request", Some(&page)).await;
                        continue;
                    }
                    let judged = judge(&url);
                    let page = match &judged {
                        Ok(_) => page(
                            "Authorized",
                            "mcplug received the authorization and is completing the sign-in. You can close this window.",
                        ),
                        Err(e) => page(
                            "Not authorized",
                            &format!("mcplug: the authorization did not succeed. {}", html_escape(&e.message)),
                        ),
                    };
                    let status = if judged.is_ok() { "200 OK" } else { "400 Bad Request" };
                    answer(&mut sock, status, Some(&page)).await;
                    return judged;
                }
            }
        }
    }
}

/// How long one connection to the loopback listener has to send its request line and headers.
const HEAD_TIME: Duration = Duration::from_secs(5);
/// The most connections being read at once; more are closed unread.
const MAX_CONNECTIONS: usize = 64;

/// Reads one connection's request head (within [`HEAD_TIME`]): the socket and the `GET`
/// target, or `None` (timed out, closed, not a GET).
async fn read_head(mut sock: tokio::net::TcpStream) -> Option<(tokio::net::TcpStream, String)> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    let read = tokio::time::timeout(HEAD_TIME, async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await.ok()?;
    let text = String::from_utf8_lossy(&head);
    let target = text
        .lines()
        .next()?
        .strip_prefix("GET ")?
        .split(' ')
        .next()?
        .to_string();
    Some((sock, target))
}

/// Answers the browser (a page, or nothing) and closes; a browser that does not read is not
/// waited on for long.
async fn answer(sock: &mut tokio::net::TcpStream, status: &str, page: Option<&str>) {
    let body = page.unwrap_or("");
    let kind = if page.is_some() {
        "content-type: text/html; charset=utf-8\r\n"
    } else {
        ""
    };
    let text = format!(
        "HTTP/1.1 {status}\r\n{kind}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), sock.write_all(text.as_bytes())).await;
}

fn page(title: &str, text: &str) -> String {
    format!("<!doctype html><meta charset=utf-8><title>{title}</title><p>{text}</p>")
}

/// Text of the server's own (an `error_description`) safe inside a page.
fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The value of `key` in a URL's query.
fn query_value(url: &str, key: &str) -> Option<String> {
    let query = url
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or(q))
        .unwrap_or("");
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// What one authorization brought back: the code, and the verifier that goes with it.
pub(crate) struct Code {
    pub code: String,
    pub verifier: String,
}

/// Who asks, for the host's request.
pub(crate) struct Asker<'a> {
    pub server: Option<&'a str>,
    pub channel: Option<&'a str>,
    pub timeout: Duration,
    pub hook: Option<&'a super::host::Hook>,
}

/// Runs one authorization: the URL, the host, the callback, its checks.
pub(crate) async fn authorize(
    net: &Net,
    d: &Discovered,
    client_id: &str,
    scope: Option<&str>,
    listener: &Listener,
    asker: &Asker<'_>,
) -> Result<Code> {
    if d.metadata.is_some()
        && !d
            .meta_list("code_challenge_methods_supported")
            .iter()
            .any(|m| m == "S256")
    {
        return Err(auth_error(format!(
            "the authorization server {} does not advertise PKCE with S256 (code_challenge_methods_supported): refusing to authorize without it",
            d.issuer
        )));
    }
    if d.authorization_endpoint.is_empty() {
        return Err(auth_error(format!(
            "the authorization server {} has no authorization_endpoint",
            d.issuer
        )));
    }
    let verifier = jws::random_b64url(32);
    let challenge = jws::sha256_b64url(verifier.as_bytes());
    let state = jws::random_b64url(16);
    let mut url = net.check(&d.authorization_endpoint, "the authorization endpoint")?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", &listener.redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        // An IdP login (oauth.xaa) is for no resource.
        if !d.resource.is_empty() {
            q.append_pair("resource", &d.resource);
        }
        if let Some(scope) = scope {
            q.append_pair("scope", scope);
        }
    }
    let mut params = json!({
        "url": url.as_str(),
        "redirect_uri": listener.redirect_uri,
        "issuer": d.issuer,
    });
    if let Some(scope) = scope {
        params["scope"] = json!(scope);
    }
    if let Some(server) = asker.server {
        params["server"] = json!(server);
    }
    if let Some(channel) = asker.channel {
        params["channel"] = json!(channel);
    }
    // The host's answer and the loopback callback race: a browser may come back before the
    // host answers `{}` (then the request is withdrawn), and a host may hand over the callback
    // URL it captured itself.
    let wait = async {
        let answer = async {
            match asker.hook {
                Some(hook) => (hook.0)("auth/authorize", params).await,
                None => super::host::ask("auth/authorize", params, asker.timeout).await,
            }
        };
        let judge = |url: &str| read_callback(url, &state, d);
        let callback = listener.callback(&state, &judge);
        tokio::pin!(answer, callback);
        tokio::select! {
            answer = &mut answer => match answer?.get("callback_url") {
                Some(Value::String(u)) => read_callback(u, &state, d),
                Some(_) => Err(Error::invalid(
                    "the answer to auth/authorize: `callback_url` must be a string",
                )),
                None => callback.await,
            },
            got = &mut callback => got,
        }
    };
    let code = tokio::time::timeout(asker.timeout, wait)
        .await
        .map_err(|_| {
            Error::new(
                ErrorKind::NeedsAuth,
                format!(
                    "the authorization was not completed within {} ms",
                    asker.timeout.as_millis()
                ),
            )
            .with_data(json!({"reason": "timeout", "issuer": d.issuer}))
        })??;
    Ok(Code { code, verifier })
}

/// The callback's `code`, after its `state` and RFC 9207 `iss` checks (in that order, and
/// before its `error` is looked at: an answer from the wrong issuer is not acted on at all).
fn read_callback(callback: &str, state: &str, d: &Discovered) -> Result<String> {
    let get = |key: &str| query_value(callback, key);
    let refuse = |why: String| {
        Error::new(ErrorKind::NeedsAuth, why)
            .with_data(json!({"reason": "declined", "issuer": d.issuer}))
    };
    if get("state").as_deref() != Some(state) {
        return Err(refuse(
            "the authorization callback's `state` does not match the request's: it is discarded"
                .into(),
        ));
    }
    let expected = d.meta_str("issuer").unwrap_or(&d.issuer);
    let advertised = d.meta_bool("authorization_response_iss_parameter_supported");
    match get("iss") {
        Some(iss) if iss != expected => {
            return Err(refuse(format!(
                "the authorization response came from issuer {iss:?}, not {expected:?} (RFC 9207): it is discarded"
            )))
        }
        None if advertised => {
            return Err(refuse(format!(
                "the authorization server {expected} says it sends `iss` in its responses, and this one has none (RFC 9207): it is discarded"
            )))
        }
        _ => {}
    }
    if let Some(error) = get("error") {
        let description = get("error_description").unwrap_or_default();
        return Err(refuse(format!(
            "the authorization server refused: {error}{}{description}",
            if description.is_empty() { "" } else { ": " }
        )));
    }
    get("code")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| refuse("the authorization callback has no `code`".into()))
}
