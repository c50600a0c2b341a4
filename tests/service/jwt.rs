//! JWT edge cases on the wallet endpoint: only unexpired HS256 tokens signed with the
//! service's secret, with a non-empty `sub` and no `crit` extension, get through; a leeway is
//! allowed only when configured; a short secret is warned about at start.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use convo_service::jwt::{self, Claims};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::json;

use super::binary::{BIN, started, stderr_of};
use super::common::{Svc, json as body_json, start_default, start_with};

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
        (
            "exp is now (its last valid second was exp - 1)",
            jwt::mint_claims(&secret, &claims(now(), None)),
            "expired",
        ),
        (
            "crit naming an extension",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT", "crit": ["convo-ext"], "convo-ext": 1}),
                valid_claims.clone(),
            ),
            "crit",
        ),
        (
            "crit that is not a list",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT", "crit": "convo-ext"}),
                valid_claims.clone(),
            ),
            "crit",
        ),
        (
            "empty crit",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT", "crit": []}),
                valid_claims.clone(),
            ),
            "crit",
        ),
        (
            "empty sub",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT"}),
                json!({"sub": "", "iat": now(), "exp": now() + 600}),
            ),
            "sub",
        ),
        (
            "blank sub",
            forged(
                &secret,
                json!({"alg": "HS256", "typ": "JWT"}),
                json!({"sub": "  ", "iat": now(), "exp": now() + 600}),
            ),
            "sub",
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

#[tokio::test]
async fn a_configured_leeway_allows_that_much_clock_skew_and_no_more() {
    let mut config = convo_service::ServiceConfig::ephemeral(0);
    config.jwt_leeway_secs = 60;
    let svc = start_with(config).await;
    let secret = svc.service.jwt_secret.clone();
    let expired_since = |secs: u64| {
        jwt::mint_claims(
            &secret,
            &Claims {
                sub: "alice".into(),
                iat: now() - 600,
                exp: now() - secs,
                nbf: None,
            },
        )
    };
    assert_eq!(wallet_with(&svc, &expired_since(5)).await.0, StatusCode::OK);
    let (status, body) = wallet_with(&svc, &expired_since(120)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired")
    );
    // Without the leeway (the default), 5 s late is expired.
    let strict = start_default().await;
    let late = jwt::mint_claims(
        &strict.service.jwt_secret,
        &Claims {
            sub: "alice".into(),
            iat: now() - 600,
            exp: now() - 5,
            nbf: None,
        },
    );
    assert_eq!(
        wallet_with(&strict, &late).await.0,
        StatusCode::UNAUTHORIZED
    );
}

/// What `convo serve --jwt-secret SECRET` writes to stderr before it is stopped.
fn serve_stderr(secret: &str) -> String {
    let (mut child, _base, _stdout) = started(
        std::process::Command::new(BIN)
            .args([
                "serve",
                "--engine",
                "builtin",
                "--addr",
                "127.0.0.1:0",
                "--db",
                ":memory:",
            ])
            .args(["--jwt-secret", secret])
            .env_remove("CONVO_SERVE_API_KEYS")
            .env_remove("RUST_LOG"),
    );
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success());
    stderr_of(&mut child)
}

#[test]
fn a_jwt_secret_shorter_than_32_bytes_is_warned_about_at_start() {
    let stderr = serve_stderr("short");
    assert!(
        stderr.contains("the JWT secret is 5 bytes long; use at least 32"),
        "{stderr}"
    );
    let strong = "0123456789abcdef0123456789abcdef";
    let stderr = serve_stderr(strong);
    assert!(!stderr.contains("the JWT secret is"), "{stderr}");
    assert!(!stderr.contains(strong), "the secret is never logged");
}
