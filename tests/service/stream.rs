//! The WebSocket stream of docs/design.md, "Streaming".

use convo_client::api::StreamEvent;
use convo_service::{ServiceConfig, generate_api_key};
use reqwest::StatusCode;
use serde_json::json;

use super::common::{
    Ws, close, next_event, next_event_or_start, session, start_default, start_with, until_end,
};
use super::upstream::{Upstream, chunk, finish};

/// Checks that `events` are gap-free deltas of `id` from `first_seq`, then its `done`;
/// returns the concatenated deltas and the done message's content.
fn fold(events: &[StreamEvent], id: &str, first_seq: u64) -> (String, String) {
    let mut next = first_seq;
    let mut text = String::new();
    let (last, deltas) = events.split_last().expect("events");
    for event in deltas {
        match event {
            StreamEvent::Delta {
                message_id,
                seq,
                content,
                ..
            } => {
                assert_eq!(message_id, id);
                assert_eq!(*seq, next, "gap or repeat in seq");
                next += 1;
                text.push_str(content);
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
    match last {
        StreamEvent::Done { message } => {
            assert_eq!(message.message_id, id);
            (text, message.content.clone())
        }
        other => panic!("expected done, got {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_reply_arrives_as_gap_free_deltas_then_done() {
    let svc = start_default().await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (status, accepted) = svc
        .post(&sid, json!({"content": "stream this", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let id = accepted["messageId"].as_str().unwrap();
    let events = until_end(&mut ws, id).await;
    assert!(events.len() > 5, "word by word");
    let (deltas, done) = fold(&events, id, 0);
    assert_eq!(deltas, done);
    assert!(done.contains("stream this"));
    match events.last().unwrap() {
        StreamEvent::Done { message } => {
            assert_eq!(message.session_id, sid);
            assert_eq!(message.created_at, accepted["createdAt"].as_str().unwrap());
            assert_eq!(message.tokens, convo_tokens::count(&done));
        }
        _ => unreachable!(),
    }
    close(ws).await;
}

#[tokio::test]
async fn a_plain_send_is_relayed_too_and_stored_replies_do_not_need_listeners() {
    let svc = start_default().await;
    let sid = session();
    // Nobody listens to this one; the next send waits for it (turns of a session are serial).
    let (status, _) = svc
        .post(&sid, json!({"content": "unheard", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut ws = svc.ws(&sid).await;
    let reply = svc.send_text(&sid, "heard").await;
    let id = reply["messageId"].as_str().unwrap();
    let events = until_end(&mut ws, id).await;
    // A snapshot of the unheard reply may come first if it was still running at connect time.
    let start = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Delta { message_id, .. } if message_id == id))
        .expect("deltas of the plain send");
    let (deltas, done) = fold(&events[start..], id, 0);
    assert_eq!(deltas, done);
    assert_eq!(done, reply["content"].as_str().unwrap());
    assert!(
        done.contains("**3** messages"),
        "the unheard reply was stored first: {done}"
    );
    close(ws).await;
}

async fn live_service() -> (
    super::common::Svc,
    tokio::sync::mpsc::UnboundedSender<String>,
) {
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    // The fake upstream keeps serving after its handle is dropped (its task owns the state).
    drop(upstream);
    (start_with(config).await, tx)
}

async fn delta(ws: &mut Ws) -> (u64, String) {
    match next_event(ws).await {
        StreamEvent::Delta { seq, content, .. } => (seq, content),
        other => panic!("expected a delta, got {other:?}"),
    }
}

#[tokio::test]
async fn a_listener_that_connects_mid_reply_gets_a_snapshot_then_the_rest() {
    let (svc, upstream) = live_service().await;
    let sid = session();
    let mut early = svc.ws(&sid).await;
    let (status, accepted) = svc
        .post(
            &sid,
            json!({"content": "long answer please", "stream": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let id = accepted["messageId"].as_str().unwrap().to_string();
    for piece in ["One ", "two ", "three "] {
        upstream.send(chunk(piece)).unwrap();
    }
    for expected in 0..3 {
        assert_eq!(delta(&mut early).await.0, expected);
    }
    let mut late = svc.ws(&sid).await;
    match next_event(&mut late).await {
        StreamEvent::Snapshot {
            message_id,
            seq,
            content,
            ..
        } => {
            assert_eq!(message_id, id);
            assert_eq!(seq, 3);
            assert_eq!(content, "One two three ");
        }
        other => panic!("expected a snapshot, got {other:?}"),
    }
    upstream.send(chunk("four ")).unwrap();
    upstream.send(chunk("five.")).unwrap();
    upstream.send(finish()).unwrap();
    let rest_early = until_end(&mut early, &id).await;
    let rest_late = until_end(&mut late, &id).await;
    let (early_text, done) = fold(&rest_early, &id, 3);
    let (late_text, _) = fold(&rest_late, &id, 3);
    assert_eq!(early_text, "four five.");
    assert_eq!(
        format!("One two three {late_text}"),
        done,
        "nothing lost, nothing twice"
    );
    assert_eq!(done, "One two three four five.");
    close(early).await;
    close(late).await;
}

#[tokio::test]
async fn an_engine_failure_mid_stream_is_an_error_event_and_stores_nothing() {
    let (svc, upstream) = live_service().await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (_, accepted) = svc
        .post(&sid, json!({"content": "fail please", "stream": true}))
        .await;
    let id = accepted["messageId"].as_str().unwrap().to_string();
    upstream.send(chunk("Partial ")).unwrap();
    assert_eq!(delta(&mut ws).await.1, "Partial ");
    drop(upstream);
    match next_event(&mut ws).await {
        StreamEvent::Error {
            message_id,
            error,
            session_id,
        } => {
            assert_eq!(message_id, id);
            assert_eq!(session_id, sid);
            assert_eq!(error.code, "engine_error");
        }
        other => panic!("expected an error event, got {other:?}"),
    }
    assert_eq!(svc.metrics_now().await["messages"]["total"], 0);
    close(ws).await;
}

#[tokio::test]
async fn deleted_foreign_and_unauthenticated_streams_are_refused_before_the_upgrade() {
    let other = generate_api_key();
    let mut config = ServiceConfig::ephemeral(0);
    config.api_keys.push((other.clone(), Default::default()));
    let svc = start_with(config).await;
    let sid = session();
    svc.send_text(&sid, "hello").await;
    assert_eq!(svc.ws_refused(&sid, &other).await, 404);
    assert_eq!(
        svc.ws_refused(&sid, "service_live_nobodynobodynobody")
            .await,
        401
    );
    assert_eq!(svc.delete(&sid).await.0, StatusCode::OK);
    assert_eq!(svc.ws_refused(&sid, &svc.key.clone()).await, 404);
    assert_eq!(svc.ws_refused("session_bad", &svc.key.clone()).await, 400);
    // A never-used id may be listened to.
    let ws = svc.ws(&session()).await;
    close(ws).await;
    // A plain GET without the upgrade gets the envelope.
    let resp = svc
        .http
        .get(svc.url(&format!("/v1/sessions/{}/stream", session())))
        .bearer_auth(&svc.key)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_client_error());
    let (_, body) = super::common::json(resp).await;
    assert_eq!(body["error"]["code"], "invalid_request");
}

#[tokio::test]
async fn shutdown_mid_reply_closes_streams_and_rolls_the_turn_back() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    drop(upstream);
    config.db = convo_service::DbLocation::File(dir.path().join("service.db"));
    let svc = start_with(config).await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let (status, _) = svc
        .post(&sid, json!({"content": "interrupted", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    tx.send(chunk("Par")).unwrap();
    assert_eq!(delta(&mut ws).await.1, "Par");
    tokio::time::timeout(super::common::GUARD, svc.service.shutdown())
        .await
        .expect("shutdown completes with a stream open and a reply in flight");
    // The socket ends (an error event for the reply may come first).
    loop {
        match tokio::time::timeout(super::common::GUARD, futures_util::StreamExt::next(&mut ws))
            .await
            .expect("the socket ends")
        {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text))) => {
                let event: StreamEvent = serde_json::from_str(text.as_str()).unwrap();
                assert!(matches!(event, StreamEvent::Error { .. }), "{event:?}");
            }
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(frame))) => {
                assert_eq!(u16::from(frame.expect("a close frame").code), 1001);
                break;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }
    let conn = rusqlite::Connection::open(dir.path().join("service.db")).unwrap();
    let contents: Vec<String> = conn
        .prepare("SELECT content FROM messages ORDER BY pk")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        contents.is_empty(),
        "the interrupted turn is rolled back: {contents:?}"
    );
    let sessions: i64 = conn
        .query_row("SELECT COUNT(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sessions, 1, "the session itself stays");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// A client that opens the stream and sends at once gets the whole reply on it: the listener
/// holds its place in the hub before the handshake is answered, so a plain send's reply that
/// starts and ends before the server has set the socket up waits for it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_sent_the_moment_the_stream_opens_reaches_it() {
    let svc = start_default().await;
    for _ in 0..200 {
        let sid = session();
        let mut ws = svc.ws(&sid).await;
        let reply = svc.send_text(&sid, "right away").await;
        let id = reply["messageId"].as_str().unwrap();
        // Each event is awaited for at most `GUARD` (`next_json`).
        let events = until_end(&mut ws, id).await;
        assert!(
            matches!(events.last(), Some(StreamEvent::Done { .. })),
            "{events:?}"
        );
        close(ws).await;
    }
}

/// Two senders of one session: the second POST is held while the first one's turn runs, and
/// its sender's stream carries the first reply meanwhile. Each reply begins with a `started`
/// event naming the `Idempotency-Key` of the POST that started it, before any other event of
/// that reply, so each sender knows its own reply before its 202 names it.
#[tokio::test]
async fn a_second_senders_stream_names_the_first_senders_key() {
    let svc = start_with(ServiceConfig::ephemeral(5)).await;
    let sid = session();
    let mut ws = svc.ws(&sid).await;
    let post = |key: &'static str, text: &'static str| {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("Idempotency-Key", key)
            .json(&json!({"content": text, "stream": true}))
            .send()
    };
    let first = post("key-of-the-laptop", "from the laptop").await.unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: serde_json::Value = first.json().await.unwrap();
    let first_id = first["messageId"].as_str().unwrap().to_string();
    // Sent while the first turn runs: answered once it ends.
    let second = tokio::spawn(post("key-of-the-phone", "from the phone"));
    let mut events = Vec::new();
    let mut started = Vec::new();
    let mut ended = 0;
    while ended < 2 {
        let event = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            next_event_or_start(&mut ws),
        )
        .await
        .expect("the replies end");
        match &event {
            StreamEvent::Started {
                message_id,
                idempotency_key,
                ..
            } => started.push((message_id.clone(), idempotency_key.clone())),
            StreamEvent::Done { .. } | StreamEvent::Error { .. } => ended += 1,
            _ => {}
        }
        events.push(event);
    }
    let second: serde_json::Value = second.await.unwrap().unwrap().json().await.unwrap();
    let second_id = second["messageId"].as_str().unwrap().to_string();
    assert_eq!(
        started,
        [
            (first_id.clone(), Some("key-of-the-laptop".to_string())),
            (second_id.clone(), Some("key-of-the-phone".to_string())),
        ]
    );
    // Each reply's `started` comes before any other event of it.
    for id in [&first_id, &second_id] {
        let first_of = events
            .iter()
            .position(|e| convo_service::stream::event_message_id(e) == id.as_str())
            .unwrap();
        assert!(
            matches!(&events[first_of], StreamEvent::Started { .. }),
            "{:?}",
            events[first_of]
        );
    }
    // A send without a key: its reply's `started` names none.
    let (status, plain) = svc
        .post(&sid, json!({"content": "no key", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    match next_event_or_start(&mut ws).await {
        StreamEvent::Started {
            message_id,
            idempotency_key,
            ..
        } => {
            assert_eq!(message_id, plain["messageId"].as_str().unwrap());
            assert_eq!(idempotency_key, None);
        }
        other => panic!("expected its start, got {other:?}"),
    }
    close(ws).await;
}
