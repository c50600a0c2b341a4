//! Versioned schema migrations, tracked in `PRAGMA user_version`. Append; never edit a shipped one.

use rusqlite::Connection;

/// Migration N (1-based) brings the schema from version N-1 to N.
const MIGRATIONS: &[&str] = &[
    // 1: accounts, keys, sessions, messages, the content-free message ledger, request log,
    // idempotency keys.
    r#"
    CREATE TABLE accounts (
        id          INTEGER PRIMARY KEY,
        tier        TEXT    NOT NULL,
        created_at  INTEGER NOT NULL
    );
    CREATE TABLE api_keys (
        key_hash    TEXT    PRIMARY KEY,        -- SHA-256 of the key, hex; the key itself is never stored
        key_suffix  TEXT    NOT NULL,           -- last 4 characters, for display
        account_id  INTEGER NOT NULL REFERENCES accounts(id),
        created_at  INTEGER NOT NULL
    );
    CREATE TABLE sessions (
        id          TEXT    PRIMARY KEY,
        account_id  INTEGER NOT NULL REFERENCES accounts(id),
        created_at  INTEGER NOT NULL,
        deleted_at  INTEGER                     -- tombstone: deleted ids stay deleted
    );
    CREATE INDEX sessions_by_account ON sessions(account_id, created_at);
    CREATE TABLE messages (
        pk          INTEGER PRIMARY KEY,        -- insertion order = conversation order
        id          TEXT    NOT NULL UNIQUE,
        session_id  TEXT    NOT NULL REFERENCES sessions(id),
        role        TEXT    NOT NULL CHECK (role IN ('user', 'system', 'assistant')),
        content     TEXT    NOT NULL,
        tokens      INTEGER NOT NULL,
        metadata    TEXT,                       -- JSON object, user and system messages only
        created_at  INTEGER NOT NULL
    );
    CREATE INDEX messages_by_session ON messages(session_id, pk);
    -- One row per stored message without its content: usage and metrics survive deletion.
    CREATE TABLE message_log (
        message_id  TEXT    PRIMARY KEY,
        account_id  INTEGER NOT NULL,
        session_id  TEXT    NOT NULL,
        role        TEXT    NOT NULL,
        tokens      INTEGER NOT NULL,
        created_at  INTEGER NOT NULL
    );
    CREATE INDEX message_log_by_account ON message_log(account_id, created_at);
    CREATE TABLE request_log (
        id          INTEGER PRIMARY KEY,
        account_id  INTEGER NOT NULL,
        at          INTEGER NOT NULL,
        method      TEXT    NOT NULL,
        route       TEXT    NOT NULL
    );
    CREATE INDEX request_log_by_account ON request_log(account_id, at);
    CREATE TABLE idempotency_keys (
        account_id  INTEGER NOT NULL,
        session_id  TEXT    NOT NULL,
        key         TEXT    NOT NULL,
        status      INTEGER NOT NULL,
        body        TEXT    NOT NULL,
        created_at  INTEGER NOT NULL,
        PRIMARY KEY (account_id, session_id, key)
    );
    "#,
];

/// Brings the schema up to date; each migration runs in its own transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    let current: usize =
        conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))? as usize;
    if current > MIGRATIONS.len() {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "database schema version {current} is newer than this convo ({})",
            MIGRATIONS.len()
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (index + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_once_and_are_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v as usize, MIGRATIONS.len());
    }
}
