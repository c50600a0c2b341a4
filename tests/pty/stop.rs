//! Stopping a reply with Ctrl-C in the real binary, against a `convo serve` started in this
//! process with a slow builtin engine: the service stops it, the reply keeps its text marked
//! `stopped`, and right after it a first Ctrl-C only says how to quit, a second quits.

use std::ffi::OsStr;

use super::harness::{Convo, keys};

#[test]
fn ctrl_c_stops_the_reply_on_the_service_then_twice_quits() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A word every 300 ms: the reply is still coming when Ctrl-C comes.
    let svc = rt
        .block_on(convo_service::start(
            convo_service::ServiceConfig::ephemeral(300),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    let (base, key) = (svc.base_url(), svc.api_key.clone());
    let remote: [(&str, &OsStr); 2] = [
        ("CONVO_BASE_URL", OsStr::new(&base)),
        ("CONVO_API_KEY", OsStr::new(&key)),
    ];
    let home = tempfile::tempdir().unwrap();
    let mut convo = Convo::start_with_env(home.path(), 100, 30, &remote);
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let history: serde_json::Value = rt.block_on(async {
        let client = reqwest::Client::new();
        let sessions: serde_json::Value = client
            .get(format!("{base}/v1/sessions"))
            .bearer_auth(&key)
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
            .bearer_auth(&key)
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
