use super::{
    b64url, client_assertion, dpop_proof, jwk_thumbprint, now_secs, pem_body, random_b64url,
    sha256_b64url, Alg, SigningKey,
};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, ED25519,
    RSA_PKCS1_2048_8192_SHA256, RSA_PSS_2048_8192_SHA256,
};
use serde_json::{Map, Value};

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
    let a = decode(&dpop_proof(&key, "GET", "https://rs.example/mcp", None, None, None).unwrap());
    let b = decode(&dpop_proof(&key, "GET", "https://rs.example/mcp", None, None, None).unwrap());
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
