//! The SSRF guard for the URLs an OAuth client learns from servers: protected-resource and
//! authorization-server metadata, their endpoints, registration.
//!
//! Those URLs come from whoever runs the MCP server (or answers in its name), so without a
//! guard a hostile server makes mcplug fetch `http://169.254.169.254/…` (cloud credentials) or
//! a service on the user's private network, and may even see the answer in an error. The rule:
//! public addresses are fine; an address of the kind the MCP server itself lives at is fine
//! (a server on loopback or on the office network has its AS there too); anything else needs
//! the host's explicit `allow_private_auth_urls`; and some addresses are never contacted.
//!
//! [`Guard::check_url`] judges a URL before any request, which catches IP literals and
//! `localhost`; [`GuardedResolver`] judges what a DNS name resolves to, at the moment of
//! connecting, so that a name answering "public" to a first lookup and "private" to the
//! connection's own (DNS rebinding) still gets nowhere. Both are needed: reqwest does not
//! resolve IP literals, and a name can only be judged once resolved. A client using the
//! resolver must not use a proxy (`ClientBuilder::no_proxy`), since a proxy resolves the name
//! itself, nor follow redirects without calling `check_url` on each hop.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What kind of network an address is on, as far as the guard cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    Loopback,
    /// RFC 1918, CGNAT, unique-local and site-local IPv6, and benchmarking: the last because
    /// proxy tools' "fake IP" DNS (Clash, Surge) answers every name with a 198.18/15 address,
    /// so a user behind one needs the server-class rule to cover it.
    Private,
    LinkLocal,
    /// Cloud instance metadata: the classic SSRF prize, so being in the MCP server's class is
    /// not enough; only the host's explicit opt-in lets it through.
    Metadata,
    /// Unspecified, multicast, broadcast, reserved and documentation addresses: no HTTP server
    /// legitimately lives there, and `0.0.0.0` even reaches the local host on Linux.
    Never,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len))
}

#[allow(clippy::too_many_arguments)]
const fn v6(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16, len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(a, b, c, d, e, f, g, h),
        len,
    ))
}

/// First match wins, so single metadata addresses come before the ranges holding them.
/// IPv6 forms that embed an IPv4 address are handled before this table is consulted.
const RANGES: &[(IpNet, Class, &str)] = &[
    (v4(0, 0, 0, 0, 8), Class::Never, "an unspecified"),
    (v4(127, 0, 0, 0, 8), Class::Loopback, "a loopback"),
    (
        v4(169, 254, 169, 254, 32),
        Class::Metadata,
        "a cloud metadata",
    ),
    // Alibaba Cloud's metadata service, inside the CGNAT range.
    (
        v4(100, 100, 100, 200, 32),
        Class::Metadata,
        "a cloud metadata",
    ),
    // Azure's WireServer, a public address that only answers from inside Azure.
    (
        v4(168, 63, 129, 16, 32),
        Class::Metadata,
        "a cloud metadata",
    ),
    (v4(169, 254, 0, 0, 16), Class::LinkLocal, "a link-local"),
    (v4(10, 0, 0, 0, 8), Class::Private, "a private"),
    (v4(172, 16, 0, 0, 12), Class::Private, "a private"),
    (v4(192, 168, 0, 0, 16), Class::Private, "a private"),
    (v4(100, 64, 0, 0, 10), Class::Private, "a shared (CGNAT)"),
    (v4(198, 18, 0, 0, 15), Class::Private, "a benchmarking"),
    (v4(192, 0, 0, 0, 24), Class::Never, "an IETF protocol"),
    (v4(192, 0, 2, 0, 24), Class::Never, "a documentation"),
    (v4(198, 51, 100, 0, 24), Class::Never, "a documentation"),
    (v4(203, 0, 113, 0, 24), Class::Never, "a documentation"),
    (v4(224, 0, 0, 0, 4), Class::Never, "a multicast"),
    (v4(255, 255, 255, 255, 32), Class::Never, "the broadcast"),
    (v4(240, 0, 0, 0, 4), Class::Never, "a reserved"),
    (
        v6(0, 0, 0, 0, 0, 0, 0, 0, 128),
        Class::Never,
        "the unspecified",
    ),
    (
        v6(0, 0, 0, 0, 0, 0, 0, 1, 128),
        Class::Loopback,
        "the loopback",
    ),
    // The deprecated IPv4-compatible form (::a.b.c.d); nothing uses it any more.
    (v6(0, 0, 0, 0, 0, 0, 0, 0, 96), Class::Never, "a deprecated"),
    (
        v6(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254, 128),
        Class::Metadata,
        "a cloud metadata",
    ),
    (
        v6(0xfe80, 0, 0, 0, 0, 0, 0, 0, 10),
        Class::LinkLocal,
        "a link-local",
    ),
    (
        v6(0xfc00, 0, 0, 0, 0, 0, 0, 0, 7),
        Class::Private,
        "a unique-local",
    ),
    (
        v6(0xfec0, 0, 0, 0, 0, 0, 0, 0, 10),
        Class::Private,
        "a site-local",
    ),
    (
        v6(0xff00, 0, 0, 0, 0, 0, 0, 0, 8),
        Class::Never,
        "a multicast",
    ),
    (
        v6(0x100, 0, 0, 0, 0, 0, 0, 0, 64),
        Class::Never,
        "a discard-only",
    ),
    (
        v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0, 32),
        Class::Never,
        "a documentation",
    ),
];

/// IPv6 prefixes whose addresses reach an IPv4 host, and where that IPv4 address sits, so
/// `::ffff:10.0.0.1` is judged as `10.0.0.1` would be.
const EMBEDDING: &[(IpNet, Embed)] = &[
    (v6(0, 0, 0, 0, 0, 0xffff, 0, 0, 96), Embed::Last32), // IPv4-mapped
    (v6(0x64, 0xff9b, 0, 0, 0, 0, 0, 0, 96), Embed::Last32), // NAT64 well-known
    (v6(0x64, 0xff9b, 1, 0, 0, 0, 0, 0, 48), Embed::Last32), // NAT64 local use
    (v6(0x2002, 0, 0, 0, 0, 0, 0, 0, 16), Embed::SixToFour), // 6to4
];

#[derive(Clone, Copy)]
enum Embed {
    Last32,
    SixToFour,
}

/// How an address was judged: the class, the words for it and the range that matched, and the
/// IPv4 address it stands for when it is one in IPv6 dress.
struct Verdict {
    class: Class,
    what: &'static str,
    range: Option<IpNet>,
    embedded: Option<Ipv4Addr>,
}

fn classify(ip: IpAddr) -> Verdict {
    if let IpAddr::V6(v6addr) = ip {
        let seg = v6addr.segments();
        for (net, embed) in EMBEDDING {
            if net.contains(&ip) {
                let [a, b] = match embed {
                    Embed::Last32 => [seg[6], seg[7]],
                    Embed::SixToFour => [seg[1], seg[2]],
                };
                let v4addr = Ipv4Addr::from((u32::from(a) << 16) | u32::from(b));
                return Verdict {
                    embedded: Some(v4addr),
                    ..classify(IpAddr::V4(v4addr))
                };
            }
        }
    }
    for (net, class, what) in RANGES {
        if net.contains(&ip) {
            return Verdict {
                class: *class,
                what,
                range: Some(*net),
                embedded: None,
            };
        }
    }
    Verdict {
        class: Class::Public,
        what: "a public",
        range: None,
        embedded: None,
    }
}

/// The kinds of network the MCP server lives on: what it makes normal for its AS to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ServerNet {
    loopback: bool,
    private: bool,
    link_local: bool,
}

impl ServerNet {
    fn add(&mut self, ip: IpAddr) {
        match classify(ip).class {
            Class::Loopback => self.loopback = true,
            Class::Private => self.private = true,
            Class::LinkLocal => self.link_local = true,
            Class::Public | Class::Metadata | Class::Never => {}
        }
    }
}

/// A URL's host. reqwest does not re-export `url::Host`, and the parser has already turned
/// every IPv4 spelling (`0x7f.1`, `2130706433`) of an http(s) URL into dotted decimal, so
/// parsing the serialized host back is exact.
enum Host<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

fn url_host(url: &Url) -> Option<Host<'_>> {
    let host = url.host_str()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    Some(match bare.parse() {
        Ok(ip) => Host::Ip(ip),
        Err(_) => Host::Name(host),
    })
}

/// RFC 6761 §6.3: these names are loopback whatever DNS says, and browsers treat them so.
fn is_localhost_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

/// Judges the addresses an OAuth client may contact for one MCP server. Cheap to clone; one
/// per server, since what is allowed depends on where that server is.
#[derive(Debug, Clone)]
pub struct Guard {
    server: ServerNet,
    allow_private: bool,
}

impl Guard {
    /// `server_url`: the MCP server's own URL. `allow_private`: the host's opt-in
    /// (`allow_private_auth_urls`). A server URL named by DNS counts as public until
    /// [`Guard::with_server_addrs`] says otherwise, because guessing from the name would let a
    /// name decide what it may reach; an unparsable one counts as public too.
    pub fn new(server_url: &str, allow_private: bool) -> Guard {
        let mut server = ServerNet::default();
        if let Ok(url) = Url::parse(server_url) {
            match url_host(&url) {
                Some(Host::Ip(ip)) => server.add(ip),
                Some(Host::Name(name)) if is_localhost_name(name) => server.loopback = true,
                _ => {}
            }
        }
        Guard {
            server,
            allow_private,
        }
    }

    #[cfg(test)]
    /// Adds what the MCP server's DNS name resolved to (the addresses the transport actually
    /// connected to), so a server at `mcp.corp.internal` -> 10.1.2.3 may use an AS on the same
    /// private network without the host opting in to every private address.
    pub fn with_server_addrs(mut self, addrs: &[IpAddr]) -> Guard {
        for ip in addrs {
            self.server.add(*ip);
        }
        self
    }

    /// Checks a discovered URL before use; `what` names it in errors (`"token_endpoint"`).
    /// http(s) only; https unless the host is loopback, where TLS buys nothing and the
    /// conformance suite serves plain http; no userinfo, which would send credentials the
    /// server chose to a host it chose and can hide the real host from a reader; an IP literal
    /// or a `localhost` name is judged here, since no DNS lookup will be. Errors never show
    /// the userinfo.
    pub fn check_url(&self, url: &str, what: &str) -> Result<reqwest::Url, String> {
        let parsed = Url::parse(url)
            .map_err(|e| format!("{what} {}: not a valid URL ({e})", shown(url, None)))?;
        let shown = shown(url, Some(&parsed));
        let scheme = parsed.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "{what} {shown}: only https (or http to loopback) URLs are allowed, not {scheme}"
            ));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "{what} {shown}: a URL with user information (user:password@) is refused"
            ));
        }
        let ip = match url_host(&parsed) {
            Some(Host::Ip(ip)) => Some(ip),
            Some(Host::Name(name)) if is_localhost_name(name) => {
                Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
            }
            Some(Host::Name(_)) => None,
            None => return Err(format!("{what} {shown}: the URL has no host")),
        };
        let loopback = ip.is_some_and(|ip| classify(ip).class == Class::Loopback);
        if scheme == "http" && !loopback {
            return Err(format!(
                "{what} {shown}: https is required (plain http only to a loopback host)"
            ));
        }
        if let Some(ip) = ip {
            self.check_ip(ip)
                .map_err(|e| format!("{what} {shown}: {e}"))?;
        }
        Ok(parsed)
    }

    /// Whether a resolved address may be contacted; the error says what kind of address it
    /// is and what would allow it.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        let v = classify(ip);
        let allowed = match v.class {
            Class::Public => true,
            Class::Loopback => self.server.loopback,
            Class::Private => self.allow_private || self.server.private,
            Class::LinkLocal => self.allow_private || self.server.link_local,
            Class::Metadata => self.allow_private,
            Class::Never => false,
        };
        if allowed {
            return Ok(());
        }
        let mut desc = ip.to_string();
        if let Some(v4addr) = v.embedded {
            desc.push_str(&format!(" (IPv4 {v4addr})"));
        }
        desc.push_str(&format!(" is {} address", v.what));
        if let Some(range) = v.range {
            desc.push_str(&format!(" ({range})"));
        }
        let rule = match v.class {
            Class::Loopback => "allowed only when the MCP server itself is on loopback",
            Class::Private => {
                "allowed only when the MCP server is on a private network too, \
                 or with allow_private_auth_urls"
            }
            Class::LinkLocal => {
                "allowed only when the MCP server is link-local too, or with \
                 allow_private_auth_urls"
            }
            Class::Metadata => "allowed only with allow_private_auth_urls",
            Class::Public | Class::Never => "never contacted",
        };
        Err(format!("{desc}, {rule}"))
    }
}

/// A URL as errors show it: userinfo masked (a discovered URL may carry someone's password)
/// and very long ones cut, since the text is the server's.
fn shown(raw: &str, parsed: Option<&Url>) -> String {
    let mut text = mask_userinfo(raw);
    if let Some(url) = parsed {
        if (!url.username().is_empty() || url.password().is_some()) && text == raw {
            // Spelled in a way the masking above did not see; the parser's own form is safe.
            let mut url = url.clone();
            let _ = url.set_password(None);
            let _ = url.set_username("");
            text = url.to_string();
        }
    }
    const MAX: usize = 200;
    if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// `https://user:pw@host/` -> `https://***@host/`; also the backslash spellings the WHATWG
/// parser accepts.
fn mask_userinfo(raw: &str) -> String {
    let Some(colon) = raw.find(':') else {
        return raw.to_owned();
    };
    let after = &raw[colon + 1..];
    let start = colon + 1 + (after.len() - after.trim_start_matches(['/', '\\']).len());
    let rest = &raw[start..];
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{}***{}", &raw[..start], &rest[at..]),
        None => raw.to_owned(),
    }
}

/// A reqwest DNS resolver that only hands reqwest the addresses the guard allows, so the
/// check is on what is connected to, not on an earlier lookup (DNS-rebinding safe).
/// `localhost` names resolve to loopback without asking DNS, matching what
/// [`Guard::check_url`] assumed when it let them use plain http.
pub struct GuardedResolver(pub Guard);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = if is_localhost_name(&host) {
                vec![
                    SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                    SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
                ]
            } else {
                tokio::net::lookup_host((host.as_str(), 0))
                    .await
                    .map_err(|e| format!("{host}: DNS lookup failed ({e})"))?
                    .collect()
            };
            let mut refused = None;
            let kept: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| match guard.check_ip(a.ip()) {
                    Ok(()) => true,
                    Err(e) => {
                        refused.get_or_insert(e);
                        false
                    }
                })
                .collect();
            if kept.is_empty() {
                let why = refused.unwrap_or_else(|| "no addresses".to_owned());
                return Err(format!("{host}: refused to connect: {why}").into());
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    const PUBLIC: &str = "https://mcp.example.com/mcp";
    const LOCAL: &str = "http://localhost:3000/mcp";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn metadata_and_private_refused_for_public_server() {
        let g = Guard::new(PUBLIC, false);
        let e = g.check_ip(ip("169.254.169.254")).unwrap_err();
        assert!(
            e.contains("169.254.169.254") && e.contains("metadata"),
            "{e}"
        );
        let e = g.check_ip(ip("10.0.0.1")).unwrap_err();
        assert!(e.contains("10.0.0.1") && e.contains("10.0.0.0/8"), "{e}");
        for s in [
            "172.16.5.5",
            "192.168.1.1",
            "169.254.1.1",
            "fe80::1",
            "fd12::1",
            "fec0::1",
        ] {
            assert!(g.check_ip(ip(s)).is_err(), "{s}");
        }
        assert!(g.check_ip(ip("fd00:ec2::254")).is_err());
    }

    #[test]
    fn allow_private_opens_private_and_metadata() {
        let g = Guard::new(PUBLIC, true);
        for s in [
            "169.254.169.254",
            "10.0.0.1",
            "100.64.0.1",
            "fd12::1",
            "fe80::1",
        ] {
            assert_eq!(g.check_ip(ip(s)), Ok(()), "{s}");
        }
        // The opt-in is about private networks, not about this machine or nonsense addresses.
        for s in [
            "127.0.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(g.check_ip(ip(s)).is_err(), "{s}");
        }
    }

    #[test]
    fn loopback_only_for_loopback_server() {
        for server in [
            LOCAL,
            "http://127.0.0.1:1/mcp",
            "http://[::1]:1/",
            "http://a.localhost/",
        ] {
            let g = Guard::new(server, false);
            assert_eq!(g.check_ip(ip("127.0.0.1")), Ok(()), "{server}");
            assert_eq!(g.check_ip(ip("::1")), Ok(()), "{server}");
            assert!(g.check_ip(ip("10.0.0.1")).is_err(), "{server}");
        }
        let e = Guard::new(PUBLIC, false)
            .check_ip(ip("127.0.0.1"))
            .unwrap_err();
        assert!(e.contains("loopback"), "{e}");
    }

    #[test]
    fn embedded_ipv4_judged_as_ipv4() {
        let g = Guard::new(PUBLIC, false);
        let e = g.check_ip(ip("::ffff:10.0.0.1")).unwrap_err();
        assert!(
            e.contains("::ffff:10.0.0.1") && e.contains("IPv4 10.0.0.1"),
            "{e}"
        );
        for s in [
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b:1::7f00:1",
            "2002:a00:1::1",
        ] {
            assert!(g.check_ip(ip(s)).is_err(), "{s}");
        }
        assert_eq!(g.check_ip(ip("::ffff:8.8.8.8")), Ok(()));
        assert_eq!(g.check_ip(ip("64:ff9b::808:808")), Ok(()));
        let local = Guard::new(LOCAL, false);
        assert_eq!(local.check_ip(ip("::ffff:127.0.0.1")), Ok(()));
    }

    #[test]
    fn cgnat_and_reserved_refused() {
        let g = Guard::new(PUBLIC, false);
        let e = g.check_ip(ip("100.64.0.1")).unwrap_err();
        assert!(e.contains("100.64.0.0/10"), "{e}");
        for s in [
            "198.18.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "::",
            "240.1.2.3",
            "239.1.1.1",
            "ff02::1",
            "::10.0.0.1",
        ] {
            assert!(g.check_ip(ip(s)).is_err(), "{s}");
        }
    }

    #[test]
    fn public_allowed() {
        let g = Guard::new(PUBLIC, false);
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
        ] {
            assert_eq!(g.check_ip(ip(s)), Ok(()), "{s}");
        }
    }

    #[test]
    fn private_allowed_for_server_in_same_class() {
        let g = Guard::new("http://10.1.2.3:8080/mcp", false);
        assert_eq!(g.check_ip(ip("192.168.0.10")), Ok(()));
        assert!(g.check_ip(ip("169.254.1.1")).is_err());
        assert!(g.check_ip(ip("169.254.169.254")).is_err());
        assert!(g.check_ip(ip("127.0.0.1")).is_err());

        let by_name = Guard::new("https://mcp.corp.example/mcp", false);
        assert!(by_name.check_ip(ip("10.9.9.9")).is_err());
        let by_name = by_name.with_server_addrs(&[ip("10.1.2.3")]);
        assert_eq!(by_name.check_ip(ip("10.9.9.9")), Ok(()));
        assert!(by_name.check_ip(ip("fe80::1")).is_err());

        let ll = Guard::new("http://[fe80::2]/", false);
        assert_eq!(ll.check_ip(ip("169.254.3.3")), Ok(()));
        assert!(ll.check_ip(ip("10.0.0.1")).is_err());
    }

    #[test]
    fn check_url_rules() {
        let public = Guard::new(PUBLIC, false);
        let url = public
            .check_url("https://as.example.com/token", "token_endpoint")
            .unwrap();
        assert_eq!(url.as_str(), "https://as.example.com/token");

        let e = public
            .check_url("http://example.com/x", "token_endpoint")
            .unwrap_err();
        assert!(
            e.contains("token_endpoint http://example.com/x") && e.contains("https"),
            "{e}"
        );

        let e = public.check_url("https://user@x/", "issuer").unwrap_err();
        assert!(
            e.contains("user information") && !e.contains("user@"),
            "{e}"
        );
        let e = public
            .check_url("https://alice:s3cret@x/", "issuer")
            .unwrap_err();
        assert!(!e.contains("s3cret") && !e.contains("alice"), "{e}");
        let e = public
            .check_url("https:\\\\alice:s3cret@x/", "issuer")
            .unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");

        let e = public
            .check_url("ftp://as.example.com/x", "jwks_uri")
            .unwrap_err();
        assert!(e.contains("ftp"), "{e}");
        assert!(public.check_url("not a url", "issuer").is_err());
        assert!(public.check_url("data:text/plain,hi", "issuer").is_err());

        let e = public
            .check_url(
                "https://169.254.169.254/latest/meta-data",
                "authorization_endpoint",
            )
            .unwrap_err();
        assert!(e.contains("metadata"), "{e}");
        // Spellings the URL parser turns into a loopback or private address.
        assert!(public.check_url("https://0x7f.1/", "issuer").is_err());
        assert!(public
            .check_url("https://[::ffff:a00:1]/", "issuer")
            .is_err());
        assert!(public
            .check_url("http://localhost:3000/x", "issuer")
            .is_err());
        assert!(public.check_url("https://localhost/x", "issuer").is_err());

        let local = Guard::new(LOCAL, false);
        let url = local
            .check_url("http://localhost:3000/x", "registration_endpoint")
            .unwrap();
        assert_eq!(url.port(), Some(3000));
        assert!(local.check_url("http://127.0.0.1:9/x", "issuer").is_ok());
        assert!(local.check_url("http://[::1]:9/x", "issuer").is_ok());
        assert!(local.check_url("http://api.localhost/x", "issuer").is_ok());
        // Loopback does not make plain http fine elsewhere.
        assert!(local.check_url("http://example.com/", "issuer").is_err());
        assert!(local.check_url("https://example.com/", "issuer").is_ok());
    }

    #[test]
    fn masking_and_cutting() {
        assert_eq!(mask_userinfo("https://a:b@h/p@q"), "https://***@h/p@q");
        assert_eq!(mask_userinfo("https://h/p?x=a@b"), "https://h/p?x=a@b");
        assert_eq!(mask_userinfo("no colon"), "no colon");
        let long = format!("https://h/{}", "é".repeat(300));
        let e = Guard::new(PUBLIC, false)
            .check_url(&long.replace("https", "http"), "issuer")
            .unwrap_err();
        assert!(e.len() < 300, "{e}");
    }

    #[test]
    fn guard_is_clone_send_sync() {
        fn ok<T: Clone + Send + Sync + 'static>() {}
        ok::<Guard>();
        fn resolver<T: Resolve + 'static>() {}
        resolver::<GuardedResolver>();
    }

    fn resolve(guard: Guard, host: &str) -> Resolving {
        GuardedResolver(guard).resolve(Name::from_str(host).unwrap())
    }

    #[tokio::test]
    async fn resolver_localhost() {
        let addrs: Vec<SocketAddr> = resolve(Guard::new(LOCAL, false), "localhost")
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");

        let e = resolve(Guard::new(PUBLIC, false), "localhost")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("localhost") && e.contains("loopback"), "{e}");
    }

    #[tokio::test]
    async fn resolver_filters_looked_up_addresses() {
        // An address-shaped name goes through the system lookup without the network.
        let e = resolve(Guard::new(PUBLIC, false), "10.0.0.1")
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("10.0.0.1: ") && e.contains("private"), "{e}");
        let addrs: Vec<SocketAddr> = resolve(Guard::new(PUBLIC, true), "10.0.0.1")
            .await
            .unwrap()
            .collect();
        assert_eq!(addrs, [SocketAddr::from(([10, 0, 0, 1], 0))]);
    }
}
