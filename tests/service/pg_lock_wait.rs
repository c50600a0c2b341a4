//! A session whose row some other client keeps locked (an operator's open transaction): a
//! send on it waits `LOCK_WAIT` (`crates/service/src/storage/postgres/mod.rs`) at most, and is
//! answered 503 `unavailable` with `Retry-After`, nothing stored, instead of holding its
//! connection until the lock goes; sends on other sessions go through meanwhile, and once the
//! lock goes the session takes sends again. The lock wait is shortened for the test through
//! the URL's own `options`, which come after the replica's.

use convo_service::error::UNAVAILABLE_RETRY_AFTER;
use convo_service::{DbLocation, ServiceConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::TestDb;
use super::common::{GUARD, Svc, session, start_with};

/// A send's status, body and `Retry-After`, within `GUARD`.
async fn send(svc: &Svc, session: &str, text: &str) -> (StatusCode, Value, Option<String>) {
    let request = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{session}/messages")))
        .bearer_auth(&svc.key)
        .json(&json!({"content": text}))
        .send();
    let resp = tokio::time::timeout(GUARD, request)
        .await
        .expect("an answer within the guard")
        .expect("request");
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_string());
    let body = resp.json().await.expect("a JSON body");
    (status, body, retry_after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_on_a_session_another_client_keeps_locked_is_503_and_stores_nothing() {
    let db = TestDb::create().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(format!("{}?options=-c%20lock_timeout%3D300", db.url()));
    let svc = start_with(config).await;
    let (locked, other) = (session(), session());
    svc.send_text(&locked, "before").await;
    svc.send_text(&other, "before").await;

    let mut pg = db.client().await;
    let operator = pg.transaction().await.unwrap();
    operator
        .execute(
            "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
            &[&locked],
        )
        .await
        .unwrap();

    let (status, body, retry_after) = send(&svc, &locked, "while locked").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(retry_after, Some(UNAVAILABLE_RETRY_AFTER.to_string()));
    let (status, body, _) = send(&svc, &other, "meanwhile").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "another session is not held up: {body}"
    );
    operator.rollback().await.unwrap();

    let (status, body, _) = send(&svc, &locked, "after").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let users: Vec<String> = pg
        .query(
            "SELECT content FROM messages WHERE session_id = $1 AND role = 'user' ORDER BY pk",
            &[&locked],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(users, ["before", "after"], "nothing of the refused send");
    let in_flight: i64 = pg
        .query_one("SELECT count(*) FROM turns", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(in_flight, 0);
}
