//! Stopping a reply, its waiting note, how it ended, `/continue` and Ctrl-C twice
//! (`stop.rs`, `transcript_pane::reply_marks`).

use crossterm::event::KeyCode;

use super::*;
use crate::render::transcript::EntryState;
use convo_client::api::stream::StreamUpdate;
use convo_client::api::{ApiError, ErrorBody, StreamEvent};
use convo_wire::FinishReason;

/// The header text of transcript item `idx` of the open session.
fn header(app: &App, idx: usize) -> String {
    let open = open(app);
    open.transcript
        .get(open.items[idx].entry)
        .unwrap()
        .header
        .clone()
}

fn done(message: convo_client::api::Message) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Done { message }))
}

/// The service's progress of reply `message_id`: 470 of the prompt's 1,000 tokens read.
fn half_read(message_id: &str) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Progress {
        session_id: A.into(),
        message_id: message_id.into(),
        prompt_tokens: 470,
        prompt_total: 1000,
    }))
}

#[test]
fn progress_shows_in_the_replys_header_until_the_first_text() {
    let mut app = app();
    send_accepted(&mut app, "summarise this", "msg_1", 1);
    app.update(half_read("msg_1"));
    assert!(
        header(&app, 1).ends_with("· reading the conversation · 47 %"),
        "{}",
        header(&app, 1)
    );
    // The first text replaces the note.
    app.update(delta("msg_1", 0, "Sure"));
    assert!(!header(&app, 1).contains("reading"), "{}", header(&app, 1));
    assert_eq!(open(&app).content(1), "Sure");
}

#[test]
fn another_devices_reply_shows_its_progress_until_its_first_text_as_ours_does() {
    let mut app = app();
    // Another device's send: its `started`, then the history holding the message it answers.
    let cmds = app.update(stream(StreamUpdate::Event(StreamEvent::Started {
        session_id: A.into(),
        message_id: "msg_r".into(),
        idempotency_key: Some("another-device".into()),
    })));
    assert!(
        cmds.iter()
            .any(|c| matches!(c, Command::FetchHistory { .. }))
    );
    // Progress before it shows is kept for when it does.
    app.update(half_read("msg_r"));
    let question = Message {
        role: Role::User,
        ..reply("msg_q", "from the laptop", 3)
    };
    let cmds = app.update(history(vec![question]));
    assert_eq!(open(&app).content(0), "from the laptop");
    assert_eq!(open(&app).items[1].state, EntryState::Streaming);
    assert!(
        header(&app, 1).contains("· reading the conversation · 47 %"),
        "{}",
        header(&app, 1)
    );
    // Shown empty: it asks for ticks (the time waited) while it stays empty.
    assert!(cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
    let cmds = app.update(AppEvent::ReplyTick);
    assert!(cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
    // Later progress shows too.
    app.update(stream(StreamUpdate::Event(StreamEvent::Progress {
        session_id: A.into(),
        message_id: "msg_r".into(),
        prompt_tokens: 900,
        prompt_total: 1000,
    })));
    assert!(header(&app, 1).contains("· 90 %"), "{}", header(&app, 1));
    // The first text replaces the note, and the ticks stop.
    app.update(delta("msg_r", 0, "Sure"));
    assert!(!header(&app, 1).contains("reading"), "{}", header(&app, 1));
    assert_eq!(open(&app).content(1), "Sure");
    let cmds = app.update(AppEvent::ReplyTick);
    assert!(!cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
}

#[test]
fn a_reply_that_fails_before_its_first_text_drops_its_waiting_note() {
    // Failed by the service, and cut off by a lost stream.
    for fail in [
        error_event("msg_1", "engine_error", "the engine failed"),
        stream(StreamUpdate::Disconnected {
            error: ApiError::Network("reset".into()),
            retry_in: None,
        }),
    ] {
        let mut app = app();
        send_accepted(&mut app, "summarise this", "msg_1", 1);
        app.update(half_read("msg_1"));
        assert!(header(&app, 1).contains("reading the conversation"));
        app.update(fail);
        assert_ne!(open(&app).items[1].state, EntryState::Streaming);
        assert!(
            !header(&app, 1).contains("reading the conversation"),
            "{}",
            header(&app, 1)
        );
    }
}

#[test]
fn an_empty_reply_asks_for_ticks_and_stops_asking_once_text_comes() {
    let mut app = app();
    type_text(&mut app, "hello");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
    // Still empty: the next tick is asked for.
    let cmds = app.update(AppEvent::ReplyTick);
    assert!(cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
    app.update(delta("msg_1", 0, "Hi"));
    let cmds = app.update(AppEvent::ReplyTick);
    assert!(!cmds.iter().any(|c| matches!(c, Command::ReplyTick { .. })));
}

#[test]
fn a_stop_asks_the_service_and_the_reply_shows_stopped_with_its_text() {
    let mut app = app();
    send_accepted(&mut app, "write an essay", "msg_1", 1);
    app.update(delta("msg_1", 0, "The first"));
    let cmds = app.update(ctrl('c'));
    assert!(cmds.contains(&Command::CancelReply {
        session_id: A.into(),
        message_id: "msg_1".into()
    }));
    assert!(!app.quit);
    assert_eq!(notice_text(&app), "stopping the reply…");
    app.update(AppEvent::CancelAnswered {
        session_id: A.into(),
        message_id: "msg_1".into(),
        outcome: CancelOutcome::Stopping,
    });
    // Still followed until the service's `done`.
    assert!(open(&app).is_streaming());
    let mut stopped = reply("msg_1", "The first", 2);
    stopped.finish_reason = Some(FinishReason::Stopped);
    let cmds = app.update(done(stopped));
    assert!(!open(&app).is_streaming());
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(open(&app).content(1), "The first");
    assert!(
        header(&app, 1).ends_with("· 2 tokens · stopped"),
        "{}",
        header(&app, 1)
    );
    assert!(cmds.iter().any(|c| matches!(c, Command::Persist(StoreOp::AppendMessage { message, .. }) if message.content == "The first")));
    assert!(app.notice.is_none(), "the stop is over: {:?}", app.notice);
}

#[test]
fn a_second_stop_or_a_failed_cancel_stops_watching_instead() {
    let mut app = app();
    send_accepted(&mut app, "write an essay", "msg_1", 1);
    app.update(delta("msg_1", 0, "partial"));
    app.update(ctrl('c'));
    app.update(AppEvent::CancelAnswered {
        session_id: A.into(),
        message_id: "msg_1".into(),
        outcome: CancelOutcome::Failed(ApiError::Network("refused".into())),
    });
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert!(
        notice_text(&app).contains("could not stop the reply"),
        "{}",
        notice_text(&app)
    );

    let mut app = super::app();
    send_accepted(&mut app, "again", "msg_2", 1);
    app.update(delta("msg_2", 0, "x"));
    app.update(ctrl('c'));
    let cmds = app.update(ctrl('c'));
    assert!(
        !cmds
            .iter()
            .any(|c| matches!(c, Command::CancelReply { .. }))
    );
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
}

#[test]
fn a_reply_stopped_before_any_text_gives_the_message_back() {
    let mut app = app();
    send_accepted(&mut app, "think long", "msg_1", 1);
    app.update(ctrl('c'));
    app.update(stream(StreamUpdate::Event(StreamEvent::Error {
        session_id: A.into(),
        message_id: "msg_1".into(),
        error: ErrorBody::new("reply_stopped", "the reply was stopped before any text"),
    })));
    assert!(!open(&app).is_streaming());
    assert_eq!(
        notice_text(&app),
        "stopped before any text came: the turn was undone; your message was not kept: it is back in the composer, marked not sent — send it again"
    );
    assert_eq!(app.composer_text(), "think long");
}

#[test]
fn a_reply_cut_by_a_limit_is_marked_and_continue_asks_for_the_rest() {
    let mut app = app();
    send_accepted(&mut app, "write an essay", "msg_1", 1);
    let mut cut = reply("msg_1", "Rome was founded", 512);
    cut.finish_reason = Some(FinishReason::Length);
    app.update(done(cut));
    assert!(
        header(&app, 1).ends_with("· 12:00 · cut at 512 tokens · /continue"),
        "{}",
        header(&app, 1)
    );
    type_text(&mut app, "/continue");
    let cmds = app.update(key(KeyCode::Enter));
    let body = cmds
        .iter()
        .find_map(|c| match c {
            Command::Send { body, .. } => Some(body.clone()),
            _ => None,
        })
        .expect("a send");
    assert_eq!(
        body.content,
        crate::transcript_pane::reply_marks::CONTINUE_PROMPT
    );
    assert_eq!(body.role, None);
}

#[test]
fn ctrl_c_right_after_a_reply_asks_again_before_quitting() {
    let mut app = app();
    // No reply yet: one Ctrl-C quits.
    let mut fresh = super::app();
    fresh.update(ctrl('c'));
    assert!(fresh.quit);

    send_accepted(&mut app, "hello", "msg_1", 1);
    app.update(done(reply("msg_1", "Hi", 1)));
    let cmds = app.update(ctrl('c'));
    assert!(!app.quit);
    assert!(!cmds.contains(&Command::Quit));
    assert_eq!(notice_text(&app), "press Ctrl-C again to quit");
    let cmds = app.update(ctrl('c'));
    assert!(app.quit);
    assert!(cmds.contains(&Command::Quit));
}

/// Sends `text` and ends its reply `id` with `finished`; returns every command asked for.
fn exchange(app: &mut App, text: &str, finished: convo_client::api::Message) -> Vec<Command> {
    let mut cmds = type_text(app, text);
    cmds.extend(app.update(key(KeyCode::Enter)));
    let send_id = cmds
        .iter()
        .find_map(|c| match c {
            Command::Send { send_id, .. } => Some(*send_id),
            _ => None,
        })
        .expect("a send");
    cmds.extend(app.update(AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply(&finished.message_id, "", 0),
        prompt_tokens: 1,
    }));
    cmds.extend(app.update(delta(&finished.message_id, 0, &finished.content)));
    cmds.extend(app.update(done(finished)));
    cmds
}

#[test]
fn a_stopped_and_a_cut_reply_keep_their_marks_once_the_app_is_rebuilt_from_the_store() {
    let store = convo_client::local_store::Store::in_memory().unwrap();
    let mut app = app();
    let mut stopped = reply("msg_1", "The first", 2);
    stopped.finish_reason = Some(FinishReason::Stopped);
    persist(&store, &exchange(&mut app, "write an essay", stopped));
    let mut cut = reply("msg_2", "Rome was founded", 512);
    cut.finish_reason = Some(FinishReason::Length);
    persist(&store, &exchange(&mut app, "another", cut));
    let mut whole = reply("msg_3", "Done.", 2);
    whole.finish_reason = Some(FinishReason::Stop);
    persist(&store, &exchange(&mut app, "a third", whole));
    let before: Vec<String> = (0..6).map(|i| header(&app, i)).collect();

    // A new run: the transcript comes from the store alone.
    let rebuilt = super::app_loaded(store.transcript(A).unwrap());
    let after: Vec<String> = (0..6).map(|i| header(&rebuilt, i)).collect();
    assert_eq!(after, before);
    assert!(after[1].ends_with("· 2 tokens · stopped"), "{after:?}");
    assert!(
        after[3].ends_with("· 12:00 · cut at 512 tokens · /continue"),
        "{after:?}"
    );
    assert!(after[5].ends_with("· 2 tokens"), "{after:?}");
}

#[test]
fn a_reply_the_store_kept_without_its_end_takes_it_from_the_services_history() {
    let store = convo_client::local_store::Store::in_memory().unwrap();
    // Stored by a client that did not keep finish reasons.
    let mut app = app();
    persist(
        &store,
        &exchange(&mut app, "write an essay", reply("msg_1", "The first", 2)),
    );
    let mut app = super::app_loaded(store.transcript(A).unwrap());
    assert!(
        header(&app, 1).ends_with("· 2 tokens"),
        "{}",
        header(&app, 1)
    );
    let mut said = reply("msg_1", "The first", 2);
    said.finish_reason = Some(FinishReason::Stopped);
    let user = convo_client::api::Message {
        message_id: "msg_u".into(),
        role: convo_client::api::Role::User,
        content: "write an essay".into(),
        ..reply("msg_u", "", 1)
    };
    let cmds = app.update(AppEvent::History {
        asked: std::time::Instant::now(),
        session_id: A.into(),
        fetch: HistoryFetch::Messages(vec![user, said]),
    });
    assert!(
        header(&app, 1).ends_with("· 2 tokens · stopped"),
        "{}",
        header(&app, 1)
    );
    persist(&store, &cmds);
    let kept = store.transcript(A).unwrap();
    assert_eq!(kept.len(), 2, "the same row, not a copy: {kept:?}");
    assert_eq!(kept[1].finish_reason, Some(FinishReason::Stopped));
}

#[test]
fn a_stop_the_service_finds_too_late_is_no_error_and_the_reply_ends_as_it_did() {
    let mut app = app();
    send_accepted(&mut app, "hello", "msg_1", 1);
    app.update(delta("msg_1", 0, "Hi there"));
    app.update(ctrl('c'));
    // The engine had finished: the service is storing the reply.
    app.update(AppEvent::CancelAnswered {
        session_id: A.into(),
        message_id: "msg_1".into(),
        outcome: CancelOutcome::Failed(ApiError::Service {
            status: 409,
            code: "reply_finished".into(),
            message: "the reply msg_1 has already ended; there is nothing to stop".into(),
        }),
    });
    assert_eq!(notice_text(&app), "stopping the reply…", "no warning");
    assert!(open(&app).is_streaming(), "still followed until its done");
    let mut whole = reply("msg_1", "Hi there", 2);
    whole.finish_reason = Some(FinishReason::Stop);
    app.update(done(whole));
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert!(
        header(&app, 1).ends_with("· 2 tokens"),
        "{}",
        header(&app, 1)
    );
    assert!(app.notice.is_none(), "the stop is over: {:?}", app.notice);
}
