//! Replies on the stream: errors and snapshots, the stream's state, sanitised text, a `done`
//! that beats the POST's answer, the notices a reply clears, a relay error mid-reply.

use super::*;

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
