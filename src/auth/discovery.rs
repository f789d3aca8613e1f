//! Where a server's authorization server is, and what it offers: RFC 9728 protected-resource
//! metadata (the challenge's `resource_metadata`, else the path-based well-known URL, then the
//! root one), then RFC 8414 / OpenID Connect discovery in the MCP specification's order, with
//! path insertion and never the root for an issuer that has a path; the 2025-03-26 fallbacks
//! when a server has no protected-resource metadata.
//!
//! Issuer, resource and the authorization-server URLs are kept as the raw strings received: a URL
//! type would write `http://h:1` back as `http://h:1/`, which is another resource to an
//! authorization server and another issuer to an RFC 9207 check.

use super::net::{auth_error, Net};
use crate::error::Result;
use serde_json::Value;

/// What discovery found.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    /// The protected-resource metadata's `resource` (raw), or the server's URL without one.
    pub resource: String,
    /// Where the protected-resource metadata was read, if it was.
    pub resource_metadata: Option<String>,
    /// The PRM's `scopes_supported`, space-joined.
    pub prm_scopes: Option<String>,
    /// The authorization server's issuer (raw).
    pub issuer: String,
    /// Its metadata; `None` under the 2025-03-26 endpoint fallback.
    pub metadata: Option<Value>,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
}

impl Discovered {
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.get(key)?.as_str()
    }
    pub fn meta_list(&self, key: &str) -> Vec<String> {
        crate::protocol::string_list(self.metadata.as_ref().and_then(|m| m.get(key)))
    }
    pub fn meta_bool(&self, key: &str) -> bool {
        self.metadata
            .as_ref()
            .and_then(|m| m.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

/// The origin of a URL (`scheme://host[:port]`, as written) and its path (without query).
fn split(url: &str) -> (&str, &str) {
    let after = url.find("://").map(|i| i + 3).unwrap_or(0);
    let path_at = url[after..]
        .find(['/', '?', '#'])
        .map(|i| i + after)
        .unwrap_or(url.len());
    let rest = &url[path_at..];
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    (&url[..path_at], &rest[..path_end])
}

/// The well-known URL `name` of `url` by RFC 8414 §3.1 path insertion.
fn well_known(url: &str, name: &str) -> String {
    let (origin, path) = split(url);
    let path = path.trim_end_matches('/');
    format!("{origin}/.well-known/{name}{path}")
}

/// RFC 9728 §3.3: the metadata's `resource` must be the server: the same origin (scheme and
/// host without regard to case), and a path that is the server's or a prefix of it.
pub(crate) fn resource_matches(resource: &str, server: &str) -> bool {
    let (ro, rp) = split(resource);
    let (so, sp) = split(server);
    if !ro.eq_ignore_ascii_case(so) {
        return false;
    }
    let rp = rp.trim_end_matches('/');
    let sp = sp.trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/")) || rp.is_empty()
}

/// Reads the protected-resource metadata of `server`: from `hint` (the challenge's
/// `resource_metadata`) alone when given, else the path-based URL then the root one.
async fn protected_resource(
    net: &Net,
    server: &str,
    hint: Option<&str>,
) -> Result<Option<(String, Value)>> {
    let candidates: Vec<String> = match hint {
        Some(h) => vec![h.to_string()],
        None => {
            let (origin, path) = split(server);
            let mut c = Vec::new();
            if !path.trim_end_matches('/').is_empty() {
                c.push(well_known(server, "oauth-protected-resource"));
            }
            c.push(format!("{origin}/.well-known/oauth-protected-resource"));
            c
        }
    };
    for url in candidates {
        if let Some(doc) = net
            .get_json(&url, "GET (protected-resource metadata)")
            .await?
        {
            return Ok(Some((url, doc)));
        }
    }
    Ok(None)
}

/// The authorization server's metadata URLs for `issuer`, in the specification's order.
fn metadata_urls(issuer: &str) -> Vec<String> {
    let (origin, path) = split(issuer);
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Whether the metadata's `issuer` is the one it was looked up for (RFC 8414 §3.3): the same
/// string, a trailing slash aside (servers disagree on that one; nothing else is forgiven).
fn issuer_echoes(found: &str, expected: &str) -> bool {
    found == expected || found.trim_end_matches('/') == expected.trim_end_matches('/')
}

fn endpoint(meta: &Value, key: &str) -> Option<String> {
    meta.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Discovers everything for `server` after a challenge that named `hint` (or nothing).
/// `metadata_url`: the entry's `authServerMetadataUrl`, read instead of any discovery of the AS.
pub(crate) async fn discover(
    net: &Net,
    server: &str,
    hint: Option<&str>,
    metadata_url: Option<&str>,
) -> Result<Discovered> {
    let prm = protected_resource(net, server, hint).await?;
    let (resource, resource_metadata, prm_scopes, issuer_from_prm) = match &prm {
        Some((url, doc)) => {
            let resource = doc
                .get("resource")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| server.to_string());
            if !resource_matches(&resource, server) {
                return Err(auth_error(format!(
                    "the protected-resource metadata at {url} is for {resource:?}, not for this server ({server}): refusing to authorize for it"
                ))
                .with_data(serde_json::json!({"reason": "resource_mismatch", "resource_metadata": url})));
            }
            let scopes = doc
                .get("scopes_supported")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .filter(|s| !s.is_empty());
            let issuer = doc
                .get("authorization_servers")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find_map(Value::as_str))
                .map(str::to_string);
            (resource, Some(url.clone()), scopes, issuer)
        }
        None => (server.to_string(), None, None, None),
    };
    if let Some(url) = metadata_url {
        let meta = net
            .get_json(url, "GET (authServerMetadataUrl)")
            .await?
            .ok_or_else(|| {
                auth_error(format!(
                    "the entry's oauth.authServerMetadataUrl {url} gave no metadata document"
                ))
            })?;
        let issuer = endpoint(&meta, "issuer")
            .or(issuer_from_prm.clone())
            .unwrap_or_else(|| split(server).0.to_string());
        return from_metadata(resource, resource_metadata, prm_scopes, issuer, meta);
    }
    match issuer_from_prm {
        Some(issuer) => {
            for url in metadata_urls(&issuer) {
                let Some(meta) = net
                    .get_json(&url, "GET (authorization server metadata)")
                    .await?
                else {
                    continue;
                };
                let found = meta.get("issuer").and_then(Value::as_str).unwrap_or("");
                if !issuer_echoes(found, &issuer) {
                    return Err(auth_error(format!(
                        "the authorization server metadata at {url} names the issuer {found:?}, not {issuer:?}: it is not used (RFC 8414 §3.3)"
                    ))
                    .with_data(serde_json::json!({"reason": "issuer_mismatch", "issuer": issuer})));
                }
                return from_metadata(resource, resource_metadata, prm_scopes, issuer, meta);
            }
            Err(auth_error(format!(
                "no authorization server metadata for {issuer} (tried {})",
                metadata_urls(&issuer).join(", ")
            )))
        }
        None => {
            // 2025-03-26: the server's origin is the authorization server; its metadata at the
            // root, else the default endpoints. The issuer is not checked on this path (the
            // 2025-03-26 servers named it after their own paths).
            let (origin, _) = split(server);
            let url = format!("{origin}/.well-known/oauth-authorization-server");
            if let Some(meta) = net
                .get_json(&url, "GET (authorization server metadata)")
                .await?
            {
                let issuer = endpoint(&meta, "issuer").unwrap_or_else(|| origin.to_string());
                return from_metadata(resource, None, prm_scopes, issuer, meta);
            }
            Ok(Discovered {
                resource,
                resource_metadata: None,
                prm_scopes,
                issuer: origin.to_string(),
                metadata: None,
                authorization_endpoint: format!("{origin}/authorize"),
                token_endpoint: format!("{origin}/token"),
                registration_endpoint: Some(format!("{origin}/register")),
            })
        }
    }
}

fn from_metadata(
    resource: String,
    resource_metadata: Option<String>,
    prm_scopes: Option<String>,
    issuer: String,
    meta: Value,
) -> Result<Discovered> {
    let token_endpoint = endpoint(&meta, "token_endpoint").ok_or_else(|| {
        auth_error(format!(
            "the authorization server metadata of {issuer} has no token_endpoint"
        ))
    })?;
    Ok(Discovered {
        resource,
        resource_metadata,
        prm_scopes,
        authorization_endpoint: endpoint(&meta, "authorization_endpoint").unwrap_or_default(),
        registration_endpoint: endpoint(&meta, "registration_endpoint"),
        token_endpoint,
        issuer,
        metadata: Some(meta),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_insert_the_path() {
        assert_eq!(
            well_known("http://localhost:3000/mcp", "oauth-protected-resource"),
            "http://localhost:3000/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_urls("http://a:1/tenant1"),
            vec![
                "http://a:1/.well-known/oauth-authorization-server/tenant1",
                "http://a:1/.well-known/openid-configuration/tenant1",
                "http://a:1/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("http://a:1"),
            vec![
                "http://a:1/.well-known/oauth-authorization-server",
                "http://a:1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_resource_must_be_the_server() {
        assert!(resource_matches(
            "http://localhost:3000/mcp",
            "http://localhost:3000/mcp"
        ));
        assert!(resource_matches(
            "http://localhost:3000",
            "http://localhost:3000/mcp"
        ));
        assert!(resource_matches(
            "HTTP://LocalHost:3000/mcp",
            "http://localhost:3000/mcp"
        ));
        assert!(!resource_matches(
            "https://evil.example.com/mcp",
            "http://localhost:3000/mcp"
        ));
        assert!(!resource_matches(
            "http://localhost:3000/mc",
            "http://localhost:3000/mcp"
        ));
        assert!(!resource_matches(
            "http://localhost:3001/mcp",
            "http://localhost:3000/mcp"
        ));
    }

    #[test]
    fn issuers_are_compared_as_strings() {
        assert!(issuer_echoes("http://a:1/t", "http://a:1/t"));
        assert!(issuer_echoes("http://a:1/", "http://a:1"));
        assert!(!issuer_echoes("https://attacker.example.com", "http://a:1"));
        assert!(!issuer_echoes("http://A:1", "http://a:1"));
    }
}
