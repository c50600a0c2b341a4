//! PostgreSQL storage (`convo serve --db postgres://…`): what the SQLite store stores, in one
//! database that any number of replicas share. Each operation is one transaction on a pooled
//! connection (`deadpool-postgres`, statements prepared once per connection); a turn's are
//! server-side functions sent in few round trips, and the turns that arrive together are
//! written in one transaction (batch.rs, turn_batch.rs, turn.rs). Quotas read counters kept in
//! place: the month's requests and tokens in shard rows (counters.rs: the request limit exact
//! through allowances handed out under lock), `accounts.live_sessions` by a trigger like
//! SQLite's, checked under the account's row lock; a session's row is locked (`FOR UPDATE`)
//! by every write to the session.

mod admin;
mod batch;
mod counters;
mod history_cache;
pub use admin::PoolUse;
pub use batch::BatchUse;
pub use history_cache::HistoryUse;
pub mod leases;
mod migrations;
pub mod relay;
mod turn;
mod turn_batch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::Notify;
use tokio_postgres::NoTls;

use super::interface::{Storage, TurnAdmission};
use super::rows::{
    AccountPage, AccountsQuery, Fork, ForkRequest, MessageRow, MetricCounts, Reply, RequestCount,
    SUMMARY_AFTER, SessionRow, Undo, Undone, UsageCounts, hash_key,
};
use crate::error::StoreError;
use convo_core::Account;
use convo_core::Tier;
use convo_core::{Recorded, SessionStatus, TurnStart};
use convo_wire::Role;

/// Connections of a replica's shared pool (its two batch writers have one each besides).
const POOL_SIZE: usize = 16;
/// Deletions (and undos) within this long of the first are vacuumed together.
pub const VACUUM_DELAY: Duration = Duration::from_secs(1);
/// The tables a deletion leaves dead tuples with content in: the messages, the remembered
/// responses, the `Idempotency-Key` values of turns (a turn's row names its key, and is
/// deleted when the turn ends or its session is deleted), and the session's row as it was
/// before its tombstone (its title). An undo leaves its messages and the old answers of the
/// records it rewrote in the first two.
pub const VACUUMED_TABLES: &str = "messages, idempotency_keys, turns, sessions";

/// How long the server keeps a transaction of a replica's open while it waits for the
/// replica's next statement (`idle_in_transaction_session_timeout`, set on every connection).
/// A replica sends a transaction's statements back to back (between two round trips at most a
/// decision in Rust), so one that waits this long has lost its replica: a host gone from the
/// network mid-transaction, whose connection the server would otherwise keep until TCP gives
/// up (hours), with the locks of the sessions it was writing. The server ends it and the
/// other replicas get the sessions. An operator's `options=-c
/// idle_in_transaction_session_timeout=…` in the URL comes after, and wins.
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(10);

/// How long a replica's statement waits for a lock (`lock_timeout`, set on every connection;
/// the migration and the vacuum wait as long as it takes). The replicas hold their locks for a
/// few round trips, a lost replica's for `IDLE_IN_TRANSACTION` at most, which this outlasts (a
/// send that came alone waits once, and gets the lock when the server ends the lost
/// transaction; with the two equal it raced that end); a lock held longer is
/// some other client's (an operator's open transaction, a `VACUUM FULL`, an `ALTER TABLE`),
/// and the request waiting for it is answered 503 `unavailable` with `Retry-After`
/// (`StoreError::is_unavailable`) instead of holding its pooled connection until the lock
/// goes. A turn of a batch that failed so runs again alone (batch.rs): the others are written,
/// and the one on the locked row waits once more, at most twice this in all, within the
/// client's 30 s request timeout (docs/client.md); by then a lost replica's locks are gone.
/// The URL's `options` win here too.
pub const LOCK_WAIT: Duration = Duration::from_secs(12);

// A lost replica's locks go before a waiting statement gives up, and a send that waits twice
// (its batch, then alone) still answers within the client's 30 s request timeout.
const _: () =
    assert!(LOCK_WAIT.as_secs() > IDLE_IN_TRANSACTION.as_secs() && 2 * LOCK_WAIT.as_secs() < 30);

/// How long a replica's connection goes on waiting for a server that went silent (its host or
/// the network between them gone without a reset: a failover that moved the server's address,
/// a firewall or NAT that forgot the connection) before it is given up. Without a limit, a
/// statement whose answer was lost waits as long as the kernel keeps an idle connection (its
/// keepalives start after 2 hours), and a batch writer, which has one connection, holds every
/// later batch of its kind up meanwhile (the server ends its own side of a transaction after
/// `IDLE_IN_TRANSACTION`). TCP keepalives probe a connection silent for `KEEPALIVE_IDLE` every
/// `KEEPALIVE_INTERVAL`, and `KEEPALIVE_RETRIES` probes unanswered end it; bytes sent and not
/// acknowledged within `SILENT_SERVER` end it too (`TCP_USER_TIMEOUT`, Linux). A live server's
/// kernel answers the probes while its backend works or waits for a lock, so a long statement
/// is not cut short. Set on every connection of a replica (its pools' and the stream relay's)
/// unless the URL gives its own: `keepalives_idle`, `keepalives_interval`,
/// `keepalives_retries` and `tcp_user_timeout` (seconds, all four, with this driver);
/// `keepalives=0` turns the probes off. A `keepalives_idle` of exactly 7200 (the driver's
/// default) is taken as none.
pub const SILENT_SERVER: Duration = Duration::from_secs(25);
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
/// tokio-postgres's `keepalives_idle` when the URL gives none.
const DRIVER_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);

// The probes give a silent connection up when bytes sent would.
const _: () = assert!(
    KEEPALIVE_IDLE.as_secs() + KEEPALIVE_RETRIES as u64 * KEEPALIVE_INTERVAL.as_secs()
        == SILENT_SERVER.as_secs()
);

/// `config` with the limits of a replica's connections: the server-side ones
/// (`IDLE_IN_TRANSACTION`, `LOCK_WAIT`, and no JIT compilation) before the URL's own
/// `options`, and the client-side ones (`SILENT_SERVER`) where the URL gives none.
///
/// JIT: PostgreSQL compiles a statement whose estimated cost passes `jit_above_cost`, and a
/// replica's statements are short but some are estimated high (the session list's sums per
/// session, migration 22: about 1 s of compilation for 60 ms of work with 2,000 sessions,
/// docs/performance.md), so a replica turns it off; an operator's `options=-c jit=on` wins.
fn with_limits(mut config: tokio_postgres::Config) -> tokio_postgres::Config {
    let mut options = format!(
        "-c idle_in_transaction_session_timeout={} -c lock_timeout={} -c jit=off",
        IDLE_IN_TRANSACTION.as_millis(),
        LOCK_WAIT.as_millis()
    );
    if let Some(own) = config.get_options() {
        options = format!("{options} {own}");
    }
    config.options(&options);
    if config.get_keepalives_idle() == DRIVER_KEEPALIVE_IDLE {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(SILENT_SERVER);
    }
    config
}

/// Handle to the database; cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// This process's id in `replicas` and `turns` (leases.rs).
    replica: Arc<str>,
    config: Arc<tokio_postgres::Config>,
    /// Turns of this replica whose end did not reach the database, rolled back at each
    /// heartbeat until that commits (`leases::EndedTurn`).
    unended: leases::Unended,
    /// The histories of the sessions whose turns this replica started (history_cache.rs).
    history: Arc<history_cache::HistoryCache>,
    /// Turn starts and replies that arrive together, written together (batch.rs).
    starts: batch::Batcher<turn_batch::Starts>,
    completions: batch::Batcher<turn_batch::Completions>,
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

/// A pool of `size` connections to `config`'s database.
fn pool_of(config: &tokio_postgres::Config, size: usize) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        // The connection used last goes out first, so that requests keep to a few backends
        // (most likely warm in the CPU's caches). Handed out in turn (the default), each
        // batch, when the batch writers still shared this pool, ran on the backend idle
        // longest, and two replicas cost PostgreSQL 13-33 % more CPU per POST
        // (docs/perf-log.md, 6 Dec 2026, 15:24 UTC).
        .queue_mode(deadpool_postgres::QueueMode::Lifo)
        .wait_timeout(Some(Duration::from_secs(30)))
        .create_timeout(Some(Duration::from_secs(10)))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(|e| StoreError::Config(e.to_string()))
}

impl PgStore {
    /// Connects, migrates (once across replicas) and starts the vacuum task.
    pub async fn open(url: &str) -> Result<PgStore, StoreError> {
        let config = with_limits(
            url.parse()
                .map_err(|e| StoreError::Config(format!("not a PostgreSQL URL ({e})")))?,
        );
        let pool = pool_of(&config, POOL_SIZE)?;
        let mut client = pool.get().await?;
        migrations::migrate(&mut client).await?;
        drop(client);
        let vacuum = Arc::new(Notify::new());
        let task = tokio::spawn(vacuum_after_deletes(pool.clone(), vacuum.clone()));
        let replica: Arc<str> = crate::ids::random_alnum(16).into();
        leases::register(&pool, &replica).await?;
        let unended = leases::Unended::default();
        let history = Arc::new(history_cache::HistoryCache::default());
        // Each batch writer writes one batch at a time on a connection of its own: it never
        // waits for the shared pool, and its batches run on one backend, warm (with one key,
        // PostgreSQL's CPU per POST 6-24 % lower than with the writers on the shared pool;
        // docs/perf-log.md, 6 Dec 2026, 16:05 UTC).
        let starts = batch::Batcher::start(
            pool_of(&config, 1)?,
            turn_batch::Starts {
                replica: Arc::clone(&replica),
                unended: Arc::clone(&unended),
                history: Arc::clone(&history),
            },
            "starts",
        )?;
        let completions =
            batch::Batcher::start(pool_of(&config, 1)?, turn_batch::Completions, "replies")?;
        Ok(PgStore {
            pool,
            replica,
            history,
            config: Arc::new(config),
            unended,
            starts,
            completions,
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

    /// Drops the histories this replica has not used for `history_cache::HELD_FOR` (called
    /// at each heartbeat).
    pub fn drop_idle_histories(&self) {
        self.history.drop_idle(std::time::Instant::now());
    }

    /// Keeps `turn` for the next heartbeat's [`PgStore::retry_rollbacks`].
    fn keep_unended(&self, turn: leases::EndedTurn) {
        leases::keep_unended(&self.unended, turn);
    }

    /// Rolls back the turns of this replica whose end did not reach the database (each only
    /// if its row is still in `turns`); those that fail again are kept for the next call.
    /// The turns it rolled back.
    pub async fn retry_rollbacks(&self) -> Vec<leases::FailedTurn> {
        let turns = std::mem::take(
            &mut *self
                .unended
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut rolled_back = Vec::new();
        for turn in turns {
            match leases::roll_back_own(&self.pool, &self.replica, &turn).await {
                Ok(Some(failed)) => {
                    tracing::info!(session = %turn.session_id,
                        "a turn whose end had not reached the database is rolled back; the session takes messages again");
                    rolled_back.push(failed);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(session = %turn.session_id, error = %e,
                        "the retried rollback of a turn failed; retried at the next heartbeat");
                    self.keep_unended(turn);
                }
            }
        }
        rolled_back
    }
}

/// Vacuums the tables deletions and undos leave dead tuples in, at most once per
/// `VACUUM_DELAY`, so that deleted content leaves the tables' pages soon (docs/service.md,
/// Deletion on PostgreSQL). `VACUUM` cannot run inside a transaction, so it has a connection to itself.
async fn vacuum_after_deletes(pool: Pool, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        tokio::time::sleep(VACUUM_DELAY).await;
        let result = match pool.get().await {
            Ok(client) => vacuum(&client).await,
            Err(e) => Err(StoreError::from(e)),
        };
        match result {
            Ok(()) => tracing::debug!("vacuumed after deletions"),
            Err(e) => tracing::warn!(error = %e, "vacuum after deletions failed"),
        }
    }
}

/// `VACUUM` of `VACUUMED_TABLES`, waiting as long as it takes for another replica's vacuum of
/// them (whose snapshot may predate this replica's deletions): no `LOCK_WAIT`. (`VACUUM` runs
/// outside a transaction, so the setting is the session's until reset.) Before it, the
/// summaries of deleted sessions go: migration 22's trigger deletes a session's summary, but
/// a list that read the session live just before can write it again after (migration 22).
async fn vacuum(client: &deadpool_postgres::Object) -> Result<(), StoreError> {
    client
        .batch_execute(
            "DELETE FROM session_summaries u USING sessions s
             WHERE s.id = u.session_id AND s.deleted_at IS NOT NULL",
        )
        .await?;
    client.batch_execute("SET lock_timeout = 0").await?;
    let vacuumed = client
        .batch_execute(&format!("VACUUM {VACUUMED_TABLES}"))
        .await;
    client.batch_execute("RESET lock_timeout").await?;
    Ok(vacuumed?)
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

/// Makes a session's row its tombstone (`$1` the deletion's time, `$2` the session): its id,
/// account and times stay (`deletedSessionIds` names it), nothing the user gave it does (the
/// trigger of migration 21 clears its title and origin, whoever sets `deleted_at`).
const TOMBSTONE: &str = "UPDATE sessions SET deleted_at = $1 WHERE id = $2";

/// The `SessionRow`s of the live sessions of account `$1` (`$filter` narrows them, `$order`
/// orders them), each summed from its kept summary and the messages after it (migration 22):
/// a list reads each session's summary and its messages since, not every message of the
/// account. Where it read `$2` messages or more (`SUMMARY_AFTER`) it writes the summary back.
/// A summary counts while its change count is the session's (`message_changes`); one written
/// by a list that read earlier than another's does not replace it (the pair of count and last
/// message only grows).
macro_rules! session_rows {
    ($filter:literal, $order:literal) => {
        concat!(
            "WITH live AS (
                SELECT s.id, s.created_at, s.title, s.forked_from_session, s.forked_from_message,
                       COALESCE(e.changes, 0) AS changes,
                       u.last_pk, u.messages, u.tokens, u.last_at, u.first_user
                FROM sessions s
                LEFT JOIN message_changes e ON e.session_id = s.id
                LEFT JOIN session_summaries u
                       ON u.session_id = s.id AND u.changes = COALESCE(e.changes, 0)
                WHERE s.account_id = $1 AND s.deleted_at IS NULL ",
            $filter,
            "), summed AS (
                SELECT l.id, l.created_at, l.title, l.forked_from_session, l.forked_from_message,
                       l.changes, n.messages AS read,
                       COALESCE(n.last, l.last_pk, 0) AS last_pk,
                       COALESCE(l.messages, 0) + n.messages AS messages,
                       COALESCE(l.tokens, 0) + n.tokens AS tokens,
                       GREATEST(l.last_at, n.last_at) AS last_at,
                       COALESCE(l.first_user, n.first_user) AS first_user
                FROM live l CROSS JOIN LATERAL (
                    SELECT COUNT(*) AS messages, COALESCE(SUM(m.tokens), 0)::BIGINT AS tokens,
                           MAX(m.created_at) AS last_at, MAX(m.pk) AS last,
                           MIN(m.pk) FILTER (WHERE m.role = 'user') AS first_user
                    FROM messages m
                    WHERE m.session_id = l.id AND m.pk > COALESCE(l.last_pk, 0)) n
            ), kept AS (
                INSERT INTO session_summaries
                    (session_id, changes, last_pk, messages, tokens, last_at, first_user)
                SELECT id, changes, last_pk, messages, tokens, last_at, first_user
                FROM summed WHERE read >= $2
                ORDER BY id
                ON CONFLICT (session_id) DO UPDATE SET
                    changes = EXCLUDED.changes, last_pk = EXCLUDED.last_pk,
                    messages = EXCLUDED.messages, tokens = EXCLUDED.tokens,
                    last_at = EXCLUDED.last_at, first_user = EXCLUDED.first_user
                WHERE (EXCLUDED.changes, EXCLUDED.last_pk)
                    > (session_summaries.changes, session_summaries.last_pk)
            )
            SELECT id, created_at, COALESCE(last_at, created_at), messages, tokens, title,
                   (SELECT f.content FROM messages f WHERE f.pk = summed.first_user),
                   forked_from_session, forked_from_message
            FROM summed ",
            $order
        )
    };
}

fn session_row(r: &tokio_postgres::Row) -> SessionRow {
    SessionRow {
        id: r.get(0),
        created_at_ms: r.get(1),
        last_activity_ms: r.get(2),
        messages: r.get::<_, i64>(3).max(0) as u64,
        tokens: r.get::<_, i64>(4).max(0) as u64,
        title: r.get(5),
        first_user_message: r.get(6),
        forked_from: match (r.get::<_, Option<String>>(7), r.get(8)) {
            (Some(session), Some(message)) => Some((session, message)),
            _ => None,
        },
    }
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
        migrations::lock_schema(&tx).await?;
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
        let client = self.client().await?;
        Ok(counters::count(&client, &request).await?.then_some(()))
    }

    async fn start_turn(
        &self,
        request: RequestCount,
        turn: TurnStart,
    ) -> Result<TurnAdmission, StoreError> {
        match self.starts.submit((request, turn)).await? {
            batch::Batched::Done(admission) => Ok(admission),
            batch::Batched::Alone((request, turn), slot) => {
                turn_batch::start_alone(self, request, turn, slot).await
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
        let reply_id = reply.id.clone();
        let completion = turn::Completion {
            account_id,
            session_id: session_id.clone(),
            reply,
            idempotent,
            now_ms,
        };
        let stored = match self.completions.submit(completion).await {
            Ok(batch::Batched::Done(stored)) => stored,
            Ok(batch::Batched::Alone(completion, _slot)) => {
                turn_batch::complete_alone(self, &completion).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &stored {
            // Not stored, or stored with the answer lost: the turn is rolled back at the next
            // heartbeat if its row is still there.
            tracing::warn!(session = %session_id, error = %e,
                "a reply could not be stored; its turn is rolled back at the next heartbeat");
            self.keep_unended(leases::EndedTurn {
                session_id,
                message_id: reply_id,
            });
        }
        stored
    }

    async fn roll_back_turn(
        &self,
        _account_id: i64,
        session_id: String,
        user_message_id: String,
        _created_at_ms: i64,
        _idempotency_key: Option<String>,
    ) -> Result<(), StoreError> {
        // What the turn wrote is read back from its row in `turns` (gone if a sweep took the
        // turn back already), and undone as every rollback is (`leases::roll_back`).
        let rolled = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let rows = tx
                .query(
                    &format!(
                        "DELETE FROM turns WHERE session_id = $1 AND user_message_id = $2 {}",
                        leases::TAKEN_TURN
                    ),
                    &[&session_id, &user_message_id],
                )
                .await?;
            leases::roll_back(&tx, rows).await?;
            tx.commit().await?;
            Ok::<_, StoreError>(())
        }
        .await;
        if let Err(e) = &rolled {
            // Its row in `turns` would keep the session busy while this replica lives.
            tracing::warn!(session = %session_id, error = %e,
                "a failed turn could not be rolled back; retried at the next heartbeat");
            self.keep_unended(leases::EndedTurn {
                session_id,
                message_id: user_message_id,
            });
        }
        rolled
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
        tx.execute(TOMBSTONE, &[&now_ms, &session_id]).await?;
        tx.commit().await?;
        self.history.forget(&session_id);
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

    async fn turn_running(
        &self,
        account_id: i64,
        session_id: String,
        reply_id: String,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM turns
                 WHERE session_id = $1 AND reply_id = $2 AND account_id = $3",
                &[&session_id, &reply_id, &account_id],
            )
            .await?;
        Ok(row.is_some())
    }

    async fn list_sessions(&self, account_id: i64) -> Result<Vec<SessionRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                session_rows!("", "ORDER BY 3 DESC, id"),
                &[&account_id, &SUMMARY_AFTER],
            )
            .await?;
        Ok(rows.iter().map(session_row).collect())
    }

    /// By any replica (migration 20's index); this replica forgets the history it holds of
    /// each.
    async fn deleted_since(&self, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, deleted_at FROM sessions
                 WHERE deleted_at >= $1 AND deleted_at IS NOT NULL",
                &[&since_ms],
            )
            .await?;
        let deleted: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        for (id, _) in &deleted {
            self.history.forget(id);
        }
        Ok(deleted)
    }

    /// By any replica (migration 23's index); this replica forgets the history it holds of
    /// each, as for a deletion.
    async fn undone_since(&self, since_ms: i64) -> Result<Vec<Undone>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id, account_id, undone_at FROM sessions
                 WHERE undone_at >= $1 AND undone_at IS NOT NULL AND deleted_at IS NULL",
                &[&since_ms],
            )
            .await?;
        let undone: Vec<Undone> = rows
            .iter()
            .map(|r| Undone {
                session_id: r.get(0),
                account_id: r.get(1),
                at_ms: r.get(2),
            })
            .collect();
        for u in &undone {
            self.history.forget(&u.session_id);
        }
        Ok(undone)
    }

    async fn deleted_sessions(
        &self,
        account_id: i64,
        since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT id FROM sessions WHERE account_id = $1 AND deleted_at >= $2
                 ORDER BY deleted_at DESC, id",
                &[&account_id, &since_ms],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn session_summary(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Option<SessionRow>, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                session_rows!("AND s.id = $3", ""),
                &[&account_id, &SUMMARY_AFTER, &session_id],
            )
            .await?;
        Ok(row.as_ref().map(session_row))
    }

    async fn fork_session(&self, f: ForkRequest) -> Result<Fork, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The locks in the order of every other write: the session's row first (a send, an
        // undo, a delete lock theirs), then the account's (a first send's, and a delete's
        // through the `sessions_live` trigger). The source's row held, no turn, undo or delete
        // changes it while it is copied.
        if lock_session(&tx, f.account.id, &f.source).await? != SessionStatus::Live {
            tx.rollback().await?;
            return Ok(Fork::NoSession);
        }
        let ids: Vec<String> = tx
            .query(
                "SELECT id FROM messages WHERE session_id = $1 ORDER BY pk",
                &[&f.source],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let Some(length) = convo_core::sessions::fork_length(&ids, &f.message_id) else {
            tx.rollback().await?;
            return Ok(Fork::NoMessage);
        };
        if status(&tx, f.account.id, &f.new_session_id).await? != SessionStatus::Unused {
            tx.rollback().await?;
            return Ok(Fork::Exists);
        }
        // The account's row locked: two forks (or a fork and a first send) at once count each
        // other.
        let live: i64 = tx
            .query_one(
                "SELECT live_sessions FROM accounts WHERE id = $1 FOR UPDATE",
                &[&f.account.id],
            )
            .await?
            .get(0);
        let limits = f.account.tier.limits();
        if convo_core::admission::session_limit_reached(live.max(0) as u64, limits) {
            tx.rollback().await?;
            return Ok(Fork::SessionLimit);
        }
        let inserted = tx
            .execute(
                "INSERT INTO sessions
                     (id, account_id, created_at, forked_from_session, forked_from_message)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (id) DO NOTHING",
                &[
                    &f.new_session_id,
                    &f.account.id,
                    &f.now_ms,
                    &f.source,
                    &f.message_id,
                ],
            )
            .await?;
        if inserted == 0 {
            // Created meanwhile by a send on another connection.
            tx.rollback().await?;
            return Ok(Fork::Exists);
        }
        let rows = tx
            .query(
                "SELECT role, content, tokens, metadata, created_at, finish_reason FROM messages
                 WHERE session_id = $1 ORDER BY pk LIMIT $2",
                &[&f.source, &(length as i64)],
            )
            .await?;
        let insert = tx
            .prepare_cached(
                "INSERT INTO messages
                 (id, session_id, role, content, tokens, metadata, created_at, finish_reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .await?;
        for r in &rows {
            let (role, content, tokens): (String, String, i64) = (r.get(0), r.get(1), r.get(2));
            let (metadata, created_at): (Option<String>, i64) = (r.get(3), r.get(4));
            let finish: Option<String> = r.get(5);
            tx.execute(
                &insert,
                &[
                    &crate::ids::new_message_id(),
                    &f.new_session_id,
                    &role,
                    &content,
                    &tokens,
                    &metadata,
                    &created_at,
                    &finish,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Fork::Forked)
    }

    async fn undo_last_exchange(
        &self,
        account_id: i64,
        session_id: String,
    ) -> Result<Undo, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The session's row lock orders this against a turn starting on any replica.
        if lock_session(&tx, account_id, &session_id).await? != SessionStatus::Live {
            tx.rollback().await?;
            return Ok(Undo::NoSession);
        }
        if tx
            .query_opt("SELECT 1 FROM turns WHERE session_id = $1", &[&session_id])
            .await?
            .is_some()
        {
            tx.rollback().await?;
            return Ok(Undo::Busy);
        }
        let rows = tx
            .query(
                "SELECT pk, id, role FROM messages WHERE session_id = $1 ORDER BY pk",
                &[&session_id],
            )
            .await?;
        let roles = rows
            .iter()
            .map(|r| role(r.get(2)))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(start) = convo_core::sessions::last_exchange_start(&roles) else {
            tx.rollback().await?;
            return Ok(Undo::NothingToUndo);
        };
        let first: i64 = rows[start].get(0);
        tx.execute(
            "DELETE FROM messages WHERE session_id = $1 AND pk >= $2",
            &[&session_id, &first],
        )
        .await?;
        // Every replica finds it (`undone_since`).
        tx.execute(
            "UPDATE sessions SET undone_at = $2 WHERE id = $1",
            &[&session_id, &crate::time::now_ms()],
        )
        .await?;
        let removed: Vec<String> = rows[start..]
            .iter()
            .map(|r| r.get::<_, String>(1))
            .collect();
        // The keys of the sends undone answer `exchange_undone` from now on.
        let records: Vec<(String, Recorded)> = tx
            .query(
                "SELECT key, status, body FROM idempotency_keys
                 WHERE account_id = $1 AND session_id = $2",
                &[&account_id, &session_id],
            )
            .await?
            .iter()
            .map(|r| {
                let answer = Recorded {
                    status: r.get::<_, i32>(1) as u16,
                    body: r.get(2),
                };
                (r.get(0), answer)
            })
            .collect();
        for (key, answer) in convo_core::sessions::records_after_undo(&records, &removed) {
            tx.execute(
                "UPDATE idempotency_keys SET status = $4, body = $5
                 WHERE account_id = $1 AND session_id = $2 AND key = $3",
                &[
                    &account_id,
                    &session_id,
                    &key,
                    &i32::from(answer.status),
                    &answer.body,
                ],
            )
            .await?;
        }
        tx.commit().await?;
        // What this replica holds of the session has the undone messages.
        self.history.forget(&session_id);
        // Their rows, and the records' old answers, are dead tuples now: vacuumed as a
        // deletion's are.
        self.vacuum.notify_one();
        Ok(Undo::Removed(removed))
    }

    async fn set_title(
        &self,
        account_id: i64,
        session_id: String,
        title: String,
    ) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let changed = client
            .execute(
                "UPDATE sessions SET title = $1
                 WHERE id = $2 AND account_id = $3 AND deleted_at IS NULL",
                &[&title, &session_id, &account_id],
            )
            .await?;
        Ok(changed == 1)
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
                "SELECT id, role, content, tokens, metadata, created_at, finish_reason
                 FROM messages WHERE session_id = $1 ORDER BY pk",
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
                    finish_reason: crate::storage::rows::finish_reason(r.get(6))?,
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
        let (requests, tokens) = counters::month(&client, account_id, period_start_ms).await?;
        let stmt = client
            .prepare_cached(
                "SELECT COALESCE((SELECT live_sessions FROM accounts WHERE id = $1), 0)",
            )
            .await?;
        let sessions: i64 = client.query_one(&stmt, &[&account_id]).await?.get(0);
        Ok(UsageCounts {
            requests,
            tokens,
            sessions: sessions.max(0) as u64,
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
            m.add_role(
                r.get(0),
                r.get::<_, i64>(1) as u64,
                r.get::<_, i64>(2) as u64,
            )?;
        }
        Ok(m)
    }

    async fn admin_accounts(&self, query: AccountsQuery) -> Result<AccountPage, StoreError> {
        admin::accounts(&self.client().await?, &query).await
    }

    async fn database_id(&self) -> Result<String, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT id FROM database_identity", &[])
            .await?;
        Ok(row.get(0))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_own_options_come_after_the_replicas_limits() {
        let plain = with_limits("postgres://u@h/db".parse().unwrap());
        assert_eq!(
            plain.get_options(),
            Some("-c idle_in_transaction_session_timeout=10000 -c lock_timeout=12000 -c jit=off")
        );
        let own = with_limits(
            "postgres://u@h/db?options=-c%20idle_in_transaction_session_timeout%3D0"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            own.get_options(),
            Some(
                "-c idle_in_transaction_session_timeout=10000 -c lock_timeout=12000 -c jit=off \
                 -c idle_in_transaction_session_timeout=0"
            ),
            "the operator's setting comes last, and wins"
        );
    }

    #[test]
    fn a_silent_server_is_given_up_unless_the_url_says_otherwise() {
        let plain = with_limits("postgres://u@h/db".parse().unwrap());
        assert!(plain.get_keepalives());
        assert_eq!(plain.get_keepalives_idle(), Duration::from_secs(10));
        assert_eq!(
            plain.get_keepalives_interval(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(plain.get_keepalives_retries(), Some(3));
        assert_eq!(plain.get_tcp_user_timeout(), Some(&SILENT_SERVER));

        let own = with_limits(
            "postgres://u@h/db?keepalives_idle=60&keepalives_interval=20&keepalives_retries=9&tcp_user_timeout=90"
                .parse()
                .unwrap(),
        );
        assert_eq!(own.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(own.get_keepalives_interval(), Some(Duration::from_secs(20)));
        assert_eq!(own.get_keepalives_retries(), Some(9));
        assert_eq!(own.get_tcp_user_timeout(), Some(&Duration::from_secs(90)));

        let off = with_limits("postgres://u@h/db?keepalives=0".parse().unwrap());
        assert!(!off.get_keepalives(), "the URL turns the probes off");
    }
}
