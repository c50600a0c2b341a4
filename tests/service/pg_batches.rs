//! Turn starts and replies that arrive together are written together on PostgreSQL
//! (`crates/service/src/storage/postgres/batch.rs`, `turn_batch.rs`): each turn is decided and
//! stored as it would be alone, every request is counted once, an account at its request limit
//! is refused in the batch without failing it, and a batch that may not decide something (the
//! last requests the limit leaves) keeps nothing and lets its turns run one at a time, so the
//! limit stays exact.

use std::time::Duration;

use convo_core::{Account, Recorded, TurnRefusal, TurnStarted};
use convo_service::storage::postgres::BatchUse;
use convo_service::storage::rows::Reply;
use convo_service::storage::{Db, Storage};
use convo_service::{Tier, generate_api_key, time};
use futures_util::future::join_all;
use tokio::task::JoinHandle;

use super::backends::{Backend, TestDb};
use super::pg_counters::{
    connect, period_start, send_request, set_requests, store_with_account, turn, usage,
};

/// How the store wrote turn starts and replies so far.
fn batches(store: &Db) -> (BatchUse, BatchUse) {
    match store {
        Db::Postgres(pg) => {
            let used = pg.pool_use();
            (used.starts, used.replies)
        }
        Db::Sqlite(_) => unreachable!("these tests run on PostgreSQL"),
    }
}

fn reply(id: &str) -> Reply {
    Reply {
        id: format!("{id}_reply"),
        content: format!("reply to {id}"),
        tokens: 3,
        created_at_ms: time::now_ms(),
        finish_reason: convo_wire::FinishReason::Stop,
    }
}

/// Starts a turn in each of `sessions` at once (message id = session id); each outcome.
async fn start_all(
    store: &Db,
    account: Account,
    sessions: &[String],
) -> Vec<Option<Result<TurnStarted, TurnRefusal>>> {
    join_all(sessions.iter().map(|s| {
        let store = store.clone();
        async move {
            store
                .start_turn(send_request(account), turn(account, s, s))
                .await
                .unwrap()
        }
    }))
    .await
}

/// Stores the reply of each of `sessions` at once.
async fn complete_all(store: &Db, account: Account, sessions: &[String]) {
    let stored = join_all(sessions.iter().map(|s| {
        let store = store.clone();
        async move {
            store
                .complete_turn(account.id, s.clone(), reply(s), None, time::now_ms())
                .await
                .unwrap()
        }
    }))
    .await;
    assert!(stored.iter().all(|s| *s), "every reply is stored");
}

/// Sends a message to `session_id` (message id `id`) in a task of its own, and checks that it
/// is still waiting a moment later.
async fn waiting_send(
    store: &Db,
    account: Account,
    session_id: &str,
    id: &str,
) -> JoinHandle<Option<Result<TurnStarted, TurnRefusal>>> {
    let (store, session_id, id) = (store.clone(), session_id.to_string(), id.to_string());
    let waiting = tokio::spawn(async move {
        store
            .start_turn(send_request(account), turn(account, &session_id, &id))
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the send waits");
    waiting
}

/// Sends one message to each of `sessions`, one after another, each admitted within 10 s.
async fn sends_go_on(store: &Db, account: Account, sessions: &[String]) {
    for s in sessions {
        let started = tokio::time::timeout(
            Duration::from_secs(10),
            store.start_turn(send_request(account), turn(account, s, s)),
        )
        .await
        .expect("a send behind the waiting one is written");
        assert!(matches!(started, Ok(Some(Ok(TurnStarted::Ready { .. })))));
    }
}

fn sessions(wave: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("session_{wave}{i:03}")).collect()
}

#[tokio::test]
async fn turns_sent_together_are_written_together_each_once() {
    let (_db, store, account) = store_with_account(Tier::Enterprise).await;

    // The account's first requests of the month: a refill creates the writer's shard and
    // counts them.
    let first = sessions("first", 40);
    let started = start_all(&store, account, &first).await;
    assert!(
        started.iter().all(
            |s| matches!(s, Some(Ok(TurnStarted::Ready { history, .. })) if history.len() == 1)
        ),
        "every first turn is admitted: {started:?}"
    );
    let (starts, _) = batches(&store);
    // The batch writer runs on a thread of its own: the first send may reach it before the
    // others are sent, and is then written alone, as under light load.
    assert_eq!(starts.failed, 0, "{starts:?}");
    assert!(starts.batches >= 1 && starts.batched >= 2, "{starts:?}");
    assert_eq!(starts.batched + starts.alone, 40, "{starts:?}");
    complete_all(&store, account, &first).await;
    let (_, replies) = batches(&store);
    assert!(replies.batches >= 1, "{replies:?}");
    assert_eq!(replies.batched + replies.alone, 40, "{replies:?}");

    // A second message in each session of the first wave and a first in new ones, together.
    let second: Vec<String> = first
        .iter()
        .cloned()
        .chain(sessions("second", 24))
        .collect();
    let ids: Vec<String> = second.iter().map(|s| format!("{s}_again")).collect();
    let started = join_all(second.iter().zip(&ids).map(|(s, id)| {
        let store = store.clone();
        async move {
            store
                .start_turn(send_request(account), turn(account, s, id))
                .await
                .unwrap()
        }
    }))
    .await;
    for (s, outcome) in second.iter().zip(&started) {
        let Some(Ok(TurnStarted::Ready { history, .. })) = outcome else {
            panic!("{s}: {outcome:?}");
        };
        let expected = if s.contains("first") { 3 } else { 1 };
        assert_eq!(
            history.len(),
            expected,
            "{s}: the history read in the batch"
        );
    }
    let (after, _) = batches(&store);
    assert!(after.batches > starts.batches, "{after:?}");
    assert_eq!(after.batched + after.alone, 40 + 64, "{after:?}");
    let done: Vec<_> = join_all(second.iter().zip(&ids).map(|(s, id)| {
        let store = store.clone();
        async move {
            store
                .complete_turn(account.id, s.clone(), reply(id), None, time::now_ms())
                .await
                .unwrap()
        }
    }))
    .await;
    assert!(done.iter().all(|d| *d));

    // Every request counted once, every message stored once, in order.
    let used = usage(&store, account).await;
    assert_eq!(used.requests, 40 + 64);
    assert_eq!(used.tokens, (40 + 64) * (7 + 3));
    for s in &first {
        let messages = store
            .session_messages(account.id, s.clone())
            .await
            .unwrap()
            .unwrap();
        let ids: Vec<&str> = messages.iter().map(|m| m.id.as_str()).collect();
        let again = format!("{s}_again");
        assert_eq!(
            ids,
            [
                s.clone(),
                format!("{s}_reply"),
                again.clone(),
                format!("{again}_reply")
            ]
        );
    }
}

/// In one batch: a session with a turn in flight (left to wait, as alone), a replayed
/// idempotency key, another account's session (refused), and new sessions; each answered as
/// it would be alone, and every one of them counted as a request.
#[tokio::test]
async fn a_batch_decides_each_turn_as_it_would_alone() {
    let (_db, store, account) = store_with_account(Tier::Enterprise).await;
    let other = *store
        .ensure_keys(vec![(generate_api_key(), Tier::Enterprise)], time::now_ms())
        .await
        .unwrap()
        .values()
        .next()
        .unwrap();
    let warm = sessions("warm", 1);
    start_all(&store, account, &warm).await;
    complete_all(&store, account, &warm).await;
    start_all(&store, other, &sessions("foreign", 1)).await;

    // A turn answered with its reply, its key remembered.
    let mut keyed = turn(account, "session_keyed", "keyed");
    keyed.idempotency_key = Some("key-1".into());
    store
        .start_turn(send_request(account), keyed.clone())
        .await
        .unwrap();
    let remembered = Recorded {
        status: 200,
        body: "{\"remembered\":true}".into(),
    };
    store
        .complete_turn(
            account.id,
            "session_keyed".into(),
            reply("keyed"),
            Some(("key-1".into(), remembered.clone())),
            time::now_ms(),
        )
        .await
        .unwrap();
    // A turn left in flight.
    start_all(&store, account, &sessions("busy", 1)).await;
    let before = usage(&store, account).await.requests;
    let (starts_before, _) = batches(&store);

    let fresh = sessions("fresh", 6);
    let busy = store.clone();
    let waiting = tokio::spawn(async move {
        busy.start_turn(
            send_request(account),
            turn(account, "session_busy000", "busy_again"),
        )
        .await
        .unwrap()
    });
    let mut resent = keyed.clone();
    resent.message.id = "keyed_again".into();
    let (replayed, foreign, started) = tokio::join!(
        store.start_turn(send_request(account), resent),
        store.start_turn(
            send_request(account),
            turn(account, "session_foreign000", "intruder")
        ),
        start_all(&store, account, &fresh),
    );
    assert_eq!(replayed.unwrap(), Some(Ok(TurnStarted::Replay(remembered))));
    assert_eq!(foreign.unwrap(), Some(Err(TurnRefusal::SessionNotFound)));
    assert!(
        started
            .iter()
            .all(|s| matches!(s, Some(Ok(TurnStarted::Ready { .. })))),
        "{started:?}"
    );
    let (starts, _) = batches(&store);
    assert!(
        starts.batches > starts_before.batches,
        "the turns came together and were written together: {starts:?}"
    );

    // The send to the busy session waits for its turn to end, then starts.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "it waits while the turn is in flight"
    );
    complete_all(&store, account, &sessions("busy", 1)).await;
    let waited = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("it starts once the turn ended")
        .unwrap();
    assert!(matches!(
        waited,
        Some(Ok(TurnStarted::Ready { history, .. })) if history.len() == 3
    ));
    // The replay, the refusal, six new sessions and the busy session's send: nine requests.
    assert_eq!(usage(&store, account).await.requests, before + 9);
}

/// A send that came alone holds the store's one place for starts while it is written, but not
/// while it waits for a turn in flight in its session: the sends behind it go on.
#[tokio::test]
async fn a_send_waiting_for_a_turn_in_flight_does_not_hold_up_others() {
    let (_db, store, account) = store_with_account(Tier::Enterprise).await;
    let busy = sessions("busy", 1);
    start_all(&store, account, &busy).await;
    let waiting = waiting_send(&store, account, "session_busy000", "busy_again").await;
    sends_go_on(&store, account, &sessions("other", 3)).await;
    assert!(
        !waiting.is_finished(),
        "still waiting for the turn in flight"
    );
    complete_all(&store, account, &busy).await;
    let waited = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("it starts once the turn ended")
        .unwrap();
    assert!(matches!(waited, Some(Ok(TurnStarted::Ready { .. }))));
}

/// Ten requests left of Pro's 50,000 and 24 new sessions sent together: the batch may not
/// count them all (its shard's share of the ten is one), so it keeps nothing, and one at a
/// time exactly ten are admitted and the rest refused for the limit.
#[tokio::test]
async fn at_the_limit_a_batch_runs_its_turns_alone_and_the_limit_stays_exact() {
    let (db, store, account) = store_with_account(Tier::Pro).await;
    set_requests(&db, account, 49_990).await;
    let started = start_all(&store, account, &sessions("edge", 24)).await;
    let admitted = started
        .iter()
        .filter(|s| matches!(s, Some(Ok(TurnStarted::Ready { .. }))))
        .count();
    let refused = started.iter().filter(|s| s.is_none()).count();
    assert_eq!((admitted, refused), (10, 14), "{started:?}");
    let (starts, _) = batches(&store);
    assert!(starts.failed >= 1, "{starts:?}");
    assert_eq!(usage(&store, account).await.requests, 50_000);
}

/// An account whose request limit is reached sends on together with another account: each of
/// its turns is refused in the batch it is in (nothing written, nothing counted), and no batch
/// fails for it, so the other account's turns are written in batches as usual.
#[tokio::test]
async fn an_account_at_its_limit_is_refused_without_failing_the_batch_it_is_in() {
    let db = TestDb::create().await;
    let backend = Backend::Postgres(db);
    let store = Db::open(&backend.location()).await.unwrap();
    let (spent_key, other_key) = (generate_api_key(), generate_api_key());
    let accounts = store
        .ensure_keys(
            vec![
                (spent_key.clone(), Tier::Free),
                (other_key.clone(), Tier::Pro),
            ],
            time::now_ms(),
        )
        .await
        .unwrap();
    let mut accounts: Vec<Account> = accounts.values().copied().collect();
    accounts.sort_by_key(|a| a.tier != Tier::Free);
    let (spent, other) = (accounts[0], accounts[1]);
    assert_eq!((spent.tier, other.tier), (Tier::Free, Tier::Pro));
    set_requests(&backend, spent, Tier::Free.limits().requests as i64).await;
    let (mine, theirs) = (sessions("spent", 16), sessions("other", 16));
    let both = join_all(mine.iter().zip(&theirs).flat_map(|(m, t)| {
        [(spent, m.clone()), (other, t.clone())].map(|(account, s)| {
            let store = store.clone();
            async move {
                let started = store
                    .start_turn(send_request(account), turn(account, &s, &s))
                    .await
                    .unwrap();
                (account, started)
            }
        })
    }))
    .await;
    for (account, started) in &both {
        if account.id == spent.id {
            assert!(started.is_none(), "refused for the limit: {started:?}");
        } else {
            assert!(
                matches!(started, Some(Ok(TurnStarted::Ready { .. }))),
                "{started:?}"
            );
        }
    }
    let (starts, _) = batches(&store);
    assert_eq!(starts.failed, 0, "{starts:?}");
    assert!(starts.batches >= 1 && starts.batched >= 2, "{starts:?}");
    assert_eq!(
        usage(&store, spent).await.requests,
        Tier::Free.limits().requests
    );
    assert_eq!(usage(&store, other).await.requests, 16);
    let written: i64 = connect(&backend)
        .await
        .query_one(
            "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id
             WHERE s.account_id = $1",
            &[&spent.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(written, 0, "nothing of the refused turns is written");
}

/// A session locked by another client's open transaction (an operator's `psql`, say) holds up
/// the send to it, and only that one: the next batch does not wait for it past a moment.
#[tokio::test]
async fn a_send_stuck_on_a_locked_session_does_not_hold_up_others() {
    let (db, store, account) = store_with_account(Tier::Enterprise).await;
    let locked = sessions("locked", 1);
    start_all(&store, account, &locked).await;
    complete_all(&store, account, &locked).await;
    let holder = connect(&db).await;
    holder.batch_execute("BEGIN").await.unwrap();
    holder
        .execute(
            "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
            &[&locked[0]],
        )
        .await
        .unwrap();
    let stuck = waiting_send(&store, account, "session_locked000", "locked_again").await;
    sends_go_on(&store, account, &sessions("free", 3)).await;
    assert!(!stuck.is_finished());
    holder.batch_execute("COMMIT").await.unwrap();
    let started = tokio::time::timeout(Duration::from_secs(10), stuck)
        .await
        .expect("it is written once the lock is released")
        .unwrap();
    assert!(matches!(
        started,
        Some(Ok(TurnStarted::Ready { history, .. })) if history.len() == 3
    ));
}

/// Pages of `sessions` (its rows and its indexes) read so far in the database (what this
/// connection read is counted once flushed: `pg_stat_force_next_flush` makes the statement's
/// end flush it).
async fn session_pages(c: &tokio_postgres::Client) -> i64 {
    c.execute("SELECT pg_stat_force_next_flush()", &[])
        .await
        .unwrap();
    c.query_one(
        "SELECT (heap_blks_hit + heap_blks_read + idx_blks_hit + idx_blks_read)::BIGINT
         FROM pg_statio_user_tables WHERE relname = 'sessions'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// The batch functions keep generic plans (migrations 11 and 15), made at a connection's first call,
/// and reach `sessions` by an index lookup per turn: planned while the table holds a page of
/// rows, a turn's start and reply still read a few of its pages once it holds 20,000 (17
/// here; a statement that scans it reads about 200).
#[tokio::test]
async fn plans_made_on_a_small_table_still_look_sessions_up_one_by_one() {
    let (db, _store, account) = store_with_account(Tier::Enterprise).await;
    let c = connect(&db).await;
    let call = async |session: &str| {
        let (accounts, sessions) = (vec![account.id], vec![session]);
        let none: Vec<Option<&str>> = vec![None];
        c.query_one(
            "SELECT count(*) FROM convo_turn_facts_2($1, $2, $3, 0, $4, $5, $6)",
            &[
                &accounts,
                &sessions,
                &none,
                &vec![period_start()],
                &vec![-1_i64],
                &vec![0_i64],
            ],
        )
        .await
        .unwrap();
        let outcomes: Vec<i32> = c
            .query_one(
                "SELECT convo_turn_complete_n($1, $2, $3, 'assistant', $4, $5, $6, $3, $7, $3,
                                              $5, $3)",
                &[
                    &accounts,
                    &sessions,
                    &vec![Some("no_reply")],
                    &vec!["text"],
                    &vec![1_i64],
                    &vec![time::now_ms()],
                    &vec![None::<i32>],
                ],
            )
            .await
            .unwrap()
            .get(0);
        outcomes
    };
    let add_sessions = async |from: i32, to: i32| {
        c.execute(
            "INSERT INTO sessions (id, account_id, created_at, deleted_at)
             SELECT 'session_' || lpad(i::text, 5, '0'), $1, 0, CASE WHEN i <> 12345 THEN 0 END
             FROM generate_series($2::INTEGER, $3::INTEGER) i",
            &[&account.id, &from, &to],
        )
        .await
        .unwrap();
    };
    // Planned while the table holds a page of rows (deleted ones, which keeps the account's
    // count of live sessions from being updated at each insert).
    add_sessions(1, 50).await;
    assert_eq!(call("session_00001").await, vec![1]);
    add_sessions(51, 20000).await;
    let before = session_pages(&c).await;
    // The one live session of them, no turn in flight: nothing to store.
    assert_eq!(call("session_12345").await, vec![2]);
    let read = session_pages(&c).await - before;
    assert!(read <= 50, "{read} pages of `sessions` read for one turn");
}
