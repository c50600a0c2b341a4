//! CLI parity: `convo metrics --series` and `convo wallet` against the local service.

use std::path::Path;
use std::process::Output;

use chrono::{DateTime, SecondsFormat, Utc};
use convo_client::api::{Client, ClientOptions, Granularity, SendMessage, new_session_id};
use convo_client::series::buckets;
use convo_service::{RunningService, ServiceConfig, jwt, start};
use serde_json::Value;

async fn service() -> RunningService {
    let _ = rustls::crypto::ring::default_provider().install_default();
    start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

async fn convo(home: &Path, svc: &RunningService, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("CONVO_DATA_DIR", home.join("data"))
        .env("CONVO_BASE_URL", svc.base_url())
        .env("CONVO_API_KEY", &svc.api_key)
        .output()
        .await
        .unwrap()
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_series_prints_the_buckets_of_the_view() {
    let svc = service().await;
    let home = tempfile::tempdir().unwrap();
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    let client = Client::new(o).unwrap();
    let before = Utc::now();
    let s = new_session_id();
    for text in ["one", "two", "three"] {
        let body = SendMessage {
            content: text.into(),
            role: None,
            stream: None,
            metadata: None,
        };
        client
            .send_message(&s, &body, &convo_client::api::new_idempotency_key())
            .await
            .unwrap();
    }
    let start = buckets::floor(before, Granularity::Hour) - chrono::Duration::hours(2);
    let end = buckets::next_boundary(Utc::now(), Granularity::Hour);
    let n = buckets::bucket_count(buckets::TimeRange { start, end }, Granularity::Hour);
    let (s_arg, e_arg) = (iso(start), iso(end));
    let range = ["--start", &s_arg, "--end", &e_arg, "--granularity", "hour"];

    // --json: the array of the buckets' Metrics, adding up to the totals of the range.
    let args: Vec<&str> = ["metrics", "--series", "--json"]
        .iter()
        .chain(&range)
        .copied()
        .collect();
    let series: Value =
        serde_json::from_str(&stdout(&convo(home.path(), &svc, &args).await)).unwrap();
    let series = series.as_array().unwrap();
    assert_eq!(series.len(), n);
    let sum: u64 = series
        .iter()
        .map(|b| b["messages"]["total"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, 6);
    assert_eq!(series[0]["messages"]["total"], 0);
    assert_eq!(series[0]["period"]["granularity"], "hour");
    let args: Vec<&str> = ["metrics", "--json"]
        .iter()
        .chain(&range)
        .copied()
        .collect();
    let totals: Value =
        serde_json::from_str(&stdout(&convo(home.path(), &svc, &args).await)).unwrap();
    assert_eq!(totals["messages"]["total"], 6);

    // The table: a header and one row per bucket.
    let args: Vec<&str> = ["metrics", "--series"]
        .iter()
        .chain(&range)
        .copied()
        .collect();
    let table = stdout(&convo(home.path(), &svc, &args).await);
    assert!(table.contains("active sessions"), "{table}");
    let rows = table
        .lines()
        .filter(|l| l.contains(" Nov ") || l.contains(" Dec ") || l.contains(":00 "))
        .count();
    assert!(rows >= n, "{table}");

    // Too many buckets: refused like the view refuses it.
    let out = convo(
        home.path(),
        &svc,
        &[
            "metrics",
            "--series",
            "--granularity",
            "hour",
            "--start",
            "2026-01-01",
            "--end",
            "2026-06-01",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than 200"), "{err}");
    svc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_series_asks_for_a_complete_bucket_once() {
    let svc = service().await;
    let home = tempfile::tempdir().unwrap();
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    let client = Client::new(o).unwrap();
    let used = || async { client.usage().await.unwrap().requests.used };
    // Three whole hours that ended over an hour ago: complete.
    let end = buckets::floor(Utc::now(), Granularity::Hour) - chrono::Duration::hours(1);
    let start = end - chrono::Duration::hours(3);
    let (s_arg, e_arg) = (iso(start), iso(end));
    let args = [
        "metrics",
        "--series",
        "--json",
        "--start",
        &s_arg,
        "--end",
        &e_arg,
        "--granularity",
        "hour",
    ];
    let u0 = used().await;
    let first = stdout(&convo(home.path(), &svc, &args).await);
    let u1 = used().await;
    let second = stdout(&convo(home.path(), &svc, &args).await);
    let u2 = used().await;
    assert_eq!(first, second, "the kept answers are the same");
    // Each span holds one usage poll; the first run asked 3 buckets, the second none.
    assert_eq!((u1 - u0) - (u2 - u1), 3, "{u0} {u1} {u2}");
    // --fresh asks them all again.
    let fresh: Vec<&str> = args.iter().copied().chain(["--fresh"]).collect();
    assert_eq!(stdout(&convo(home.path(), &svc, &fresh).await), first);
    let u3 = used().await;
    assert_eq!(u3 - u2, u1 - u0, "{u2} {u3}");
    svc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wallet_prints_the_sections_of_the_view() {
    let svc = service().await;
    let home = tempfile::tempdir().unwrap();
    let token = jwt::mint(&svc.jwt_secret, "cli-test", 600);
    let out = convo(
        home.path(),
        &svc,
        &["wallet", "treasury", "--token", &token],
    )
    .await;
    let text = stdout(&out);
    for want in [
        "Team treasury",
        "1,842.317 SOL",
        "8/100 low risk",
        "[multisig]",
        "token accounts (12) · total $592,873.53",
        "NFTs (0)",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    // Sorted by USD value: USDC first.
    let usdc = text.find("USDC").unwrap();
    let bonk = text.find("BONK").unwrap();
    assert!(usdc < bonk, "{text}");
    svc.shutdown().await;
}
