//! Every row of the docs/design.md "HTTP" table, and the handling of bad input.

use convo_service::{ServiceConfig, Tier, generate_api_key, jwt};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::common::{json as body_json, session, start_default, start_with};

fn assert_envelope(body: &Value, code: &str, mentions: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains(mentions),
        "message `{message}` should mention `{mentions}`"
    );
}

#[tokio::test]
async fn a_sent_message_returns_the_complete_reply() {
    let svc = start_default().await;
    let sid = session();
    let (status, body) = svc.post(&sid, json!({"content": "What can you do?"})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["messageId"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(body["sessionId"], sid.as_str());
    assert_eq!(body["role"], "assistant");
    assert!(
        body["content"]
            .as_str()
            .unwrap()
            .contains("What can you do?")
    );
    assert!(body["tokens"].as_u64().unwrap() > 0);
    assert!(chrono::DateTime::parse_from_rfc3339(body["createdAt"].as_str().unwrap()).is_ok());
    // The Message fields, and the extension `finishReason`.
    assert_eq!(body["finishReason"], "stop");
    assert_eq!(
        body.as_object().unwrap().len(),
        7,
        "exactly the Message fields and finishReason: {body}"
    );
}

#[tokio::test]
async fn a_streamed_send_answers_202_with_the_reply_to_come() {
    let svc = start_default().await;
    let sid = session();
    let (status, body) = svc
        .post(&sid, json!({"content": "hi", "stream": true, "role": "system", "metadata": {"client": "test"}}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(body["messageId"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(body["sessionId"], sid.as_str());
    assert_eq!(body["role"], "assistant");
    assert_eq!(body["content"], "");
    assert_eq!(body["tokens"], 0);
    assert!(body["createdAt"].is_string());
}

#[tokio::test]
async fn deleting_a_session_confirms_and_then_it_is_gone() {
    let svc = start_default().await;
    let sid = session();
    svc.send_text(&sid, "hello").await;
    let (status, body) = svc.delete(&sid).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"deleted": true, "sessionId": sid}));
    // Deleted ids stay deleted: DELETE again and POST are both 404.
    let (status, body) = svc.delete(&sid).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "session_not_found", &sid);
    let (status, body) = svc.post(&sid, json!({"content": "again"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "session_not_found", &sid);
    // Never-used id.
    let (status, body) = svc.delete(&session()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "session_not_found");
}

#[tokio::test]
async fn another_accounts_session_is_not_found() {
    let other = generate_api_key();
    let mut config = ServiceConfig::ephemeral(0);
    config.api_keys.push((other.clone(), Tier::Free));
    let svc = start_with(config).await;
    let sid = session();
    svc.send_text(&sid, "mine").await;
    let (status, body) = svc
        .post_with_key(&other, &sid, json!({"content": "yours?"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let resp = svc
        .http
        .delete(svc.url(&format!("/v1/sessions/{sid}")))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    // The other account sees its own tier and none of the first account's usage.
    let resp = svc
        .http
        .get(svc.url("/v1/analytics/usage"))
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    let (_, usage) = body_json(resp).await;
    assert_eq!(usage["tier"], "free");
    assert_eq!(usage["tokens"]["used"], 0);
    assert_eq!(usage["sessions"]["active"], 0);
}

#[tokio::test]
async fn analytics_usage_and_wallet_return_their_resources() {
    let svc = start_default().await;
    let sid = session();
    let reply = svc.send_text(&sid, "count me").await;
    let usage = svc.usage().await;
    assert_eq!(usage["tier"], "pro");
    assert_eq!(
        usage["requests"]["used"], 2,
        "the send and this usage request: {usage}"
    );
    assert_eq!(usage["requests"]["limit"], 50_000);
    let prompt = convo_tokens::count("count me");
    let total = prompt + reply["tokens"].as_u64().unwrap();
    assert_eq!(usage["tokens"]["used"], total);
    assert_eq!(usage["tokens"]["limit"], 10_000_000);
    assert_eq!(usage["sessions"]["active"], 1);
    assert_eq!(usage["sessions"]["limit"], 500);
    assert_eq!(usage["sessions"]["percentage"], 0.2);
    assert!(
        usage["billingPeriod"]["start"]
            .as_str()
            .unwrap()
            .ends_with("-01T00:00:00.000Z")
    );

    let metrics = svc.metrics_now().await;
    assert_eq!(metrics["period"]["granularity"], "day");
    assert_eq!(metrics["sessions"]["total"], 1);
    assert_eq!(metrics["sessions"]["active"], 1);
    assert!(metrics["sessions"]["averageDuration"].as_f64().unwrap() >= 0.0);
    assert_eq!(metrics["messages"]["total"], 2);
    assert_eq!(metrics["messages"]["averagePerSession"], 2.0);
    assert_eq!(metrics["messages"]["userMessages"], 1);
    assert_eq!(metrics["messages"]["assistantMessages"], 1);
    assert_eq!(metrics["tokens"]["total"], total);
    assert_eq!(metrics["tokens"]["prompt"], prompt);
    assert_eq!(metrics["tokens"]["completion"], reply["tokens"]);

    let (status, body) = svc
        .get("/v1/analytics/metrics?startDate=2026-01-01T00:00:00Z&endDate=2026-01-02T00:00:00Z&granularity=hour")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["period"]["granularity"], "hour");
    assert_eq!(body["period"]["start"], "2026-01-01T00:00:00.000Z");
    assert_eq!(body["messages"]["total"], 0);

    let token = jwt::mint(&svc.service.jwt_secret, "tester", 60);
    let resp = svc
        .http
        .get(svc.url("/v1/wallets/treasury"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let (status, wallet) = body_json(resp).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(wallet["walletId"], "treasury");
    for field in [
        "address",
        "alias",
        "balance",
        "tokenAccounts",
        "nfts",
        "riskScore",
        "riskFactors",
        "tags",
    ] {
        assert!(wallet.get(field).is_some(), "{field} missing");
    }
    let resp = svc
        .http
        .get(svc.url("/v1/wallets/nobody"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "wallet_not_found", "nobody");
}

#[tokio::test]
async fn bad_message_bodies_are_400_naming_the_field() {
    let svc = start_default().await;
    let sid = session();
    let raw = |body: &'static str| {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (status, body) = body_json(raw("{not json").await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "invalid_request", "JSON");
    let (status, body) = body_json(raw("").await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "invalid_request", "JSON");

    let cases = [
        (json!({}), "`content`"),
        (json!({"content": 42}), "`content`"),
        (json!({"content": "x".repeat(10_001)}), "`content`"),
        (json!({"content": "hi", "role": "assistant"}), "`role`"),
        (json!({"content": "hi", "role": 1}), "`role`"),
        (json!({"content": "hi", "stream": "true"}), "`stream`"),
        (json!({"content": "hi", "metadata": "tag"}), "`metadata`"),
        (
            json!({"content": "hi", "metadata": {"big": "y".repeat(17_000)}}),
            "`metadata`",
        ),
    ];
    for (request, field) in cases {
        let (status, body) = svc.post(&sid, request.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{request}");
        assert_envelope(&body, "invalid_request", field);
    }
    // 10,000 astral characters written as escaped surrogate pairs (120 KB of JSON) fit.
    let escaped = format!(r#"{{"content": "{}"}}"#, "\\ud83d\\ude00".repeat(10_000));
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{}/messages", session())))
        .bearer_auth(&svc.key)
        .header("content-type", "application/json")
        .body(escaped)
        .send()
        .await
        .unwrap();
    // Read and parsed in full: 10,000 emoji are more tokens than the default context holds.
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "context_overflow", "{body}");
    // Exactly 10,000 characters (multi-byte) is accepted.
    let (status, body) = svc.post(&sid, json!({"content": "é ".repeat(5_000)})).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    for bad in [
        "session_short",
        "session_abcdefgh1234567!",
        "sess_abcdefgh12345678",
    ] {
        let (status, body) = svc.post(bad, json!({"content": "hi"})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_envelope(&body, "invalid_request", "sessionId");
    }
}

#[tokio::test]
async fn bad_metrics_queries_are_400_naming_the_parameter() {
    let svc = start_default().await;
    let cases = [
        ("", "startDate"),
        ("startDate=2026-11-01T00:00:00Z", "endDate"),
        (
            "startDate=yesterday&endDate=2026-11-02T00:00:00Z",
            "startDate",
        ),
        (
            "startDate=2026-11-01T00:00:00Z&endDate=2026-13-02",
            "endDate",
        ),
        (
            "startDate=2026-11-03T00:00:00Z&endDate=2026-11-02T00:00:00Z",
            "after",
        ),
        (
            "startDate=2026-11-01T00:00:00Z&endDate=2026-11-02T00:00:00Z&granularity=minute",
            "granularity",
        ),
        (
            "startDate=2024-01-01T00:00:00Z&endDate=2026-11-02T00:00:00Z",
            "366",
        ),
    ];
    for (query, mentions) in cases {
        let (status, body) = svc.get(&format!("/v1/analytics/metrics?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_envelope(&body, "invalid_request", mentions);
    }
    let long = "x".repeat(3000);
    let (status, body) = svc.get(&format!("/v1/analytics/metrics?{long}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "invalid_request", "query string");
}

#[tokio::test]
async fn context_overflow_reports_tokens_and_stores_nothing() {
    let mut config = ServiceConfig::ephemeral(0);
    config.max_context_tokens = 300;
    let svc = start_with(config).await;
    // The window is said before any send is refused (an extension to `usage`).
    assert_eq!(svc.usage().await["context"]["maxTokens"], 300);
    let sid = session();
    svc.send_text(&sid, "first").await;
    let before = svc.usage().await["tokens"]["used"].as_u64().unwrap();
    let long = "word ".repeat(400);
    let (status, body) = svc.post(&sid, json!({"content": long})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "context_overflow", "context window");
    assert_eq!(body["error"]["maxTokens"], 300);
    let current = body["error"]["currentTokens"].as_u64().unwrap();
    assert_eq!(current, before + convo_tokens::count(&long));
    assert_eq!(
        svc.usage().await["tokens"]["used"],
        before,
        "nothing stored"
    );
    assert_eq!(svc.metrics_now().await["messages"]["total"], 2);
}

#[tokio::test]
async fn credentials_are_checked_with_401_and_www_authenticate() {
    let svc = start_default().await;
    let sid = session();
    let url = svc.url(&format!("/v1/sessions/{sid}/messages"));
    let token = jwt::mint(&svc.service.jwt_secret, "tester", 60);
    let cases: Vec<(Option<String>, &str)> = vec![
        (None, "missing"),
        (Some("Basic abc".into()), "Bearer"),
        (Some("Bearer".into()), "Bearer"),
        (Some("Bearer service_live_short".into()), "malformed"),
        (Some(format!("Bearer {}", generate_api_key())), "unknown"),
        (Some(format!("Bearer {token}")), "not a JWT"),
    ];
    for (header, mentions) in cases {
        let mut req = svc.http.post(&url).json(&json!({"content": "hi"}));
        if let Some(h) = &header {
            req = req.header("authorization", h);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let (status, body) = body_json(resp).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{header:?}");
        assert_envelope(&body, "unauthorized", mentions);
    }
    // An API key on the wallet endpoint.
    let resp = svc
        .http
        .get(svc.url("/v1/wallets/treasury"))
        .bearer_auth(&svc.key)
        .send()
        .await
        .unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_envelope(&body, "unauthorized", "JWT");
    // A JWT on the analytics endpoints.
    let resp = svc
        .http
        .get(svc.url("/v1/analytics/usage"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn oversized_bodies_unknown_routes_and_wrong_methods_get_the_envelope() {
    let svc = start_default().await;
    let sid = session();
    let big = format!(r#"{{"content": "{}"}}"#, "x".repeat(300 * 1024));
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_envelope(&body, "payload_too_large", "262144");

    let (status, body) = svc.get("/v2/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "not_found", "/v2/nothing");

    let resp = svc
        .http
        .put(svc.url("/v1/analytics/usage"))
        .send()
        .await
        .unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_envelope(&body, "method_not_allowed", "PUT");

    let resp = svc
        .http
        .put(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);

    let resp = svc.http.get(svc.url("/healthz")).send().await.unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn a_repeated_idempotency_key_replays_the_first_response_and_stores_once() {
    let svc = start_default().await;
    let sid = session();
    let send = |key: &'static str, text: &'static str| {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("idempotency-key", key)
            .json(&json!({"content": text}))
            .send()
    };
    let first = send("k-1", "hello").await.unwrap();
    assert!(first.headers().get("idempotent-replayed").is_none());
    let (s1, b1) = body_json(first).await;
    let second = send("k-1", "hello").await.unwrap();
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    let (s2, b2) = body_json(second).await;
    assert_eq!((s1, &b1), (s2, &b2));
    assert_eq!(
        svc.metrics_now().await["messages"]["total"],
        2,
        "one user message and one reply"
    );
    // Another key is another message; the same key on another session is independent.
    let (s3, b3) = body_json(send("k-2", "hello").await.unwrap()).await;
    assert_eq!(s3, StatusCode::OK);
    assert_ne!(b3["messageId"], b1["messageId"]);
    let (status, body) = svc.post(&session(), json!({"content": "x"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Streamed sends replay their 202.
    let stream_send = || {
        svc.http
            .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
            .bearer_auth(&svc.key)
            .header("idempotency-key", "k-stream")
            .json(&json!({"content": "streamed", "stream": true}))
            .send()
    };
    let (a_status, a) = body_json(stream_send().await.unwrap()).await;
    let (b_status, b) = body_json(stream_send().await.unwrap()).await;
    assert_eq!(
        (a_status, b_status),
        (StatusCode::ACCEPTED, StatusCode::ACCEPTED)
    );
    assert_eq!(a, b);
    // Bad keys are refused.
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", "x".repeat(300))
        .json(&json!({"content": "x"}))
        .send()
        .await
        .unwrap();
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "invalid_request", "Idempotency-Key");
}

#[tokio::test]
async fn the_session_limit_is_429_with_limit_reset_and_retry_after() {
    let mut config = ServiceConfig::ephemeral(0);
    config.api_keys[0].1 = Tier::Free;
    let svc = start_with(config).await;
    for _ in 0..10 {
        svc.send_text(&session(), "one more").await;
    }
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{}/messages", session())))
        .bearer_auth(&svc.key)
        .json(&json!({"content": "the eleventh"}))
        .send()
        .await
        .unwrap();
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    let (status, body) = body_json(resp).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_envelope(&body, "quota_exceeded", "sessions");
    assert_eq!(body["error"]["limit"], "sessions");
    let usage = svc.usage().await;
    assert_eq!(body["error"]["resetAt"], usage["billingPeriod"]["end"]);
    assert_eq!(usage["sessions"]["active"], 10);
    assert_eq!(usage["sessions"]["percentage"], 100.0);
    // Counted: the ten sends, the send refused for the sessions limit, and this usage request.
    assert_eq!(usage["requests"]["used"], 12);
}

#[tokio::test]
async fn a_storage_failure_is_500_internal_without_detail() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServiceConfig::ephemeral(0);
    config.db = convo_service::DbLocation::File(dir.path().join("service.db"));
    let svc = start_with(config).await;
    assert_eq!(svc.usage().await["tier"], "pro");
    // Break the database under the running service.
    let conn = rusqlite::Connection::open(dir.path().join("service.db")).unwrap();
    conn.execute_batch("DROP TABLE usage_totals").unwrap();
    drop(conn);
    let (status, body) = svc.get("/v1/analytics/usage").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        body,
        json!({"error": {"code": "internal", "message": "internal error; see the service log"}})
    );
}

#[tokio::test]
async fn the_session_list_and_history_extensions_show_stored_data() {
    use convo_service::routes::sessions::{MessageList, SessionList};
    let svc = start_default().await;
    let (older, newer) = (session(), session());
    svc.send_text(&older, "first session").await;
    let (status, reply) = svc
        .post(
            &newer,
            json!({"content": "second session", "role": "system", "metadata": {"k": [1, 2]}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, body) = svc.get("/v1/sessions").await;
    assert_eq!(status, StatusCode::OK);
    let list: SessionList = serde_json::from_value(body).unwrap();
    let ids: Vec<&str> = list
        .sessions
        .iter()
        .map(|s| s.session_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [newer.as_str(), older.as_str()],
        "most recently active first"
    );
    assert_eq!(list.sessions[0].message_count, 2);
    assert_eq!(
        list.sessions[0].tokens,
        convo_tokens::count("second session") + reply["tokens"].as_u64().unwrap()
    );

    let (status, body) = svc.get(&format!("/v1/sessions/{newer}/messages")).await;
    assert_eq!(status, StatusCode::OK);
    let history: MessageList = serde_json::from_value(body).unwrap();
    assert_eq!(history.session_id, newer);
    assert_eq!(history.messages.len(), 2);
    assert_eq!(
        history.messages[0].message.role,
        convo_client::api::Role::System
    );
    assert_eq!(history.messages[0].message.content, "second session");
    assert_eq!(history.messages[0].metadata, Some(json!({"k": [1, 2]})));
    assert_eq!(
        history.messages[1].message.message_id,
        reply["messageId"].as_str().unwrap()
    );
    assert_eq!(
        history.messages[1].message.content,
        reply["content"].as_str().unwrap()
    );

    assert_eq!(svc.delete(&older).await.0, StatusCode::OK);
    let (_, body) = svc.get("/v1/sessions").await;
    assert_eq!(body["sessions"].as_array().unwrap().len(), 1);
    let (status, body) = svc.get(&format!("/v1/sessions/{older}/messages")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "session_not_found");
    let (status, _) = svc
        .get(&format!("/v1/sessions/{}/messages", session()))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
