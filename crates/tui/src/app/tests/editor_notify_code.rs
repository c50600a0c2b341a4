//! `App::update` tests of composing in `$EDITOR`, reply notifications and copying a code
//! block (issue 17, items 3, 6 and 7).

use crossterm::event::KeyCode;
use ratatui::layout::Rect;

use super::*;
use crate::editor::EditorOutcome;
use crate::keys::KeyBindings;
use crate::notify::Notification;
use convo_client::api::stream::StreamUpdate;
use convo_client::api::{Message, Role, StreamEvent};
use convo_client::config::{Notify, NotifyMode};

const A: &str = "session_AAAAAAAAAAAAAAAA";

fn stored(role: Role, content: &str) -> StoredMessage {
    StoredMessage {
        role,
        content: content.into(),
        tokens: 5,
        message_id: None,
        created_at: t0(),
        status: convo_client::local_store::MessageStatus::Complete,
        finish_reason: None,
    }
}

/// Connected, session A ("Rust lifetimes") open with `messages`, its stream up.
fn app_with(settings: Settings, messages: Vec<StoredMessage>) -> App {
    let mut app = App::new(
        KeyBindings::default(),
        settings,
        Rect::new(0, 0, 100, 30),
        t0(),
    );
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    app.update(AppEvent::StoreLoaded {
        sessions: vec![SessionSummary {
            id: A.into(),
            title: "Rust lifetimes".into(),
            last_activity: t0(),
            tokens: 0,
            title_set: false,
            forked_from: None,
        }],
        last_open: Some(A.into()),
    });
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

fn app() -> App {
    app_with(Settings::default(), vec![])
}

fn notice(app: &App) -> Option<(Level, String)> {
    app.notice.as_ref().map(|n| (n.level, n.text.clone()))
}

// ---- $EDITOR -------------------------------------------------------------------------------

#[test]
fn ctrl_g_asks_for_the_editor_on_the_draft_from_any_pane() {
    let mut app = app();
    type_text(&mut app, "half a thought");
    let cmds = app.update(ctrl('g'));
    assert!(cmds.contains(&Command::EditInEditor {
        draft: "half a thought".into()
    }));
    assert_eq!(app.composer_text(), "half a thought", "nothing changes yet");
    // From the transcript too; the composer gets the focus back for the text.
    app.focus = Focus::Transcript;
    let cmds = app.update(ctrl('g'));
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::EditInEditor { .. }))
    );
    assert_eq!(app.focus, Focus::Composer);
}

#[test]
fn ctrl_g_does_nothing_in_a_dialog_or_a_full_screen_view() {
    let mut app = app();
    app.dialogs.open(Overlay::ContextOverflow {
        current: 9000,
        max: 8192,
        draft: "x".into(),
    });
    let cmds = app.update(ctrl('g'));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::EditInEditor { .. }))
    );
    app.dialogs = crate::dialogs::Dialogs::default();
    app.update(key(KeyCode::F(2)));
    assert_eq!(app.view, View::Metrics);
    let cmds = app.update(ctrl('g'));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::EditInEditor { .. }))
    );
}

#[test]
fn the_saved_text_replaces_the_draft_unsent_and_is_saved() {
    let mut app = app();
    type_text(&mut app, "draft");
    let cmds = app.update(AppEvent::EditorClosed(EditorOutcome::Saved(
        "edited\nin vi".into(),
    )));
    assert_eq!(app.composer_text(), "edited\nin vi");
    assert_eq!(
        app.composer().text_area().cursor(),
        (1, 5),
        "the cursor is at the end"
    );
    assert!(
        !cmds.iter().any(|c| matches!(c, Command::Send { .. })),
        "not sent"
    );
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: A.into(),
        text: "edited\nin vi".into()
    })));
    assert_eq!(open_items(&app), 0);
    // The old draft is one undo away.
    app.update(ctrl('z'));
    app.update(ctrl('z'));
    assert_eq!(app.composer_text(), "draft");
}

fn open_items(app: &App) -> usize {
    app.session().map_or(0, |o| o.items.len())
}

#[test]
fn unchanged_text_changes_nothing_and_a_failure_keeps_the_draft_and_says_why() {
    let mut app = app();
    type_text(&mut app, "keep me");
    let cmds = app.update(AppEvent::EditorClosed(EditorOutcome::Saved(
        "keep me".into(),
    )));
    assert_eq!(app.composer_text(), "keep me");
    assert!(!cmds.iter().any(|c| matches!(c, Command::Persist(_))));
    assert_eq!(notice(&app), None);
    let why = "editor vi exited with status 1: draft unchanged";
    app.update(AppEvent::EditorClosed(EditorOutcome::Failed(why.into())));
    assert_eq!(app.composer_text(), "keep me");
    assert_eq!(notice(&app), Some((Level::Error, why.into())));
}

// ---- notifications -------------------------------------------------------------------------

fn reply(id: &str, content: &str) -> Message {
    Message {
        message_id: id.into(),
        session_id: A.into(),
        role: Role::Assistant,
        content: content.into(),
        tokens: 2,
        created_at: "2026-11-22T12:00:00Z".into(),
        finish_reason: None,
    }
}

/// Sends a message and lets the service accept it; returns the app with its reply streaming.
fn streaming(settings: Settings) -> App {
    let mut app = app_with(settings, vec![]);
    type_text(&mut app, "hello");
    let send_id = app
        .update(key(KeyCode::Enter))
        .iter()
        .find_map(|c| match c {
            Command::Send { send_id, .. } => Some(*send_id),
            _ => None,
        })
        .expect("a send");
    app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply("msg_1", ""),
        prompt_tokens: 1,
    });
    app
}

fn done(app: &mut App) -> Vec<Command> {
    app.update(AppEvent::Stream {
        session_id: A.into(),
        update: StreamUpdate::Event(StreamEvent::Done {
            message: reply("msg_1", "Hi there"),
        }),
    })
}

fn notifications(cmds: &[Command]) -> Vec<Notification> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Notify(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

fn settings(mode: NotifyMode, after_seconds: u64) -> Settings {
    Settings {
        notify: Notify {
            mode,
            after_seconds,
        },
        ..Settings::default()
    }
}

#[test]
fn a_reply_finished_while_the_terminal_is_unfocused_notifies() {
    let mut app = streaming(settings(NotifyMode::Osc9, 30));
    app.update(AppEvent::Focus(false));
    assert!(!app.terminal_focused);
    let cmds = done(&mut app);
    assert_eq!(
        notifications(&cmds),
        [Notification {
            mode: NotifyMode::Osc9,
            text: "convo: reply finished in Rust lifetimes".into()
        }]
    );
}

#[test]
fn a_quick_reply_seen_finishing_does_not_notify_a_long_one_does() {
    let mut app = streaming(settings(NotifyMode::Bell, 30));
    app.update(AppEvent::Focus(false));
    app.update(AppEvent::Focus(true));
    assert!(notifications(&done(&mut app)).is_empty());

    let mut app = streaming(settings(NotifyMode::Bell, 30));
    // The message went out 31 s ago.
    let p = app
        .transcript
        .session_mut()
        .unwrap()
        .pending
        .as_mut()
        .unwrap();
    p.started = p
        .started
        .checked_sub(std::time::Duration::from_secs(31))
        .expect("an instant 31 s back");
    let cmds = done(&mut app);
    assert_eq!(notifications(&cmds).len(), 1);
    assert_eq!(notifications(&cmds)[0].mode, NotifyMode::Bell);
}

#[test]
fn mode_off_never_notifies_and_a_stopped_reply_is_not_announced() {
    let mut app = streaming(settings(NotifyMode::Off, 1));
    app.update(AppEvent::Focus(false));
    assert!(notifications(&done(&mut app)).is_empty());

    let mut app = streaming(settings(NotifyMode::Bell, 30));
    app.update(AppEvent::Focus(false));
    app.update(ctrl('c'));
    assert!(!app.quit, "Ctrl-C stopped the reply");
    assert!(notifications(&done(&mut app)).is_empty());
}

// ---- copying a code block ------------------------------------------------------------------

const TWO_BLOCKS: &str =
    "First:\n\n```rust\nfn main() {\n\tprintln!(\"hi\");\n}\n```\n\nThen:\n\n~~~sh\ncargo run\n~~~";

fn in_transcript(messages: Vec<StoredMessage>) -> App {
    let mut app = app_with(Settings::default(), messages);
    app.focus = Focus::Transcript;
    app
}

fn copied(cmds: &[Command]) -> Option<String> {
    cmds.iter().find_map(|c| match c {
        Command::CopyToClipboard(t) => Some(t.clone()),
        _ => None,
    })
}

#[test]
fn one_code_block_is_copied_at_once_and_none_is_said() {
    let mut app = in_transcript(vec![
        stored(Role::User, "q"),
        stored(Role::Assistant, "Try:\n\n```\nls -l\n```"),
    ]);
    let cmds = app.update(key(KeyCode::Char('c')));
    assert_eq!(copied(&cmds).as_deref(), Some("ls -l"));
    assert_eq!(
        notice(&app),
        Some((
            Level::Info,
            "sent code block 1 (1 line) to the clipboard (OSC 52; delivery cannot be confirmed)"
                .into()
        ))
    );
    let mut app = in_transcript(vec![stored(Role::Assistant, "No code, only `inline`.")]);
    let cmds = app.update(key(KeyCode::Char('c')));
    assert_eq!(copied(&cmds), None);
    assert_eq!(
        notice(&app),
        Some((Level::Info, "this reply has no code blocks".into()))
    );
}

#[test]
fn several_blocks_are_numbered_and_a_digit_copies_one() {
    let mut app = in_transcript(vec![
        stored(Role::User, "q"),
        stored(Role::Assistant, TWO_BLOCKS),
    ]);
    let cmds = app.update(key(KeyCode::Char('c')));
    assert_eq!(copied(&cmds), None, "it asks first");
    assert!(app.code_choice().is_some());
    assert_eq!(
        app.status_message(),
        Some((Level::Info, "copy code block: 1–2, Esc cancels".into()))
    );
    // A number that is no block says so and keeps asking.
    app.update(key(KeyCode::Char('7')));
    assert!(app.code_choice().is_some());
    let (level, text) = app.status_message().unwrap();
    assert_eq!(level, Level::Warn);
    assert!(
        text.starts_with("there is no code block 7 · copy code block"),
        "{text}"
    );
    let cmds = app.update(key(KeyCode::Char('1')));
    assert_eq!(
        copied(&cmds).as_deref(),
        Some("fn main() {\n\tprintln!(\"hi\");\n}"),
        "the code as written: tabs kept, no fences"
    );
    assert_eq!(
        notice(&app),
        Some((
            Level::Info,
            "sent code block 1 (3 lines) to the clipboard (OSC 52; delivery cannot be confirmed)"
                .into()
        ))
    );
    assert!(app.code_choice().is_none());
    // Esc cancels; another key cancels and does what it does.
    app.update(key(KeyCode::Char('c')));
    app.update(key(KeyCode::Esc));
    assert!(app.code_choice().is_none());
    assert_eq!(app.focus, Focus::Transcript, "Esc only cancelled");
    app.update(key(KeyCode::Char('c')));
    let cmds = app.update(key(KeyCode::Char('y')));
    assert!(app.code_choice().is_none());
    assert_eq!(
        copied(&cmds).as_deref(),
        Some(TWO_BLOCKS),
        "y copied the reply"
    );
}

#[test]
fn past_nine_blocks_two_digits_choose() {
    let reply: String = (1..=12)
        .map(|i| format!("```\nblock {i}\n```\n\n"))
        .collect();
    let mut app = in_transcript(vec![stored(Role::Assistant, &reply)]);
    app.update(key(KeyCode::Char('c')));
    app.update(key(KeyCode::Char('1')));
    assert_eq!(
        app.status_message().unwrap().1,
        "copy code block 1…: 1–12, y copies 1, Esc cancels"
    );
    let cmds = app.update(key(KeyCode::Char('2')));
    assert_eq!(copied(&cmds).as_deref(), Some("block 12"));
    app.update(key(KeyCode::Char('c')));
    app.update(key(KeyCode::Char('1')));
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(copied(&cmds).as_deref(), Some("block 1"));
    app.update(key(KeyCode::Char('c')));
    let cmds = app.update(key(KeyCode::Char('5')));
    assert_eq!(
        copied(&cmds).as_deref(),
        Some("block 5"),
        "no block 50: at once"
    );
}

#[test]
fn the_selected_message_is_the_one_copied_from() {
    let mut app = in_transcript(vec![
        stored(Role::Assistant, "```\nolder\n```"),
        stored(Role::User, "and?"),
        stored(Role::Assistant, "```\nnewer\n```"),
    ]);
    let cmds = app.update(key(KeyCode::Char('c')));
    assert_eq!(copied(&cmds).as_deref(), Some("newer"), "the last reply");
    app.transcript.session_mut().unwrap().selected = Some(0);
    let cmds = app.update(key(KeyCode::Char('c')));
    assert_eq!(copied(&cmds).as_deref(), Some("older"));
}

#[test]
fn a_digit_typed_in_the_composer_is_text_even_after_a_choice_began() {
    let mut app = in_transcript(vec![stored(Role::Assistant, TWO_BLOCKS)]);
    app.update(key(KeyCode::Char('c')));
    app.focus = Focus::Composer; // a click on the composer
    let cmds = app.update(key(KeyCode::Char('2')));
    assert_eq!(copied(&cmds), None);
    assert_eq!(app.composer_text(), "2");
    assert!(app.code_choice().is_none());
}
