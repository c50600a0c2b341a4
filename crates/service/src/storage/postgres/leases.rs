//! Leases of turns in flight. Every replica has a row in `replicas` whose `heartbeat_at` it
//! renews every `heartbeat()`; each turn in flight is a row of `turns` naming its replica. A
//! replica that stops (kill -9, a lost host) stops renewing: after `expiry()` any other
//! replica takes its turns back — the user message, its ledger row and idempotency record
//! go as in any failed turn — removes its lease, in one transaction, and sends an `error`
//! event for each turn to the listeners of every replica. The session then takes messages
//! again. With a heartbeat and a sweep every 5 s and an expiry of 15 s, a dead replica's
//! turns are failed, and its lease removed, within 20 s (plus one statement).
//!
//! A live replica whose turn ended without its end reaching the database (the rollback of a
//! failed reply, or the store of a reply, failed: the database out of reach) would keep that
//! turn's row, and so its session busy, for as long as it renews its lease. It keeps such
//! turns (`EndedTurn`) and rolls them back itself at each heartbeat that reaches the database,
//! each only if its row is still there.
//!
//! Every turn rolled back here, by a sweep or late, goes to `rolled_back` (the sender given
//! to `start`): the service tells the account's stream of the session's change and the
//! month's usage (`account_events::tell`), as for a reply that fails while it is answered.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use deadpool_postgres::{Pool, Transaction as Tx};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::Row;

use super::PgStore;
use crate::error::StoreError;
use crate::storage::deletions::{Deletions, Found};
use crate::stream::StreamHub;
use crate::time;
use convo_wire::{ErrorBody, StreamEvent};

/// A replica silent this long has stopped: its turns are rolled back and its lease removed.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(15);
/// Sets the expiry in milliseconds (at least 300), for tests that cannot wait 15 s.
pub const EXPIRY_ENV: &str = "CONVO_SERVE_LEASE_MS";

/// The lease period: `CONVO_SERVE_LEASE_MS` when set, else `DEFAULT_EXPIRY`.
pub fn expiry() -> Duration {
    static EXPIRY: OnceLock<Duration> = OnceLock::new();
    *EXPIRY.get_or_init(|| match std::env::var(EXPIRY_ENV) {
        Err(_) => DEFAULT_EXPIRY,
        Ok(text) => match text.parse::<u64>() {
            Ok(ms) if ms >= 300 => Duration::from_millis(ms),
            _ => {
                tracing::error!(value = %text, default_ms = DEFAULT_EXPIRY.as_millis() as u64,
                    "{EXPIRY_ENV} is not a number of milliseconds of at least 300; the default is used");
                DEFAULT_EXPIRY
            }
        },
    })
}

/// How often a replica renews its lease and sweeps for expired ones: a third of the expiry.
pub fn heartbeat() -> Duration {
    expiry() / 3
}

/// Registers (or renews) the replica's lease.
pub async fn register(pool: &Pool, replica: &str) -> Result<(), StoreError> {
    let client = pool.get().await?;
    client
        .execute(
            "INSERT INTO replicas (id, heartbeat_at) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            &[&replica, &time::now_ms()],
        )
        .await?;
    Ok(())
}

/// Renews this replica's lease, fails the turns of expired ones, and forgets what it keeps of
/// sessions deleted, or of exchanges undone, by any replica (a look of `deletions`,
/// `deletions.rs`: `deleted_since` and `undone_since` forget the histories, then `deleted`
/// gets what the look found, for the engine's state) and the
/// histories it has not used for a while (`PgStore::drop_idle_histories`), until aborted.
/// Each turn it rolls back (an expired replica's, or one of this replica's whose end had not
/// reached the database) is sent to `rolled_back`.
pub(crate) fn start(
    store: PgStore,
    hub: Arc<StreamHub>,
    rolled_back: mpsc::UnboundedSender<FailedTurn>,
    deleted: mpsc::UnboundedSender<Found>,
    deletions: Arc<tokio::sync::Mutex<Deletions>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(heartbeat());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            store.drop_idle_histories();
            if let Err(e) = register(&store.pool, &store.replica).await {
                tracing::warn!(error = %e, "the replica's heartbeat failed");
                continue;
            }
            let found = deletions.lock().await.look(&store).await;
            match found {
                Ok(new) => {
                    if !new.is_empty() {
                        let _ = deleted.send(new);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the look for sessions deleted or undone elsewhere failed")
                }
            }
            for turn in store.retry_rollbacks().await {
                let _ = rolled_back.send(turn);
            }
            match sweep(&store.pool).await {
                Ok(swept) => {
                    for replica in &swept.removed {
                        tracing::warn!(%replica, "a replica's lease expired; its lease was removed");
                    }
                    hub.keep_watchers(&swept.live);
                    for turn in swept.failed {
                        tracing::warn!(session = %turn.session_id, reply = %turn.reply_id,
                            "the replica generating this reply stopped; turn rolled back");
                        hub.finish_everywhere(
                            &turn.session_id,
                            &turn.reply_id,
                            StreamEvent::Error {
                                session_id: turn.session_id.clone(),
                                message_id: turn.reply_id.clone(),
                                error: ErrorBody::new(
                                    "engine_error",
                                    "the service instance generating this reply stopped; send the message again",
                                ),
                            },
                        );
                        let _ = rolled_back.send(turn);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "the sweep for expired turns failed"),
            }
        }
    })
}

/// Removes this replica's lease at a clean stop (its turns have ended by then).
pub async fn unregister(store: &PgStore) {
    if let Ok(client) = store.pool.get().await {
        let _ = client
            .execute("DELETE FROM replicas WHERE id = $1", &[&&*store.replica])
            .await;
    }
}

/// A turn rolled back: taken back from a replica that stopped, or one of this replica's whose
/// end had not reached the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedTurn {
    pub account_id: i64,
    pub session_id: String,
    pub reply_id: String,
}

/// What a sweep did.
#[derive(Debug, Default)]
pub struct Swept {
    pub failed: Vec<FailedTurn>,
    /// Replicas whose lease expired, removed.
    pub removed: Vec<String>,
    /// The replicas alive after the sweep.
    pub live: HashSet<String>,
}

/// What `DELETE FROM turns … RETURNING` names of each turn it took out, for `roll_back`.
pub(super) const TAKEN_TURN: &str =
    "RETURNING session_id, account_id, reply_id, user_message_id, created_at, idempotency_key";

/// Undoes what the turns taken out of `turns` (rows of [`TAKEN_TURN`]) wrote, in the caller's
/// transaction: each one's user message, its ledger row (whose trigger takes the tokens back
/// out of the month's total) and its idempotency record. Every rollback of a turn on
/// PostgreSQL comes here: a sweep's, a late one's, and a failed reply's (`roll_back_turn`).
pub(super) async fn roll_back(tx: &Tx<'_>, rows: Vec<Row>) -> Result<Vec<FailedTurn>, StoreError> {
    let mut failed = Vec::with_capacity(rows.len());
    for row in rows {
        let session_id: String = row.get(0);
        let account_id: i64 = row.get(1);
        let user_message_id: String = row.get(3);
        let created_at: i64 = row.get(4);
        let key: Option<String> = row.get(5);
        tx.execute(
            "DELETE FROM messages WHERE session_id = $1 AND id = $2",
            &[&session_id, &user_message_id],
        )
        .await?;
        tx.execute(
            "DELETE FROM message_log WHERE account_id = $1 AND created_at = $2 AND message_id = $3",
            &[&account_id, &created_at, &user_message_id],
        )
        .await?;
        if let Some(key) = key {
            tx.execute(
                "DELETE FROM idempotency_keys WHERE account_id = $1 AND session_id = $2 AND key = $3",
                &[&account_id, &session_id, &key],
            )
            .await?;
        }
        failed.push(FailedTurn {
            account_id,
            session_id,
            reply_id: row.get(2),
        });
    }
    Ok(failed)
}

/// A turn of this replica that ended here without its end reaching the database: its reply
/// failed and the rollback did not commit, or its reply's store failed (the commit's answer
/// lost, or nothing committed). Its row in `turns` may still be there, which keeps the
/// session busy while this replica's lease is renewed, so the replica rolls it back itself
/// (`PgStore::retry_rollbacks`, at each heartbeat).
#[derive(Debug, Clone)]
pub struct EndedTurn {
    pub session_id: String,
    /// The id of the turn's user message or of its reply.
    pub message_id: String,
}

/// Turns of this replica whose end did not reach the database (`PgStore::unended`), rolled
/// back at each heartbeat until that commits.
pub(super) type Unended = Arc<Mutex<Vec<EndedTurn>>>;

/// Keeps `turn` for the next heartbeat's rollback.
pub(super) fn keep_unended(unended: &Unended, turn: EndedTurn) {
    unended
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(turn);
}

/// Rolls back this replica's turn `turn` in one transaction, if its row is still in `turns`
/// (a reply stored, or a sweep of another replica, took it out already: then nothing is
/// done). The turn rolled back, if it was.
pub async fn roll_back_own(
    pool: &Pool,
    replica: &str,
    turn: &EndedTurn,
) -> Result<Option<FailedTurn>, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let rows = tx
        .query(
            &format!(
                "DELETE FROM turns WHERE session_id = $1 AND $2 IN (user_message_id, reply_id)
                 AND replica = $3 {TAKEN_TURN}"
            ),
            &[&turn.session_id, &turn.message_id, &replica],
        )
        .await?;
    let mut rolled = roll_back(&tx, rows).await?;
    tx.commit().await?;
    Ok(rolled.pop())
}

/// In one transaction: rolls back every turn whose replica's lease expired (or whose replica
/// has no lease at all), and removes the expired leases.
pub async fn sweep(pool: &Pool) -> Result<Swept, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let now = time::now_ms();
    let expired = now - expiry().as_millis() as i64;
    let rows = tx
        .query(
            &format!(
                "DELETE FROM turns t WHERE NOT EXISTS (
                     SELECT 1 FROM replicas r WHERE r.id = t.replica AND r.heartbeat_at > $1)
                 {TAKEN_TURN}"
            ),
            &[&expired],
        )
        .await?;
    let failed = roll_back(&tx, rows).await?;
    let removed = tx
        .query(
            "DELETE FROM replicas WHERE heartbeat_at <= $1 RETURNING id",
            &[&expired],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let live = tx
        .query("SELECT id FROM replicas", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.commit().await?;
    Ok(Swept {
        failed,
        removed,
        live,
    })
}
