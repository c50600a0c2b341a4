//! `App::update` unit tests, one file per topic; the shared fixtures are here: an app
//! connected with three sessions and A open (`app`, `app_loaded`), keys, the reply events of
//! A's stream, and what the commands asked for.

use chrono::{DateTime, TimeZone, Utc};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::*;
use crate::event::*;
use crate::keys::KeyBindings;
use crate::render::transcript::EntryState;
use convo_client::api::stream::StreamUpdate;
use convo_client::api::{ApiError, ErrorBody, Message, Role, StreamEvent};
use convo_wire::limits::MAX_CONTENT_CHARS;

mod composer;
mod cut_off;
mod editor_notify_code;
mod fork;
mod navigation;
mod queue;
mod replies;
mod search;
mod slash;
mod start;
mod stop;
mod stop_early;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
}

fn session(id: &str, title: &str, mins_ago: i64, tokens: u64) -> SessionSummary {
    SessionSummary {
        id: id.to_string(),
        title: title.to_string(),
        title_set: false,
        last_activity: t0() - chrono::Duration::minutes(mins_ago),
        tokens,
        forked_from: None,
    }
}

const A: &str = "session_AAAAAAAAAAAAAAAA";

const B: &str = "session_BBBBBBBBBBBBBBBB";

const C: &str = "session_CCCCCCCCCCCCCCCC";

/// An app that is connected, has three sessions and has A open with its stream up.
fn app() -> App {
    app_loaded(Vec::new())
}

/// An 80×24 app connected to an embedded service, before the store has answered.
fn connected() -> App {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app
}

/// [`app`] with A's transcript holding `messages`.
fn app_loaded(messages: Vec<StoredMessage>) -> App {
    let mut app = connected();
    let cmds = app.update(AppEvent::StoreLoaded {
        sessions: vec![
            session(B, "second", 5, 10),
            session(A, "first", 1, 20),
            session(C, "third", 50, 0),
        ],
        last_open: Some(A.into()),
    });
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == A))
    );
    assert!(cmds.contains(&Command::OpenStream {
        session_id: A.into()
    }));
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages,
        draft: None,
        rendered: None,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Connected,
    });
    app
}

fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

fn alt(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::ALT))
}

pub(super) fn type_text(app: &mut App, text: &str) -> Vec<Command> {
    let mut out = Vec::new();
    for c in text.chars() {
        out.extend(app.update(key(KeyCode::Char(c))));
    }
    out
}

fn sent(cmds: &[Command]) -> Option<(String, u64, convo_client::api::SendMessage)> {
    cmds.iter().find_map(|c| match c {
        Command::Send {
            session_id,
            send_id,
            body,
            ..
        } => Some((session_id.clone(), *send_id, body.clone())),
        _ => None,
    })
}

/// Enter on the composer's text in A, then that send failed with `failure`; what the failure
/// asked for.
fn send_then_fail(app: &mut App, failure: ApiError) -> Vec<Command> {
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).expect("a send");
    app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure,
    })
}

/// A pro account's usage as `GET /v1/analytics/usage` answers it, early in the period.
fn usage_json() -> serde_json::Value {
    serde_json::json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": 10, "limit": 50000, "percentage": 0.02},
        "tokens": {"used": 100, "limit": 10000000, "percentage": 0.001},
        "sessions": {"active": 3, "limit": 500, "percentage": 0.6},
        "tier": "pro"
    })
}

fn reply(id: &str, content: &str, tokens: u64) -> Message {
    Message {
        message_id: id.into(),
        session_id: A.into(),
        role: Role::Assistant,
        content: content.into(),
        tokens,
        created_at: "2026-11-22T12:00:00Z".into(),
        finish_reason: None,
    }
}

fn delta(id: &str, seq: u64, content: &str) -> AppEvent {
    AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Delta {
            session_id: A.into(),
            message_id: id.into(),
            seq,
            content: content.into(),
        }),
    }
}

fn open(app: &App) -> &OpenSession {
    app.session().unwrap()
}

fn stored_msg(role: Role, content: &str) -> StoredMessage {
    StoredMessage {
        message_id: None,
        role,
        content: content.into(),
        tokens: 3,
        created_at: t0(),
        status: MessageStatus::Complete,
        finish_reason: None,
    }
}

/// Types `text`, sends it, and has the service accept it in A with reply `reply_id` (empty so
/// far): the send's id.
fn send_accepted(app: &mut App, text: &str, reply_id: &str, prompt_tokens: u64) -> u64 {
    type_text(app, text);
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply(reply_id, "", 0),
        prompt_tokens,
    });
    send_id
}

/// The stream's `error` event for reply `message_id` of A.
fn error_event(message_id: &str, code: &str, message: &str) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Error {
        session_id: A.into(),
        message_id: message_id.into(),
        error: ErrorBody::new(code, message),
    }))
}

fn stream(update: StreamUpdate) -> AppEvent {
    AppEvent::Stream {
        session_id: A.into(),
        update,
    }
}

fn stored_reply(cmds: &[Command]) -> Option<StoredMessage> {
    cmds.iter().find_map(|c| match c {
        Command::Persist(StoreOp::AppendMessage { message, .. })
            if message.role == Role::Assistant =>
        {
            Some(message.clone())
        }
        _ => None,
    })
}

/// Writes the messages `cmds` ask the local store to keep, as the store thread does.
fn persist(store: &convo_client::local_store::Store, cmds: &[Command]) {
    for c in cmds {
        if let Command::Persist(StoreOp::AppendMessage {
            session_id,
            message,
        }) = c
        {
            store.append_message(session_id, message).unwrap();
        }
    }
}

/// The status bar's notice, or nothing.
fn notice_text(app: &App) -> String {
    app.notice().map(|n| n.text.clone()).unwrap_or_default()
}

fn history(messages: Vec<Message>) -> AppEvent {
    AppEvent::History {
        asked: std::time::Instant::now(),
        session_id: A.into(),
        fetch: HistoryFetch::Messages(messages),
    }
}

fn status(app: &App) -> Option<String> {
    app.transcript_pane().search().and_then(|s| s.status())
}

/// The last search of the store asked for.
fn asked(cmds: &[Command]) -> Option<(u64, String)> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SearchSessions { seq, text, .. } => Some((*seq, text.clone())),
        _ => None,
    })
}
