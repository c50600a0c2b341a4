//! `App::update` tests of the message selection, fork, edit and undo.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;
use crate::transcript_pane::ForkPoint;
use convo_client::api::{ApiError, Message, Role};

fn stored(role: Role, content: &str, id: Option<&str>) -> StoredMessage {
    StoredMessage {
        role,
        content: content.into(),
        tokens: 3,
        created_at: t0(),
        message_id: id.map(str::to_string),
        status: MessageStatus::Complete,
        finish_reason: None,
    }
}

/// A with two exchanges; the replies have their ids, the user messages (sent from here) not.
fn app() -> App {
    app_loaded(vec![
        stored(Role::User, "q1", None),
        stored(Role::Assistant, "a1", Some("m2")),
        stored(Role::User, "q2", None),
        stored(Role::Assistant, "a2", Some("m4")),
    ])
}

fn notice(app: &App) -> String {
    app.notice().map(|n| n.text.clone()).unwrap_or_default()
}

fn forked(cmds: &[Command]) -> Option<(String, String, ForkPoint)> {
    cmds.iter().find_map(|c| match c {
        Command::Fork {
            source,
            new_session_id,
            at,
        } => Some((source.clone(), new_session_id.clone(), at.clone())),
        _ => None,
    })
}

fn server_message(session: &str, id: &str, role: Role, content: &str) -> Message {
    Message {
        message_id: id.into(),
        session_id: session.into(),
        role,
        content: content.into(),
        tokens: 3,
        created_at: "2026-11-22T12:00:00Z".into(),
        finish_reason: None,
    }
}

/// The server's answer to a fork into `new` of `n` messages of A.
fn answer(new: &str, n: usize, at: &str) -> AppEvent {
    let all = [
        (Role::User, "q1"),
        (Role::Assistant, "a1"),
        (Role::User, "q2"),
        (Role::Assistant, "a2"),
    ];
    let messages: Vec<Message> = all[..n]
        .iter()
        .enumerate()
        .map(|(i, (role, text))| server_message(new, &format!("c{i}"), *role, text))
        .collect();
    AppEvent::Forked {
        source: A.into(),
        new_session_id: new.into(),
        outcome: ForkOutcome::Forked {
            summary: convo_wire::sessions::SessionSummary {
                session_id: new.into(),
                created_at: "2026-11-22T12:00:00Z".into(),
                last_activity_at: "2026-11-22T12:00:00Z".into(),
                message_count: n as u64,
                tokens: 3 * n as u64,
                title: Some("q1".into()),
                forked_from: Some(convo_wire::sessions::ForkedFrom {
                    session_id: A.into(),
                    message_id: at.into(),
                }),
            },
            messages,
            message_id: at.into(),
        },
    }
}

#[test]
fn ctrl_o_selects_the_last_message_arrows_move_and_esc_leaves() {
    let mut app = app();
    app.update(ctrl('o'));
    assert_eq!(app.focus(), Focus::Transcript);
    assert_eq!(app.transcript_pane().selected(), Some(3));
    app.update(key(KeyCode::Char('k')));
    app.update(key(KeyCode::Up));
    assert_eq!(app.transcript_pane().selected(), Some(1));
    app.update(key(KeyCode::Esc));
    assert_eq!(app.focus(), Focus::Composer);
    assert_eq!(app.transcript_pane().selected(), None);
    // Typing goes to the composer again.
    type_text(&mut app, "f");
    assert_eq!(app.composer_text(), "f");
}

#[test]
fn f_forks_at_an_assistant_message_and_opens_the_fork_under_its_source() {
    let mut app = app();
    app.update(ctrl('o'));
    app.update(key(KeyCode::Up));
    app.update(key(KeyCode::Up));
    let cmds = app.update(key(KeyCode::Char('f')));
    let (source, new, at) = forked(&cmds).expect("a fork asked for");
    assert_eq!(source, A);
    assert_eq!(at.message_id.as_deref(), Some("m2"));
    assert_eq!((at.role, at.content.as_str()), (Role::Assistant, "a1"));
    assert_eq!(notice(&app), "forking…");
    // A second f while it is on its way asks nothing.
    app.update(ctrl('o'));
    let again = app.update(key(KeyCode::Char('f')));
    assert!(forked(&again).is_none());

    let cmds = app.update(answer(&new, 2, "m2"));
    let persisted: Vec<&StoreOp> = cmds
        .iter()
        .filter_map(|c| match c {
            Command::Persist(op) => Some(op),
            _ => None,
        })
        .collect();
    assert!(
        matches!(persisted[0], StoreOp::UpsertSession(s) if s.id == new && s.forked_from.as_deref() == Some(A))
    );
    let appended = persisted
        .iter()
        .filter(|op| matches!(op, StoreOp::AppendMessage { session_id, .. } if *session_id == new))
        .count();
    assert_eq!(appended, 2);
    assert!(persisted.iter().any(|op| matches!(op, StoreOp::SetForkedFrom { session_id, source, message_id } if *session_id == new && source == A && message_id == "m2")));
    let load = cmds
        .iter()
        .position(|c| matches!(c, Command::LoadTranscript { session_id, .. } if *session_id == new))
        .expect("the fork opens");
    let last_persist = cmds
        .iter()
        .rposition(|c| matches!(c, Command::Persist(StoreOp::SetForkedFrom { .. })))
        .unwrap();
    assert!(last_persist < load, "stored before it is read back");
    assert_eq!(app.open_id(), Some(new.as_str()));
    assert_eq!(app.focus(), Focus::Composer);
    assert_eq!(notice(&app), "forked: a new session with 2 messages");
    // In the list right under A, one level down.
    let rows = app.sessions_pane().visible_rows();
    let a = rows.iter().position(|r| r.session.id == A).unwrap();
    assert_eq!(rows[a + 1].session.id, new);
    assert_eq!(rows[a + 1].depth, 1);
}

#[test]
fn e_on_a_user_message_forks_before_it_with_its_text_in_the_composer() {
    let mut app = app();
    app.update(ctrl('o'));
    // On a reply (the last message): refused, nothing asked.
    let cmds = app.update(key(KeyCode::Char('e')));
    assert!(forked(&cmds).is_none());
    assert!(
        notice(&app).starts_with("only your own messages can be edited"),
        "{}",
        notice(&app)
    );
    // On "q2": a fork at "a1", the message before it.
    app.update(key(KeyCode::Up));
    let cmds = app.update(key(KeyCode::Char('e')));
    let (_, new, at) = forked(&cmds).expect("a fork asked for");
    assert_eq!(at.message_id.as_deref(), Some("m2"));
    let cmds = app.update(answer(&new, 2, "m2"));
    assert!(cmds.contains(&Command::Persist(StoreOp::SaveDraft {
        session_id: new.clone(),
        text: "q2".into()
    })));
    // The draft comes back with the transcript.
    app.update(AppEvent::TranscriptLoaded {
        session_id: new.clone(),
        messages: vec![
            stored(Role::User, "q1", Some("c0")),
            stored(Role::Assistant, "a1", Some("c1")),
        ],
        draft: Some("q2".into()),
        rendered: None,
    });
    assert_eq!(app.composer_text(), "q2");
    assert!(notice(&app).starts_with("forked before your message"));
}

#[test]
fn editing_the_first_message_starts_a_new_session_with_its_text() {
    let mut app = app();
    app.update(ctrl('o'));
    for _ in 0..3 {
        app.update(key(KeyCode::Up));
    }
    let cmds = app.update(key(KeyCode::Char('e')));
    assert!(forked(&cmds).is_none(), "nothing to ask the server");
    assert_ne!(app.open_id(), Some(A));
    assert_eq!(app.composer_text(), "q1");
    assert_eq!(app.focus(), Focus::Composer);
}

#[test]
fn a_server_without_fork_is_named_once_and_then_asked_no_more() {
    let mut app = app();
    app.update(ctrl('o'));
    let (_, new, _) = forked(&app.update(key(KeyCode::Char('f')))).unwrap();
    app.update(AppEvent::Forked {
        source: A.into(),
        new_session_id: new,
        outcome: ForkOutcome::Unsupported,
    });
    assert_eq!(notice(&app), CANNOT_FORK);
    assert_eq!(app.open_id(), Some(A), "nothing changed");
    let hints: Vec<&str> = app
        .transcript_pane()
        .hints(app.keys())
        .into_iter()
        .map(|h| h.1)
        .collect();
    assert!(
        !hints.contains(&"fork") && hints.contains(&"copy"),
        "{hints:?}"
    );
    app.update(ctrl('o'));
    let cmds = app.update(key(KeyCode::Char('f')));
    assert!(forked(&cmds).is_none());
    assert_eq!(notice(&app), CANNOT_FORK);
}

#[test]
fn undo_asks_the_server_then_the_store_and_reloads_and_is_refused_while_a_reply_streams() {
    let mut app = app();
    type_text(&mut app, "/undo");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Undo {
        session_id: A.into()
    }));
    assert_eq!(app.composer_text(), "");
    app.transcript.session_mut_if(A).unwrap().stream = StreamState::Open;
    let cmds = app.update(AppEvent::Undone {
        session_id: A.into(),
        outcome: UndoOutcome::Undone(vec!["m3".into(), "m4".into()]),
    });
    assert_eq!(
        app.transcript.session_mut_if(A).unwrap().stream,
        StreamState::Open,
        "the session's stream stays open through the reload (the worker keeps it)"
    );
    let removal = cmds
        .iter()
        .position(|c| {
            *c == Command::Persist(StoreOp::RemoveLastExchange {
                session_id: A.into(),
            })
        })
        .expect("the store removes it too");
    let reload = cmds
        .iter()
        .position(|c| matches!(c, Command::LoadTranscript { session_id, .. } if session_id == A))
        .expect("the transcript is read again");
    assert!(removal < reload);
    assert_eq!(notice(&app), "undone: removed 2 messages");
    let tokens = app.sessions_pane().get(A).unwrap().tokens;
    assert_eq!(
        tokens,
        20 - 6,
        "the list's total without q2 and a2 (3 tokens each)"
    );
    // A list the store merged before the removal comes in after it, with the old total; the
    // store's count after the removal, which follows it, is what the list shows.
    let mut stale = app.sessions_pane().get(A).unwrap().clone();
    stale.tokens = 20;
    app.update(AppEvent::SessionsMerged {
        sessions: vec![stale],
        deleted: vec![],
        titles_to_send: vec![],
        archived: None,
    });
    app.update(AppEvent::SessionTokens {
        session_id: A.into(),
        tokens: 14,
    });
    assert_eq!(app.sessions_pane().get(A).unwrap().tokens, 14);

    // A reply streaming: refused here, and the server's 409 says the same.
    let mut app = app_loaded(vec![stored(Role::User, "q1", None)]);
    type_text(&mut app, "hello");
    app.update(key(KeyCode::Enter));
    type_text(&mut app, "/undo");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(!cmds.iter().any(|c| matches!(c, Command::Undo { .. })));
    assert_eq!(notice(&app), UNDO_WHILE_STREAMING);
    assert_eq!(app.composer_text(), "/undo", "nothing lost");
    app.update(AppEvent::Undone {
        session_id: A.into(),
        outcome: UndoOutcome::Failed(ApiError::ReplyInProgress {
            message: "busy".into(),
        }),
    });
    assert_eq!(notice(&app), UNDO_WHILE_STREAMING);
}

#[test]
fn f_without_a_selection_says_how_to_select() {
    let mut app = app();
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Tab,
        KeyModifiers::NONE,
    )));
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Tab,
        KeyModifiers::NONE,
    )));
    assert_eq!(app.focus(), Focus::Transcript);
    let cmds = app.update(key(KeyCode::Char('f')));
    assert!(forked(&cmds).is_none());
    assert_eq!(notice(&app), "select a message first (Ctrl-o, or Up here)");
}
