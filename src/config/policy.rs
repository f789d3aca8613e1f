//! `allowedMcpServers` / `deniedMcpServers`: entries by server name, command array or URL pattern.
//!
//! The rules, as Claude Code has them: a deny always wins; an unset allowlist allows everything,
//! an empty one nothing; once the allowlist has any `serverCommand` entry, a stdio server must
//! match one of them by its command (its name no longer suffices), and likewise `serverUrl` for
//! remote servers; `sdk` servers are not policed (the host runs them in process).
//!
//! URL patterns: `*` matches any run of characters, anywhere; the scheme and host compare
//! case-insensitively; a pattern without a path matches every path of that origin. We match with
//! our own small wildcard matcher (no regex is built from the pattern, so nothing in a pattern is
//! special but `*`).

use super::entry::{command_array, kind_of, Kind};
use super::text::JsonPath;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    Name(String),
    Command(Vec<String>),
    Url(String),
}

/// One policy entry and where it came from (for "denied by deniedMcpServers[2]").
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyEntry {
    pub rule: Rule,
    /// `deniedMcpServers[2]`, with the file when it came from one.
    pub origin: String,
    pub raw: Value,
}

/// Parses one list. An entry that is not exactly one of the three forms is an error (failing
/// closed: an unreadable deny entry must not silently allow what it meant to deny).
pub fn parse_list(v: &Value, list: &str, file: Option<&str>) -> Result<Vec<PolicyEntry>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("`{list}` must be an array (got {})", kind_of(v)))?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = JsonPath::of_keys(&[list]).index(i);
        let origin = match file {
            Some(f) => format!("{at} in {f}"),
            None => at.to_string(),
        };
        let obj = item.as_object().ok_or_else(|| {
            format!(
                "{origin}: a policy entry must be an object (got {})",
                kind_of(item)
            )
        })?;
        let keys: Vec<&str> = obj
            .keys()
            .map(String::as_str)
            .filter(|k| matches!(*k, "serverName" | "serverCommand" | "serverUrl"))
            .collect();
        if keys.len() != 1 || obj.len() != 1 {
            let all: Vec<&str> = obj.keys().map(String::as_str).collect();
            return Err(format!(
                "{origin}: a policy entry must have exactly one of serverName, serverCommand, \
                 serverUrl (got {})",
                if all.is_empty() {
                    "none".to_string()
                } else {
                    all.join(", ")
                }
            ));
        }
        let rule = match keys[0] {
            "serverName" => match &obj["serverName"] {
                Value::String(s) if !s.is_empty() => Rule::Name(s.clone()),
                other => {
                    return Err(format!(
                        "{origin}: `serverName` must be a non-empty string (got {other})"
                    ))
                }
            },
            "serverCommand" => match &obj["serverCommand"] {
                Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_string) => {
                    Rule::Command(
                        a.iter()
                            .map(|s| s.as_str().unwrap_or_default().to_string())
                            .collect(),
                    )
                }
                other => {
                    return Err(format!(
                    "{origin}: `serverCommand` must be a non-empty array of strings (got {other})"
                ))
                }
            },
            _ => match &obj["serverUrl"] {
                Value::String(s) if !s.is_empty() => Rule::Url(s.clone()),
                other => {
                    return Err(format!(
                        "{origin}: `serverUrl` must be a non-empty string (got {other})"
                    ))
                }
            },
        };
        out.push(PolicyEntry {
            rule,
            origin,
            raw: item.clone(),
        });
    }
    Ok(out)
}

/// The verdict on one server.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Allowed,
    Denied(String),
    NotAllowed(String),
}

pub fn judge(
    name: &str,
    entry: &Value,
    kind: Kind,
    allowed: Option<&[PolicyEntry]>,
    denied: &[PolicyEntry],
) -> Verdict {
    if kind == Kind::Sdk {
        return Verdict::Allowed;
    }
    let command = if kind == Kind::Stdio {
        command_array(entry)
    } else {
        None
    };
    let url = if kind == Kind::Stdio {
        None
    } else {
        entry.get("url").and_then(Value::as_str)
    };
    let hits = |p: &PolicyEntry| match &p.rule {
        Rule::Name(n) => n == name,
        Rule::Command(c) => command.as_ref() == Some(c),
        Rule::Url(pattern) => url.is_some_and(|u| url_matches(pattern, u)),
    };
    if let Some(p) = denied.iter().find(|p| hits(p)) {
        return Verdict::Denied(format!("denied by {} {}", p.origin, json!(p.raw)));
    }
    let Some(allowed) = allowed else {
        return Verdict::Allowed;
    };
    if allowed.is_empty() {
        return Verdict::NotAllowed("allowedMcpServers is empty: no server is allowed".into());
    }
    let has_commands = allowed.iter().any(|p| matches!(p.rule, Rule::Command(_)));
    let has_urls = allowed.iter().any(|p| matches!(p.rule, Rule::Url(_)));
    let (ok, why) = if command.is_some() && has_commands {
        (
            allowed.iter().any(|p| matches!(&p.rule, Rule::Command(c) if command.as_ref() == Some(c))),
            "its command matches no serverCommand entry of allowedMcpServers (once there is one, stdio servers must match by command)",
        )
    } else if url.is_some() && has_urls {
        (
            allowed.iter().any(|p| matches!(&p.rule, Rule::Url(pat) if url.is_some_and(|u| url_matches(pat, u)))),
            "its URL matches no serverUrl entry of allowedMcpServers (once there is one, remote servers must match by URL)",
        )
    } else {
        (
            allowed
                .iter()
                .any(|p| matches!(&p.rule, Rule::Name(n) if n == name)),
            "its name is not in allowedMcpServers",
        )
    };
    if ok {
        Verdict::Allowed
    } else {
        Verdict::NotAllowed(why.to_string())
    }
}

/// Splits `scheme://authority/rest` into (scheme, authority, rest); `rest` starts with `/`, `?`
/// or `#`, or is empty.
fn split_url(u: &str) -> Option<(&str, &str, &str)> {
    let (scheme, after) = u.split_once("://")?;
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    Some((scheme, &after[..end], &after[end..]))
}

/// Whether `url` matches a `serverUrl` pattern. The URL is matched as the transport will use
/// it — parsed once (reqwest's `Url`, as the transports parse it): the host lowercased, without
/// a trailing dot, its user information ignored, the scheme's default port made implicit
/// (`https://host:443/` is `https://host/`), dot segments of the path resolved. A pattern
/// without a port matches the default port only; `:*` matches any. A URL that does not parse
/// matches nothing (no transport would connect to it).
pub fn url_matches(pattern: &str, url: &str) -> bool {
    let Some((ps, pa, pp)) = split_url(pattern) else {
        // A pattern that is not a URL (`*`, `*example*`) is matched against the whole URL.
        return wildcard(&pattern.to_ascii_lowercase(), &url.to_ascii_lowercase());
    };
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = u.host_str() else {
        return false;
    };
    let host = host.trim_end_matches('.');
    let pa = pa.rsplit_once('@').map_or(pa, |(_, h)| h);
    let (ph, pport) = match pa.rsplit_once(':') {
        Some((h, p))
            if (p == "*" || p.chars().all(|c| c.is_ascii_digit()))
                && (!h.contains(':') || h.ends_with(']')) =>
        {
            (h, Some(p))
        }
        _ => (pa, None),
    };
    let port_ok = match pport {
        None => u.port().is_none(),
        Some(p) => u
            .port_or_known_default()
            .is_some_and(|n| wildcard(p, &n.to_string())),
    };
    let mut rest = u.path().to_string();
    if let Some(q) = u.query() {
        rest.push('?');
        rest.push_str(q);
    }
    wildcard(&ps.to_ascii_lowercase(), u.scheme())
        && wildcard(
            ph.to_ascii_lowercase().trim_end_matches('.'),
            &host.to_ascii_lowercase(),
        )
        && port_ok
        && (pp.is_empty() || wildcard(pp, &rest))
}

/// `*` matches any run of characters (also none); everything else matches itself.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard("a*c", "abbbc"));
        assert!(wildcard("*", ""));
        assert!(!wildcard("a*c", "abd"));
        assert!(wildcard("*.example.com", "api.example.com"));
        assert!(!wildcard("*.example.com", "example.com"));
        assert!(wildcard("a.b", "a.b") && !wildcard("a.b", "axb"));
    }

    #[test]
    fn url_patterns() {
        assert!(url_matches(
            "https://*.example.com/*",
            "https://API.Example.com/mcp"
        ));
        assert!(url_matches(
            "https://mcp.example.com",
            "https://mcp.example.com/any/path?q=1"
        ));
        assert!(!url_matches(
            "https://mcp.example.com/v1/*",
            "https://mcp.example.com/v2/x"
        ));
        assert!(!url_matches(
            "https://mcp.example.com/V1",
            "https://mcp.example.com/v1"
        ));
        assert!(!url_matches(
            "https://mcp.example.com",
            "http://mcp.example.com/"
        ));
        assert!(url_matches("*", "ws://x"));
    }

    #[test]
    fn a_url_cannot_walk_around_a_pattern() {
        let deny = "https://host.example";
        for walk in [
            "https://host.example:443/mcp",
            "https://user@host.example/mcp",
            "https://user:pw@host.example/mcp",
            "https://HOST.example./mcp",
            "https://host.example/a/../mcp",
        ] {
            assert!(url_matches(deny, walk), "{walk}");
        }
        assert!(!url_matches(deny, "https://host.example:8443/mcp"));
        assert!(url_matches(
            "https://host.example:*",
            "https://host.example:8443/mcp"
        ));
        assert!(url_matches(
            "https://host.example:8443",
            "https://host.example:8443/"
        ));
        assert!(url_matches(
            "https://host.example/v1/*",
            "https://host.example/v1/../v1/x"
        ));
        assert!(!url_matches(
            "https://host.example/v1/*",
            "https://host.example/v1/../v2/x"
        ));
        assert!(url_matches("http://[::1]:3000", "http://[::1]:3000/mcp"));
        assert!(!url_matches(deny, "not a url"));
    }

    #[test]
    fn two_keys_is_an_error() {
        let e = parse_list(
            &json!([{"serverName": "a"}, {"serverName": "b", "serverUrl": "u"}]),
            "deniedMcpServers",
            None,
        )
        .unwrap_err();
        assert!(
            e.starts_with("deniedMcpServers[1]: a policy entry must have exactly one"),
            "{e}"
        );
        assert!(e.contains("serverName, serverUrl"), "{e}");
    }
}
