//! Fork, edit and undo through the client (`Client::fork`, `Client::undo`) against the local
//! service started in-process, on SQLite and on PostgreSQL; and against servers without the
//! extensions or with a reply streaming.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use convo_client::api::{
    ApiError, Client, ClientOptions, Message, Role, SendMessage, new_idempotency_key,
    new_session_id,
};
use convo_service::RunningService;
use serde_json::{Value, json};

use super::support;
use crate::backends::Backend;

async fn start(backend: &Backend) -> (RunningService, Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let svc = convo_service::start(backend.config(), addr)
        .await
        .expect("service starts");
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    o.max_retries = 1;
    (svc, Client::new(o).unwrap())
}

async fn say(client: &Client, session: &str, text: &str) {
    let body = SendMessage {
        content: text.into(),
        role: None,
        stream: None,
        metadata: None,
    };
    client
        .send_message(session, &body, &new_idempotency_key())
        .await
        .expect("sent");
}

async fn history(client: &Client, session: &str) -> Vec<Message> {
    client.session_messages(session).await.unwrap().unwrap()
}

fn texts(messages: &[Message]) -> Vec<(Role, String)> {
    messages
        .iter()
        .map(|m| (m.role, m.content.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn fork_at_a_user_or_an_assistant_message_edit_and_undo_on_both_stores() {
    for (name, backend) in [
        ("SQLite", Backend::sqlite().await),
        ("PostgreSQL", Backend::postgres().await),
    ] {
        let (_svc, client) = start(&backend).await;
        let source = new_session_id();
        say(&client, &source, "first question").await;
        say(&client, &source, "second question").await;
        let full = history(&client, &source).await;
        assert_eq!(full.len(), 4, "{name}");

        // At the assistant's last reply: the whole history, the origin named.
        let at_reply = new_session_id();
        let summary = client
            .fork(&source, &full[3].message_id, &at_reply)
            .await
            .unwrap()
            .expect("the service forks");
        assert_eq!(summary.session_id, at_reply, "{name}");
        assert_eq!(summary.message_count, 4, "{name}");
        let origin = summary.forked_from.expect("forkedFrom");
        assert_eq!(
            (origin.session_id.as_str(), origin.message_id.as_str()),
            (source.as_str(), full[3].message_id.as_str()),
            "{name}"
        );
        assert_eq!(
            texts(&history(&client, &at_reply).await),
            texts(&full),
            "{name}"
        );

        // At the second user message: up to and including it.
        let at_user = new_session_id();
        let summary = client
            .fork(&source, &full[2].message_id, &at_user)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(summary.message_count, 3, "{name}");
        assert_eq!(
            texts(&history(&client, &at_user).await),
            texts(&full[..3]),
            "{name}"
        );

        // An edit of the second question: a fork just before it, then the new text sent.
        let edited = new_session_id();
        client
            .fork(&source, &full[1].message_id, &edited)
            .await
            .unwrap()
            .unwrap();
        say(&client, &edited, "second question, better").await;
        let after = history(&client, &edited).await;
        assert_eq!(texts(&after[..2]), texts(&full[..2]), "{name}");
        assert_eq!(after[2].content, "second question, better", "{name}");
        assert_eq!(
            texts(&history(&client, &source).await),
            texts(&full),
            "{name}: untouched"
        );

        // The same new id again: taken.
        let again = client.fork(&source, &full[0].message_id, &edited).await;
        assert_eq!(again.unwrap_err().code(), "session_exists", "{name}");
        // An unknown message, an unknown session: their errors, not "unsupported".
        let e = client.fork(&source, "msg_nope", &new_session_id()).await;
        assert_eq!(e.unwrap_err().code(), "message_not_found", "{name}");
        let e = client
            .fork(&new_session_id(), &full[0].message_id, &new_session_id())
            .await;
        assert!(
            matches!(e, Err(ApiError::SessionNotFound { .. })),
            "{name}: {e:?}"
        );

        // Undo: the last exchange goes, twice, then there is nothing left to undo.
        let undone = client
            .undo(&source)
            .await
            .unwrap()
            .expect("the service undoes");
        assert_eq!(undone.session_id, source, "{name}");
        assert_eq!(
            undone.removed_message_ids,
            vec![full[2].message_id.clone(), full[3].message_id.clone()],
            "{name}"
        );
        assert_eq!(
            texts(&history(&client, &source).await),
            texts(&full[..2]),
            "{name}"
        );
        client.undo(&source).await.unwrap().unwrap();
        assert!(history(&client, &source).await.is_empty(), "{name}");
        let e = client.undo(&source).await.unwrap_err();
        assert_eq!(e.code(), "message_not_found", "{name}");
        let e = client.undo(&new_session_id()).await;
        assert!(
            matches!(e, Err(ApiError::SessionNotFound { .. })),
            "{name}: {e:?}"
        );
    }
}

#[tokio::test]
async fn a_server_without_the_extensions_answers_none_and_a_streaming_reply_is_typed() {
    // Nothing but 404s (and a 405 for undo): the client says the server cannot.
    let bare = support::serve(Router::new().route(
        "/v1/sessions/{id}/messages/last",
        post(|| async { StatusCode::OK }),
    ))
    .await;
    let client = support::client(&bare);
    let fork = client
        .fork(support::SESSION, "msg_1", &new_session_id())
        .await;
    assert_eq!(fork.unwrap(), None);
    assert_eq!(client.undo(support::SESSION).await.unwrap(), None, "405");

    let busy = support::serve(Router::new().route(
        "/v1/sessions/{id}/messages/last",
        delete(|| async {
            (
                StatusCode::CONFLICT,
                axum::Json(serde_json::json!({"error": {
                    "code": "reply_in_progress",
                    "message": "a reply is being generated in this session; undo once it is complete"
                }})),
            )
        }),
    ))
    .await;
    let e = support::client(&busy)
        .undo(support::SESSION)
        .await
        .unwrap_err();
    assert!(matches!(e, ApiError::ReplyInProgress { .. }), "{e:?}");
    assert_eq!(e.code(), "reply_in_progress");
    assert_eq!(e.exit_code(), 1);
}

/// A server whose first fork makes the session but whose answer is lost (a proxy's 502), and
/// whose every later fork finds the id taken (409 `session_exists`); `GET /v1/sessions` lists
/// the session made as forked from `support::SESSION` at `origin_message`. The count of forks.
async fn losing_the_first_fork_answer(
    origin_message: &'static str,
) -> (url::Url, support::Counter) {
    let made = Arc::new(Mutex::new(None::<String>));
    let forks = support::Counter::default();
    let fork = {
        let (made, forks) = (made.clone(), forks.clone());
        move |Json(body): Json<Value>| async move {
            if forks.bump() == 0 {
                *made.lock().unwrap() = body["sessionId"].as_str().map(String::from);
                return (StatusCode::BAD_GATEWAY, "<html>502 Bad Gateway</html>").into_response();
            }
            let taken = json!({"error": {"code": "session_exists", "message": "already exists"}});
            (StatusCode::CONFLICT, Json(taken)).into_response()
        }
    };
    let list = move || async move {
        let id = made
            .lock()
            .unwrap()
            .clone()
            .expect("listed after the first fork");
        Json(json!({"sessions": [{
            "sessionId": id,
            "createdAt": "2026-11-26T00:00:00Z",
            "lastActivityAt": "2026-11-26T00:00:00Z",
            "messageCount": 1,
            "tokens": 3,
            "title": "hello",
            "forkedFrom": {"sessionId": support::SESSION, "messageId": origin_message},
        }]}))
    };
    let router = Router::new()
        .route("/v1/sessions/{id}/fork", post(fork))
        .route("/v1/sessions", get(list));
    (support::serve(router).await, forks)
}

#[tokio::test]
async fn a_fork_whose_answer_was_lost_is_the_answer_to_its_retry() {
    let (base, forks) = losing_the_first_fork_answer("msg_1").await;
    let new_id = new_session_id();
    let summary = support::client(&base)
        .fork(support::SESSION, "msg_1", &new_id)
        .await
        .expect("the fork made by the first attempt")
        .expect("the server forks");
    assert_eq!(forks.get(), 2, "retried once after the 502");
    assert_eq!(summary.session_id, new_id);
    let origin = summary.forked_from.expect("forkedFrom");
    assert_eq!(
        (origin.session_id.as_str(), origin.message_id.as_str()),
        (support::SESSION, "msg_1")
    );
}

#[tokio::test]
async fn a_taken_id_that_is_not_this_fork_stays_a_conflict() {
    // The session by that id was forked at another message: not this fork.
    let (base, forks) = losing_the_first_fork_answer("msg_2").await;
    let e = support::client(&base)
        .fork(support::SESSION, "msg_1", &new_session_id())
        .await
        .unwrap_err();
    assert_eq!(forks.get(), 2);
    assert_eq!(e.code(), "session_exists", "{e:?}");
}
