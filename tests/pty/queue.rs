//! A message typed and sent while a reply streams waits for it, in the real binary against a
//! `convo serve` started in this process with a slow builtin engine: the composer says it is
//! queued, and once the reply has ended the message is sent by itself and answered.

use super::harness::{Convo, Server, keys};

#[test]
fn a_message_sent_during_a_reply_goes_when_the_reply_ends() {
    // A word every 60 ms: the first reply streams for several seconds, well past the typing.
    let server = Server::start(60);
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start_remote(home.path(), 100, 30, &server.service);
    convo.wait_text("● live");
    convo.type_text("first question");
    convo.send(keys::ENTER);
    convo.wait_text("streaming…");
    convo.type_text("second question");
    convo.send(keys::ENTER);
    convo.wait_text("queued: sent when the reply ends");
    // The first reply ends, the second message goes, and its reply comes (the builtin engine
    // says what it was sent).
    let screen = convo.wait_for("the second exchange", |s| {
        s.contains("You said: \"second question\"") && !s.contains("streaming…")
    });
    assert!(!screen.contains("queued:"), "{screen}");
    assert!(convo.quit(), "convo exits 0");
}
