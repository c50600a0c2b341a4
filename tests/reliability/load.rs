//! The short load run of CI (issue 6, item 6): 20 streams, 50 POSTs a second for 3 seconds
//! against the local service on a database file. It asserts what was served, never how fast.

use std::time::Duration;

use convo_service::{DbLocation, ServiceConfig, Tier};

use super::loadgen::{LoadConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_load_run_serves_everything_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut service = ServiceConfig::ephemeral(0);
    service.db = DbLocation::File(dir.path().join("service.db"));
    service.api_keys[0].1 = Tier::Enterprise;
    service.max_context_tokens = 1_000_000_000;
    let svc = convo_service::start(service, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let config = LoadConfig {
        base_url: svc.base_url(),
        api_key: svc.api_key.clone(),
        streams: 20,
        rate: 50,
        duration: Duration::from_secs(3),
        // A guard, not a bound: replies still coming after this are counted lost.
        drain: Duration::from_secs(60),
    };
    let report = run(config.clone()).await;
    let summary = report.summary(&config);
    println!("{summary}");
    assert_eq!(report.streams_opened, 20, "{summary}");
    assert_eq!(report.posts_sent, 150, "{summary}");
    assert_eq!(report.errors, 0, "{summary}");
    assert_eq!(report.posts_accepted, 150, "{summary}");
    assert_eq!(report.lost_on_stream, 0, "{summary}");
    assert_eq!(report.lost_in_store, 0, "{summary}");
    svc.shutdown().await;
}
