//! The session extensions of issue 27, each case on SQLite and on PostgreSQL: the title
//! (`PATCH /v1/sessions/{id}`, `title` in `GET /v1/sessions`) and undo
//! (`DELETE /v1/sessions/{id}/messages/last`).

use convo_service::{EngineConfig, Tier, generate_api_key};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::Backend;
use super::common::{GUARD, Svc, json, session, start_with};

/// A service on `backend` with two accounts: `svc.key` and the returned other key.
async fn start_on(backend: &Backend) -> (Svc, String) {
    let mut config = backend.config();
    let other = generate_api_key();
    config.api_keys = vec![(generate_api_key(), Tier::Pro), (other.clone(), Tier::Pro)];
    (start_with(config).await, other)
}

/// Both backends, named for the assertion messages.
async fn backends() -> Vec<(&'static str, Backend)> {
    vec![
        ("SQLite", Backend::sqlite().await),
        ("PostgreSQL", Backend::postgres().await),
    ]
}

async fn patch_with_key(svc: &Svc, key: &str, session: &str, body: &str) -> (StatusCode, Value) {
    let resp = svc
        .http
        .patch(svc.url(&format!("/v1/sessions/{session}")))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("request");
    json(resp).await
}

async fn patch(svc: &Svc, session: &str, body: Value) -> (StatusCode, Value) {
    patch_with_key(svc, &svc.key, session, &body.to_string()).await
}

/// The title `GET /v1/sessions` lists for `session`.
async fn listed_title(svc: &Svc, session: &str) -> Value {
    let (status, list) = svc.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == session)
        .unwrap_or_else(|| panic!("{session} not listed: {list}"))["title"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_titled_by_its_first_user_message_until_one_is_set() {
    for (name, backend) in backends().await {
        let (svc, _) = start_on(&backend).await;
        let s = session();
        svc.send_text(&s, "# Trip **plans** for\nJune and more")
            .await;
        svc.send_text(&s, "second message").await;
        assert_eq!(
            listed_title(&svc, &s).await,
            json!("Trip plans for"),
            "{name}"
        );

        let (status, body) = patch(&svc, &s, json!({"title": "  Lisbon in June "})).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["sessionId"], json!(s), "{name}");
        assert_eq!(body["title"], json!("Lisbon in June"), "{name}");
        assert_eq!(body["messageCount"], json!(4), "{name}");
        assert_eq!(
            listed_title(&svc, &s).await,
            json!("Lisbon in June"),
            "{name}"
        );

        // A session without a user message yet has no title.
        let quiet = session();
        let (status, body) = svc
            .post(&quiet, json!({"role": "system", "content": "be brief"}))
            .await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(listed_title(&svc, &quiet).await, Value::Null, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_title_is_refused_and_changes_nothing() {
    for (name, backend) in backends().await {
        let (svc, _) = start_on(&backend).await;
        let s = session();
        svc.send_text(&s, "hello there").await;
        let long = "x".repeat(convo_core::sessions::MAX_TITLE_CHARS + 1);
        for body in [
            json!({"title": ""}).to_string(),
            json!({"title": " \t "}).to_string(),
            json!({"title": "two\nlines"}).to_string(),
            json!({"title": "red\u{1b}[31m"}).to_string(),
            json!({"title": long}).to_string(),
            json!({"title": 5}).to_string(),
            json!({"name": "x"}).to_string(),
            json!({"title": "ok", "extra": 1}).to_string(),
            "not json".to_string(),
        ] {
            let (status, answer) = patch_with_key(&svc, &svc.key, &s, &body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {body} → {answer}");
            assert_eq!(answer["error"]["code"], json!("invalid_request"), "{name}");
        }
        assert_eq!(listed_title(&svc, &s).await, json!("hello there"), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn titling_an_unknown_deleted_or_foreign_session_is_not_found() {
    for (name, backend) in backends().await {
        let (svc, other) = start_on(&backend).await;
        let title = json!({"title": "mine"}).to_string();
        let (status, body) = patch_with_key(&svc, &svc.key, &session(), &title).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("session_not_found"), "{name}");

        let s = session();
        svc.send_text(&s, "hello").await;
        let (status, body) = patch_with_key(&svc, &other, &s, &title).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(listed_title(&svc, &s).await, json!("hello"), "{name}");

        let (status, _) = svc.delete(&s).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let (status, body) = patch_with_key(&svc, &svc.key, &s, &title).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
    }
}

async fn undo(svc: &Svc, key: &str, session: &str) -> (StatusCode, Value) {
    let resp = svc
        .http
        .delete(svc.url(&format!("/v1/sessions/{session}/messages/last")))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    json(resp).await
}

/// The (role, content) of the stored history.
async fn history(svc: &Svc, session: &str) -> Vec<(String, String)> {
    let (status, body) = svc.get(&format!("/v1/sessions/{session}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn undo_removes_the_last_user_message_and_its_reply_until_none_is_left() {
    for (name, backend) in backends().await {
        let (svc, other) = start_on(&backend).await;
        let s = session();
        let first = svc.send_text(&s, "first question").await;
        let second = svc.send_text(&s, "second question").await;
        let before = history(&svc, &s).await;
        assert_eq!(before.len(), 4, "{name}");

        // Another account's session is not found, and keeps its messages.
        let (status, body) = undo(&svc, &other, &s).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("session_not_found"), "{name}");

        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["sessionId"], json!(s), "{name}");
        let removed = body["removedMessageIds"].as_array().unwrap();
        assert_eq!(removed.len(), 2, "{name}: {body}");
        assert_eq!(
            removed[1], second["messageId"],
            "{name}: the reply goes too"
        );
        assert_eq!(history(&svc, &s).await, before[..2].to_vec(), "{name}");

        // The session goes on from what is left.
        let third = svc.send_text(&s, "third question").await;
        assert_eq!(history(&svc, &s).await.len(), 4, "{name}");
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["removedMessageIds"][1], third["messageId"], "{name}");
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["removedMessageIds"][1], first["messageId"], "{name}");
        assert!(history(&svc, &s).await.is_empty(), "{name}");

        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("message_not_found"), "{name}");
        let (status, body) = undo(&svc, &svc.key, &session()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("session_not_found"), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn undo_is_refused_while_a_reply_streams_and_allowed_once_it_is_stored() {
    for (name, backend) in backends().await {
        let mut config = backend.config();
        // Slow enough that the reply is still streaming when the undo arrives.
        config.engine = EngineConfig::Builtin { pace_ms: 30 };
        let svc = start_with(config.clone()).await;
        let s = session();
        let (status, accepted) = svc
            .post(&s, json!({"content": "tell me a story", "stream": true}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{name}: {accepted}");
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("reply_in_progress"), "{name}");
        if let Backend::Postgres(_) = backend {
            // Another replica, which does not hold the turn's lock, finds it in `turns`.
            let replica = start_with(config.clone()).await;
            let (status, body) = undo(&replica, &replica.key, &s).await;
            assert_eq!(status, StatusCode::CONFLICT, "{name} replica: {body}");
            assert_eq!(body["error"]["code"], json!("reply_in_progress"), "{name}");
        }
        assert_eq!(history(&svc, &s).await.len(), 1, "{name}: nothing removed");

        let deadline = tokio::time::Instant::now() + GUARD;
        while history(&svc, &s).await.len() < 2 {
            assert!(tokio::time::Instant::now() < deadline, "{name}: no reply");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert!(history(&svc, &s).await.is_empty(), "{name}");
    }
}
