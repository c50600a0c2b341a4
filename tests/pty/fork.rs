//! Selecting a message and forking there with the real binary (the embedded service).

use super::harness::{Convo, keys};

const CTRL_O: &[u8] = b"\x0f";

#[test]
fn select_a_message_fork_there_and_the_fork_opens_under_its_source() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("first question");
    convo.send(keys::ENTER);
    convo.wait_for("the first reply", |s| {
        s.lines()
            .filter(|l| l.contains("assistant ·") && l.contains("tokens"))
            .count()
            == 1
    });
    convo.type_text("second question");
    convo.send(keys::ENTER);
    convo.wait_for("the second reply", |s| {
        s.contains("You said: \"second question\"")
            && s.lines()
                .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    // Ctrl-o selects the last message; two up is the first reply.
    convo.send(CTRL_O);
    convo.wait_text("f fork");
    convo.send(b"k");
    convo.send(b"k");
    convo.send(b"f");
    let screen = convo.wait_text("forked: a new session with 2 messages");
    // The fork is open with the history up to the first reply, and listed under its source.
    assert!(screen.contains("first question"), "{screen}");
    assert!(!screen.contains("second question"), "{screen}");
    assert!(screen.contains("↳"), "{screen}");
    // Typing goes to the composer of the fork.
    convo.type_text("another way");
    convo.wait_text("another way");
    assert!(convo.quit(), "convo exits 0");
}
