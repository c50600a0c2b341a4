//! Stopping a reply (`POST /v1/sessions/{id}/messages/{messageId}/cancel`) and how a reply
//! ended (`finishReason`): a cancel mid-reply keeps the text so far, marked `stopped`, on the
//! stream and in the history; a cancel before any text rolls the turn back; a cancel of a
//! finished or unknown reply says so, also one whose engine has finished while it is being
//! stored; a reply cut by the context window ends with `length`.
//! On two PostgreSQL replicas, a cancel reaching the replica that does not run the reply
//! stops it on the other. The same cancel is a frame on the session's WebSocket, answered on
//! that socket.

use convo_client::api::StreamEvent;
use convo_service::{DbLocation, ServiceConfig};
use convo_wire::FinishReason;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::backends::TestDb;
use super::common::{
    Svc, Ws, close, json as body_json, next_event, next_json, session, start_with, until_end,
};
use super::replica_harness::Replica;
use super::upstream::{Upstream, chunk, finish};

async fn cancel(svc: &Svc, sid: &str, message_id: &str) -> (StatusCode, Value) {
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages/{message_id}/cancel")))
        .bearer_auth(&svc.key)
        .send()
        .await
        .expect("request");
    body_json(resp).await
}

/// A service answering with the fake upstream, whose reply the test writes.
async fn with_live_upstream() -> (Svc, Upstream, tokio::sync::mpsc::UnboundedSender<String>) {
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    (start_with(config).await, upstream, tx)
}

/// A new session's listener, and the id of the streamed reply to `content` (202).
async fn streamed_reply(svc: &Svc, content: &str) -> (String, Ws, String) {
    let sid = session();
    let ws = svc.ws(&sid).await;
    let (status, accepted) = svc
        .post(&sid, json!({"content": content, "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let id = accepted["messageId"].as_str().unwrap().to_string();
    (sid, ws, id)
}

#[tokio::test]
async fn a_cancel_mid_reply_stores_the_text_so_far_marked_stopped() {
    let (svc, _upstream, tx) = with_live_upstream().await;
    let (sid, mut ws, id) = streamed_reply(&svc, "write an essay").await;
    tx.send(chunk("The first ")).unwrap();
    tx.send(chunk("words")).unwrap();
    let mut seen = String::new();
    while seen != "The first words" {
        match next_event(&mut ws).await {
            StreamEvent::Delta { content, .. } => seen.push_str(&content),
            other => panic!("expected deltas, got {other:?}"),
        }
    }

    let (status, body) = cancel(&svc, &sid, &id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        body,
        json!({"sessionId": sid, "messageId": id, "stopping": true})
    );
    let events = until_end(&mut ws, &id).await;
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("expected done, got {events:?}");
    };
    assert_eq!(message.content, "The first words");
    assert_eq!(message.finish_reason, Some(FinishReason::Stopped));
    assert_eq!(message.tokens, convo_tokens::count("The first words"));

    // Stored so, and said so by the history.
    let (status, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK);
    let reply = &history["messages"][1];
    assert_eq!(reply["messageId"], id.as_str());
    assert_eq!(reply["content"], "The first words");
    assert_eq!(reply["finishReason"], "stopped");
    assert!(
        history["messages"][0].get("finishReason").is_none(),
        "not on user messages"
    );

    // Once stored there is nothing to stop.
    let (status, body) = cancel(&svc, &sid, &id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "reply_finished");
    close(ws).await;
}

#[tokio::test]
async fn a_cancel_before_any_text_rolls_the_turn_back() {
    let (svc, _upstream, _tx) = with_live_upstream().await;
    let (sid, mut ws, id) = streamed_reply(&svc, "think long").await;
    let (status, body) = cancel(&svc, &sid, &id).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let events = until_end(&mut ws, &id).await;
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => assert_eq!(error.code, "reply_stopped"),
        other => panic!("expected the turn's error, got {other:?}"),
    }
    // The turn is gone: the session holds nothing.
    let (status, body) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["messages"], json!([]));
    close(ws).await;
}

#[tokio::test]
async fn a_cancel_of_an_unknown_reply_or_session_says_which() {
    let svc = start_with(ServiceConfig::ephemeral(0)).await;
    let sid = session();
    let (status, body) = cancel(&svc, &sid, "msg_nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "session_not_found");
    svc.send_text(&sid, "hello").await;
    let (status, body) = cancel(&svc, &sid, "msg_nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "message_not_found");
    let (status, body) = cancel(&svc, "not-a-session", "msg_nothing").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_reply_cut_by_the_context_window_ends_with_length_and_others_with_stop() {
    let svc = start_with(ServiceConfig::ephemeral(0)).await;
    let sid = session();
    let whole = svc.send_text(&sid, "hello").await;
    assert_eq!(whole["finishReason"], "stop");
    let used = whole["tokens"].as_u64().unwrap() + convo_tokens::count("hello");

    let mut config = ServiceConfig::ephemeral(0);
    // Room for a few words of the reply after the message.
    config.max_context_tokens = 12;
    let small = start_with(config).await;
    let sid = session();
    let cut = small.send_text(&sid, "hello").await;
    assert_eq!(cut["finishReason"], "length", "{cut}");
    let tokens = cut["tokens"].as_u64().unwrap();
    assert!(tokens < used, "cut: {tokens} tokens");
    let (_, history) = small.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(history["messages"][1]["finishReason"], "length");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_replicas_a_cancel_sent_to_the_other_replica_stops_the_reply() {
    const KEY: &str = "service_live_replicaCancelKey0123456";
    let db = TestDb::create().await;
    // Paced, so the reply is still being generated when the cancel comes.
    let a = Replica::start(&db, KEY, 100, None);
    let b = Replica::start(&db, KEY, 100, None);
    let sid = session();
    let mut ws = a.ws(&sid).await;
    let id = a.start_reply(&sid, "write a long answer with code").await;
    // The first words came: the reply runs on a, and b follows nothing of it.
    loop {
        if let StreamEvent::Delta { seq: 2, .. } = next_event(&mut ws).await {
            break;
        }
    }
    let resp = b
        .http
        .post(format!("{}/v1/sessions/{sid}/messages/{id}/cancel", b.base))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("request");
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let events = until_end(&mut ws, &id).await;
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("expected done, got {events:?}");
    };
    assert_eq!(message.finish_reason, Some(FinishReason::Stopped));
    let history = b.history(&sid).await;
    assert_eq!(history[1]["finishReason"], "stopped");
    assert_eq!(history[1]["content"], message.content.as_str());
    close(ws).await;
}

/// The window between the engine's end and the reply being stored: the test holds the
/// session's row (PostgreSQL), so the turn waits there with its engine finished. A cancel
/// then is too late, and says so; the reply ends as the engine ended it.
#[tokio::test]
async fn a_cancel_after_the_engine_finished_but_before_the_reply_is_stored_says_it_ended() {
    let db = TestDb::create().await;
    let (upstream, tx) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(db.url());
    config.engine = upstream.engine_config();
    let svc = start_with(config).await;
    let (sid, mut ws, id) = streamed_reply(&svc, "say it all").await;
    tx.send(chunk("All of it.")).unwrap();
    match next_event(&mut ws).await {
        StreamEvent::Delta { content, .. } => assert_eq!(content, "All of it."),
        other => panic!("expected the delta, got {other:?}"),
    }

    let mut holder = db.client().await;
    let hold = holder.transaction().await.unwrap();
    hold.execute("SELECT id FROM sessions WHERE id = $1 FOR UPDATE", &[&sid])
        .await
        .unwrap();
    tx.send(finish()).unwrap();
    // The turn is storing the reply: it waits for the row, its engine done.
    let watcher = db.client().await;
    loop {
        let waiting: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let (status, body) = cancel(&svc, &sid, &id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "reply_finished");
    hold.commit().await.unwrap();
    let events = until_end(&mut ws, &id).await;
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("expected done, got {events:?}");
    };
    assert_eq!(message.content, "All of it.");
    assert_eq!(message.finish_reason, Some(FinishReason::Stop));
    let (_, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(history["messages"][1]["finishReason"], "stop");
    close(ws).await;
}

/// Sends `frame` on the session's WebSocket; its answer, and the reply's events that came
/// before it.
async fn ws_frame(ws: &mut Ws, frame: Value) -> (Value, Vec<StreamEvent>) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message as WsMessage;
    ws.send(WsMessage::Text(frame.to_string().into()))
        .await
        .expect("sent");
    let mut before = Vec::new();
    loop {
        let value: Value = next_json(ws).await;
        if value["type"] == "cancelled" {
            return (value, before);
        }
        before.push(serde_json::from_value(value).expect("a stream event"));
    }
}

#[tokio::test]
async fn a_cancel_frame_on_the_websocket_does_what_the_route_does_and_is_answered_there() {
    let (svc, _upstream, tx) = with_live_upstream().await;
    let (sid, mut ws, id) = streamed_reply(&svc, "write an essay").await;
    tx.send(chunk("The first words")).unwrap();
    match next_event(&mut ws).await {
        StreamEvent::Delta { content, .. } => assert_eq!(content, "The first words"),
        other => panic!("expected the delta, got {other:?}"),
    }

    let (answer, before) = ws_frame(&mut ws, json!({"type": "cancel", "messageId": id})).await;
    assert_eq!(
        answer,
        json!({"type": "cancelled", "sessionId": sid, "messageId": id, "stopping": true})
    );
    let events = match before.last() {
        Some(StreamEvent::Done { .. }) => before,
        _ => until_end(&mut ws, &id).await,
    };
    let Some(StreamEvent::Done { message }) = events.last() else {
        panic!("expected done, got {events:?}");
    };
    assert_eq!(message.content, "The first words");
    assert_eq!(message.finish_reason, Some(FinishReason::Stopped));

    // What the route refuses, the frame's answer refuses the same way.
    let (answer, _) = ws_frame(&mut ws, json!({"type": "cancel", "messageId": id})).await;
    assert_eq!(answer["stopping"], false);
    assert_eq!(answer["error"]["code"], "reply_finished", "{answer}");
    let (answer, _) = ws_frame(
        &mut ws,
        json!({"type": "cancel", "messageId": "msg_nothing"}),
    )
    .await;
    assert_eq!(answer["error"]["code"], "message_not_found", "{answer}");
    let (answer, _) = ws_frame(&mut ws, json!({"type": "cancel", "messageId": ""})).await;
    assert_eq!(answer["error"]["code"], "invalid_request", "{answer}");
    let (answer, _) = ws_frame(&mut ws, json!({"type": "cancel", "messageId": 7})).await;
    assert_eq!(answer["error"]["code"], "invalid_request", "{answer}");
    assert_eq!(answer["messageId"], Value::Null);
    // A frame that is no cancel is ignored, as it always was: the next answer is the cancel's.
    {
        use futures_util::SinkExt;
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            json!({"type": "hello"}).to_string().into(),
        ))
        .await
        .unwrap();
    }
    let (answer, _) = ws_frame(&mut ws, json!({"type": "cancel", "messageId": id})).await;
    assert_eq!(answer["error"]["code"], "reply_finished", "{answer}");
    close(ws).await;
}
