//! A turn whose end could not reach PostgreSQL (`crates/service/src/storage/postgres/leases.rs`,
//! `EndedTurn`): its reply failed while the replica was cut off from the database, so the
//! rollback failed too. The replica keeps its lease, so no sweep takes the turn back; the
//! replica rolls it back itself at a heartbeat once the database answers again, the session
//! is no longer busy, and the account's stream is told.

use convo_service::{DbLocation, ServiceConfig};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::TestDb;
use super::common::{GUARD, next_event, next_json, session, start_with, until_session_emptied};
use super::pg_proxy::{PgProxy, eventually};
use super::upstream::Upstream;
use convo_client::api::StreamEvent;
use convo_wire::account_stream::AccountEvent;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_whose_rollback_was_cut_off_is_rolled_back_once_the_database_is_back() {
    let db = TestDb::create().await;
    let proxy = PgProxy::start().await;
    let (upstream, reply) = Upstream::live().await;
    let mut config = ServiceConfig::ephemeral(0);
    config.db = DbLocation::Postgres(proxy.url(&db.name));
    config.engine = upstream.engine_config();
    let svc = start_with(config).await;

    let s = session();
    let mut account = svc.ws_at("/v1/stream", &svc.key).await;
    assert!(matches!(
        next_json(&mut account).await,
        AccountEvent::Hello { .. }
    ));
    let (status, accepted) = svc
        .post(&s, json!({"content": "hello", "stream": true}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    let mut ws = svc.ws(&s).await;
    eventually(GUARD, "the engine is asked", || async {
        !upstream.requests().is_empty()
    })
    .await;

    // The database out of reach, the engine's stream ends before the reply is complete: the
    // turn fails and its rollback cannot commit.
    proxy.cut();
    drop(reply);
    loop {
        match next_event(&mut ws).await {
            StreamEvent::Error { message_id, .. } if message_id == accepted["messageId"] => break,
            StreamEvent::Error { error, .. } => panic!("another reply's error: {error:?}"),
            _ => {}
        }
    }
    let pg = db.client().await;
    let turns = async || -> i64 {
        pg.query_one("SELECT count(*) FROM turns WHERE session_id = $1", &[&s])
            .await
            .unwrap()
            .get(0)
    };
    assert_eq!(
        turns().await,
        1,
        "the turn's row is left while the database is away"
    );

    proxy.restore();
    eventually(GUARD, "the replica rolls its turn back", || async {
        turns().await == 0
    })
    .await;
    let messages: i64 = pg
        .query_one("SELECT count(*) FROM messages WHERE session_id = $1", &[&s])
        .await
        .unwrap()
        .get(0);
    assert_eq!(messages, 0, "the failed turn's user message is gone");
    // The account's stream, which heard of the user message, hears of the rollback and of the
    // tokens given back.
    until_session_emptied(&mut account, &s).await;
    match next_json(&mut account).await {
        AccountEvent::Usage { usage } => assert_eq!(usage.tokens.used, 0, "{usage:?}"),
        other => panic!("expected the usage after the rollback, got {other:?}"),
    }
    // The session is no longer busy: an undo finds nothing to undo, not a reply in progress.
    let (status, body) = svc.undo(&s).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], json!("message_not_found"));
}
