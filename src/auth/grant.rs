//! How an `OAuth` gets a token: the decision on a challenge, the client identity, each grant,
//! and the refresh — and the `Credentials` the transports consult.

use super::discovery::Discovered;
use super::jws::SigningKey;
use super::net::{auth_error, ClientAuth};
use super::{
    challenge, discovery, flow, jws, needs_auth, now_ms, scope_set, store_error, token_of,
    ClientReg, Current, Dpop, Flight, Grant, OAuth,
};
use crate::error::{Error, ErrorKind, Result};
use crate::transport::credentials::{Applied, Credentials, Request, Verdict};
use crate::transport::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use serde_json::{json, Value};
use std::sync::Arc;

/// The DPoP proof's `htu`: the URL without query and fragment.
use super::net::strip_query;

impl OAuth {
    /// Turns DPoP on for this authorization server when the entry wants it: `true`, or `auto`
    /// and the server advertises ES256.
    fn dpop_for(&self, d: &Discovered) -> Result<Option<Arc<SigningKey>>> {
        let wanted = match self.settings.dpop {
            Dpop::Off => false,
            Dpop::On => true,
            Dpop::Auto => d
                .meta_list("dpop_signing_alg_values_supported")
                .iter()
                .any(|a| a == "ES256"),
        };
        if !wanted {
            return Ok(None);
        }
        let mut key = self.dpop_key.lock();
        if let Some(k) = &*key {
            return Ok(Some(k.clone()));
        }
        let (k, der) = SigningKey::generate_es256().map_err(auth_error)?;
        let k = Arc::new(k);
        *key = Some(k.clone());
        *self.dpop_der.lock() = Some(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            der,
        ));
        Ok(Some(k))
    }

    /// The method a client registers for: what the server advertises, public first.
    fn method_to_register(d: &Discovered) -> &'static str {
        let advertised = d.meta_list("token_endpoint_auth_methods_supported");
        if advertised.is_empty() || advertised.iter().any(|m| m == "none") {
            "none"
        } else if advertised.iter().any(|m| m == "client_secret_basic") {
            "client_secret_basic"
        } else if advertised.iter().any(|m| m == "client_secret_post") {
            "client_secret_post"
        } else {
            "none"
        }
    }

    /// The method a pre-registered client with a secret uses: the entry's, else the first of
    /// Basic, post the server advertises (Basic when it says nothing: RFC 8414's default).
    fn method_for_secret(&self, d: &Discovered) -> String {
        if let Some(m) = &self.settings.token_endpoint_auth_method {
            return m.clone();
        }
        let advertised = d.meta_list("token_endpoint_auth_methods_supported");
        if advertised.iter().any(|m| m == "client_secret_basic") || advertised.is_empty() {
            "client_secret_basic".into()
        } else if advertised.iter().any(|m| m == "client_secret_post") {
            "client_secret_post".into()
        } else if advertised.iter().any(|m| m == "private_key_jwt") {
            "private_key_jwt".into()
        } else {
            "client_secret_basic".into()
        }
    }

    fn client_auth<'a>(&self, c: &'a ClientReg, d: &Discovered) -> Result<ClientAuth<'a>> {
        let secret = c.client_secret.as_deref();
        Ok(match (c.method.as_str(), secret) {
            ("client_secret_basic", Some(s)) => ClientAuth::Basic(&c.client_id, s),
            ("client_secret_post", Some(s)) => ClientAuth::Post(&c.client_id, s),
            ("private_key_jwt", _) => {
                let key = self.settings.private_key.as_ref().ok_or_else(|| {
                    auth_error(
                        "token endpoint method private_key_jwt needs `oauth.privateKey`".into(),
                    )
                })?;
                let aud = d.meta_str("issuer").unwrap_or(&d.issuer);
                ClientAuth::Assertion(
                    jws::client_assertion(key, &c.client_id, aud, 300).map_err(auth_error)?,
                )
            }
            _ => ClientAuth::None(&c.client_id),
        })
    }

    /// The client identity at `d`'s authorization server: pre-registered credentials (bound to
    /// their issuer), a Client ID Metadata Document, a stored dynamic registration for this
    /// issuer, or a new one.
    async fn client_for(&self, d: &Discovered, redirect_uri: &str) -> Result<ClientReg> {
        if let Some(id) = &self.settings.client_id {
            if let Some(bound) = &self.settings.issuer {
                if bound.trim_end_matches('/') != d.issuer.trim_end_matches('/') {
                    return Err(needs_auth(
                        format!(
                            "the entry's pre-registered client belongs to the issuer {bound:?}, and this server now uses {:?}: it is not sent there",
                            d.issuer
                        ),
                        "issuer_changed",
                        Some(d),
                        None,
                    ));
                }
            }
            let method = match &self.settings.client_secret {
                Some(_) => self.method_for_secret(d),
                None if self.settings.private_key.is_some() => "private_key_jwt".into(),
                None => "none".into(),
            };
            return Ok(ClientReg {
                client_id: id.clone(),
                client_secret: self.settings.client_secret.clone(),
                method,
                redirect_uri: Some(redirect_uri.to_string()),
                provenance: "pre-registered",
            });
        }
        if let Some(url) = &self.settings.client_metadata_url {
            if d.meta_bool("client_id_metadata_document_supported") {
                return Ok(ClientReg {
                    client_id: url.clone(),
                    client_secret: None,
                    method: if self.settings.private_key.is_some() {
                        "private_key_jwt".into()
                    } else {
                        "none".into()
                    },
                    redirect_uri: Some(redirect_uri.to_string()),
                    provenance: "cimd",
                });
            }
        }
        let stored = self
            .store
            .read(&self.key)
            .ok()
            .flatten()
            .and_then(|r| r.get("clients")?.get(&d.issuer).cloned());
        if let Some(c) = stored {
            let same_redirect = c.get("redirect_uri").and_then(Value::as_str) == Some(redirect_uri);
            if let (Some(id), true) = (c.get("client_id").and_then(Value::as_str), same_redirect) {
                return Ok(ClientReg {
                    client_id: id.to_string(),
                    client_secret: c
                        .get("client_secret")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    method: c
                        .get("method")
                        .and_then(Value::as_str)
                        .unwrap_or("none")
                        .to_string(),
                    redirect_uri: Some(redirect_uri.to_string()),
                    provenance: "dcr",
                });
            }
        }
        let Some(endpoint) = &d.registration_endpoint else {
            return Err(needs_auth(
                format!(
                    "the authorization server {} offers no dynamic registration, and the entry gives no `oauth.clientId`",
                    d.issuer
                ),
                "no_client",
                Some(d),
                None,
            ));
        };
        let requested = Self::method_to_register(d);
        let body = json!({
            "client_name": self.settings.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": requested,
            "application_type": "native",
        });
        let answer = self
            .net
            .post_json(endpoint, &body, "POST (dynamic client registration)")
            .await?;
        let reg = answer
            .json()
            .filter(|_| (200..300).contains(&answer.status));
        let Some(id) = reg
            .as_ref()
            .and_then(|r| r.get("client_id")?.as_str().map(str::to_string))
        else {
            return Err(needs_auth(
                format!(
                    "the dynamic registration at {endpoint} failed (HTTP {}{})",
                    answer.status,
                    reg.as_ref()
                        .or(answer.json().as_ref())
                        .and_then(|r| r.get("error")?.as_str().map(|e| format!(": {e}")))
                        .unwrap_or_default()
                ),
                "registration_failed",
                Some(d),
                None,
            ));
        };
        let reg = reg.unwrap_or_default();
        Ok(ClientReg {
            client_id: id,
            client_secret: reg
                .get("client_secret")
                .and_then(Value::as_str)
                .map(str::to_string),
            method: reg
                .get("token_endpoint_auth_method")
                .and_then(Value::as_str)
                .unwrap_or(requested)
                .to_string(),
            redirect_uri: Some(redirect_uri.to_string()),
            provenance: "dcr",
        })
    }

    /// One token request at `endpoint`: the grant's `form` with the RFC 8707 `resource` and the
    /// scope added, its answer read as a token (or an error in the server's own words).
    #[allow(clippy::too_many_arguments)]
    async fn grant(
        &self,
        endpoint: &str,
        mut form: Vec<(&str, &str)>,
        resource: &str,
        scope: Option<&str>,
        auth: &ClientAuth<'_>,
        dpop: Option<&SigningKey>,
        what: &str,
    ) -> Result<Value> {
        form.push(("resource", resource));
        if let Some(s) = scope {
            form.push(("scope", s));
        }
        let answer = self.net.token(endpoint, &form, auth, dpop, what).await?;
        token_of(&answer, what)
    }

    /// The identity of the credentials a grant gives (see `Credentials::identity`).
    fn identity_of(d: &Discovered, client: &str, grant: &str) -> u64 {
        crate::transport::remote::fingerprint([
            (&b"issuer"[..], d.issuer.as_bytes()),
            (&b"client"[..], client.as_bytes()),
            (&b"grant"[..], grant.as_bytes()),
        ])
    }

    /// The scope of a new authorization: the entry's pin; else (a step-up) the union of what
    /// was asked and granted and what the challenge names; else the challenge's, then the
    /// protected resource's; `offline_access` added when the authorization server lists it.
    fn scope_for(
        &self,
        flight: &Flight,
        d: &Discovered,
        challenged: Option<&str>,
        step_up: bool,
    ) -> Option<String> {
        let base = if let Some(pinned) = &self.settings.scopes {
            Some(pinned.clone())
        } else if step_up {
            scope_set(&[
                flight.requested.as_deref(),
                flight.granted.as_deref(),
                challenged,
            ])
        } else {
            challenged
                .map(str::to_string)
                .or_else(|| d.prm_scopes.clone())
        };
        let offline = self.settings.offline_access
            && self.settings.grant == Grant::AuthorizationCode
            && d.meta_list("scopes_supported")
                .iter()
                .any(|s| s == "offline_access");
        match base {
            Some(b) if offline && !b.split_ascii_whitespace().any(|s| s == "offline_access") => {
                Some(format!("{b} offline_access"))
            }
            None if offline => Some("offline_access".into()),
            b => b,
        }
    }

    /// A new token from a new grant, for a challenge that said `challenged` scope (`step_up`: a
    /// 403 `insufficient_scope`).
    async fn obtain(
        &self,
        flight: &mut Flight,
        ch: &challenge::AuthChallenge,
        step_up: bool,
    ) -> Result<()> {
        if let Some(e) = &flight.grant_failed {
            return Err(e.clone());
        }
        let d = discovery::discover(
            &self.net,
            &self.server,
            ch.resource_metadata.as_deref(),
            self.settings.auth_server_metadata_url.as_deref(),
        )
        .await?;
        let scope = self.scope_for(flight, &d, ch.scope.as_deref(), step_up);
        if step_up {
            let key = scope.clone().unwrap_or_default();
            let n = flight.step_ups.entry(key).or_insert(0);
            *n += 1;
            if *n > 1 {
                return Err(needs_auth(
                    format!(
                        "the server still refuses for insufficient scope after an authorization for {:?}: giving up (insufficient_scope)",
                        scope.as_deref().unwrap_or("")
                    ),
                    "insufficient_scope",
                    Some(&d),
                    ch.scope.as_deref(),
                ));
            }
        }
        let dpop = self.dpop_for(&d)?;
        let result = match self.settings.grant {
            Grant::AuthorizationCode => {
                self.authorization_code(&d, scope.as_deref(), dpop.as_deref())
                    .await
            }
            Grant::ClientCredentials => {
                self.client_credentials(&d, scope.as_deref(), dpop.as_deref())
                    .await
            }
            Grant::JwtBearer => {
                let r = self.workload(&d, scope.as_deref(), dpop.as_deref()).await;
                if let Err(e) = &r {
                    flight.grant_failed = Some(e.clone());
                }
                r
            }
            Grant::Enterprise => self.enterprise(&d, scope.as_deref(), dpop.as_deref()).await,
        };
        match result {
            Ok((token, client, identity)) => {
                flight.requested = scope.clone();
                flight.granted = token
                    .get("scope")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or(scope.clone());
                self.keep(&token, &d, client.as_ref(), identity).await?;
                let expires = self.current.read().as_ref().and_then(|c| c.expires_at);
                self.event(
                    "authorized",
                    Some(&d.issuer),
                    flight.granted.as_deref(),
                    expires,
                );
                Ok(())
            }
            Err(mut e) => {
                if e.kind == ErrorKind::NeedsAuth {
                    if let Some(data) = e.data.as_mut().and_then(Value::as_object_mut) {
                        data.entry("issuer").or_insert(json!(d.issuer));
                        if let Some(rm) = &d.resource_metadata {
                            data.entry("resource_metadata").or_insert(json!(rm));
                        }
                        if let Some(s) = &scope {
                            data.entry("scope").or_insert(json!(s));
                        }
                    } else {
                        e.data =
                            needs_auth(String::new(), "failed", Some(&d), scope.as_deref()).data;
                    }
                }
                Err(e)
            }
        }
    }

    /// The authorization code grant through the host, with one new registration when a
    /// dynamic one turns out stale (`invalid_client`).
    async fn authorization_code(
        &self,
        d: &Discovered,
        scope: Option<&str>,
        dpop: Option<&SigningKey>,
    ) -> Result<(Value, Option<ClientReg>, u64)> {
        if !self.options.interactive {
            let e = needs_auth(
                format!(
                    "{} needs authorization (HTTP 401) at {} (the connection's `auth_interactive` is off, so none was started)",
                    self.server, d.issuer
                ),
                "no_token",
                Some(d),
                scope,
            );
            let _ = self
                .store_update(|old| {
                    let mut r = old.filter(Value::is_object).unwrap_or_else(|| json!({}));
                    r["needs_auth_at"] = json!(now_ms());
                    Some(r)
                })
                .await;
            self.event("needs-auth", Some(&d.issuer), scope, None);
            return Err(e);
        }
        let mut redone = false;
        loop {
            let port = self.stored_port(d).unwrap_or(self.settings.callback_port);
            let listener = flow::Listener::bind(&self.settings.callback_host, port).await?;
            let client = self.client_for(d, &listener.redirect_uri).await?;
            let asker = flow::Asker {
                server: self.name.as_deref(),
                channel: self.options.channel.as_deref(),
                timeout: self.options.timeout,
                hook: self.options.hook.as_ref(),
            };
            let code =
                flow::authorize(&self.net, d, &client.client_id, scope, &listener, &asker).await?;
            drop(listener);
            let auth = self.client_auth(&client, d)?;
            let form = vec![
                ("grant_type", "authorization_code"),
                ("code", code.code.as_str()),
                (
                    "redirect_uri",
                    client.redirect_uri.as_deref().unwrap_or_default(),
                ),
                ("code_verifier", code.verifier.as_str()),
            ];
            let what = "the token request (authorization_code)";
            let token = self
                .grant(
                    &d.token_endpoint,
                    form,
                    &d.resource,
                    scope,
                    &auth,
                    dpop,
                    what,
                )
                .await;
            match token {
                Ok(token) => {
                    let id = Self::identity_of(d, &client.client_id, "authorization_code");
                    return Ok((token, Some(client), id));
                }
                Err(e)
                    if !redone
                        && client.provenance == "dcr"
                        && e.data.as_ref().and_then(|d| d.get("error"))
                            == Some(&json!("invalid_client")) =>
                {
                    // A stale registration (deleted at the server, its secret expired): forget
                    // it and register again, once.
                    redone = true;
                    let issuer = d.issuer.clone();
                    self.store_update(move |old| {
                        let mut r = old?;
                        if let Some(c) = r.get_mut("clients").and_then(Value::as_object_mut) {
                            c.remove(&issuer);
                        }
                        Some(r)
                    })
                    .await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The callback port of the stored registration at `d` (its redirect URI is registered).
    fn stored_port(&self, d: &Discovered) -> Option<u16> {
        if self.settings.client_id.is_some() || self.settings.callback_port != 0 {
            return None;
        }
        let r = self.store.read(&self.key).ok()??;
        let uri = r
            .get("clients")?
            .get(&d.issuer)?
            .get("redirect_uri")?
            .as_str()?
            .to_string();
        let rest = uri.strip_prefix("http://")?;
        let hostport = rest.split('/').next()?;
        hostport.rsplit(':').next()?.parse().ok()
    }

    fn pre_registered(&self, d: &Discovered, grant: &str) -> Result<ClientReg> {
        let id = self.settings.client_id.clone().ok_or_else(|| {
            Error::invalid(format!(
                "server field `oauth`: the {grant} grant needs `clientId`"
            ))
        })?;
        let method = if self.settings.private_key.is_some() && self.settings.client_secret.is_none()
        {
            "private_key_jwt".to_string()
        } else if self.settings.client_secret.is_some() {
            self.method_for_secret(d)
        } else {
            "none".into()
        };
        Ok(ClientReg {
            client_id: id,
            client_secret: self.settings.client_secret.clone(),
            method,
            redirect_uri: None,
            provenance: "pre-registered",
        })
    }

    async fn client_credentials(
        &self,
        d: &Discovered,
        scope: Option<&str>,
        dpop: Option<&SigningKey>,
    ) -> Result<(Value, Option<ClientReg>, u64)> {
        let client = self.pre_registered(d, "client_credentials")?;
        let auth = self.client_auth(&client, d)?;
        let form = vec![("grant_type", "client_credentials")];
        let token = self
            .grant(
                &d.token_endpoint,
                form,
                &d.resource,
                scope,
                &auth,
                dpop,
                "the token request (client_credentials)",
            )
            .await?;
        let id = Self::identity_of(d, &client.client_id, "client_credentials");
        Ok((token, Some(client), id))
    }

    /// Workload identity (RFC 7523 §2.1): the workload's own JWT is the grant.
    async fn workload(
        &self,
        d: &Discovered,
        scope: Option<&str>,
        dpop: Option<&SigningKey>,
    ) -> Result<(Value, Option<ClientReg>, u64)> {
        let assertion = self
            .settings
            .assertion
            .as_ref()
            .ok_or_else(|| Error::invalid("server field `oauth`: jwt_bearer needs `assertion`"))?
            .read("the workload assertion")?;
        let form = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", assertion.as_str()),
        ];
        let auth = match &self.settings.client_id {
            Some(id) => ClientAuth::None(id),
            None => ClientAuth::Nothing,
        };
        let what = "the token request (jwt-bearer)";
        let token = self
            .grant(
                &d.token_endpoint,
                form,
                &d.resource,
                scope,
                &auth,
                dpop,
                what,
            )
            .await?;
        let id = Self::identity_of(
            d,
            self.settings.client_id.as_deref().unwrap_or(""),
            "jwt_bearer",
        );
        Ok((token, None, id))
    }

    /// Enterprise-managed authorization: the ID token exchanged at the IdP for an ID-JAG (RFC
    /// 8693), which is the jwt-bearer grant at the authorization server (RFC 7523).
    async fn enterprise(
        &self,
        d: &Discovered,
        scope: Option<&str>,
        dpop: Option<&SigningKey>,
    ) -> Result<(Value, Option<ClientReg>, u64)> {
        let e = self
            .settings
            .enterprise
            .as_ref()
            .ok_or_else(|| Error::invalid("server field `oauth.enterprise` is missing"))?;
        // The IdP: the entry's, or (`oauth.xaa: true`) the connection's `xaa_idp`.
        let idp = match &e.idp {
            Some(i) => i.clone(),
            None => {
                let x = self.options.xaa_idp.as_ref().ok_or_else(|| {
                    Error::invalid(format!(
                        "{}: `oauth.xaa` is true but no IdP is configured: give the connection option `xaa_idp` {{\"issuer\", \"client_id\"}} (Claude Code's settings.xaaIdp), or `oauth.xaa` as an object with `idpIssuer` and `idpClientId`",
                        self.name.as_deref().unwrap_or(&self.server)
                    ))
                })?;
                super::EntryIdp {
                    idp_issuer: Some(x.issuer.clone()),
                    idp_token_endpoint: None,
                    idp_client_id: x.client_id.clone(),
                    idp_client_secret: x.client_secret.clone(),
                    idp_callback_port: x.callback_port,
                }
            }
        };
        let login = match (&e.id_token, &idp.idp_issuer) {
            (Some(_), _) => None,
            (None, Some(issuer)) => Some(super::xaa::XaaIdp {
                issuer: issuer.clone(),
                client_id: idp.idp_client_id.clone(),
                client_secret: idp.idp_client_secret.clone(),
                callback_port: idp.idp_callback_port,
            }),
            (None, None) => {
                return Err(Error::invalid(
                    "server field `oauth.enterprise`: an ID token from a login at the IdP needs `idpIssuer`",
                ))
            }
        };
        let e = &idp;
        let idp_token = match (&e.idp_token_endpoint, &e.idp_issuer) {
            (Some(t), _) => t.clone(),
            (None, Some(issuer)) => {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                );
                let meta = self
                    .net
                    .get_json(&url, "GET (the IdP's OpenID configuration)")
                    .await?
                    .ok_or_else(|| auth_error(format!("no OpenID configuration at {url}")))?;
                meta.get("token_endpoint")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        auth_error(format!(
                            "the IdP configuration at {url} has no token_endpoint"
                        ))
                    })?
            }
            (None, None) => {
                return Err(Error::invalid(
                    "server field `oauth.enterprise` needs `idpIssuer` or `idpTokenEndpoint`",
                ))
            }
        };
        let given = self
            .settings
            .enterprise
            .as_ref()
            .and_then(|e| e.id_token.as_ref());
        let id_token = match (given, &login) {
            (Some(source), _) => source.read("the enterprise ID token")?,
            (None, Some(idp)) => self.idp_id_token(idp).await?,
            (None, None) => {
                return Err(Error::invalid(
                    "server field `oauth.enterprise` gives no ID token and no IdP to log in at",
                ))
            }
        };
        let audience = d.meta_str("issuer").unwrap_or(&d.issuer).to_string();
        let idp_auth = match &e.idp_client_secret {
            Some(secret) => ClientAuth::Basic(&e.idp_client_id, secret),
            None => ClientAuth::None(&e.idp_client_id),
        };
        let exchange = |id_token: String| {
            let (idp_token, audience, idp_auth) = (&idp_token, &audience, &idp_auth);
            async move {
                let form = vec![
                    (
                        "grant_type",
                        "urn:ietf:params:oauth:grant-type:token-exchange",
                    ),
                    (
                        "requested_token_type",
                        "urn:ietf:params:oauth:token-type:id-jag",
                    ),
                    ("audience", audience.as_str()),
                    ("subject_token", id_token.as_str()),
                    (
                        "subject_token_type",
                        "urn:ietf:params:oauth:token-type:id_token",
                    ),
                ];
                let what = "the token exchange at the IdP";
                self.grant(idp_token, form, &d.resource, scope, idp_auth, None, what)
                    .await
            }
        };
        let exchanged = match (exchange(id_token).await, &login) {
            // The IdP no longer takes the ID token it gave (expired early, revoked): forgotten,
            // and one new login.
            (Err(e), Some(idp))
                if e.data.as_ref().and_then(|d| d.get("error"))
                    == Some(&json!("invalid_grant")) =>
            {
                self.forget_id_token(idp).await;
                let fresh = self.idp_id_token(idp).await?;
                exchange(fresh).await?
            }
            (r, _) => r?,
        };
        let jag = exchanged
            .get("access_token")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let client = self.pre_registered(d, "enterprise")?;
        let auth = self.client_auth(&client, d)?;
        let form = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            ("assertion", jag.as_str()),
        ];
        let token = self
            .grant(
                &d.token_endpoint,
                form,
                &d.resource,
                scope,
                &auth,
                dpop,
                "the token request (jwt-bearer with the ID-JAG)",
            )
            .await?;
        let id = Self::identity_of(d, &client.client_id, "enterprise");
        Ok((token, Some(client), id))
    }

    /// Refreshes the stored token (single flight: the caller holds `flight`). Another process
    /// may have refreshed it already: the store is read first, and a token that is not the one
    /// sent is taken as it is. A refresh token refused is forgotten only if the store still
    /// holds that one (compare and swap: a loser never wipes the winner's token).
    async fn refresh(&self, sent: u64) -> Result<bool> {
        let _exclusive = {
            let (store, key) = (self.store.clone(), self.key.clone());
            tokio::task::spawn_blocking(move || store.exclusive(&key, "refresh"))
                .await
                .map_err(|_| Error::new(ErrorKind::Config, "the auth store's task failed"))?
                .map_err(|e| store_error(e, self.name.as_deref()))?
        };
        let record = {
            let (store, key) = (self.store.clone(), self.key.clone());
            tokio::task::spawn_blocking(move || store.read(&key))
                .await
                .ok()
                .and_then(|r| r.ok())
                .flatten()
        };
        let Some(record) = record else {
            return Ok(false);
        };
        let stored_id = record
            .pointer("/tokens/id")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if stored_id != 0 && stored_id != sent && stored_id != self.current_id() {
            // Someone else refreshed (another connection, another process).
            return Ok(self.adopt(&record));
        }
        let t = record.get("tokens").cloned().unwrap_or_default();
        let (Some(rt), Some(endpoint)) = (
            t.get("refresh_token")
                .and_then(Value::as_str)
                .map(str::to_string),
            t.get("token_endpoint")
                .and_then(Value::as_str)
                .map(str::to_string),
        ) else {
            return Ok(false);
        };
        let issuer = t
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let resource = t
            .get("resource")
            .and_then(Value::as_str)
            .unwrap_or(&self.server)
            .to_string();
        let client_id = t
            .get("client_id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let method = t
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .to_string();
        let secret = self.settings.client_secret.clone().or_else(|| {
            record
                .get("clients")?
                .get(&issuer)?
                .get("client_secret")?
                .as_str()
                .map(str::to_string)
        });
        let client = ClientReg {
            client_id,
            client_secret: secret,
            method,
            redirect_uri: None,
            provenance: "stored",
        };
        let d = Discovered {
            resource: resource.clone(),
            resource_metadata: None,
            prm_scopes: None,
            issuer: issuer.clone(),
            metadata: None,
            authorization_endpoint: String::new(),
            token_endpoint: endpoint.clone(),
            registration_endpoint: None,
        };
        let auth = self.client_auth(&client, &d)?;
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", rt.as_str()),
            ("resource", resource.as_str()),
        ];
        let dpop = self.dpop_key.lock().clone();
        let answer = self
            .net
            .token(&endpoint, &form, &auth, dpop.as_deref(), "the refresh")
            .await?;
        match token_of(&answer, "the refresh") {
            Ok(mut token) => {
                if token.get("refresh_token").is_none() {
                    token["refresh_token"] = json!(rt); // not rotated: the old one stays good
                }
                let identity = t.get("identity").and_then(Value::as_u64).unwrap_or(0);
                self.keep(&token, &d, Some(&client), identity).await?;
                let expires = self.current.read().as_ref().and_then(|c| c.expires_at);
                self.event(
                    "refreshed",
                    Some(&issuer),
                    token.get("scope").and_then(Value::as_str),
                    expires,
                );
                Ok(true)
            }
            Err(_) => {
                let failed = rt.clone();
                let record = self
                    .store_update(move |old| {
                        let mut r = old?;
                        if r.pointer("/tokens/refresh_token").and_then(Value::as_str)
                            == Some(failed.as_str())
                        {
                            if let Some(m) = r.as_object_mut() {
                                m.remove("tokens");
                            }
                        }
                        Some(r)
                    })
                    .await?;
                // The winner of a race left its token: use it.
                Ok(record.is_some_and(|r| r.get("tokens").is_some() && self.adopt(&r)))
            }
        }
    }

    /// Judges a 401/403 (see `Credentials::challenge`).
    async fn judge(&self, sent: &Applied, status: u16, headers: &HeaderMap) -> Verdict {
        let values: Vec<&str> = headers
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let parsed = challenge::parse(&values);
        let ch = challenge::summarize(&parsed, true);
        if ch.error.as_deref() == Some("use_dpop_nonce") {
            if let Some(nonce) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) {
                let mut current = self.rs_nonce.lock();
                if current.as_deref() != Some(nonce) {
                    *current = Some(nonce.to_string());
                    return Verdict::Retry;
                }
            }
        }
        let step_up = status == 403;
        if step_up && ch.error.as_deref() != Some("insufficient_scope") {
            return Verdict::Pass;
        }
        let mut flight = self.flight.lock().await;
        let now = self.current_id();
        if !step_up && now != 0 && now != sent.sent {
            return Verdict::Retry; // renewed while this request was out
        }
        if !step_up && sent.sent != 0 {
            let refreshable = self.current.read().as_ref().is_some_and(|c| c.refreshable);
            if refreshable {
                if let Ok(true) = self.refresh(sent.sent).await {
                    return Verdict::Retry;
                }
            }
            *self.current.write() = None;
        }
        match self.obtain(&mut flight, &ch, step_up).await {
            Ok(()) => Verdict::Retry,
            Err(e) => {
                self.event("failed", None, ch.scope.as_deref(), None);
                Verdict::Fail(e)
            }
        }
    }
}

impl Credentials for OAuth {
    fn apply(&self, request: &Request<'_>) -> Applied {
        let current = self.current.read().clone();
        let Some(c) = current else {
            return Applied::default();
        };
        let mut headers = vec![(AUTHORIZATION, c.header.clone())];
        if c.dpop {
            // A DPoP-bound token without its proof is no credential: send none, and let the
            // server's challenge decide.
            let Some(key) = self.dpop_key.lock().clone() else {
                return Applied::default();
            };
            let nonce = self.rs_nonce.lock().clone();
            let body = request.body.filter(|b| !b.is_empty());
            let Ok(proof) = jws::dpop_proof(
                &key,
                request.method,
                &strip_query(request.url),
                Some(&c.token),
                nonce.as_deref(),
                body,
            ) else {
                return Applied::default();
            };
            let Ok(mut v) = HeaderValue::from_str(&proof) else {
                return Applied::default();
            };
            v.set_sensitive(true);
            headers.push((reqwest::header::HeaderName::from_static("dpop"), v));
        }
        Applied {
            headers,
            sent: c.id,
            ..Default::default()
        }
    }

    fn due(&self) -> bool {
        self.current
            .read()
            .as_ref()
            .is_some_and(|c| c.refreshable && c.refresh_due(now_ms()))
    }

    fn prepare(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let _flight = self.flight.lock().await;
            let (id, due) = match self.current.read().as_ref() {
                Some(c) => (c.id, c.refreshable && c.refresh_due(now_ms())),
                None => return Ok(()),
            };
            if !due {
                return Ok(()); // refreshed while this one waited
            }
            if !self.refresh(id).await.unwrap_or(false) {
                // Not refreshable after all: send it as it is; a 401 then runs a new grant.
                let mut current = self.current.write();
                if let Some(c) = current.as_ref() {
                    let stale = Current {
                        refreshable: false,
                        ..(**c).clone()
                    };
                    *current = Some(Arc::new(stale));
                }
            }
            Ok(())
        })
    }

    fn identity(&self) -> u64 {
        self.current.read().as_ref().map_or(0, |c| c.identity)
    }

    fn challenge<'a>(
        &'a self,
        sent: &'a Applied,
        status: u16,
        headers: &'a HeaderMap,
        _request: &'a Request<'a>,
    ) -> BoxFuture<'a, Verdict> {
        Box::pin(self.judge(sent, status, headers))
    }
}
