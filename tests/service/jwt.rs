//! JWT edge cases on the wallet endpoint: only unexpired HS256 tokens signed with the
//! service's secret get through.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use convo_service::jwt::{self, Claims};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::json;

use super::common::{Svc, json as body_json, start_default};

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

async fn wallet_with(svc: &Svc, token: &str) -> (StatusCode, serde_json::Value) {
    let resp = svc
        .http
        .get(svc.url("/v1/wallets/staker"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    if resp.status() == StatusCode::UNAUTHORIZED {
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    }
    body_json(resp).await
}

fn b64(value: &serde_json::Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// A token with any header, signed with HMAC-SHA256 over the secret regardless of `alg`.
fn forged(secret: &str, header: serde_json::Value, claims: serde_json::Value) -> String {
    let signing_input = format!("{}.{}", b64(&header), b64(&claims));
    let signature = jsonwebtoken::crypto::sign(
        signing_input.as_bytes(),
        &EncodingKey::from_secret(secret.as_bytes()),
        Algorithm::HS256,
    )
    .unwrap();
    format!("{signing_input}.{signature}")
}

#[tokio::test]
async fn a_valid_token_is_accepted() {
    let svc = start_default().await;
    let (status, body) = wallet_with(&svc, &jwt::mint(&svc.service.jwt_secret, "alice", 60)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["walletId"], "staker");
}

#[tokio::test]
async fn bad_tokens_are_refused_with_401() {
    let svc = start_default().await;
    let secret = svc.service.jwt_secret.clone();
    let claims = |exp: u64, nbf: Option<u64>| Claims {
        sub: "alice".into(),
        iat: now(),
        exp,
        nbf,
    };
    let valid_claims = json!({"sub": "alice", "iat": now(), "exp": now() + 600});
    let hs384 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS384),
        &claims(now() + 600, None),
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            jwt::mint_claims(&secret, &claims(now() - 5, None)),
            "expired",
        ),
        (
            "nbf in the future",
            jwt::mint_claims(&secret, &claims(now() + 600, Some(now() + 300))),
            "not valid yet",
        ),
        (
            "wrong secret",
            jwt::mint("not-the-secret", "alice", 600),
            "signature",
        ),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "typ": "JWT"})),
                b64(&valid_claims)
            ),
            "HS256",
        ),
        ("HS384", hs384, "HS256"),
        (
            "RS256 signed with the secret",
            forged(
                &secret,
                json!({"alg": "RS256", "typ": "JWT"}),
                valid_claims.clone(),
            ),
            "HS256",
        ),
        (
            "no exp",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT"}),
                json!({"sub": "alice"}),
            ),
            "exp",
        ),
        ("garbage", "a.b.c".into(), "malformed"),
    ];
    for (name, token, mentions) in cases {
        let (status, body) = wallet_with(&svc, &token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{name}");
        assert_eq!(body["error"]["code"], "unauthorized", "{name}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(mentions), "{name}: `{message}`");
        assert!(!message.contains(&token), "the token is not echoed");
    }
    // The forged HS256 header with a correct signature is a control: it is accepted.
    let ok = forged(&secret, json!({"alg": "HS256", "typ": "JWT"}), valid_claims);
    assert_eq!(wallet_with(&svc, &ok).await.0, StatusCode::OK);
}
