//! Two services on one PostgreSQL database act as one: migrations run once when they start
//! together, sessions, history, idempotency keys, deletions and usage are shared, and the
//! request quota is exact when requests race over both.

use std::sync::Arc;

use convo::service::{ServiceConfig, Tier};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::{Backend, TestDb};
use super::common::{Svc, session, start_with};

/// Two replicas with the same keys and secret, started at the same moment on a new database.
async fn two_replicas(tier: Tier) -> (Backend, Svc, Svc) {
    let backend = Backend::Postgres(TestDb::create().await);
    let mut config: ServiceConfig = backend.config();
    config.api_keys[0].1 = tier;
    let (a, b) = tokio::join!(start_with(config.clone()), start_with(config));
    (backend, a, b)
}

#[tokio::test]
async fn replicas_started_together_migrate_once_and_share_everything() {
    let (backend, a, b) = two_replicas(Tier::Pro).await;
    assert_eq!(
        backend
            .int("SELECT CAST(version AS BIGINT) FROM schema_version", &[])
            .await,
        1
    );
    // One account for the key, whichever replica made it.
    assert_eq!(backend.int("SELECT COUNT(*) FROM accounts", &[]).await, 1);
    let sid = session();
    a.send_text(&sid, "written through a").await;
    let reply = b.send_text(&sid, "and read through b").await;
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .contains("**3** messages"),
        "b sees a's turn: {reply}"
    );
    let (status, history) = a.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history["messages"].as_array().unwrap().len(), 4);
    // An idempotency key used on a is replayed by b.
    let keyed = |svc: &Svc| {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("idempotency-key", "shared-key")
            .json(&json!({"content": "once only"}))
            .send()
    };
    let first = keyed(&a).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let first = first.text().await.unwrap();
    let again = keyed(&b).await.unwrap();
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.unwrap(), first);
    // Usage counts the requests of both replicas: 2 + 1 (history) + 2 sends + this one.
    let usage = b.usage().await;
    assert_eq!(usage["requests"]["used"], 6, "{usage}");
    assert_eq!(usage["sessions"]["active"], 1);
    // Deleted through b, gone on a.
    assert_eq!(b.delete(&sid).await.0, StatusCode::OK);
    assert_eq!(
        a.post(&sid, json!({"content": "still there?"})).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(a.usage().await["sessions"]["active"], 0);
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// 1,000 requests left, 1,040 sent at once over both replicas: exactly 1,000 are served.
#[tokio::test]
async fn the_request_quota_is_exact_across_replicas() {
    let (backend, a, b) = two_replicas(Tier::Pro).await;
    let period_start = convo::service::time::billing_period(chrono::Utc::now())
        .0
        .timestamp_millis();
    let limit = Tier::Pro.limits().requests as i64;
    backend
        .execute(
            "INSERT INTO usage_totals (account_id, period_start, requests) VALUES (1, $1, $2)",
            &[period_start, limit - 1000],
        )
        .await;
    let replicas = [Arc::new(a), Arc::new(b)];
    let sessions: Vec<String> = (0..104).map(|_| session()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1040 {
        let svc = replicas[i % 2].clone();
        let sid = sessions[i % sessions.len()].clone();
        tasks.spawn(async move {
            let (status, body) = svc
                .post(&sid, json!({"content": format!("request {i}")}))
                .await;
            (status, body["error"]["code"].as_str().map(str::to_string))
        });
    }
    let (mut ok, mut over) = (0, 0);
    while let Some(result) = tasks.join_next().await {
        match result.unwrap() {
            (StatusCode::OK, _) => ok += 1,
            (StatusCode::TOO_MANY_REQUESTS, Some(code)) if code == "quota_exceeded" => over += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!((ok, over), (1000, 40));
    assert_eq!(
        backend
            .int(
                "SELECT requests FROM usage_totals WHERE account_id = 1 AND period_start = $1",
                &[period_start],
            )
            .await,
        limit
    );
    for svc in replicas {
        Arc::try_unwrap(svc).ok().unwrap().service.shutdown().await;
    }
}
