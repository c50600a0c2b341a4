//! The composer and sending: keys that edit, what a send becomes, why one fails (quota, context
//! overflow, not connected, too long), the role, titles taken from messages, recall and
//! `/retry`.

use super::*;

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
    send_then_fail(
        &mut app,
        ApiError::Unauthorized {
            message: "bad key".into(),
        },
    );
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
    let cmds = send_then_fail(
        &mut app,
        ApiError::QuotaExceeded {
            limit: Some("requests".into()),
            reset_at: Some((t0() + chrono::Duration::hours(5)).to_rfc3339()),
            retry_after: None,
            message: "quota exceeded".into(),
        },
    );
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
    send_then_fail(
        &mut app,
        ApiError::ContextOverflow {
            current: 8300,
            max: 8192,
            message: "too long".into(),
        },
    );
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
    send_then_fail(
        &mut app,
        ApiError::ContextOverflow {
            current: 290,
            max: 300,
            message: "too long".into(),
        },
    );
    app.update(key(KeyCode::Enter));
    assert_ne!(app.open_id(), Some(A));
    assert_eq!(open(&app).context_max, 300, "not the 8192 default");
    // And in any session opened later.
    app.update(key(KeyCode::Tab));
    app.update(key(KeyCode::Down));
    app.update(key(KeyCode::Enter));
    assert_eq!(open(&app).context_max, 300);
}

/// Enter while connecting keeps the text and says so; the note goes once the service answers,
/// and Enter then sends.
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
    assert_eq!(app.composer().send_error(), Some(STILL_CONNECTING));
    app.update(AppEvent::Connected(Endpoint::Embedded {
        addr: "127.0.0.1:1".into(),
    }));
    assert_eq!(app.composer().send_error(), None, "no longer true");
    assert_eq!(app.composer_text(), "hi");
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(
        sent(&cmds).map(|(_, _, body)| body.content),
        Some("hi".into())
    );
}

/// A send that could not reach the service keeps its text and says why until the service
/// answers again (here a usage poll); a refusal that stays true stays said.
#[test]
fn a_network_error_note_goes_when_the_service_answers_again() {
    let mut app = app();
    type_text(&mut app, "hello");
    send_then_fail(&mut app, ApiError::Network("connection refused".into()));
    assert_eq!(app.composer_text(), "hello");
    assert!(
        app.composer()
            .send_error()
            .unwrap()
            .contains("connection refused"),
        "{:?}",
        app.composer().send_error()
    );
    let answered = || AppEvent::UsageFetched(serde_json::from_value(usage_json()).unwrap());
    app.update(AppEvent::Clock(t0()));
    assert!(app.composer().send_error().is_some(), "still unreachable");
    app.update(answered());
    assert_eq!(app.composer().send_error(), None, "no longer true");
    assert_eq!(app.composer_text(), "hello");

    send_then_fail(
        &mut app,
        ApiError::Unauthorized {
            message: "bad key".into(),
        },
    );
    app.update(answered());
    assert!(
        app.composer()
            .send_error()
            .unwrap()
            .contains("check your API key")
    );
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
fn the_context_window_comes_from_usage_when_the_service_says_it() {
    let mut app = app();
    let usage = |context: serde_json::Value| -> convo_client::api::Usage {
        let mut v = usage_json();
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
