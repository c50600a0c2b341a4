//! `convo cancel` and the finish reason `convo send` reports, from the binary against the
//! local service started in-process.

use convo_service::{RunningService, ServiceConfig};

use super::support::{Run, Sandbox};

async fn start(max_context_tokens: u64) -> RunningService {
    let mut config = ServiceConfig::ephemeral(0);
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
    let ended = run(&s, &svc, &["cancel", sid, id]).await.expect(1);
    assert!(ended.stderr.contains("reply_finished"), "{}", ended.stderr);
    let unknown = run(&s, &svc, &["cancel", sid, "msg_unknown"])
        .await
        .expect(1);
    assert!(
        unknown.stderr.contains("message_not_found"),
        "{}",
        unknown.stderr
    );
}
