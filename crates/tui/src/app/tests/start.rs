//! Starting up and the local store: the last open session, the transcript loaded (rendered off
//! the UI task or not), drafts kept and saved, text typed before the store answers, the token
//! tables warmed.

use super::*;

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

#[test]
fn a_transcript_rendered_off_the_ui_task_is_adopted_not_rebuilt() {
    let mut app = connected();
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
fn a_session_nothing_was_sent_to_asks_the_server_for_no_history_when_it_opens() {
    let mut app = connected();
    let fetches = |cmds: &[Command], id: &str| {
        cmds.iter()
            .any(|c| matches!(c, Command::FetchHistory { session_id } if session_id == id))
    };
    app.update(AppEvent::StoreLoaded {
        sessions: vec![
            session(B, NEW_SESSION_TITLE, 0, 0),
            session(A, "first", 1, 20),
        ],
        last_open: Some(B.into()),
    });
    let cmds = app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![],
        draft: Some("half a thought".into()),
        rendered: None,
    });
    assert!(!fetches(&cmds, B), "{cmds:?}");
    // The service's list comes in: it keeps histories, but not this one's.
    let cmds = app.update(AppEvent::SessionsMerged {
        sessions: vec![session(A, "first", 1, 20)],
        deleted: vec![],
        titles_to_send: vec![],
        archived: None,
    });
    assert!(!fetches(&cmds, B), "{cmds:?}");
    // A session the server has: what other devices added is asked for.
    app.focus = Focus::Sessions;
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(A));
    let cmds = app.update(AppEvent::TranscriptLoaded {
        session_id: A.into(),
        messages: vec![
            stored_msg(Role::User, "hi"),
            stored_msg(Role::Assistant, "hello"),
        ],
        draft: None,
        rendered: None,
    });
    assert!(fetches(&cmds, A), "{cmds:?}");
    // Back to the new session: still nothing to ask for.
    app.focus = Focus::Sessions;
    app.update(key(KeyCode::Up));
    app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(B));
    let cmds = app.update(AppEvent::TranscriptLoaded {
        session_id: B.into(),
        messages: vec![],
        draft: Some("half a thought".into()),
        rendered: None,
    });
    assert!(!fetches(&cmds, B), "{cmds:?}");
}
