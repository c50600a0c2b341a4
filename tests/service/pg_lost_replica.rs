//! A replica whose network dies in the middle of a transaction: its statements reached the
//! server, nothing comes back, and its backend waits in the transaction holding the locks of
//! the session it was writing. The server ends that transaction after `IDLE_IN_TRANSACTION`
//! (`crates/service/src/storage/postgres/mod.rs`), so another replica's send on the session goes
//! through instead of waiting until TCP gives the lost connection up (hours).

use convo_service::storage::postgres::IDLE_IN_TRANSACTION;
use convo_service::{DbLocation, ServiceConfig};
use reqwest::StatusCode;
use serde_json::json;

use super::backends::TestDb;
use super::common::{GUARD, session, start_with};
use super::pg_proxy::{PgProxy, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_lost_mid_transaction_does_not_keep_its_session_locked() {
    let db = TestDb::create().await;
    let proxy = PgProxy::start().await;
    let mut through_proxy = ServiceConfig::ephemeral(0);
    through_proxy.db = DbLocation::Postgres(proxy.url(&db.name));
    let mut direct = through_proxy.clone();
    direct.db = DbLocation::Postgres(db.url());
    let (a, b) = tokio::join!(start_with(through_proxy), start_with(direct));
    let s = session();
    b.send_text(&s, "hello").await;
    // A has served the account before: its next send's first statement is the turn's.
    a.send_text(&session(), "warm").await;

    // A's send reaches the server; what follows its `BEGIN` does not come back.
    proxy.hold_replies_in_transactions();
    let lost = tokio::spawn({
        let s = s.clone();
        async move {
            let answer = a.post(&s, json!({"content": "from a"})).await;
            (a, answer)
        }
    });
    let pg = db.client().await;
    eventually(
        GUARD,
        "a's transaction waits with the session locked",
        || async {
            let waiting: i64 = pg
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = $1 AND state = 'idle in transaction'
                   AND query LIKE '%convo_turn_facts_2%'",
                    &[&db.name],
                )
                .await
                .unwrap()
                .get(0);
            waiting > 0
        },
    )
    .await;

    // B's send on the session waits for the lock until the server ends a's transaction.
    let (status, body) = tokio::time::timeout(
        IDLE_IN_TRANSACTION + GUARD,
        b.post(&s, json!({"content": "from b"})),
    )
    .await
    .expect("b's send waited for the lost transaction's lock (hang guard)");
    assert_eq!(status, StatusCode::OK, "{body}");

    // The network comes back: a's send ends (its connection was ended by the server: 503
    // `unavailable`, as for any connection lost mid-request), and its message is stored once if it was answered
    // 200, not at all otherwise.
    proxy.restore();
    let (a, (a_status, a_body)) = tokio::time::timeout(GUARD, lost)
        .await
        .expect("a's send ends once the network is back (hang guard)")
        .expect("a's task");
    let users = |text: &'static str| {
        let pg = &pg;
        let s = &s;
        async move {
            pg.query_one(
                "SELECT count(*) FROM messages WHERE session_id = $1 AND role = 'user' AND content = $2",
                &[s, &text],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };
    assert_eq!(users("hello").await, 1);
    assert_eq!(users("from b").await, 1);
    let from_a = users("from a").await;
    if a_status == StatusCode::OK {
        assert_eq!(from_a, 1, "{a_body}");
    } else {
        assert_eq!(from_a, 0, "{a_status} {a_body}");
    }
    // Nothing is left in flight: both replicas send on the session again.
    a.send_text(&s, "a again").await;
    b.send_text(&s, "b again").await;
}
