//! `convo cancel` and the finish reason `convo send` reports (and keeps in the local store),
//! from the binary against the local service started in-process.

use convo_service::{RunningService, ServiceConfig};

use super::support::{Run, Sandbox};

async fn start(max_context_tokens: u64) -> RunningService {
    start_paced(max_context_tokens, 0).await
}

/// With the builtin engine writing a word every `pace_ms`.
async fn start_paced(max_context_tokens: u64, pace_ms: u64) -> RunningService {
    let mut config = ServiceConfig::ephemeral(pace_ms);
    config.max_context_tokens = max_context_tokens;
    convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

async fn run(s: &Sandbox, svc: &RunningService, args: &[&str]) -> Run {
    let base = svc.base_url();
    s.run_env(
        args,
        &[
            ("CONVO_BASE_URL", base.as_str()),
            ("CONVO_API_KEY", svc.api_key.as_str()),
        ],
    )
    .await
}

#[tokio::test]
async fn send_says_a_reply_was_cut_and_json_carries_the_finish_reason() {
    // Room for a few words of the builtin reply after the message.
    let svc = start(12).await;
    let s = Sandbox::new();
    let cut = run(&s, &svc, &["send", "hello"]).await.expect(0);
    assert!(
        cut.stderr
            .contains("finish reason: length (the reply was cut by the reply or context limit)"),
        "{}",
        cut.stderr
    );
    let json = run(&s, &svc, &["send", "--json", "hello"]).await.expect(0);
    let reply: serde_json::Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(reply["finishReason"], "length");
    // The local store keeps it: the export says it too.
    let sid = reply["sessionId"].as_str().unwrap();
    let exported = run(&s, &svc, &["export", "--json", sid]).await.expect(0);
    assert_eq!(exported.json()["messages"][1]["finishReason"], "length");
    let exported = run(&s, &svc, &["export", sid]).await.expect(0);
    assert!(
        exported.stdout.contains(" · cut by a limit\n"),
        "{}",
        exported.stdout
    );

    // A reply that ended by itself says nothing more.
    let svc = start(100_000).await;
    let whole = run(&s, &svc, &["send", "--stream", "hello"])
        .await
        .expect(0);
    assert!(!whole.stderr.contains("finish reason"), "{}", whole.stderr);
}

#[tokio::test]
async fn cancel_of_a_reply_that_ended_or_never_was_says_which() {
    let svc = start(100_000).await;
    let s = Sandbox::new();
    let sent = run(&s, &svc, &["send", "--json", "hello"]).await.expect(0);
    let reply: serde_json::Value = serde_json::from_str(sent.stdout.trim()).unwrap();
    let (sid, id) = (
        reply["sessionId"].as_str().unwrap(),
        reply["messageId"].as_str().unwrap(),
    );
    // Not an error: the reply ended by itself.
    let ended = run(&s, &svc, &["cancel", sid, id]).await.expect(0);
    assert_eq!(
        ended.stdout,
        format!("{id} of {sid} had already ended: nothing to stop\n")
    );
    let ended = run(&s, &svc, &["cancel", "--json", sid, id])
        .await
        .expect(0);
    assert_eq!(
        ended.json(),
        serde_json::json!({"sessionId": sid, "messageId": id, "stopping": false})
    );
    let unknown = run(&s, &svc, &["cancel", sid, "msg_unknown"])
        .await
        .expect(1);
    assert!(
        unknown.stderr.contains("message_not_found"),
        "{}",
        unknown.stderr
    );
}

#[tokio::test]
async fn cancel_without_a_message_stops_the_sessions_running_reply_or_says_none_runs() {
    // A word a second: the reply runs until it is stopped.
    let svc = start_paced(100_000, 1000).await;
    let s = Sandbox::new();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let sid = convo_client::api::new_session_id();
    let started = http
        .post(format!("{}/v1/sessions/{sid}/messages", svc.base_url()))
        .bearer_auth(&svc.api_key)
        .json(&serde_json::json!({"content": "write an essay", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let id = started.json::<serde_json::Value>().await.unwrap()["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    // The session was started elsewhere: this local store has never heard of it, and its
    // whole id is enough.
    let stopped = run(&s, &svc, &["cancel", &sid]).await.expect(0);
    assert_eq!(
        stopped.stdout,
        format!("stopping {id} of {sid}: the text so far is kept as the reply\n")
    );
    // Stored, marked stopped.
    let reply = loop {
        let history: serde_json::Value = http
            .get(format!("{}/v1/sessions/{sid}/messages", svc.base_url()))
            .bearer_auth(&svc.api_key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(reply) = history["messages"].get(1) {
            break reply.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(reply["messageId"], id.as_str());
    assert_eq!(reply["finishReason"], "stopped");

    // Nothing runs now.
    let none = run(&s, &svc, &["cancel", &sid]).await.expect(1);
    assert_eq!(
        none.stderr,
        format!("convo: {sid} is generating no reply: nothing to stop\n")
    );
    let none = run(&s, &svc, &["cancel", "--json", &sid]).await.expect(1);
    let error: serde_json::Value = serde_json::from_str(none.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "no_reply_running", "{error}");
}
