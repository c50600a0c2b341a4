//! Keys outside the composer: quitting, following and scrolling the transcript, the sessions
//! pane (moving, filtering, clicking, deleting), help, copying, the usage gauges, the
//! full-screen views.

use super::*;

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
fn a_slip_in_the_sessions_filter_is_mended_where_it_is() {
    let mut app = app();
    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::BackTab));
    app.update(key(KeyCode::Char('/')));
    type_text(&mut app, "tird");
    assert!(app.sessions_pane().visible().is_empty());
    for _ in 0..3 {
        app.update(key(KeyCode::Left));
    }
    type_text(&mut app, "h");
    assert_eq!(app.sessions_pane().filter(), "third");
    assert_eq!(app.sessions_pane().visible().len(), 1);
    // Up and Down still move in the list while the filter is typed.
    app.update(key(KeyCode::Down));
    assert!(app.sessions_pane().is_filtering());
    app.update(key(KeyCode::Enter));
    assert_eq!(app.open_id(), Some(C));
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
    let usage: convo_client::api::Usage = serde_json::from_value(usage_json()).unwrap();
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
