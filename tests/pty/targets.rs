//! The real binary on one data dir, pointed in turn at the embedded service and at another
//! server (a `convo serve` started in this process): each shows only its own sessions, and
//! neither calls the other's session deleted or its stream down (issue 27, item 1).

use super::harness::{Convo, Server, keys};

/// Sends `text` once the open session's stream is up, and waits for its reply to be complete.
fn exchange(convo: &mut Convo, text: &str) {
    convo.wait_text("● live");
    convo.type_text(text);
    convo.send(keys::ENTER);
    convo.wait_for("a complete reply", |s| {
        s.contains(text)
            && s.lines()
                .any(|l| l.contains("assistant ·") && l.contains("tokens"))
    });
}

fn quit(mut convo: Convo) {
    assert!(convo.quit(), "convo exits 0");
}

fn nothing_foreign(screen: &str, foreign: &str) {
    assert!(!screen.contains(foreign), "{screen}");
    assert!(!screen.contains("deleted"), "{screen}");
    assert!(!screen.contains("stream down"), "{screen}");
}

#[test]
fn the_embedded_service_and_a_server_never_show_each_others_sessions() {
    let server = Server::start(0);
    let home = tempfile::tempdir().unwrap();

    let mut convo = Convo::start(home.path(), 100, 30);
    convo.wait_text("● builtin (no model)");
    exchange(&mut convo, "words on the embedded one");
    quit(convo);

    let mut convo = Convo::start_remote(home.path(), 100, 30, &server.service);
    let screen = convo.wait_text("● live");
    nothing_foreign(&screen, "words on the embedded one");
    exchange(&mut convo, "words on the server");
    nothing_foreign(&convo.screen(), "words on the embedded one");
    quit(convo);

    let convo = Convo::start(home.path(), 100, 30);
    let screen = convo.wait_text("words on the embedded one");
    convo.wait_text("● builtin (no model)");
    nothing_foreign(&screen, "words on the server");
    nothing_foreign(&convo.screen(), "words on the server");
    quit(convo);
    drop(server);
}
