//! Two services on one PostgreSQL database act as one: migrations run once when they start
//! together, sessions, history, idempotency keys, deletions and usage are shared, and the
//! request quota is exact when requests race over both, and a listener on one replica gets
//! the replies generated on the other (snapshot on a mid-reply connect, nothing lost or twice).

use std::sync::Arc;

use convo_client::api::StreamEvent;
use convo_service::{EngineConfig, ServiceConfig, Tier};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::{Backend, TestDb};
use super::common::{Svc, close, next_event, session, start_with, until_end};

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
        // The number of PostgreSQL migrations (the last: when each session was last undone).
        23
    );
    // Both replicas hold a lease.
    assert_eq!(backend.int("SELECT COUNT(*) FROM replicas", &[]).await, 2);
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
    // One database, one id, whichever replica says it.
    let (on_a, on_b) = (a.get("/v1/sessions").await.1, b.get("/v1/sessions").await.1);
    assert!(on_a["databaseId"].is_string(), "{on_a}");
    assert_eq!(on_a["databaseId"], on_b["databaseId"]);
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// 1,000 requests left, 1,040 sent at once over both replicas: exactly 1,000 are served (the
/// turns written in batches, `crates/service/src/storage/postgres/batch.rs`).
#[tokio::test]
async fn the_request_quota_is_exact_across_replicas() {
    let (backend, a, b) = two_replicas(Tier::Pro).await;
    let period_start = convo_service::time::billing_period(chrono::Utc::now())
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
    // The sends arrived together: each replica wrote turns in batches.
    for svc in &replicas {
        let used = svc.service.pool_use().expect("on PostgreSQL");
        assert!(used.starts.batches > 0, "{:?}", used.starts);
    }
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

/// The text a listener can rebuild from its events, checking that each delta carries the next
/// seq (nothing lost, nothing twice); the `done` message's content must equal it.
fn rebuilt(events: &[StreamEvent]) -> (String, String) {
    let (mut text, mut next) = (String::new(), 0);
    for event in events {
        match event {
            StreamEvent::Snapshot { seq, content, .. } => {
                text = content.clone();
                next = *seq;
            }
            StreamEvent::Delta { seq, content, .. } => {
                assert_eq!(*seq, next, "a delta lost or repeated in {events:?}");
                text.push_str(content);
                next += 1;
            }
            StreamEvent::Done { message } => return (text, message.content.clone()),
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("no done in {events:?}")
}

#[tokio::test]
async fn listeners_on_one_replica_get_the_replies_generated_on_the_other() {
    let backend = Backend::Postgres(TestDb::create().await);
    let mut config = backend.config();
    config.engine = EngineConfig::Builtin { pace_ms: 10 };
    let (a, b) = tokio::join!(start_with(config.clone()), start_with(config));
    let sid = session();
    a.send_text(&sid, "the session exists").await;
    let mut early = b.ws(&sid).await;
    let (status, accepted) = a
        .post(
            &sid,
            json!({"content": "write some code for me, please", "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let reply_id = accepted["messageId"].as_str().unwrap().to_string();
    // The first delta has reached b; a listener connecting now is mid-reply.
    let first = next_event(&mut early).await;
    assert!(
        matches!(first, StreamEvent::Delta { seq: 0, .. }),
        "{first:?}"
    );
    let mut late = b.ws(&sid).await;
    let mut early_events = vec![first];
    early_events.extend(until_end(&mut early, &reply_id).await);
    let late_events = until_end(&mut late, &reply_id).await;
    assert!(
        matches!(late_events[0], StreamEvent::Snapshot { .. }),
        "a mid-reply listener starts with a snapshot: {:?}",
        late_events[0]
    );
    let (text, done) = rebuilt(&early_events);
    assert_eq!(text, done);
    let (text, done_late) = rebuilt(&late_events);
    assert_eq!(text, done_late);
    assert_eq!(done, done_late);
    assert!(
        done.len() > 100,
        "a reply long enough to be mid-way: {done}"
    );
    close(early).await;
    close(late).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}
