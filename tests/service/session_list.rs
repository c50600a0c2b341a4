//! `GET /v1/sessions` (and the account stream's events, which read one session the same way)
//! sums each session from the summary a list kept of it and the messages after it
//! (`session_summaries`: PostgreSQL's migration 22, `session_rows!` in
//! `crates/service/src/storage/postgres/mod.rs`; SQLite's migration 11, `session_rows!` in
//! `crates/service/src/storage/sqlite/messages.rs`), not from every message of the account:
//! on both stores what it lists is what the session's history says, through sends, undos and
//! deletions; on PostgreSQL also through many lists at once, and a deleted session's summary
//! that a list wrote back goes.

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::Value;

use super::backends::{Backend, TestDb};
use super::common::{GUARD, Svc, session, start_with};
use super::pg_proxy::eventually;
use convo_service::{Tier, generate_api_key};

/// A service on `backend`, with an enterprise key (its request limit covers the lists).
async fn start(backend: &Backend) -> Svc {
    let mut config = backend.config();
    config.api_keys = vec![(generate_api_key(), Tier::Enterprise)];
    start_with(config).await
}

/// What the list must say of `session`, from its history: the number of messages, their
/// tokens, the newest message's time and the first user message (its title).
async fn from_history(svc: &Svc, session: &str) -> (u64, u64, String, String) {
    let (status, history) = svc.get(&format!("/v1/sessions/{session}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let messages = history["messages"].as_array().unwrap();
    let tokens = messages.iter().map(|m| m["tokens"].as_u64().unwrap()).sum();
    let newest = messages
        .iter()
        .map(|m| m["createdAt"].as_str().unwrap().to_string())
        .max()
        .unwrap();
    let first = messages
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()
        .get("content")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    (messages.len() as u64, tokens, newest, first)
}

/// The list's figures of `session` in the order of `from_history`.
fn figures(s: &Value) -> (u64, u64, String, String) {
    (
        s["messageCount"].as_u64().unwrap(),
        s["tokens"].as_u64().unwrap(),
        s["lastActivityAt"].as_str().unwrap().to_string(),
        s["title"].as_str().unwrap().to_string(),
    )
}

/// `session`'s kept summary: its messages and tokens, `None` when it has none.
async fn summary(backend: &Backend, session: &str) -> Option<(u64, u64)> {
    let rows = backend
        .texts(
            "SELECT CAST(messages AS TEXT), CAST(tokens AS TEXT) FROM session_summaries
             WHERE session_id = $1",
            session,
        )
        .await;
    rows.first()
        .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap()))
}

async fn undo(svc: &Svc, session: &str) {
    let (status, body) = svc.undo(session).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A list keeps the sums of a session of 32 messages or more, and the next lists read that
/// summary and only the messages after it: a summary changed by hand shows in the list (and
/// in one session's summary), with
/// the messages sent since added to it. An undo (a change other than an append) makes the list
/// sum the session anew, and a deletion deletes its summary. A short session gets no summary
/// (read whole each time). At every step the list says what the history says.
async fn the_list_reads_a_sessions_summary_and_only_the_messages_after_it(backend: Backend) {
    let svc = start(&backend).await;
    let (long, short) = (session(), session());
    for i in 0..17 {
        svc.send_text(&long, &format!("question {i}")).await;
    }
    svc.send_text(&short, "a short one").await;

    let first = figures(&svc.listed(&long).await);
    assert_eq!(first, from_history(&svc, &long).await);
    assert_eq!(first.0, 34);
    assert_eq!(first.3, "question 0");
    assert_eq!(
        summary(&backend, &long).await,
        Some((34, first.1)),
        "the list kept the long session's sums"
    );
    assert_eq!(
        figures(&svc.listed(&short).await),
        from_history(&svc, &short).await
    );
    assert_eq!(
        summary(&backend, &short).await,
        None,
        "a short session is read whole"
    );

    // The list reads the summary: what it holds is what the list says, plus what came after.
    backend
        .execute(
            &format!(
                "UPDATE session_summaries SET messages = messages + 1000, tokens = tokens + 7
                 WHERE session_id = '{long}'"
            ),
            &[],
        )
        .await;
    let (count, tokens, ..) = figures(&svc.listed(&long).await);
    assert_eq!((count, tokens), (1034, first.1 + 7));
    // So does one session's summary (`PATCH` answers it; the account stream's events read it
    // the same way).
    let resp = svc
        .http
        .patch(svc.url(&format!("/v1/sessions/{long}")))
        .bearer_auth(&svc.key)
        .json(&serde_json::json!({ "title": "question 0" }))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::OK);
    let patched: Value = resp.json().await.unwrap();
    assert_eq!(patched["messageCount"], 1034, "{patched}");
    svc.send_text(&long, "question 17").await;
    let (count, tokens, newest, title) = figures(&svc.listed(&long).await);
    let history = from_history(&svc, &long).await;
    assert_eq!((count, tokens), (1036, history.1 + 7));
    assert_eq!((newest, title), (history.2, history.3));

    // An undo changes the session otherwise than by an append: it is summed anew.
    undo(&svc, &long).await;
    let after_undo = figures(&svc.listed(&long).await);
    assert_eq!(after_undo, from_history(&svc, &long).await);
    assert_eq!(after_undo.0, 34);
    assert_eq!(summary(&backend, &long).await, Some((34, after_undo.1)));

    assert_eq!(svc.delete(&long).await.0, StatusCode::OK);
    assert_eq!(summary(&backend, &long).await, None, "the deletion took it");
}
crate::on_both_backends!(the_list_reads_a_sessions_summary_and_only_the_messages_after_it);

/// Lists at once with sends that take sessions past the summary's threshold, and after them,
/// each list fails nowhere (no deadlock between the summaries they write) and the last says
/// what each history says.
#[tokio::test(flavor = "multi_thread")]
async fn lists_at_once_with_sends_list_what_the_histories_say() {
    let backend = Backend::postgres().await;
    let svc = start(&backend).await;
    let sessions: Vec<String> = (0..4).map(|_| session()).collect();
    let lists = async {
        for _ in 0..12 {
            for (status, list) in join_all((0..6).map(|_| svc.get("/v1/sessions"))).await {
                assert_eq!(status, StatusCode::OK, "{list}");
            }
        }
    };
    let svc = &svc;
    let sends = join_all(sessions.iter().map(|s| async move {
        for i in 0..20 {
            svc.send_text(s, &format!("message {i} to {s}")).await;
        }
    }));
    tokio::join!(lists, sends);
    for s in &sessions {
        assert_eq!(
            figures(&svc.listed(s).await),
            from_history(svc, s).await,
            "{s}"
        );
    }
}

/// A list that read a session live just before its deletion may write its summary after the
/// tombstone's trigger (migration 22) deleted it; the vacuum after deletions removes such a
/// summary (here written by hand for a deleted session, and found gone after another
/// deletion).
#[tokio::test(flavor = "multi_thread")]
async fn the_vacuum_after_deletions_removes_the_summaries_of_deleted_sessions() {
    let db = TestDb::create().await;
    let client = db.client().await;
    let backend = Backend::Postgres(db);
    let svc = start(&backend).await;
    let (raced, other) = (session(), session());
    svc.send_text(&raced, "going").await;
    svc.send_text(&other, "going too").await;
    assert_eq!(svc.delete(&raced).await.0, StatusCode::OK);
    client
        .execute(
            "INSERT INTO session_summaries
                 (session_id, changes, last_pk, messages, tokens, last_at, first_user)
             VALUES ($1, 0, 1, 2, 3, 4, 5)",
            &[&raced],
        )
        .await
        .unwrap();
    assert_eq!(svc.delete(&other).await.0, StatusCode::OK);
    eventually(GUARD, "the deleted session's summary removed", || async {
        summary(&backend, &raced).await.is_none()
    })
    .await;
}
