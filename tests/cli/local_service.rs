//! The "done when" of the client work, run from the binary against the local service
//! started in-process: send, send --stream, usage, metrics, wallet, delete twice, sessions,
//! and a killed server.

use convo_service::{RunningService, ServiceConfig};

use super::support::{Run, Sandbox};
use crate::refused::refused_addr;

async fn start() -> RunningService {
    convo_service::start(ServiceConfig::ephemeral(1), "127.0.0.1:0".parse().unwrap())
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
async fn a_new_user_session_from_the_shell() {
    let svc = start().await;
    let s = Sandbox::new();

    let hi = run(&s, &svc, &["send", "hi"]).await.expect(0);
    assert!(hi.stdout.trim().len() > 1, "a reply: {:?}", hi.stdout);
    let id = hi
        .stderr
        .trim()
        .strip_prefix("new session: ")
        .unwrap()
        .to_string();

    let streamed = run(
        &s,
        &svc,
        &["send", "--stream", "--session", &id, "tell me more"],
    )
    .await
    .expect(0);
    assert!(
        streamed.stdout.ends_with('\n') && streamed.stdout.trim().len() > 1,
        "{:?}",
        streamed.stdout
    );
    assert!(streamed.stderr.is_empty(), "{}", streamed.stderr);

    let json = run(
        &s,
        &svc,
        &["send", "--json", "--session", &id, "and as JSON"],
    )
    .await
    .expect(0)
    .json();
    assert_eq!(json["sessionId"], id.as_str());
    assert_eq!(json["role"], "assistant");
    assert!(json["tokens"].as_u64().unwrap() > 0);

    let usage = run(&s, &svc, &["usage", "--json"]).await.expect(0).json();
    assert_eq!(usage["sessions"]["active"], 1);
    assert_eq!(usage["tier"], "pro");
    let table = run(&s, &svc, &["usage"]).await.expect(0);
    assert!(
        table.stdout.contains("requests") && table.stdout.contains("tier: pro"),
        "{}",
        table.stdout
    );

    let metrics = run(&s, &svc, &["metrics", "--json"]).await.expect(0).json();
    assert_eq!(metrics["messages"]["assistantMessages"], 3);
    assert_eq!(metrics["period"]["granularity"], "day");
    run(&s, &svc, &["metrics", "--granularity", "hour"])
        .await
        .expect(0);

    // The series: one query per bucket; their totals add up to the whole range's.
    let day = chrono::Utc::now().date_naive();
    let start = (day - chrono::Duration::days(2)).to_string();
    let end = (day + chrono::Duration::days(1)).to_string();
    let range = ["metrics", "--start", start.as_str(), "--end", end.as_str()];
    let whole = run(&s, &svc, &[&range[..], &["--json"]].concat())
        .await
        .expect(0)
        .json();
    let series = run(&s, &svc, &[&range[..], &["--series", "--json"]].concat())
        .await
        .expect(0)
        .json();
    let buckets = series.as_array().expect("an array of buckets");
    assert_eq!(buckets.len(), 3, "{series}");
    let sum: u64 = buckets
        .iter()
        .map(|b| b["messages"]["total"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, whole["messages"]["total"].as_u64().unwrap());
    assert_eq!(sum, 3 + 3, "{series}");
    let table = run(&s, &svc, &[&range[..], &["--series"]].concat())
        .await
        .expect(0);
    assert!(table.stdout.lines().count() >= 5, "{}", table.stdout);

    // A wallet token minted by `convo token`, as a user would.
    let token = s
        .run(&["token", "--secret", &svc.jwt_secret, "--sub", "me"])
        .await
        .expect(0);
    let token = token.stdout.trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let wallet = run(
        &s,
        &svc,
        &["wallet", "treasury", "--token", &token, "--json"],
    )
    .await
    .expect(0)
    .json();
    assert_eq!(wallet["walletId"], "treasury");
    let table = run(&s, &svc, &["wallet", "treasury", "--token", &token])
        .await
        .expect(0);
    assert!(
        table.stdout.contains("Team treasury") && table.stdout.contains("USDC"),
        "{}",
        table.stdout
    );
    // A token with a bad signature: the refusal names the wallet token, not the API key.
    let forged = s
        .run(&["token", "--secret", "not-the-secret", "--sub", "me"])
        .await
        .expect(0);
    let refused = run(
        &s,
        &svc,
        &["wallet", "treasury", "--token", forged.stdout.trim()],
    )
    .await
    .expect(1);
    assert!(
        refused.stderr.contains("CONVO_WALLET_TOKEN / --token")
            && !refused.stderr.contains("CONVO_API_KEY"),
        "{}",
        refused.stderr
    );

    let sessions = run(&s, &svc, &["sessions", "--json"])
        .await
        .expect(0)
        .json();
    assert_eq!(sessions[0]["sessionId"], id.as_str());
    assert_eq!(sessions[0]["title"], "hi");

    run(&s, &svc, &["delete", &id]).await.expect(0);
    let twice = run(&s, &svc, &["delete", &id]).await.expect(1);
    assert!(
        twice.stderr.starts_with("convo: session_not_found: "),
        "{}",
        twice.stderr
    );
    assert_eq!(twice.stderr.lines().count(), 1);

    // The server goes away: exit 3 and one line.
    // The service gone: an address where nothing answers (not the service's own, whose port
    // may go to another test's server meanwhile).
    let key = svc.api_key.clone();
    svc.shutdown().await;
    let (_refusing, addr) = refused_addr();
    let base = format!("http://{addr}");
    let dead = s
        .run_env(
            &["usage"],
            &[
                ("CONVO_BASE_URL", base.as_str()),
                ("CONVO_API_KEY", key.as_str()),
            ],
        )
        .await
        .expect(3);
    assert_eq!(dead.stderr.lines().count(), 1, "{}", dead.stderr);
    assert!(
        dead.stderr.starts_with("convo: network error: "),
        "{}",
        dead.stderr
    );
}

#[tokio::test]
async fn the_session_limit_says_a_deletion_frees_a_place_now() {
    let mut config = ServiceConfig::ephemeral(0);
    config.api_keys[0].1 = convo_service::Tier::Free;
    let svc = convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts");
    let s = Sandbox::new();
    // The free plan's ten sessions.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    for _ in 0..10 {
        let id = convo_client::api::new_session_id();
        let status = http
            .post(format!("{}/v1/sessions/{id}/messages", svc.base_url()))
            .bearer_auth(&svc.api_key)
            .json(&serde_json::json!({"content": "hi"}))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 200);
    }
    let refused = run(&s, &svc, &["send", "one more"]).await.expect(1);
    // The session was never created: no id is announced for it.
    assert!(
        !refused.stderr.contains("new session:"),
        "{}",
        refused.stderr
    );
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("quota_exceeded")
            && refused.stderr.contains("resets at")
            && refused.stderr.contains("convo delete SESSION_ID"),
        "{}",
        refused.stderr
    );
}
