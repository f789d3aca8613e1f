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
mod tests {
    use super::*;
    use ring::signature::{
        RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ED25519,
        RSA_PKCS1_2048_8192_SHA256, RSA_PSS_2048_8192_SHA256,
    };

    // Generated with `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`.
    const RSA_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDZWFWlLFNzQLp0
OStqHTRz/F5BRfAF7cJawTLw4IgtrUBPQM+wJCGdWxRqG5Mm63rYdKv2ri1LQtop
eWdgEDpHIQpfMBpQouhgjGlOgJYRYPNaFowDT2wJtIpYqW5OE+KWTymtWadUpilp
cs1RdnVMjwRFlL1A0xecnYNupdM9/ReTiqsKfmqNtSx6LpaaxdBIOXbK7dYG2VHt
7pUChg+LcrRkGSCoMAl149s5ec82PCkLbAmgLrTxsj3YczYvg9+nhjwKU4/IMwOV
d4sQ/r23Km75qPLt3vtvMqTXzplF11dIeAJmq6RTLjdl4RkOvVU3esiv0l8iTiab
cK1AL2CrAgMBAAECggEAIKE5Ym3QLXpnQ7GdifXOfSdDQ0trqIg0aImeyzj6WNks
0XkqdQhHn6cf3no7UlmB/OMvOf6WQDlOJXHbijmFdk5Ij1faa4a5ml0aJjX50awb
fMfrx0dyMdbP+lWdgM1NdEF4QVU3YOb9Sp54oqVFIPRLsOKOsx+96L5hEAiHOUPy
Ig4mJIDcc3bQJcRU6JKCeTiXdvZvYxJA80HElLZsUmiyHduEuxI89BnYuMd5ULzd
7ejuITW01jNzieYD855oz9GSTh+2gfOUneSJB2RRZcUhMq/zrqySJpIGCFW7D93+
t8LeCXsNKO+QT5WvGfE8JxTfZ4M+UEJTfOhvi/FvGQKBgQDwlcsB9JPfRXSlA0Fx
mTNqf3QCWzqnhN5slsSCjYO8od/xirO6uPpDzWaLq0TOCU5sE/JvA4T/9TNq1uTx
lAUQUTuT9fbxqy43eVkbrxtXmDQ3rOeyTj1kJusc8y3mplzMVHCTuKKI22wcf3j7
poPvh8oWj4iiwF1KB27QVXk5hwKBgQDnRVhpjnYwT8pp1wcYBnPZp0iFLZan5hWJ
5ZK5bxOgJBA16pqkwTWdhzdtuJzeneyMyRZDQ0rQmENaD6TAkivTDUXJrYjb/rr+
LxUspVH8F3Rh7G3Tgo+/HRVgcGhN8LVN5KmjsoIuv4aKmGbzwrWOlGv3nNLcKiPC
3YnnayrYvQKBgQDiWz1G2LPsRPALdXW0iPzsPYCL2wPjq0qOhofbgYQqDW+jVenm
S7YD5xSNYpX4+J6VZ2sY8gnHvQ8kfY2okaj2Akf43Vn7ZSC1xvGE74rdLnIq0/6n
L5/pRAjAEzjjozD6epP1GKmr9C7S3UiaFMBbtLn54hAfeLgNN9MWJuVIrwKBgA9X
7nGyXez+njM/bN0PMIh0LL+JMsGY5jzr2jwrPmYVfm3VTsU3fFMjMW46HU43tAXz
IWL9B+2m7HEBMLEGAZpS+xpSRQ4zbDyI6yK3JSVQeQw2H2M0+kx3pX9sdb8WBTFR
xl9x7Gklk8uGKO5rMJhxCGi5ItQwh4baI9gSqBkRAoGBAOQoIqGcmcVvwzGKDpFR
IJJRMZ5RZKqmROA9oC5X6ePfXQQLFBX0eD3hU58fgYskdsUSdSupnkpzGm8mLk1E
/hH3vUegqsT2cP4gpnQODpg1MFR8xNnvGbbKhHtxvkhruFBFIK9vU8PE3bDBWfkM
hFRNvIrjRuzfgUy/b5Io1RKR
-----END PRIVATE KEY-----
";

    // Generated with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`.
    const EC_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgV9O4L9Q9sfGy38R2
T+EeJqD7iorEy+8NkRo561qEJ/uhRANCAARci+ep+7vHSnXXskCk8BpE/3PvkweI
xvEcBoQ/V8iq6bD4HXkDevP0vFAHVdGFRbd0e/D9JGidnaPGpm5CVyYU
-----END PRIVATE KEY-----
";

    // The same P-256 key as SEC1, via `openssl ec -in ec.pem`.
    const EC_SEC1_PEM: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIFfTuC/UPbHxst/Edk/hHiag+4qKxMvvDZEaOetahCf7oAoGCCqGSM49
AwEHoUQDQgAEXIvnqfu7x0p117JApPAaRP9z75MHiMbxHAaEP1fIqumw+B15A3rz
9LxQB1XRhUW3dHvw/SRonZ2jxqZuQlcmFA==
-----END EC PRIVATE KEY-----
";

    // `openssl genpkey -algorithm ED25519`: PKCS#8 v1, without the public key,
    // the form Node also writes.
    const ED_PEM: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIEpYwYvms4wP05N58yxcBqIotaBNbdeU3CU7QFNSVN0O
-----END PRIVATE KEY-----
";

    // RFC 7638 §3.1.
    const RFC7638_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";

    struct Decoded {
        header: Value,
        claims: Value,
        signing_input: String,
        signature: Vec<u8>,
    }

    fn b64d(s: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD.decode(s).expect("base64url segment")
    }

    fn decode(token: &str) -> Decoded {
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "compact JWS has three segments");
        Decoded {
            header: serde_json::from_slice(&b64d(parts[0])).expect("header JSON"),
            claims: serde_json::from_slice(&b64d(parts[1])).expect("claims JSON"),
            signing_input: format!("{}.{}", parts[0], parts[1]),
            signature: b64d(parts[2]),
        }
    }

    fn jwk_str(jwk: &Value, name: &str) -> Vec<u8> {
        b64d(jwk[name].as_str().expect("JWK member"))
    }

    /// Verifies with a public key rebuilt from the JWK alone, so a wrong JWK
    /// fails here just like a wrong signature.
    fn verify(alg: Alg, jwk: &Value, message: &[u8], signature: &[u8]) -> Result<(), ()> {
        match alg {
            Alg::Es256 => {
                let mut point = vec![0x04];
                point.extend(jwk_str(jwk, "x"));
                point.extend(jwk_str(jwk, "y"));
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, signature)
                    .map_err(|_| ())
            }
            Alg::Rs256 | Alg::Ps256 => {
                let params = if alg == Alg::Rs256 {
                    &RSA_PKCS1_2048_8192_SHA256
                } else {
                    &RSA_PSS_2048_8192_SHA256
                };
                RsaPublicKeyComponents {
                    n: jwk_str(jwk, "n"),
                    e: jwk_str(jwk, "e"),
                }
                .verify(params, message, signature)
                .map_err(|_| ())
            }
            Alg::EdDsa => UnparsedPublicKey::new(&ED25519, jwk_str(jwk, "x"))
                .verify(message, signature)
                .map_err(|_| ()),
        }
    }

    fn sign_and_verify(key: &SigningKey, expect_alg: Alg, expect_sig_len: usize) {
        assert_eq!(key.alg(), expect_alg);
        let claims = serde_json::json!({"sub": "tester", "n": 1});
        let token = key.sign_jwt(Map::new(), &claims).expect("sign");
        let d = decode(&token);
        assert_eq!(d.header, serde_json::json!({"alg": expect_alg.name()}));
        assert_eq!(d.claims, claims);
        assert_eq!(d.signature.len(), expect_sig_len);
        let jwk = key.public_jwk();
        verify(expect_alg, &jwk, d.signing_input.as_bytes(), &d.signature)
            .expect("signature verifies with the public JWK");
        let mut tampered = d.signing_input.clone().into_bytes();
        tampered.push(b'x');
        assert!(
            verify(expect_alg, &jwk, &tampered, &d.signature).is_err(),
            "a tampered message must not verify"
        );
    }

    fn member_names(v: &Value) -> Vec<&str> {
        v.as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect()
    }

    #[test]
    fn es256_from_openssl_pkcs8_pem_signs_and_verifies() {
        let key = SigningKey::from_pem(EC_PEM, None).expect("EC PKCS#8 PEM");
        sign_and_verify(&key, Alg::Es256, 64);
        let jwk = key.public_jwk();
        assert_eq!(member_names(&jwk), ["crv", "kty", "x", "y"]);
        assert_eq!(jwk["crv"], "P-256");
        // x from `openssl pkey -in ec.pem -pubout`, independent of ring.
        assert_eq!(
            jwk_str(&jwk, "x")[..4],
            [0x5c, 0x8b, 0xe7, 0xa9],
            "x must be the point's first coordinate"
        );
    }

    #[test]
    fn es256_generated_key_round_trips_through_der() {
        let (key, der) = SigningKey::generate_es256().expect("generate");
        sign_and_verify(&key, Alg::Es256, 64);
        let reloaded = SigningKey::from_pkcs8_der(&der, None).expect("reload");
        assert_eq!(reloaded.thumbprint(), key.thumbprint());
        let (other, _) = SigningKey::generate_es256().expect("generate");
        assert_ne!(other.thumbprint(), key.thumbprint());
    }

    #[test]
    fn rs256_signs_and_verifies_with_jwk_components() {
        let key = SigningKey::from_pem(RSA_PEM, None).expect("RSA PKCS#8 PEM");
        sign_and_verify(&key, Alg::Rs256, 256);
        let jwk = key.public_jwk();
        assert_eq!(member_names(&jwk), ["e", "kty", "n"]);
        assert_eq!(jwk["e"], "AQAB");
        assert_eq!(jwk_str(&jwk, "n").len(), 256);
    }

    #[test]
    fn ps256_signs_and_verifies() {
        let key = SigningKey::from_pem(RSA_PEM, Some(Alg::Ps256)).expect("RSA as PS256");
        sign_and_verify(&key, Alg::Ps256, 256);
        // PSS is randomized; PKCS#1 v1.5 is not.
        let a = key.sign_jwt(Map::new(), &serde_json::json!({})).unwrap();
        let b = key.sign_jwt(Map::new(), &serde_json::json!({})).unwrap();
        assert_ne!(a, b);
        let rs = SigningKey::from_pem(RSA_PEM, Some(Alg::Rs256)).unwrap();
        let a = rs.sign_jwt(Map::new(), &serde_json::json!({})).unwrap();
        let b = rs.sign_jwt(Map::new(), &serde_json::json!({})).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn eddsa_from_pkcs8_v1_pem_signs_and_verifies() {
        let key = SigningKey::from_pem(ED_PEM, None).expect("Ed25519 PKCS#8 v1 PEM");
        sign_and_verify(&key, Alg::EdDsa, 64);
        let jwk = key.public_jwk();
        assert_eq!(member_names(&jwk), ["crv", "kty", "x"]);
        assert_eq!(jwk["crv"], "Ed25519");
        assert_eq!(jwk["kty"], "OKP");
    }

    #[test]
    fn rfc7638_example_thumbprint() {
        let jwk = serde_json::json!({"kty": "RSA", "n": RFC7638_N, "e": "AQAB"});
        assert_eq!(
            jwk_thumbprint(&jwk).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        let decorated = serde_json::json!({
            "kty": "RSA", "n": RFC7638_N, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"
        });
        assert_eq!(
            jwk_thumbprint(&decorated).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        assert!(jwk_thumbprint(&serde_json::json!({"kty": "RSA", "n": RFC7638_N})).is_err());
        assert!(jwk_thumbprint(&serde_json::json!({"kty": "XYZ"})).is_err());
    }

    #[test]
    fn thumbprint_is_hash_of_public_jwk_json() {
        for key in [
            SigningKey::from_pem(EC_PEM, None).unwrap(),
            SigningKey::from_pem(RSA_PEM, None).unwrap(),
            SigningKey::from_pem(ED_PEM, None).unwrap(),
        ] {
            let json = key.public_jwk().to_string();
            assert!(!json.contains(' '));
            assert_eq!(key.thumbprint(), sha256_b64url(json.as_bytes()));
            assert_eq!(key.thumbprint().len(), 43);
        }
    }

    #[test]
    fn dpop_proof_header_and_claims() {
        let (key, _) = SigningKey::generate_es256().unwrap();
        let before = now_secs();
        let token = dpop_proof(
            &key,
            "POST",
            "https://as.example/token",
            Some("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"),
            Some("eyJ7S_zG.eyJH0-Z.HX4w-7v"),
            Some(b"{\"hello\": \"world\"}"),
        )
        .expect("proof");
        let d = decode(&token);
        assert_eq!(member_names(&d.header), ["alg", "typ", "jwk"]);
        assert_eq!(d.header["typ"], "dpop+jwt");
        assert_eq!(d.header["alg"], "ES256");
        assert_eq!(d.header["jwk"], key.public_jwk());
        verify(
            Alg::Es256,
            &d.header["jwk"],
            d.signing_input.as_bytes(),
            &d.signature,
        )
        .expect("verifies with the embedded jwk");
        assert_eq!(d.claims["htm"], "POST");
        assert_eq!(d.claims["htu"], "https://as.example/token");
        let iat = d.claims["iat"].as_u64().expect("iat");
        assert!(iat >= before && iat <= now_secs());
        // RFC 9449 §4.2's example ath for that token.
        assert_eq!(
            d.claims["ath"],
            "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"
        );
        assert_eq!(d.claims["nonce"], "eyJ7S_zG.eyJH0-Z.HX4w-7v");
        // RFC 9530's example digest of that body.
        assert_eq!(
            d.claims["content_digest"],
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
        );
        let jti = d.claims["jti"].as_str().expect("jti");
        assert!(b64d(jti).len() >= 16);
    }

    #[test]
    fn dpop_proof_optional_claims_absent_and_jti_fresh() {
        let key = SigningKey::from_pem(EC_PEM, None).unwrap();
        let a =
            decode(&dpop_proof(&key, "GET", "https://rs.example/mcp", None, None, None).unwrap());
        let b =
            decode(&dpop_proof(&key, "GET", "https://rs.example/mcp", None, None, None).unwrap());
        assert_eq!(member_names(&a.claims), ["jti", "htm", "htu", "iat"]);
        assert_ne!(a.claims["jti"], b.claims["jti"]);
        assert!(dpop_proof(&key, "GET", "https://rs.example/mcp?x=1", None, None, None).is_err());
        assert!(dpop_proof(&key, "GET", "https://rs.example/mcp#f", None, None, None).is_err());
        assert!(dpop_proof(&key, "", "https://rs.example/mcp", None, None, None).is_err());
        assert!(dpop_proof(&key, "GET", "https://rs.example/", Some(""), None, None).is_err());
    }

    #[test]
    fn client_assertion_claims() {
        let key = SigningKey::from_pem(RSA_PEM, None).unwrap();
        let token = client_assertion(&key, "client-123", "https://as.example/token", 300).unwrap();
        let d = decode(&token);
        assert_eq!(d.header, serde_json::json!({"alg": "RS256", "typ": "JWT"}));
        verify(
            Alg::Rs256,
            &key.public_jwk(),
            d.signing_input.as_bytes(),
            &d.signature,
        )
        .expect("verifies");
        assert_eq!(d.claims["iss"], "client-123");
        assert_eq!(d.claims["sub"], "client-123");
        assert_eq!(d.claims["aud"], "https://as.example/token");
        let iat = d.claims["iat"].as_u64().unwrap();
        let exp = d.claims["exp"].as_u64().unwrap();
        assert_eq!(exp - iat, 300);
        let again =
            decode(&client_assertion(&key, "client-123", "https://as.example/token", 300).unwrap());
        assert_ne!(d.claims["jti"], again.claims["jti"]);
        assert!(client_assertion(&key, "", "https://as.example/token", 300).is_err());
        assert!(client_assertion(&key, "c", "https://as.example/token", 0).is_err());
        assert!(client_assertion(&key, "c", "https://as.example/token", u64::MAX).is_err());
    }

    #[test]
    fn sec1_and_pkcs1_pems_refused_with_pkcs8_hint() {
        let err = SigningKey::from_pem(EC_SEC1_PEM, None).unwrap_err();
        assert!(err.contains("EC PRIVATE KEY"), "{err}");
        assert!(err.contains("PKCS#8 \"PRIVATE KEY\""), "{err}");
        let pkcs1 = "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
        let err = SigningKey::from_pem(pkcs1, None).unwrap_err();
        assert!(err.contains("PKCS#1"), "{err}");
        assert!(err.contains("PKCS#8 \"PRIVATE KEY\""), "{err}");
    }

    #[test]
    fn garbage_pems_refused() {
        for (input, needle) in [
            ("not a key at all", "no \"-----BEGIN"),
            (
                "-----BEGIN PRIVATE KEY-----\nAAAA\n",
                "no \"-----END PRIVATE KEY-----\"",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\n!!!not*base64!!!\n-----END PRIVATE KEY-----",
                "not valid base64",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\naGVsbG8gd29ybGQ=\n-----END PRIVATE KEY-----",
                "not DER-encoded PKCS#8",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
                "not a private key",
            ),
            (
                "-----BEGIN PRIVATE KEY\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----",
                "BEGIN line is not",
            ),
        ] {
            let err = SigningKey::from_pem(input, None).unwrap_err();
            assert!(err.contains(needle), "{input:?}: {err}");
        }
        // A key whose body was damaged after a valid header is refused by ring.
        let mut der = STANDARD.decode(pem_body(EC_PEM).unwrap().1).unwrap();
        let last = der.len() - 1;
        der[last] ^= 0xff;
        let err = SigningKey::from_pkcs8_der(&der, None).unwrap_err();
        assert!(err.contains("rejected"), "{err}");
    }

    #[test]
    fn errors_never_echo_key_material() {
        let body = pem_body(RSA_PEM).unwrap().1;
        let broken = RSA_PEM.replace("MIIEvgIBADAN", "MIIEvgIBADAN*");
        for err in [
            SigningKey::from_pem(&broken, None).unwrap_err(),
            SigningKey::from_pem(RSA_PEM, Some(Alg::Es256)).unwrap_err(),
        ] {
            assert!(!err.contains(&body[..16]), "{err}");
            assert!(!err.contains("MII"), "{err}");
        }
    }

    #[test]
    fn key_block_is_found_in_a_bundle() {
        let bundle = format!(
            "Bag Attributes\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n{EC_PEM}"
        );
        let key = SigningKey::from_pem(&bundle, None).expect("key after a certificate");
        assert_eq!(key.alg(), Alg::Es256);
    }

    #[test]
    fn pem_with_literal_backslash_n_is_accepted() {
        let escaped = EC_PEM.replace('\n', "\\n");
        let key = SigningKey::from_pem(&escaped, None).expect("escaped PEM");
        let plain = SigningKey::from_pem(EC_PEM, None).unwrap();
        assert_eq!(key.thumbprint(), plain.thumbprint());
        let crlf = EC_PEM.replace('\n', "\r\n");
        assert!(SigningKey::from_pem(&crlf, None).is_ok());
    }

    #[test]
    fn key_algorithm_mismatch_refused() {
        let err = SigningKey::from_pem(RSA_PEM, Some(Alg::Es256)).unwrap_err();
        assert!(err.contains("ES256") && err.contains("RSA key"), "{err}");
        let err = SigningKey::from_pem(EC_PEM, Some(Alg::Rs256)).unwrap_err();
        assert!(err.contains("RS256") && err.contains("P-256"), "{err}");
        assert!(SigningKey::from_pem(EC_PEM, Some(Alg::EdDsa)).is_err());
        assert!(SigningKey::from_pem(ED_PEM, Some(Alg::Es256)).is_err());
        assert!(SigningKey::from_pem(ED_PEM, Some(Alg::EdDsa)).is_ok());
    }

    #[test]
    fn alg_names_round_trip() {
        for alg in [Alg::Es256, Alg::Rs256, Alg::Ps256, Alg::EdDsa] {
            assert_eq!(Alg::parse(alg.name()), Ok(alg));
        }
        assert!(Alg::parse("es256").is_err());
        assert!(Alg::parse("HS256").is_err());
        assert!(Alg::parse("none").is_err());
    }

    #[test]
    fn sign_jwt_puts_alg_first_and_refuses_conflicting_alg() {
        let key = SigningKey::from_pem(EC_PEM, None).unwrap();
        let mut header = Map::new();
        header.insert("typ".into(), Value::from("x+jwt"));
        header.insert("kid".into(), Value::from("k1"));
        let d = decode(&key.sign_jwt(header, &serde_json::json!({})).unwrap());
        assert_eq!(member_names(&d.header), ["alg", "typ", "kid"]);
        let mut bad = Map::new();
        bad.insert("alg".into(), Value::from("none"));
        assert!(key.sign_jwt(bad, &serde_json::json!({})).is_err());
        let mut same = Map::new();
        same.insert("alg".into(), Value::from("ES256"));
        assert!(key.sign_jwt(same, &serde_json::json!({})).is_ok());
        assert!(key.sign_jwt(Map::new(), &serde_json::json!([1])).is_err());
    }

    #[test]
    fn helpers_encode_as_specified() {
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
        assert_eq!(random_b64url(32).len(), 43);
        assert_ne!(random_b64url(16), random_b64url(16));
        assert!(now_secs() > 1_600_000_000);
        let debug = format!("{:?}", SigningKey::from_pem(RSA_PEM, None).unwrap());
        assert!(debug.contains("Rs256") && !debug.contains("MII"), "{debug}");
    }

    #[test]
    fn signing_key_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SigningKey>();
    }
}
