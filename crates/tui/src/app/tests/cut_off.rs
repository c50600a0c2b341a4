//! A reply the stream lost or the user stopped watching: shown interrupted, resumed by a
//! snapshot or its `done`, settled from the stored history after a reconnect or when the
//! session opens again.

use super::*;

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
        asked: std::time::Instant::now(),
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
        asked: std::time::Instant::now(),
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
        asked: std::time::Instant::now(),
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
        asked: std::time::Instant::now(),
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
        asked: std::time::Instant::now(),
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
fn a_message_a_restarted_server_kept_without_its_reply_stays_sent_and_is_offered_again() {
    let mut app = cut_mid_reply();
    app.update(stream(StreamUpdate::Connected));
    let mut user = reply("u", "tell me", 2);
    user.role = Role::User;
    let history = |app: &mut App| {
        app.update(AppEvent::History {
            asked: std::time::Instant::now(),
            session_id: A.into(),
            fetch: HistoryFetch::Messages(vec![user.clone()]),
        })
    };
    // The message is stored and its reply not: still coming, unless nothing says so in a
    // second look.
    let cmds = history(&mut app);
    assert!(cmds.contains(&Command::FetchHistoryLater {
        session_id: A.into()
    }));
    let cmds = history(&mut app);
    let o = open(&app);
    assert_eq!(o.items[1].state, EntryState::Failed("not kept".into()));
    // The service holds the message: it stays as sent, counted in the context.
    assert_eq!(o.items[0].state, EntryState::Complete);
    assert!(o.context_tokens() > 0);
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::Persist(StoreOp::MarkUnsent { .. }))),
        "{cmds:?}"
    );
    // Its text is offered again, to ask for a reply.
    assert_eq!(app.composer_text(), "tell me");
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("kept your last message but not its reply"),
        "{:?}",
        app.notice
    );
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

#[test]
fn a_cut_off_reply_stays_itself_when_the_transcript_loads_late() {
    let mut app = connected();
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
        asked: std::time::Instant::now(),
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

    // The service does not have the last message (it restarted mid-turn): marked not sent.
    // One this TUI sent (stored without a service id) is offered again; one read from the
    // service's history (with an id: sent from another device, whose reply this TUI did not
    // see end) is not offered here.
    for (text, id, offered) in [
        ("tell me", None, "tell me"),
        ("from the laptop", Some("u2"), ""),
    ] {
        app.update(ctrl('u'));
        let cmds = loaded(
            &mut app,
            vec![kept_msg(Role::User, text, id, MessageStatus::Complete)],
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
        assert_eq!(app.composer_text(), offered);
    }
    assert!(
        app.notice
            .as_ref()
            .unwrap()
            .text
            .contains("sent from another device or by a command"),
        "{:?}",
        app.notice
    );

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
