//! A small in-test service for the CLI tests: enough state for the commands to be
//! exercised end to end (sessions, deletion, usage, metrics, wallets), without a stream
//! endpoint, so `--stream` takes the plain-POST fallback.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde_json::{Value, json};

pub const KEY: &str = "service_live_clitestkey0000000000";
pub const WALLET_TOKEN: &str = "a.wallet.token";
/// How long the reply to the message "slow" takes.
pub const SLOW_REPLY: std::time::Duration = std::time::Duration::from_millis(1200);

#[derive(Default)]
struct Fake {
    sessions: HashSet<String>,
    deleted: HashSet<String>,
    messages: u64,
}

type Shared = Arc<Mutex<Fake>>;

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

fn authorized(h: &HeaderMap, want: &str) -> bool {
    h.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {want}"))
}

async fn send(
    State(s): State<Shared>,
    Path(id): Path<String>,
    h: HeaderMap,
    body: axum::Json<Value>,
) -> Response {
    if !authorized(&h, KEY) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "unknown API key");
    }
    let content = body["content"].as_str().unwrap_or_default().to_string();
    if content == "overflow" {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"code": "context_overflow", "message": "enable compression or clear history",
                "currentTokens": 9001, "maxTokens": 8192}})),
        )
            .into_response();
    }
    if content == "quota" {
        // A limit that resets next month: the client does not wait that long.
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "864000")],
            axum::Json(
                json!({"error": {"code": "quota_exceeded", "message": "monthly requests used up",
                "limit": "requests", "resetAt": "2026-12-01T00:00:00Z"}}),
            ),
        )
            .into_response();
    }
    if content == "slow" {
        // A reply that takes longer to write than other requests may take to answer.
        tokio::time::sleep(SLOW_REPLY).await;
    }
    let mut f = s.lock().unwrap();
    if f.deleted.contains(&id) {
        return error(
            StatusCode::NOT_FOUND,
            "session_not_found",
            "session was deleted",
        );
    }
    f.sessions.insert(id.clone());
    f.messages += 1;
    let meta = body
        .get("metadata")
        .map(|m| format!(" {m}"))
        .unwrap_or_default();
    axum::Json(json!({
        "messageId": format!("msg_{}", f.messages),
        "sessionId": id,
        "role": "assistant",
        "content": format!("echo ({}): {content}{meta}", body["role"].as_str().unwrap_or("user")),
        "tokens": 4,
        "createdAt": "2026-11-22T00:00:00Z",
        "extra": "ignored"
    }))
    .into_response()
}

async fn remove(State(s): State<Shared>, Path(id): Path<String>, h: HeaderMap) -> Response {
    if !authorized(&h, KEY) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "unknown API key");
    }
    let mut f = s.lock().unwrap();
    if !f.sessions.remove(&id) {
        return error(
            StatusCode::NOT_FOUND,
            "session_not_found",
            "no such session",
        );
    }
    f.deleted.insert(id.clone());
    axum::Json(json!({"deleted": true, "sessionId": id})).into_response()
}

async fn usage(h: HeaderMap) -> Response {
    if !authorized(&h, KEY) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "unknown API key");
    }
    axum::Json(json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": 1234, "limit": 50000, "percentage": 2.468},
        "tokens": {"used": 99, "limit": 10000000, "percentage": 0.00099},
        "sessions": {"active": 2, "limit": 500, "percentage": 0.4},
        "tier": "pro"
    }))
    .into_response()
}

async fn metrics(
    h: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<Vec<(String, String)>>,
) -> Response {
    if !authorized(&h, KEY) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "unknown API key");
    }
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let (Some(start), Some(end)) = (get("startDate"), get("endDate")) else {
        return error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "startDate and endDate are required",
        );
    };
    axum::Json(json!({
        "period": {"start": start, "end": end, "granularity": get("granularity").unwrap_or_else(|| "day".into())},
        "sessions": {"total": 3, "active": 2, "averageDuration": 42.5},
        "messages": {"total": 8, "averagePerSession": 2.67, "userMessages": 4, "assistantMessages": 4},
        "tokens": {"total": 1200, "prompt": 400, "completion": 800, "averagePerMessage": 150.0}
    }))
    .into_response()
}

async fn wallet(Path(id): Path<String>, h: HeaderMap) -> Response {
    if !authorized(&h, WALLET_TOKEN) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a JWT is required",
        );
    }
    if id != "wal_main" {
        return error(StatusCode::NOT_FOUND, "wallet_not_found", "no such wallet");
    }
    axum::Json(json!({
        "walletId": "wal_main", "address": "7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU",
        "alias": "Treasury", "balance": 12.5,
        "tokenAccounts": [{"mint": "EPjF", "symbol": "USDC", "balance": 100.0, "usdValue": 100.0},
                          {"mint": "Es9v", "symbol": "USDT", "balance": 50.5, "usdValue": 50.5}],
        "nfts": [{"mint": "NfT1", "name": "Mad Lad #1", "collection": "Mad Lads", "floorPrice": 80.0}],
        "riskScore": 17, "riskFactors": ["new_counterparty"], "tags": ["treasury", "\u{1b}[31mred"]
    }))
    .into_response()
}

/// Start the fake on 127.0.0.1:0; returns its base URL.
pub async fn start() -> String {
    let state: Shared = Arc::default();
    let router = Router::new()
        .route("/v1/sessions/{id}/messages", post(send))
        .route("/v1/sessions/{id}", delete(remove))
        .route("/v1/analytics/usage", get(usage))
        .route("/v1/analytics/metrics", get(metrics))
        .route("/v1/wallets/{id}", get(wallet))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}
