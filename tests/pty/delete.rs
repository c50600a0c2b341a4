//! `convo delete` at a terminal: it asks before deleting what a prefix or a title chose, and a
//! "no" keeps the session.

use std::ffi::OsStr;
use std::path::Path;

use super::harness::{Convo, Server};

/// A new session made with `convo send` (no terminal) on `home`'s data dir; its id.
fn new_session(home: &Path, server: &Server, text: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(["send", "--json", text])
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("CONVO_DATA_DIR", home.join("data"))
        .env("CONVO_BASE_URL", server.service.base_url())
        .env("CONVO_API_KEY", &server.service.api_key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    reply["sessionId"].as_str().unwrap().to_string()
}

/// `convo ARGS` at a terminal of `home` against `server`.
fn at_terminal(home: &Path, server: &Server, args: &[&str]) -> Convo {
    let base = server.service.base_url();
    let env = [
        ("CONVO_BASE_URL", OsStr::new(&base)),
        ("CONVO_API_KEY", OsStr::new(&server.service.api_key)),
    ];
    Convo::command(home, 100, 10, args, &env)
}

#[test]
fn delete_asks_at_a_terminal_and_a_no_keeps_the_session() {
    let server = Server::start(0);
    let home = tempfile::tempdir().unwrap();
    let id = new_session(home.path(), &server, "a session to delete");

    // By the start of its id: the question names it with its title.
    let mut no = at_terminal(home.path(), &server, &["delete", &id[..12]]);
    no.wait_text("“a session to delete”");
    no.wait_text("and its whole history? [y/N]");
    no.type_text("n\r");
    assert!(no.wait_exit(), "a no exits 0");
    no.wait_text(&format!("kept {id}"));

    let mut yes = at_terminal(home.path(), &server, &["delete", &id[..12]]);
    yes.wait_text("[y/N]");
    yes.type_text("y\r");
    assert!(yes.wait_exit(), "a yes exits 0");
    yes.wait_text(&format!("deleted {id}"));

    // `--yes` does not ask (nor does a script, whose stdin is no terminal: tests/cli).
    let other = new_session(home.path(), &server, "another one");
    let mut forced = at_terminal(home.path(), &server, &["delete", "--yes", &other]);
    assert!(forced.wait_exit());
    let screen = forced.screen();
    assert!(!screen.contains("[y/N]"), "{screen}");
    assert!(screen.contains(&format!("deleted {other}")), "{screen}");
}
