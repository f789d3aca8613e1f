//! Client-side JOSE for OAuth: `private_key_jwt` client assertions (RFC 7523),
//! DPoP proofs (RFC 9449) and JWK thumbprints (RFC 7638).
//!
//! Only signing lives here: the client never has to verify a JWS, so pulling in
//! a full JOSE stack would buy nothing but surface. Everything is built on
//! `ring`, which the TLS stack already links.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::digest::{digest, SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaEncoding, RsaKeyPair,
    ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256, RSA_PSS_SHA256,
};
use serde_json::{Map, Value};

/// The JWS algorithms a client may be asked to sign with. The set is what
/// authorization servers commonly accept for `private_key_jwt` and DPoP and
/// what `ring` can sign with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alg {
    Es256,
    Rs256,
    Ps256,
    EdDsa,
}

impl Alg {
    /// JWA names are case-sensitive (RFC 7518 §3.1), so "es256" is refused
    /// rather than guessed at: a server would refuse it too.
    pub fn parse(name: &str) -> Result<Alg, String> {
        match name {
            "ES256" => Ok(Alg::Es256),
            "RS256" => Ok(Alg::Rs256),
            "PS256" => Ok(Alg::Ps256),
            "EdDSA" => Ok(Alg::EdDsa),
            other => {
                let shown: String = other.chars().take(32).collect();
                Err(format!(
                    "unsupported JWS algorithm {shown:?}: expected one of ES256, RS256, PS256, EdDSA"
                ))
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::Rs256 => "RS256",
            Alg::Ps256 => "PS256",
            Alg::EdDsa => "EdDSA",
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

enum Inner {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A private key bound to one JWS algorithm. The algorithm is fixed at load
/// time so a misconfiguration (an RSA key with `ES256`) surfaces when the key
/// is read, not as an opaque `invalid_client` from the server later.
pub struct SigningKey {
    inner: Inner,
    alg: Alg,
    rng: SystemRandom,
}

/// Shows only the algorithm and the thumbprint, so a key can sit in a logged
/// struct without its private half ever reaching a log.
impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.alg)
            .field("thumbprint", &self.thumbprint())
            .finish_non_exhaustive()
    }
}

/// What the PKCS#8 AlgorithmIdentifier says the key is; read before handing
/// the bytes to `ring` so that a wrong key type gets a message naming both the
/// key and the algorithm instead of ring's bare "InvalidEncoding".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyKind {
    EcP256,
    Rsa,
    Ed25519,
}

impl KeyKind {
    fn describe(self) -> &'static str {
        match self {
            KeyKind::EcP256 => "an EC P-256 key",
            KeyKind::Rsa => "an RSA key",
            KeyKind::Ed25519 => "an Ed25519 key",
        }
    }

    fn usable_with(self) -> &'static str {
        match self {
            KeyKind::EcP256 => "ES256",
            KeyKind::Rsa => "RS256 or PS256",
            KeyKind::Ed25519 => "EdDSA",
        }
    }
}

const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
const OID_RSASSA_PSS: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0a];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
const OID_X25519: &[u8] = &[0x2b, 0x65, 0x6e];
const OID_X448: &[u8] = &[0x2b, 0x65, 0x6f];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_ED448: &[u8] = &[0x2b, 0x65, 0x71];

const PKCS8_NEEDED: &str = "a PKCS#8 \"PRIVATE KEY\" PEM is needed";
const CONVERT_HINT: &str = "(convert with `openssl pkcs8 -topk8 -nocrypt -in key.pem`)";

const TAG_INTEGER: u8 = 0x02;
const TAG_OID: u8 = 0x06;
const TAG_SEQUENCE: u8 = 0x30;

/// Splits one DER TLV off `input`. Only what a PKCS#8 header needs: single
/// byte tags and definite lengths up to four bytes.
fn der_take(input: &[u8], want_tag: u8) -> Result<(&[u8], &[u8]), String> {
    const NOT_PKCS8: &str = "the key is not DER-encoded PKCS#8";
    let (&tag, rest) = input.split_first().ok_or(NOT_PKCS8)?;
    if tag != want_tag {
        return Err(NOT_PKCS8.to_string());
    }
    let (&first, rest) = rest.split_first().ok_or(NOT_PKCS8)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(NOT_PKCS8.to_string());
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(NOT_PKCS8.to_string());
    }
    Ok(rest.split_at(len))
}

fn pkcs8_kind(der: &[u8]) -> Result<KeyKind, String> {
    let (info, _) = der_take(der, TAG_SEQUENCE)?;
    let (_version, rest) = der_take(info, TAG_INTEGER)?;
    let (alg_id, _) = der_take(rest, TAG_SEQUENCE)?;
    let (oid, params) = der_take(alg_id, TAG_OID)?;
    match oid {
        OID_RSA_ENCRYPTION => Ok(KeyKind::Rsa),
        OID_RSASSA_PSS => Err(
            "RSASSA-PSS-restricted RSA keys (OID 1.2.840.113549.1.1.10) are not supported: \
             export the key as a plain rsaEncryption PKCS#8 (it can still sign PS256)"
                .to_string(),
        ),
        OID_ED25519 => Ok(KeyKind::Ed25519),
        OID_ED448 => Err("Ed448 keys are not supported: use Ed25519 for EdDSA".to_string()),
        OID_X25519 | OID_X448 => {
            Err("the key is an X25519/X448 key-agreement key, which cannot sign".to_string())
        }
        OID_EC_PUBLIC_KEY => {
            let curve = der_take(params, TAG_OID)
                .map(|(curve, _)| curve)
                .map_err(|_| {
                    "the EC key does not name its curve \
                     (explicit curve parameters are not supported)"
                        .to_string()
                })?;
            match curve {
                OID_P256 => Ok(KeyKind::EcP256),
                OID_P384 => {
                    Err("EC P-384 keys are not supported: ES256 needs a P-256 key".to_string())
                }
                OID_P521 => {
                    Err("EC P-521 keys are not supported: ES256 needs a P-256 key".to_string())
                }
                _ => Err(
                    "the EC key is on an unsupported curve: ES256 needs a P-256 key".to_string(),
                ),
            }
        }
        _ => Err(
            "the PKCS#8 key is of an unrecognized algorithm: expected EC P-256, RSA or Ed25519"
                .to_string(),
        ),
    }
}

/// Overwrites decoded private key bytes before they are freed, so a copy does
/// not linger in freed heap memory; volatile writes keep the optimizer from
/// dropping the stores as dead.
fn wipe(bytes: &mut [u8]) {
    for b in bytes.iter_mut() {
        // SAFETY: `b` is a valid, aligned, exclusive reference into the slice.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// Extracts the body of the PEM block holding the key. Tolerates text around it
/// and a PEM whose newlines arrived as literal `\n` (as happens when a key is
/// pasted into JSON or an environment variable).
fn pem_body(pem: &str) -> Result<(&str, String), String> {
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    // A bundle (certificate + key) is common; the key block wins wherever it is.
    let start = pem
        .find("-----BEGIN PRIVATE KEY-----")
        .or_else(|| pem.find(BEGIN))
        .ok_or("not a PEM: no \"-----BEGIN ...-----\" line found")?;
    let after_begin = &pem[start + BEGIN.len()..];
    let label_end = after_begin
        .find(DASHES)
        .ok_or("malformed PEM: the BEGIN line is not closed with \"-----\"")?;
    let label = after_begin[..label_end].trim();
    // A label is a few capital words; anything else means the BEGIN line lost
    // its dashes and the "label" has run into the key, which must not be
    // echoed in an error.
    if label.is_empty()
        || label.len() > 40
        || !label
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ' ' || c == '#')
    {
        return Err("malformed PEM: the BEGIN line is not \"-----BEGIN <TYPE>-----\"".to_string());
    }
    let body_and_rest = &after_begin[label_end + DASHES.len()..];
    let end_marker = format!("-----END {label}-----");
    let body_end = body_and_rest.find(&end_marker).ok_or_else(|| {
        format!("malformed PEM: no \"-----END {label}-----\" line after the BEGIN line")
    })?;
    let body: String = body_and_rest[..body_end]
        .replace("\\r", "")
        .replace("\\n", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    Ok((label, body))
}

impl SigningKey {
    /// Accepts only unencrypted PKCS#8 because that is the one form every key
    /// tool (OpenSSL 3, Node's jose `exportPKCS8`, WebCrypto) can emit for all
    /// three key types; the legacy per-type forms get a message saying how to
    /// convert rather than a parse failure.
    pub fn from_pem(pem: &str, alg: Option<Alg>) -> Result<SigningKey, String> {
        let (label, body) = pem_body(pem)?;
        match label {
            "PRIVATE KEY" => {}
            "EC PRIVATE KEY" => {
                return Err(format!(
                    "the PEM is a SEC1 \"EC PRIVATE KEY\"; {PKCS8_NEEDED} {CONVERT_HINT}"
                ))
            }
            "RSA PRIVATE KEY" => {
                return Err(format!(
                    "the PEM is a PKCS#1 \"RSA PRIVATE KEY\"; {PKCS8_NEEDED} {CONVERT_HINT}"
                ))
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err(format!(
                    "the PEM is an encrypted PKCS#8 key; {PKCS8_NEEDED}, unencrypted"
                ))
            }
            "PUBLIC KEY" | "RSA PUBLIC KEY" | "CERTIFICATE" => {
                return Err(format!(
                    "the PEM is a \"{label}\", not a private key; {PKCS8_NEEDED}"
                ))
            }
            _ => {
                let shown: String = label.chars().take(40).collect();
                return Err(format!("unexpected PEM type \"{shown}\"; {PKCS8_NEEDED}"));
            }
        }
        let decoded = STANDARD.decode(body.as_bytes());
        wipe(&mut body.into_bytes());
        let mut der = decoded.map_err(|_| "the PEM body is not valid base64".to_string())?;
        let key = SigningKey::from_pkcs8_der(&der, alg);
        wipe(&mut der);
        key
    }

    pub fn from_pkcs8_der(der: &[u8], alg: Option<Alg>) -> Result<SigningKey, String> {
        let kind = pkcs8_kind(der)?;
        let alg = match (kind, alg) {
            (KeyKind::EcP256, None | Some(Alg::Es256)) => Alg::Es256,
            (KeyKind::Rsa, None) => Alg::Rs256,
            (KeyKind::Rsa, Some(a @ (Alg::Rs256 | Alg::Ps256))) => a,
            (KeyKind::Ed25519, None | Some(Alg::EdDsa)) => Alg::EdDsa,
            (kind, Some(asked)) => {
                return Err(format!(
                "key/algorithm mismatch: {} was asked for, but the key is {}, which signs only {}",
                asked,
                kind.describe(),
                kind.usable_with()
            ))
            }
        };
        let rng = SystemRandom::new();
        let inner = match kind {
            KeyKind::EcP256 => {
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
                    .map(Inner::Ec)
                    .map_err(|e| {
                        format!(
                            "the EC P-256 PKCS#8 key was rejected ({e}); it must embed \
                             its public key, as OpenSSL and Node write it"
                        )
                    })?
            }
            KeyKind::Rsa => RsaKeyPair::from_pkcs8(der).map(Inner::Rsa).map_err(|e| {
                format!(
                    "the RSA PKCS#8 key was rejected ({e}); \
                         2048 to 4096-bit keys with e = 65537 are supported"
                )
            })?,
            // Node and OpenSSL write Ed25519 PKCS#8 v1 (no public key), which
            // the strict `from_pkcs8` would refuse.
            KeyKind::Ed25519 => Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
                .map(Inner::Ed)
                .map_err(|e| format!("the Ed25519 PKCS#8 key was rejected ({e})"))?,
        };
        Ok(SigningKey { inner, alg, rng })
    }

    /// DPoP keys are the client's own, so it mints them; the DER is returned
    /// so the caller can persist the key and keep DPoP-bound tokens usable
    /// across restarts.
    pub fn generate_es256() -> Result<(SigningKey, Vec<u8>), String> {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "generating an ES256 key failed (the system random source failed)")?;
        let der = doc.as_ref().to_vec();
        let key = SigningKey::from_pkcs8_der(&der, Some(Alg::Es256))?;
        Ok((key, der))
    }

    #[cfg(test)]
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// Carries only the RFC 7638 required members, in its lexicographic
    /// order, so the same object serves as the DPoP `jwk` header and as the
    /// thumbprint input.
    pub fn public_jwk(&self) -> Value {
        let mut jwk = Map::new();
        match &self.inner {
            Inner::Ec(kp) => {
                // ring exposes the uncompressed SEC1 point: 0x04 || x || y.
                let point = kp.public_key().as_ref();
                let coords = point.get(1..).unwrap_or_default();
                let (x, y) = coords.split_at(coords.len() / 2);
                jwk.insert("crv".into(), Value::from("P-256"));
                jwk.insert("kty".into(), Value::from("EC"));
                jwk.insert("x".into(), Value::from(b64url(x)));
                jwk.insert("y".into(), Value::from(b64url(y)));
            }
            Inner::Rsa(kp) => {
                let parts: PublicKeyComponents<Vec<u8>> = kp.public().into();
                jwk.insert(
                    "e".into(),
                    Value::from(b64url(strip_leading_zeros(&parts.e))),
                );
                jwk.insert("kty".into(), Value::from("RSA"));
                jwk.insert(
                    "n".into(),
                    Value::from(b64url(strip_leading_zeros(&parts.n))),
                );
            }
            Inner::Ed(kp) => {
                jwk.insert("crv".into(), Value::from("Ed25519"));
                jwk.insert("kty".into(), Value::from("OKP"));
                jwk.insert("x".into(), Value::from(b64url(kp.public_key().as_ref())));
            }
        }
        Value::Object(jwk)
    }

    /// The DPoP `jkt` and the key's stable identity.
    pub fn thumbprint(&self) -> String {
        jwk_thumbprint(&self.public_jwk())
            .expect("public_jwk always carries every member RFC 7638 requires")
    }

    /// `alg` always comes from the key: a caller-supplied `alg` that disagrees
    /// is refused, because a JWS whose header lies about its algorithm is
    /// rejected by every server and is hard to diagnose from their side.
    pub fn sign_jwt(&self, header: Map<String, Value>, claims: &Value) -> Result<String, String> {
        if !claims.is_object() {
            return Err("JWT claims must be a JSON object".to_string());
        }
        let mut full = Map::new();
        full.insert("alg".into(), Value::from(self.alg.name()));
        for (name, value) in header {
            if name == "alg" {
                if value.as_str() != Some(self.alg.name()) {
                    return Err(format!(
                        "the JWS header's \"alg\" disagrees with the key's algorithm {}",
                        self.alg
                    ));
                }
                continue;
            }
            full.insert(name, value);
        }
        let header_json = serde_json::to_vec(&Value::Object(full))
            .map_err(|e| format!("serializing the JWS header failed: {e}"))?;
        let claims_json = serde_json::to_vec(claims)
            .map_err(|e| format!("serializing the JWT claims failed: {e}"))?;
        let signing_input = format!("{}.{}", b64url(&header_json), b64url(&claims_json));
        let signature = self.sign(signing_input.as_bytes())?;
        Ok(format!("{signing_input}.{}", b64url(&signature)))
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        let failed = || format!("{} signing failed", self.alg);
        match &self.inner {
            Inner::Ec(kp) => kp
                .sign(&self.rng, message)
                .map(|sig| sig.as_ref().to_vec())
                .map_err(|_| failed()),
            Inner::Rsa(kp) => {
                let padding: &'static dyn RsaEncoding = match self.alg {
                    Alg::Ps256 => &RSA_PSS_SHA256,
                    _ => &RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0u8; kp.public().modulus_len()];
                kp.sign(padding, &self.rng, message, &mut sig)
                    .map_err(|_| failed())?;
                Ok(sig)
            }
            Inner::Ed(kp) => Ok(kp.sign(message).as_ref().to_vec()),
        }
    }
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(bytes.len().saturating_sub(1));
    &bytes[first..]
}

/// RFC 7638 thumbprint of any public JWK, so a key received from elsewhere
/// (e.g. a server echoing `jkt`) can be compared with ours. Optional members
/// (`kid`, `alg`, `use`) are ignored as the RFC requires.
pub fn jwk_thumbprint(jwk: &Value) -> Result<String, String> {
    let obj = jwk.as_object().ok_or("a JWK must be a JSON object")?;
    let kty = obj
        .get("kty")
        .and_then(Value::as_str)
        .ok_or("the JWK has no string \"kty\"")?;
    // Required members per RFC 7638 §3.2, already in lexicographic order.
    let required: &[&str] = match kty {
        "EC" => &["crv", "kty", "x", "y"],
        "RSA" => &["e", "kty", "n"],
        "OKP" => &["crv", "kty", "x"],
        "oct" => &["k", "kty"],
        _ => return Err("the JWK has an unsupported \"kty\"".to_string()),
    };
    let mut canonical = Map::new();
    for &name in required {
        let value = obj
            .get(name)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the {kty} JWK lacks the string member \"{name}\""))?;
        canonical.insert(name.to_string(), Value::from(value));
    }
    // serde_json writes no whitespace and, with preserve_order, keeps the
    // insertion order above; the values are base64url or fixed names, so its
    // string escaping matches RFC 7638's.
    let json = serde_json::to_vec(&Value::Object(canonical))
        .map_err(|e| format!("serializing the JWK failed: {e}"))?;
    Ok(sha256_b64url(&json))
}

pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn sha256_b64url(data: &[u8]) -> String {
    b64url(digest(&SHA256, data).as_ref())
}

fn try_random_b64url(bytes: usize) -> Result<String, String> {
    let mut buf = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| "the system random source failed".to_string())?;
    Ok(b64url(&buf))
}

/// For nonces, `state`, PKCE verifiers and `jti`s.
///
/// # Panics
/// If the operating system's random source fails: handing out a predictable
/// value instead would silently break the protocols relying on it.
pub fn random_b64url(bytes: usize) -> String {
    try_random_b64url(bytes).expect("the system random source failed")
}

/// A clock before 1970 yields 0 rather than an error: the server will reject
/// the resulting JWT with a clear time-skew error, which is the useful signal.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `htu` is refused rather than trimmed when it still carries a query or
/// fragment: the caller owns URL handling, and a silent fix here would hide
/// the mismatch with the request actually sent.
pub fn dpop_proof(
    key: &SigningKey,
    htm: &str,
    htu: &str,
    access_token: Option<&str>,
    nonce: Option<&str>,
    body: Option<&[u8]>,
) -> Result<String, String> {
    if htm.is_empty() {
        return Err("DPoP proof needs an HTTP method (htm)".to_string());
    }
    if htu.is_empty() {
        return Err("DPoP proof needs a target URI (htu)".to_string());
    }
    if htu.contains('?') || htu.contains('#') {
        return Err(
            "DPoP htu must not carry a query or fragment (RFC 9449 §4.2); strip them first"
                .to_string(),
        );
    }
    let mut header = Map::new();
    header.insert("typ".into(), Value::from("dpop+jwt"));
    header.insert("jwk".into(), key.public_jwk());

    let mut claims = Map::new();
    claims.insert("jti".into(), Value::from(try_random_b64url(16)?));
    claims.insert("htm".into(), Value::from(htm));
    claims.insert("htu".into(), Value::from(htu));
    claims.insert("iat".into(), Value::from(now_secs()));
    if let Some(token) = access_token {
        if token.is_empty() {
            return Err("DPoP proof was given an empty access token for ath".to_string());
        }
        claims.insert("ath".into(), Value::from(sha256_b64url(token.as_bytes())));
    }
    if let Some(nonce) = nonce {
        claims.insert("nonce".into(), Value::from(nonce));
    }
    if let Some(body) = body {
        let hash = digest(&SHA256, body);
        claims.insert(
            "content_digest".into(),
            Value::from(format!("sha-256=:{}:", STANDARD.encode(hash.as_ref()))),
        );
    }
    key.sign_jwt(header, &Value::Object(claims))
}

/// `iss` and `sub` are both the client_id and `jti` is fresh per call, as RFC
/// 7523 §3 and OpenID Connect's `private_key_jwt` require; servers refuse
/// replayed `jti`s, so an assertion must never be cached and reused.
pub fn client_assertion(
    key: &SigningKey,
    client_id: &str,
    audience: &str,
    lifetime_secs: u64,
) -> Result<String, String> {
    if client_id.is_empty() {
        return Err("client assertion needs a client_id".to_string());
    }
    if audience.is_empty() {
        return Err("client assertion needs an audience".to_string());
    }
    if lifetime_secs == 0 {
        return Err("client assertion lifetime must be at least one second".to_string());
    }
    let iat = now_secs();
    let exp = iat
        .checked_add(lifetime_secs)
        .ok_or("client assertion lifetime is too large")?;
    let mut header = Map::new();
    header.insert("typ".into(), Value::from("JWT"));

    let mut claims = Map::new();
    claims.insert("iss".into(), Value::from(client_id));
    claims.insert("sub".into(), Value::from(client_id));
    claims.insert("aud".into(), Value::from(audience));
    claims.insert("iat".into(), Value::from(iat));
    claims.insert("exp".into(), Value::from(exp));
    claims.insert("jti".into(), Value::from(try_random_b64url(16)?));
    key.sign_jwt(header, &Value::Object(claims))
}

#[cfg(test)]
mod tests;
