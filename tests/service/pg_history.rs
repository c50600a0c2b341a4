//! A replica keeps the histories it read and reads only what came after them
//! (`crates/service/src/storage/postgres/history_cache.rs`, migration 15): the history a turn
//! starts with is the session's, whatever another replica, an undo, a rolled-back turn or an
//! operator's SQL did to the messages meanwhile. The messages are long enough that a replica
//! keeps their histories (`MIN_KEPT_BYTES`).

use convo_core::{Account, HistoryEntry, TurnStarted};
use convo_service::storage::rows::{Reply, Undo};
use convo_service::storage::{Db, Storage};
use convo_service::{Tier, time};

use super::pg_counters::{connect, send_request, store_with_account, turn};

/// The text of message `id`, and of the reply to it: a few KiB each.
fn message_text(id: &str) -> String {
    format!("message {id} {}", "words ".repeat(1000))
}

fn reply_text(id: &str) -> String {
    format!("reply to {id} {}", "more words ".repeat(500))
}

/// Starts a turn (message `id`) in `session` and answers the history it starts with, before
/// its own message (which ends what the engine is given).
async fn start(store: &Db, account: Account, session: &str, id: &str) -> Vec<String> {
    let mut t = turn(account, session, id);
    t.message.content = message_text(id);
    let mut history: Vec<String> = match store.start_turn(send_request(account), t).await.unwrap() {
        Some(Ok(TurnStarted::Ready { history, .. })) => history
            .iter()
            .map(|HistoryEntry { content, .. }| content.clone())
            .collect(),
        other => panic!("the turn of {id} did not start: {other:?}"),
    };
    assert_eq!(history.pop(), Some(message_text(id)));
    history
}

/// Stores the reply to `id` (`reply_text`).
async fn reply(store: &Db, account: Account, session: &str, id: &str) {
    let reply = Reply {
        id: format!("{id}_reply"),
        content: reply_text(id),
        tokens: 3,
        created_at_ms: time::now_ms(),
        finish_reason: convo_wire::FinishReason::Stop,
    };
    let stored = store
        .complete_turn(account.id, session.into(), reply, None, time::now_ms())
        .await
        .unwrap();
    assert!(stored, "the reply to {id} is stored");
}

/// A whole exchange; the history its turn started with.
async fn exchange(store: &Db, account: Account, session: &str, id: &str) -> Vec<String> {
    let history = start(store, account, session, id).await;
    reply(store, account, session, id).await;
    history
}

fn texts(ids: &[&str]) -> Vec<String> {
    ids.iter()
        .flat_map(|id| [message_text(id), reply_text(id)])
        .collect()
}

#[tokio::test]
async fn a_turn_starts_with_the_sessions_history_whatever_changed_it_meanwhile() {
    let (backend, a, account) = store_with_account(Tier::Enterprise).await;
    let b = Db::open(&backend.location()).await.unwrap();
    let sql = connect(&backend).await;
    let s = "session_history_kept";

    assert!(exchange(&a, account, s, "m1").await.is_empty());
    assert_eq!(exchange(&a, account, s, "m2").await, texts(&["m1"]));
    // Another replica's exchange comes after what this one holds.
    assert_eq!(exchange(&b, account, s, "m3").await, texts(&["m1", "m2"]));
    assert_eq!(
        exchange(&a, account, s, "m4").await,
        texts(&["m1", "m2", "m3"])
    );

    // Undone on the other replica.
    assert!(matches!(
        b.undo_last_exchange(account.id, s.into()).await.unwrap(),
        Undo::Removed(_)
    ));
    assert_eq!(
        exchange(&a, account, s, "m5").await,
        texts(&["m1", "m2", "m3"])
    );

    // A turn whose reply failed, rolled back.
    start(&a, account, s, "m6").await;
    a.roll_back_turn(account.id, s.into(), "m6".into(), time::now_ms(), None)
        .await
        .unwrap();
    assert_eq!(
        start(&a, account, s, "m7").await,
        texts(&["m1", "m2", "m3", "m5"])
    );
    reply(&a, account, s, "m7").await;

    // An operator's SQL: an update, a deletion, a truncation.
    sql.execute(
        "UPDATE messages SET content = 'edited' WHERE id = 'm1'",
        &[],
    )
    .await
    .unwrap();
    let mut expected = texts(&["m1", "m2", "m3", "m5", "m7"]);
    expected[0] = "edited".into();
    assert_eq!(exchange(&a, account, s, "m8").await, expected);
    sql.execute("DELETE FROM messages WHERE id = 'm2_reply'", &[])
        .await
        .unwrap();
    expected.remove(3);
    expected.extend(texts(&["m8"]));
    assert_eq!(exchange(&a, account, s, "m9").await, expected);
    sql.batch_execute("TRUNCATE messages").await.unwrap();
    assert!(exchange(&a, account, s, "m10").await.is_empty());
    assert_eq!(exchange(&a, account, s, "m11").await, texts(&["m10"]));
}

/// What proves the replica reads only what came after the history it holds: a change made
/// without the trigger that counts changes is not seen by the replica that held the session's
/// history, and is seen by one that did not.
#[tokio::test]
async fn a_replica_reads_only_the_messages_after_the_history_it_holds() {
    let (backend, a, account) = store_with_account(Tier::Enterprise).await;
    let sql = connect(&backend).await;
    let s = "session_history_after";
    exchange(&a, account, s, "m1").await;
    assert_eq!(exchange(&a, account, s, "m2").await, texts(&["m1"]));
    sql.batch_execute(
        "ALTER TABLE messages DISABLE TRIGGER messages_updated;
         UPDATE messages SET content = 'unseen' WHERE id = 'm1';
         ALTER TABLE messages ENABLE TRIGGER messages_updated;",
    )
    .await
    .unwrap();
    assert_eq!(exchange(&a, account, s, "m3").await, texts(&["m1", "m2"]));
    let fresh = Db::open(&backend.location()).await.unwrap();
    let mut read = texts(&["m1", "m2", "m3"]);
    read[0] = "unseen".into();
    assert_eq!(exchange(&fresh, account, s, "m4").await, read);
}

#[tokio::test]
async fn a_deleted_session_leaves_only_its_id_in_message_changes() {
    let (backend, a, account) = store_with_account(Tier::Enterprise).await;
    let sql = connect(&backend).await;
    let s = "session_history_deleted";
    exchange(&a, account, s, "m1").await;
    assert!(
        a.delete_session(account.id, s.into(), time::now_ms())
            .await
            .unwrap()
    );
    let rows = sql
        .query("SELECT session_id FROM message_changes", &[])
        .await
        .unwrap();
    let ids: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(ids, vec![s.to_string()]);
}

/// What the replica holds of a session's history (content) goes when the session is deleted
/// or its last exchange undone through that replica (docs/deploy.md, "What operators must do
/// about deletion"); another replica forgets a deleted session's at its next heartbeat
/// (`tests/service/deletion_replicas.rs`), and any drops a history unused for a while
/// (`HELD_FOR`, unit-tested in history_cache.rs).
#[tokio::test]
async fn the_replica_that_deletes_or_undoes_forgets_the_history_it_held() {
    let (_backend, a, account) = store_with_account(Tier::Enterprise).await;
    let Db::Postgres(pg) = &a else {
        panic!("a PostgreSQL store")
    };
    let held = || pg.pool_use().histories.sessions;
    let (deleted, undone) = ("session_forgotten_deleted", "session_forgotten_undone");
    // A turn keeps the history it read, so each session's second one keeps its first exchange.
    for (session, ids) in [(deleted, ["d1", "d2"]), (undone, ["u1", "u2"])] {
        for id in ids {
            exchange(&a, account, session, id).await;
        }
    }
    assert_eq!(held(), 2, "both histories are long enough to be kept");

    assert!(
        a.delete_session(account.id, deleted.into(), time::now_ms())
            .await
            .unwrap()
    );
    assert_eq!(held(), 1);
    assert!(matches!(
        a.undo_last_exchange(account.id, undone.into())
            .await
            .unwrap(),
        Undo::Removed(_)
    ));
    assert_eq!(held(), 0);
    assert_eq!(pg.pool_use().histories.bytes, 0);
}
