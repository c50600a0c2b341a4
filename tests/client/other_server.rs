//! The client against deliberately different servers (docs/design.md, "Against other servers"): each test serves
//! one behaviour the local service does not have, and checks the client copes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use chrono::{TimeZone, Utc};
use convo_client::api::{ApiError, SendMessage, send_streaming};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::support::{Counter, SESSION, client, message_json, options, serve, usage_json};

fn hello(stream: Option<bool>) -> SendMessage {
    SendMessage {
        content: "hello".into(),
        role: None,
        stream,
        metadata: None,
    }
}

#[tokio::test]
async fn a_complete_200_reply_to_a_stream_post_is_taken_as_done() {
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = bodies.clone();
    let router = Router::new()
        // A stream endpoint that accepts and then says nothing.
        .route(
            "/v1/sessions/{id}/stream",
            get(|ws: WebSocketUpgrade| async move {
                ws.on_upgrade(
                    |mut socket| async move { while let Some(Ok(_)) = socket.recv().await {} },
                )
            }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(move |body: axum::Json<Value>| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(body.0);
                    (StatusCode::OK, axum::Json(message_json("all at once")))
                }
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    let mut printed = String::new();
    let reply = send_streaming(&client, SESSION, &hello(None), "key-1", |t| {
        printed.push_str(t)
    })
    .await
    .unwrap();
    assert_eq!(reply.content, "all at once");
    assert_eq!(printed, "all at once");
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        bodies[0]["stream"], true,
        "the stream was open, so it asked to stream"
    );
}

#[tokio::test]
async fn without_a_stream_endpoint_the_client_falls_back_to_a_plain_post() {
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = bodies.clone();
    let router = Router::new().route(
        "/v1/sessions/{id}/messages",
        post(move |body: axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body.0);
                axum::Json(message_json("plain reply"))
            }
        }),
    );
    let base = serve(router).await;
    let client = client(&base);
    let mut printed = String::new();
    let reply = send_streaming(&client, SESSION, &hello(None), "key-1", |t| {
        printed.push_str(t)
    })
    .await
    .unwrap();
    assert_eq!(reply.content, "plain reply");
    assert_eq!(printed, "plain reply");
    let bodies = bodies.lock().unwrap();
    assert_eq!(bodies.len(), 1);
    assert!(
        bodies[0].get("stream").is_none(),
        "a plain POST, not stream: true: {}",
        bodies[0]
    );
}

#[tokio::test]
async fn unknown_fields_are_ignored_everywhere() {
    let mut usage = usage_json();
    usage["region"] = json!("eu");
    usage["requests"]["burst"] = json!(7);
    let mut message = message_json("hi");
    message["model"] = json!("other-llm");
    message["finishReason"] = json!("stop");
    let router = Router::new()
        .route(
            "/v1/analytics/usage",
            get(move || async move { axum::Json(usage) }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(move || async move { axum::Json(message) }),
        )
        .route(
            "/v1/sessions/{id}",
            axum::routing::delete(|| async {
                axum::Json(json!({"deleted": true, "sessionId": SESSION, "at": "now"}))
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    let usage = client.usage().await.unwrap();
    assert_eq!(usage.tier, "free");
    assert_eq!(usage.requests.used, 5);
    let reply = client
        .send_message(SESSION, &hello(None), "k")
        .await
        .unwrap();
    assert_eq!(reply.content, "hi");
    assert!(client.delete_session(SESSION).await.unwrap().deleted);
    assert_eq!(client.health().await, Ok(false), "no /healthz here");
}

#[tokio::test]
async fn an_unknown_error_code_is_kept_with_its_message() {
    let router = Router::new().route(
        "/v1/sessions/{id}",
        axum::routing::delete(|| async {
            (
                StatusCode::IM_A_TEAPOT,
                axum::Json(json!({"error": {"code": "teapot_mode", "message": "short and stout", "hint": 1}})),
            )
        }),
    );
    let base = serve(router).await;
    let e = client(&base).delete_session(SESSION).await.unwrap_err();
    assert_eq!(
        e,
        ApiError::Service {
            status: 418,
            code: "teapot_mode".into(),
            message: "short and stout".into()
        }
    );
    assert_eq!(e.to_string(), "teapot_mode: short and stout");
    assert_eq!(e.exit_code(), 1);
}

#[tokio::test]
async fn errors_are_typed_by_code_not_by_status() {
    // This server says session_not_found with 410 and context_overflow with 413.
    let router = Router::new()
        .route(
            "/v1/sessions/{id}",
            axum::routing::delete(|| async {
                (
                    StatusCode::GONE,
                    axum::Json(json!({"error": {"code": "session_not_found", "message": "gone"}})),
                )
            }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(|| async {
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    axum::Json(json!({"error": {"code": "context_overflow", "message": "enable compression",
                        "currentTokens": 9000, "maxTokens": 8192}})),
                )
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    assert!(matches!(
        client.delete_session(SESSION).await,
        Err(ApiError::SessionNotFound { .. })
    ));
    assert!(matches!(
        client.send_message(SESSION, &hello(None), "k").await,
        Err(ApiError::ContextOverflow {
            current: 9000,
            max: 8192,
            ..
        })
    ));
}

fn quota_body() -> Value {
    json!({"error": {"code": "quota_exceeded", "message": "slow down", "limit": "requests", "resetAt": "2026-12-01T00:00:00Z"}})
}

#[tokio::test]
async fn a_429_with_a_short_retry_after_is_retried_after_waiting() {
    let calls = Counter::default();
    let c = calls.clone();
    let router = Router::new().route(
        "/v1/analytics/usage",
        get(move || {
            let c = c.clone();
            async move {
                if c.bump() == 0 {
                    let mut h = HeaderMap::new();
                    h.insert("Retry-After", "1".parse().unwrap());
                    (StatusCode::TOO_MANY_REQUESTS, h, axum::Json(quota_body())).into_response()
                } else {
                    axum::Json(usage_json()).into_response()
                }
            }
        }),
    );
    let base = serve(router).await;
    let usage = client(&base).usage().await.unwrap();
    assert_eq!(usage.tier, "free");
    assert_eq!(calls.get(), 2);
}

#[tokio::test]
async fn a_429_with_a_long_retry_after_is_returned_at_once() {
    let calls = Counter::default();
    let c = calls.clone();
    let router = Router::new().route(
        "/v1/analytics/usage",
        get(move || {
            let c = c.clone();
            async move {
                c.bump();
                let mut h = HeaderMap::new();
                h.insert("Retry-After", "3600".parse().unwrap());
                (StatusCode::TOO_MANY_REQUESTS, h, axum::Json(quota_body()))
            }
        }),
    );
    let base = serve(router).await;
    let e = client(&base).usage().await.unwrap_err();
    assert_eq!(
        e,
        ApiError::QuotaExceeded {
            limit: Some("requests".into()),
            reset_at: Some("2026-12-01T00:00:00Z".into()),
            retry_after: Some(Duration::from_secs(3600)),
            message: "slow down".into(),
        }
    );
    assert_eq!(
        calls.get(),
        1,
        "not retried: the wait is longer than the client's cap"
    );
}

#[tokio::test]
async fn a_500_then_a_success_succeeds_for_get_delete_and_post() {
    let calls = Counter::default();
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let (c1, c2, c3, k) = (calls.clone(), calls.clone(), calls.clone(), keys.clone());
    let fail_first = |c: &Counter| c.bump().is_multiple_of(2);
    let router = Router::new()
        .route(
            "/v1/analytics/metrics",
            get(move || {
                let c = c1.clone();
                async move {
                    if fail_first(&c) {
                        (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(json!({"error": {"code": "internal", "message": "oops"}}))).into_response()
                    } else {
                        axum::Json(json!({
                            "period": {"start": "2026-11-01T00:00:00Z", "end": "2026-11-02T00:00:00Z", "granularity": "hour"},
                            "sessions": {"total": 1, "active": 1, "averageDuration": 2.5},
                            "messages": {"total": 2, "averagePerSession": 2.0, "userMessages": 1, "assistantMessages": 1},
                            "tokens": {"total": 10, "prompt": 4, "completion": 6, "averagePerMessage": 5.0}
                        })).into_response()
                    }
                }
            }),
        )
        .route(
            "/v1/sessions/{id}",
            axum::routing::delete(move || {
                let c = c2.clone();
                async move {
                    if fail_first(&c) {
                        // No envelope at all: a proxy's error page.
                        (StatusCode::BAD_GATEWAY, "<html>bad gateway</html>").into_response()
                    } else {
                        axum::Json(json!({"deleted": true, "sessionId": SESSION})).into_response()
                    }
                }
            }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(move |headers: HeaderMap| {
                let c = c3.clone();
                let k = k.clone();
                async move {
                    let key = headers
                        .get("Idempotency-Key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    k.lock().unwrap().push(key);
                    if fail_first(&c) {
                        StatusCode::SERVICE_UNAVAILABLE.into_response()
                    } else {
                        axum::Json(message_json("second time lucky")).into_response()
                    }
                }
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    let start = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
    let end = Utc.with_ymd_and_hms(2026, 11, 2, 0, 0, 0).unwrap();
    let m = client
        .metrics(start, end, Some(convo_client::api::Granularity::Hour))
        .await
        .unwrap();
    assert_eq!(m.tokens.total, 10);
    assert_eq!(calls.get(), 2);
    assert!(client.delete_session(SESSION).await.unwrap().deleted);
    assert_eq!(calls.get(), 4);
    let reply = client
        .send_message(SESSION, &hello(None), "the-one-key")
        .await
        .unwrap();
    assert_eq!(reply.content, "second time lucky");
    assert_eq!(calls.get(), 6);
    assert_eq!(
        *keys.lock().unwrap(),
        vec!["the-one-key".to_string(), "the-one-key".to_string()],
        "a retried POST carries the same Idempotency-Key"
    );
}

#[tokio::test]
async fn persistent_5xx_gives_up_after_the_retries() {
    let calls = Counter::default();
    let c = calls.clone();
    let router = Router::new().route(
        "/v1/analytics/usage",
        get(move || {
            let c = c.clone();
            async move {
                c.bump();
                StatusCode::BAD_GATEWAY
            }
        }),
    );
    let base = serve(router).await;
    let e = client(&base).usage().await.unwrap_err();
    assert!(
        matches!(e, ApiError::Protocol(ref m) if m.contains("HTTP 502")),
        "{e}"
    );
    assert_eq!(calls.get(), 3, "one attempt and max_retries = 2 retries");
}

/// A raw server answering every connection with `response` and closing; counts connections.
async fn raw_server(response: &'static [u8]) -> (url::Url, Counter) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Counter::default();
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            c.bump();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // Read the request head (small requests arrive in one read).
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(response).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (url::Url::parse(&format!("http://{addr}")).unwrap(), count)
}

#[tokio::test]
async fn a_truncated_body_is_a_network_error_and_is_retried() {
    let (base, connections) = raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\nConnection: close\r\n\r\n{\"billingPeriod\":{\"start\":",
    )
    .await;
    let e = client(&base).usage().await.unwrap_err();
    assert!(e.is_network(), "{e:?}");
    assert!(e.to_string().contains("cut off"), "{e}");
    assert_eq!(e.exit_code(), 3);
    assert_eq!(connections.get(), 3);
}

#[tokio::test]
async fn truncated_json_with_a_matching_length_is_a_protocol_error() {
    let (base, connections) = raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"billingPeriod\"",
    )
    .await;
    let e = client(&base).usage().await.unwrap_err();
    assert!(matches!(e, ApiError::Protocol(_)), "{e:?}");
    assert_eq!(e.exit_code(), 1);
    assert_eq!(connections.get(), 1, "a malformed answer is not retried");
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let big = "x".repeat(64 * 1024);
    let router = Router::new().route("/v1/analytics/usage", get(move || async move { big }));
    let base = serve(router).await;
    let mut o = options(&base);
    o.max_body_bytes = 1024;
    let e = convo_client::api::Client::new(o)
        .unwrap()
        .usage()
        .await
        .unwrap_err();
    assert!(
        matches!(e, ApiError::Protocol(ref m) if m.contains("larger than 1024 bytes")),
        "{e:?}"
    );
}

#[tokio::test]
async fn credentials_go_where_they_belong() {
    let seen = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let (s1, s2) = (seen.clone(), seen.clone());
    let router = Router::new()
        .route(
            "/v1/analytics/usage",
            get(move |h: HeaderMap| async move {
                let auth = h["authorization"].to_str().unwrap().to_string();
                s1.lock().unwrap().push(("usage".into(), auth));
                axum::Json(usage_json())
            }),
        )
        .route(
            "/v1/wallets/{id}",
            get(move |h: HeaderMap| async move {
                let auth = h["authorization"].to_str().unwrap().to_string();
                s2.lock().unwrap().push(("wallet".into(), auth));
                axum::Json(json!({"walletId": "w1", "address": "addr", "alias": "main",
                    "balance": 1.5, "riskScore": 12, "unknown": true}))
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    client.usage().await.unwrap();
    let w = client.wallet("w1").await.unwrap();
    assert_eq!(w.balance, 1.5);
    assert!(w.token_accounts.is_empty() && w.tags.is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            (
                "usage".into(),
                "Bearer service_live_testkey000000000000".into()
            ),
            ("wallet".into(), "Bearer header.payload.signature".into()),
        ]
    );
    let mut o = options(&base);
    o.wallet_token = None;
    let e = convo_client::api::Client::new(o)
        .unwrap()
        .wallet("w1")
        .await
        .unwrap_err();
    assert!(
        matches!(e, ApiError::Config(ref m) if m.contains("CONVO_WALLET_TOKEN")),
        "{e}"
    );
    assert_eq!(e.exit_code(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_a_network_error() {
    let (_refusing, addr) = crate::refused::refused_addr();
    let base = url::Url::parse(&format!("http://{addr}")).unwrap();
    let mut o = options(&base);
    o.max_retries = 0;
    let e = convo_client::api::Client::new(o)
        .unwrap()
        .usage()
        .await
        .unwrap_err();
    assert!(e.is_network(), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("network error: cannot connect to"),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'));
}
