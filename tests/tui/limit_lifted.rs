//! A TUI started at its account's request limit: the service refuses the open session's stream
//! and the account stream (429 `quota_exceeded`, an end for good, not a drop to retry), and the
//! usage gauges say the limit is reached. Once the limit lifts (here the month's count is set
//! back in the service's database, as a new period or a larger plan would), the next usage
//! poll is answered and both streams open again: a session created from another client comes
//! into the sessions pane by the account stream, and the open session's stream is live.

use crate::runtime;
use std::time::Duration;

use convo_client::api::client::{Client, ClientOptions};
use convo_client::api::{SendMessage, new_idempotency_key};
use convo_service::{DbLocation, ServiceConfig, Tier};
use convo_tui::app::{Connection, StreamState};
use convo_tui::workers::{Target, UsagePacing};

const GUARD: Duration = Duration::from_secs(60);

/// The free plan's requests a month.
const FREE_REQUESTS: i64 = 1_000;

fn set_requests_used(db: &std::path::Path, used: i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let rows = conn
        .execute("UPDATE usage_totals SET requests = ?1", [used])
        .unwrap();
    assert_eq!(rows, 1, "the account's row of this month");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_streams_refused_at_the_request_limit_open_again_once_it_lifts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("service.db");
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::File(db.clone());
    config.api_keys[0].1 = Tier::Free;
    let service = convo_service::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut options = ClientOptions::new(service.base_url().parse().unwrap());
    options.api_key = Some(service.api_key.clone());
    options.max_retries = 0;
    let other_device = Client::new(options.clone()).unwrap();
    // One request makes the month's row; then the limit is reached.
    other_device.usage().await.unwrap();
    set_requests_used(&db, FREE_REQUESTS);

    // Polls every 50 ms at most, so that the lifted limit is seen soon.
    let every = Duration::from_millis(50);
    let pacing = UsagePacing {
        active_every: every,
        idle_every: every,
        active_for: every,
    };
    let mut rt = runtime::start(Target::Remote(options), dir.path(), pacing);
    rt.run_until("refused at the limit", GUARD, |app| {
        matches!(app.connection(), Connection::Connected(_))
            && app
                .usage()
                .reached
                .as_ref()
                .is_some_and(|r| r.limit == "requests")
            && app
                .session()
                .is_some_and(|o| matches!(o.stream, StreamState::Down(_)))
    })
    .await
    .unwrap();

    set_requests_used(&db, 0);
    rt.run_until(
        "the limit lifted, the session's stream open",
        GUARD,
        |app| {
            app.usage().reached.is_none()
                && app.session().is_some_and(|o| o.stream == StreamState::Open)
        },
    )
    .await
    .unwrap();
    // Created elsewhere: only the account stream brings it (the list is read once, at connect).
    let made = convo_client::api::new_session_id();
    let body = SendMessage {
        content: "from another device".into(),
        role: None,
        stream: None,
        metadata: None,
    };
    other_device
        .send_message(&made, &body, &new_idempotency_key())
        .await
        .unwrap();
    rt.run_until("the other device's session listed", GUARD, |app| {
        app.sessions_pane().get(&made).is_some()
    })
    .await
    .unwrap();
    rt.shutdown().await;
}
