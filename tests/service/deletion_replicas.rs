//! A session deleted through one replica leaves nothing in the others: each finds the
//! deletion at its next heartbeat (`PgStore::deleted_since`, `leases.rs`) and forgets the
//! history it held of the session and its engine's state of it, in memory and on disk, and
//! stops the reply it was generating there (docs/deploy.md, "What operators must do about
//! deletion").

use std::time::Duration;

use convo_client::api::StreamEvent;
use reqwest::StatusCode;
use serde_json::json;

use super::backends::{Backend, TestDb};
use super::common::{GUARD, next_event, session, start_with, until_end};
use super::local_model::test_model;
use super::local_model_state::saved;
use super::metrics::value;
use super::replica_harness::{Options, Replica};

/// Polls `now` every 50 ms until it is `want`, for at most `GUARD`.
async fn until_eq<F: Future<Output = u64>>(what: &str, want: u64, now: impl Fn() -> F) {
    let waited = async {
        loop {
            if now().await == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(GUARD, waited)
        .await
        .unwrap_or_else(|_| panic!("{what} never came to {want}"));
}

/// A message long enough that a replica keeps the session's history (8 KiB of text).
fn long_message(n: usize) -> String {
    format!("message {n}: {}", "words to keep ".repeat(700))
}

#[tokio::test]
async fn another_replica_forgets_the_history_it_held_of_a_deleted_session() {
    let backend = Backend::Postgres(TestDb::create().await);
    let config = backend.config();
    let (a, b) = tokio::join!(start_with(config.clone()), start_with(config));
    let (deleted, kept) = (session(), session());
    // The second send of each session through `b` keeps the history it read.
    for sid in [&deleted, &kept] {
        for n in 0..2 {
            b.send_text(sid, &long_message(n)).await;
        }
    }
    let held = || async { b.service.pool_use().expect("PostgreSQL").histories.sessions as u64 };
    assert_eq!(held().await, 2);

    assert_eq!(a.delete(&deleted).await.0, StatusCode::OK);
    // At `b`'s next heartbeat (every 5 s).
    until_eq("the histories `b` holds", 1, held).await;
    b.send_text(&kept, "and the other session goes on").await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// The engine's saved states under a data dir (`DIR/kv/<model id>/*.kv`).
fn saved_states(data_dir: &std::path::Path) -> u64 {
    saved(&data_dir.join("kv")).len() as u64
}

/// A replica's `convo_engine_kv_slots_used` (sessions whose state its engine holds).
async fn slots_used(replica: &Replica, admin: &str) -> u64 {
    value(
        &replica.metrics(admin).await,
        "convo_engine_kv_slots_used",
        &[],
    ) as u64
}

#[tokio::test]
async fn another_replicas_engine_forgets_its_state_of_a_deleted_session() {
    const KEY: &str = "service_live_deletedeletedelete0001";
    let admin = convo_service::generate_admin_key();
    let db = TestDb::create().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = |dir: &std::path::Path| Options {
        admin_key: Some(admin.clone()),
        local_model: Some((test_model(), dir.to_path_buf())),
        ..Options::default()
    };
    // Leases of 600 ms: a heartbeat every 200 ms.
    let a = Replica::start_with(&db, KEY, 0, Some(600), &options(dir_a.path()));
    let mut b = Replica::start_with(&db, KEY, 0, Some(600), &options(dir_b.path()));
    let (deleted, kept) = (session(), session());
    for sid in [&deleted, &kept] {
        let (status, body) = b
            .post(sid, json!({"content": "What is the capital of France?"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // `b`'s engine holds both states: in its slots, or saved to disk when the other session
    // took the slot.
    let held = || async { slots_used(&b, &admin).await + saved_states(dir_b.path()) };
    assert_eq!(held().await, 2);

    assert_eq!(a.delete(&deleted).await, StatusCode::OK);
    until_eq("the states b's engine holds", 1, held).await;
    assert_eq!(
        saved_states(dir_b.path()),
        0,
        "the kept session's is in a slot"
    );
    // At its stop the engine saves the state of the session it still holds, and only that.
    b.signal("-TERM");
    assert!(b.wait().success());
    assert_eq!(saved_states(dir_b.path()), 1, "{}", b.log());
}

#[tokio::test]
async fn a_reply_another_replica_generates_stops_when_its_session_is_deleted() {
    const KEY: &str = "service_live_deletedeletedelete0002";
    let db = TestDb::create().await;
    // 40 ms a token, leases of 600 ms: a heartbeat every 200 ms.
    let a = Replica::start(&db, KEY, 40, Some(600));
    let b = Replica::start(&db, KEY, 40, Some(600));
    let ask = "write some code for me, please";
    // How long a whole reply is (seconds of tokens at this pace).
    let (status, whole) = b.post(&session(), json!({ "content": ask })).await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    let whole = whole["content"].as_str().unwrap().chars().count();

    let sid = session();
    let mut listener = b.ws(&sid).await;
    let reply_id = b.start_reply(&sid, ask).await;
    let first = next_event(&mut listener).await;
    assert!(matches!(first, StreamEvent::Delta { .. }), "{first:?}");
    assert_eq!(a.delete(&sid).await, StatusCode::OK);
    let events = until_end(&mut listener, &reply_id).await;
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => {
            assert_eq!(error.code, "session_not_found", "{events:?}")
        }
        other => panic!("the reply ends with an error: {other:?}"),
    }
    let streamed: usize = std::iter::once(&first)
        .chain(&events)
        .map(|e| match e {
            StreamEvent::Delta { content, .. } => content.chars().count(),
            _ => 0,
        })
        .sum();
    assert!(
        streamed < whole / 2,
        "b stopped the reply at its next heartbeat: {streamed} of {whole} characters streamed"
    );
}
