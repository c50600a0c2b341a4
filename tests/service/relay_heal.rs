//! The stream relay heals: two replicas in this process, one (`a`) on PostgreSQL directly,
//! the other (`b`) through a proxy the test cuts or holds (`pg_proxy.rs`). A reply generated on
//! `a` is followed by a listener on `b`; while `b`'s relay is down the listener gets a
//! `relay_unavailable` error, and once it is back the rest of the reply (a snapshot, then the
//! deltas and the `done`), or its outcome from the database, arrives exactly once. Also:
//! `/readyz` follows the database and the relay, and replies are relayed only to replicas with
//! a listener.

use std::time::Duration;

use convo_client::api::StreamEvent;
use convo_service::{EngineConfig, ServiceConfig};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::backends::TestDb;
use super::common::{GUARD, Svc, Ws, close, next_event, session, start_with, until_end};
use super::pg_proxy::{PgProxy, eventually};

/// `a` on the database directly, `b` through the proxy; same keys and secret.
async fn replicas(pace_ms: u64) -> (TestDb, PgProxy, Svc, Svc) {
    let db = TestDb::create().await;
    let proxy = PgProxy::start().await;
    let mut config = ServiceConfig::ephemeral(pace_ms);
    config.engine = EngineConfig::Builtin { pace_ms };
    config.db = convo_service::DbLocation::Postgres(db.url());
    let a = start_with(config.clone()).await;
    config.db = convo_service::DbLocation::Postgres(proxy.url(&db.name));
    let b = start_with(config).await;
    (db, proxy, a, b)
}

async fn ready(svc: &Svc) -> (StatusCode, Value) {
    let resp = svc
        .http
        .get(svc.url("/readyz"))
        .send()
        .await
        .expect("readyz");
    super::common::json(resp).await
}

/// Starts a streamed reply on `svc`; its id.
pub(super) async fn start_reply(svc: &Svc, sid: &str, text: &str) -> String {
    let (status, accepted) = svc
        .post(sid, json!({"content": text, "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted["messageId"].as_str().unwrap().to_string()
}

/// Reads until `n` deltas of `reply` arrived; returns what was read.
pub(super) async fn deltas(ws: &mut Ws, reply: &str, n: usize) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    while events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Delta { message_id, .. } if message_id == reply))
        .count()
        < n
    {
        events.push(next_event(ws).await);
    }
    events
}

/// Reads until the `relay_unavailable` error of `reply`; returns what was read.
async fn until_relay_error(ws: &mut Ws, reply: &str) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    loop {
        let event = next_event(ws).await;
        let found = matches!(&event, StreamEvent::Error { message_id, error, .. }
            if message_id == reply && error.code == "relay_unavailable");
        assert!(
            !matches!(&event, StreamEvent::Done { .. }),
            "the reply ended before the relay error: {event:?}"
        );
        events.push(event);
        if found {
            return events;
        }
    }
}

/// The text a listener rebuilds from its events, checking each delta carries the next seq
/// (nothing lost, nothing twice); a `relay_unavailable` error is not an end, and a snapshot
/// after it must not go back. Returns the text and the one `done`'s message content.
fn rebuilt(events: &[StreamEvent], reply: &str) -> (String, String) {
    let (mut text, mut next) = (String::new(), 0);
    let mut done = None;
    for event in events {
        match event {
            StreamEvent::Snapshot {
                message_id,
                seq,
                content,
                ..
            } if message_id == reply => {
                assert!(*seq >= next, "a snapshot going back: {events:?}");
                assert!(
                    content.starts_with(&text),
                    "a snapshot disagreeing: {events:?}"
                );
                text = content.clone();
                next = *seq;
            }
            StreamEvent::Delta {
                message_id,
                seq,
                content,
                ..
            } if message_id == reply => {
                assert_eq!(*seq, next, "a delta lost or repeated in {events:?}");
                text.push_str(content);
                next += 1;
            }
            StreamEvent::Done { message } if message.message_id == reply => {
                assert!(done.is_none(), "two `done` for one reply: {events:?}");
                done = Some(message.content.clone());
            }
            StreamEvent::Error {
                message_id, error, ..
            } if message_id == reply => {
                assert_eq!(error.code, "relay_unavailable", "{events:?}");
            }
            other => panic!("unexpected {other:?} in {events:?}"),
        }
    }
    (text, done.expect("a done"))
}

/// Nothing but pings arrives on `ws` for a second (a second end would come at once).
async fn quiet(ws: &mut Ws) {
    let until = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Ok(frame) = tokio::time::timeout_at(until, ws.next()).await {
        match frame {
            Some(Ok(WsMessage::Ping(_) | WsMessage::Pong(_))) => continue,
            other => panic!("nothing more was expected, got {other:?}"),
        }
    }
}

async fn history(svc: &Svc, sid: &str) -> Vec<Value> {
    let (status, body) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["messages"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_whose_relay_was_cut_mid_reply_gets_the_rest_exactly_once() {
    let (_db, proxy, a, b) = replicas(40).await;
    let sid = session();
    let mut ws = b.ws(&sid).await;
    let reply = start_reply(&a, &sid, "write some code for me, please").await;
    let mut events = deltas(&mut ws, &reply, 2).await;

    proxy.cut();
    events.extend(until_relay_error(&mut ws, &reply).await);
    let (status, body) = ready(&b).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body["reasons"].to_string().contains("relay:"), "{body}");

    proxy.restore();
    let rest = until_end(&mut ws, &reply).await;
    assert!(
        matches!(&rest[0], StreamEvent::Snapshot { message_id, .. } if *message_id == reply),
        "the reply comes back with a snapshot: {rest:?}"
    );
    events.extend(rest);
    let (text, done) = rebuilt(&events, &reply);
    assert_eq!(text, done);
    quiet(&mut ws).await;
    let stored = history(&a, &sid).await;
    assert_eq!(stored.last().unwrap()["content"], done.as_str());
    eventually(GUARD, "b ready again", || async {
        ready(&b).await.0 == StatusCode::OK
    })
    .await;
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_that_ended_while_the_relay_was_down_reach_the_listener_from_the_database() {
    let (_db, proxy, a, b) = replicas(10).await;
    let sid = session();
    let mut ws = b.ws(&sid).await;
    let first = start_reply(&a, &sid, "tell me a story").await;
    let mut events = deltas(&mut ws, &first, 1).await;

    proxy.cut();
    events.extend(until_relay_error(&mut ws, &first).await);
    // The first reply ends on a while b cannot hear it; a second one begins and ends too.
    eventually(GUARD, "the first reply stored", || async {
        history(&a, &sid).await.len() == 2
    })
    .await;
    let second = a.send_text(&sid, "and another one").await;
    let second = second["messageId"].as_str().unwrap().to_string();

    proxy.restore();
    events.extend(until_end(&mut ws, &first).await);
    let rest = until_end(&mut ws, &second).await;
    let stored = history(&a, &sid).await;
    assert_eq!(stored.len(), 4);
    let (text, done) = rebuilt(&events, &first);
    assert!(done.starts_with(&text), "{text:?} then {done:?}");
    assert_eq!(done, stored[1]["content"].as_str().unwrap());
    match &rest[..] {
        [StreamEvent::Done { message }] => {
            assert_eq!(message.message_id, second);
            assert_eq!(message.content, stored[3]["content"].as_str().unwrap());
        }
        other => panic!("expected the second reply's done alone, got {other:?}"),
    }
    quiet(&mut ws).await;
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_failed_while_the_relay_was_down_ends_with_its_error() {
    let (_db, proxy, a, b) = replicas(40).await;
    let sid = session();
    a.send_text(&sid, "the session exists").await;
    let mut ws = b.ws(&sid).await;
    let reply = start_reply(&a, &sid, "write a long answer").await;
    deltas(&mut ws, &reply, 1).await;

    proxy.cut();
    until_relay_error(&mut ws, &reply).await;
    // Deleted through a while b is away: the reply stops, its turn rolled back.
    assert_eq!(a.delete(&sid).await.0, StatusCode::OK);

    proxy.restore();
    let rest = until_end(&mut ws, &reply).await;
    match rest.last().unwrap() {
        StreamEvent::Error { error, .. } => assert_eq!(error.code, "session_not_found"),
        other => panic!("expected an error, got {other:?} in {rest:?}"),
    }
    quiet(&mut ws).await;
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_held_by_the_network_is_noticed_and_heals() {
    let (_db, proxy, a, b) = replicas(60).await;
    let sid = session();
    let mut ws = b.ws(&sid).await;
    let reply = start_reply(&a, &sid, "write some code for me, please").await;
    let mut events = deltas(&mut ws, &reply, 1).await;

    // Nothing is reset: only the relay's probe can tell.
    proxy.hold();
    let (status, body) = ready(&b).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body["reasons"].to_string().contains("database:"), "{body}");
    events.extend(until_relay_error(&mut ws, &reply).await);
    proxy.restore();
    events.extend(until_end(&mut ws, &reply).await);
    // The rest came as a snapshot and deltas, or, if it ended meanwhile, as its `done`.
    let (text, done) = rebuilt(&events, &reply);
    assert!(done.starts_with(&text), "{text:?} then {done:?}");
    assert_eq!(history(&a, &sid).await[1]["content"], done.as_str());
    quiet(&mut ws).await;
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_says_when_the_database_or_the_relay_is_down() {
    let (_db, proxy, a, b) = replicas(0).await;
    for svc in [&a, &b] {
        let (status, body) = ready(svc).await;
        assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));
    }
    proxy.cut();
    let (status, body) = ready(&b).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "unavailable");
    let reasons = body["reasons"].to_string();
    assert!(reasons.contains("database:"), "{body}");
    // Liveness is not readiness: the process still answers.
    let live = b.http.get(b.url("/healthz")).send().await.unwrap();
    assert_eq!(live.status(), StatusCode::OK);
    eventually(GUARD, "the relay reported down", || async {
        ready(&b).await.1["reasons"].to_string().contains("relay:")
    })
    .await;
    assert_eq!(
        ready(&a).await.0,
        StatusCode::OK,
        "a is not behind the proxy"
    );
    proxy.restore();
    eventually(GUARD, "b ready after the cut", || async {
        ready(&b).await.0 == StatusCode::OK
    })
    .await;
    proxy.hold();
    let (status, body) = tokio::time::timeout(GUARD, ready(&b))
        .await
        .expect("an answer");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body["reasons"].to_string().contains("database:"), "{body}");
    proxy.restore();
    eventually(GUARD, "b ready after the hold", || async {
        ready(&b).await.0 == StatusCode::OK
    })
    .await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}

#[tokio::test]
async fn readiness_on_sqlite_is_a_query_that_answers() {
    let svc = super::common::start_default().await;
    let (status, body) = ready(&svc).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));
    svc.service.shutdown().await;
}

/// The messages `NOTIFY`ed on the relay's channel, as a test connection `LISTEN`ing hears them.
async fn relayed(
    db: &TestDb,
) -> (
    tokio_postgres::Client,
    tokio::sync::mpsc::UnboundedReceiver<Value>,
) {
    let (client, mut connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = message {
                // `SENDER PART/PARTS JSON`: the tests' batches fit in one part.
                let json = n
                    .payload()
                    .splitn(3, ' ')
                    .nth(2)
                    .unwrap_or("[]")
                    .to_string();
                for m in serde_json::from_str::<Vec<Value>>(&json).unwrap_or_default() {
                    let _ = tx.send(m);
                }
            }
        }
    });
    client.batch_execute("LISTEN convo_stream").await.unwrap();
    (client, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_relayed_only_to_replicas_with_a_listener() {
    let (db, _proxy, a, b) = replicas(5).await;
    let (_listening, mut heard) = relayed(&db).await;
    let sid = session();
    // No listener anywhere: a streamed reply on a is not published at all.
    let reply = start_reply(&a, &sid, "write some code for me, please").await;
    eventually(GUARD, "the reply stored", || async {
        history(&a, &sid).await.len() == 2
    })
    .await;
    let mut kinds = Vec::new();
    while let Ok(m) = heard.try_recv() {
        kinds.push(m["k"].as_str().unwrap_or_default().to_string());
    }
    assert!(
        kinds.is_empty(),
        "published with nobody listening: {kinds:?}"
    );

    // A listener on b: b says so, and a's next reply is relayed, delta by delta.
    let mut ws = b.ws(&sid).await;
    let next = start_reply(&a, &sid, "and some more code").await;
    let events = until_end(&mut ws, &next).await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Delta { .. }))
        .count();
    assert!(deltas > 10, "{events:?}");
    let mut published = Vec::new();
    while let Ok(m) = tokio::time::timeout(Duration::from_millis(500), heard.recv()).await {
        published.push(m.unwrap());
    }
    let count = |k: &str| published.iter().filter(|m| m["k"] == k).count();
    assert_eq!(count("watch"), 1, "{published:?}");
    assert_eq!(count("begin"), 1, "{published:?}");
    assert_eq!(count("delta"), deltas, "{published:?}");
    assert_eq!(count("finish"), 1, "{published:?}");
    assert!(
        published.iter().all(|m| m["m"] != reply.as_str()),
        "{published:?}"
    );
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
}
