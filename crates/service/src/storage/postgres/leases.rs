//! Leases of turns in flight. Every replica has a row in `replicas` whose `heartbeat_at` it
//! renews every `HEARTBEAT`; each turn in flight is a row of `turns` naming its replica. A
//! replica that stops (kill -9, a lost host) stops renewing: after `EXPIRY` every other
//! replica may take its turns back — the user message, its ledger row and idempotency record
//! go as in any failed turn, in one transaction — and sends an `error` event for each to the
//! listeners of every replica. The session then takes messages again. With a heartbeat every
//! 5 s, an expiry of 15 s and a sweep every 5 s, a dead replica's turns are failed within
//! 20 s (plus one statement).

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::task::JoinHandle;

use super::PgStore;
use crate::error::StoreError;
use crate::stream::StreamHub;
use crate::time;
use convo_wire::{ErrorBody, StreamEvent};

/// How often a replica renews its lease and sweeps for expired ones.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A replica silent this long has stopped; its turns are rolled back.
pub const EXPIRY: Duration = Duration::from_secs(15);
/// Rows of replicas silent this long are forgotten.
const FORGET: Duration = Duration::from_secs(24 * 3600);

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

/// Renews this replica's lease and fails the turns of expired ones, until aborted.
pub fn start(store: PgStore, hub: Arc<StreamHub>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = register(&store.pool, &store.replica).await {
                tracing::warn!(error = %e, "the replica's heartbeat failed");
                continue;
            }
            match sweep(&store.pool).await {
                Ok(failed) => {
                    for turn in failed {
                        tracing::warn!(session = %turn.session_id, reply = %turn.reply_id,
                            "the replica generating this reply stopped; turn rolled back");
                        hub.finish(
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

/// A turn taken back from a replica that stopped.
#[derive(Debug)]
pub struct FailedTurn {
    pub session_id: String,
    pub reply_id: String,
}

/// Rolls back, in one transaction, every turn whose replica's lease expired (or whose replica
/// has no lease at all).
pub async fn sweep(pool: &Pool) -> Result<Vec<FailedTurn>, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let now = time::now_ms();
    let expired = now - EXPIRY.as_millis() as i64;
    let rows = tx
        .query(
            "DELETE FROM turns t WHERE NOT EXISTS (
                 SELECT 1 FROM replicas r WHERE r.id = t.replica AND r.heartbeat_at > $1)
             RETURNING session_id, account_id, reply_id, user_message_id, created_at, idempotency_key",
            &[&expired],
        )
        .await?;
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
            session_id,
            reply_id: row.get(2),
        });
    }
    tx.execute(
        "DELETE FROM replicas WHERE heartbeat_at < $1",
        &[&(now - FORGET.as_millis() as i64)],
    )
    .await?;
    tx.commit().await?;
    Ok(failed)
}
