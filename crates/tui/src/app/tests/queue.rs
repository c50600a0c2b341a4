//! Enter while a reply is coming queues the composer's text behind it (`app/queue.rs`).

use super::*;
use crate::app::queue::{QUEUED, QUEUED_NOT_SENT};

/// The stream's `done` for reply `id` of A.
fn done(id: &str, content: &str) -> AppEvent {
    stream(StreamUpdate::Event(StreamEvent::Done {
        message: reply(id, content, 2),
    }))
}

/// "first" sent and accepted (reply `r` coming), then "second" typed and Enter pressed.
fn queued_behind_a_reply() -> App {
    let mut app = app();
    send_accepted(&mut app, "first", "r", 3);
    app.update(delta("r", 0, "Thinking"));
    type_text(&mut app, "second");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(
        sent(&cmds).is_none(),
        "nothing is sent while the reply comes"
    );
    assert_eq!(app.composer().send_error(), Some(QUEUED));
    assert!(app.is_queued());
    app
}

#[test]
fn a_message_queued_behind_a_reply_is_sent_when_the_reply_ends() {
    let mut app = queued_behind_a_reply();
    let cmds = app.update(done("r", "Thinking done."));
    let (session, _, body) = sent(&cmds).expect("the queued text is sent");
    assert_eq!((session.as_str(), body.content.as_str()), (A, "second"));
    assert!(!app.is_queued());
    assert_eq!(app.composer_text(), "", "sent, as by Enter");
    assert_eq!(app.composer().send_error(), None);
    assert!(open(&app).pending.is_some(), "its own reply is coming");
}

#[test]
fn the_queued_note_is_news_not_an_error_where_the_status_bar_says_it() {
    let mut app = queued_behind_a_reply();
    // Too narrow for the composer's border: the status bar says the note, as information.
    app.update(AppEvent::Resize(60, 20));
    assert!(!app.send_error_fits(QUEUED));
    assert_eq!(
        app.status_message(),
        Some((Level::Info, QUEUED.to_string()))
    );
    assert_eq!(app.send_note_level(), Level::Info);
    // A note that says why a send did not go stays an error.
    app.update(error_event("r", "engine_failed", "the model stopped"));
    assert_eq!(app.send_note_level(), Level::Error);
}

#[test]
fn an_edit_or_esc_takes_the_queued_send_back_and_keeps_the_text() {
    let mut app = queued_behind_a_reply();
    type_text(&mut app, "!");
    assert_eq!(app.composer().send_error(), None);
    assert!(sent(&app.update(done("r", "Done."))).is_none());
    assert_eq!(app.composer_text(), "second!");

    let mut app = queued_behind_a_reply();
    app.update(key(KeyCode::Esc));
    app.update(key(KeyCode::Esc));
    assert!(sent(&app.update(done("r", "Done."))).is_none());
    assert_eq!(app.composer_text(), "second");
    // Enter again, with nothing coming: sent at once.
    assert!(sent(&app.update(key(KeyCode::Enter))).is_some());
}

#[test]
fn a_reply_that_fails_or_is_stopped_sends_nothing_and_says_so() {
    let mut app = queued_behind_a_reply();
    let cmds = app.update(error_event("r", "engine_failed", "the model stopped"));
    assert!(sent(&cmds).is_none());
    assert_eq!(app.composer_text(), "second", "the text is kept");
    assert_eq!(app.composer().send_error(), Some(QUEUED_NOT_SENT));
    assert!(!app.is_queued());

    // Stopping the reply takes the queued send back: a Ctrl-C right after does not send.
    let mut app = queued_behind_a_reply();
    app.update(ctrl('c'));
    assert!(!app.is_queued());
    assert_eq!(app.composer().send_error(), None);
    assert!(sent(&app.update(done("r", "Thinking"))).is_none());
    assert_eq!(app.composer_text(), "second");
    assert!(!app.quit);
}

#[test]
fn switching_sessions_drops_the_queued_send() {
    let mut app = queued_behind_a_reply();
    let mut out = Vec::new();
    app.open_session(B.to_string(), &mut out);
    app.update(key(KeyCode::Char('x')));
    assert!(!app.is_queued());
    assert_ne!(app.composer().send_error(), Some(QUEUED));
}

#[test]
fn a_command_that_sends_waits_in_the_queue_too() {
    let mut app = app();
    send_accepted(&mut app, "first", "r", 3);
    type_text(&mut app, "/continue");
    let cmds = app.update(key(KeyCode::Enter));
    assert!(sent(&cmds).is_none());
    assert_eq!(app.composer_text(), "/continue", "kept while it waits");
    assert!(app.is_queued());
    let cmds = app.update(done("r", "Done."));
    let (_, _, body) = sent(&cmds).expect("the command runs when the reply ends");
    assert_eq!(
        body.content,
        crate::transcript_pane::reply_marks::CONTINUE_PROMPT
    );
    assert_eq!(app.composer_text(), "");
}
