//! The headers one Streamable HTTP request carries besides the entry's own: the era's (the modern
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and a tool's `Mcp-Param-*`; the legacy
//! session and version), and the credentials of that request. One function composes them for
//! both paths — reqwest's (a `HeaderMap`) and the direct path's (header lines written into the
//! request) — so the two can never send different headers.

use super::super::credentials::Applied;
use super::super::param_headers::ParamHeaders;
use super::super::remote::{self, Outgoing};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub(super) const SESSION: &str = "mcp-session-id";
pub(super) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";

/// Where composed headers go. `None`: this one cannot be sent as it is (the direct path then
/// leaves the request to the general one, which decides).
pub(super) trait Sink {
    fn header(&mut self, name: &[u8], value: &[u8]) -> Option<()>;
}

impl Sink for HeaderMap {
    fn header(&mut self, name: &[u8], value: &[u8]) -> Option<()> {
        let name = HeaderName::from_bytes(name).ok()?;
        let value = HeaderValue::from_bytes(value).ok()?;
        self.append(name, value);
        Some(())
    }
}

/// Header lines (`name: value\r\n`), for the direct path's request head.
pub(super) struct Lines(pub Vec<u8>);

impl Sink for Lines {
    fn header(&mut self, name: &[u8], value: &[u8]) -> Option<()> {
        if !value
            .iter()
            .all(|b| (0x20..0x7f).contains(b) || *b == b'\t')
        {
            return None;
        }
        self.0.extend_from_slice(name);
        self.0.extend_from_slice(b": ");
        self.0.extend_from_slice(value);
        self.0.extend_from_slice(b"\r\n");
        Some(())
    }
}

/// The era a request is sent in.
pub(super) enum Era<'a> {
    /// 2026-07-28 and later: this version, no session.
    Modern(&'a str),
    /// The legacy session and negotiated version, when known.
    Legacy {
        session: Option<&'a HeaderValue>,
        version: Option<&'a str>,
    },
}

/// Composes the headers of one request: the era's, those of the MCP message `message` (its
/// text and what was read of it) when it is a POST of one, and the credentials.
pub(super) fn compose(
    sink: &mut impl Sink,
    era: &Era<'_>,
    message: Option<(&[u8], &Outgoing)>,
    params: Option<&ParamHeaders>,
    credentials: &Applied,
) -> Option<()> {
    match era {
        Era::Modern(version) => {
            sink.header(PROTOCOL_VERSION.as_bytes(), version.as_bytes())?;
            if let Some((line, out)) = message {
                if let Some(method) = &out.method {
                    sink.header(
                        MCP_METHOD.as_bytes(),
                        remote::header_safe(method).as_bytes(),
                    )?;
                }
                if let Some(name) = &out.name {
                    sink.header(MCP_NAME.as_bytes(), remote::header_safe(name).as_bytes())?;
                    if let (Some("tools/call"), Some(known)) = (out.method.as_deref(), params) {
                        for (h, value) in known.headers_for(name, line) {
                            sink.header(h.as_str().as_bytes(), value.as_bytes())?;
                        }
                    }
                }
            }
        }
        Era::Legacy { session, version } => {
            if let Some(session) = session {
                sink.header(SESSION.as_bytes(), session.as_bytes())?;
            }
            if let Some(version) = version {
                sink.header(PROTOCOL_VERSION.as_bytes(), version.as_bytes())?;
            }
        }
    }
    for (name, value) in &credentials.headers {
        sink.header(name.as_str().as_bytes(), value.as_bytes())?;
    }
    Some(())
}
