//! PostgreSQL's counters in shard rows and its turns in few round trips
//! (`crates/service/src/storage/postgres/counters.rs`, `turn.rs`): the request limit stays exact
//! when the limit changes between starts, a total written by hand is the month's total, and a
//! turn cancelled between the round trips of its transaction leaves no lock behind, two new
//! sessions decided at once on the last free slot give one session, and an account's shards
//! are only those of the connections that counted on it.

use std::time::Duration;

use chrono::Utc;
use convo_client::api::Role;
use convo_core::{Account, TurnStart, TurnStarted, UserMessage};
use convo_service::auth::RequestCount;
use convo_service::storage::rows::{Reply, UsageCounts};
use convo_service::storage::{Db, Storage};
use convo_service::{Tier, generate_api_key, time};

use super::backends::{Backend, TestDb};
use super::common::session;

/// A store on a new database (dropped with the `Backend`), with one account of `tier`.
pub(super) async fn store_with_account(tier: Tier) -> (Backend, Db, Account) {
    let backend = Backend::Postgres(TestDb::create().await);
    let store = Db::open(&backend.location()).await.unwrap();
    let accounts = store
        .ensure_keys(vec![(generate_api_key(), tier)], time::now_ms())
        .await
        .unwrap();
    let account = *accounts.values().next().unwrap();
    (backend, store, account)
}

/// A connection of the test's own to the store's database.
pub(super) async fn connect(backend: &Backend) -> tokio_postgres::Client {
    match backend {
        Backend::Postgres(db) => db.client().await,
        Backend::Sqlite(_) => unreachable!("these tests run on PostgreSQL"),
    }
}

/// Writes the account's requests of this month into `usage_totals` by hand, as if that many
/// had been counted.
pub(super) async fn set_requests(backend: &Backend, account: Account, requests: i64) {
    connect(backend)
        .await
        .execute(
            "INSERT INTO usage_totals (account_id, period_start, requests) VALUES ($1, $2, $3)",
            &[&account.id, &period_start(), &requests],
        )
        .await
        .unwrap();
}

pub(super) fn period_start() -> i64 {
    time::billing_period(Utc::now()).0.timestamp_millis()
}

/// A send's request count, now.
pub(super) fn send_request(account: Account) -> RequestCount {
    RequestCount::new(account, "POST", "/test", Utc::now())
}

/// The account's usage this month.
pub(super) async fn usage(store: &Db, account: Account) -> UsageCounts {
    store
        .usage_counts(account.id, period_start())
        .await
        .unwrap()
}

/// A whole turn: message `id` sent to `session_id` and its reply (3 tokens) stored.
async fn exchange(store: &Db, account: Account, session_id: &str, id: &str) {
    let started = store
        .start_turn(send_request(account), turn(account, session_id, id))
        .await;
    assert!(matches!(started, Ok(Some(Ok(TurnStarted::Ready { .. })))));
    let reply = Reply {
        id: format!("{id}_reply"),
        content: "reply".into(),
        tokens: 3,
        created_at_ms: time::now_ms(),
        finish_reason: convo_wire::FinishReason::Stop,
    };
    let stored = store
        .complete_turn(
            account.id,
            session_id.to_string(),
            reply,
            None,
            time::now_ms(),
        )
        .await;
    assert!(stored.unwrap(), "the reply is stored");
}

pub(super) fn turn(account: Account, session_id: &str, id: &str) -> TurnStart {
    let now = Utc::now();
    TurnStart {
        account,
        session_id: session_id.to_string(),
        reply_id: format!("{id}_reply"),
        message: UserMessage {
            id: id.to_string(),
            role: Role::User,
            content: format!("message {id}"),
            tokens: 7,
            metadata: None,
        },
        idempotency_key: None,
        accepted_response: None,
        max_context_tokens: 8192,
        period_start_ms: time::billing_period(now).0.timestamp_millis(),
        now_ms: now.timestamp_millis(),
    }
}

/// Shares of the request budget handed out under one limit are not spent under another: after
/// a downgrade (Pro, 50,000, to Free, 1,000) with 999 counted, exactly one more request passes,
/// however much of Pro's budget the shards still held; after the upgrade back, requests pass.
#[tokio::test]
async fn a_limit_changed_between_starts_counts_exactly_from_the_first_request() {
    let (backend, store, pro) = store_with_account(Tier::Pro).await;
    set_requests(&backend, pro, 998).await;
    let client = connect(&backend).await;
    let count = async |account: Account| {
        store
            .count_request(RequestCount::new(account, "GET", "/test", Utc::now()))
            .await
            .unwrap()
    };
    // Counted under Pro: the shards now hold shares of the 49,002 left.
    assert_eq!(count(pro).await, Some(()));
    let allowances: i64 = client
        .query_one("SELECT SUM(allowance)::BIGINT FROM usage_shards", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(allowances, 49_002);
    let free = Account {
        tier: Tier::Free,
        ..pro
    };
    assert_eq!(count(free).await, Some(()), "the 1,000th request");
    for _ in 0..5 {
        assert_eq!(count(free).await, None, "over Free's 1,000");
    }
    assert_eq!(usage(&store, pro).await.requests, 1000);
    assert_eq!(count(pro).await, Some(()), "Pro again");
    store.close().await.unwrap();
}

/// A total written into `usage_totals` by hand is the month's total: the shards' share of that
/// counter is dropped, and later sends count from it.
#[tokio::test]
async fn a_total_written_by_hand_is_the_months_total() {
    let (backend, store, account) = store_with_account(Tier::Pro).await;
    let sid = session();
    for id in ["msg_one", "msg_two"] {
        exchange(&store, account, &sid, id).await;
    }
    let counted = usage(&store, account).await;
    assert_eq!((counted.requests, counted.tokens), (2, 20));
    let client = connect(&backend).await;
    client
        .execute(
            "UPDATE usage_totals SET tokens = 5 WHERE account_id = $1",
            &[&account.id],
        )
        .await
        .unwrap();
    let counted = usage(&store, account).await;
    assert_eq!((counted.requests, counted.tokens), (2, 5));
    store.close().await.unwrap();
}

/// An account's counter shards are those of the connections that counted on it (migration
/// 16), not 32 made at its first refill: every turn's admission sums them for the month's
/// tokens. A second store's connections add theirs as they first count, and what the
/// allowances hand out is still exactly what the limit leaves.
#[tokio::test]
async fn an_accounts_counter_shards_are_those_of_the_connections_that_counted() {
    let (backend, store, account) = store_with_account(Tier::Pro).await;
    let sid = session();
    for i in 0..10 {
        exchange(&store, account, &sid, &format!("msg_shard{i}")).await;
    }
    let other = Db::open(&backend.location()).await.unwrap();
    for _ in 0..5 {
        let counted = other.count_request(send_request(account)).await.unwrap();
        assert_eq!(counted, Some(()));
    }
    let db = connect(&backend).await;
    let shards: Vec<i16> = db
        .query(
            "SELECT shard FROM usage_shards WHERE account_id = $1 ORDER BY shard",
            &[&account.id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // The stores' connections (this test's own left out): a shard is a backend's pid modulo 32.
    let backends: Vec<i32> = db
        .query(
            "SELECT pid FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let theirs: std::collections::BTreeSet<i16> =
        backends.iter().map(|pid| (pid % 32) as i16).collect();
    assert!(
        !shards.is_empty() && shards.iter().all(|s| theirs.contains(s)),
        "shards {shards:?}, the connections' {theirs:?}"
    );
    let counted = usage(&store, account).await;
    assert_eq!((counted.requests, counted.tokens), (15, 100));
    let handed_out: i64 = db
        .query_one(
            "SELECT (SELECT requests FROM usage_totals WHERE account_id = $1)
                    + (SELECT SUM(allowance) FROM usage_shards WHERE account_id = $1)::BIGINT",
            &[&account.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(handed_out, Tier::Pro.limits().requests as i64);
    other.close().await.unwrap();
    store.close().await.unwrap();
}

/// A turn whose request is dropped while its transaction waits for the session's lock (after
/// `BEGIN`, before `COMMIT`): its connection does not go back to the pool in that transaction,
/// so the lock it then takes is released, nothing of the turn is stored, and the session takes
/// the next turn.
#[tokio::test]
async fn a_turn_cancelled_between_its_round_trips_leaves_no_lock_behind() {
    let (backend, store, account) = store_with_account(Tier::Pro).await;
    let sid = session();
    exchange(&store, account, &sid, "msg_first").await;
    let mut blocker = connect(&backend).await;
    let hold = blocker.transaction().await.unwrap();
    hold.execute("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", &[&sid])
        .await
        .unwrap();
    let cancelled = tokio::time::timeout(
        Duration::from_millis(500),
        store.start_turn(send_request(account), turn(account, &sid, "msg_cancelled")),
    )
    .await;
    assert!(cancelled.is_err(), "the turn waited for the session's lock");
    hold.commit().await.unwrap();
    // The cancelled transaction's statement now runs, takes the lock, and ends with its
    // connection: the lock is free again soon.
    let probe = connect(&backend).await;
    let mut free = false;
    for _ in 0..100 {
        let tx = probe
            .query(
                "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE NOWAIT",
                &[&sid],
            )
            .await;
        if tx.is_ok() {
            free = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(free, "the session's row stayed locked");
    let started = tokio::time::timeout(
        Duration::from_secs(10),
        store.start_turn(send_request(account), turn(account, &sid, "msg_next")),
    )
    .await
    .expect("the next turn of the session starts");
    assert!(matches!(started, Ok(Some(Ok(TurnStarted::Ready { .. })))));
    let stored: Vec<String> = probe
        .query(
            "SELECT id FROM messages WHERE session_id = $1 ORDER BY pk",
            &[&sid],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(stored, ["msg_first", "msg_first_reply", "msg_next"]);
    assert_eq!(
        usage(&store, account).await.requests,
        2,
        "the cancelled request was not counted"
    );
    store.close().await.unwrap();
}

/// The account's live sessions are read without its lock and checked again under it when the
/// session is written: two new sessions admitted at once on one free slot (the account's row
/// held by another transaction until both have decided) give one session and one refusal.
#[tokio::test]
async fn two_new_sessions_decided_at_once_on_the_last_slot_give_one_session() {
    let (backend, store, account) = store_with_account(Tier::Free).await;
    let limit = Tier::Free.limits().sessions as i64;
    let mut blocker = connect(&backend).await;
    blocker
        .execute(
            "UPDATE accounts SET live_sessions = $1 WHERE id = $2",
            &[&(limit - 1), &account.id],
        )
        .await
        .unwrap();
    let hold = blocker.transaction().await.unwrap();
    hold.execute(
        "SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE",
        &[&account.id],
    )
    .await
    .unwrap();
    let store = std::sync::Arc::new(store);
    let starts: Vec<_> = ["msg_a", "msg_b"]
        .into_iter()
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .start_turn(send_request(account), turn(account, &session(), id))
                    .await
                    .unwrap()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    hold.commit().await.unwrap();
    let mut ready = 0;
    let mut refused = 0;
    for start in starts {
        match start.await.unwrap() {
            Some(Ok(TurnStarted::Ready { .. })) => ready += 1,
            Some(Err(convo_core::TurnRefusal::Quota("sessions"))) => refused += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((ready, refused), (1, 1));
    let live: i64 = connect(&backend)
        .await
        .query_one(
            "SELECT live_sessions FROM accounts WHERE id = $1",
            &[&account.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(live, limit);
}

/// Near the limit, every shard's allowance runs dry again and again: 800 requests at once (a
/// quarter counted alone, the rest starting a turn in a new session) over two stores on one
/// database (two pools of connections, so up to 32 shards), with 100 requests left. Exactly
/// 100 are counted and 700 refused, and none fails: a request that finds its shard dry is
/// counted by the statement that refills the shards, so no concurrent refill can take its
/// share first, and no transaction holds a shard's lock while it waits for a refill's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_at_the_edge_of_the_limit_over_two_pools_are_exact_and_never_fail() {
    let (backend, a, account) = store_with_account(Tier::Enterprise).await;
    let b = Db::open(&backend.location()).await.unwrap();
    let limit = Tier::Enterprise.limits().requests as i64;
    let left = 100;
    set_requests(&backend, account, limit - left).await;
    let stores = [std::sync::Arc::new(a), std::sync::Arc::new(b)];
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..800 {
        let store = stores[i % 2].clone();
        tasks.spawn(async move {
            let request = send_request(account);
            if i % 4 == 0 {
                store.count_request(request).await.map(|c| c.is_some())
            } else {
                let id = format!("msg_edge{i}");
                match store
                    .start_turn(request, turn(account, &session(), &id))
                    .await
                {
                    Ok(Some(Ok(TurnStarted::Ready { .. }))) => Ok(true),
                    Ok(None) => Ok(false),
                    other => panic!("unexpected {other:?}"),
                }
            }
        });
    }
    let (mut counted, mut refused, mut failed) = (0, 0, Vec::new());
    while let Some(result) = tasks.join_next().await {
        match result.unwrap() {
            Ok(true) => counted += 1,
            Ok(false) => refused += 1,
            Err(e) => failed.push(e.to_string()),
        }
    }
    assert!(failed.is_empty(), "{} failed: {failed:?}", failed.len());
    assert_eq!((counted, refused), (left, 700));
    assert_eq!(usage(&stores[0], account).await.requests, limit as u64);
    for store in &stores {
        store.close().await.unwrap();
    }
}

/// A request refused at its limit, a send or any other, takes no lock and writes nothing once
/// the totals show the limit (migration 13, and migration 12 for a send): both are refused
/// while another transaction holds the account's totals row and every shard, and every row of
/// its counters is the version it was (`xmin`). (A refusal that ran a refill would lock and
/// rewrite the totals row and every shard, and the account's other requests would wait behind
/// a client sending on.)
#[tokio::test]
async fn a_request_refused_at_the_limit_takes_no_lock_and_writes_nothing() {
    let (backend, store, account) = store_with_account(Tier::Free).await;
    let limit = Tier::Free.limits().requests as i64;
    set_requests(&backend, account, limit).await;
    let db = connect(&backend).await;
    assert_eq!(
        store.count_request(send_request(account)).await.unwrap(),
        None
    );
    let versions = "SELECT (SELECT xmin::text FROM usage_totals
                            WHERE account_id = $1 AND period_start = $2) || ';'
                           || COALESCE(string_agg(shard::text || ':' || xmin::text, ','
                                                  ORDER BY shard), '')
                    FROM usage_shards WHERE account_id = $1 AND period_start = $2";
    let before: String = db
        .query_one(versions, &[&account.id, &period_start()])
        .await
        .unwrap()
        .get(0);
    let mut holder = connect(&backend).await;
    let hold = holder.transaction().await.unwrap();
    hold.execute(
        "SELECT 1 FROM usage_totals WHERE account_id = $1 FOR UPDATE",
        &[&account.id],
    )
    .await
    .unwrap();
    hold.execute(
        "SELECT 1 FROM usage_shards WHERE account_id = $1 ORDER BY shard FOR UPDATE",
        &[&account.id],
    )
    .await
    .unwrap();
    let (other, send) = tokio::time::timeout(Duration::from_secs(10), async {
        let other = store.count_request(send_request(account)).await.unwrap();
        let send = store
            .start_turn(
                send_request(account),
                turn(account, &session(), "msg_refused"),
            )
            .await
            .unwrap();
        (other, send)
    })
    .await
    .expect("a request refused at the limit waited for the counters' locks");
    hold.rollback().await.unwrap();
    assert_eq!(other, None, "the request is refused");
    assert!(send.is_none(), "the send is refused: {send:?}");
    let after: String = db
        .query_one(versions, &[&account.id, &period_start()])
        .await
        .unwrap()
        .get(0);
    assert_eq!(after, before, "a refused request rewrote the counters");
    assert_eq!(usage(&store, account).await.requests, limit as u64);
    store.close().await.unwrap();
}
