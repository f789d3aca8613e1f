//! Cross-App Access (`oauth.xaa`, Claude Code's name for enterprise-managed authorization, SEP-990):
//! the login at the enterprise IdP that gives the ID token the token exchange starts from.
//!
//! The IdP is the user's one connection (Claude Code keeps it in `settings.xaaIdp`; here the
//! connection option `xaa_idp`, or an entry's `oauth.xaa` object): its login is the authorization
//! code grant with PKCE at the IdP's OpenID configuration, through the same `auth/authorize`
//! host hook as any server's. The ID token it gives is kept in the store under the IdP's issuer
//! and used by every server of that IdP until a minute before its `exp`: one login unlocks many
//! servers, each of which then goes on without a browser (RFC 8693 at the IdP, RFC 7523 at its
//! authorization server; `grant.rs`).

use super::discovery::Discovered;
use super::net::{auth_error, ClientAuth};
use super::{flow, needs_auth, now_ms, store_error, OAuth};
use crate::error::{Error, ErrorKind, Result};
use serde_json::{json, Value};

/// A cached ID token with less than this left is not used: a login comes first.
const ID_TOKEN_MARGIN_MS: u64 = 60_000;

/// The IdP connection (connection option `xaa_idp`): `{issuer, client_id, client_secret?,
/// callback_port?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct XaaIdp {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub callback_port: u16,
}

impl XaaIdp {
    pub fn parse(v: &Value) -> Result<XaaIdp> {
        let bad = |why: &str| Error::invalid(format!("option `xaa_idp`: {why}"));
        let o = v.as_object().ok_or_else(|| {
            bad("must be an object {issuer, client_id, client_secret?, callback_port?}")
        })?;
        if let Some(k) = o.keys().find(|k| {
            !matches!(
                k.as_str(),
                "issuer" | "client_id" | "client_secret" | "callback_port"
            )
        }) {
            return Err(bad(&format!(
                "unknown key `{k}` (known: issuer, client_id, client_secret, callback_port)"
            )));
        }
        let string = |k: &str| -> Result<Option<String>> {
            match o.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
                Some(v) => Err(bad(&format!("`{k}` must be a non-empty string (got {v})"))),
            }
        };
        let issuer =
            string("issuer")?.ok_or_else(|| bad("needs `issuer` (the IdP's issuer URL)"))?;
        if !(issuer.starts_with("https://") || issuer.starts_with("http://")) {
            return Err(bad(&format!(
                "`issuer` must be an http(s) URL (got {issuer:?})"
            )));
        }
        let callback_port =
            super::port_option(o.get("callback_port"), "option `xaa_idp`: `callback_port`")?;
        Ok(XaaIdp {
            issuer,
            client_id: string("client_id")?
                .ok_or_else(|| bad("needs `client_id` (this client's id at the IdP)"))?,
            client_secret: string("client_secret")?,
            callback_port,
        })
    }
}

/// The store's key of an IdP's ID token.
fn store_key(issuer: &str) -> String {
    format!("xaa-idp {}", issuer.trim_end_matches('/'))
}

/// The JWT's `exp` in milliseconds (the token is not verified here: the IdP that issued it is
/// the one that reads it back in the exchange).
fn jwt_exp_ms(jwt: &str) -> Option<u64> {
    use base64::Engine as _;
    let payload = jwt.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_u64().map(|s| s.saturating_mul(1000))
}

impl OAuth {
    /// The IdP's ID token: the one the store keeps while it has more than a minute left, else
    /// a login (which needs `auth_interactive`). One login at a time per IdP, across
    /// connections and processes (the store's lock on the IdP's record).
    pub(super) async fn idp_id_token(&self, idp: &XaaIdp) -> Result<String> {
        let key = store_key(&idp.issuer);
        let _one_login = {
            let (store, key) = (self.store.clone(), key.clone());
            tokio::task::spawn_blocking(move || store.exclusive(&key, "login"))
                .await
                .map_err(|_| Error::new(ErrorKind::Config, "the auth store's task failed"))?
                .map_err(|e| store_error(e, self.name.as_deref()))?
        };
        if let Some(token) = self.cached_id_token(&key).await {
            return Ok(token);
        }
        if !self.options.interactive {
            return Err(needs_auth(
                format!(
                    "{} needs a login at the IdP {} first (oauth.xaa; the connection's `auth_interactive` is off, so none was started)",
                    self.server, idp.issuer
                ),
                "no_token",
                None,
                None,
            )
            .with_data(json!({"reason": "no_token", "issuer": idp.issuer, "idp": true})));
        }
        let d = self.idp_configuration(idp).await?;
        let listener =
            flow::Listener::bind(&self.settings.callback_host, idp.callback_port).await?;
        let asker = flow::Asker {
            server: self.name.as_deref(),
            channel: self.options.channel.as_deref(),
            timeout: self.options.timeout,
            hook: self.options.hook.as_ref(),
        };
        let code = flow::authorize(
            &self.net,
            &d,
            &idp.client_id,
            Some("openid"),
            &listener,
            &asker,
        )
        .await?;
        let redirect_uri = listener.redirect_uri.clone();
        drop(listener);
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.code.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", code.verifier.as_str()),
        ];
        let auth = match &idp.client_secret {
            Some(secret) => ClientAuth::Basic(&idp.client_id, secret),
            None => ClientAuth::None(&idp.client_id),
        };
        let what = "the IdP login's token request";
        let answer = self
            .net
            .token(&d.token_endpoint, &form, &auth, None, what)
            .await?;
        let body = answer.json().unwrap_or_default();
        let Some(id_token) = body
            .get("id_token")
            .and_then(Value::as_str)
            .filter(|t| (200..300).contains(&answer.status) && !t.is_empty())
            .map(str::to_string)
        else {
            let error = body["error"].as_str().map_or_else(
                || format!("HTTP {} and no id_token", answer.status),
                str::to_string,
            );
            return Err(Error::new(
                ErrorKind::NeedsAuth,
                format!("{what} at {} was refused: {error}", idp.issuer),
            )
            .with_data(
                json!({"reason": "refused", "error": error, "issuer": idp.issuer, "idp": true}),
            ));
        };
        let expires_at = jwt_exp_ms(&id_token);
        let record = json!({"issuer": idp.issuer, "id_token": id_token, "expires_at": expires_at});
        let (store, k) = (self.store.clone(), key);
        tokio::task::spawn_blocking(move || store.update(&k, move |_| Some(record)))
            .await
            .map_err(|_| Error::new(ErrorKind::Config, "the auth store's task failed"))?
            .map_err(|e| store_error(e, self.name.as_deref()))?;
        Ok(id_token)
    }

    /// Forgets the IdP's ID token (the IdP refused it: expired or revoked before its `exp`).
    pub(super) async fn forget_id_token(&self, idp: &XaaIdp) {
        let (store, key) = (self.store.clone(), store_key(&idp.issuer));
        let _ = tokio::task::spawn_blocking(move || store.remove(&key)).await;
    }

    async fn cached_id_token(&self, key: &str) -> Option<String> {
        let (store, key) = (self.store.clone(), key.to_string());
        let record = tokio::task::spawn_blocking(move || store.read(&key))
            .await
            .ok()?
            .ok()??;
        let token = record.get("id_token")?.as_str()?.to_string();
        match record.get("expires_at").and_then(Value::as_u64) {
            Some(at) if at <= now_ms().saturating_add(ID_TOKEN_MARGIN_MS) => None,
            _ => Some(token),
        }
    }

    /// The IdP's OpenID configuration, as the authorization code leg reads an authorization
    /// server's (its `issuer` checked against the one configured).
    async fn idp_configuration(&self, idp: &XaaIdp) -> Result<Discovered> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            idp.issuer.trim_end_matches('/')
        );
        let meta = self
            .net
            .get_json(&url, "GET (the IdP's OpenID configuration)")
            .await?
            .ok_or_else(|| auth_error(format!("no OpenID configuration at {url}")))?;
        let field = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
        if field("issuer").as_deref().map(|i| i.trim_end_matches('/'))
            != Some(idp.issuer.trim_end_matches('/'))
        {
            return Err(auth_error(format!(
                "the OpenID configuration at {url} names issuer {:?}, not {:?}: refused",
                field("issuer").unwrap_or_default(),
                idp.issuer
            )));
        }
        let need = |k: &str| {
            field(k).ok_or_else(|| auth_error(format!("the IdP configuration at {url} has no {k}")))
        };
        Ok(Discovered {
            resource: String::new(),
            resource_metadata: None,
            prm_scopes: None,
            issuer: idp.issuer.clone(),
            authorization_endpoint: need("authorization_endpoint")?,
            token_endpoint: need("token_endpoint")?,
            registration_endpoint: None,
            metadata: Some(meta),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idp_option_is_checked_naming_what_is_wrong() {
        let ok = XaaIdp::parse(
            &json!({"issuer": "https://idp.example", "client_id": "c", "callback_port": 8123}),
        )
        .unwrap();
        assert_eq!(ok.callback_port, 8123);
        for (bad, says) in [
            (json!("x"), "must be an object"),
            (json!({"client_id": "c"}), "needs `issuer`"),
            (json!({"issuer": "https://i"}), "needs `client_id`"),
            (
                json!({"issuer": "ftp://i", "client_id": "c"}),
                "http(s) URL",
            ),
            (
                json!({"issuer": "https://i", "client_id": "c", "port": 1}),
                "unknown key `port`",
            ),
            (
                json!({"issuer": "https://i", "client_id": "c", "callback_port": 0}),
                "`callback_port` must be a port number 1-65535",
            ),
        ] {
            let e = XaaIdp::parse(&bad).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn an_id_tokens_exp_is_read_from_its_payload() {
        use base64::Engine as _;
        let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let jwt = format!(
            "{}.{}.sig",
            b64(json!({"alg": "RS256"})),
            b64(json!({"exp": 1_900_000_000}))
        );
        assert_eq!(jwt_exp_ms(&jwt), Some(1_900_000_000_000));
        assert_eq!(jwt_exp_ms("opaque"), None);
    }
}
