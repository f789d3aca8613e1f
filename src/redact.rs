//! Secrets out of what the host is shown: a URL's `user:password@` and the values of query
//! parameters that carry credentials (`api_key`, `token`, `access_token`, `secret`, `password`,
//! `sig`, ...) become `***` wherever a URL appears in an error message (every [`Error`] is
//! redacted when it is made and when it is serialized for the host; state events and statuses
//! carry those). What a server sends — results, notifications — is passed on untouched.
//!
//! [`Error`]: crate::error::Error

use std::borrow::Cow;

/// Whether a query parameter's name says it holds a credential.
fn secret_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const EXACT: &[&str] = &[
        "key", "sig", "code", "auth", "pass", "pwd", "jwt", "session",
    ];
    const PARTS: &[&str] = &[
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api_key",
        "api-key",
        "signature",
        "credential",
        "assertion",
        "private",
    ];
    EXACT.contains(&n.as_str()) || PARTS.iter().any(|p| n.contains(p))
}

/// Where a URL that starts at `start` ends: at whitespace, a quote or a closing bracket.
fn url_end(text: &str, start: usize) -> usize {
    text[start..]
        .find(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | ')' | ']' | '}')
        })
        .map_or(text.len(), |i| start + i)
}

/// One URL with its secrets replaced.
fn redact_one(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    let rest_at = scheme_end + 3;
    let authority_end = url[rest_at..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| rest_at + i);
    let authority = &url[rest_at..authority_end];
    let mut out = String::new();
    let mut changed = false;
    out.push_str(&url[..rest_at]);
    match authority.rfind('@') {
        Some(at) => {
            out.push_str("***");
            out.push_str(&authority[at..]);
            changed = true;
        }
        None => out.push_str(authority),
    }
    let after = &url[authority_end..];
    let (before_query, query_and_fragment) = match after.find('?') {
        Some(q) => (&after[..q], Some(&after[q + 1..])),
        None => (after, None),
    };
    out.push_str(before_query);
    if let Some(qf) = query_and_fragment {
        let (query, fragment) = match qf.find('#') {
            Some(h) => (&qf[..h], Some(&qf[h..])),
            None => (qf, None),
        };
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((name, value)) if secret_param(name) && !value.is_empty() => {
                    out.push_str(name);
                    out.push_str("=***");
                    changed = true;
                }
                _ => out.push_str(pair),
            }
        }
        if let Some(f) = fragment {
            out.push_str(f);
        }
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(url)
    }
}

/// `text` with the secrets of every URL in it replaced (borrowed when there were none).
pub fn urls(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut changed = false;
    let mut search = 0;
    while let Some(i) = text[search..].find("://") {
        let sep = search + i;
        // The scheme: letters, digits, `+`, `-`, `.` before the separator.
        let start = text[..sep]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .last()
            .map_or(sep, |(j, _)| j);
        let end = url_end(text, sep);
        if start < sep {
            let url = &text[start..end];
            if let Cow::Owned(r) = redact_one(url) {
                out.push_str(&text[done..start]);
                out.push_str(&r);
                done = end;
                changed = true;
            }
        }
        search = end.max(sep + 3);
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_and_secret_parameters_are_masked() {
        for (text, want) in [
            ("plain text", "plain text"),
            (
                "GET https://a.example/mcp failed",
                "GET https://a.example/mcp failed",
            ),
            (
                "POST https://bob:hunter2@a.example:8443/mcp?x=1 failed",
                "POST https://***@a.example:8443/mcp?x=1 failed",
            ),
            (
                "url \"https://a.example/s?api_key=K1&page=2&access_token=T&sig=S#frag\": bad",
                "url \"https://a.example/s?api_key=***&page=2&access_token=***&sig=***#frag\": bad",
            ),
            (
                "two: http://u@h/ and ws://h/?token=abc)",
                "two: http://***@h/ and ws://h/?token=***)",
            ),
            ("http://h/?token=", "http://h/?token="),
            ("a://", "a://"),
            ("://x", "://x"),
            ("é https://ü:p@h/ ü", "é https://***@h/ ü"),
        ] {
            assert_eq!(urls(text), want, "{text}");
        }
        assert!(matches!(urls("https://a/b"), Cow::Borrowed(_)));
    }
}
