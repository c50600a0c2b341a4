//! The idle request budget (docs/tui.md, "Usage gauges"): a TUI left idle spends at most 20
//! requests an hour, against a server with the account stream (it holds the stream open and
//! polls nothing) and against one without (it polls the usage, backing off to every 5
//! minutes). Time is scaled down through the workers' `UsagePacing`: with the idle pace at
//! 120 ms instead of 5 minutes, an hour is 1.44 s. The pure schedule is tested over a real
//! hour in `workers::usage_feed`.

use crate::runtime;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use convo_client::api::client::{Client, ClientOptions};
use convo_service::ServiceConfig;
use convo_tui::app::Connection;
use convo_tui::runtime::Runtime;
use convo_tui::workers::{Target, UsagePacing};

use crate::client_support::{Counter, options, serve, usage_json};

const GUARD: Duration = Duration::from_secs(60);

/// 5 minutes become 120 ms: 2,500 times faster.
fn scaled() -> UsagePacing {
    UsagePacing {
        active_every: Duration::from_millis(4),
        idle_every: Duration::from_millis(120),
        active_for: Duration::from_millis(12),
    }
}

/// An hour at the scale of [`scaled`].
const SCALED_HOUR: Duration = Duration::from_millis(1440);

/// Starts a TUI's app and workers against `options`, lets it sit idle for a scaled hour.
async fn idle_hour(options: ClientOptions) -> Runtime {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime::start(Target::Remote(options), dir.path(), scaled());
    rt.run_until("connected", GUARD, |app| {
        matches!(app.connection(), Connection::Connected(_))
    })
    .await
    .unwrap();
    // Idle: nothing but what the workers do by themselves. (`run_until` only gives up.)
    let _ = rt.run_until("an idle hour", SCALED_HOUR, |_| false).await;
    rt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tui_with_the_account_stream_polls_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let svc = convo_service::start(ServiceConfig::ephemeral(0), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut o = ClientOptions::new(svc.base_url().parse().unwrap());
    o.api_key = Some(svc.api_key.clone());
    o.max_retries = 0;
    let rt = idle_hour(o.clone()).await;
    assert!(
        rt.app.usage().usage.is_some(),
        "the gauges got the usage from the stream's hello"
    );
    let usage = Client::new(o).unwrap().usage().await.unwrap();
    // This last request counted itself.
    let spent = usage.requests.used - 1;
    // One request each: the account stream, the open session's stream, and the session list
    // read at connect; no usage poll.
    assert!(spent <= 4, "{spent} requests in an idle hour");
    rt.shutdown().await;
    svc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tui_without_the_account_stream_spends_at_most_20_requests_an_hour() {
    let requests = Counter::default();
    let polls = Counter::default();
    let router = {
        let (requests, polls) = (requests.clone(), polls.clone());
        let other = requests.clone();
        Router::new()
            .route(
                "/v1/analytics/usage",
                get(move || {
                    requests.bump();
                    polls.bump();
                    async { axum::Json(usage_json()) }
                }),
            )
            .fallback(move || {
                other.bump();
                async { (StatusCode::NOT_FOUND, "no such endpoint") }
            })
    };
    let base = serve(router).await;
    let rt = idle_hour(options(&base)).await;
    let (spent, polled) = (requests.get(), polls.get());
    assert!(polled >= 1, "the gauges were polled");
    assert!(
        spent <= 20,
        "{spent} requests ({polled} polls) in an idle hour"
    );
    rt.shutdown().await;
}
