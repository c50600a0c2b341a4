//! PostgreSQL storage (`convo serve --db postgres://…`): what the SQLite store stores, in one
//! database that any number of replicas share. Each operation is one transaction on a pooled
//! connection (`deadpool-postgres`, statements prepared once per connection). The counters
//! that quotas read are rows changed in place under their row lock (`usage_totals`,
//! `accounts.live_sessions`, kept by triggers like SQLite's), and each limit is checked under
//! that lock (the request count by the statement that increments it), so limits are exact
//! across replicas; a session's row is locked (`FOR UPDATE`) by every write to the session.

pub mod leases;
mod migrations;
pub mod relay;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::Notify;
use tokio_postgres::NoTls;

use super::interface::{Storage, TurnAdmission};
use super::rows::{
    IDEMPOTENCY_TTL_MS as TTL_MS, MessageRow, MetricCounts, Reply, RequestCount, SessionRow,
    UsageCounts, hash_key,
};
use crate::error::StoreError;
use convo_core::Account;
use convo_core::Tier;
use convo_core::admission::{self, Admission, SessionFacts, TurnFacts};
use convo_core::{HistoryEntry, Recorded, SessionStatus, TurnRefusal, TurnStart, TurnStarted};
use convo_wire::Role;

/// Connections per replica.
const POOL_SIZE: usize = 16;
/// Deletions within this long of the first are vacuumed together.
pub const VACUUM_DELAY: Duration = Duration::from_secs(1);
/// The tables a deletion leaves dead tuples with content in: the messages, the remembered
/// responses, and the `Idempotency-Key` values of turns (a turn's row names its key, and is
/// deleted when the turn ends or its session is deleted).
pub const VACUUMED_TABLES: &str = "messages, idempotency_keys, turns";

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// This process's id in `replicas` and `turns` (leases.rs).
    replica: Arc<str>,
    config: Arc<tokio_postgres::Config>,
    /// Wakes the vacuum task after a deletion.
    vacuum: Arc<Notify>,
    vacuum_task: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

/// A writer's transaction on a pooled connection.
type Tx<'a> = deadpool_postgres::Transaction<'a>;

impl PgStore {
    /// Connects, migrates (once across replicas) and starts the vacuum task.
    pub async fn open(url: &str) -> Result<PgStore, StoreError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Config(format!("not a PostgreSQL URL ({e})")))?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        let mut client = pool.get().await?;
        migrations::migrate(&mut client).await?;
        drop(client);
        let vacuum = Arc::new(Notify::new());
        let task = tokio::spawn(vacuum_after_deletes(pool.clone(), vacuum.clone()));
        let replica: Arc<str> = crate::ids::random_alnum(16).into();
        leases::register(&pool, &replica).await?;
        Ok(PgStore {
            pool,
            replica,
            config: Arc::new(config),
            vacuum,
            vacuum_task: Arc::new(Mutex::new(Some(task))),
        })
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The connection settings (the stream relay opens its own connections).
    pub fn config(&self) -> tokio_postgres::Config {
        (*self.config).clone()
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}

/// Vacuums the tables deletions leave dead tuples in, at most once per `VACUUM_DELAY`, so
/// that deleted content leaves the tables' pages soon (docs/service.md, Deletion on
/// PostgreSQL). `VACUUM` cannot run inside a transaction, so it has a connection to itself.
async fn vacuum_after_deletes(pool: Pool, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        tokio::time::sleep(VACUUM_DELAY).await;
        let result = match pool.get().await {
            Ok(client) => client
                .batch_execute(&format!("VACUUM {VACUUMED_TABLES}"))
                .await
                .map_err(StoreError::from),
            Err(e) => Err(StoreError::from(e)),
        };
        match result {
            Ok(()) => tracing::debug!("vacuumed after deletions"),
            Err(e) => tracing::warn!(error = %e, "vacuum after deletions failed"),
        }
    }
}

fn limit(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Counts a request unless the limit is reached: one statement, atomic under the row lock
/// of the account's totals, so concurrent requests on any replica never pass the limit.
async fn admit(tx: &Tx<'_>, request: &RequestCount) -> Result<bool, StoreError> {
    let account = request.account();
    let stmt = tx
        .prepare_cached(
            "INSERT INTO usage_totals (account_id, period_start, requests) VALUES ($1, $2, 1)
             ON CONFLICT (account_id, period_start) DO UPDATE
             SET requests = usage_totals.requests + 1 WHERE usage_totals.requests < $3
             RETURNING requests",
        )
        .await?;
    let row = tx
        .query_opt(
            &stmt,
            &[
                &account.id,
                &request.period_start_ms(),
                &limit(account.tier.limits().requests),
            ],
        )
        .await?;
    Ok(row.is_some())
}

/// The session's state, locking its row for the rest of the transaction.
async fn lock_session(
    tx: &Tx<'_>,
    account_id: i64,
    session_id: &str,
) -> Result<SessionStatus, StoreError> {
    let stmt = tx
        .prepare_cached("SELECT account_id, deleted_at FROM sessions WHERE id = $1 FOR UPDATE")
        .await?;
    let row = tx.query_opt(&stmt, &[&session_id]).await?;
    Ok(status_of(
        row.map(|r| (r.get::<_, i64>(0), r.get::<_, Option<i64>>(1))),
        account_id,
    ))
}

fn status_of(row: Option<(i64, Option<i64>)>, account_id: i64) -> SessionStatus {
    match row {
        None => SessionStatus::Unused,
        Some((owner, None)) if owner == account_id => SessionStatus::Live,
        Some(_) => SessionStatus::Gone,
    }
}

async fn status(
    c: &impl GenericClient,
    account_id: i64,
    session_id: &str,
) -> Result<SessionStatus, StoreError> {
    let stmt = c
        .prepare_cached("SELECT account_id, deleted_at FROM sessions WHERE id = $1")
        .await?;
    let row = c.query_opt(&stmt, &[&session_id]).await?;
    Ok(status_of(
        row.map(|r| (r.get::<_, i64>(0), r.get::<_, Option<i64>>(1))),
        account_id,
    ))
}

fn role(s: &str) -> Result<Role, StoreError> {
    s.parse::<Role>().map_err(StoreError::Corrupt)
}

async fn history(tx: &Tx<'_>, session_id: &str) -> Result<Vec<HistoryEntry>, StoreError> {
    let stmt = tx
        .prepare_cached(
            "SELECT role, content, tokens FROM messages WHERE session_id = $1 ORDER BY pk",
        )
        .await?;
    let rows = tx.query(&stmt, &[&session_id]).await?;
    rows.iter()
        .map(|r| {
            Ok(HistoryEntry {
                role: role(r.get(0))?,
                content: r.get(1),
                tokens: r.get::<_, i64>(2).max(0) as u64,
            })
        })
        .collect()
}

/// The live record of `key`, forgetting it first if it is older than 24 h.
async fn idempotent_lookup(
    tx: &Tx<'_>,
    account_id: i64,
    session_id: &str,
    key: &str,
    now_ms: i64,
) -> Result<Option<Recorded>, StoreError> {
    let expire = tx
        .prepare_cached(
            "DELETE FROM idempotency_keys
             WHERE account_id = $1 AND session_id = $2 AND key = $3 AND created_at <= $4",
        )
        .await?;
    tx.execute(
        &expire,
        &[&account_id, &session_id, &key, &(now_ms - TTL_MS)],
    )
    .await?;
    let stmt = tx
        .prepare_cached(
            "SELECT status, body FROM idempotency_keys
             WHERE account_id = $1 AND session_id = $2 AND key = $3",
        )
        .await?;
    let row = tx
        .query_opt(&stmt, &[&account_id, &session_id, &key])
        .await?;
    Ok(row.map(|r| Recorded {
        status: r.get::<_, i32>(0) as u16,
        body: r.get(1),
    }))
}

async fn idempotent_record(
    tx: &Tx<'_>,
    account_id: i64,
    session_id: &str,
    key: &str,
    response: &Recorded,
    now_ms: i64,
) -> Result<(), StoreError> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (account_id, session_id, key)
             DO UPDATE SET status = excluded.status, body = excluded.body, created_at = excluded.created_at",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &account_id,
            &session_id,
            &key,
            &i32::from(response.status),
            &response.body,
            &now_ms,
        ],
    )
    .await?;
    Ok(())
}

/// A message's row. Its ledger row is written by `log_message`, last in the transaction.
#[allow(clippy::too_many_arguments)]
async fn insert_message(
    tx: &Tx<'_>,
    session_id: &str,
    id: &str,
    role: Role,
    content: &str,
    tokens: u64,
    metadata: Option<&str>,
    created_at: i64,
) -> Result<(), StoreError> {
    let message = tx
        .prepare_cached(
            "INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    tx.execute(
        &message,
        &[
            &id,
            &session_id,
            &role.as_str(),
            &content,
            &(tokens as i64),
            &metadata,
            &created_at,
        ],
    )
    .await?;
    Ok(())
}

/// A message's ledger row; its trigger adds the tokens to the month's total, which locks the
/// account's `usage_totals` row, one row shared by all of the account's requests. So this
/// runs last before the commit: every statement after it would hold that lock one more round
/// trip (with it first, 32 connections of one account waited on that row, 300 POSTs/s).
async fn log_message(
    tx: &Tx<'_>,
    account_id: i64,
    session_id: &str,
    id: &str,
    role: Role,
    tokens: u64,
    created_at: i64,
) -> Result<(), StoreError> {
    let log = tx
        .prepare_cached(
            "INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?;
    tx.execute(
        &log,
        &[
            &id,
            &account_id,
            &session_id,
            &role.as_str(),
            &(tokens as i64),
            &created_at,
        ],
    )
    .await?;
    Ok(())
}

/// Why a turn's transaction must run again.
enum Again {
    /// Another replica created the session first: run again at once (and find it).
    Raced,
    /// A turn of the session is in flight (on another replica): wait for it to end.
    Busy,
}

/// The turn's checks and writes after its request was counted, inside the savepoint `tx`.
async fn start_turn_in(
    tx: &Tx<'_>,
    t: &TurnStart,
    replica: &str,
) -> Result<Result<Result<TurnStarted, TurnRefusal>, Again>, StoreError> {
    let account_id = t.account.id;
    let status = lock_session(tx, account_id, &t.session_id).await?;
    if status == SessionStatus::Live {
        // Turns of a session are serialized across replicas: the session's row is locked,
        // so no turn can start or end between this look and the commit.
        let busy = tx
            .prepare_cached("SELECT 1 FROM turns WHERE session_id = $1")
            .await?;
        if tx.query_opt(&busy, &[&t.session_id]).await?.is_some() {
            return Ok(Err(Again::Busy));
        }
    }
    let mut history = Vec::new();
    let session = match status {
        SessionStatus::Gone => SessionFacts::Gone,
        SessionStatus::Unused => {
            // The account's row stays locked until the commit, so new sessions of an account
            // are checked one after the other on every replica: exact (the trigger of
            // `sessions` counts the new one).
            let slots = tx
                .prepare_cached("SELECT live_sessions FROM accounts WHERE id = $1 FOR UPDATE")
                .await?;
            let live: i64 = tx
                .query_opt(&slots, &[&account_id])
                .await?
                .map_or(0, |r| r.get(0));
            SessionFacts::New {
                live_sessions: live.max(0) as u64,
            }
        }
        SessionStatus::Live => {
            history = self::history(tx, &t.session_id).await?;
            SessionFacts::Existing {
                stored_tokens: history.iter().map(|m| m.tokens).sum(),
            }
        }
    };
    // Records exist only for live sessions (deleting a session deletes them).
    let replay = match (&t.idempotency_key, status) {
        (Some(key), SessionStatus::Live) => {
            idempotent_lookup(tx, account_id, &t.session_id, key, t.now_ms).await?
        }
        _ => None,
    };
    let tokens = tx
        .prepare_cached(
            "SELECT tokens FROM usage_totals WHERE account_id = $1 AND period_start = $2",
        )
        .await?;
    let tokens_used = tx
        .query_opt(&tokens, &[&account_id, &t.period_start_ms])
        .await?
        .map_or(0, |r| r.get::<_, i64>(0));
    let facts = TurnFacts {
        session,
        replay,
        tokens_used: tokens_used.max(0) as u64,
        limits: t.account.tier.limits(),
        message_tokens: t.message.tokens,
        max_context_tokens: t.max_context_tokens,
    };
    let (create_session, current) = match admission::admit(facts) {
        Admission::Refused(refusal) => return Ok(Ok(Err(refusal))),
        Admission::Replay(recorded) => return Ok(Ok(Ok(TurnStarted::Replay(recorded)))),
        Admission::Admitted {
            create_session,
            context_tokens,
        } => (create_session, context_tokens),
    };
    if create_session {
        let create = tx
            .prepare_cached(
                "INSERT INTO sessions (id, account_id, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO NOTHING",
            )
            .await?;
        if tx
            .execute(&create, &[&t.session_id, &account_id, &t.now_ms])
            .await?
            == 0
        {
            return Ok(Err(Again::Raced));
        }
    }
    let m = &t.message;
    insert_message(
        tx,
        &t.session_id,
        &m.id,
        m.role,
        &m.content,
        m.tokens,
        m.metadata.as_deref(),
        t.now_ms,
    )
    .await?;
    if let (Some(key), Some(resp)) = (&t.idempotency_key, &t.accepted_response) {
        idempotent_record(tx, account_id, &t.session_id, key, resp, t.now_ms).await?;
    }
    // The turn is in flight until its reply is stored or it is rolled back, on this replica's
    // lease (leases.rs).
    let turn = tx
        .prepare_cached(
            "INSERT INTO turns (session_id, replica, account_id, reply_id, user_message_id, created_at, idempotency_key)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .await?;
    tx.execute(
        &turn,
        &[
            &t.session_id,
            &replica,
            &account_id,
            &t.reply_id,
            &m.id,
            &t.now_ms,
            &t.idempotency_key,
        ],
    )
    .await?;
    history.push(HistoryEntry {
        role: m.role,
        content: m.content.clone(),
        tokens: m.tokens,
    });
    Ok(Ok(Ok(TurnStarted::Ready {
        history,
        context_tokens: current,
    })))
}

impl Storage for PgStore {
    async fn ensure_keys(
        &self,
        keys: Vec<(String, Tier)>,
        now_ms: i64,
    ) -> Result<HashMap<String, Account>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Replicas starting together with the same keys make each account once.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&migrations::SCHEMA_LOCK],
        )
        .await?;
        let mut accounts = HashMap::new();
        for (key, tier) in &keys {
            let hash = hash_key(key);
            let existing = tx
                .query_opt(
                    "SELECT account_id FROM api_keys WHERE key_hash = $1",
                    &[&hash],
                )
                .await?;
            let id: i64 = match existing {
                Some(row) => {
                    let id = row.get(0);
                    tx.execute(
                        "UPDATE accounts SET tier = $1 WHERE id = $2",
                        &[&tier.as_str(), &id],
                    )
                    .await?;
                    id
                }
                None => {
                    let id = tx
                        .query_one(
                            "INSERT INTO accounts (tier, created_at) VALUES ($1, $2) RETURNING id",
                            &[&tier.as_str(), &now_ms],
                        )
                        .await?
                        .get(0);
                    let suffix = convo_wire::api_key::key_hint(key);
                    tx.execute(
                        "INSERT INTO api_keys (key_hash, key_suffix, account_id, created_at)
                         VALUES ($1, $2, $3, $4)",
                        &[&hash, &suffix, &id, &now_ms],
                    )
                    .await?;
                    id
                }
            };
            accounts.insert(hash, Account { id, tier: *tier });
        }
        tx.commit().await?;
        Ok(accounts)
    }

    async fn count_request(&self, request: RequestCount) -> Result<Option<()>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let admitted = admit(&tx, &request).await?;
        tx.commit().await?;
        Ok(admitted.then_some(()))
    }

    async fn start_turn(
        &self,
        request: RequestCount,
        turn: TurnStart,
    ) -> Result<TurnAdmission, StoreError> {
        // A session first used by two replicas at once: the loser runs again and finds it.
        // A session with a turn in flight elsewhere: wait (without a connection) and run again;
        // nothing of an attempt that waits is kept, not even its request count.
        let (mut races, mut pause) = (0, Duration::from_millis(2));
        loop {
            let mut client = self.client().await?;
            let mut tx = client.transaction().await?;
            let turn_tx = tx.savepoint("turn").await?;
            let started = start_turn_in(&turn_tx, &turn, &self.replica).await?;
            match started {
                Err(again) => {
                    turn_tx.rollback().await?;
                    tx.rollback().await?;
                    drop(client);
                    match again {
                        Again::Raced if races < 8 => races += 1,
                        Again::Raced => {
                            return Err(StoreError::Commit(
                                "the session kept being created concurrently".into(),
                            ));
                        }
                        Again::Busy => {
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(Duration::from_millis(50));
                        }
                    }
                    continue;
                }
                Ok(Ok(started)) => {
                    turn_tx.commit().await?;
                    // The request is counted, and the user message's tokens added, last
                    // (`log_message`): over the limit, everything goes back as if never tried.
                    if !admit(&tx, &request).await? {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                    if let TurnStarted::Ready { .. } = started {
                        let m = &turn.message;
                        log_message(
                            &tx,
                            turn.account.id,
                            &turn.session_id,
                            &m.id,
                            m.role,
                            m.tokens,
                            turn.now_ms,
                        )
                        .await?;
                    }
                    tx.commit().await?;
                    return Ok(Some(Ok(started)));
                }
                Ok(Err(refusal)) => {
                    // The refused turn writes nothing; its request still counts.
                    turn_tx.rollback().await?;
                    if !admit(&tx, &request).await? {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                    tx.commit().await?;
                    return Ok(Some(Err(refusal)));
                }
            }
        }
    }

    async fn complete_turn(
        &self,
        account_id: i64,
        session_id: String,
        reply: Reply,
        idempotent: Option<(String, Recorded)>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if lock_session(&tx, account_id, &session_id).await? != SessionStatus::Live {
            tx.rollback().await?;
            return Ok(false);
        }
        let ended = tx
            .prepare_cached("DELETE FROM turns WHERE session_id = $1 AND reply_id = $2")
            .await?;
        if tx.execute(&ended, &[&session_id, &reply.id]).await? == 0 {
            // Another replica found this one's lease expired and rolled the turn back.
            tx.rollback().await?;
            return Err(StoreError::Commit(
                "the turn was rolled back by another replica (its lease expired)".into(),
            ));
        }
        insert_message(
            &tx,
            &session_id,
            &reply.id,
            Role::Assistant,
            &reply.content,
            reply.tokens,
            None,
            reply.created_at_ms,
        )
        .await?;
        if let Some((key, resp)) = &idempotent {
            idempotent_record(&tx, account_id, &session_id, key, resp, now_ms).await?;
        }
        log_message(
            &tx,
            account_id,
            &session_id,
            &reply.id,
            Role::Assistant,
            reply.tokens,
            reply.created_at_ms,
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn roll_back_turn(
        &self,
        account_id: i64,
        session_id: String,
        user_message_id: String,
        created_at_ms: i64,
        idempotency_key: Option<String>,
    ) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "DELETE FROM turns WHERE session_id = $1 AND user_message_id = $2",
            &[&session_id, &user_message_id],
        )
        .await?;
        tx.execute(
            "DELETE FROM messages WHERE session_id = $1 AND id = $2",
            &[&session_id, &user_message_id],
        )
        .await?;
        // The trigger takes the tokens back out of the month's total.
        tx.execute(
            "DELETE FROM message_log
             WHERE account_id = $1 AND created_at = $2 AND message_id = $3",
            &[&account_id, &created_at_ms, &user_message_id],
        )
        .await?;
        if let Some(key) = &idempotency_key {
            tx.execute(
                "DELETE FROM idempotency_keys WHERE account_id = $1 AND session_id = $2 AND key = $3",
                &[&account_id, &session_id, key],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn delete_session(
        &self,
        account_id: i64,
        session_id: String,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if lock_session(&tx, account_id, &session_id).await? != SessionStatus::Live {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.execute("DELETE FROM turns WHERE session_id = $1", &[&session_id])
            .await?;
        tx.execute("DELETE FROM messages WHERE session_id = $1", &[&session_id])
            .await?;
        tx.execute(
            "DELETE FROM idempotency_keys WHERE session_id = $1",
            &[&session_id],
        )
        .await?;
        tx.execute(
            "UPDATE sessions SET deleted_at = $1 WHERE id = $2",
            &[&now_ms, &session_id],
        )
        .await?;
        tx.commit().await?;
        self.vacuum.notify_one();
        Ok(true)
    }

    async fn session_status(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<SessionStatus, StoreError> {
        let client = self.client().await?;
        status(&client, account_id, &session_id).await
    }

    async fn list_sessions(&self, account_id: i64) -> Result<Vec<SessionRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT s.id, s.created_at, COALESCE(MAX(m.created_at), s.created_at),
                        COUNT(m.pk), COALESCE(SUM(m.tokens), 0)::BIGINT
                 FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
                 WHERE s.account_id = $1 AND s.deleted_at IS NULL
                 GROUP BY s.id ORDER BY 3 DESC, s.id",
                &[&account_id],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| SessionRow {
                id: r.get(0),
                created_at_ms: r.get(1),
                last_activity_ms: r.get(2),
                messages: r.get::<_, i64>(3).max(0) as u64,
                tokens: r.get::<_, i64>(4).max(0) as u64,
            })
            .collect())
    }

    async fn session_messages(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<Vec<MessageRow>>, StoreError> {
        let mut client = self.client().await?;
        // One snapshot for the status and the rows.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        if status(&tx, account_id, &session_id).await? != SessionStatus::Live {
            return Ok(None);
        }
        let rows = tx
            .query(
                "SELECT id, role, content, tokens, metadata, created_at FROM messages
                 WHERE session_id = $1 ORDER BY pk",
                &[&session_id],
            )
            .await?;
        let messages = rows
            .iter()
            .map(|r| {
                Ok(MessageRow {
                    id: r.get(0),
                    role: role(r.get(1))?,
                    content: r.get(2),
                    tokens: r.get::<_, i64>(3).max(0) as u64,
                    metadata: r.get(4),
                    created_at_ms: r.get(5),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        tx.commit().await?;
        Ok(Some(messages))
    }

    async fn usage_counts(
        &self,
        account_id: i64,
        period_start_ms: i64,
    ) -> Result<UsageCounts, StoreError> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "SELECT COALESCE((SELECT requests FROM usage_totals WHERE account_id = $1 AND period_start = $2), 0),
                        COALESCE((SELECT tokens FROM usage_totals WHERE account_id = $1 AND period_start = $2), 0),
                        COALESCE((SELECT live_sessions FROM accounts WHERE id = $1), 0)",
            )
            .await?;
        let row = client
            .query_one(&stmt, &[&account_id, &period_start_ms])
            .await?;
        Ok(UsageCounts {
            requests: row.get::<_, i64>(0).max(0) as u64,
            tokens: row.get::<_, i64>(1).max(0) as u64,
            sessions: row.get::<_, i64>(2).max(0) as u64,
        })
    }

    async fn metric_counts(
        &self,
        account_id: i64,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<MetricCounts, StoreError> {
        let mut client = self.client().await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let range: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&account_id, &start_ms, &end_ms];
        let mut m = MetricCounts {
            sessions_total: tx
                .query_one(
                    "SELECT COUNT(*) FROM sessions
                     WHERE account_id = $1 AND created_at >= $2 AND created_at < $3",
                    &range,
                )
                .await?
                .get::<_, i64>(0) as u64,
            ..MetricCounts::default()
        };
        let row = tx
            .query_one(
                "SELECT COUNT(*), COALESCE(SUM(last - first), 0)::BIGINT FROM (
                    SELECT MIN(created_at) AS first, MAX(created_at) AS last FROM message_log
                    WHERE account_id = $1 AND created_at >= $2 AND created_at < $3
                    GROUP BY session_id) per_session",
                &range,
            )
            .await?;
        m.sessions_active = row.get::<_, i64>(0) as u64;
        m.duration_ms_sum = row.get(1);
        let rows = tx
            .query(
                "SELECT role, COUNT(*), COALESCE(SUM(tokens), 0)::BIGINT FROM message_log
                 WHERE account_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY role",
                &range,
            )
            .await?;
        tx.commit().await?;
        for r in rows {
            let (count, tokens) = (r.get::<_, i64>(1) as u64, r.get::<_, i64>(2) as u64);
            m.messages_total += count;
            match r.get::<_, &str>(0) {
                "user" => {
                    m.user_messages += count;
                    m.prompt_tokens += tokens;
                }
                "system" => {
                    m.system_messages += count;
                    m.prompt_tokens += tokens;
                }
                "assistant" => {
                    m.assistant_messages += count;
                    m.completion_tokens += tokens;
                }
                other => {
                    return Err(StoreError::Corrupt(format!(
                        "unknown role {other} in message_log"
                    )));
                }
            }
        }
        Ok(m)
    }

    async fn ready(&self, within: Duration) -> Result<(), String> {
        let late = || format!("PostgreSQL did not answer within {within:?}");
        let client = tokio::time::timeout(within, self.client())
            .await
            .map_err(|_| late())?
            .map_err(|e| e.to_string())?;
        match tokio::time::timeout(within, client.simple_query("SELECT 1")).await {
            Ok(answer) => answer
                .map(drop)
                .map_err(|e| StoreError::from(e).to_string()),
            Err(_) => {
                // Held with its query unanswered: not a connection to hand out again.
                drop(deadpool_postgres::Object::take(client));
                Err(late())
            }
        }
    }

    async fn close(&self) -> Result<(), StoreError> {
        let task = self
            .vacuum_task
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(task) = task {
            task.abort();
        }
        self.pool.close();
        Ok(())
    }
}
