//! Which proxy a remote connection goes through, with curl's rules: `https_proxy` for https and
//! wss URLs, `http_proxy` for http and ws (either case, here), `all_proxy` for both when the
//! other is unset, `no_proxy` naming what goes direct — host names (a leading dot or none: the
//! name and every name under it), IP addresses, CIDR ranges, `*` for everything. As in curl,
//! `localhost` goes through the proxy too unless `no_proxy` names it. A server's `proxy` (or the
//! connection's) overrides the environment: a URL, or `false` for none.
//!
//! A proxy is an `http://` (or `https://`) URL, credentials in it if it wants them; they are sent
//! as `Proxy-Authorization: Basic` and never shown ([`Proxies::shown`]). HTTPS and WebSocket go
//! through it with CONNECT; plain HTTP as absolute-form requests.

use crate::error::Error;
use serde_json::Value;
use std::net::IpAddr;

/// A `proxy` option: a URL, `false` for none. Absent: the environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProxySetting {
    Off,
    Url(String),
}

impl ProxySetting {
    pub fn parse(v: &Value, what: &str) -> Result<Option<ProxySetting>, Error> {
        match v {
            Value::Null => Ok(None),
            Value::Bool(false) => Ok(Some(ProxySetting::Off)),
            Value::String(s) => {
                parse_proxy_url(s, what)?;
                Ok(Some(ProxySetting::Url(s.clone())))
            }
            v => Err(Error::invalid(format!(
                "{what} must be a proxy URL (http://host:port) or false for none (got {})",
                if v.is_boolean() {
                    "true".to_string()
                } else {
                    v.to_string()
                }
            ))),
        }
    }
}

fn parse_proxy_url(s: &str, what: &str) -> Result<reqwest::Url, Error> {
    // `host:port` alone is taken as http://, as curl takes it.
    let with_scheme = if s.contains("://") {
        s.to_string()
    } else {
        format!("http://{s}")
    };
    let url = reqwest::Url::parse(&with_scheme).map_err(|e| {
        Error::invalid(format!(
            "{what}: {} is not a proxy URL: {e}",
            shown_text(&with_scheme)
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::invalid(format!(
            "{what}: {} is not an http:// or https:// proxy",
            shown_text(&with_scheme)
        )));
    }
    Ok(url)
}

/// A proxy URL without its credentials, for messages and logs.
pub fn shown(url: &reqwest::Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.as_str().trim_end_matches('/').to_string()
}

fn shown_text(s: &str) -> String {
    match reqwest::Url::parse(s) {
        Ok(u) => shown(&u),
        Err(_) => match s.rsplit_once('@') {
            Some((_, host)) => format!("…@{host}"),
            None => s.to_string(),
        },
    }
}

/// One `no_proxy` entry.
#[derive(Debug, Clone, PartialEq)]
enum Skip {
    All,
    Host(String),
    Ip(IpAddr),
    Net(IpAddr, u8),
}

/// The proxies of one connection, decided once.
#[derive(Debug, Clone, Default)]
pub struct Proxies {
    http: Option<reqwest::Url>,
    https: Option<reqwest::Url>,
    skip: Vec<Skip>,
    /// Where the choice came from (`the environment`, `the server's proxy option`), for logs.
    pub from: &'static str,
}

impl Proxies {
    /// The proxies of a server whose entry says `entry` and whose connection's options say
    /// `connection` (the entry wins), else of the environment.
    pub fn resolve(
        entry: Option<&ProxySetting>,
        connection: Option<&ProxySetting>,
    ) -> Result<Proxies, Error> {
        Self::resolve_with(entry, connection, &|k: &str| {
            std::env::var(k).ok().filter(|v| !v.trim().is_empty())
        })
    }

    pub(crate) fn resolve_with(
        entry: Option<&ProxySetting>,
        connection: Option<&ProxySetting>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Proxies, Error> {
        let (setting, from) = match (entry, connection) {
            (Some(s), _) => (Some(s), "the server's `proxy`"),
            (None, Some(s)) => (Some(s), "the connection's `proxy` option"),
            (None, None) => (None, "the environment"),
        };
        match setting {
            Some(ProxySetting::Off) => Ok(Proxies {
                from,
                ..Default::default()
            }),
            Some(ProxySetting::Url(u)) => {
                let url = parse_proxy_url(u, "option `proxy`")?;
                Ok(Proxies {
                    http: Some(url.clone()),
                    https: Some(url),
                    // An explicit proxy is for this server: no_proxy does not apply.
                    skip: Vec::new(),
                    from,
                })
            }
            None => {
                let get = |a: &str, b: &str| env(a).or_else(|| env(b));
                let all = get("all_proxy", "ALL_PROXY");
                let read = |v: Option<String>, name: &str| -> Result<Option<reqwest::Url>, Error> {
                    v.or_else(|| all.clone())
                        .map(|s| parse_proxy_url(s.trim(), &format!("environment variable {name}")))
                        .transpose()
                };
                Ok(Proxies {
                    https: read(get("https_proxy", "HTTPS_PROXY"), "HTTPS_PROXY")?,
                    http: read(get("http_proxy", "HTTP_PROXY"), "HTTP_PROXY")?,
                    skip: get("no_proxy", "NO_PROXY")
                        .map(|v| parse_no_proxy(&v))
                        .unwrap_or_default(),
                    from,
                })
            }
        }
    }

    /// How a connection to `url` goes, for `--debug`: `through the proxy P (from …)` or
    /// `direct (…)`.
    pub fn describe(&self, url: &reqwest::Url) -> String {
        match self.for_url(url) {
            Some(p) => format!("through the proxy {} (from {})", shown(p), self.from),
            None => format!("direct (proxies from {})", self.from),
        }
    }

    /// The proxy for `url` (an http, https, ws or wss URL), or `None`: direct.
    pub fn for_url(&self, url: &reqwest::Url) -> Option<&reqwest::Url> {
        let proxy = match url.scheme() {
            "https" | "wss" => self.https.as_ref(),
            "http" | "ws" => self.http.as_ref(),
            _ => None,
        }?;
        let host = url.host_str()?;
        if self.skips(host) {
            return None;
        }
        Some(proxy)
    }

    fn skips(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let ip: Option<IpAddr> = host.parse().ok();
        self.skip.iter().any(|s| match s {
            Skip::All => true,
            Skip::Host(name) => host == *name || host.ends_with(&format!(".{name}")),
            Skip::Ip(a) => ip == Some(*a),
            Skip::Net(net, bits) => ip.is_some_and(|ip| in_net(ip, *net, *bits)),
        })
    }

    /// As reqwest takes it (`no_proxy()` first, then this): each request asks [`Self::for_url`].
    pub fn reqwest(&self) -> reqwest::Proxy {
        let me = self.clone();
        reqwest::Proxy::custom(move |url| me.for_url(url).cloned())
    }
}

fn parse_no_proxy(v: &str) -> Vec<Skip> {
    v.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| {
            if e == "*" {
                return Skip::All;
            }
            let e = e.to_ascii_lowercase();
            if let Some((net, bits)) = e.split_once('/') {
                if let (Ok(net), Ok(bits)) = (
                    net.trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<IpAddr>(),
                    bits.parse::<u8>(),
                ) {
                    return Skip::Net(net, bits);
                }
            }
            let bare = e.trim_start_matches('[');
            let bare = bare.split(']').next().unwrap_or(bare);
            if let Ok(ip) = bare.parse::<IpAddr>() {
                return Skip::Ip(ip);
            }
            // `host:port` names the host (curl ignores the port).
            let name = e.trim_start_matches("*.").trim_start_matches('.');
            let name = name.rsplit_once(':').map_or(name, |(h, p)| {
                if p.chars().all(|c| c.is_ascii_digit()) {
                    h
                } else {
                    name
                }
            });
            Skip::Host(name.to_string())
        })
        .collect()
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            (u32::from(a) & mask) == (u32::from(n) & mask)
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            (u128::from(a) & mask) == (u128::from(n) & mask)
        }
        _ => false,
    }
}

/// An error of a request that went through `via`: it says so, and what a 407 means.
pub fn annotate(mut e: Error, via: Option<&str>) -> Error {
    let Some(via) = via else { return e };
    if e.message.contains("HTTP 407") || e.message.contains("proxy authorization required") {
        e.message = format!(
            "{} (the proxy {via} asks for authentication, HTTP 407: give its credentials in the proxy URL, http://user:password@host:port)",
            e.message
        );
    } else {
        e.message = format!("{} (through the proxy {via})", e.message);
    }
    e
}

/// `Proxy-Authorization` for a proxy URL with credentials.
pub fn basic_auth(proxy: &reqwest::Url) -> Option<String> {
    use base64::Engine as _;
    if proxy.username().is_empty() {
        return None;
    }
    let user = percent_decode(proxy.username());
    let pass = percent_decode(proxy.password().unwrap_or_default());
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    ))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Opens a tunnel to `host:port` through an http:// proxy (CONNECT), for a WebSocket; the
/// stream is then the target's (TLS, when wss, is done over it).
pub async fn connect_tunnel(
    proxy: &reqwest::Url,
    host: &str,
    port: u16,
    timeout: std::time::Duration,
) -> Result<tokio::net::TcpStream, Error> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let shown = shown(proxy);
    if proxy.scheme() != "http" {
        return Err(Error::transport(format!(
            "the proxy {shown}: a WebSocket goes through an http:// proxy only"
        )));
    }
    let work = async {
        let proxy_host = proxy.host_str().unwrap_or_default();
        let proxy_port = proxy.port_or_known_default().unwrap_or(80);
        let mut s = tokio::net::TcpStream::connect((
            proxy_host.trim_start_matches('[').trim_end_matches(']'),
            proxy_port,
        ))
        .await
        .map_err(|e| Error::transport(format!("cannot connect to the proxy {shown}: {e}")))?;
        let _ = s.set_nodelay(true);
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = basic_auth(proxy) {
            req.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| Error::transport(format!("the proxy {shown}: {e}")))?;
        // The answer's head, byte by byte (nothing of the tunnel may be read past it).
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 16 * 1024 {
                return Err(Error::transport(format!(
                    "the proxy {shown} answered CONNECT with a head over 16 KiB"
                )));
            }
            let b = s.read_u8().await.map_err(|e| {
                Error::transport(format!(
                    "the proxy {shown} closed the CONNECT to {target}: {e}"
                ))
            })?;
            head.push(b);
        }
        let text = String::from_utf8_lossy(&head);
        let status: u16 = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        match status {
            200..=299 => Ok(s),
            407 => Err(Error::transport(format!(
                "the proxy {shown} asks for authentication (HTTP 407): give its credentials in the proxy URL (http://user:password@host:port)"
            ))),
            _ => Err(Error::transport(format!(
                "the proxy {shown} refused CONNECT {target}: {}",
                text.lines().next().unwrap_or_default()
            ))),
        }
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        Error::transport(format!(
            "the proxy {shown} did not open a tunnel to {host}:{port} within {} ms",
            timeout.as_millis()
        ))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn curls_rules_for_the_environment() {
        let p = Proxies::resolve_with(
            None,
            None,
            &env(&[
                ("HTTPS_PROXY", "http://user:pw@proxy.corp:3128"),
                ("http_proxy", "proxy.corp:8080"),
                (
                    "NO_PROXY",
                    "internal.corp, .svc.local,10.0.0.0/8,192.168.1.7,[::1]",
                ),
            ]),
        )
        .unwrap();
        let via = |u: &str| p.for_url(&url(u)).map(shown);
        assert_eq!(
            via("https://api.example.com/mcp").as_deref(),
            Some("http://proxy.corp:3128")
        );
        assert_eq!(
            via("wss://api.example.com/ws").as_deref(),
            Some("http://proxy.corp:3128")
        );
        assert_eq!(
            via("http://api.example.com/mcp").as_deref(),
            Some("http://proxy.corp:8080")
        );
        assert_eq!(via("https://internal.corp/mcp"), None);
        assert_eq!(via("https://a.b.internal.corp/mcp"), None);
        assert_eq!(
            via("https://notinternal.corp/mcp").as_deref(),
            Some("http://proxy.corp:3128")
        );
        assert_eq!(via("https://x.svc.local/"), None);
        assert_eq!(via("https://10.1.2.3/"), None);
        assert_eq!(
            via("https://11.1.2.3/").as_deref(),
            Some("http://proxy.corp:3128")
        );
        assert_eq!(via("https://192.168.1.7:8443/"), None);
        assert_eq!(via("http://[::1]:80/"), None);
        // localhost is proxied unless named, as in curl.
        assert!(via("http://localhost:3000/mcp").is_some());
        let all = Proxies::resolve_with(
            None,
            None,
            &env(&[("ALL_PROXY", "http://p:1"), ("no_proxy", "*")]),
        )
        .unwrap();
        assert_eq!(all.for_url(&url("https://a/")), None);
        let all = Proxies::resolve_with(None, None, &env(&[("ALL_PROXY", "http://p:1")])).unwrap();
        assert!(
            all.for_url(&url("https://a/")).is_some() && all.for_url(&url("http://a/")).is_some()
        );
    }

    #[test]
    fn a_servers_setting_overrides_the_environment() {
        let e = env(&[("HTTPS_PROXY", "http://envproxy:1")]);
        let off = Proxies::resolve_with(Some(&ProxySetting::Off), None, &e).unwrap();
        assert!(off.for_url(&url("https://x/")).is_none());
        let mine = ProxySetting::Url("http://mine:2".into());
        let p = Proxies::resolve_with(None, Some(&mine), &e).unwrap();
        assert_eq!(
            p.for_url(&url("https://x/")).map(shown).as_deref(),
            Some("http://mine:2")
        );
        let p = Proxies::resolve_with(Some(&ProxySetting::Off), Some(&mine), &e).unwrap();
        assert!(
            p.for_url(&url("https://x/")).is_none(),
            "the entry's own setting wins"
        );
    }

    #[test]
    fn settings_and_credentials_are_checked_and_never_shown() {
        assert_eq!(
            ProxySetting::parse(&json!(false), "p").unwrap(),
            Some(ProxySetting::Off)
        );
        for bad in [
            json!(true),
            json!(3),
            json!("socks5://h:1"),
            json!("http://"),
        ] {
            assert!(
                ProxySetting::parse(&bad, "server field `proxy`").is_err(),
                "{bad}"
            );
        }
        let e = ProxySetting::parse(&json!("ftp://user:secret@h:1"), "server field `proxy`")
            .unwrap_err();
        assert!(!e.message.contains("secret"), "{}", e.message);
        let u = url("http://us%40er:p%3Ass@h:1");
        assert_eq!(shown(&u), "http://h:1");
        use base64::Engine as _;
        let auth = basic_auth(&u).unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&auth[6..])
            .unwrap();
        assert_eq!(decoded, b"us@er:p:ss");
    }
}
