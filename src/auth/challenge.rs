//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1), parsed generically.
//!
//! The peers parse this header with a regex that only knows `Bearer`, so a DPoP server's
//! `DPoP resource_metadata=…`, a second header line, or a quoted comma loses the
//! `resource_metadata` URL and sends the client probing well-known paths it must not touch.
//! This parser follows the RFC grammar:
//!
//! ```text
//! challenge  = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//! auth-param = token BWS "=" BWS ( token / quoted-string )
//! ```
//!
//! It is lenient where real servers are sloppy (an unquoted value that is not a token, such as
//! a bare URL; a missing comma between two parameters) and never panics: at the first thing it
//! cannot read it keeps what it has and drops the rest of that header line, because guessing
//! past a syntax error could turn one challenge's parameter into another's.

/// One challenge: a scheme and either a token68 or parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// As the server spelled it; compare with [`Challenge::is`], since schemes are
    /// case-insensitive.
    pub scheme: String,
    /// The `Negotiate abc==` form, which carries no parameters.
    pub token68: Option<String>,
    /// Names lower-cased (they are case-insensitive), values unquoted with backslash escapes
    /// resolved; in the server's order, duplicates kept (the first one wins in
    /// [`Challenge::param`]).
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The first parameter of that name, whatever its case.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is a challenge of that scheme; servers do send `bearer`.
    pub fn is(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }
}

/// Every challenge of every header line, in order. A header may be sent as several lines and a
/// line may hold several challenges, so the caller passes all the lines it got.
pub fn parse(values: &[&str]) -> Vec<Challenge> {
    let mut out = Vec::new();
    for line in values {
        parse_line(line, &mut out);
    }
    out
}

/// What an OAuth client needs from a 401 or 403.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthChallenge {
    /// `"DPoP"` or `"Bearer"` in that canonical spelling (whatever the server's case), so the
    /// caller can compare with `==`; `None` when the server offered neither.
    pub scheme: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
    pub scope: Option<String>,
    pub resource_metadata: Option<String>,
    /// From the DPoP challenge's `algs` even when Bearer was chosen, so a caller that could do
    /// DPoP learns which algorithms the server takes.
    pub dpop_algs: Vec<String>,
}

/// Picks the challenge an OAuth client answers: with `dpop` (the client can sign proofs) a
/// DPoP challenge wins over a Bearer one, otherwise Bearer wins; either way the other is taken
/// when it is the only one, so that its `resource_metadata` still drives discovery.
///
/// `error`, `error_description` and `scope` are the chosen challenge's own. `resource_metadata`
/// names the resource, not the scheme, so when the chosen challenge lacks it, it is taken from
/// the other (RFC 9449 §7.1 lets a server send `Bearer …, DPoP …` side by side). Empty values
/// count as absent: `scope=""` asks for no scope.
pub fn summarize(challenges: &[Challenge], dpop: bool) -> AuthChallenge {
    let bearer = challenges.iter().find(|c| c.is("Bearer"));
    let dpop_challenge = challenges.iter().find(|c| c.is("DPoP"));
    let chosen = if dpop {
        dpop_challenge.or(bearer)
    } else {
        bearer.or(dpop_challenge)
    };
    let Some(chosen) = chosen else {
        return AuthChallenge::default();
    };
    let get = |c: &Challenge, name: &str| {
        c.param(name)
            .filter(|v| !v.trim().is_empty())
            .map(str::to_owned)
    };
    let resource_metadata = get(chosen, "resource_metadata").or_else(|| {
        [dpop_challenge, bearer]
            .into_iter()
            .flatten()
            .find_map(|c| get(c, "resource_metadata"))
    });
    AuthChallenge {
        scheme: Some(if chosen.is("DPoP") { "DPoP" } else { "Bearer" }.to_owned()),
        error: get(chosen, "error"),
        error_description: get(chosen, "error_description"),
        scope: get(chosen, "scope"),
        resource_metadata,
        dpop_algs: dpop_challenge
            .and_then(|c| c.param("algs"))
            .map(|a| a.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 9110 §11.2 `token68`, less its trailing `=` padding.
fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

/// A position in one header line. Every slice it takes starts and ends at an ASCII byte or at
/// the end, so it is always on a UTF-8 boundary, and every read is bounds-checked.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    /// Skips optional whitespace; says whether there was any (a scheme must be followed by
    /// at least one space before its parameters).
    fn skip_ows(&mut self) -> bool {
        let start = self.i;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        self.i > start
    }

    /// Skips whitespace and commas: `#rule` lists allow empty elements (`a, , b`).
    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.i += 1;
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.i += 1;
        }
        self.s.get(start..self.i).unwrap_or("")
    }

    fn token(&mut self) -> Option<&'a str> {
        Some(self.take_while(is_tchar)).filter(|t| !t.is_empty())
    }

    /// Whether an `auth-param` starts here (`token BWS "="`), without moving: that is what
    /// tells the next parameter from the next challenge after a comma.
    fn at_param(&mut self) -> bool {
        let start = self.i;
        let found = self.token().is_some() && {
            self.skip_ows();
            self.peek() == Some(b'=')
        };
        self.i = start;
        found
    }

    /// A token68 followed by the end of the challenge; `None` (not moved) otherwise.
    fn token68(&mut self) -> Option<&'a str> {
        let start = self.i;
        if !self.take_while(is_token68_char).is_empty() {
            self.take_while(|b| b == b'=');
            let end = self.i;
            self.skip_ows();
            if self.at_end() || self.peek() == Some(b',') {
                return self.s.get(start..end);
            }
        }
        self.i = start;
        None
    }

    /// After the opening quote; `None` when the string is never closed.
    fn quoted(&mut self) -> Option<String> {
        let bytes = self.s.as_bytes();
        let mut out = Vec::new();
        loop {
            let b = *bytes.get(self.i)?;
            self.i += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    out.push(*bytes.get(self.i)?);
                    self.i += 1;
                }
                _ => out.push(b),
            }
        }
        // Only ASCII backslashes were dropped, so the bytes are still the input's UTF-8.
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// A parameter's value. Unquoted values are taken up to the next comma or space, not only
    /// as a token, because servers send bare URLs (`resource_metadata=https://…`).
    fn value(&mut self) -> Option<String> {
        if self.peek() == Some(b'"') {
            self.i += 1;
            self.quoted()
        } else {
            Some(
                self.take_while(|b| !matches!(b, b',' | b' ' | b'\t' | b'"'))
                    .to_owned(),
            )
        }
    }
}

/// The challenges of one header line, appended to `out`.
fn parse_line(line: &str, out: &mut Vec<Challenge>) {
    let mut c = Cursor { s: line, i: 0 };
    loop {
        c.skip_separators();
        if c.at_end() {
            return;
        }
        let Some(scheme) = c.token() else { return };
        let mut challenge = Challenge {
            scheme: scheme.to_owned(),
            token68: None,
            params: Vec::new(),
        };
        let spaced = c.skip_ows();
        if c.at_end() || c.peek() == Some(b',') {
            out.push(challenge);
            continue;
        }
        if !spaced {
            out.push(challenge);
            return;
        }
        if let Some(t) = c.token68() {
            challenge.token68 = Some(t.to_owned());
            out.push(challenge);
            continue;
        }
        let next_challenge = parse_params(&mut c, &mut challenge.params);
        out.push(challenge);
        if !next_challenge {
            return;
        }
    }
}

/// The parameters of one challenge. True when the cursor stopped at the start of another
/// challenge; false at the end of the line or at something unreadable.
fn parse_params(c: &mut Cursor<'_>, params: &mut Vec<(String, String)>) -> bool {
    loop {
        let Some(name) = c.token() else { return false };
        c.skip_ows();
        if c.peek() != Some(b'=') {
            return false;
        }
        c.i += 1;
        c.skip_ows();
        let Some(value) = c.value() else { return false };
        params.push((name.to_ascii_lowercase(), value));
        c.skip_ows();
        if c.peek() == Some(b',') {
            c.skip_separators();
            if c.at_end() {
                return false;
            }
            if !c.at_param() {
                return true;
            }
        } else if c.at_end() || !c.at_param() {
            // A parameter glued to the previous one without a comma is read on; anything else
            // is the unreadable remainder.
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(c: &Challenge) -> Vec<(&str, &str)> {
        c.params
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect()
    }

    #[test]
    fn conformance_bearer_challenge() {
        let cs = parse(&[
            r#"Bearer error="invalid_token", error_description="Missing Authorization header", scope="a b", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        ]);
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].scheme, "Bearer");
        assert_eq!(cs[0].token68, None);
        assert_eq!(
            params(&cs[0]),
            [
                ("error", "invalid_token"),
                ("error_description", "Missing Authorization header"),
                ("scope", "a b"),
                (
                    "resource_metadata",
                    "http://localhost:1/.well-known/oauth-protected-resource/mcp"
                ),
            ]
        );
        let s = summarize(&cs, false);
        assert_eq!(s.scheme.as_deref(), Some("Bearer"));
        assert_eq!(s.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            s.error_description.as_deref(),
            Some("Missing Authorization header")
        );
        assert_eq!(s.scope.as_deref(), Some("a b"));
        assert_eq!(
            s.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        assert!(s.dpop_algs.is_empty());
    }

    #[test]
    fn dpop_challenge_with_algs() {
        let cs = parse(&[r#"DPoP algs="ES256 PS256", error="use_dpop_nonce""#]);
        assert_eq!(cs.len(), 1);
        assert!(cs[0].is("dpop"));
        let s = summarize(&cs, true);
        assert_eq!(s.scheme.as_deref(), Some("DPoP"));
        assert_eq!(s.error.as_deref(), Some("use_dpop_nonce"));
        assert_eq!(s.dpop_algs, ["ES256", "PS256"]);
        // The only challenge is taken even by a client that cannot do DPoP.
        assert_eq!(summarize(&cs, false).scheme.as_deref(), Some("DPoP"));
    }

    #[test]
    fn two_challenges_on_one_line() {
        let cs = parse(&[r#"Basic realm="x, y", Bearer scope="s""#]);
        assert_eq!(cs.len(), 2);
        assert!(cs[0].is("basic"));
        assert_eq!(cs[0].param("realm"), Some("x, y"));
        assert!(cs[1].is("bearer"));
        assert_eq!(params(&cs[1]), [("scope", "s")]);
        assert_eq!(summarize(&cs, false).scope.as_deref(), Some("s"));
    }

    #[test]
    fn two_header_lines() {
        let cs = parse(&[
            r#"Bearer error="invalid_token""#,
            r#"DPoP algs="ES256", resource_metadata="https://rs/.well-known/oauth-protected-resource""#,
        ]);
        assert_eq!(cs.len(), 2);
        let with_dpop = summarize(&cs, true);
        assert_eq!(with_dpop.scheme.as_deref(), Some("DPoP"));
        assert_eq!(with_dpop.error, None);
        assert_eq!(with_dpop.dpop_algs, ["ES256"]);
        let bearer = summarize(&cs, false);
        assert_eq!(bearer.scheme.as_deref(), Some("Bearer"));
        assert_eq!(bearer.error.as_deref(), Some("invalid_token"));
        // The resource's metadata URL is not the scheme's: it comes across.
        assert_eq!(
            bearer.resource_metadata.as_deref(),
            Some("https://rs/.well-known/oauth-protected-resource")
        );
        assert_eq!(bearer.dpop_algs, ["ES256"]);
    }

    #[test]
    fn rfc_9110_example() {
        let cs = parse(&[
            r#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
        ]);
        assert_eq!(cs.len(), 2);
        assert_eq!(
            params(&cs[0]),
            [
                ("realm", "apps"),
                ("type", "1"),
                ("title", r#"Login to "apps""#)
            ]
        );
        assert_eq!(params(&cs[1]), [("realm", "simple")]);
        assert_eq!(summarize(&cs, true), AuthChallenge::default());
    }

    #[test]
    fn escaped_quotes_and_backslashes() {
        let cs = parse(&[r#"Bearer error_description="say \"hi\", a\\b \z", scope=x"#]);
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].param("error_description"), Some(r#"say "hi", a\b z"#));
        assert_eq!(cs[0].param("scope"), Some("x"));
    }

    #[test]
    fn case_insensitive_scheme_and_names() {
        let cs = parse(&[r#"bearer ERROR="insufficient_scope", Scope="mcp:write""#]);
        assert_eq!(cs.len(), 1);
        assert!(cs[0].is("Bearer"));
        assert_eq!(cs[0].scheme, "bearer");
        assert_eq!(
            params(&cs[0]),
            [("error", "insufficient_scope"), ("scope", "mcp:write")]
        );
        assert_eq!(cs[0].param("SCOPE"), Some("mcp:write"));
        let s = summarize(&cs, true);
        assert_eq!(s.scheme.as_deref(), Some("Bearer"));
        assert_eq!(s.error.as_deref(), Some("insufficient_scope"));
    }

    #[test]
    fn token68() {
        let cs = parse(&["Negotiate abc==, Bearer realm=\"r\"", "Newauth YWJj+/d-._~"]);
        assert_eq!(cs.len(), 3);
        assert!(cs[0].is("negotiate"));
        assert_eq!(cs[0].token68.as_deref(), Some("abc=="));
        assert!(cs[0].params.is_empty());
        assert_eq!(params(&cs[1]), [("realm", "r")]);
        assert_eq!(cs[2].token68.as_deref(), Some("YWJj+/d-._~"));
    }

    #[test]
    fn whitespace_and_empty_elements() {
        let cs = parse(&[
            " ,, Basic ,Bearer\trealm = \"a\" ,, , scope=b ,  Other",
            "",
            " , ",
        ]);
        let schemes: Vec<_> = cs.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Basic", "Bearer", "Other"]);
        assert_eq!(params(&cs[1]), [("realm", "a"), ("scope", "b")]);
        assert!(cs[0].params.is_empty() && cs[2].params.is_empty());
    }

    #[test]
    fn lenient_forms() {
        // A bare URL and parameters with no comma between them.
        let cs = parse(&["Bearer resource_metadata=https://rs/a?b=c scope=\"x y\" error=e"]);
        assert_eq!(
            params(&cs[0]),
            [
                ("resource_metadata", "https://rs/a?b=c"),
                ("scope", "x y"),
                ("error", "e"),
            ]
        );
    }

    #[test]
    fn resource_metadata_with_commas_in_quotes() {
        let url = "https://rs.example/.well-known/oauth-protected-resource/mcp?a=1,2&b=x=y";
        let line = format!(r#"Bearer resource_metadata="{url}", scope="a,b""#);
        let cs = parse(&[&line]);
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0].param("resource_metadata"), Some(url));
        assert_eq!(cs[0].param("scope"), Some("a,b"));
        assert_eq!(
            summarize(&cs, false).resource_metadata.as_deref(),
            Some(url)
        );
    }

    #[test]
    fn garbage_does_not_panic() {
        for s in [
            "\"",
            "=,=,",
            "Bearer error=\"unterminated",
            "Bearer error=\"x\\",
            "Bearer a=\"b\", c=\"",
            "Bearer\"x\"",
            "Bearer ===",
            "Bearer a b c",
            ",,,,",
            "é Bearer",
            "Bearer a=é, b=\"ü\\é\"",
            "\\",
            "Bearer a=",
            "Bearer a=,",
            "Bearer ,=",
        ] {
            let _ = summarize(&parse(&[s]), true);
        }
        for len in 0..40 {
            let s: String = "Bearer a=\"b\\\", c".chars().cycle().take(len).collect();
            let _ = parse(&[&s]);
        }
    }

    #[test]
    fn malformed_remainder_keeps_what_came_before() {
        let cs = parse(&[r#"Bearer error="invalid_token", scope="a", realm="oops"#]);
        assert_eq!(cs.len(), 1);
        assert_eq!(params(&cs[0]), [("error", "invalid_token"), ("scope", "a")]);
        let cs = parse(&["Basic realm=x, = junk, Bearer scope=s", "Bearer error=e"]);
        assert_eq!(cs.len(), 2);
        assert_eq!(params(&cs[0]), [("realm", "x")]);
        assert_eq!(cs[1].param("error"), Some("e"));
        assert!(parse(&["\"", "=,=,"]).is_empty());
        assert_eq!(
            parse(&["Bearer a=é, b=\"ü\\é\""])[0].params,
            [("a".into(), "é".into()), ("b".into(), "üé".into())]
        );
    }

    #[test]
    fn summarize_without_oauth_challenges() {
        let s = summarize(&parse(&["Basic realm=\"x\"", "Negotiate abc=="]), true);
        assert_eq!(s, AuthChallenge::default());
        let s = summarize(&parse(&["Bearer scope=\"\", error="]), false);
        assert_eq!(s.scheme.as_deref(), Some("Bearer"));
        assert_eq!((s.scope, s.error), (None, None));
    }
}
