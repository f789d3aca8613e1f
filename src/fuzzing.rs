//! The entry points of the fuzz targets (`tests/fuzz`, run with cargo-fuzz; not part of the API).
//! Each takes arbitrary bytes — what a server, a peer or a file may send — and must not panic,
//! hang, overflow its stack or grow without bound; libFuzzer reports any of those.
//! `tests/fuzz_corpus.rs` runs every committed corpus input through them on every test run.

use serde_json::Value;

/// A stdio line (or an HTTP body, a WebSocket message): the message classification, the id
/// salvage of an unreadable answer, the depth scan.
pub fn protocol_line(data: &[u8]) {
    let _ = crate::protocol::parse(data);
    let _ = crate::protocol::salvage_response_id(data);
    let depth = crate::protocol::depth(data);
    if depth <= 24 {
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = crate::protocol::tree(text);
        }
    }
}

/// A response on the direct HTTP path: the HTTP/1.1 head, Content-Length and chunked framing,
/// and the SSE feed of an event stream, given in pieces of a size the first byte picks.
pub fn http_response(data: &[u8]) {
    crate::transport::http::fuzz_response(data);
}

/// A configuration's sources (JSON): merge, entry validation, env expansion, policy.
pub fn config_merge(data: &[u8]) {
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        let _ = crate::config::merge(&v);
    }
}

/// A SKILL.md's YAML frontmatter.
pub fn frontmatter(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::client::fuzz_frontmatter(text);
    }
}

/// `WWW-Authenticate` header values (one per line).
pub fn www_authenticate(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let values: Vec<&str> = text.split('\n').collect();
        let challenges = crate::auth::challenge::parse(&values);
        let _ = crate::auth::challenge::summarize(&challenges, true);
        let _ = crate::auth::challenge::summarize(&challenges, false);
    }
}

/// A policy URL pattern and a URL (the first line and the rest), `${VAR}` expansion of the
/// same text, and the redaction of URLs in it.
pub fn url_policy_expand(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (pattern, url) = text.split_once('\n').unwrap_or((text, text));
    let _ = crate::config::fuzz_url_matches(pattern, url);
    let _ = crate::config::fuzz_expand(text);
    let _ = crate::redact::urls(text);
}
