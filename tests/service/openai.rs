//! The `openai` engine against a fake upstream: history sent, SSE read, failures not stored.

use convo_service::ServiceConfig;
use reqwest::StatusCode;
use serde_json::json;

use super::common::{session, start_with};
use super::upstream::{Upstream, chunk, finish};

async fn service_on(upstream: &Upstream) -> super::common::Svc {
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = upstream.engine_config();
    start_with(config).await
}

#[tokio::test]
async fn replies_come_from_the_upstream_with_the_history_as_the_conversation() {
    let body = [chunk("Hello"), chunk(", "), chunk("world."), finish()].concat();
    let upstream = Upstream::fixed(200, body).await;
    let svc = service_on(&upstream).await;
    let sid = session();
    let (status, first) = svc
        .post(&sid, json!({"content": "Be brief.", "role": "system"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["content"], "Hello, world.");
    assert_eq!(first["tokens"], convo_tokens::count("Hello, world."));
    svc.send_text(&sid, "Say hi").await;

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["model"], "fake-model");
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(
        requests[1]["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "assistant", "content": "Hello, world."},
            {"role": "user", "content": "Say hi"},
        ])
    );
}

#[tokio::test]
async fn an_upstream_error_is_502_and_nothing_is_stored() {
    let upstream = Upstream::fixed(500, "model exploded").await;
    let svc = service_on(&upstream).await;
    let sid = session();
    let (status, body) = svc.post(&sid, json!({"content": "hello?"})).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(body["error"]["code"], "engine_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("500"));
    let metrics = svc.metrics_now().await;
    assert_eq!(
        metrics["messages"]["total"], 0,
        "the turn was rolled back: {metrics}"
    );
    assert_eq!(svc.usage().await["tokens"]["used"], 0);
}

#[tokio::test]
async fn a_stream_cut_short_is_an_error_and_a_retry_with_the_same_key_runs_again() {
    // The upstream closes after one delta, without finish_reason or [DONE].
    let upstream = Upstream::fixed(200, chunk("Half a rep")).await;
    let svc = service_on(&upstream).await;
    let sid = session();
    let send = || {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("idempotency-key", "retry-me")
            .json(&json!({"content": "tell me everything"}))
            .send()
    };
    for _ in 0..2 {
        let resp = send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
    }
    assert_eq!(
        upstream.requests().len(),
        2,
        "the failed response was not replayed"
    );
    assert_eq!(svc.metrics_now().await["messages"]["total"], 0);
}

#[tokio::test]
async fn an_unreachable_upstream_is_an_engine_error() {
    let (_refusing, addr) = crate::refused::refused_addr();
    let url = format!("http://{addr}");
    let mut config = ServiceConfig::ephemeral(0);
    config.engine = convo_service::EngineConfig::OpenAi {
        url,
        model: "m".into(),
        api_key: None,
    };
    let svc = start_with(config).await;
    let (status, body) = svc.post(&session(), json!({"content": "anyone?"})).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(body["error"]["code"], "engine_error");
}
