//! A replica whose listener follows a reply generated on another settles that reply from the
//! database at every probe of its relay (`PROBE_EVERY`, 5 s, in
//! `crates/service/src/storage/postgres/relay.rs`), and it finds the reply through the
//! sessions' index: over a `messages` table large enough that the planner would rather read
//! all of it, no statement reads all of it while the reply is followed across probes.

use std::time::Duration;

use convo_service::{EngineConfig, ServiceConfig};

use super::backends::TestDb;
use super::common::{close, session, start_with};
use super::relay_heal::{deltas, start_reply};

/// Sessions and messages of another account, so that the table is worth an index.
const PAD_SESSIONS: i64 = 400;
const PAD_MESSAGES: i64 = 50;

/// Rows of `messages` read by whole-table scans so far (`pg_stat_user_tables`; a backend's
/// counts reach it when it ends, or when it has been idle a while).
async fn rows_read_whole(client: &tokio_postgres::Client) -> i64 {
    client
        .query_one(
            "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'messages'",
            &[],
        )
        .await
        .expect("the table's statistics")
        .get(0)
}

/// Waits until no other connection is open on the test's database, so that the replicas'
/// backends have ended and their counts are in the statistics.
async fn replicas_gone(client: &tokio_postgres::Client) {
    super::pg_proxy::eventually(
        super::common::GUARD,
        "the replicas' connections closed",
        || async {
            let open: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                    &[],
                )
                .await
                .expect("the connections")
                .get(0);
            open == 0
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_reply_is_settled_without_reading_the_whole_table() {
    let db = TestDb::create().await;
    // Slow enough that the reply is still running after a probe.
    let pace_ms = 400;
    let mut config = ServiceConfig::ephemeral(pace_ms);
    config.engine = EngineConfig::Builtin { pace_ms };
    config.db = convo_service::DbLocation::Postgres(db.url());
    let a = start_with(config.clone()).await;
    let b = start_with(config).await;

    let client = db.client().await;
    client
        .batch_execute(&format!(
            "INSERT INTO accounts (id, tier, created_at) VALUES (1000000, 'pro', 0);
             INSERT INTO sessions (id, account_id, created_at)
             SELECT 'session_pad' || g, 1000000, g FROM generate_series(1, {PAD_SESSIONS}) g;
             INSERT INTO messages (id, session_id, role, content, tokens, created_at)
             SELECT 'msg_pad' || g || '_' || r, 'session_pad' || g,
                    CASE WHEN r % 2 = 0 THEN 'user' ELSE 'assistant' END, repeat('x', 100), 10, r
             FROM generate_series(1, {PAD_SESSIONS}) g, generate_series(1, {PAD_MESSAGES}) r;
             ANALYZE messages; ANALYZE turns;"
        ))
        .await
        .expect("the padding");

    let sid = session();
    let mut ws = b.ws(&sid).await;
    let reply = start_reply(&a, &sid, "tell me a long story").await;
    // b follows the reply: its first delta came through the relay.
    deltas(&mut ws, &reply, 1).await;

    // Past a probe of b's relay, with the reply still running.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let (_, history) = a.get(&format!("/v1/sessions/{sid}/messages")).await;
    assert_eq!(
        history["messages"].as_array().map(Vec::len),
        Some(1),
        "the reply ended before a probe could settle it; make it slower: {history}"
    );
    close(ws).await;
    a.service.shutdown().await;
    b.service.shutdown().await;
    replicas_gone(&client).await;
    // A whole read of the table would have read every padding row at each probe.
    let read = rows_read_whole(&client).await;
    assert!(
        read < PAD_SESSIONS * PAD_MESSAGES,
        "{read} rows of `messages` were read by whole-table scans while the reply was followed"
    );
}
