//! Stopping a reply with Ctrl-C in the real binary, against a `convo serve` started in this
//! process with a slow builtin engine: the service stops it, the reply keeps its text marked
//! `stopped`, and right after it a first Ctrl-C only says how to quit, a second quits.

use super::harness::{Convo, Server, keys};

#[test]
fn ctrl_c_stops_the_reply_on_the_service_then_twice_quits() {
    // A word every 300 ms: the reply is still coming when Ctrl-C comes.
    let server = Server::start(300);
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start_remote(home.path(), 100, 30, &server.service);
    convo.wait_text("● live");
    convo.type_text("write a long answer");
    convo.send(keys::ENTER);
    convo.wait_text("streaming…");
    // Some text arrived: the reply's first words are on screen.
    convo.wait_for("the first words", |s| s.contains("offline engine"));
    convo.send(keys::CTRL_C);
    let screen = convo.wait_for("the stopped reply", |s| {
        s.lines()
            .any(|l| l.contains("assistant ·") && l.contains("· stopped"))
    });
    assert!(!screen.contains("streaming…"), "{screen}");
    // Quitting right after the reply ended asks for a second Ctrl-C. (Both come well within
    // the guard's 2 s and 1 s: nothing but reading the screen is done between them.)
    convo.send(keys::CTRL_C);
    convo.wait_text("press Ctrl-C again to quit");
    convo.send(keys::CTRL_C);
    assert!(convo.wait_exit(), "convo exits 0");
    // The service kept it so: its history says `stopped`.
    let (base, key) = (server.service.base_url(), &server.service.api_key);
    let history: serde_json::Value = server.runtime.block_on(async {
        let client = reqwest::Client::new();
        let sessions: serde_json::Value = client
            .get(format!("{base}/v1/sessions"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let sid = sessions["sessions"][0]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
        client
            .get(format!("{base}/v1/sessions/{sid}/messages"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(
        history["messages"][1]["finishReason"], "stopped",
        "{history}"
    );
}
