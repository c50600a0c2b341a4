//! The stream client against scripted WebSocket servers: typed events, duplicate deltas
//! dropped by the reply follower, reconnect with a snapshot, refusal and absence of the endpoint, and the
//! `send_streaming` flow (POST 202, then deltas).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use convo_client::api::{
    ApiError, Role, SendMessage, SessionStream, StreamEvent, StreamTiming, StreamUpdate,
    send_streaming,
};
use convo_client::follow::{ReplyFollower, ReplyStatus};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::support::{Counter, SESSION, client, message_json, options, serve};

fn fast() -> StreamTiming {
    StreamTiming {
        ping_interval: Duration::from_secs(3600),
        silence_timeout: Duration::from_secs(3600),
        backoff_base: Duration::from_millis(10),
        backoff_cap: Duration::from_millis(50),
    }
}

fn delta(seq: u64, content: &str) -> String {
    json!({"type": "delta", "sessionId": SESSION, "messageId": "m1", "seq": seq, "content": content})
        .to_string()
}

async fn next(rx: &mut mpsc::Receiver<StreamUpdate>) -> StreamUpdate {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("an update (guard against a hang)")
        .expect("the stream task is alive")
}

/// Serve a stream endpoint where connection `i` is sent `scripts[i]` and then closed
/// (the last script's connection stays open). Records each connection's Authorization.
async fn scripted(scripts: Vec<Vec<String>>) -> (url::Url, Arc<Mutex<Vec<String>>>) {
    let auths = Arc::new(Mutex::new(Vec::new()));
    let a = auths.clone();
    let scripts = Arc::new(scripts);
    let count = Counter::default();
    let router = Router::new().route(
        "/v1/sessions/{id}/stream",
        get(move |ws: WebSocketUpgrade, h: HeaderMap| {
            let a = a.clone();
            let scripts = scripts.clone();
            let n = count.bump();
            async move {
                let auth = h
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                a.lock().unwrap().push(auth);
                ws.on_upgrade(move |mut socket| async move {
                    let last = n + 1 >= scripts.len();
                    for frame in scripts.get(n).cloned().unwrap_or_default() {
                        if socket.send(WsMessage::Text(frame.into())).await.is_err() {
                            return;
                        }
                    }
                    if last {
                        while let Some(Ok(_)) = socket.recv().await {}
                    } else {
                        let _ = socket.send(WsMessage::Close(None)).await;
                    }
                })
            }
        }),
    );
    (serve(router).await, auths)
}

#[tokio::test]
async fn events_arrive_typed_and_the_follower_drops_duplicates_across_reconnects() {
    let mut stored = message_json("Hello world");
    stored["messageId"] = json!("m1");
    let done = json!({"type": "done", "message": stored}).to_string();
    let snapshot = json!({"type": "snapshot", "sessionId": SESSION, "messageId": "m1", "seq": 2, "content": "Hello"}).to_string();
    let (base, auths) = scripted(vec![
        vec![
            delta(0, "Hel"),
            delta(1, "lo"),
            delta(1, "lo"),
            json!({"type": "future_kind"}).to_string(),
        ],
        vec![
            snapshot,
            delta(1, "lo"),
            delta(2, " world"),
            done,
            delta(2, " world"),
        ],
    ])
    .await;
    let (_handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, fast());
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    let mut got = Vec::new();
    // The one reply follower (the TUI's and `send --stream`'s) drops the duplicates.
    let mut follower = ReplyFollower::new(Role::User, "hi");
    follower.reply_id_known("m1");
    loop {
        match next(&mut rx).await {
            StreamUpdate::Event(e) => {
                let done = matches!(e, StreamEvent::Done { .. });
                follower.event(&e);
                got.push(e);
                if done {
                    break;
                }
            }
            StreamUpdate::Disconnected { retry_in, error } => {
                assert!(retry_in.is_some(), "{error}");
                assert!(error.is_network());
                follower.stream_lost();
                got.push(StreamEvent::Delta {
                    session_id: "-".into(),
                    message_id: "(disconnected)".into(),
                    seq: 0,
                    content: String::new(),
                });
            }
            StreamUpdate::Connected => {
                follower.stream_connected();
            }
            StreamUpdate::Unsupported => panic!("the endpoint exists"),
        }
    }
    let summary: Vec<String> = got
        .iter()
        .map(|e| match e {
            StreamEvent::Delta {
                message_id,
                seq,
                content,
                ..
            } => format!("{message_id}:{seq}:{content}"),
            StreamEvent::Snapshot { seq, content, .. } => format!("snapshot:{seq}:{content}"),
            StreamEvent::Done { message } => format!("done:{}", message.content),
            StreamEvent::Error { .. } => "error".into(),
            StreamEvent::Progress { .. } => "progress".into(),
            StreamEvent::Started { .. } => "started".into(),
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            "m1:0:Hel",
            "m1:1:lo",
            "m1:1:lo",
            "(disconnected):0:",
            "snapshot:2:Hello",
            "m1:1:lo",
            "m1:2: world",
            "done:Hello world",
        ]
    );
    assert_eq!(follower.text(), "Hello world");
    assert!(matches!(follower.status(), ReplyStatus::Done(m) if m.content == "Hello world"));
    let auths = auths.lock().unwrap();
    assert_eq!(auths.len(), 2);
    assert!(
        auths
            .iter()
            .all(|a| a == "Bearer service_live_testkey000000000000")
    );
}

#[tokio::test]
async fn a_server_without_the_endpoint_is_unsupported() {
    let base = serve(Router::new()).await;
    let (_handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, fast());
    assert_eq!(next(&mut rx).await, StreamUpdate::Unsupported);
    assert!(rx.recv().await.is_none(), "the task ends");
}

#[tokio::test]
async fn a_refused_session_ends_the_stream_with_the_typed_error() {
    let router = Router::new().route(
        "/v1/sessions/{id}/stream",
        get(|| async {
            (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": {"code": "session_not_found", "message": "deleted"}})),
            )
        }),
    );
    let base = serve(router).await;
    let (_handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, fast());
    match next(&mut rx).await {
        StreamUpdate::Disconnected {
            error: ApiError::SessionNotFound { message },
            retry_in: None,
        } => assert_eq!(message, "deleted"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn silence_makes_the_client_reconnect() {
    let (base, auths) = scripted(vec![vec![]]).await;
    let timing = StreamTiming {
        silence_timeout: Duration::from_millis(200),
        ..fast()
    };
    let (_handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, timing);
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    match next(&mut rx).await {
        StreamUpdate::Disconnected { error, retry_in } => {
            assert!(retry_in.is_some());
            assert!(error.to_string().contains("nothing heard"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    assert!(auths.lock().unwrap().len() >= 2);
}

#[tokio::test]
async fn send_streaming_follows_the_reply_of_its_post() {
    // Frames the POST handler queues for the open stream.
    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<String>();
    let frames_rx = Arc::new(tokio::sync::Mutex::new(frames_rx));
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let seen = bodies.clone();
    let router = Router::new()
        .route(
            "/v1/sessions/{id}/stream",
            get(move |ws: WebSocketUpgrade| {
                let frames_rx = frames_rx.clone();
                async move {
                    ws.on_upgrade(move |mut socket| async move {
                        let mut frames = frames_rx.lock().await;
                        while let Some(f) = frames.recv().await {
                            if socket.send(WsMessage::Text(f.into())).await.is_err() {
                                return;
                            }
                        }
                    })
                }
            }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(move |body: axum::Json<Value>| {
                let seen = seen.clone();
                let tx = frames_tx.clone();
                async move {
                    seen.lock().unwrap().push(body.0);
                    let other = json!({"type": "delta", "sessionId": SESSION, "messageId": "other", "seq": 0, "content": "NOT MINE"});
                    let _ = tx.send(other.to_string());
                    let pending = json!({"messageId": "m1", "sessionId": SESSION, "role": "assistant",
                        "content": "", "tokens": 0, "createdAt": "2026-11-22T00:00:00Z"});
                    for (i, piece) in ["Str", "eam", "ed"].iter().enumerate() {
                        let _ = tx.send(delta(i as u64, piece));
                    }
                    let mut done = message_json("Streamed");
                    done["messageId"] = json!("m1");
                    let _ = tx.send(json!({"type": "done", "message": done}).to_string());
                    (StatusCode::ACCEPTED, axum::Json(pending)).into_response()
                }
            }),
        );
    let base = serve(router).await;
    let client = client(&base);
    let body = SendMessage {
        content: "go".into(),
        role: None,
        stream: None,
        metadata: None,
    };
    let mut pieces = Vec::new();
    let reply = send_streaming(&client, SESSION, &body, "k", |t| pieces.push(t.to_string()))
        .await
        .unwrap();
    assert_eq!(reply.message_id, "m1");
    assert_eq!(reply.content, "Streamed");
    assert_eq!(pieces, vec!["Str", "eam", "ed"]);
    assert_eq!(bodies.lock().unwrap()[0]["stream"], true);
}

#[tokio::test]
async fn a_stream_error_event_becomes_the_typed_error() {
    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<String>();
    let frames_rx = Arc::new(tokio::sync::Mutex::new(frames_rx));
    let router = Router::new()
        .route(
            "/v1/sessions/{id}/stream",
            get(move |ws: WebSocketUpgrade| {
                let frames_rx = frames_rx.clone();
                async move {
                    ws.on_upgrade(move |mut socket| async move {
                        let mut frames = frames_rx.lock().await;
                        while let Some(f) = frames.recv().await {
                            let _ = socket.send(WsMessage::Text(f.into())).await;
                        }
                    })
                }
            }),
        )
        .route(
            "/v1/sessions/{id}/messages",
            post(move || {
                let tx = frames_tx.clone();
                async move {
                    let _ = tx.send(delta(0, "par"));
                    let _ = tx.send(json!({"type": "error", "sessionId": SESSION, "messageId": "m1",
                        "error": {"code": "engine_failed", "message": "the engine stopped"}}).to_string());
                    let pending = json!({"messageId": "m1", "sessionId": SESSION, "role": "assistant",
                        "content": "", "tokens": 0, "createdAt": "2026-11-22T00:00:00Z"});
                    (StatusCode::ACCEPTED, axum::Json(pending))
                }
            }),
        );
    let base = serve(router).await;
    let body = SendMessage {
        content: "go".into(),
        role: None,
        stream: None,
        metadata: None,
    };
    let mut printed = String::new();
    let e = send_streaming(&client(&base), SESSION, &body, "k", |t| printed.push_str(t))
        .await
        .unwrap_err();
    assert_eq!(printed, "par");
    assert_eq!(e.code(), "engine_failed");
    assert_eq!(e.to_string(), "engine_failed: the engine stopped");
}

#[tokio::test]
async fn dropping_the_handle_closes_the_connection() {
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let closed_tx = Arc::new(Mutex::new(Some(closed_tx)));
    let router = Router::new().route(
        "/v1/sessions/{id}/stream",
        get(move |ws: WebSocketUpgrade| {
            let closed_tx = closed_tx.clone();
            async move {
                ws.on_upgrade(move |mut socket| async move {
                    while let Some(Ok(msg)) = socket.recv().await {
                        if matches!(msg, WsMessage::Close(_)) {
                            break;
                        }
                    }
                    if let Some(tx) = closed_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                })
            }
        }),
    );
    let base = serve(router).await;
    let (handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, fast());
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    drop(handle);
    tokio::time::timeout(Duration::from_secs(30), closed_rx)
        .await
        .expect("the server saw the stream close (guard against a hang)")
        .unwrap();
    assert!(rx.recv().await.is_none(), "the task ended");
}

#[tokio::test]
async fn the_key_is_not_sent_over_plain_ws_to_another_host() {
    let mut o = options(&"http://192.0.2.1:9".parse().unwrap());
    o.allow_insecure = false;
    let (_handle, mut rx) = SessionStream::connect_with(o, SESSION, fast());
    match next(&mut rx).await {
        StreamUpdate::Disconnected {
            error: ApiError::Config(m),
            retry_in: None,
        } => assert!(m.contains("refusing to send the API key"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// A stream waiting out a long backoff reconnects at once when told to (`retry_now`: the
/// TUI does so when someone types), and by itself only when its backoff is over.
#[tokio::test]
async fn retry_now_cuts_a_reconnects_backoff_short() {
    // The first connection closes at once; the second stays open.
    let (base, auths) = scripted(vec![vec![], vec![]]).await;
    let timing = StreamTiming {
        backoff_base: Duration::from_secs(600),
        backoff_cap: Duration::from_secs(600),
        ..fast()
    };
    let (handle, mut rx) = SessionStream::connect_with(options(&base), SESSION, timing);
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    match next(&mut rx).await {
        StreamUpdate::Disconnected { retry_in, .. } => {
            assert_eq!(retry_in, Some(Duration::from_secs(600)))
        }
        other => panic!("{other:?}"),
    }
    // Left alone, it waits out the backoff (600 s).
    let alone = tokio::time::timeout(Duration::from_millis(1500), rx.recv()).await;
    assert!(alone.is_err(), "{alone:?}");
    assert_eq!(auths.lock().unwrap().len(), 1);
    handle.retry_now();
    assert_eq!(next(&mut rx).await, StreamUpdate::Connected);
    assert_eq!(auths.lock().unwrap().len(), 2);
}
