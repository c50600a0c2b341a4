//! The PostgreSQL schema, versioned like SQLite's (`schema_version` instead of
//! `PRAGMA user_version`). Replicas starting at the same moment migrate once: the migrations
//! run in one transaction that first takes a transaction-level advisory lock, so a second
//! replica waits, then finds the version current and does nothing.

use deadpool_postgres::Client;

use crate::error::StoreError;

/// Key of the advisory lock taken by migrations and by `ensure_keys` ("convo" in ASCII).
pub const SCHEMA_LOCK: i64 = 0x0063_6f6e_766f;

/// Migration N (1-based) is `MIGRATIONS[N - 1]`. Never edit one that has shipped; append.
const MIGRATIONS: &[&str] = &[
    // 1: the schema of SQLite's migration 4, its totals kept by triggers as there (in the
    // statement that changes the rows they sum, whoever runs it). Times are Unix milliseconds.
    r#"
    CREATE TABLE accounts (
        id            BIGSERIAL PRIMARY KEY,
        tier          TEXT   NOT NULL,
        created_at    BIGINT NOT NULL,
        live_sessions BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE api_keys (
        key_hash    TEXT PRIMARY KEY,
        key_suffix  TEXT   NOT NULL,
        account_id  BIGINT NOT NULL REFERENCES accounts(id),
        created_at  BIGINT NOT NULL
    );
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        account_id  BIGINT NOT NULL REFERENCES accounts(id),
        created_at  BIGINT NOT NULL,
        deleted_at  BIGINT
    );
    CREATE INDEX sessions_by_account ON sessions (account_id, created_at);
    CREATE TABLE messages (
        pk          BIGSERIAL PRIMARY KEY,
        id          TEXT   NOT NULL,
        session_id  TEXT   NOT NULL REFERENCES sessions(id),
        role        TEXT   NOT NULL CHECK (role IN ('user', 'system', 'assistant')),
        content     TEXT   NOT NULL,
        tokens      BIGINT NOT NULL,
        metadata    TEXT,
        created_at  BIGINT NOT NULL
    );
    CREATE INDEX messages_by_session ON messages (session_id, pk);
    CREATE TABLE message_log (
        account_id  BIGINT NOT NULL,
        created_at  BIGINT NOT NULL,
        message_id  TEXT   NOT NULL,
        session_id  TEXT   NOT NULL,
        role        TEXT   NOT NULL,
        tokens      BIGINT NOT NULL,
        PRIMARY KEY (account_id, created_at, message_id)
    );
    CREATE TABLE usage_totals (
        account_id   BIGINT NOT NULL,
        period_start BIGINT NOT NULL,
        requests     BIGINT NOT NULL DEFAULT 0,
        tokens       BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (account_id, period_start)
    );
    CREATE TABLE idempotency_keys (
        account_id  BIGINT  NOT NULL,
        session_id  TEXT    NOT NULL,
        key         TEXT    NOT NULL,
        status      INTEGER NOT NULL,
        body        TEXT    NOT NULL,
        created_at  BIGINT  NOT NULL,
        PRIMARY KEY (account_id, session_id, key)
    );
    CREATE INDEX idempotency_by_session ON idempotency_keys (session_id);

    -- The start of the calendar month (UTC) containing a time in ms: the billing period.
    CREATE FUNCTION convo_period_start(ms BIGINT) RETURNS BIGINT
        LANGUAGE SQL IMMUTABLE STRICT
        RETURN (extract(epoch FROM date_trunc('month', to_timestamp(ms / 1000.0) AT TIME ZONE 'UTC')) * 1000)::BIGINT;

    CREATE FUNCTION convo_message_log_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            UPDATE usage_totals SET tokens = tokens - OLD.tokens
            WHERE account_id = OLD.account_id AND period_start = convo_period_start(OLD.created_at);
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO usage_totals (account_id, period_start, tokens)
            VALUES (NEW.account_id, convo_period_start(NEW.created_at), NEW.tokens)
            ON CONFLICT (account_id, period_start)
            DO UPDATE SET tokens = usage_totals.tokens + excluded.tokens;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER message_log_totals AFTER INSERT OR DELETE OR UPDATE OF account_id, tokens, created_at
        ON message_log FOR EACH ROW EXECUTE FUNCTION convo_message_log_totals();

    CREATE FUNCTION convo_live_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.deleted_at IS NULL THEN
            UPDATE accounts SET live_sessions = live_sessions - 1 WHERE id = OLD.account_id;
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.deleted_at IS NULL THEN
            UPDATE accounts SET live_sessions = live_sessions + 1 WHERE id = NEW.account_id;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER sessions_live AFTER INSERT OR DELETE OR UPDATE OF account_id, deleted_at
        ON sessions FOR EACH ROW EXECUTE FUNCTION convo_live_sessions();
    "#,
    // 2: turns in flight and the replicas generating them (leases.rs). One turn per session
    // at a time, whichever replica runs it; a turn whose replica stopped sending heartbeats is
    // rolled back by another.
    r#"
    CREATE TABLE replicas (
        id           TEXT PRIMARY KEY,
        heartbeat_at BIGINT NOT NULL
    );
    CREATE TABLE turns (
        session_id      TEXT PRIMARY KEY REFERENCES sessions(id),
        replica         TEXT   NOT NULL,
        account_id      BIGINT NOT NULL,
        reply_id        TEXT   NOT NULL,
        user_message_id TEXT   NOT NULL,
        created_at      BIGINT NOT NULL,
        idempotency_key TEXT
    );
    CREATE INDEX turns_by_replica ON turns (replica);
    "#,
];

/// Brings the schema to the newest version under the advisory lock.
pub async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .await?;
    let version: i32 = match tx
        .query_opt("SELECT version FROM schema_version", &[])
        .await?
    {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO schema_version (version) VALUES (0)", &[])
                .await?;
            0
        }
    };
    if version as usize > MIGRATIONS.len() {
        return Err(StoreError::Corrupt(format!(
            "the database's schema version {version} is newer than this build's {}",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(sql).await?;
        let new = i as i32 + 1;
        tx.execute("UPDATE schema_version SET version = $1", &[&new])
            .await?;
        tracing::info!(version = new, "postgres schema migrated");
    }
    tx.commit().await?;
    Ok(())
}
