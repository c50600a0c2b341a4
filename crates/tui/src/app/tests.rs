//! `App::update` unit tests, one or more per action.

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

pub(super) fn t0() -> DateTime<Utc> {
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

pub(super) const A: &str = "session_AAAAAAAAAAAAAAAA";
const B: &str = "session_BBBBBBBBBBBBBBBB";
const C: &str = "session_CCCCCCCCCCCCCCCC";

/// An app that is connected, has three sessions and has A open with its stream up.
pub(super) fn app() -> App {
    app_loaded(Vec::new())
}

/// [`app`] with A's transcript holding `messages`.
pub(super) fn app_loaded(messages: Vec<StoredMessage>) -> App {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
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

pub(super) fn key(code: KeyCode) -> AppEvent {
    AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE))
}
pub(super) fn ctrl(c: char) -> AppEvent {
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

pub(super) fn reply(id: &str, content: &str, tokens: u64) -> Message {
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

pub(super) fn delta(id: &str, seq: u64, content: &str) -> AppEvent {
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

pub(super) fn open(app: &App) -> &OpenSession {
    app.session().unwrap()
}

#[test]
fn start_opens_the_last_open_session_and_sorts_most_recent_first() {
    let app = app();
    assert_eq!(app.open_id(), Some(A));
    let ids: Vec<_> = app
        .sessions_pane()
        .all()
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(ids, [A, B, C]);
    assert_eq!(app.sessions_pane().cursor(), 0);
}

#[test]
fn an_empty_store_starts_a_new_session() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    let cmds = app.update(AppEvent::StoreLoaded {
        sessions: vec![],
        last_open: None,
    });
    assert_eq!(app.sessions_pane().all().len(), 1);
    assert_eq!(app.sessions_pane().all()[0].title, NEW_SESSION_TITLE);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::Persist(StoreOp::UpsertSession(_))))
    );
    // Not connected yet: no stream until Connected.
    assert!(!cmds.iter().any(|c| matches!(c, Command::OpenStream { .. })));
    let cmds = app.update(AppEvent::Connected(Endpoint::Remote {
        base_url: "https://x".into(),
    }));
    assert!(cmds.iter().any(|c| matches!(c, Command::OpenStream { .. })));
    assert!(cmds.contains(&Command::RefreshUsage));
}

#[test]
fn enter_sends_and_the_streamed_reply_is_assembled() {
    let mut app = app();
    type_text(&mut app, "hello");
    assert_eq!(app.composer_chars(), 5);
    let cmds = app.update(key(KeyCode::Enter));
    let (sid, send_id, body) = sent(&cmds).expect("a Send command");
    assert_eq!(sid, A);
    assert_eq!(body.content, "hello");
    assert_eq!(body.stream, Some(true));
    assert_eq!(body.role, None);
    assert!(app.composer().is_empty());
    assert_eq!(open(&app).items.len(), 2);
    assert!(open(&app).is_streaming());

    // A delta can arrive before the 202.
    app.update(delta("msg_1", 0, "Hi "));
    let cmds = app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", "", 0),
        prompt_tokens: 3,
    });
    assert!(cmds.contains(&Command::RefreshUsage));
    assert!(cmds.iter().any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { message, .. }) if message.role == Role::User && message.tokens == 3)));
    app.update(delta("msg_1", 1, "there"));
    app.update(delta("msg_1", 1, "there")); // duplicate seq is ignored
    assert_eq!(open(&app).content(1), "Hi there");
    let cmds = app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("msg_1", "Hi there", 2),
        }),
    });
    assert!(!open(&app).is_streaming());
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(open(&app).context_tokens(), 5);
    assert!(cmds.iter().any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { message, .. }) if message.role == Role::Assistant && message.content == "Hi there")));
    // The title came from the first message, and the token total moved.
    let s = app
        .sessions_pane()
        .all()
        .iter()
        .find(|s| s.id == A)
        .unwrap();
    assert_eq!(s.title, "first");
    assert_eq!(s.tokens, 25);
}

#[test]
fn a_new_session_takes_its_title_from_the_first_message() {
    let mut app = app();
    app.update(ctrl('n'));
    let id = app.open_id().unwrap().to_string();
    app.update(AppEvent::Stream {
        session_id: id.clone(),
        update: StreamUpdate::Unsupported,
    });
    type_text(&mut app, "What is Rust?");
    let cmds = app.update(key(KeyCode::Enter));
    let (_, send_id, body) = sent(&cmds).unwrap();
    assert_eq!(body.stream, Some(false), "no stream: plain POST");
    app.update(AppEvent::SendAccepted {
        session_id: id.clone(),
        send_id,
        reply: Message {
            session_id: id.clone(),
            ..reply("m", "A language.", 3)
        },
        prompt_tokens: 4,
    });
    assert_eq!(app.sessions_pane().all()[0].title, "What is Rust?");
    assert_eq!(open(&app).content(1), "A language.");
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
}

#[test]
fn ctrl_u_clears_to_the_start_of_the_line_and_ctrl_z_undoes() {
    let mut app = app();
    type_text(&mut app, "first line");
    app.update(alt(KeyCode::Enter));
    type_text(&mut app, "second line");
    app.update(ctrl('u'));
    assert_eq!(app.composer_text(), "first line\n");
    app.update(ctrl('z'));
    assert_eq!(app.composer_text(), "first line\nsecond line");
}

#[test]
fn the_placeholder_names_the_keys_as_bound() {
    let table: toml::Table = "send = \"<Ctrl-s>\"\nnewline = \"<Enter>\""
        .parse()
        .unwrap();
    let keys = KeyBindings::from_table(&table).unwrap();
    let mut app = App::new(keys, Settings::default(), Rect::new(0, 0, 80, 24), t0());
    assert_eq!(
        app.composer().text_area().placeholder_text(),
        "Message · Ctrl-s sends · Enter new line · /help"
    );
    // Still after a send or a new session.
    app.update(ctrl('n'));
    assert!(
        app.composer()
            .text_area()
            .placeholder_text()
            .contains("Ctrl-s sends")
    );
}

#[test]
fn alt_enter_inserts_a_newline() {
    let mut app = app();
    type_text(&mut app, "a");
    app.update(alt(KeyCode::Enter));
    type_text(&mut app, "b");
    assert_eq!(app.composer_text(), "a\nb");
    assert_eq!(app.composer_chars(), 3);
}

#[test]
fn a_failed_send_puts_the_text_back_with_the_reason() {
    let mut app = app();
    type_text(&mut app, "hello");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure: ApiError::Unauthorized {
            message: "bad key".into(),
        },
    });
    assert_eq!(app.composer_text(), "hello");
    assert!(open(&app).items.is_empty());
    assert!(
        app.composer()
            .send_error()
            .unwrap()
            .contains("check your API key")
    );
}

#[test]
fn quota_exceeded_says_when_it_resets() {
    let mut app = app();
    type_text(&mut app, "hello");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    let cmds = app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure: ApiError::QuotaExceeded {
            limit: Some("requests".into()),
            reset_at: Some((t0() + chrono::Duration::hours(5)).to_rfc3339()),
            retry_after: None,
            message: "quota exceeded".into(),
        },
    });
    assert!(cmds.contains(&Command::RefreshUsage));
    let err = app.composer().send_error().unwrap().to_string();
    assert!(
        err.contains("requests") && err.contains("2026-11-22 17:00 UTC") && err.contains("in 5h"),
        "{err}"
    );
}

#[test]
fn context_overflow_offers_a_new_session_with_the_draft() {
    let mut app = app();
    type_text(&mut app, "long text");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure: ApiError::ContextOverflow {
            current: 8300,
            max: 8192,
            message: "too long".into(),
        },
    });
    assert!(matches!(
        app.overlay().cloned(),
        Some(Overlay::ContextOverflow {
            current: 8300,
            max: 8192,
            ..
        })
    ));
    assert_eq!(open(&app).context_max, 8192);
    // Keys go to the dialog, not the composer.
    app.update(key(KeyCode::Char('x')));
    assert_eq!(app.composer_text(), "long text");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(app.overlay().is_none());
    assert_ne!(app.open_id(), Some(A));
    assert_eq!(app.composer_text(), "long text");
    assert!(cmds.iter().any(
        |c| matches!(c, Command::Persist(StoreOp::SaveDraft { session_id, .. }) if session_id == A)
    ));
}

#[test]
fn a_window_learned_from_an_overflow_holds_in_the_new_session() {
    let mut app = app();
    type_text(&mut app, "long text");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure: ApiError::ContextOverflow {
            current: 290,
            max: 300,
            message: "too long".into(),
        },
    });
    app.update(key(KeyCode::Enter));
    assert_ne!(app.open_id(), Some(A));
    assert_eq!(open(&app).context_max, 300, "not the 8192 default");
    // And in any session opened later.
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Enter));
    assert_eq!(open(&app).context_max, 300);
}

#[test]
fn not_connected_keeps_the_text() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app.update(AppEvent::StoreLoaded {
        sessions: vec![],
        last_open: None,
    });
    type_text(&mut app, "hi");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(sent(&cmds).is_none());
    assert_eq!(app.composer_text(), "hi");
    assert!(app.composer().send_error().unwrap().contains("connecting"));
}

#[test]
fn too_long_messages_are_refused_locally() {
    let mut app = app();
    app.update(AppEvent::Paste("x".repeat(MAX_CONTENT_CHARS + 1)));
    let cmds = app.update(key(KeyCode::Enter));
    assert!(sent(&cmds).is_none());
    assert!(app.composer().send_error().unwrap().contains("10000"));
}

#[test]
fn ctrl_r_toggles_the_role_and_system_messages_say_so() {
    let mut app = app();
    app.update(ctrl('r'));
    assert_eq!(app.composer().role(), Role::System);
    type_text(&mut app, "be brief");
    let (_, send_id, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.role, Some(Role::System));
    // One system message, then the role is the user's again, and the status says so.
    assert_eq!(app.composer().role(), Role::User);
    assert!(
        app.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("system message") && n.text.contains("Ctrl-r")),
        "{:?}",
        app.notice
    );
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", "", 0),
        prompt_tokens: 3,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("msg_1", "Ok.", 2),
        }),
    });
    type_text(&mut app, "and now a question");
    let (_, _, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.role, None, "sent as the user");
    // Toggling without sending still switches both ways.
    app.update(ctrl('r'));
    assert_eq!(app.composer().role(), Role::System);
    app.update(ctrl('r'));
    assert_eq!(app.composer().role(), Role::User);
}

#[test]
fn a_session_begun_with_a_system_message_gets_its_title_from_it() {
    let mut app = app();
    app.update(ctrl('n'));
    let id = app.open_id().unwrap().to_string();
    app.update(AppEvent::Stream {
        session_id: id.clone(),
        update: StreamUpdate::Unsupported,
    });
    app.update(ctrl('r'));
    type_text(&mut app, "You are a pirate.");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: id.clone(),
        send_id,
        reply: Message {
            session_id: id.clone(),
            ..reply("m", "Arr.", 2)
        },
        prompt_tokens: 5,
    });
    let title = |app: &App| {
        app.sessions_pane()
            .all()
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .title
            .clone()
    };
    assert_eq!(title(&app), "You are a pirate.");
    // The first user message takes over, as the store does.
    type_text(&mut app, "Where is the gold?");
    let (_, send_id, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.role, None);
    app.update(AppEvent::SendAccepted {
        session_id: id.clone(),
        send_id,
        reply: Message {
            session_id: id.clone(),
            ..reply("m2", "Buried.", 2)
        },
        prompt_tokens: 5,
    });
    assert_eq!(title(&app), "Where is the gold?");
}

#[test]
fn slash_system_sends_as_system() {
    let mut app = app();
    type_text(&mut app, "/system You are terse.");
    let (_, _, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.role, Some(Role::System));
    assert_eq!(body.content, "You are terse.");
}

#[test]
fn slash_meta_attaches_metadata_to_the_next_message_only() {
    let mut app = app();
    type_text(&mut app, "/meta {\"topic\":\"rust\"}");
    app.update(key(KeyCode::Enter));
    assert_eq!(
        app.composer().metadata().cloned(),
        Some(serde_json::json!({"topic": "rust"}))
    );
    assert!(app.composer().is_empty());
    type_text(&mut app, "hi");
    let (_, send_id, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.metadata, Some(serde_json::json!({"topic": "rust"})));
    assert!(app.composer().metadata().is_none());
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("m1", "ok", 1),
        prompt_tokens: 1,
    });
    type_text(&mut app, "/meta [1]");
    app.update(key(KeyCode::Enter));
    assert!(app.notice.as_ref().unwrap().text.contains("JSON object"));
    assert_eq!(app.composer_text(), "/meta [1]");
}

#[test]
fn slash_title_renames_the_session_and_later_messages_leave_it() {
    let mut app = app();
    app.update(ctrl('n'));
    let id = app.open_id().unwrap().to_string();
    app.update(AppEvent::Stream {
        session_id: id.clone(),
        update: StreamUpdate::Unsupported,
    });
    type_text(&mut app, "/title   Trip   planning ");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(
        cmds.contains(&Command::Persist(StoreOp::SetTitle {
            session_id: id.clone(),
            title: Some("Trip planning".into()),
        })),
        "{cmds:?}"
    );
    assert_eq!(app.composer_text(), "");
    // The store answers with the title as kept.
    app.update(AppEvent::TitleChanged {
        session_id: id.clone(),
        title: Some("Trip planning".into()),
        title_set: true,
    });
    assert_eq!(app.sessions_pane().all()[0].title, "Trip planning");
    assert!(app.sessions_pane().all()[0].title_set);
    assert!(app.notice.as_ref().unwrap().text.contains("title set"));
    // The first message no longer titles the session.
    type_text(&mut app, "What is Rust?");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: id.clone(),
        send_id,
        reply: Message {
            session_id: id.clone(),
            ..reply("m", "A language.", 3)
        },
        prompt_tokens: 4,
    });
    assert_eq!(app.sessions_pane().all()[0].title, "Trip planning");
    // `/title` alone clears it; the store says what the title is again.
    type_text(&mut app, "/title");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Persist(StoreOp::SetTitle {
        session_id: id.clone(),
        title: None,
    })));
    app.update(AppEvent::TitleChanged {
        session_id: id.clone(),
        title: Some("What is Rust?".into()),
        title_set: false,
    });
    assert_eq!(app.sessions_pane().all()[0].title, "What is Rust?");
    assert!(!app.sessions_pane().all()[0].title_set);
    assert!(app.notice.as_ref().unwrap().text.contains("title cleared"));
}

#[test]
fn slash_export_asks_the_store_worker_and_says_where_it_wrote() {
    let mut app = app();
    type_text(&mut app, "/export");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(
        cmds.contains(&Command::Export {
            session_id: A.into(),
            path: None,
        }),
        "{cmds:?}"
    );
    assert_eq!(app.composer_text(), "");
    type_text(&mut app, "/export ~/notes/rust.md");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Export {
        session_id: A.into(),
        path: Some("~/notes/rust.md".into()),
    }));
    app.update(AppEvent::Exported {
        session_id: A.into(),
        result: Ok(Exported {
            path: "./first.md".into(),
            messages: 12,
        }),
    });
    let notice = app.notice.clone().unwrap();
    assert_eq!(
        (notice.level, notice.text.as_str()),
        (Level::Info, "exported 12 messages to ./first.md")
    );
    app.update(AppEvent::Exported {
        session_id: A.into(),
        result: Err("./first.md already exists and was left as it is: give another name".into()),
    });
    let notice = app.notice.clone().unwrap();
    assert_eq!(notice.level, Level::Error);
    assert!(
        notice
            .text
            .starts_with("export failed: ./first.md already exists")
    );
}

#[test]
fn slash_new_help_delete_quit_and_unknown() {
    let mut app = app();
    type_text(&mut app, "/new");
    app.update(key(KeyCode::Enter));
    assert_ne!(app.open_id(), Some(A));
    assert_eq!(app.sessions_pane().all().len(), 4);

    type_text(&mut app, "/help");
    app.update(key(KeyCode::Enter));
    assert!(matches!(app.overlay(), Some(Overlay::Help { .. })));
    app.update(key(KeyCode::Esc));
    assert!(app.overlay().is_none());

    type_text(&mut app, "/delete");
    app.update(key(KeyCode::Enter));
    let open_id = app.open_id().unwrap().to_string();
    assert!(
        matches!(app.overlay(), Some(Overlay::ConfirmDelete { session_id, .. }) if *session_id == open_id)
    );
    app.update(key(KeyCode::Esc));
    assert_eq!(
        app.composer_text(),
        "/delete",
        "a cancelled dialog loses nothing"
    );
    app.composer.clear();

    type_text(&mut app, "/frobnicate");
    app.update(key(KeyCode::Enter));
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("unknown command /frobnicate")
    );
    app.update(key(KeyCode::Esc)); // clears the notice
    app.composer.clear();

    type_text(&mut app, "//literal");
    let (_, _, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(body.content, "/literal");

    let mut app = self::app();
    type_text(&mut app, "/quit");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Quit));
    assert!(app.quit);
}

#[test]
fn ctrl_c_stops_a_stream_and_otherwise_quits() {
    let mut app = app();
    send_accepted(&mut app, "hello", "msg_1", 1);
    app.update(delta("msg_1", 0, "partial"));
    // The service is asked to stop it; this one cannot (no cancel endpoint): the reply is
    // no longer watched instead.
    let cmds = app.update(ctrl('c'));
    assert!(cmds.contains(&Command::CancelReply {
        session_id: A.into(),
        message_id: "msg_1".into()
    }));
    let cmds = app.update(AppEvent::CancelAnswered {
        session_id: A.into(),
        message_id: "msg_1".into(),
        outcome: CancelOutcome::Unsupported,
    });
    assert!(!app.quit);
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert!(cmds.iter().any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { message, .. }) if message.content == "partial")));
    // Later deltas for the stopped reply are ignored.
    app.update(delta("msg_1", 1, " more"));
    assert_eq!(open(&app).content(1), "partial");
    type_text(&mut app, "draft");
    // Right after the reply ended, a first Ctrl-C only says how to quit.
    app.update(ctrl('c'));
    assert!(!app.quit);
    let cmds = app.update(ctrl('c'));
    assert!(app.quit);
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: A.into(),
        text: "draft".into()
    })));
    assert!(cmds.contains(&Command::Quit));
}

#[test]
fn esc_stops_following_and_end_follows_again() {
    let mut app = app();
    for i in 0..30 {
        app.update(AppEvent::Paste(format!("line {i}\n\n")));
    }
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("r", "", 0),
        prompt_tokens: 1,
    });
    assert!(open(&app).follow);
    app.update(key(KeyCode::Esc));
    assert!(!open(&app).follow);
    let top = open(&app).top;
    app.update(delta("r", 0, "new text\nmore\nlines"));
    let l = app.layout();
    assert_eq!(
        open(&app).effective_top(l.transcript_inner.width, l.transcript_inner.height),
        top
    );
    app.update(key(KeyCode::Tab)); // sessions
    app.update(key(KeyCode::End));
    assert!(open(&app).follow);
}

#[test]
fn the_follow_hint_names_a_key_that_follows_from_the_composer() {
    let mut app = app();
    for i in 0..30 {
        app.update(AppEvent::Paste(format!("line {i}\n\n")));
    }
    app.update(key(KeyCode::Enter));
    app.update(key(KeyCode::PageUp));
    assert!(!open(&app).follow);
    assert_eq!(app.focus, Focus::Composer);
    // An empty draft: End follows from the composer, as the hint says.
    assert_eq!(app.follow_hint(), "End");
    app.update(key(KeyCode::End));
    assert!(open(&app).follow);
    // With a draft, End moves the composer's cursor; the hint names PgDn instead.
    app.update(key(KeyCode::PageUp));
    type_text(&mut app, "ab");
    app.update(key(KeyCode::Home));
    assert!(!open(&app).follow);
    assert_eq!(app.follow_hint(), "PgDn (to the end)");
    app.update(key(KeyCode::End));
    assert!(!open(&app).follow);
    assert_eq!(app.composer_text(), "ab");
    // A plain character bound to scroll_bottom still types in an empty composer.
    let mut keys = KeyBindings::default();
    keys.scroll_bottom = crate::keys::Binding(vec!["G".parse().unwrap()]);
    app.keys = keys;
    app.update(key(KeyCode::Backspace));
    app.update(key(KeyCode::Backspace));
    type_text(&mut app, "G");
    assert_eq!(app.composer_text(), "G");
}

#[test]
fn page_keys_and_the_wheel_scroll_and_the_bottom_resumes_following() {
    let mut app = app();
    for i in 0..40 {
        app.update(AppEvent::Paste(format!("line {i}\n\n")));
    }
    app.update(key(KeyCode::Enter));
    app.update(key(KeyCode::PageUp));
    assert!(!open(&app).follow);
    let top = open(&app).top;
    app.update(AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        column: 40,
        row: 10,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(open(&app).top, top - 3);
    for _ in 0..10 {
        app.update(key(KeyCode::PageDown));
    }
    assert!(open(&app).follow);
}

#[test]
fn sessions_pane_moves_opens_and_filters() {
    let mut app = app();
    app.update(key(KeyCode::Tab));
    assert_eq!(app.focus, Focus::Sessions);
    app.update(key(KeyCode::Down));
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(B));
    assert_eq!(app.focus, Focus::Composer);
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == B))
    );
    assert!(cmds.contains(&Command::OpenStream {
        session_id: B.into()
    }));
    assert!(cmds.contains(&Command::Persist(StoreOp::SetLastOpen(B.into()))));
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: A.into(),
        text: String::new()
    })));

    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Sessions);
    app.update(key(KeyCode::Char('/')));
    assert!(app.sessions_pane().is_filtering());
    type_text(&mut app, "thi");
    assert_eq!(app.sessions_pane().visible().len(), 1);
    app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(C));
    assert!(!app.sessions_pane().is_filtering());
}

#[test]
fn a_filter_that_matches_nothing_says_so_and_esc_clears_it() {
    let mut app = app();
    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Sessions);
    app.update(key(KeyCode::Char('/')));
    type_text(&mut app, "zzz");
    assert!(app.sessions_pane().visible().is_empty());
    app.update(key(KeyCode::Enter));
    // Still filtering, with the reason on the status line; the draft got nothing.
    assert!(app.sessions_pane().is_filtering());
    assert!(
        app.notice
            .as_ref()
            .is_some_and(|n| n.text.contains("no session matches “zzz”")),
        "{:?}",
        app.notice
    );
    assert_eq!(app.composer_text(), "");
    app.update(key(KeyCode::Esc));
    assert!(!app.sessions_pane().is_filtering());
    assert_eq!(app.sessions_pane().visible().len(), 3);
    assert_eq!(app.focus, Focus::Sessions);

    // Opening a match brings the whole list back, the cursor on the session opened.
    app.update(key(KeyCode::Char('/')));
    type_text(&mut app, "sec");
    app.update(key(KeyCode::Enter));
    assert!(!app.sessions_pane().is_filtering());
    assert_eq!(app.open_id(), Some(B));
    assert_eq!(app.sessions_pane().visible().len(), 3);
    assert_eq!(
        app.sessions_pane().visible()[app.sessions_pane().cursor()].id,
        B
    );
}

#[test]
fn a_click_on_a_session_opens_it() {
    let mut app = app();
    let list = app.layout().session_list.unwrap();
    // Second row pair = second session.
    app.update(AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: list.x + 2,
        row: list.y + 2,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.open_id(), Some(B));
}

#[test]
fn delete_asks_first_and_moves_to_the_next_session() {
    let mut app = app();
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Char('d')));
    assert!(
        matches!(app.overlay(), Some(Overlay::ConfirmDelete { session_id, title, from_composer: false }) if session_id == A && title == "first")
    );
    let cmds = app.update(key(KeyCode::Char('n')));
    assert!(app.overlay().is_none());
    assert!(cmds.is_empty());
    app.update(key(KeyCode::Delete));
    let cmds = app.update(key(KeyCode::Char('y')));
    assert_eq!(
        cmds,
        vec![Command::Delete {
            session_id: A.into()
        }]
    );
    assert!(app.sessions_pane().is_deleting(A));
    let cmds = app.update(AppEvent::Deleted {
        session_id: A.into(),
    });
    assert!(cmds.contains(&Command::Persist(StoreOp::DeleteSession(A.into()))));
    assert!(
        cmds.contains(&Command::RefreshUsage),
        "the sessions gauge moves"
    );
    assert_eq!(app.open_id(), Some(B));
    assert_eq!(app.sessions_pane().all().len(), 2);
}

#[test]
fn a_stale_session_is_removed_with_a_notice() {
    let mut app = app();
    app.update(AppEvent::DeleteFailed {
        session_id: C.into(),
        failure: ApiError::SessionNotFound {
            message: "session not found".into(),
        },
    });
    assert_eq!(app.sessions_pane().all().len(), 2);
    assert_eq!(app.open_id(), Some(A));
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("already deleted")
    );
    app.update(AppEvent::DeleteFailed {
        session_id: B.into(),
        failure: ApiError::Network("refused".into()),
    });
    assert_eq!(
        app.sessions_pane().all().len(),
        2,
        "other failures keep the session"
    );
    assert_eq!(app.notice.as_ref().unwrap().level, Level::Error);
}

#[test]
fn deleting_the_last_session_starts_a_new_one() {
    let mut app = app();
    for id in [A, B, C] {
        app.update(AppEvent::Deleted {
            session_id: id.into(),
        });
    }
    assert_eq!(app.sessions_pane().all().len(), 1);
    assert_eq!(app.sessions_pane().all()[0].title, NEW_SESSION_TITLE);
    assert_eq!(
        app.open_id(),
        Some(app.sessions_pane().all()[0].id.as_str())
    );
}

#[test]
fn usage_polls_update_and_failures_mark_the_gauges_stale() {
    let mut app = app();
    let usage: convo_client::api::Usage = serde_json::from_value(serde_json::json!({
        "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
        "requests": {"used": 10, "limit": 50000, "percentage": 0.02},
        "tokens": {"used": 100, "limit": 10000000, "percentage": 0.001},
        "sessions": {"active": 3, "limit": 500, "percentage": 0.6},
        "tier": "pro"
    }))
    .unwrap();
    app.update(AppEvent::UsageFetched(usage.clone()));
    assert_eq!(app.usage.usage.as_ref().unwrap().tier, "pro");
    assert!(app.usage.error.is_none());
    app.update(AppEvent::UsageFailed(ApiError::Network(
        "connection refused".into(),
    )));
    assert_eq!(
        app.usage.error.as_deref(),
        Some("network error: connection refused")
    );
    assert_eq!(app.link, Link::Down("connection refused".into()));
    assert!(app.usage.usage.is_some(), "the last values stay");
    app.update(AppEvent::UsageFetched(usage.clone()));
    assert!(app.usage.error.is_none());
    assert_eq!(app.link, Link::Up);
    // Refused by the request limit: the limit is reached until a poll says otherwise.
    app.update(AppEvent::UsageFailed(ApiError::QuotaExceeded {
        limit: Some("requests".into()),
        reset_at: Some("2026-11-22T13:00:00Z".into()),
        retry_after: None,
        message: "quota".into(),
    }));
    assert_eq!(
        app.usage.reached,
        Some(LimitReached {
            limit: "requests".into(),
            reset_at: Some(Utc.with_ymd_and_hms(2026, 11, 22, 13, 0, 0).unwrap()),
        })
    );
    assert!(app.usage.error.is_none(), "not stale: the limit is known");
    assert_eq!(app.link, Link::Up, "a refusal by quota is an answer");
    app.update(AppEvent::UsageFetched(usage));
    assert_eq!(app.usage.reached, None);
    app.update(key(KeyCode::Tab));
    assert_eq!(
        app.update(key(KeyCode::Char('r'))),
        vec![Command::RefreshUsage]
    );
}

#[test]
fn help_opens_from_any_pane_but_question_mark_types_in_the_composer() {
    let mut app = app();
    app.update(key(KeyCode::Char('?')));
    assert!(app.overlay().is_none());
    assert_eq!(app.composer_text(), "?");
    app.update(key(KeyCode::F(1)));
    assert!(matches!(app.overlay(), Some(Overlay::Help { .. })));
    app.update(key(KeyCode::Down));
    assert!(matches!(app.overlay(), Some(Overlay::Help { scroll: 1 })));
    app.update(key(KeyCode::Char('x')));
    assert!(app.overlay().is_none());
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Char('?')));
    assert!(matches!(app.overlay(), Some(Overlay::Help { .. })));
}

#[test]
fn q_quits_outside_the_composer_only() {
    let mut app = app();
    app.update(key(KeyCode::Char('q')));
    assert!(!app.quit);
    app.update(key(KeyCode::Tab));
    let cmds = app.update(key(KeyCode::Char('q')));
    assert!(app.quit);
    assert!(cmds.contains(&Command::Quit));
    // The draft ("q" typed earlier) is saved on the way out.
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: A.into(),
        text: "q".into()
    })));
}

#[test]
fn y_copies_the_selected_reply() {
    let mut app = app();
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages: vec![],
        draft: None,
        rendered: None,
    });
    type_text(&mut app, "hello");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("m", "the answer", 2),
        prompt_tokens: 1,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("m", "the answer", 2),
        }),
    });
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Tab));
    assert_eq!(app.focus, Focus::Transcript);
    app.update(key(KeyCode::Up)); // selects the last item, the reply
    let cmds = app.update(key(KeyCode::Char('y')));
    assert_eq!(cmds, vec![Command::CopyToClipboard("the answer".into())]);
    app.update(key(KeyCode::Up));
    let cmds = app.update(key(KeyCode::Char('y')));
    assert_eq!(cmds, vec![Command::CopyToClipboard("hello".into())]);
}

#[test]
fn a_loaded_transcript_brings_its_draft() {
    let mut app = app();
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Enter));
    app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![StoredMessage {
            role: Role::User,
            content: "old".into(),
            tokens: 1,
            message_id: None,
            created_at: t0(),
            status: MessageStatus::Complete,
            finish_reason: None,
        }],
        draft: Some("unsent words".into()),
        rendered: None,
    });
    assert_eq!(open(&app).items.len(), 1);
    assert_eq!(app.composer_text(), "unsent words");
    // A transcript for another session is ignored.
    app.update(AppEvent::TranscriptLoaded {
        session_id: C.into(),
        messages: vec![],
        draft: Some("nope".into()),
        rendered: None,
    });
    assert_eq!(app.composer_text(), "unsent words");
}

#[test]
fn stream_errors_and_snapshots() {
    let mut app = app();
    send_accepted(&mut app, "hello", "r", 1);
    app.update(delta("r", 0, "ab"));
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Snapshot {
            session_id: A.into(),
            message_id: "r".into(),
            seq: 3,
            content: "abcdef".into(),
        }),
    });
    app.update(delta("r", 2, "X")); // already in the snapshot
    app.update(delta("r", 3, "g"));
    assert_eq!(open(&app).content(1), "abcdefg");
    app.update(error_event("r", "internal", "engine failed"));
    assert_eq!(
        open(&app).items[1].state,
        EntryState::Failed("internal".into())
    );
    assert!(open(&app).pending.is_none());
    let notice = &app.notice.as_ref().unwrap().text;
    assert!(notice.contains("engine failed"), "{notice}");
    // The service rolled the turn back: the message is marked not sent, counts for nothing,
    // and its text is back in the composer.
    assert!(notice.contains("back in the composer"), "{notice}");
    assert_eq!(
        open(&app).items[0].state,
        EntryState::Failed("not sent".into())
    );
    assert_eq!(open(&app).items[0].tokens, 0);
    assert_eq!(app.composer_text(), "hello");
}

#[test]
fn a_reply_failed_for_a_deleted_session_leaves_the_message_alone() {
    let mut app = app();
    send_accepted(&mut app, "hello", "r", 1);
    app.update(error_event("r", "session_not_found", "deleted"));
    assert_eq!(open(&app).items[0].state, EntryState::Complete);
    assert_eq!(app.composer_text(), "");
}

#[test]
fn stream_state_changes_are_tracked() {
    let mut app = app();
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Disconnected {
            error: ApiError::Network("reset".into()),
            retry_in: None,
        },
    });
    assert_eq!(
        open(&app).stream,
        StreamState::Down("network error: reset".into())
    );
    type_text(&mut app, "hi");
    let (_, _, body) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    assert_eq!(
        body.stream,
        Some(false),
        "with the stream down, fall back to a plain POST"
    );
}

#[test]
fn resize_and_clock_and_connect_failure() {
    let mut app = app();
    app.update(AppEvent::Resize(200, 60));
    assert_eq!(app.size, Rect::new(0, 0, 200, 60));
    let later = t0() + chrono::Duration::minutes(3);
    app.update(AppEvent::Clock(later));
    assert_eq!(app.now, later);
    app.update(AppEvent::ConnectFailed("port in use".into()));
    assert!(matches!(app.connection, Connection::Failed(_)));
    assert!(app.notice.as_ref().unwrap().text.contains("port in use"));
}

#[test]
fn f2_and_f3_open_the_views_and_esc_comes_back() {
    let mut app = app();
    let out = app.update(key(KeyCode::F(2)));
    assert_eq!(app.view, crate::app::View::Metrics);
    assert!(out.iter().any(|c| matches!(c, Command::Metrics(_))));
    app.update(key(KeyCode::F(3)));
    assert_eq!(app.view, crate::app::View::Wallet);
    app.update(key(KeyCode::Esc));
    assert_eq!(app.view, crate::app::View::Chat);
}

#[test]
fn server_text_is_sanitised_before_it_reaches_the_screen() {
    let mut app = app();
    send_accepted(&mut app, "hi", "r", 1);
    app.update(delta(
        "r",
        0,
        "a\u{1b}[31mred\u{1b}[0m \u{202e}evil\u{7} \u{1b}]52;c;AAAA\u{7}done",
    ));
    app.update(error_event("r", "internal", "bad\u{1b}[2Jthing"));
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    terminal.draw(|f| crate::view::draw(f, &app)).unwrap();
    let buf = terminal.backend().buffer();
    let text: String = buf.content().iter().map(|c| c.symbol()).collect();
    assert!(text.contains("ared evil"), "{text}");
    for c in text.chars() {
        assert!(!c.is_control(), "control character {c:?} on screen");
        assert!(
            !('\u{202a}'..='\u{202e}').contains(&c) && !('\u{2066}'..='\u{2069}').contains(&c),
            "bidi override on screen"
        );
    }
    assert!(!text.contains("52;c"), "an OSC sequence leaked: {text}");
}

#[test]
fn a_reply_done_before_the_post_answers_is_stored_after_the_message_and_once() {
    let mut app = app();
    type_text(&mut app, "quick");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(delta("r", 0, "fast reply"));
    let done = AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("r", "fast reply", 2),
        }),
    };
    let early = app.update(done.clone());
    assert!(
        !early
            .iter()
            .any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { .. })))
    );
    let cmds = app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("r", "", 0),
        prompt_tokens: 1,
    });
    let roles: Vec<Role> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::Persist(StoreOp::AppendMessage { message, .. }) => Some(message.role),
            _ => None,
        })
        .collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    assert!(open(&app).pending.is_none());
    // A repeated done changes nothing.
    let again = app.update(done);
    assert!(!again.iter().any(|c| matches!(c, Command::Persist(_))));
    assert_eq!(
        app.sessions_pane()
            .all()
            .iter()
            .find(|s| s.id == A)
            .unwrap()
            .tokens,
        23
    );
}

#[test]
fn text_typed_before_the_store_loads_is_kept() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    type_text(&mut app, "early words");
    app.update(AppEvent::StoreLoaded {
        sessions: vec![session(A, "first", 1, 0)],
        last_open: Some(A.into()),
    });
    assert_eq!(app.composer_text(), "early words");
    // The stored draft does not overwrite what was typed.
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages: vec![],
        draft: Some("old draft".into()),
        rendered: None,
    });
    assert_eq!(app.composer_text(), "early words");
}

#[test]
fn quitting_before_the_store_loads_waits_to_save_the_draft() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    type_text(&mut app, "keep me");
    let cmds = app.update(ctrl('c'));
    assert!(!app.quit);
    assert!(cmds.is_empty());
    let cmds = app.update(AppEvent::StoreLoaded {
        sessions: vec![],
        last_open: None,
    });
    assert!(app.quit);
    let id = app.open_id().unwrap().to_string();
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: id,
        text: "keep me".into()
    })));
    assert!(cmds.contains(&Command::Quit));
}

#[test]
fn typed_line_breaks_are_kept_on_screen() {
    let mut app = app();
    type_text(&mut app, "roses are red");
    app.update(alt(KeyCode::Enter));
    type_text(&mut app, "violets are blue");
    app.update(key(KeyCode::Enter));
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    terminal.draw(|f| crate::view::draw(f, &app)).unwrap();
    let buf = terminal.backend().buffer();
    let rows: Vec<String> = (0..24)
        .map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect();
    let red = rows
        .iter()
        .position(|r| r.contains("roses are red"))
        .expect("first line shown");
    assert!(!rows[red].contains("violets"), "joined: {}", rows[red]);
    assert!(rows[red + 1].contains("violets are blue"), "{rows:#?}");
    // What is sent is what was typed.
    assert_eq!(open(&app).content(0), "roses are red\nviolets are blue");
}

fn draft_edits(cmds: &[Command]) -> Vec<(String, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Persist(StoreOp::DraftEdited { session_id, text }) => {
                Some((session_id.clone(), text.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn every_edit_of_the_composer_is_handed_to_the_store_for_a_debounced_save() {
    let mut app = app();
    let cmds = type_text(&mut app, "hi");
    assert_eq!(
        draft_edits(&cmds),
        vec![(A.into(), "h".into()), (A.into(), "hi".into())]
    );
    let cmds = app.update(key(KeyCode::Backspace));
    assert_eq!(draft_edits(&cmds), vec![(A.into(), "h".into())]);
    let cmds = app.update(AppEvent::Paste("ello".into()));
    assert_eq!(draft_edits(&cmds), vec![(A.into(), "hello".into())]);
    // Events that leave the text alone write nothing.
    let cmds = app.update(AppEvent::Clock(t0()));
    assert!(draft_edits(&cmds).is_empty());
    let cmds = app.update(key(KeyCode::Left));
    assert!(draft_edits(&cmds).is_empty());
}

#[test]
fn sending_clears_the_stored_draft_at_once() {
    let mut app = app();
    type_text(&mut app, "hello");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: A.into(),
        text: String::new(),
    })));
    assert!(draft_edits(&cmds).is_empty());
}

#[test]
fn no_draft_edit_before_the_stored_draft_is_read() {
    // Opening B empties the composer before B's stored draft arrives: that must not
    // overwrite B's draft with nothing.
    let mut app = app();
    type_text(&mut app, "for A");
    app.focus = Focus::Sessions;
    app.update(key(KeyCode::Down));
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(B));
    assert!(draft_edits(&cmds).is_empty());
    let cmds = app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![],
        draft: Some("kept".into()),
        rendered: None,
    });
    assert!(draft_edits(&cmds).is_empty());
    assert_eq!(app.composer_text(), "kept");
    app.focus = Focus::Composer;
    let cmds = type_text(&mut app, "!");
    assert_eq!(draft_edits(&cmds), vec![(B.into(), "kept!".into())]);
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

#[test]
fn a_transcript_rendered_off_the_ui_task_is_adopted_not_rebuilt() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: vec![session(A, "first", 1, 20)],
        last_open: Some(A.into()),
    });
    // A message sent before the stored ones arrived stays after them.
    type_text(&mut app, "sent early");
    app.update(key(KeyCode::Enter));
    let messages = vec![
        stored_msg(Role::User, "question"),
        stored_msg(Role::Assistant, "answer"),
    ];
    // The worker's model: marked so that a rebuild from `messages` would show.
    let mut marked = messages.clone();
    marked[1].content = "answer, as the worker rendered it".into();
    let rendered = crate::event::Rendered::new(render_stored(&marked));
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages,
        draft: None,
        rendered: Some(rendered.clone()),
    });
    assert!(rendered.take().is_none(), "taken once");
    let open = open(&app);
    let shown: Vec<&str> = open
        .items
        .iter()
        .map(|i| open.transcript.get(i.entry).unwrap().content.as_str())
        .collect();
    assert_eq!(
        shown,
        [
            "question",
            "answer, as the worker rendered it",
            "sent early",
            ""
        ]
    );
    // The transcript holds the one copy of each message.
    assert_eq!(open.content(1), "answer, as the worker rendered it");
    assert_eq!(open.transcript.len(), 4);
}

#[test]
fn a_rendered_transcript_that_does_not_match_is_rebuilt() {
    let mut app2 = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app2.update(AppEvent::StoreLoaded {
        sessions: vec![session(B, "b", 1, 0)],
        last_open: Some(B.into()),
    });
    app2.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![stored_msg(Role::User, "one"), stored_msg(Role::User, "two")],
        draft: None,
        rendered: Some(crate::event::Rendered::new(render_stored(&[stored_msg(
            Role::User,
            "only one",
        )]))),
    });
    let open = open(&app2);
    let shown: Vec<&str> = open
        .items
        .iter()
        .map(|i| open.transcript.get(i.entry).unwrap().content.as_str())
        .collect();
    assert_eq!(shown, ["one", "two"]);
}

#[test]
fn a_finished_reply_clears_the_error_that_said_one_was_coming() {
    let mut app = app();
    type_text(&mut app, "first");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    type_text(&mut app, "second");
    app.update(key(KeyCode::Enter));
    assert_eq!(app.composer().send_error(), Some(STILL_COMING));
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", "", 0),
        prompt_tokens: 3,
    });
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("msg_1", "Done.", 2),
        }),
    });
    assert!(!open(&app).is_streaming());
    assert_eq!(
        app.composer().send_error(),
        None,
        "the reply it waited for has come"
    );
    assert_eq!(app.composer_text(), "second", "the draft is kept");
}

#[test]
fn an_informational_notice_clears_on_the_next_key_and_an_error_stays() {
    let mut app = app();
    app.notify(Level::Info, "copied");
    app.update(key(KeyCode::Char('a')));
    assert_eq!(app.notice, None);
    app.notify(Level::Error, "delete failed");
    app.update(key(KeyCode::Char('b')));
    assert!(
        app.notice.is_some(),
        "errors stay until Esc or their cause goes"
    );
    app.update(key(KeyCode::Esc));
    assert_eq!(app.notice, None);
}

#[test]
fn stopping_a_reply_clears_the_error_that_said_one_was_coming() {
    let mut app = app();
    type_text(&mut app, "first");
    app.update(key(KeyCode::Enter));
    assert!(open(&app).is_streaming());
    type_text(&mut app, "second");
    app.update(key(KeyCode::Enter));
    assert!(
        app.composer()
            .send_error()
            .is_some_and(|e| e.contains("still coming"))
    );
    app.update(ctrl('c'));
    assert!(!open(&app).is_streaming());
    assert_eq!(app.composer().send_error(), None);
    assert_eq!(app.composer_text(), "second");
    assert!(!app.quit);
}

/// Types `text`, sends it, and has the service accept it in A with reply `reply_id` (empty so
/// far): the send's id.
pub(super) fn send_accepted(app: &mut App, text: &str, reply_id: &str, prompt_tokens: u64) -> u64 {
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

pub(super) fn stream(update: StreamUpdate) -> AppEvent {
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

/// A message sent, accepted, and its reply streaming "Partial " when the stream drops.
fn cut_mid_reply() -> App {
    let mut app = app();
    send_accepted(&mut app, "tell me", "r", 2);
    app.update(delta("r", 0, "Partial "));
    let cmds = app.update(stream(StreamUpdate::Disconnected {
        error: ApiError::Network("reset".into()),
        retry_in: None,
    }));
    assert!(stored_reply(&cmds).is_none(), "not final yet");
    app
}

#[test]
fn a_reply_cut_off_by_the_stream_reads_interrupted_and_no_longer_holds_the_composer() {
    let app = cut_mid_reply();
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Interrupted);
    assert_eq!(o.content(1), "Partial ");
    assert!(o.pending.is_none() && o.cut_off.is_some());
    assert!(!o.is_streaming());
}

#[test]
fn after_the_reconnect_the_history_settles_a_cut_off_reply() {
    // Finished meanwhile: the stored reply is adopted whole, and stored once.
    let mut app = cut_mid_reply();
    let cmds = app.update(stream(StreamUpdate::Connected));
    assert!(cmds.contains(&Command::FetchHistory {
        session_id: A.into()
    }));
    let mut user = reply("u", "tell me", 2);
    user.role = Role::User;
    let cmds = app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Messages(vec![user.clone(), reply("r", "Partial and whole.", 4)]),
    });
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Complete);
    assert_eq!(o.content(1), "Partial and whole.");
    assert!(o.pending.is_none() && o.cut_off.is_none());
    let kept = stored_reply(&cmds).expect("the whole reply is stored");
    assert_eq!(kept.status, MessageStatus::Complete);
    assert_eq!(kept.content, "Partial and whole.");

    // Dropped by the service (neither message stored): interrupted for good, stored so.
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    let cmds = app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Messages(vec![]),
    });
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Failed("not kept".into()));
    assert!(o.cut_off.is_none());
    let kept = stored_reply(&cmds).expect("what arrived is stored");
    assert_eq!(
        (kept.status, kept.content.as_str()),
        (MessageStatus::Failed, "Partial ")
    );
    // The message itself is marked not sent, and offered again.
    assert_eq!(o.items[0].state, EntryState::Failed("not sent".into()));
    assert_eq!(o.context_tokens(), 0);
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Persist(StoreOp::MarkUnsent { message, .. }) if message.content == "tell me")));
    assert_eq!(app.composer_text(), "tell me");
    assert!(app.notice.as_ref().unwrap().text.contains("did not keep"));

    // A server without the history endpoint: interrupted, with a note saying why.
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    let cmds = app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Unsupported,
    });
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert_eq!(
        stored_reply(&cmds).map(|m| m.status),
        Some(MessageStatus::Interrupted)
    );
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("cannot list past messages")
    );

    // The fetch failed: nothing is decided; the next reconnect asks again.
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    let cmds = app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Failed("reset".into()),
    });
    assert!(stored_reply(&cmds).is_none());
    assert!(open(&app).cut_off.is_some());
}

#[test]
fn a_cut_off_reply_still_being_generated_resumes_from_the_snapshot() {
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    // The message is stored and its reply not yet: it is still coming.
    let mut user = reply("u", "tell me", 2);
    user.role = Role::User;
    let cmds = app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Messages(vec![user]),
    });
    assert!(stored_reply(&cmds).is_none());
    assert!(open(&app).cut_off.is_some());
    app.update(stream(StreamUpdate::Event(StreamEvent::Snapshot {
        session_id: A.into(),
        message_id: "r".into(),
        seq: 3,
        content: "Partial answer, ".into(),
    })));
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Streaming);
    assert!(o.pending.is_some() && o.cut_off.is_none() && o.is_streaming());
    app.update(delta("r", 3, "done."));
    let cmds = app.update(stream(StreamUpdate::Event(StreamEvent::Done {
        message: reply("r", "Partial answer, done.", 5),
    })));
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(
        stored_reply(&cmds).map(|m| m.content),
        Some("Partial answer, done.".to_string())
    );
    assert!(open(&app).pending.is_none());
}

#[test]
fn a_gap_in_the_deltas_does_not_resume_a_cut_off_reply_but_its_done_does() {
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    app.update(delta("r", 5, "far ahead"));
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert_eq!(open(&app).content(1), "Partial ");
    app.update(stream(StreamUpdate::Event(StreamEvent::Done {
        message: reply("r", "Partial and the rest", 4),
    })));
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(open(&app).content(1), "Partial and the rest");
}

/// Ctrl-C on the reply in flight `reply_id` of A, against a server without the cancel: the
/// reply is no longer watched (the service finishes it).
fn stop_without_cancel(app: &mut App, reply_id: &str) {
    app.update(ctrl('c'));
    app.update(AppEvent::CancelAnswered {
        session_id: A.into(),
        message_id: reply_id.into(),
        outcome: CancelOutcome::Unsupported,
    });
}

#[test]
fn a_stopped_reply_takes_no_more_deltas_but_is_shown_whole_once_stored() {
    let mut app = app();
    send_accepted(&mut app, "tell me", "r", 2);
    app.update(delta("r", 0, "Partial "));
    stop_without_cancel(&mut app, "r");
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    app.update(delta("r", 1, "more"));
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert_eq!(open(&app).content(1), "Partial ");
    app.update(stream(StreamUpdate::Event(StreamEvent::Done {
        message: reply("r", "Partial more", 2),
    })));
    app.update(error_event("r", "internal", "late"));
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(open(&app).content(1), "Partial more");
}

#[test]
fn a_stream_lost_before_the_post_answers_leaves_the_reply_to_the_history() {
    let mut app = app();
    type_text(&mut app, "tell me");
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(delta("r", 0, "Part"));
    app.update(stream(StreamUpdate::Disconnected {
        error: ApiError::Network("reset".into()),
        retry_in: None,
    }));
    // The POST is still out: the send stays pending, the reply reads interrupted.
    assert!(open(&app).pending.is_some());
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    app.update(stream(StreamUpdate::Connected));
    let cmds = app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("r", "", 0),
        prompt_tokens: 2,
    });
    assert!(cmds.contains(&Command::FetchHistory {
        session_id: A.into()
    }));
    assert!(open(&app).pending.is_none() && open(&app).cut_off.is_some());
}

#[test]
fn quitting_or_leaving_keeps_a_cut_off_reply_as_interrupted() {
    let mut app = cut_mid_reply();
    let cmds = app.update(ctrl('c'));
    assert!(app.quit, "nothing is streaming: Ctrl-C quits");
    assert_eq!(
        stored_reply(&cmds).map(|m| (m.status, m.content)),
        Some((MessageStatus::Interrupted, "Partial ".to_string()))
    );

    let mut app = cut_mid_reply();
    let cmds = app.update(ctrl('n'));
    assert_eq!(
        stored_reply(&cmds).map(|m| m.status),
        Some(MessageStatus::Interrupted)
    );
}

fn warm_asks(cmds: &[Command]) -> usize {
    cmds.iter()
        .filter(|c| **c == Command::WarmTokenCounter)
        .count()
}

#[test]
fn the_first_edit_of_the_composer_asks_for_the_token_tables_once() {
    let mut app = app();
    // Moving around changes no text: nothing to warm yet.
    let mut cmds = app.update(key(KeyCode::Tab));
    cmds.extend(app.update(key(KeyCode::Tab)));
    cmds.extend(app.update(key(KeyCode::Tab)));
    assert_eq!(app.focus, Focus::Composer);
    cmds.extend(app.update(key(KeyCode::Left)));
    assert_eq!(warm_asks(&cmds), 0);
    let cmds = type_text(&mut app, "h");
    assert_eq!(warm_asks(&cmds), 1, "the first key that changes the text");
    let mut cmds = type_text(&mut app, "ello");
    cmds.extend(app.update(key(KeyCode::Backspace)));
    cmds.extend(app.update(AppEvent::Paste("more".into())));
    cmds.extend(app.update(key(KeyCode::Enter)));
    assert_eq!(warm_asks(&cmds), 0, "only once");

    // A paste is an edit too.
    let mut app = crate::app::App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    let cmds = app.update(AppEvent::Paste("pasted".into()));
    assert_eq!(warm_asks(&cmds), 1);
}

#[test]
fn a_title_from_a_markdown_message_is_plain_text() {
    let mut app = app();
    app.update(ctrl('n'));
    let id = app.open_id().unwrap().to_string();
    app.update(AppEvent::Paste(
        "## **What** is   `Rust`? [see](https://rust-lang.org)\nmore".into(),
    ));
    let (_, send_id, _) = sent(&app.update(key(KeyCode::Enter))).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: id.clone(),
        send_id,
        reply: Message {
            session_id: id.clone(),
            ..reply("m", "", 0)
        },
        prompt_tokens: 4,
    });
    assert_eq!(app.sessions_pane().all()[0].title, "What is Rust? see");
    // Shortened as the store keeps it, so the list reads the same after a restart.
    let long = "`é` ".repeat(40);
    assert_eq!(
        title_from(&long).chars().count(),
        convo_client::local_store::TITLE_CHARS
    );
    assert!(title_from(&long).ends_with('…'));
    assert_eq!(
        Some(title_from(&long)),
        convo_client::local_store::title_of(&long)
    );
}

#[test]
fn cancelling_the_delete_dialog_gives_the_composer_back_as_it_was() {
    for cancel in [key(KeyCode::Esc), key(KeyCode::Char('n'))] {
        let mut app = app();
        type_text(&mut app, "/delete  ");
        let cmds = app.update(key(KeyCode::Enter));
        assert!(matches!(
            app.overlay().cloned(),
            Some(Overlay::ConfirmDelete {
                from_composer: true,
                ..
            })
        ));
        assert!(!cmds.iter().any(|c| matches!(c, Command::Delete { .. })));
        let cmds = app.update(cancel);
        assert!(app.overlay().is_none());
        assert!(!cmds.iter().any(|c| matches!(c, Command::Delete { .. })));
        assert_eq!(
            app.composer_text(),
            "/delete  ",
            "the text as typed, to edit"
        );
        assert_eq!(app.focus, Focus::Composer);
    }

    // Confirmed, the command is done with: the composer empties and the delete goes out.
    let mut app = self::app();
    type_text(&mut app, "/delete");
    app.update(key(KeyCode::Enter));
    let cmds = app.update(key(KeyCode::Char('y')));
    assert!(cmds.contains(&Command::Delete {
        session_id: A.into()
    }));
    assert!(app.composer().is_empty());

    // `d` on a session in the list leaves the open session's draft alone either way.
    let mut app = self::app();
    type_text(&mut app, "my draft");
    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Sessions);
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Char('d')));
    assert!(matches!(
        app.overlay().cloned(),
        Some(Overlay::ConfirmDelete {
            from_composer: false,
            ..
        })
    ));
    app.update(key(KeyCode::Char('y')));
    assert_eq!(app.composer_text(), "my draft");
}

#[test]
fn a_cut_off_reply_stays_itself_when_the_transcript_loads_late() {
    let mut app = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: vec![session(A, "first", 1, 20)],
        last_open: Some(A.into()),
    });
    app.update(stream(StreamUpdate::Connected));
    send_accepted(&mut app, "late", "r", 1);
    app.update(delta("r", 0, "Part"));
    app.update(stream(StreamUpdate::Disconnected {
        error: ApiError::Network("reset".into()),
        retry_in: None,
    }));
    app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages: vec![
            stored_msg(Role::User, "old question"),
            stored_msg(Role::Assistant, "old answer"),
        ],
        draft: None,
        rendered: None,
    });
    assert_eq!(open(&app).cut_off.as_ref().unwrap().reply_item, 3);
    app.update(stream(StreamUpdate::Connected));
    app.update(AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Messages(vec![reply("r", "Part and whole", 3)]),
    });
    let o = open(&app);
    assert_eq!(o.content(3), "Part and whole");
    assert_eq!(o.items[3].state, EntryState::Complete);
    assert_eq!(o.content(1), "old answer");
}

fn loaded(app: &mut App, messages: Vec<StoredMessage>) -> Vec<Command> {
    let mut app2 = App::new(
        KeyBindings::default(),
        Settings::default(),
        Rect::new(0, 0, 80, 24),
        t0(),
    );
    app2.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app2.update(AppEvent::StoreLoaded {
        sessions: vec![session(A, "first", 1, 20)],
        last_open: Some(A.into()),
    });
    let cmds = app2.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages,
        draft: None,
        rendered: None,
    });
    *app = app2;
    cmds
}

fn kept_msg(role: Role, content: &str, id: Option<&str>, status: MessageStatus) -> StoredMessage {
    StoredMessage {
        role,
        content: content.into(),
        tokens: 3,
        created_at: t0(),
        message_id: id.map(str::to_string),
        status,
        finish_reason: None,
    }
}

fn history(messages: Vec<Message>) -> AppEvent {
    AppEvent::History {
        session_id: A.into(),
        fetch: HistoryFetch::Messages(messages),
    }
}

fn user_msg(id: &str, content: &str) -> Message {
    let mut m = reply(id, content, 3);
    m.role = Role::User;
    m
}

#[test]
fn a_stopped_reply_is_shown_whole_once_the_service_has_stored_it() {
    let mut app = app();
    send_accepted(&mut app, "tell me", "r", 2);
    app.update(delta("r", 0, "Part"));
    stop_without_cancel(&mut app, "r");
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    let cmds = app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("r", "Part and the rest.", 9),
        }),
    });
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Complete);
    assert_eq!(o.content(1), "Part and the rest.");
    assert_eq!(
        o.context_tokens(),
        2 + 9,
        "the gauge counts what the service stored"
    );
    let kept = stored_reply(&cmds).expect("stored again, whole");
    assert_eq!(kept.content, "Part and the rest.");
    assert_eq!(kept.message_id.as_deref(), Some("r"));
}

#[test]
fn a_session_left_mid_reply_is_settled_from_the_history_when_it_opens() {
    // Killed mid-reply: the message is stored, its reply is not.
    let mut app = app();
    let cmds = loaded(
        &mut app,
        vec![kept_msg(
            Role::User,
            "tell me",
            None,
            MessageStatus::Complete,
        )],
    );
    assert!(cmds.contains(&Command::FetchHistory {
        session_id: A.into()
    }));
    let cmds = app.update(history(vec![
        user_msg("u", "tell me"),
        reply("r", "The reply.", 5),
    ]));
    let o = open(&app);
    assert_eq!(o.items.len(), 2);
    assert_eq!(o.content(1), "The reply.");
    assert_eq!(o.items[1].state, EntryState::Complete);
    assert_eq!(stored_reply(&cmds).unwrap().content, "The reply.");
    assert_eq!(app.sessions_pane().all()[0].tokens, 20 + 5);

    // Stopped, then quit before the reply was done: the stored reply replaces the cut one.
    let cmds = loaded(
        &mut app,
        vec![
            kept_msg(Role::User, "tell me", None, MessageStatus::Complete),
            kept_msg(
                Role::Assistant,
                "The r",
                Some("r"),
                MessageStatus::Interrupted,
            ),
        ],
    );
    assert!(cmds.contains(&Command::FetchHistory {
        session_id: A.into()
    }));
    let cmds = app.update(history(vec![
        user_msg("u", "tell me"),
        reply("r", "The reply.", 5),
    ]));
    let o = open(&app);
    assert_eq!(o.items.len(), 2);
    assert_eq!(o.content(1), "The reply.");
    assert_eq!(o.items[1].state, EntryState::Complete);
    assert_eq!(
        stored_reply(&cmds).unwrap().message_id.as_deref(),
        Some("r")
    );

    // The service does not have the message (it restarted mid-turn): not sent, offered again.
    let cmds = loaded(
        &mut app,
        vec![kept_msg(
            Role::User,
            "tell me",
            None,
            MessageStatus::Complete,
        )],
    );
    assert!(!cmds.is_empty());
    let cmds = app.update(history(vec![]));
    assert_eq!(
        open(&app).items[0].state,
        EntryState::Failed("not sent".into())
    );
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::Persist(StoreOp::MarkUnsent { .. })))
    );
    assert_eq!(app.composer_text(), "tell me");

    // A settled transcript asks for nothing.
    let cmds = loaded(
        &mut app,
        vec![
            kept_msg(Role::User, "tell me", None, MessageStatus::Complete),
            kept_msg(
                Role::Assistant,
                "The reply.",
                Some("r"),
                MessageStatus::Complete,
            ),
        ],
    );
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::FetchHistory { .. }))
    );
}

#[test]
fn the_context_window_comes_from_usage_when_the_service_says_it() {
    let mut app = app();
    let usage = |context: serde_json::Value| -> convo_client::api::Usage {
        let mut v = serde_json::json!({
            "billingPeriod": {"start": "2026-11-01T00:00:00Z", "end": "2026-12-01T00:00:00Z"},
            "requests": {"used": 10, "limit": 50000, "percentage": 0.02},
            "tokens": {"used": 100, "limit": 10000000, "percentage": 0.001},
            "sessions": {"active": 3, "limit": 500, "percentage": 0.6},
            "tier": "pro"
        });
        if !context.is_null() {
            v["context"] = context;
        }
        serde_json::from_value(v).unwrap()
    };
    // A server that does not say it: the fallback stays.
    app.update(AppEvent::UsageFetched(usage(serde_json::Value::Null)));
    assert_eq!(open(&app).context_max, 8192);
    app.update(AppEvent::UsageFetched(usage(
        serde_json::json!({"maxTokens": 300}),
    )));
    assert_eq!(open(&app).context_max, 300);
    assert_eq!(app.settings.max_context_tokens, 300);
    // A zero is no window: ignored.
    app.update(AppEvent::UsageFetched(usage(
        serde_json::json!({"maxTokens": 0}),
    )));
    assert_eq!(open(&app).context_max, 300);
}

/// A with a history: a user message, a system one, a user one starting with `/`, and replies.
fn app_with_history() -> App {
    let mut app = app();
    app.transcript.close();
    let mut out = Vec::new();
    app.open_session(B.into(), &mut out);
    let m = |role, text: &str| convo_client::local_store::StoredMessage::user(role, text);
    app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![
            m(Role::User, "first question"),
            m(Role::Assistant, "an answer"),
            m(Role::System, "be brief"),
            m(Role::User, "/etc is a directory"),
            m(Role::Assistant, "yes"),
        ],
        draft: None,
        rendered: None,
    });
    app
}

#[test]
fn up_in_an_empty_composer_recalls_sent_messages_like_a_shell() {
    let mut app = app_with_history();
    app.update(key(KeyCode::Up));
    // Escaped so that Enter sends it as the message it was, not as a command.
    assert_eq!(app.composer_text(), "//etc is a directory");
    app.update(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "/system be brief");
    app.update(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "first question");
    app.update(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "first question", "the oldest stays");
    assert!(app.notice.as_ref().unwrap().text.contains("first message"));
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Down));
    assert_eq!(app.composer_text(), "//etc is a directory");
    app.update(key(KeyCode::Down));
    assert_eq!(app.composer_text(), "", "past the newest: empty again");
    // Edited, the arrows belong to the text again: nothing is replaced.
    app.update(key(KeyCode::Up));
    type_text(&mut app, " too");
    app.update(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "//etc is a directory too");
    // A draft is never replaced by a recall.
    let mut app = app_with_history();
    type_text(&mut app, "my draft");
    app.update(key(KeyCode::Up));
    assert_eq!(app.composer_text(), "my draft");
    // Sent, the recalled text is a new message (the `//` escape undone).
    let mut app = app_with_history();
    app.update(key(KeyCode::Up));
    let cmds = app.update(key(KeyCode::Enter));
    let (_, _, body) = sent(&cmds).unwrap();
    assert_eq!(body.content, "/etc is a directory");
    assert_eq!(body.role, None);
}

#[test]
fn retry_sends_the_last_user_message_again() {
    let mut app = app_with_history();
    type_text(&mut app, "/retry");
    let cmds = app.update(key(KeyCode::Enter));
    let (session, _, body) = sent(&cmds).unwrap();
    assert_eq!(session, B);
    assert_eq!(body.content, "/etc is a directory");
    assert_eq!(app.composer_text(), "");
    assert_eq!(open(&app).items.len(), 7, "a new turn");
    // A session with nothing sent says so.
    let mut fresh = self::app();
    type_text(&mut fresh, "/retry");
    let cmds = fresh.update(key(KeyCode::Enter));
    assert!(sent(&cmds).is_none());
    assert_eq!(
        fresh.notice.as_ref().unwrap().text,
        super::recall::NOTHING_TO_RETRY
    );
}

// ---- search ------------------------------------------------------------------------------

/// `app()` with A's transcript holding `messages` (user, assistant, … in turn).
fn app_with_transcript(messages: &[&str]) -> App {
    let messages = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            stored_msg(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                m,
            )
        })
        .collect();
    app_loaded(messages)
}

fn status(app: &App) -> Option<String> {
    app.transcript_pane().search().and_then(|s| s.status())
}

#[test]
fn the_search_bar_finds_moves_and_closes_without_touching_the_draft() {
    let filler = "a line of filler text\n\n".repeat(8);
    let mut messages = vec![];
    for i in 0..12 {
        messages.push(if i % 4 == 1 {
            format!("{filler}the **Fox** jumps")
        } else {
            filler.clone()
        });
    }
    let messages: Vec<&str> = messages.iter().map(String::as_str).collect();
    let mut app = app_with_transcript(&messages);
    type_text(&mut app, "my draft");
    app.update(ctrl('f'));
    assert!(app.transcript_pane().search().is_some_and(|s| s.editing));
    assert_eq!(status(&app), None);
    // Typed characters, `n` and `q` included, go to the query, never to the composer.
    type_text(&mut app, "fox jumps");
    assert_eq!(app.transcript_pane().search().unwrap().query, "fox jumps");
    assert_eq!(status(&app).as_deref(), Some("match 1/3"));
    let open = app.session().unwrap();
    assert!(!open.follow, "the transcript went to the match");
    let (w, h) = app.transcript_viewport();
    let m = app
        .transcript_pane()
        .search()
        .unwrap()
        .current_match()
        .unwrap();
    let line = match_line(&open.transcript, w, &m);
    let top = open.effective_top(w, h);
    assert!(
        line >= top && line < top + h as usize,
        "{line} in view from {top}"
    );
    // Enter goes to the next match and leaves typing: then n and N move.
    app.update(key(KeyCode::Enter));
    assert_eq!(status(&app).as_deref(), Some("match 2/3"));
    type_text(&mut app, "n");
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    type_text(&mut app, "n");
    assert_eq!(status(&app).as_deref(), Some("match 1/3"), "wraps");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('N'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    // Ctrl-f types again, from the current match on; Backspace edits.
    app.update(ctrl('f'));
    type_text(&mut app, "x");
    assert_eq!(status(&app).as_deref(), Some("no match"));
    app.update(key(KeyCode::Backspace));
    assert_eq!(status(&app).as_deref(), Some("match 3/3"));
    // Esc closes; the transcript stays at the match, and the draft is as it was.
    let top = app.session().unwrap().effective_top(w, h);
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.session().unwrap().effective_top(w, h), top);
    assert_eq!(app.composer_text(), "my draft");
    assert_eq!(app.focus, Focus::Composer);
}

#[test]
fn after_the_search_bar_opened_from_the_transcript_typing_goes_to_the_composer() {
    let mut app = app_with_transcript(&["the knight moves", "another line"]);
    app.update(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Transcript);
    app.update(ctrl('f'));
    type_text(&mut app, "knight");
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    type_text(&mut app, "/search knight");
    assert_eq!(app.composer_text(), "/search knight");
    assert_eq!(app.focus, Focus::Composer);
}

#[test]
fn pasting_into_the_search_bar_fills_the_query_not_the_composer() {
    let mut app = app_with_transcript(&["hello world", "another world"]);
    app.update(ctrl('f'));
    app.update(AppEvent::Paste("wor\nld".into()));
    assert_eq!(app.transcript_pane().search().unwrap().query, "wor ld");
    assert_eq!(app.composer_text(), "");
    app.update(ctrl('u'));
    assert_eq!(app.transcript_pane().search().unwrap().query, "");
    app.update(AppEvent::Paste("world".into()));
    assert_eq!(app.transcript_pane().search().unwrap().query, "world");
    assert_eq!(status(&app).as_deref(), Some("match 1/2"));
    // Not typing (after Enter), a paste goes nowhere.
    app.update(key(KeyCode::Enter));
    app.update(AppEvent::Paste("zzz".into()));
    assert_eq!(app.transcript_pane().search().unwrap().query, "world");
    assert_eq!(app.composer_text(), "");
}

#[test]
fn the_search_bar_counts_a_reply_as_it_streams_in() {
    let mut app = app_with_transcript(&["say cat"]);
    type_text(&mut app, "go");
    let cmds = app.update(key(KeyCode::Enter));
    let (_, send_id, _) = sent(&cmds).unwrap();
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", "", 0),
        prompt_tokens: 1,
    });
    app.update(delta("msg_1", 0, "a cat"));
    app.update(ctrl('f'));
    type_text(&mut app, "cat");
    assert_eq!(status(&app).as_deref(), Some("match 1/2"));
    app.update(delta("msg_1", 1, " and a cat"));
    assert_eq!(status(&app).as_deref(), Some("match 1/3"));
}

#[test]
fn the_search_bar_closes_when_another_session_opens() {
    let mut app = app_with_transcript(&["hello"]);
    app.update(ctrl('f'));
    type_text(&mut app, "hel");
    assert_eq!(status(&app).as_deref(), Some("match 1/1"));
    // The open session is deleted elsewhere: the next one opens, and the bar goes.
    app.update(AppEvent::Deleted {
        session_id: A.into(),
    });
    assert_ne!(app.open_id(), Some(A));
    assert!(app.transcript_pane().search().is_none());
}

fn hit(session: &str, position: usize, snippet: &str) -> convo_client::local_store::SearchHit {
    convo_client::local_store::SearchHit {
        session_id: session.into(),
        session_title: Some("second".into()),
        position,
        message_id: None,
        role: Role::Assistant,
        created_at: t0(),
        snippet: vec![convo_client::local_store::SnippetPart {
            text: snippet.into(),
            matched: true,
        }],
    }
}

/// The last search of the store asked for.
fn asked(cmds: &[Command]) -> Option<(u64, String)> {
    cmds.iter().rev().find_map(|c| match c {
        Command::SearchSessions { seq, text, .. } => Some((*seq, text.clone())),
        _ => None,
    })
}

#[test]
fn slash_search_lists_hits_and_enter_opens_the_message() {
    let mut app = app();
    type_text(&mut app, "/search Otters");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, text) = asked(&cmds).expect("a search of the store");
    assert_eq!(text, "Otters");
    assert_eq!(app.composer_text(), "", "the command is done with");
    assert!(app.transcript_pane().hits().is_some());
    // Typing refines it; the answer to the earlier search is dropped.
    let cmds = type_text(&mut app, " x");
    let (seq2, text2) = asked(&cmds).unwrap();
    assert_eq!(text2, "Otters x");
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok(vec![hit(C, 0, "old")]),
    });
    assert!(app.transcript_pane().hits().unwrap().hits.is_empty());
    app.update(key(KeyCode::Backspace));
    app.update(key(KeyCode::Backspace));
    let last = app.transcript_pane().hits().unwrap().asked;
    assert!(last > seq2);
    app.update(AppEvent::SessionHits {
        seq: last,
        result: Ok(vec![hit(C, 0, "first"), hit(B, 2, "otters")]),
    });
    app.update(key(KeyCode::Down));
    let cmds = app.update(key(KeyCode::Enter));
    assert!(app.transcript_pane().hits().is_none());
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == B))
    );
    app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![
            stored_msg(Role::User, "hello"),
            stored_msg(Role::Assistant, "no"),
            stored_msg(Role::User, "sea **otters** float"),
        ],
        draft: None,
        rendered: None,
    });
    let search = app
        .transcript_pane()
        .search()
        .expect("the bar shows the match");
    assert!(!search.editing);
    let item = app.session().unwrap().items[2].entry;
    assert_eq!(search.current_match().unwrap().entry, item);
    assert_eq!(status(&app).as_deref(), Some("match 1/1"));
    // Closed, typing goes to the composer (in the transcript `q` would quit).
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.focus, Focus::Composer);
    type_text(&mut app, "q");
    assert_eq!(app.composer_text(), "q");
}

#[test]
fn a_hit_whose_words_are_not_on_screen_selects_its_message() {
    // A link reference definition is not drawn: its words are in the store, not on screen.
    let mut app = app_with_transcript(&["hello", "see this\n\n[x]: https://zzhidden.org"]);
    app.update(key(KeyCode::Tab));
    assert_eq!(app.focus, Focus::Sessions);
    let cmds = type_text(&mut app, "s");
    assert!(asked(&cmds).is_none(), "nothing to search for yet");
    assert!(app.transcript_pane().hits().is_some());
    let cmds = type_text(&mut app, "zzhidden");
    let (seq, _) = asked(&cmds).unwrap();
    assert_eq!(seq, app.transcript_pane().hits().unwrap().asked);
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok(vec![hit(A, 1, "zzhidden")]),
    });
    // A is open already: nothing to load, the message is selected at once.
    let cmds = app.update(key(KeyCode::Enter));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::LoadTranscript { .. }))
    );
    assert!(app.transcript_pane().hits().is_none());
    assert!(app.transcript_pane().search().is_none());
    assert_eq!(app.session().unwrap().selected, Some(1));
    assert_eq!(app.focus, Focus::Transcript);
}

#[test]
fn a_failed_store_search_says_why_and_esc_closes() {
    let mut app = app();
    type_text(&mut app, "/search a");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, _) = asked(&cmds).unwrap();
    app.update(AppEvent::SessionHits {
        seq,
        result: Err("disk on fire".into()),
    });
    assert_eq!(
        app.transcript_pane().hits().unwrap().state,
        crate::search::HitsState::Failed("disk on fire".into())
    );
    type_text(&mut app, "/search");
    assert_eq!(app.composer_text(), "", "typing went to the list's query");
    app.update(key(KeyCode::Esc));
    assert!(app.transcript_pane().hits().is_none());
    type_text(&mut app, "/search");
    app.update(key(KeyCode::Enter));
    assert!(app.transcript_pane().hits().is_none());
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("usage: /search TEXT")
    );
}

#[test]
fn a_hit_a_place_off_finds_its_words_in_the_message_next_to_it() {
    // A send that failed in this run is stored but not shown: the stored place of a later
    // message is one more than its place on screen.
    let mut app = app_with_transcript(&["hello", "the otters", "nothing", "more otters"]);
    type_text(&mut app, "/search otters");
    let cmds = app.update(key(KeyCode::Enter));
    let (seq, _) = asked(&cmds).unwrap();
    app.update(AppEvent::SessionHits {
        seq,
        result: Ok(vec![hit(A, 2, "otters")]),
    });
    app.update(key(KeyCode::Enter));
    let search = app
        .transcript_pane()
        .search()
        .expect("the bar shows a match");
    let open = app.session().unwrap();
    let at = search.current_match().unwrap().entry;
    let idx = open.items.iter().position(|i| i.entry == at).unwrap();
    assert!(idx == 1 || idx == 3, "a neighbour of place 2: {idx}");
    assert_eq!(status(&app).as_deref().map(|s| &s[..7]), Some("match 1"));
}

#[test]
fn a_relay_error_interrupts_the_reply_which_then_comes_back_and_completes() {
    let mut app = app();
    send_accepted(&mut app, "tell me", "r", 2);
    app.update(delta("r", 0, "Partial "));
    let cmds = app.update(error_event(
        "r",
        "relay_unavailable",
        "this replica lost its connection to the other replicas",
    ));
    assert!(stored_reply(&cmds).is_none(), "not final");
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Interrupted);
    assert_eq!(
        o.items[0].state,
        EntryState::Complete,
        "the message stays sent"
    );
    assert_eq!(app.composer_text(), "", "nothing goes back to the composer");
    assert!(
        app.notice()
            .is_some_and(|n| n.text.contains("lost its connection")),
        "{:?}",
        app.notice()
    );
    // The relay is back: the reply's snapshot, then its end.
    app.update(stream(StreamUpdate::Event(StreamEvent::Snapshot {
        session_id: A.into(),
        message_id: "r".into(),
        seq: 2,
        content: "Partial and ".into(),
    })));
    assert_eq!(open(&app).items[1].state, EntryState::Streaming);
    let cmds = app.update(stream(StreamUpdate::Event(StreamEvent::Done {
        message: reply("r", "Partial and whole.", 4),
    })));
    assert_eq!(
        stored_reply(&cmds).map(|m| m.content),
        Some("Partial and whole.".to_string())
    );
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Complete);
    assert_eq!(o.content(1), "Partial and whole.");
}
