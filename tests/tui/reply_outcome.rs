//! The TUI and `convo send --stream` end a reply alike: the same stream events, sent by a
//! scripted server to `send_streaming` and handed to `App` as events, give the same outcome
//! (the reply's text, or the code it failed with), and the TUI puts the message back in the
//! composer exactly when the reply follower says it is to be sent again. Both act on the one
//! `ReplyFollower`; a front end deciding an `error` event on its own would part from it here.

use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{Message as WsMessage, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{TimeZone, Utc};
use convo_client::api::{Message, SendMessage, StreamEvent, StreamUpdate, send_streaming};
use convo_client::follow::{ReplyFollower, ReplyStatus};
use convo_tui::app::{App, Settings};
use convo_tui::event::{AppEvent, Endpoint};
use convo_tui::keys::KeyBindings;
use convo_tui::render::transcript::EntryState;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use serde_json::json;
use tokio::sync::mpsc;

use crate::client_support::{SESSION, client, serve};

const SENT: &str = "go";

fn delta(id: &str, seq: u64, content: &str) -> String {
    json!({"type": "delta", "sessionId": SESSION, "messageId": id, "seq": seq, "content": content})
        .to_string()
}

fn done(id: &str, content: &str) -> String {
    json!({"type": "done", "message": reply_json(id, content)}).to_string()
}

fn error(id: &str, code: &str) -> String {
    json!({"type": "error", "sessionId": SESSION, "messageId": id,
        "error": {"code": code, "message": "it went wrong"}})
    .to_string()
}

fn reply_json(id: &str, content: &str) -> serde_json::Value {
    json!({"messageId": id, "sessionId": SESSION, "role": "assistant", "content": content,
        "tokens": 2, "createdAt": "2026-11-22T00:00:00Z"})
}

/// How a reply ended: its text, or the code it failed with.
type Outcome = Result<String, String>;

/// `convo send --stream`'s outcome: a server that answers the POST with 202 (reply `m1`)
/// and sends `frames` on the session's stream.
async fn send_stream_outcome(frames: &[String]) -> Outcome {
    let (frames_tx, frames_rx) = mpsc::unbounded_channel::<String>();
    let frames_rx = Arc::new(tokio::sync::Mutex::new(frames_rx));
    let frames = frames.to_vec();
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
                let frames = frames.clone();
                async move {
                    for f in frames {
                        let _ = tx.send(f);
                    }
                    (StatusCode::ACCEPTED, axum::Json(reply_json("m1", "")))
                }
            }),
        );
    let base = serve(router).await;
    let body = SendMessage {
        content: SENT.into(),
        role: None,
        stream: None,
        metadata: None,
    };
    match send_streaming(&client(&base), SESSION, &body, "k", |_| {}).await {
        Ok(reply) => Ok(reply.content),
        Err(e) => Err(e.code().to_string()),
    }
}

/// The TUI's outcome for the same frames, after the POST's 202 for reply `m1`, and whether
/// the sent message is back in the composer.
fn tui_outcome(frames: &[String]) -> (Outcome, bool) {
    let now = Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        now,
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: Vec::new(),
        last_open: None,
    });
    let session_id = app.open_id().expect("a new session").to_string();
    app.update(AppEvent::Stream {
        session_id: session_id.clone(),
        update: StreamUpdate::Connected,
    });
    for c in SENT.chars() {
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::NONE,
        )));
    }
    let cmds = app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
    let send_id = cmds
        .iter()
        .find_map(|c| match c {
            convo_tui::app::Command::Send { send_id, body, .. } => {
                assert_eq!(body.stream, Some(true));
                Some(*send_id)
            }
            _ => None,
        })
        .expect("the message is sent");
    let reply: Message = serde_json::from_value(reply_json("m1", "")).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: session_id.clone(),
        send_id,
        reply,
        prompt_tokens: 1,
    });
    for f in frames {
        let event: StreamEvent = serde_json::from_str(f).expect("a stream event");
        app.update(AppEvent::Stream {
            session_id: session_id.clone(),
            update: StreamUpdate::Event(event),
        });
    }
    let open = app.session().expect("the session is open");
    let reply = open.items.len() - 1;
    let outcome = match open.items[reply].state.clone() {
        EntryState::Complete => Ok(open.content(reply).to_string()),
        EntryState::Failed(code) => Err(code),
        other => panic!("the reply did not end: {other:?}"),
    };
    (outcome, app.composer_text() == SENT)
}

/// Whether the reply follower, fed the same frames, has the message sent again.
fn follower_resends(frames: &[String]) -> bool {
    let mut f = ReplyFollower::new(convo_client::api::Role::User, SENT);
    f.accepted(
        &serde_json::from_value(reply_json("m1", "")).unwrap(),
        false,
    );
    for frame in frames {
        f.event(&serde_json::from_str(frame).unwrap());
    }
    matches!(f.status(), ReplyStatus::Failed(failure) if failure.resend_message())
}

#[tokio::test]
async fn the_tui_and_send_stream_end_a_reply_alike() {
    let cases: Vec<(&str, Vec<String>, Outcome)> = vec![
        (
            "an error mid-reply rolls the turn back",
            vec![delta("m1", 0, "par"), error("m1", "engine_failed")],
            Err("engine_failed".into()),
        ),
        (
            "an error after done changes nothing",
            vec![
                delta("m1", 0, "a"),
                done("m1", "ab"),
                error("m1", "engine_failed"),
            ],
            Ok("ab".into()),
        ),
        (
            "the session deleted meanwhile",
            vec![delta("m1", 0, "a"), error("m1", "session_not_found")],
            Err("session_not_found".into()),
        ),
        (
            "another reply's error is not this one's",
            vec![
                error("m2", "engine_failed"),
                delta("m1", 0, "x"),
                done("m1", "xy"),
            ],
            Ok("xy".into()),
        ),
        (
            "duplicates dropped, then an error",
            vec![
                delta("m1", 0, "a"),
                delta("m1", 0, "a"),
                delta("m1", 1, "b"),
                error("m1", "internal"),
            ],
            Err("internal".into()),
        ),
    ];
    for (name, frames, expected) in cases {
        let sent = send_stream_outcome(&frames).await;
        assert_eq!(sent, expected, "convo send --stream: {name}");
        let (tui, back) = tui_outcome(&frames);
        assert_eq!(tui, sent, "the TUI as convo send --stream: {name}");
        assert_eq!(
            back,
            follower_resends(&frames),
            "the message is back in the composer as the follower says: {name}"
        );
        assert_eq!(
            back,
            name != "the session deleted meanwhile" && sent.is_err()
        );
    }
}
