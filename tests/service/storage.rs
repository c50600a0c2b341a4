//! Storage: restart on the same database, deletion that leaves no content in the files, ordering
//! under concurrency, and plan limits reached through stored usage. The tests that do not read
//! SQLite's files run on both backends (`on_both_backends!`: `NAME::sqlite`, `NAME::postgres`).

use std::collections::BTreeSet;
use std::path::Path;

use convo_service::{DbLocation, ServiceConfig, Tier};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::Backend;
use super::common::{Svc, json as body_json, session, start_with};
use crate::on_both_backends;

on_both_backends!(
    a_restart_on_the_same_database_keeps_everything,
    concurrent_sends_are_all_stored_once_in_order_per_session,
    the_request_limit_is_429_before_any_work_and_refusals_are_not_counted,
    the_token_limit_is_429,
);

fn backend_config(backend: &Backend, key: Option<&str>) -> ServiceConfig {
    let mut config = backend.config();
    if let Some(key) = key {
        config.api_keys[0].0 = key.to_string();
    }
    config
}

fn file_config(dir: &Path, key: Option<&str>) -> ServiceConfig {
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::File(dir.join("service.db"));
    if let Some(key) = key {
        config.api_keys[0].0 = key.to_string();
    }
    config
}

/// Occurrences of `needle` in the database file and its WAL and shared-memory companions.
fn occurrences(dir: &Path, needle: &str) -> usize {
    let mut total = 0;
    for name in ["service.db", "service.db-wal", "service.db-shm"] {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            total += bytes
                .windows(needle.len())
                .filter(|w| *w == needle.as_bytes())
                .count();
        }
    }
    total
}

async fn a_restart_on_the_same_database_keeps_everything(backend: Backend) {
    let svc = start_with(backend_config(&backend, None)).await;
    let key = svc.key.clone();
    let sid = session();
    svc.send_text(&sid, "remember me").await;
    let deleted = session();
    svc.send_text(&deleted, "forget me").await;
    assert_eq!(svc.delete(&deleted).await.0, StatusCode::OK);
    let before = svc.usage().await;
    svc.service.shutdown().await;

    let svc = start_with(backend_config(&backend, Some(&key))).await;
    let after = svc.usage().await;
    assert_eq!(after["tokens"]["used"], before["tokens"]["used"]);
    assert_eq!(after["sessions"]["active"], 1);
    assert_eq!(
        after["requests"]["used"].as_u64().unwrap(),
        before["requests"]["used"].as_u64().unwrap() + 1
    );
    // The conversation continues where it was: the reply counts the earlier messages.
    let reply = svc.send_text(&sid, "and now?").await;
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .contains("**3** messages"),
        "{reply}"
    );
    // The deleted session stays deleted.
    let (status, _) = svc.post(&deleted, json!({"content": "back?"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    svc.service.shutdown().await;
}

#[tokio::test]
async fn deletion_leaves_no_content_in_the_database_files() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start_with(file_config(dir.path(), None)).await;
    let marker = "ZebraQuokkaMarker7431";
    let sid = session();
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", "delete-me")
        .json(
            &json!({"content": format!("please remember {marker}"), "metadata": {"note": marker}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    svc.send_text(&sid, &format!("and again {marker}")).await;
    // The title a user gives a session is in the session's row, which stays as its tombstone.
    let title_marker = "WombatTitleMarker2954";
    svc.set_title(&sid, title_marker).await;
    let keep = session();
    svc.send_text(&keep, "KeepThisOtherSession").await;
    // The content is really in the files before (so the check below can fail).
    for marker in [marker, title_marker] {
        assert!(
            occurrences(dir.path(), marker) > 0,
            "{marker} should be stored first"
        );
    }

    assert_eq!(svc.delete(&sid).await.0, StatusCode::OK);
    for marker in [marker, title_marker] {
        assert_eq!(
            occurrences(dir.path(), marker),
            0,
            "deleted content ({marker}) remains in the files"
        );
    }
    assert!(occurrences(dir.path(), "KeepThisOtherSession") > 0);
    svc.service.shutdown().await;
    assert_eq!(occurrences(dir.path(), marker), 0);
    assert_eq!(occurrences(dir.path(), title_marker), 0);
}

async fn concurrent_sends_are_all_stored_once_in_order_per_session(backend: Backend) {
    let svc = std::sync::Arc::new(start_with(backend_config(&backend, None)).await);
    let sessions: Vec<String> = (0..10).map(|_| session()).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..100 {
        let svc = svc.clone();
        let sid = sessions[i % 10].clone();
        tasks.spawn(async move {
            let (status, body) = svc
                .post(&sid, json!({"content": format!("message number {i}")}))
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            (sid, body["content"].as_str().unwrap().to_string())
        });
    }
    let mut counts_seen: std::collections::HashMap<String, BTreeSet<usize>> = Default::default();
    while let Some(result) = tasks.join_next().await {
        let (sid, content) = result.unwrap();
        // The builtin reply says how many messages the session held when it answered.
        let n: usize = content
            .split("- **")
            .nth(1)
            .and_then(|rest| rest.split("**").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no message count in {content}"));
        counts_seen.entry(sid).or_default().insert(n);
    }
    let expected: BTreeSet<usize> = (0..10).map(|k| 2 * k + 1).collect();
    for sid in &sessions {
        assert_eq!(
            counts_seen[sid], expected,
            "turns of {sid} were not serialized"
        );
    }
    let metrics = svc.metrics_now().await;
    assert_eq!(metrics["messages"]["total"], 200);
    assert_eq!(metrics["messages"]["userMessages"], 100);
    let svc = std::sync::Arc::try_unwrap(svc)
        .ok()
        .expect("all tasks done");
    svc.service.shutdown().await;

    // Read the database: every session alternates user/assistant and holds each message once.
    for sid in &sessions {
        let rows = backend
            .texts(
                "SELECT role, content FROM messages WHERE session_id = $1 ORDER BY pk",
                sid,
            )
            .await;
        assert_eq!(rows.len(), 20);
        let mut user_texts = BTreeSet::new();
        for (i, row) in rows.iter().enumerate() {
            let (role, content) = (&row[0], &row[1]);
            assert_eq!(
                role,
                if i % 2 == 0 { "user" } else { "assistant" },
                "{sid} row {i}"
            );
            if role == "user" {
                assert!(
                    user_texts.insert(content.clone()),
                    "stored twice: {content}"
                );
            }
        }
    }
}

/// Starts on the backend, runs `seed` (a statement and its parameters) while the service is
/// stopped, restarts.
async fn seeded(backend: &Backend, tier: Tier, seed: (&str, &[i64])) -> Svc {
    let mut config = backend_config(backend, None);
    config.api_keys[0].1 = tier;
    let svc = start_with(config.clone()).await;
    svc.service.shutdown().await;
    backend.execute(seed.0, seed.1).await;
    start_with(config).await
}

async fn the_request_limit_is_429_before_any_work_and_refusals_are_not_counted(backend: Backend) {
    let period_start = convo_service::time::billing_period(chrono::Utc::now())
        .0
        .timestamp_millis();
    let svc = seeded(
        &backend,
        Tier::Free,
        (
            "INSERT INTO usage_totals (account_id, period_start, requests) VALUES (1, $1, 999)
             ON CONFLICT (account_id, period_start) DO UPDATE SET requests = excluded.requests",
            &[period_start],
        ),
    )
    .await;
    // The 1000th request is admitted and sees itself counted.
    let usage = svc.usage().await;
    assert_eq!(usage["requests"]["used"], 1000);
    assert_eq!(usage["requests"]["percentage"], 100.0);
    let sid = session();
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .json(&json!({"content": "over the limit"}))
        .send()
        .await
        .unwrap();
    assert!(resp.headers().contains_key("retry-after"));
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "quota_exceeded");
    assert_eq!(body["error"]["limit"], "requests");
    assert!(body["error"]["resetAt"].is_string());
    svc.service.shutdown().await;
    // Nothing was done: no session, and the refused request was not counted.
    let sessions = backend.int("SELECT COUNT(*) FROM sessions", &[]).await;
    let requests = backend
        .int(
            "SELECT requests FROM usage_totals WHERE account_id = 1 AND period_start = $1",
            &[period_start],
        )
        .await;
    assert_eq!((sessions, requests), (0, 1000));
}

async fn the_token_limit_is_429(backend: Backend) {
    let now = chrono::Utc::now().timestamp_millis();
    let svc = seeded(
        &backend,
        Tier::Free,
        (
            "INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
             VALUES ('msg_seed', 1, 'session_seedseedseedseed', 'user', 200000, $1)",
            &[now],
        ),
    )
    .await;
    let (status, body) = svc
        .post(&session(), json!({"content": "one token too many"}))
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["limit"], "tokens");
    assert_eq!(svc.usage().await["tokens"]["percentage"], 100.0);
    svc.service.shutdown().await;
}

#[tokio::test]
async fn a_persistent_embedded_service_keeps_its_key_and_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let svc = start_with(ServiceConfig::persistent(dir.path(), 0).unwrap()).await;
    let sid = session();
    svc.send_text(&sid, "before the restart").await;
    svc.service.shutdown().await;
    let svc = start_with(ServiceConfig::persistent(dir.path(), 0).unwrap()).await;
    let reply = svc.send_text(&sid, "after the restart").await;
    assert!(
        reply["content"]
            .as_str()
            .unwrap()
            .contains("**3** messages"),
        "{reply}"
    );
    svc.service.shutdown().await;
}
