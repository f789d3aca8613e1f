//! Token-endpoint answers from servers that do not follow RFC 6749 §5.2, made to look as if they
//! did, as Claude Code's `normalizeOAuthErrorBody` does.
//!
//! Slack and GitHub answer a failed token request with HTTP 200 and an error body; a client
//! that trusts the status then fails to parse a token out of it and reports a confusing error,
//! or (worse) never learns that its refresh token is dead. Slack also names a dead refresh
//! token `invalid_refresh_token` and the like, which a client only recognising `invalid_grant`
//! would retry forever instead of falling back to a new authorization.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// Error codes that mean what RFC 6749 calls `invalid_grant`: the grant (code or refresh
/// token) is invalid, expired or revoked. Slack's three are Claude Code's list; GitHub's two
/// come with HTTP 200 for the same conditions.
const INVALID_GRANT_ALIASES: &[&str] = &[
    "invalid_refresh_token",
    "expired_refresh_token",
    "token_expired",
    "bad_refresh_token",
    "bad_verification_code",
];

/// Rewrites a token-endpoint response. A 2xx whose JSON body is an OAuth error (a string
/// `error`; Slack's `{"ok": false, "error": …}` is one) and not a token (no string
/// `access_token`) becomes 400, since a token is what a 2xx promises. A known alias of
/// `invalid_grant` is renamed in any status, with the original code kept in
/// `error_description` when the server gave none, so the message still says what the server
/// said. The body is re-serialized only when it changed; otherwise the same bytes come back.
pub fn token_response(status: u16, body: &[u8]) -> (u16, Cow<'_, [u8]>) {
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(body) else {
        return (status, Cow::Borrowed(body));
    };
    let Some(error) = obj.get("error").and_then(Value::as_str).map(str::to_owned) else {
        return (status, Cow::Borrowed(body));
    };
    let is_token = obj.get("access_token").is_some_and(Value::is_string);
    let status = if (200..300).contains(&status) && !is_token {
        400
    } else {
        status
    };
    if is_token || !INVALID_GRANT_ALIASES.contains(&error.as_str()) {
        return (status, Cow::Borrowed(body));
    }
    rename_error(&mut obj, &error);
    match serde_json::to_vec(&Value::Object(obj)) {
        Ok(bytes) => (status, Cow::Owned(bytes)),
        Err(_) => (status, Cow::Borrowed(body)),
    }
}

fn rename_error(obj: &mut Map<String, Value>, original: &str) {
    obj.insert("error".to_owned(), Value::from("invalid_grant"));
    let described = obj
        .get("error_description")
        .and_then(Value::as_str)
        .is_some_and(|d| !d.trim().is_empty());
    if !described {
        obj.insert(
            "error_description".to_owned(),
            Value::from(format!(
                "the server returned the non-standard error {original}"
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_of(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    #[test]
    fn error_with_200_becomes_400() {
        let body = br#"{"error":"invalid_request","error_description":"bad code"}"#;
        let (status, out) = token_response(200, body);
        assert_eq!(status, 400);
        assert!(matches!(out, Cow::Borrowed(b) if b == body));
    }

    #[test]
    fn github_error_with_200() {
        let body = br#"{"error":"bad_verification_code","error_description":"The code passed is incorrect or expired.","error_uri":"https://docs.github.com/"}"#;
        let (status, out) = token_response(200, body);
        assert_eq!(status, 400);
        assert_eq!(
            json_of(&out),
            json!({"error": "invalid_grant",
                   "error_description": "The code passed is incorrect or expired.",
                   "error_uri": "https://docs.github.com/"})
        );
    }

    #[test]
    fn slack_ok_false_shape() {
        let body = br#"{"ok":false,"error":"invalid_refresh_token"}"#;
        let (status, out) = token_response(200, body);
        assert_eq!(status, 400);
        let v = json_of(&out);
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["error"], "invalid_grant");
        assert!(v["error_description"]
            .as_str()
            .unwrap()
            .contains("invalid_refresh_token"));
        // Member order is kept.
        assert!(std::str::from_utf8(&out)
            .unwrap()
            .starts_with(r#"{"ok":false,"error":"#));
    }

    #[test]
    fn slack_aliases_become_invalid_grant_in_any_status() {
        for code in [
            "invalid_refresh_token",
            "expired_refresh_token",
            "token_expired",
        ] {
            for status in [200, 400, 401] {
                let body = json!({"error": code, "error_description": "d"}).to_string();
                let (s, out) = token_response(status, body.as_bytes());
                assert_eq!(s, if status == 200 { 400 } else { status });
                assert_eq!(
                    json_of(&out),
                    json!({"error": "invalid_grant", "error_description": "d"})
                );
            }
        }
    }

    #[test]
    fn standard_error_in_400_is_untouched() {
        let body = br#"{"error":"invalid_grant"}"#;
        let (status, out) = token_response(400, body);
        assert_eq!(status, 400);
        assert!(matches!(out, Cow::Borrowed(b) if b == body));
    }

    #[test]
    fn token_response_left_alone() {
        let body = br#"{"access_token":"test-token-1","token_type":"Bearer","expires_in":3600,"scope":"a b"}"#;
        let (status, out) = token_response(200, body);
        assert_eq!(status, 200);
        assert!(matches!(out, Cow::Borrowed(b) if b == body));
        // A token that also carries an `error` member is still a token.
        let body = br#"{"ok":true,"access_token":"xoxe-1","error":"token_expired"}"#;
        let (status, out) = token_response(200, body);
        assert_eq!(status, 200);
        assert!(matches!(out, Cow::Borrowed(b) if b == body));
    }

    #[test]
    fn non_json_and_non_error_bodies_left_alone() {
        for (status, body) in [
            (200, &b"<html>oops</html>"[..]),
            (200, b""),
            (500, b"internal error"),
            (200, br#"["error"]"#),
            (200, br#"{"error":{"code":1}}"#),
            (200, br#"{"ok":false}"#),
        ] {
            let (s, out) = token_response(status, body);
            assert_eq!(s, status);
            assert!(matches!(out, Cow::Borrowed(b) if b == body));
        }
    }
}
