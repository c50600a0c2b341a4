//! HS256 JWTs for the wallet endpoint: minted by `convo token`, verified by the service.
//! Only HS256 is accepted (`alg: none` and every other algorithm are refused), `exp` is required
//! and enforced without leeway, and `nbf` is honoured when present.

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
    #[error("the token is malformed")]
    Malformed,
}

/// Verifies `token` with `secret`; returns its claims.
pub fn verify(secret: &str, token: &str) -> Result<Claims, JwtError> {
    use jsonwebtoken::errors::ErrorKind;
    // Refuse anything that does not declare HS256 before the library looks further.
    let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => JwtError::Algorithm,
        _ => header_alg_error(token).unwrap_or(JwtError::Malformed),
    })?;
    if header.alg != Algorithm::HS256 {
        return Err(JwtError::Algorithm);
    }
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = 0;
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

/// A header that parses as JSON with an `alg` jsonwebtoken does not know (such as `none`).
fn header_alg_error(token: &str) -> Option<JwtError> {
    use base64::Engine;
    let first = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
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
}
