//! Searching with the real binary: the transcript's search bar, and `/search` across sessions.

use super::harness::{Convo, keys};

const CTRL_F: &[u8] = b"\x06";
const ESC: &[u8] = b"\x1b";

#[test]
fn ctrl_f_finds_moves_and_closes_leaving_the_draft() {
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    convo.type_text("a **pineapple** and a PineApple");
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
    convo.type_text("half a draft");
    convo.wait_text("half a draft");
    convo.send(CTRL_F);
    convo.wait_text("type to search");
    convo.type_text("pineapple");
    // The bold word is matched as drawn, without its asterisks, whatever its case.
    // (The bar counts matches as each key arrives: wait for the whole word.)
    let screen = convo.wait_for("the first match", |s| {
        s.contains("match 1/") && s.contains("/ pineapple")
    });
    assert!(!screen.contains("**pineapple**"), "{screen}");
    convo.send(keys::ENTER);
    convo.wait_text("match 2/");
    convo.send(b"n");
    convo.wait_for("the next match or the first again", |s| {
        s.contains("match 3/") || s.contains("match 1/")
    });
    convo.send(b"N");
    convo.wait_text("match 2/");
    convo.send(ESC);
    let screen = convo.wait_for("the bar closed", |s| !s.contains("/ pineapple"));
    assert!(screen.contains("half a draft"), "{screen}");
    // Keys go to the composer again.
    convo.type_text("!");
    convo.wait_text("half a draft!");

    // Across sessions: the store's index finds the message.
    convo.send(b"\x15"); // Ctrl-U clears the line
    convo.type_text("/search pineapple");
    convo.send(keys::ENTER);
    convo.wait_text("Search all sessions");
    let screen = convo.wait_for("a hit", |s| {
        s.contains("1 message") || s.contains("2 messages")
    });
    assert!(screen.contains("pineapple"), "{screen}");
    convo.send(keys::ENTER);
    convo.wait_for("the session at the message", |s| {
        !s.contains("Search all sessions") && s.contains("/ pineapple") && s.contains("match ")
    });
    assert!(convo.quit(), "convo exits 0");
}
