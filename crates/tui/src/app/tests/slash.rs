//! Slash commands: `/system`, `/meta`, `/title`, `/export`, `/new`, `/help`, `/delete`, `/quit`
//! and unknown ones.

use super::*;

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
fn slash_kept_lists_the_sessions_kept_aside_and_reads_one() {
    use crate::kept_view::{KeptEvent, KeptRequest, KeptSession};
    let mut app = app();
    type_text(&mut app, "/kept");
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(app.view(), View::Kept);
    assert!(cmds.contains(&Command::Kept(KeptRequest::List)), "{cmds:?}");
    assert_eq!(app.composer_text(), "");
    let kept = KeptSession {
        id: "session_AAAAAAAAAAAAAAAA@db1".into(),
        title: Some("the lighthouse".into()),
        label: "http://h:1 #abcdef (earlier database, until 2026-11-27 21:17 UTC)".into(),
        last_activity: t0(),
        tokens: 40,
    };
    app.update(AppEvent::Kept(KeptEvent::Listed(Ok(vec![kept]))));
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.contains(&Command::Kept(KeptRequest::Read(
        "session_AAAAAAAAAAAAAAAA@db1".into()
    ))));
    // Read-only: typing sends nothing and changes no draft.
    let cmds = type_text(&mut app, "hello");
    assert!(
        !cmds.iter().any(|c| matches!(c, Command::Send { .. })),
        "{cmds:?}"
    );
    // `x` exports it from the store.
    let cmds = app.update(key(KeyCode::Char('x')));
    assert!(cmds.contains(&Command::Export {
        session_id: "session_AAAAAAAAAAAAAAAA@db1".into(),
        path: None
    }));
    app.update(key(KeyCode::Esc));
    assert_eq!(app.view(), View::Kept, "back to the list");
    app.update(key(KeyCode::Esc));
    assert_eq!(app.view(), View::Chat);
}
