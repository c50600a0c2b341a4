//! The running totals behind quotas and usage (migration 2) always equal what the logs they
//! replace would sum: after sends, idempotent replays, streamed sends, deletions, rolled-back
//! turns, and across billing periods.

use chrono::{TimeZone, Utc};
use convo_client::api::Role;
use convo_core::{Account, TurnRefusal, TurnStart, TurnStarted, UserMessage};
use convo_service::auth::RequestCount;
use convo_service::storage::rows::Reply;
use convo_service::storage::{Db, Storage};
use convo_service::{Tier, generate_api_key, time};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::Backend;
use super::common::{Svc, json, session, start_with};
use crate::on_both_backends;

on_both_backends!(
    totals_equal_the_logs_after_sends_replays_streams_and_deletes,
    a_rolled_back_turn_takes_its_tokens_back_out_of_the_totals,
    a_new_billing_period_counts_from_zero_and_past_periods_keep_their_totals,
);

/// Where the month's totals are read: PostgreSQL keeps them in shard rows too, which its view
/// `usage_month` adds to `usage_totals`.
fn totals_table(backend: &Backend) -> &'static str {
    match backend {
        Backend::Sqlite(_) => "usage_totals",
        Backend::Postgres(_) => "usage_month",
    }
}

/// Every way the totals can disagree with the rows they sum, as readable lines (empty: none):
/// the month's tokens with the ledger, the live sessions with the sessions. (Requests have no
/// rows since migration 4; the tests count them.)
async fn disagreements(backend: &Backend) -> Vec<String> {
    let mut out = Vec::new();
    let rows = async |sql: &str| -> Vec<(i64, i64, i64)> {
        backend
            .ints(sql, &[])
            .await
            .into_iter()
            .map(|r| (r[0], r[1], r[2]))
            .collect()
    };
    // The ledger grouped by (account, billing period), the period computed by the service's
    // own `billing_period`, not by SQL.
    let mut expected = std::collections::BTreeMap::<(i64, i64), i64>::new();
    let period = |ms: i64| time::billing_period(time::from_ms(ms)).0.timestamp_millis();
    for (account, at, tokens) in
        rows("SELECT account_id, created_at, tokens FROM message_log").await
    {
        *expected.entry((account, period(at))).or_default() += tokens;
    }
    let totals = totals_table(backend);
    let actual: std::collections::BTreeMap<(i64, i64), i64> = rows(&format!(
        "SELECT account_id, period_start, tokens FROM {totals} WHERE tokens <> 0"
    ))
    .await
    .into_iter()
    .map(|(a, p, t)| ((a, p), t))
    .collect();
    if expected != actual {
        out.push(format!(
            "usage_totals tokens {actual:?} but the ledger sums to {expected:?}"
        ));
    }
    for (account, live, counted) in rows(
        "SELECT a.id, a.live_sessions,
                (SELECT COUNT(*) FROM sessions s WHERE s.account_id = a.id AND s.deleted_at IS NULL)
         FROM accounts a",
    )
    .await
    {
        if live != counted {
            out.push(format!(
                "account {account}: live_sessions {live}, sessions {counted}"
            ));
        }
    }
    out
}

async fn post_keyed(svc: &Svc, sid: &str, key: &str, body: serde_json::Value) -> StatusCode {
    let resp = svc
        .http
        .post(svc.url(&format!("/v1/sessions/{sid}/messages")))
        .bearer_auth(&svc.key)
        .header("idempotency-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    json(resp).await.0
}

async fn totals_equal_the_logs_after_sends_replays_streams_and_deletes(backend: Backend) {
    let other_key = generate_api_key();
    let mut config = backend.config();
    config.api_keys.push((other_key.clone(), Tier::Free));
    let svc = start_with(config).await;
    let (a, b, c) = (session(), session(), session());
    svc.send_text(&a, "first").await;
    svc.send_text(&a, "second, a little longer than the first")
        .await;
    svc.send_text(&b, "hello b").await;
    // The same idempotency key three times: one turn stored, three requests counted.
    for _ in 0..3 {
        let status = post_keyed(&svc, &c, "once", json!({"content": "only once"})).await;
        assert_eq!(status, StatusCode::OK);
    }
    let status = post_keyed(
        &svc,
        &c,
        "streamed",
        json!({"content": "streamed", "stream": true}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let status = post_keyed(
        &svc,
        &c,
        "streamed",
        json!({"content": "streamed", "stream": true}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // Another account's traffic is counted apart.
    let (status, _) = svc
        .post_with_key(&other_key, &session(), json!({"content": "elsewhere"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(svc.delete(&b).await.0, StatusCode::OK);
    assert_eq!(
        svc.post(&b, json!({"content": "to a deleted session"}))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    // The streamed reply of `c` is stored in the background; its turn ends before the next
    // send to `c` starts (turns of a session are serialised).
    svc.send_text(&c, "after the stream").await;

    let usage = svc.usage().await;
    {
        assert_eq!(disagreements(&backend).await, Vec::<String>::new());
        let tokens = backend
            .int(
                "SELECT CAST(SUM(tokens) AS BIGINT) FROM message_log WHERE account_id = 1",
                &[],
            )
            .await;
        assert_eq!(usage["tokens"]["used"], tokens);
        // a and c live, b deleted.
        assert_eq!(usage["sessions"]["active"], 2);
        // 3 + 3 + 2 + 1 sends, the deletion, the refused send, this usage request.
        assert_eq!(usage["requests"]["used"], 12);
    }
    svc.service.shutdown().await;
    assert_eq!(disagreements(&backend).await, Vec::<String>::new());
}

/// Through the storage interface itself (`Storage`), on each backend.
async fn a_rolled_back_turn_takes_its_tokens_back_out_of_the_totals(backend: Backend) {
    let store = Db::open(&backend.location()).await.unwrap();
    let keys = vec![(generate_api_key(), Tier::Pro)];
    let accounts = store.ensure_keys(keys, time::now_ms()).await.unwrap();
    let account: Account = *accounts.values().next().unwrap();
    let now = Utc::now();
    let request = RequestCount::new(account, "POST", "/test", now);
    let sid = session();
    let start = |id: &str, tokens: u64| TurnStart {
        account,
        session_id: sid.clone(),
        reply_id: format!("{id}_reply"),
        message: UserMessage {
            id: id.to_string(),
            role: Role::User,
            content: format!("message {id}"),
            tokens,
            metadata: None,
        },
        idempotency_key: Some(id.to_string()),
        accepted_response: None,
        max_context_tokens: 8192,
        period_start_ms: time::billing_period(now).0.timestamp_millis(),
        now_ms: now.timestamp_millis(),
    };
    let period_start = time::billing_period(now).0.timestamp_millis();
    let tokens_used = async || {
        store
            .usage_counts(account.id, period_start)
            .await
            .unwrap()
            .tokens
    };
    // A turn ends (here with an empty reply of no tokens) before the next of its session starts.
    let complete = async |id: &str| {
        let reply = Reply {
            id: format!("{id}_reply"),
            content: String::new(),
            tokens: 0,
            created_at_ms: now.timestamp_millis(),
            finish_reason: convo_wire::FinishReason::Stop,
        };
        let stored = store
            .complete_turn(account.id, sid.clone(), reply, None, time::now_ms())
            .await;
        assert!(stored.unwrap());
    };
    let ready = |started: Option<Result<TurnStarted, TurnRefusal>>| match started {
        Some(Ok(TurnStarted::Ready { context_tokens, .. })) => context_tokens,
        other => panic!("the turn did not start: {other:?}"),
    };
    ready(
        store
            .start_turn(request, start("msg_kept", 40))
            .await
            .unwrap(),
    );
    complete("msg_kept").await;
    ready(
        store
            .start_turn(request, start("msg_rolled", 25))
            .await
            .unwrap(),
    );
    assert_eq!(tokens_used().await, 65);
    store
        .roll_back_turn(
            account.id,
            sid.clone(),
            "msg_rolled".into(),
            now.timestamp_millis(),
            Some("msg_rolled".into()),
        )
        .await
        .unwrap();
    assert_eq!(tokens_used().await, 40);
    assert_eq!(disagreements(&backend).await, Vec::<String>::new());
    // The context of the session lost the rolled-back message too: 8192 - 40 fit again.
    let full = store.start_turn(request, start("msg_full", 8192 - 40));
    assert_eq!(ready(full.await.unwrap()), 8192);
    complete("msg_full").await;
    assert!(matches!(
        store
            .start_turn(request, start("msg_over", 1))
            .await
            .unwrap(),
        Some(Err(TurnRefusal::ContextOverflow {
            current: 8193,
            max: 8192
        }))
    ));
    assert_eq!(disagreements(&backend).await, Vec::<String>::new());
    store.close().await.unwrap();
}

async fn a_new_billing_period_counts_from_zero_and_past_periods_keep_their_totals(
    backend: Backend,
) {
    let mut config = backend.config();
    config.api_keys[0].1 = Tier::Free;
    let svc = start_with(config.clone()).await;
    svc.service.shutdown().await;
    let (period_start, _) = time::billing_period(Utc::now());
    let last_moment_before = period_start.timestamp_millis() - 1;
    let december = Utc
        .with_ymd_and_hms(2025, 12, 31, 23, 59, 59)
        .unwrap()
        .timestamp_millis();
    {
        // Written by hand while the service is stopped: requests as the service counts them,
        // tokens through the ledger (its triggers count whoever writes).
        for at in [last_moment_before, last_moment_before, december] {
            backend
                .execute(
                    "INSERT INTO usage_totals (account_id, period_start, requests) VALUES (1, $1, 1)
                     ON CONFLICT (account_id, period_start)
                     DO UPDATE SET requests = usage_totals.requests + 1",
                    &[time::billing_period(time::from_ms(at)).0.timestamp_millis()],
                )
                .await;
        }
        backend
            .execute(
                "INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
                 VALUES ('msg_lastmonth', 1, 'session_seedseedseedseed', 'user', 199999, $1)",
                &[last_moment_before],
            )
            .await;
        assert_eq!(disagreements(&backend).await, Vec::<String>::new());
    }
    let svc = start_with(config).await;
    // Last month's 199,999 tokens do not count against this month's 200,000.
    svc.send_text(&session(), "a new month").await;
    let usage = svc.usage().await;
    assert_eq!(usage["requests"]["used"], 2);
    let tokens = usage["tokens"]["used"].as_u64().unwrap();
    assert!(tokens > 0 && tokens < 1000, "{usage}");
    svc.service.shutdown().await;
    assert_eq!(disagreements(&backend).await, Vec::<String>::new());
    let previous = time::billing_period(time::from_ms(last_moment_before))
        .0
        .timestamp_millis();
    let past = backend
        .ints(
            &format!(
                "SELECT requests, tokens FROM {} WHERE account_id = 1 AND period_start = $1",
                totals_table(&backend)
            ),
            &[previous],
        )
        .await;
    assert_eq!(past, vec![vec![2, 199_999]]);
}
