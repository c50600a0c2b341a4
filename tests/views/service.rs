//! The views against the local service started in-process: a known sequence of messages,
//! then the per-bucket numbers of the metrics view and the wallets of the wallet view.

use std::time::Duration;

use chrono::{DateTime, Utc};
use convo_client::api::{
    Client, ClientOptions, Granularity, Message, Metrics, SendMessage, new_session_id,
};
use convo_client::series::buckets::{self, TimeRange};
use convo_service::{RunningService, ServiceConfig, jwt, start};
use convo_tui::metrics::worker::{MetricsWorker, run_load};
use convo_tui::metrics::{
    LoadPlan, MetricsEvent, MetricsKey, MetricsRequest, MetricsState, RangeChoice, Slot,
};
use convo_tui::wallet::worker::WalletWorker;
use convo_tui::wallet::{WalletEvent, WalletFailure};
use tokio::sync::mpsc;

/// Failure guard only: no assertion depends on timing.
const GUARD: Duration = Duration::from_secs(60);

async fn service() -> RunningService {
    let _ = rustls::crypto::ring::default_provider().install_default();
    start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("service starts")
}

fn client(svc: &RunningService, wallet_token: Option<String>) -> Client {
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    o.wallet_token = wallet_token;
    o.max_retries = 0;
    Client::new(o).unwrap()
}

async fn send(client: &Client, session: &str, text: &str, system: bool) -> Message {
    let body = SendMessage {
        content: text.into(),
        role: system.then_some(convo_client::api::Role::System),
        stream: None,
        metadata: None,
    };
    client
        .send_message(session, &body, &convo_client::api::new_idempotency_key())
        .await
        .expect("send")
}

fn created(m: &Message) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(&m.created_at)
        .expect("createdAt is RFC 3339")
        .with_timezone(&Utc)
}

/// Runs the load the way the TUI does and feeds every answer to the state.
async fn load(state: &mut MetricsState, client: &Client, plan: LoadPlan) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run_load(client.clone(), plan, move |ev| {
        let _ = tx.send(ev);
    }));
    while state.is_loading() {
        let ev = tokio::time::timeout(GUARD, rx.recv())
            .await
            .expect("an answer before the guard")
            .expect("the worker answers every query");
        state.on_event(ev);
    }
    task.await.unwrap();
}

fn plan_of(reqs: &[MetricsRequest]) -> LoadPlan {
    reqs.iter()
        .find_map(|r| match r {
            MetricsRequest::Load(p) => Some(p.clone()),
            _ => None,
        })
        .expect("a load")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_bucket_numbers_match_the_messages_sent() {
    let svc = service().await;
    let client = client(&svc, None);
    let before = Utc::now();
    // A known sequence: two sessions, five user messages and one system message.
    let (a, b) = (new_session_id(), new_session_id());
    let mut replies = Vec::new();
    for (s, text, system) in [
        (&a, "What is a bucket?", false),
        (&a, "Answer briefly.", true),
        (&b, "Hello there", false),
        (&a, "And a granularity?", false),
        (&b, "Tell me about weeks starting on Monday", false),
        (&b, "Thanks!", false),
    ] {
        replies.push((s.clone(), send(&client, s, text, system).await));
    }
    let after = Utc::now();

    // The range: from the hour before the first message to the end of the hour after the
    // last one, by hour; the chart's buckets are then whole hours.
    let start = buckets::floor(before, Granularity::Hour) - chrono::Duration::hours(1);
    let end = buckets::next_boundary(after, Granularity::Hour) + chrono::Duration::hours(1);
    let range = TimeRange { start, end };
    let mut state = MetricsState::default();
    // A plan with room: no load asks its cost first.
    state.requests_left = Some(1_000_000);
    let mut reqs = Vec::new();
    state.set_range(RangeChoice::Custom(range), Utc::now(), &mut reqs);
    assert_eq!(state.granularity, Granularity::Hour);
    let plan = plan_of(&reqs);
    assert!(plan.buckets.len() >= 3, "{plan:?}");
    load(&mut state, &client, plan).await;

    let current = state.current.as_ref().unwrap();
    assert!(!current.is_loading());
    assert_eq!(current.failed_buckets(), 0);
    let bucket_metrics: Vec<&Metrics> = current
        .buckets
        .iter()
        .map(|(_, s)| s.metrics().expect("every bucket loaded"))
        .collect();
    let totals = current.totals.metrics().expect("totals loaded");

    // The totals of the range: 6 sent (5 user + 1 system) and 6 replies, in 2 sessions.
    assert_eq!(totals.messages.total, 12);
    assert_eq!(totals.messages.user_messages, 5);
    assert_eq!(totals.messages.assistant_messages, 6);
    assert_eq!(totals.sessions.total, 2);
    assert_eq!(totals.sessions.active, 2);
    let completion: u64 = replies.iter().map(|(_, m)| m.tokens).sum();
    assert_eq!(totals.tokens.completion, completion);
    assert_eq!(totals.tokens.total, totals.tokens.prompt + completion);

    // Per bucket: the assistant messages and completion tokens are exactly the replies whose
    // createdAt falls in the bucket; the first bucket (the hour before) is empty.
    assert_eq!(bucket_metrics[0].messages.total, 0);
    for ((bucket, _), m) in current.buckets.iter().zip(&bucket_metrics) {
        let here: Vec<&(String, Message)> = replies
            .iter()
            .filter(|(_, r)| (bucket.start..bucket.end).contains(&created(r)))
            .collect();
        assert_eq!(
            m.messages.assistant_messages,
            here.len() as u64,
            "{bucket:?}"
        );
        assert_eq!(
            m.tokens.completion,
            here.iter().map(|(_, r)| r.tokens).sum::<u64>(),
            "{bucket:?}"
        );
        let sessions_here: std::collections::HashSet<&String> =
            here.iter().map(|(s, _)| s).collect();
        assert!(
            m.sessions.active >= sessions_here.len() as u64,
            "{bucket:?}"
        );
        assert_eq!(m.period.granularity, Granularity::Hour);
    }
    // The buckets add up to the totals.
    let sum = |f: fn(&Metrics) -> u64| bucket_metrics.iter().map(|m| f(m)).sum::<u64>();
    assert_eq!(sum(|m| m.messages.total), totals.messages.total);
    assert_eq!(
        sum(|m| m.messages.user_messages),
        totals.messages.user_messages
    );
    assert_eq!(sum(|m| m.tokens.total), totals.tokens.total);
    assert_eq!(sum(|m| m.tokens.prompt), totals.tokens.prompt);

    // A finished load is cached: opening the view again asks for nothing.
    assert!(state.cache.contains_key(&MetricsKey {
        range: RangeChoice::Custom(range),
        granularity: Granularity::Hour
    }));
    let mut again = Vec::new();
    state.set_granularity(Granularity::Day, Utc::now(), &mut again);
    load(&mut state, &client, plan_of(&again)).await;
    let by_day = state.current.as_ref().unwrap();
    let day_total: u64 = by_day
        .buckets
        .iter()
        .map(|(_, s)| s.metrics().unwrap().messages.total)
        .sum();
    assert_eq!(day_total, 12);
    let mut back = Vec::new();
    state.set_granularity(Granularity::Hour, Utc::now(), &mut back);
    assert!(back.is_empty(), "served from the cache: {back:?}");
    svc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_match_convo_metrics_json() {
    let svc = service().await;
    let client = client(&svc, None);
    let s = new_session_id();
    send(&client, &s, "one", false).await;
    send(&client, &s, "two", false).await;
    let mut state = MetricsState::default();
    // A plan with room: no load asks its cost first.
    state.requests_left = Some(1_000_000);
    let mut reqs = Vec::new();
    // The last 24 hours by hour, as F2 opens.
    // The app's clock is a minute late: the worker plans with the real one.
    state.open(Utc::now() - chrono::Duration::minutes(1), &mut reqs);
    let plan = plan_of(&reqs);
    load(&mut state, &client, plan).await;
    let current = state.current.as_ref().unwrap();
    let range = current.range;
    let totals = current.totals.metrics().unwrap().clone();

    let home = tempfile::tempdir().unwrap();
    let fmt = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_convo"))
        .args(["metrics", "--json", "--granularity", "hour", "--start"])
        .arg(fmt(range.start))
        .arg("--end")
        .arg(fmt(range.end))
        .env_clear()
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("CONVO_DATA_DIR", home.path().join("data"))
        .env("CONVO_BASE_URL", svc.base_url())
        .env("CONVO_API_KEY", &svc.api_key)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Metrics = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli.messages, totals.messages);
    assert_eq!(cli.tokens, totals.tokens);
    assert_eq!(cli.sessions.total, totals.sessions.total);
    assert_eq!(cli.sessions.active, totals.sessions.active);
    assert_eq!(totals.messages.total, 4);
    svc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_load_stops_its_requests() {
    use convo_client::series::CONCURRENCY;
    let svc = service().await;
    let client = client(&svc, None);
    let mut worker = MetricsWorker::new();
    let mut state = MetricsState::default();
    // A plan with room: no load asks its cost first.
    state.requests_left = Some(1_000_000);
    let mut reqs = Vec::new();
    state.set_range(
        RangeChoice::Preset(convo_tui::metrics::RangePreset::Last90Days),
        Utc::now(),
        &mut reqs,
    );
    let plan = plan_of(&reqs);
    let queries = plan.buckets.len() + 1;
    assert_eq!(queries, 91);
    // A sink that waits for the test to take each answer: the load cannot run ahead.
    let (tx, rx) = std::sync::mpsc::sync_channel::<MetricsEvent>(0);
    let task = worker
        .handle(MetricsRequest::Load(plan), Some(&client), move |ev| {
            let _ = tx.send(ev);
        })
        .expect("a load task");
    let (rx, first) = tokio::task::spawn_blocking(move || {
        let ev = rx.recv_timeout(GUARD).expect("a first answer");
        (rx, ev)
    })
    .await
    .unwrap();
    state.on_event(first);
    let mut cancel = Vec::new();
    assert!(state.cancel(&mut cancel));
    assert!(
        worker
            .handle(cancel.remove(0), Some(&client), |_| {})
            .is_none()
    );
    assert_eq!(worker.running(), None);
    // Let a blocked answer go nowhere, then wait for the aborted task to end.
    drop(rx);
    tokio::time::timeout(GUARD, async {
        while !task.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the load task ends");
    // Requested: the answered query, the one blocked in the sink, those in flight, and the
    // few the task may start while it drains ready answers before the abort lands (plus this
    // usage request); far from the 91 of the whole load, which a broken cancel reaches.
    let used = client.usage().await.unwrap().requests.used;
    assert!(
        used <= (4 * CONCURRENCY + 4) as u64,
        "{used} requests: the load went on after the cancel"
    );
    let load = state.current.as_ref().unwrap();
    assert!(load.was_cancelled());
    assert!(load.buckets.iter().any(|(_, s)| *s == Slot::Cancelled));
    svc.shutdown().await;
}

async fn fetch(worker: &WalletWorker, client: &Client, id: &str) -> WalletEvent {
    let (tx, mut rx) = mpsc::unbounded_channel();
    worker.handle(
        convo_tui::wallet::WalletRequest::Fetch {
            fetch_id: 1,
            wallet_id: id.into(),
        },
        Some(client),
        move |ev| {
            let _ = tx.send(ev);
        },
    );
    tokio::time::timeout(GUARD, rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wallets_load_and_failures_are_told_apart() {
    let svc = service().await;
    let dir = tempfile::tempdir().unwrap();
    let worker = WalletWorker::new(Some(dir.path().join("recent-wallets.json")));
    let token = jwt::mint(&svc.jwt_secret, "views-test", 600);
    let good = client(&svc, Some(token));
    match fetch(&worker, &good, "flagged").await {
        WalletEvent::Fetched { result: Ok(w), .. } => {
            assert_eq!(w.wallet_id, "flagged");
            assert!(w.risk_score >= 70.0);
            assert!(!w.risk_factors.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let not_found = fetch(&worker, &good, "no-such-wallet").await;
    assert_eq!(
        not_found,
        WalletEvent::Fetched {
            fetch_id: 1,
            result: Err(WalletFailure::NotFound)
        }
    );
    let forged = client(&svc, Some(jwt::mint("another secret", "x", 600)));
    assert!(matches!(
        fetch(&worker, &forged, "treasury").await,
        WalletEvent::Fetched {
            result: Err(WalletFailure::Unauthorized(_)),
            ..
        }
    ));
    let none = client(&svc, None);
    assert_eq!(
        fetch(&worker, &none, "treasury").await,
        WalletEvent::Fetched {
            fetch_id: 1,
            result: Err(WalletFailure::NoToken)
        }
    );
    svc.shutdown().await;
}
