//! The session extensions of issue 27, each case on SQLite and on PostgreSQL: the title
//! (`PATCH /v1/sessions/{id}`, `title` in `GET /v1/sessions`), undo
//! (`DELETE /v1/sessions/{id}/messages/last`) and fork (`POST /v1/sessions/{id}/fork`).

use convo_client::api::StreamEvent;
use convo_service::{EngineConfig, Tier, generate_api_key};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::backends::Backend;
use super::common::{Svc, json, next_json, session, start_with, until_end};

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

/// A service of two accounts (`start_on`) on each backend: its name, the service, the other
/// key, and the backend, which must live as long as the service.
async fn services() -> Vec<(&'static str, Svc, String, Backend)> {
    let mut started = Vec::new();
    for (name, backend) in backends().await {
        let (svc, other) = start_on(&backend).await;
        started.push((name, svc, other, backend));
    }
    started
}

/// `method path` with `key`, and `body` as JSON when there is one: the status and the answer.
async fn call(
    svc: &Svc,
    key: &str,
    method: Method,
    path: &str,
    body: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = svc.http.request(method, svc.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    json(request.send().await.expect("request")).await
}

async fn patch_with_key(svc: &Svc, key: &str, session: &str, body: &str) -> (StatusCode, Value) {
    let path = format!("/v1/sessions/{session}");
    call(svc, key, Method::PATCH, &path, Some(body)).await
}

async fn patch(svc: &Svc, session: &str, body: Value) -> (StatusCode, Value) {
    patch_with_key(svc, &svc.key, session, &body.to_string()).await
}

/// The title `GET /v1/sessions` lists for `session`.
async fn listed_title(svc: &Svc, session: &str) -> Value {
    svc.listed(session).await["title"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_is_titled_by_its_first_user_message_until_one_is_set() {
    for (name, svc, _, _backend) in services().await {
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
    for (name, svc, _, _backend) in services().await {
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
    for (name, svc, other, _backend) in services().await {
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
    let path = format!("/v1/sessions/{session}/messages/last");
    call(svc, key, Method::DELETE, &path, None).await
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
    for (name, svc, other, _backend) in services().await {
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

        // Once the stream says the reply is done, the session is free: an undo at once goes
        // through, also while the account's stream is watched (the session's summary read
        // for it after the reply is not under the session's lock).
        let _account = svc.ws_at("/v1/stream", &svc.key).await;
        let mut ws = svc.ws(&s).await;
        let reply_id = accepted["messageId"].as_str().expect("the reply's id");
        let end = until_end(&mut ws, reply_id).await;
        assert!(
            matches!(end.last(), Some(StreamEvent::Done { .. })),
            "{name}: {end:?}"
        );
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert!(history(&svc, &s).await.is_empty(), "{name}");
    }
}

/// A send with an `Idempotency-Key`: its status, body and whether it was a replay.
async fn send_keyed(svc: &Svc, session: &str, body: Value, key: &str) -> (StatusCode, Value, bool) {
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{session}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", key)
        .json(&body)
        .send()
        .await
        .expect("request");
    let replayed = resp.headers().get("idempotent-replayed").is_some();
    let (status, body) = json(resp).await;
    (status, body, replayed)
}

/// A send retried with its `Idempotency-Key` after its exchange was undone (its answer lost,
/// say) is told so with 409 `exchange_undone`: the removed reply is not replayed and the
/// message is not sent again. The key of an exchange that stays still replays its reply; a
/// new key sends again. The same for a streamed send, whose recorded answer is its 202.
#[tokio::test(flavor = "multi_thread")]
async fn a_send_retried_after_its_exchange_was_undone_is_refused_not_replayed() {
    for (name, svc, _, _backend) in services().await {
        let s = session();
        let kept_question = json!({"content": "kept question"});
        let undone_question = json!({"content": "undone question"});
        let (status, kept, _) = send_keyed(&svc, &s, kept_question.clone(), "key-kept").await;
        assert_eq!(status, StatusCode::OK, "{name}: {kept}");
        let (status, body, _) = send_keyed(&svc, &s, undone_question.clone(), "key-undone").await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let left = history(&svc, &s).await;
        assert_eq!(left.len(), 2, "{name}");

        let (status, body, replayed) =
            send_keyed(&svc, &s, undone_question.clone(), "key-undone").await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("exchange_undone"), "{name}");
        assert!(replayed, "{name}: the key's answer");
        assert_eq!(history(&svc, &s).await, left, "{name}: nothing sent again");

        let (status, body, replayed) = send_keyed(&svc, &s, kept_question, "key-kept").await;
        assert_eq!((status, &body), (StatusCode::OK, &kept), "{name}");
        assert!(replayed, "{name}");

        // Streamed: the 202 is what the key remembers.
        let streamed = json!({"content": "streamed question", "stream": true});
        let mut ws = svc.ws(&s).await;
        let (status, body, _) = send_keyed(&svc, &s, streamed.clone(), "key-streamed").await;
        assert_eq!(status, StatusCode::ACCEPTED, "{name}: {body}");
        let reply_id = body["messageId"].as_str().expect("the reply's id");
        until_end(&mut ws, reply_id).await;
        let (status, body) = undo(&svc, &svc.key, &s).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let (status, body, _) = send_keyed(&svc, &s, streamed, "key-streamed").await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("exchange_undone"), "{name}");
        assert_eq!(history(&svc, &s).await, left, "{name}: nothing sent again");

        // A new key sends the message again.
        let (status, body, replayed) = send_keyed(&svc, &s, undone_question, "key-new").await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert!(!replayed, "{name}");
        assert_eq!(history(&svc, &s).await.len(), 4, "{name}");
    }
}

async fn fork_with_key(svc: &Svc, key: &str, source: &str, body: &str) -> (StatusCode, Value) {
    let path = format!("/v1/sessions/{source}/fork");
    call(svc, key, Method::POST, &path, Some(body)).await
}

async fn fork(svc: &Svc, source: &str, body: Value) -> (StatusCode, Value) {
    fork_with_key(svc, &svc.key, source, &body.to_string()).await
}

/// The ids of the stored history.
async fn message_ids(svc: &Svc, session: &str) -> Vec<String> {
    let (_, body) = svc.get(&format!("/v1/sessions/{session}/messages")).await;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["messageId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_at_a_user_or_an_assistant_message_copies_the_history_up_to_it() {
    for (name, svc, _, _backend) in services().await {
        let source = session();
        svc.send_text(&source, "first question").await;
        svc.send_text(&source, "second question").await;
        let ids = message_ids(&svc, &source).await;
        let full = history(&svc, &source).await;
        let usage = svc.usage().await;

        // At the second user message: three messages, a new id, the first message's title.
        let (status, body) = fork(&svc, &source, json!({"messageId": ids[2]})).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
        let at_user = body["sessionId"].as_str().unwrap().to_string();
        assert_ne!(at_user, source, "{name}");
        assert_eq!(body["messageCount"], json!(3), "{name}");
        assert_eq!(body["title"], json!("first question"), "{name}");
        assert_eq!(
            body["forkedFrom"],
            json!({"sessionId": source, "messageId": ids[2]}),
            "{name}: the origin, in the source's ids"
        );
        assert_eq!(history(&svc, &at_user).await, full[..3].to_vec(), "{name}");
        let copied = message_ids(&svc, &at_user).await;
        assert!(copied.iter().all(|id| !ids.contains(id)), "{name}: new ids");

        // At the last assistant message, under an id the client chose.
        let chosen = session();
        let (status, body) = fork(
            &svc,
            &source,
            json!({"messageId": ids[3], "sessionId": chosen}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
        assert_eq!(body["sessionId"], json!(chosen), "{name}");
        assert_eq!(history(&svc, &chosen).await, full, "{name}");

        // Counted as sessions, their tokens not charged again; the source is untouched.
        let after = svc.usage().await;
        assert!(
            usage["tokens"]["used"].as_u64().unwrap() > 0,
            "{name}: {usage}"
        );
        assert_eq!(after["tokens"], usage["tokens"], "{name}: {after}");
        assert_eq!(
            after["sessions"]["active"].as_u64(),
            usage["sessions"]["active"].as_u64().map(|n| n + 2),
            "{name}: {after}"
        );
        assert_eq!(history(&svc, &source).await, full, "{name}");

        // A fork goes on by itself.
        svc.send_text(&at_user, "another second question").await;
        assert_eq!(history(&svc, &at_user).await.len(), 5, "{name}");
        assert_eq!(history(&svc, &source).await, full, "{name}");
    }
}

/// A session of one exchange and a fork of it at its reply (`name`d for the assertions): the
/// source, the ids of its messages, and the fork.
async fn source_and_fork(svc: &Svc, name: &str) -> (String, Vec<String>, String) {
    let source = session();
    svc.send_text(&source, "first question").await;
    let ids = message_ids(svc, &source).await;
    let (status, body) = fork(svc, &source, json!({"messageId": ids[1]})).await;
    assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
    let forked = body["sessionId"].as_str().unwrap().to_string();
    (source, ids, forked)
}

/// A deleted session's row stays as its tombstone (`deletedSessionIds` names it) and keeps
/// nothing the user gave the session: neither its title nor where it was forked from.
#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_sessions_tombstone_keeps_neither_its_title_nor_its_origin() {
    for (name, svc, _, backend) in services().await {
        let (source, ids, forked) = source_and_fork(&svc, name).await;
        svc.set_title(&forked, "Private plans").await;
        let row = "SELECT COALESCE(title, '-') || ' ' || COALESCE(forked_from_session, '-')
                       || ' ' || COALESCE(forked_from_message, '-')
                   FROM sessions WHERE id = $1";
        assert_eq!(
            backend.texts(row, &forked).await,
            [[format!("Private plans {source} {}", ids[1])]],
            "{name}: stored first"
        );

        assert_eq!(svc.delete(&forked).await.0, StatusCode::OK, "{name}");
        assert_eq!(backend.texts(row, &forked).await, [["- - -"]], "{name}");
        let (_, list) = svc.get("/v1/sessions").await;
        assert_eq!(list["deletedSessionIds"], json!([forked]), "{name}: {list}");
        assert_eq!(
            history(&svc, &source).await.len(),
            2,
            "{name}: the source stays"
        );
    }
}

/// On PostgreSQL, forks of a session, first sends of new sessions, a send to the source,
/// deletes of earlier sessions, and forks of a session deleted at that moment, all of one
/// account and all at once, round after round: each answers as it would alone, never with a
/// 500 (what a deadlock between their row locks would give), and a fork of the session being
/// deleted is either its whole history or `session_not_found`, never a part of it (a fork
/// copying a source that changed under it).
#[tokio::test(flavor = "multi_thread")]
async fn forks_first_sends_and_deletes_of_one_account_at_once_on_postgresql_never_fail() {
    use futures_util::future::join_all;
    let backend = Backend::postgres().await;
    let mut config = backend.config();
    config.api_keys = vec![(generate_api_key(), Tier::Enterprise)];
    let svc = start_with(config).await;
    let source = session();
    svc.send_text(&source, "first question").await;
    svc.send_text(&source, "second question").await;
    let ids = message_ids(&svc, &source).await;
    let mut made: Vec<String> = Vec::new();
    for round in 0..40 {
        let doomed = session();
        svc.send_text(&doomed, "a question").await;
        svc.send_text(&doomed, "a last question").await;
        let last = message_ids(&svc, &doomed).await.pop().unwrap();
        let forks = ids
            .iter()
            .map(|id| fork(&svc, &source, json!({"messageId": id})));
        let doomed_forks = (0..3).map(|_| fork(&svc, &doomed, json!({"messageId": last})));
        let firsts: Vec<String> = (0..4).map(|_| session()).collect();
        let sends = firsts
            .iter()
            .map(|s| svc.post(s, json!({"content": "a new session"})));
        let gone: Vec<String> = made.drain(..made.len().min(4)).collect();
        let deletes = gone.iter().map(|s| svc.delete(s));
        let (forks, doomed_forks, sends, deletes, more, doomed_deleted) = tokio::join!(
            join_all(forks),
            join_all(doomed_forks),
            join_all(sends),
            join_all(deletes),
            svc.post(&source, json!({"content": "and another question"})),
            svc.delete(&doomed),
        );
        for (status, body) in forks {
            assert_eq!(status, StatusCode::CREATED, "round {round}, fork: {body}");
            made.push(body["sessionId"].as_str().unwrap().to_string());
        }
        for (status, body) in doomed_forks {
            match status {
                StatusCode::CREATED => {
                    assert_eq!(body["messageCount"], json!(4), "round {round}: {body}");
                    made.push(body["sessionId"].as_str().unwrap().to_string());
                }
                StatusCode::NOT_FOUND => {
                    assert_eq!(body["error"]["code"], json!("session_not_found"), "{body}")
                }
                _ => panic!("round {round}, fork of a session being deleted: {status} {body}"),
            }
        }
        let others = sends.into_iter().chain(deletes);
        for (status, body) in others.chain([more, doomed_deleted]) {
            assert_eq!(status, StatusCode::OK, "round {round}: {body}");
        }
        made.extend(firsts);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_of_an_unknown_session_or_message_or_onto_a_taken_id_is_refused() {
    for (name, svc, other, _backend) in services().await {
        let source = session();
        svc.send_text(&source, "hello").await;
        let ids = message_ids(&svc, &source).await;
        let elsewhere = session();
        svc.send_text(&elsewhere, "elsewhere").await;
        let foreign = message_ids(&svc, &elsewhere).await;
        let gone = session();
        svc.send_text(&gone, "soon deleted").await;
        assert_eq!(svc.delete(&gone).await.0, StatusCode::OK, "{name}");
        let before = svc.get("/v1/sessions").await.1;

        for (source, body, status, code) in [
            (
                session(),
                json!({"messageId": ids[0]}),
                404,
                "session_not_found",
            ),
            (
                gone.clone(),
                json!({"messageId": ids[0]}),
                404,
                "session_not_found",
            ),
            (
                source.clone(),
                json!({"messageId": "msg_nope"}),
                404,
                "message_not_found",
            ),
            (
                source.clone(),
                json!({"messageId": foreign[0]}),
                404,
                "message_not_found",
            ),
            (
                source.clone(),
                json!({"messageId": ids[0], "sessionId": elsewhere}),
                409,
                "session_exists",
            ),
            (
                source.clone(),
                json!({"messageId": ids[0], "sessionId": source}),
                409,
                "session_exists",
            ),
            (
                source.clone(),
                json!({"messageId": ids[0], "sessionId": gone}),
                409,
                "session_exists",
            ),
            (
                source.clone(),
                json!({"messageId": ids[0], "sessionId": "s1"}),
                400,
                "invalid_request",
            ),
            (
                source.clone(),
                json!({"sessionId": session()}),
                400,
                "invalid_request",
            ),
            (
                source.clone(),
                json!({"messageId": 7}),
                400,
                "invalid_request",
            ),
        ] {
            let (got, answer) = fork(&svc, &source, body.clone()).await;
            assert_eq!(got.as_u16(), status, "{name}: {body} → {answer}");
            assert_eq!(answer["error"]["code"], json!(code), "{name}: {body}");
        }
        // Another account's session is not found.
        let body = json!({"messageId": ids[0]}).to_string();
        let (got, answer) = fork_with_key(&svc, &other, &source, &body).await;
        assert_eq!(got, StatusCode::NOT_FOUND, "{name}: {answer}");
        assert_eq!(
            svc.get("/v1/sessions").await.1,
            before,
            "{name}: nothing made"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_at_the_session_limit_is_refused_like_a_new_session() {
    for (name, backend) in backends().await {
        let mut config = backend.config();
        config.api_keys = vec![(generate_api_key(), Tier::Free)];
        let svc = start_with(config).await;
        let limit = Tier::Free.limits().sessions as usize;
        let sessions: Vec<String> = (0..limit).map(|_| session()).collect();
        for s in &sessions {
            svc.send_text(s, "hi").await;
        }
        let ids = message_ids(&svc, &sessions[0]).await;
        let (status, body) = fork(&svc, &sessions[0], json!({"messageId": ids[1]})).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{name}: {body}");
        assert_eq!(body["error"]["code"], json!("quota_exceeded"), "{name}");
        assert_eq!(body["error"]["limit"], json!("sessions"), "{name}: {body}");

        assert_eq!(svc.delete(&sessions[limit - 1]).await.0, StatusCode::OK);
        let (status, body) = fork(&svc, &sessions[0], json!({"messageId": ids[1]})).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
    }
}

/// `forkedFrom` of `session` as `GET /v1/sessions` lists it.
async fn listed_origin(svc: &Svc, session: &str) -> Value {
    svc.listed(session)
        .await
        .get("forkedFrom")
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_lists_its_origin_also_after_a_title_and_the_sources_delete() {
    for (name, svc, _, _backend) in services().await {
        let (source, ids, forked) = source_and_fork(&svc, name).await;
        let origin = json!({"sessionId": source, "messageId": ids[1]});

        assert_eq!(listed_origin(&svc, &forked).await, origin, "{name}");
        assert_eq!(
            listed_origin(&svc, &source).await,
            Value::Null,
            "{name}: not a fork, no field"
        );
        let (status, body) = patch(&svc, &forked, json!({"title": "the other way"})).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(body["forkedFrom"], origin, "{name}: PATCH answers it too");

        // A fork of a fork names its own source.
        let again = message_ids(&svc, &forked).await;
        let (status, body) = fork(&svc, &forked, json!({"messageId": again[0]})).await;
        assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
        assert_eq!(
            body["forkedFrom"],
            json!({"sessionId": forked, "messageId": again[0]}),
            "{name}"
        );

        // The source deleted: the fork still says where it came from.
        let (status, body) = svc.delete(&source).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        assert_eq!(listed_origin(&svc, &forked).await, origin, "{name}");
    }
}

/// `GET /v1/sessions` and the account stream's `hello` say the id of the database: the same
/// after a restart on it, another for another database (`databaseId`, docs/service.md).
async fn the_database_id_is_kept_by_its_database_and_differs_between_databases(backend: Backend) {
    let id_of = |list: &Value| {
        let id = list["databaseId"].as_str().unwrap_or_default().to_string();
        assert!(id.starts_with("db_") && id.len() >= 27, "{list}");
        id
    };
    let svc = start_with(backend.config()).await;
    let (status, list) = svc.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let first = id_of(&list);
    // Every answer says it too, a refusal included.
    for path in [
        "/v1/analytics/usage",
        "/v1/sessions/session_nonesuch00000000/messages",
    ] {
        let answer = svc
            .http
            .get(svc.url(path))
            .bearer_auth(&svc.key)
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.headers()[convo_wire::sessions::DATABASE_ID_HEADER],
            first.as_str(),
            "{path}"
        );
    }
    let mut ws = svc.ws_at("/v1/stream", &svc.key).await;
    let hello: Value = next_json(&mut ws).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    assert_eq!(hello["databaseId"], first.as_str(), "{hello}");
    drop(ws);
    svc.service.shutdown().await;
    let again = start_with(backend.config()).await;
    assert_eq!(id_of(&again.get("/v1/sessions").await.1), first);
    again.service.shutdown().await;
    let other = match backend {
        Backend::Sqlite(_) => Backend::sqlite().await,
        Backend::Postgres(_) => Backend::postgres().await,
    };
    let elsewhere = start_with(other.config()).await;
    assert_ne!(id_of(&elsewhere.get("/v1/sessions").await.1), first);
    elsewhere.service.shutdown().await;
}

crate::on_both_backends!(the_database_id_is_kept_by_its_database_and_differs_between_databases);

/// A whole list names the sessions deleted lately beside the live ones (`deletedSessionIds`,
/// most recent first), in `GET /v1/sessions` and in the account stream's `hello`, so that a
/// client erases only what was deleted and keeps what the list lacks for another reason.
async fn a_whole_list_names_the_sessions_deleted_lately(backend: Backend) {
    let (svc, other) = start_on(&backend).await;
    let ids = [
        "session_LIVELIVELIVELIVE",
        "session_GONE1GONE1GONE1G",
        "session_GONE2GONE2GONE2G",
    ];
    for id in ids {
        let (status, body) = svc.post(id, json!({"content": "hello"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, list) = svc.get("/v1/sessions").await;
    assert_eq!(list["deletedSessionIds"], json!([]), "{list}");
    for id in &ids[1..] {
        assert_eq!(svc.delete(id).await.0, StatusCode::OK);
        // Deletion times a millisecond apart at least, for the order.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let (_, list) = svc.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["deletedSessionIds"], json!([ids[2], ids[1]]), "{list}");
    let mut ws = svc.ws_at("/v1/stream", &svc.key).await;
    let hello: Value = next_json(&mut ws).await;
    assert_eq!(
        hello["deletedSessionIds"], list["deletedSessionIds"],
        "{hello}"
    );
    // Another account's deletions are not named.
    let (_, theirs) = svc.get_with_key("/v1/sessions", &other).await;
    assert_eq!(theirs["deletedSessionIds"], json!([]), "{theirs}");
    svc.service.shutdown().await;
}

crate::on_both_backends!(a_whole_list_names_the_sessions_deleted_lately);
