//! A stop (Ctrl-C) before the service answered the send: the stop waits for the reply's id
//! and then asks the service; a stop that stops watching instead (a server without the cancel,
//! a second Ctrl-C) leaves the send to its answer, which still stores the message and names
//! the reply, or to its failure, which gives the text back (`stop.rs`, `OpenSession::stopped`).

use crossterm::event::KeyCode;

use super::*;
use crate::render::transcript::EntryState;
use convo_client::local_store::Store;
use convo_wire::FinishReason;

fn done(message: Message) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Done { message }))
}

/// Types `text` and presses Enter: the send's id and `Idempotency-Key`, and every command.
fn enter(app: &mut App, text: &str) -> (u64, String, Vec<Command>) {
    let mut cmds = type_text(app, text);
    cmds.extend(app.update(key(KeyCode::Enter)));
    let (send_id, key) = cmds
        .iter()
        .find_map(|c| match c {
            Command::Send {
                send_id,
                idempotency_key,
                ..
            } => Some((*send_id, idempotency_key.clone())),
            _ => None,
        })
        .expect("a send");
    (send_id, key, cmds)
}

/// The service's answer to send `send_id`: reply `reply_id`, empty so far, and the message's
/// tokens.
fn answer(send_id: u64, reply_id: &str, prompt_tokens: u64) -> AppEvent {
    AppEvent::SendAccepted {
        session_id: A.into(),
        send_id,
        reply: reply(reply_id, "", 0),
        prompt_tokens,
    }
}

/// The stream's `started` of reply `message_id`, for the send with `key`.
fn started(message_id: &str, key: &str) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Started {
        session_id: A.into(),
        message_id: message_id.into(),
        idempotency_key: Some(key.into()),
    }))
}

/// The messages `cmds` ask the local store to keep, in order: role and content.
fn appended(cmds: &[Command]) -> Vec<(Role, String)> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::Persist(StoreOp::AppendMessage { message, .. }) => {
                Some((message.role, message.content.clone()))
            }
            _ => None,
        })
        .collect()
}

fn cancels(cmds: &[Command]) -> Vec<String> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::CancelReply { message_id, .. } => Some(message_id.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_send_stopped_before_its_answer_keeps_its_message_and_shows_the_reply_whole() {
    let store = Store::in_memory().unwrap();
    let mut app = app();
    // A server without the cancel: Ctrl-C stops watching at once.
    app.quit_guard.cancel_missing = true;
    let (send_id, key, mut cmds) = enter(&mut app, "a long question");
    cmds.extend(app.update(ctrl('c')));
    assert!(!open(&app).is_streaming());
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    assert!(
        appended(&cmds).is_empty(),
        "nothing is stored before the answer"
    );

    // The answer comes after the stop: the message is stored with its tokens, and the reply
    // is named and stored as far as it came.
    let answered = app.update(answer(send_id, "msg_1", 1505));
    assert_eq!(
        appended(&answered),
        [
            (Role::User, "a long question".to_string()),
            (Role::Assistant, String::new())
        ]
    );
    assert_eq!(open(&app).items[1].message_id.as_deref(), Some("msg_1"));
    assert_eq!(open(&app).context_tokens(), 1505);
    assert!(open(&app).stopped.is_none());
    cmds.extend(answered);
    // Its `started`, after the answer, is not taken for another device's reply.
    let later = app.update(started("msg_1", &key));
    assert!(
        !later
            .iter()
            .any(|c| matches!(c, Command::FetchHistory { .. }))
    );
    assert!(open(&app).foreign.is_none());

    // Its text still does not show; its `done` shows it whole, over the interrupted copy.
    cmds.extend(app.update(delta("msg_1", 0, "Partly")));
    assert_eq!(open(&app).content(1), "");
    cmds.extend(app.update(done(reply("msg_1", "The whole answer.", 4))));
    assert_eq!(open(&app).items.len(), 2);
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(open(&app).content(1), "The whole answer.");
    assert_eq!(open(&app).context_tokens(), 1509);

    // The store has the message and the whole reply, once each.
    persist(&store, &cmds);
    let kept = store.transcript(A).unwrap();
    let rows: Vec<_> = kept
        .iter()
        .map(|m| (m.role, m.content.as_str(), m.tokens, m.status))
        .collect();
    assert_eq!(
        rows,
        [
            (Role::User, "a long question", 1505, MessageStatus::Complete),
            (
                Role::Assistant,
                "The whole answer.",
                4,
                MessageStatus::Complete
            )
        ]
    );
    // A new run shows both.
    let rebuilt = app_loaded(kept);
    assert_eq!(rebuilt.session().unwrap().content(0), "a long question");
    assert_eq!(rebuilt.session().unwrap().content(1), "The whole answer.");
}

#[test]
fn a_reply_done_before_the_answer_to_its_stopped_send_is_stored_after_the_message() {
    let mut app = app();
    app.quit_guard.cancel_missing = true;
    let (send_id, key, _) = enter(&mut app, "hello");
    app.update(started("msg_1", &key));
    app.update(ctrl('c'));
    // The stream beats the answer: the reply is shown whole but waits for its message.
    let cmds = app.update(done(reply("msg_1", "Hi there", 2)));
    assert_eq!(open(&app).content(1), "Hi there");
    assert!(appended(&cmds).is_empty(), "{:?}", appended(&cmds));
    let cmds = app.update(answer(send_id, "msg_1", 3));
    assert_eq!(
        appended(&cmds),
        [
            (Role::User, "hello".to_string()),
            (Role::Assistant, "Hi there".to_string())
        ]
    );
    assert_eq!(open(&app).context_tokens(), 5);
}

#[test]
fn a_send_stopped_before_it_failed_gives_its_text_back() {
    let mut app = app();
    app.quit_guard.cancel_missing = true;
    let (send_id, _, _) = enter(&mut app, "over quota");
    app.update(ctrl('c'));
    let cmds = app.update(AppEvent::SendFailed {
        session_id: A.into(),
        send_id,
        failure: ApiError::Network("connection refused".into()),
    });
    assert!(appended(&cmds).is_empty());
    assert!(open(&app).items.is_empty(), "the exchange is taken out");
    assert!(open(&app).stopped.is_none());
    assert_eq!(app.composer_text(), "over quota");
    assert!(app.composer.send_error().is_some());
}

#[test]
fn no_send_starts_before_the_stopped_send_is_answered() {
    let mut app = app();
    app.quit_guard.cancel_missing = true;
    let (send_id, _, _) = enter(&mut app, "first");
    app.update(ctrl('c'));
    type_text(&mut app, "second");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(sent(&cmds).is_none());
    assert_eq!(app.composer_text(), "second", "the text stays");
    assert_eq!(app.composer.send_error(), Some(STOPPED_UNANSWERED));
    // Answered: the note goes, and Enter sends.
    app.update(answer(send_id, "msg_1", 1));
    assert_eq!(app.composer.send_error(), None);
    let cmds = app.update(key(KeyCode::Enter));
    assert_eq!(
        sent(&cmds).map(|(_, _, body)| body.content).as_deref(),
        Some("second")
    );
}

#[test]
fn a_stop_before_the_replys_id_is_known_asks_the_service_once_the_answer_names_it() {
    let mut app = app();
    let (send_id, _, _) = enter(&mut app, "write an essay");
    let cmds = app.update(ctrl('c'));
    assert!(cancels(&cmds).is_empty(), "no id to stop yet");
    assert_eq!(notice_text(&app), "stopping the reply…");
    assert!(open(&app).is_streaming(), "still followed");
    let cmds = app.update(answer(send_id, "msg_1", 3));
    assert_eq!(cancels(&cmds), ["msg_1"]);
    assert_eq!(
        appended(&cmds),
        [(Role::User, "write an essay".to_string())]
    );
    // Asked once.
    let cmds = app.update(delta("msg_1", 0, "The first"));
    assert!(cancels(&cmds).is_empty());
    let mut stopped = reply("msg_1", "The first", 2);
    stopped.finish_reason = Some(FinishReason::Stopped);
    let cmds = app.update(done(stopped));
    assert_eq!(open(&app).items[1].state, EntryState::Complete);
    assert_eq!(
        appended(&cmds),
        [(Role::Assistant, "The first".to_string())]
    );
    assert!(app.notice.is_none(), "the stop is over: {:?}", app.notice);
}

#[test]
fn a_stop_before_the_replys_id_is_known_asks_the_service_at_its_started() {
    let mut app = app();
    let (_, key, _) = enter(&mut app, "write an essay");
    app.update(ctrl('c'));
    let cmds = app.update(started("msg_1", &key));
    assert_eq!(cancels(&cmds), ["msg_1"]);
    // Stopped before any text: the turn is undone and the text comes back.
    app.update(stream(StreamUpdate::Event(StreamEvent::Error {
        session_id: A.into(),
        message_id: "msg_1".into(),
        error: ErrorBody::new("reply_stopped", "the reply was stopped before any text"),
    })));
    assert!(!open(&app).is_streaming());
    assert_eq!(app.composer_text(), "write an essay");
}

#[test]
fn a_second_stop_before_the_answer_stops_watching_and_the_answer_still_stores_the_message() {
    let mut app = app();
    let (send_id, _, _) = enter(&mut app, "think long");
    app.update(ctrl('c'));
    let cmds = app.update(ctrl('c'));
    assert!(cancels(&cmds).is_empty());
    assert!(!app.quit);
    assert_eq!(open(&app).items[1].state, EntryState::Interrupted);
    let cmds = app.update(answer(send_id, "msg_1", 2));
    assert!(
        cancels(&cmds).is_empty(),
        "the user stopped watching instead"
    );
    assert_eq!(
        appended(&cmds),
        [
            (Role::User, "think long".to_string()),
            (Role::Assistant, String::new())
        ]
    );
}

#[test]
fn a_reply_stopped_before_any_text_after_a_second_stop_gives_the_message_back() {
    let mut app = app();
    send_accepted(&mut app, "think long", "msg_1", 2);
    // The first stop goes to the service; the second stops watching, and stores the reply
    // as far as it came.
    let cmds = app.update(ctrl('c'));
    assert_eq!(cancels(&cmds), ["msg_1"]);
    let cmds = app.update(ctrl('c'));
    assert_eq!(appended(&cmds), [(Role::Assistant, String::new())]);
    // The service stopped it before any text: the turn is undone there.
    let cmds = app.update(error_event(
        "msg_1",
        "reply_stopped",
        "the reply was stopped before any text",
    ));
    assert!(matches!(open(&app).items[1].state, EntryState::Failed(_)));
    assert_eq!(
        open(&app).kept_items().count(),
        0,
        "neither is the service's"
    );
    assert_eq!(app.composer_text(), "think long");
    // The store has the reply as failed and the message as not sent.
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Persist(StoreOp::AppendMessage { message, .. })
            if message.role == Role::Assistant && message.status == MessageStatus::Failed)));
    assert!(cmds.iter().any(|c| matches!(c,
        Command::Persist(StoreOp::MarkUnsent { message, .. }) if message.content == "think long")));
}
