//! The session extensions of issue 27, each case on SQLite and on PostgreSQL: the title
//! (`PATCH /v1/sessions/{id}`, `title` in `GET /v1/sessions`).

use convo_service::{Tier, generate_api_key};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::Backend;
use super::common::{Svc, json, session, start_with};

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
