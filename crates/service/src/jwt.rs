//! HS256 JWTs for the wallet endpoint: minted by `convo token`, verified by the service.
//! Only HS256 is accepted (`alg: none` and every other algorithm are refused); a header with
//! `crit` is refused (this service understands no extension, RFC 7515 §4.1.11); `exp` is
//! required and a token is expired from the second `exp` names (`exp <= now`), `nbf` is
//! honoured when present, both without leeway unless `--jwt-leeway` sets one; `sub` is required
//! and must not be blank.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde::{Deserialize, Serialize};

/// The claims of a wallet token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub iat: u64,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
}

fn now_secs() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Mints an HS256 token for `sub`, valid for `ttl_secs` from now.
pub fn mint(secret: &str, sub: &str, ttl_secs: u64) -> String {
    let now = now_secs();
    let claims = Claims {
        sub: sub.to_string(),
        iat: now,
        exp: now.saturating_add(ttl_secs),
        nbf: None,
    };
    mint_claims(secret, &claims)
}

/// Mints a token with the given claims (tests use it for `nbf` and expired tokens).
pub fn mint_claims(secret: &str, claims: &Claims) -> String {
    // HS256 signing with an in-memory key cannot fail; an empty string would be refused anyway.
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap_or_default()
}

/// Why a token was refused (said in the 401 message; never includes the token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token's signature does not match")]
    BadSignature,
    #[error("only HS256 tokens are accepted")]
    Algorithm,
    #[error("the token lacks the `{0}` claim")]
    MissingClaim(String),
    #[error("the token's `sub` claim is empty")]
    EmptySubject,
    #[error(
        "the token's header names critical extensions (`crit`) this service does not understand"
    )]
    CriticalExtension,
    #[error("the token is malformed")]
    Malformed,
}

/// The shortest JWT secret `convo serve` starts with without a warning: HS256's key should be
/// at least as long as its 32-byte hash (RFC 7518 §3.2).
pub const MIN_SECRET_BYTES: usize = 32;

/// The warning `convo serve` logs at start for a secret shorter than `MIN_SECRET_BYTES`.
pub fn weak_secret_warning(secret: &str) -> Option<String> {
    (secret.len() < MIN_SECRET_BYTES).then(|| {
        format!(
            "the JWT secret is {} bytes long; use at least {MIN_SECRET_BYTES} random bytes \
             (`openssl rand -base64 48`), or anyone who guesses it can mint wallet tokens",
            secret.len()
        )
    })
}

/// Verifies `token` with `secret`, without leeway; returns its claims.
pub fn verify(secret: &str, token: &str) -> Result<Claims, JwtError> {
    verify_with_leeway(secret, token, 0)
}

/// Verifies `token` with `secret`, allowing `leeway_secs` of clock skew on `exp` and `nbf`;
/// returns its claims.
pub fn verify_with_leeway(secret: &str, token: &str, leeway_secs: u64) -> Result<Claims, JwtError> {
    use jsonwebtoken::errors::ErrorKind;
    // Refuse anything that does not declare HS256 before the library looks further.
    let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => JwtError::Algorithm,
        _ => header_error(token).unwrap_or(JwtError::Malformed),
    })?;
    if header.alg != Algorithm::HS256 {
        return Err(JwtError::Algorithm);
    }
    if header.crit.is_some() {
        return Err(JwtError::CriticalExtension);
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = leeway_secs;
    validation.validate_nbf = true;
    validation.validate_aud = false;
    validation.set_required_spec_claims(&["exp", "sub"]);
    // Decoded leniently so that a missing claim is reported as such, not as malformed JSON.
    let raw = decode::<RawClaims>(
        token,
        &DecodingKey::from_secret(secret.as_bytes()),
        &validation,
    )
    .map(|data| data.claims)
    .map_err(|e| match e.kind() {
        ErrorKind::ExpiredSignature => JwtError::Expired,
        ErrorKind::ImmatureSignature => JwtError::NotYetValid,
        ErrorKind::InvalidSignature => JwtError::BadSignature,
        ErrorKind::InvalidAlgorithm => JwtError::Algorithm,
        ErrorKind::MissingRequiredClaim(c) => JwtError::MissingClaim(c.clone()),
        _ => JwtError::Malformed,
    })?;
    match (raw.sub, raw.exp) {
        // The library lets `exp == now` through; the token's last valid second is `exp - 1`.
        (Some(_), Some(exp)) if exp.saturating_add(leeway_secs) <= now_secs() => {
            Err(JwtError::Expired)
        }
        (Some(sub), Some(_)) if sub.trim().is_empty() => Err(JwtError::EmptySubject),
        (Some(sub), Some(exp)) => Ok(Claims {
            sub,
            iat: raw.iat.unwrap_or(0),
            exp,
            nbf: raw.nbf,
        }),
        (None, _) => Err(JwtError::MissingClaim("sub".into())),
        (_, None) => Err(JwtError::MissingClaim("exp".into())),
    }
}

#[derive(Deserialize)]
struct RawClaims {
    sub: Option<String>,
    exp: Option<u64>,
    iat: Option<u64>,
    nbf: Option<u64>,
}

/// What is wrong with a header that parses as JSON but not as jsonwebtoken's header: an `alg`
/// it does not know (such as `none`), or a `crit` that is not a list of names.
fn header_error(token: &str) -> Option<JwtError> {
    use base64::Engine;
    let first = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    if value.get("alg").and_then(|a| a.as_str()) == Some("HS256") && value.get("crit").is_some() {
        return Some(JwtError::CriticalExtension);
    }
    value.get("alg").map(|_| JwtError::Algorithm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_verify() {
        let t = mint("s3cret", "alice", 60);
        assert_eq!(verify("s3cret", &t).unwrap().sub, "alice");
        assert_eq!(verify("other", &t), Err(JwtError::BadSignature));
        assert_eq!(verify("s3cret", "not.a.token"), Err(JwtError::Malformed));
    }

    #[test]
    fn a_token_expires_at_its_exp_second_unless_a_leeway_is_configured() {
        let now = now_secs();
        let at = |exp| {
            mint_claims(
                "s3cret",
                &Claims {
                    sub: "alice".into(),
                    iat: now - 100,
                    exp,
                    nbf: None,
                },
            )
        };
        assert_eq!(verify("s3cret", &at(now)), Err(JwtError::Expired));
        assert_eq!(verify("s3cret", &at(now - 1)), Err(JwtError::Expired));
        assert!(verify("s3cret", &at(now + 5)).is_ok());
        assert!(verify_with_leeway("s3cret", &at(now), 30).is_ok());
        assert_eq!(
            verify_with_leeway("s3cret", &at(now - 30), 30),
            Err(JwtError::Expired)
        );
    }

    #[test]
    fn short_secrets_get_a_warning() {
        assert!(
            weak_secret_warning(&"x".repeat(31))
                .unwrap()
                .contains("31 bytes")
        );
        assert_eq!(weak_secret_warning(&"x".repeat(MIN_SECRET_BYTES)), None);
    }
}
