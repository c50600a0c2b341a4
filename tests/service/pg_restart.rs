//! PostgreSQL going away under a running service, for real: the test's own private cluster
//! (`convo_testpg::Cluster`) is stopped, started again and restarted while the service runs.
//! A message posted while the database is down gets a 503 `unavailable` error with
//! `Retry-After` and leaves nothing behind; once PostgreSQL is back the same service takes messages again, with no restart of
//! its own. It never runs against a shared server (`CONVO_TEST_PG`): it is skipped there.

use convo_service::error::UNAVAILABLE_RETRY_AFTER;
use convo_service::{DbLocation, ServiceConfig};
use convo_testpg::Cluster;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::{GUARD, Svc, session, start_with};

fn texts(history: &Value) -> Vec<String> {
    history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

async fn post(svc: &Svc, sid: &str, text: &str) -> (StatusCode, Value) {
    tokio::time::timeout(GUARD, svc.post(sid, json!({"content": text})))
        .await
        .expect("an answer in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_fails_cleanly_while_postgres_is_down_and_recovers_when_it_is_back() {
    if let Some(url) = convo_testpg::external_server() {
        eprintln!(
            "skipped: CONVO_TEST_PG={url} is a shared server, and this test stops and restarts \
             PostgreSQL; it runs on a private cluster of its own when CONVO_TEST_PG is unset"
        );
        return;
    }
    let cluster = Cluster::new().expect("a private PostgreSQL cluster");
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(format!("{}/postgres", cluster.url()));
    let svc = start_with(config).await;
    let sid = session();
    svc.send_text(&sid, "before the outage").await;

    // Pooled connections die with the server; new ones are refused.
    tokio::task::block_in_place(|| cluster.stop());
    for _ in 0..2 {
        let (status, body) = post(&svc, &sid, "during the outage").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
    }
    let resp = tokio::time::timeout(
        GUARD,
        svc.http
            .get(svc.url("/v1/sessions"))
            .bearer_auth(&svc.key)
            .send(),
    )
    .await
    .expect("an answer in time")
    .expect("request");
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        resp.headers()[reqwest::header::RETRY_AFTER],
        UNAVAILABLE_RETRY_AFTER.to_string()
    );

    // Back on the same port with the same data: the next message goes through.
    tokio::task::block_in_place(|| cluster.start());
    let (status, body) = post(&svc, &sid, "after the outage").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A restart between two requests is not noticed at all.
    tokio::task::block_in_place(|| cluster.restart());
    let (status, body) = post(&svc, &sid, "after a restart").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (status, history) = svc.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(status, StatusCode::OK, "{history}");
    let texts = texts(&history);
    assert_eq!(
        texts.len(),
        6,
        "three turns, nothing of the failed ones: {texts:?}"
    );
    assert_eq!(
        [&texts[0], &texts[2], &texts[4]],
        ["before the outage", "after the outage", "after a restart"]
    );
    assert!(
        !texts.iter().any(|t| t.contains("during the outage")),
        "{texts:?}"
    );
}
