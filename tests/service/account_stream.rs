//! The account stream, `GET /v1/stream` (docs/service.md, "The account stream"): a `hello`
//! first, then an event for each change to the account's sessions (a send, a reply, a title,
//! a fork, an undo, a delete) and its usage, on SQLite and PostgreSQL; across two PostgreSQL
//! replicas a change made on one reaches a listener on the other, and after the relay was cut
//! and healed (`pg_proxy.rs`) the listener gets a fresh `hello`.

use convo_service::{DbLocation, ServiceConfig, Tier, generate_api_key};
use convo_wire::account_stream::{AccountEvent, SessionChange};
use convo_wire::sessions::SessionList;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::backends::{Backend, TestDb};
use super::common::{GUARD, Svc, Ws, close, json, next_json, session, start_with, until_end};
use super::pg_proxy::{PgProxy, eventually};

async fn account_ws(svc: &Svc, key: &str) -> Ws {
    svc.ws_at("/v1/stream", key).await
}

/// The next account event (pings skipped).
async fn next(ws: &mut Ws) -> AccountEvent {
    next_json(ws).await
}

/// Reads until an event other than `usage`; the `usage` events read on the way are counted.
async fn next_change(ws: &mut Ws, usages: &mut usize) -> AccountEvent {
    loop {
        match next(ws).await {
            AccountEvent::Usage { .. } => *usages += 1,
            other => return other,
        }
    }
}

fn created_id(event: &AccountEvent) -> &str {
    match event {
        AccountEvent::SessionCreated { session } => &session.session_id,
        other => panic!("expected session.created, got {other:?}"),
    }
}

fn updated(event: &AccountEvent) -> (&str, SessionChange, u64) {
    match event {
        AccountEvent::SessionUpdated { session, change } => {
            (&session.session_id, *change, session.message_count)
        }
        other => panic!("expected session.updated, got {other:?}"),
    }
}

async fn request(
    svc: &Svc,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = svc
        .http
        .request(method, svc.url(path))
        .bearer_auth(&svc.key);
    if let Some(body) = body {
        req = req.json(&body);
    }
    json(req.send().await.expect("request")).await
}

async fn every_change_is_told(name: &str, backend: Backend) {
    let mut config = backend.config();
    let other = generate_api_key();
    config.api_keys = vec![(generate_api_key(), Tier::Pro), (other.clone(), Tier::Pro)];
    let svc = start_with(config).await;
    let mut ws = account_ws(&svc, &svc.key).await;
    let mut theirs = account_ws(&svc, &other).await;
    match next(&mut ws).await {
        AccountEvent::Hello {
            sessions, usage, ..
        } => {
            assert!(sessions.is_empty(), "{name}: {sessions:?}");
            assert_eq!(usage.requests.used, 1, "{name}: connecting counted once");
        }
        other => panic!("{name}: expected hello, got {other:?}"),
    }
    assert!(matches!(
        next(&mut theirs).await,
        AccountEvent::Hello { .. }
    ));
    let mut usages = 0;

    // A send: its first message creates the session, then the reply is stored.
    let sid = session();
    let reply = svc.send_text(&sid, "hello there, stream").await;
    let reply_id = reply["messageId"].as_str().unwrap().to_string();
    let created = next_change(&mut ws, &mut usages).await;
    assert_eq!(created_id(&created), sid, "{name}");
    if let AccountEvent::SessionCreated { session } = &created {
        assert_eq!(
            session.title.as_deref(),
            Some("hello there, stream"),
            "{name}"
        );
    }
    assert_eq!(
        updated(&next_change(&mut ws, &mut usages).await),
        (sid.as_str(), SessionChange::Message, 2),
        "{name}"
    );

    // A second message: the user's, then the reply. Each event is read when the listener
    // sends it, so the user message's may show the reply stored already.
    svc.send_text(&sid, "and again").await;
    let after_user = updated(&next_change(&mut ws, &mut usages).await).2;
    assert!(matches!(after_user, 3 | 4), "{name}: {after_user}");
    assert_eq!(
        updated(&next_change(&mut ws, &mut usages).await).2,
        4,
        "{name}"
    );

    // The title.
    let (status, body) = request(
        &svc,
        reqwest::Method::PATCH,
        &format!("/v1/sessions/{sid}"),
        Some(json!({"title": "Named"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{name}: {body}");
    match next_change(&mut ws, &mut usages).await {
        AccountEvent::SessionUpdated { session, change } => {
            assert_eq!(change, SessionChange::Title, "{name}");
            assert_eq!(session.title.as_deref(), Some("Named"), "{name}");
        }
        other => panic!("{name}: {other:?}"),
    }

    // A fork at the first reply.
    let (status, body) = request(
        &svc,
        reqwest::Method::POST,
        &format!("/v1/sessions/{sid}/fork"),
        Some(json!({"messageId": reply_id})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{name}: {body}");
    let fork = body["sessionId"].as_str().unwrap().to_string();
    assert_eq!(
        created_id(&next_change(&mut ws, &mut usages).await),
        fork,
        "{name}"
    );

    // Undo of the last exchange.
    let (status, body) = request(
        &svc,
        reqwest::Method::DELETE,
        &format!("/v1/sessions/{sid}/messages/last"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{name}: {body}");
    assert_eq!(
        updated(&next_change(&mut ws, &mut usages).await),
        (sid.as_str(), SessionChange::Undo, 2),
        "{name}"
    );

    // A delete.
    assert_eq!(svc.delete(&fork).await.0, StatusCode::OK, "{name}");
    match next_change(&mut ws, &mut usages).await {
        AccountEvent::SessionDeleted { session_id } => assert_eq!(session_id, fork, "{name}"),
        other => panic!("{name}: {other:?}"),
    }

    // Usage: pushed after the changes, the last one current.
    let (_, now) = svc.get("/v1/analytics/usage").await;
    let last = loop {
        match next(&mut ws).await {
            AccountEvent::Usage { usage } if usage.requests.used == now["requests"]["used"] => {
                break usage;
            }
            AccountEvent::Usage { .. } => {}
            other => panic!("{name}: only usage was left, got {other:?}"),
        }
    };
    assert_eq!(last.tokens.used, now["tokens"]["used"], "{name}");
    assert_eq!(last.sessions.active, now["sessions"]["active"], "{name}");

    // The other account heard none of it: its first change is its own.
    let (status, _) = svc
        .post_with_key(&other, &session(), json!({"content": "mine"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut ignored = 0;
    let theirs_first = next_change(&mut theirs, &mut ignored).await;
    assert_ne!(created_id(&theirs_first), sid, "{name}");
    assert_ne!(created_id(&theirs_first), fork, "{name}");

    close(ws).await;
    close(theirs).await;
    svc.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_told_on_sqlite() {
    every_change_is_told("SQLite", Backend::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_told_on_postgres() {
    every_change_is_told("PostgreSQL", Backend::postgres().await).await;
}

/// Changes to one session told at once (titles set by six clients while another sends
/// streamed messages, each the moment the last reply is done) reach the listener in the order
/// they were read: the session's last event is its state once everything is answered. Three
/// sessions one after the other. The race is rare: before the events were told in order, one
/// session in 63 tried (with more titles each, under two busy loops) ended on an event with an
/// older title. A session's signals (an event and a usage change per change, a usage change
/// per request: about 190) stay under what a listener may have waiting (256) before it is
/// sent a `hello` instead, so every event is read even if the listener falls behind.
async fn the_last_event_is_the_latest_state(name: &str, backend: Backend) {
    let svc = start_with(backend.config()).await;
    last_events_are_the_latest_state(name, &svc, &[&svc]).await;
    svc.service.shutdown().await;
}

/// The test above with the listener on `listener` and the changes made on `writers`: the
/// messages sent to the first, titler `t` on `writers[t % writers.len()]`.
async fn last_events_are_the_latest_state(name: &str, listener: &Svc, writers: &[&Svc]) {
    const ROUNDS: usize = 3;
    const SENDS: usize = 8;
    const TITLERS: usize = 6;
    const TITLES: usize = 8;
    let svc = writers[0];
    let mut ws = account_ws(listener, &listener.key).await;
    assert!(matches!(next(&mut ws).await, AccountEvent::Hello { .. }));
    for round in 0..ROUNDS {
        let sid = session();
        svc.send_text(&sid, "the first message").await;
        let mut titlers = Vec::new();
        for t in 0..TITLERS {
            let titler = writers[t % writers.len()];
            let (http, key) = (titler.http.clone(), titler.key.clone());
            let url = titler.url(&format!("/v1/sessions/{sid}"));
            titlers.push(tokio::spawn(async move {
                for i in 0..TITLES {
                    let resp = http
                        .patch(&url)
                        .bearer_auth(&key)
                        .json(&json!({"title": format!("title {t}.{i}")}))
                        .send()
                        .await
                        .expect("request");
                    assert_eq!(resp.status(), StatusCode::OK);
                }
            }));
        }
        let mut stream = svc.ws(&sid).await;
        for i in 0..SENDS {
            let (status, accepted) = svc
                .post(
                    &sid,
                    json!({"content": format!("message {i}"), "stream": true}),
                )
                .await;
            assert_eq!(status, StatusCode::ACCEPTED, "{name}: {accepted}");
            let reply_id = accepted["messageId"].as_str().expect("the reply's id");
            until_end(&mut stream, reply_id).await;
        }
        for titler in titlers {
            titler.await.expect("the titles are set");
        }
        close(stream).await;

        // One event per change: the first send's two, then two per send and one per title.
        let mut usages = 0;
        let mut last = None;
        for _ in 0..2 + 2 * SENDS + TITLERS * TITLES {
            last = Some(next_change(&mut ws, &mut usages).await);
        }
        let (status, list) = svc.get("/v1/sessions").await;
        assert_eq!(status, StatusCode::OK, "{name}: {list}");
        let stored: SessionList = serde_json::from_value(list).expect("a session list");
        let stored = stored.sessions.into_iter().find(|s| s.session_id == sid);
        match last {
            Some(AccountEvent::SessionUpdated { session, .. }) => {
                assert_eq!(session.message_count, 2 + 2 * SENDS as u64, "{name}");
                assert_eq!(stored, Some(session), "{name}: round {round}");
            }
            other => panic!("{name}: expected session.updated, got {other:?}"),
        }
    }
    close(ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_event_is_the_latest_state_on_sqlite() {
    the_last_event_is_the_latest_state("SQLite", Backend::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_event_is_the_latest_state_on_postgres() {
    the_last_event_is_the_latest_state("PostgreSQL", Backend::postgres().await).await;
}

/// Across replicas: the listener on one, the titles set on both, the messages sent to the
/// other; every change reaches the listener once, and its last event is the stored state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_event_is_the_latest_state_across_replicas() {
    let (_db, _proxy, a, b) = replicas().await;
    last_events_are_the_latest_state("two replicas", &b, &[&a, &b]).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

/// A change whose news is slow to come from another replica: a title set on `b` (whose link
/// to the database, the relay's included, delays what `b` sends), then another on `a` while
/// `b`'s news is still on its way; the listener is on `a`. Each replica once relayed its
/// events as it had read them, so `b`'s older title reached the listener after `a`'s own
/// event and stayed its last (every round on that build); each listener now reads the state
/// when it takes the signal, so its last event is the stored title.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_relayed_late_does_not_leave_a_listener_on_an_older_state() {
    const ROUNDS: usize = 3;
    let (_db, proxy, a, b) = replicas().await;
    let mut ws = account_ws(&a, &a.key).await;
    assert!(matches!(next(&mut ws).await, AccountEvent::Hello { .. }));
    let sid = session();
    a.send_text(&sid, "the first message").await;
    let mut usages = 0;
    for _ in 0..2 {
        next_change(&mut ws, &mut usages).await;
    }
    let set_title = |svc: &Svc, title: String| {
        let req = svc
            .http
            .patch(svc.url(&format!("/v1/sessions/{sid}")))
            .bearer_auth(&svc.key)
            .json(&json!({ "title": title }));
        async move {
            let (status, body) = json(req.send().await.expect("request")).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    };
    for round in 0..ROUNDS {
        proxy.slow_uploads(std::time::Duration::from_millis(300));
        set_title(&b, format!("b {round}")).await;
        set_title(&a, format!("a {round}")).await;
        let mut last = None;
        for _ in 0..2 {
            last = Some(next_change(&mut ws, &mut usages).await);
        }
        proxy.restore();
        match last {
            Some(AccountEvent::SessionUpdated { session, .. }) => {
                assert_eq!(
                    session.title.as_deref(),
                    Some(format!("a {round}").as_str())
                );
                let (status, list) = a.get("/v1/sessions").await;
                assert_eq!(status, StatusCode::OK, "{list}");
                let stored: SessionList = serde_json::from_value(list).expect("a session list");
                let stored = stored.sessions.into_iter().find(|s| s.session_id == sid);
                assert_eq!(stored, Some(session), "round {round}");
            }
            other => panic!("expected session.updated, got {other:?}"),
        }
    }
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_stream_needs_a_key_and_an_upgrade_and_closes_with_1001_on_shutdown() {
    let svc = start_with(ServiceConfig::ephemeral(0)).await;
    let resp = svc.http.get(svc.url("/v1/stream")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (status, body) = svc.get("/v1/stream").await;
    assert!(matches!(status.as_u16(), 400 | 426), "{status} {body}");
    assert_eq!(body["error"]["code"], "invalid_request");

    let mut ws = account_ws(&svc, &svc.key).await;
    assert!(matches!(next(&mut ws).await, AccountEvent::Hello { .. }));
    let stopping = tokio::spawn(async move { svc.service.shutdown().await });
    loop {
        let frame = tokio::time::timeout(GUARD, ws.next())
            .await
            .expect("the close in time");
        match frame {
            Some(Ok(WsMessage::Close(Some(frame)))) => {
                assert_eq!(u16::from(frame.code), 1001);
                break;
            }
            Some(Ok(WsMessage::Text(_) | WsMessage::Ping(_) | WsMessage::Pong(_))) => continue,
            other => panic!("expected a close 1001, got {other:?}"),
        }
    }
    drop(ws);
    stopping.await.unwrap();
}

/// Two replicas on one database: `a` directly, `b` through the proxy.
async fn replicas() -> (TestDb, PgProxy, Svc, Svc) {
    let db = TestDb::create().await;
    let proxy = PgProxy::start().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(db.url());
    let a = start_with(config.clone()).await;
    config.db = DbLocation::Postgres(proxy.url(&db.name));
    let b = start_with(config).await;
    (db, proxy, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_one_replica_reaches_a_listener_on_another_and_a_heal_brings_a_fresh_hello() {
    let (_db, proxy, a, b) = replicas().await;
    let mut ws = account_ws(&b, &b.key).await;
    assert!(matches!(next(&mut ws).await, AccountEvent::Hello { .. }));
    let mut usages = 0;

    let sid = session();
    a.send_text(&sid, "made on replica a").await;
    assert_eq!(created_id(&next_change(&mut ws, &mut usages).await), sid);
    assert_eq!(
        updated(&next_change(&mut ws, &mut usages).await),
        (sid.as_str(), SessionChange::Message, 2)
    );
    assert_eq!(a.delete(&sid).await.0, StatusCode::OK);
    match next_change(&mut ws, &mut usages).await {
        AccountEvent::SessionDeleted { session_id } => assert_eq!(session_id, sid),
        other => panic!("{other:?}"),
    }

    // b's relay is cut; a session made on a meanwhile is in b's next hello, once healed.
    proxy.cut();
    eventually(GUARD, "b notices its relay is gone", || async {
        let resp = b.http.get(b.url("/readyz")).send().await.expect("readyz");
        resp.status() == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    let during = session();
    a.send_text(&during, "made while b was away").await;
    proxy.restore();
    loop {
        match next_change(&mut ws, &mut usages).await {
            AccountEvent::Hello { sessions, .. } => {
                assert!(
                    sessions.iter().any(|s| s.session_id == during),
                    "the fresh hello has what changed meanwhile: {sessions:?}"
                );
                break;
            }
            // Told before the cut took hold.
            AccountEvent::SessionCreated { .. } | AccountEvent::SessionUpdated { .. } => {}
            other => panic!("expected a fresh hello, got {other:?}"),
        }
    }
    // And the relay carries changes again.
    let after = session();
    a.send_text(&after, "after the heal").await;
    loop {
        if let AccountEvent::SessionCreated { session } = next_change(&mut ws, &mut usages).await
            && session.session_id == after
        {
            break;
        }
    }
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}
