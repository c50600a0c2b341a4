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
    // 2: running totals, so that quota checks and usage read one row instead of summing a
    // month of logs: per (account, billing period) requests and tokens, per account its live
    // sessions, per session the tokens of its stored messages (its context). Triggers keep
    // them in the transaction of every statement that writes the rows they sum, whoever
    // writes them; the back-fill covers rows written before this migration.
    r#"
    CREATE TABLE usage_totals (
        account_id    INTEGER NOT NULL,
        period_start  INTEGER NOT NULL,         -- first instant (ms) of the calendar month, UTC
        requests      INTEGER NOT NULL DEFAULT 0,
        tokens        INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (account_id, period_start)
    ) WITHOUT ROWID;
    ALTER TABLE accounts ADD COLUMN live_sessions INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN context_tokens INTEGER NOT NULL DEFAULT 0;

    INSERT INTO usage_totals (account_id, period_start, requests, tokens)
    SELECT account_id, period_start, SUM(requests), SUM(tokens) FROM (
        SELECT account_id, CAST(strftime('%s', at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000 AS period_start,
               1 AS requests, 0 AS tokens
        FROM request_log
        UNION ALL
        SELECT account_id, CAST(strftime('%s', created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000,
               0, tokens
        FROM message_log
    ) GROUP BY account_id, period_start;
    UPDATE accounts SET live_sessions =
        (SELECT COUNT(*) FROM sessions s WHERE s.account_id = accounts.id AND s.deleted_at IS NULL);
    UPDATE sessions SET context_tokens =
        (SELECT COALESCE(SUM(tokens), 0) FROM messages m WHERE m.session_id = sessions.id);

    CREATE TRIGGER request_log_counts AFTER INSERT ON request_log BEGIN
        INSERT INTO usage_totals (account_id, period_start, requests)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, 1)
        ON CONFLICT (account_id, period_start) DO UPDATE SET requests = requests + 1;
    END;
    CREATE TRIGGER request_log_uncounts AFTER DELETE ON request_log BEGIN
        UPDATE usage_totals SET requests = requests - 1
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
    END;
    CREATE TRIGGER message_log_counts AFTER INSERT ON message_log BEGIN
        INSERT INTO usage_totals (account_id, period_start, tokens)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, NEW.tokens)
        ON CONFLICT (account_id, period_start) DO UPDATE SET tokens = tokens + excluded.tokens;
    END;
    CREATE TRIGGER message_log_uncounts AFTER DELETE ON message_log BEGIN
        UPDATE usage_totals SET tokens = tokens - OLD.tokens
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
    END;
    CREATE TRIGGER request_log_recounts AFTER UPDATE OF account_id, at ON request_log BEGIN
        UPDATE usage_totals SET requests = requests - 1
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
        INSERT INTO usage_totals (account_id, period_start, requests)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, 1)
        ON CONFLICT (account_id, period_start) DO UPDATE SET requests = requests + 1;
    END;
    CREATE TRIGGER message_log_recounts AFTER UPDATE OF account_id, tokens, created_at ON message_log BEGIN
        UPDATE usage_totals SET tokens = tokens - OLD.tokens
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
        INSERT INTO usage_totals (account_id, period_start, tokens)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, NEW.tokens)
        ON CONFLICT (account_id, period_start) DO UPDATE SET tokens = tokens + excluded.tokens;
    END;
    CREATE TRIGGER sessions_count AFTER INSERT ON sessions WHEN NEW.deleted_at IS NULL BEGIN
        UPDATE accounts SET live_sessions = live_sessions + 1 WHERE id = NEW.account_id;
    END;
    CREATE TRIGGER sessions_recount AFTER UPDATE OF account_id, deleted_at ON sessions BEGIN
        UPDATE accounts SET live_sessions = live_sessions - 1
        WHERE id = OLD.account_id AND OLD.deleted_at IS NULL;
        UPDATE accounts SET live_sessions = live_sessions + 1
        WHERE id = NEW.account_id AND NEW.deleted_at IS NULL;
    END;
    CREATE TRIGGER sessions_uncount AFTER DELETE ON sessions WHEN OLD.deleted_at IS NULL BEGIN
        UPDATE accounts SET live_sessions = live_sessions - 1 WHERE id = OLD.account_id;
    END;
    CREATE TRIGGER messages_add_context AFTER INSERT ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens + NEW.tokens WHERE id = NEW.session_id;
    END;
    CREATE TRIGGER messages_move_context AFTER UPDATE OF session_id, tokens ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens - OLD.tokens WHERE id = OLD.session_id;
        UPDATE sessions SET context_tokens = context_tokens + NEW.tokens WHERE id = NEW.session_id;
    END;
    CREATE TRIGGER messages_remove_context AFTER DELETE ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens - OLD.tokens WHERE id = OLD.session_id;
    END;
    "#,
    // 3: less work per send. `message_log` becomes one B-tree in (account, time) order, the
    // order usage and metrics read it in; it had three (its rows, its key on `message_id`, its
    // index by account), each written twice per send. `request_log` loses its index by
    // account, which nothing reads (the totals replaced it). `messages` checks its role with
    // comparisons instead of `IN (…)`, for which SQLite built a temporary B-tree at every
    // insert. The triggers of both moved tables are dropped before their rows move and made
    // again after, unchanged.
    r#"
    DROP TRIGGER messages_add_context;
    DROP TRIGGER messages_move_context;
    DROP TRIGGER messages_remove_context;
    CREATE TABLE messages_3 (
        pk          INTEGER PRIMARY KEY,        -- insertion order = conversation order
        id          TEXT    NOT NULL UNIQUE,
        session_id  TEXT    NOT NULL REFERENCES sessions(id),
        role        TEXT    NOT NULL CHECK (role = 'user' OR role = 'system' OR role = 'assistant'),
        content     TEXT    NOT NULL,
        tokens      INTEGER NOT NULL,
        metadata    TEXT,                       -- JSON object, user and system messages only
        created_at  INTEGER NOT NULL
    );
    INSERT INTO messages_3 (pk, id, session_id, role, content, tokens, metadata, created_at)
    SELECT pk, id, session_id, role, content, tokens, metadata, created_at FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_3 RENAME TO messages;
    CREATE INDEX messages_by_session ON messages(session_id, pk);
    CREATE TRIGGER messages_add_context AFTER INSERT ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens + NEW.tokens WHERE id = NEW.session_id;
    END;
    CREATE TRIGGER messages_move_context AFTER UPDATE OF session_id, tokens ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens - OLD.tokens WHERE id = OLD.session_id;
        UPDATE sessions SET context_tokens = context_tokens + NEW.tokens WHERE id = NEW.session_id;
    END;
    CREATE TRIGGER messages_remove_context AFTER DELETE ON messages BEGIN
        UPDATE sessions SET context_tokens = context_tokens - OLD.tokens WHERE id = OLD.session_id;
    END;

    DROP TRIGGER message_log_counts;
    DROP TRIGGER message_log_uncounts;
    DROP TRIGGER message_log_recounts;
    CREATE TABLE message_log_3 (
        account_id  INTEGER NOT NULL,
        created_at  INTEGER NOT NULL,
        message_id  TEXT    NOT NULL,
        session_id  TEXT    NOT NULL,
        role        TEXT    NOT NULL,
        tokens      INTEGER NOT NULL,
        PRIMARY KEY (account_id, created_at, message_id)
    ) WITHOUT ROWID;
    INSERT INTO message_log_3 (account_id, created_at, message_id, session_id, role, tokens)
    SELECT account_id, created_at, message_id, session_id, role, tokens FROM message_log;
    DROP TABLE message_log;
    ALTER TABLE message_log_3 RENAME TO message_log;
    DROP INDEX request_log_by_account;

    CREATE TRIGGER message_log_counts AFTER INSERT ON message_log BEGIN
        INSERT INTO usage_totals (account_id, period_start, tokens)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, NEW.tokens)
        ON CONFLICT (account_id, period_start) DO UPDATE SET tokens = tokens + excluded.tokens;
    END;
    CREATE TRIGGER message_log_uncounts AFTER DELETE ON message_log BEGIN
        UPDATE usage_totals SET tokens = tokens - OLD.tokens
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
    END;
    CREATE TRIGGER message_log_recounts AFTER UPDATE OF account_id, tokens, created_at ON message_log BEGIN
        UPDATE usage_totals SET tokens = tokens - OLD.tokens
        WHERE account_id = OLD.account_id
          AND period_start = CAST(strftime('%s', OLD.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000;
        INSERT INTO usage_totals (account_id, period_start, tokens)
        VALUES (NEW.account_id, CAST(strftime('%s', NEW.created_at / 1000.0, 'unixepoch', 'start of month') AS INTEGER) * 1000, NEW.tokens)
        ON CONFLICT (account_id, period_start) DO UPDATE SET tokens = tokens + excluded.tokens;
    END;
    "#,
    // 4: fewer pages written per send (every page a commit dirties is written to the WAL and
    // copied again by the checkpoint).
    // - `sessions.context_tokens` and its triggers go: every send reads the session's history
    //   anyway, and sums its tokens from it; the triggers wrote the session's row (a page of
    //   its own) in both transactions of a send.
    // - `request_log` and its triggers go: nothing read it but the triggers that counted it
    //   into `usage_totals`, which each request now counts directly.
    // - `messages.id` loses its unique index: ids are unique by construction
    //   (`ids::new_message_id`: 95 random bits after the time), and the one look-up by id
    //   (rolling a failed turn back) goes through the session's index.
    // `messages` is rebuilt for the last (SQLite cannot drop a UNIQUE constraint), its keys and
    // so its order kept.
    r#"
    DROP TRIGGER messages_add_context;
    DROP TRIGGER messages_move_context;
    DROP TRIGGER messages_remove_context;
    ALTER TABLE sessions DROP COLUMN context_tokens;

    DROP TRIGGER request_log_counts;
    DROP TRIGGER request_log_uncounts;
    DROP TRIGGER request_log_recounts;
    DROP TABLE request_log;

    CREATE TABLE messages_4 (
        pk          INTEGER PRIMARY KEY,        -- insertion order = conversation order
        id          TEXT    NOT NULL,           -- unique by construction, not by index
        session_id  TEXT    NOT NULL REFERENCES sessions(id),
        role        TEXT    NOT NULL CHECK (role = 'user' OR role = 'system' OR role = 'assistant'),
        content     TEXT    NOT NULL,
        tokens      INTEGER NOT NULL,
        metadata    TEXT,                       -- JSON object, user and system messages only
        created_at  INTEGER NOT NULL
    );
    INSERT INTO messages_4 (pk, id, session_id, role, content, tokens, metadata, created_at)
    SELECT pk, id, session_id, role, content, tokens, metadata, created_at FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_4 RENAME TO messages;
    CREATE INDEX messages_by_session ON messages(session_id, pk);
    "#,
    // 5: the title a user gave a session (`PATCH /v1/sessions/{id}`); NULL until one is set.
    r#"
    ALTER TABLE sessions ADD COLUMN title TEXT;
    "#,
    // 6: where a fork came from (`POST /v1/sessions/{id}/fork`): the source session and the
    // source's message it was forked at; NULL for a session that is not a fork.
    r#"
    ALTER TABLE sessions ADD COLUMN forked_from_session TEXT;
    ALTER TABLE sessions ADD COLUMN forked_from_message TEXT;
    "#,
    // 7: how a reply ended (`finishReason`: stop, length or stopped); NULL for user and
    // system messages and for replies stored before this column.
    r#"
    ALTER TABLE messages ADD COLUMN finish_reason TEXT;
    "#,
    // 8: an account's keys found from the account (the operator's list of accounts shows
    // each one's key hints, `admin.rs`).
    r#"
    CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at);
    "#,
    // 9: the database's own id (`Storage::database_id`), made once with the schema: a client
    // that finds another one knows the server's database is new, not its sessions deleted.
    r#"
    CREATE TABLE database_identity (id TEXT NOT NULL);
    INSERT INTO database_identity (id) VALUES ('db_' || lower(hex(randomblob(12))));
    "#,
    // 10: a deleted session's row keeps nothing the user gave it (`delete_session` clears its
    // title and origin now); the tombstones deleted before keep theirs no longer.
    r#"
    UPDATE sessions SET title = NULL, forked_from_session = NULL, forked_from_message = NULL
    WHERE deleted_at IS NOT NULL
      AND (title IS NOT NULL OR forked_from_session IS NOT NULL OR forked_from_message IS NOT NULL);
    "#,
    // 11: what the session list tells of a session (its messages, tokens, last activity and
    // first user message, by its `pk`) is kept once summed, so that a list reads each
    // session's summary and the messages after it instead of every message of the account
    // (`messages::list_sessions`; PostgreSQL's migration 22). Messages are appended in `pk`
    // order (a new rowid is above every rowid there is, and a summary's last message is there
    // while the summary is: removing it removes the summary), and any other change to a
    // session's messages (a deletion, an update) deletes its summary, so a summary is always
    // the sums of a prefix of the session. Numbers only; a deleted session's messages go, and
    // its summary with them.
    r#"
    CREATE TABLE session_summaries (
        session_id TEXT    PRIMARY KEY,
        last_pk    INTEGER NOT NULL,
        messages   INTEGER NOT NULL,
        tokens     INTEGER NOT NULL,
        last_at    INTEGER,
        first_user INTEGER
    );
    CREATE TRIGGER messages_removed_unsummed AFTER DELETE ON messages
    BEGIN
        DELETE FROM session_summaries WHERE session_id = OLD.session_id;
    END;
    CREATE TRIGGER messages_updated_unsummed AFTER UPDATE ON messages
    BEGIN
        DELETE FROM session_summaries WHERE session_id IN (OLD.session_id, NEW.session_id);
    END;
    "#,
    // 12: the sessions deleted lately, found without reading every session
    // (`messages::deleted_since`: an engine forgets what it keeps of a session another process
    // on the file deleted, `deletions.rs`; PostgreSQL's migration 20).
    r#"
    CREATE INDEX sessions_deleted ON sessions(deleted_at) WHERE deleted_at IS NOT NULL;
    "#,
    // 13: when a session's last exchange was last undone (`messages::undo_last_exchange`), so
    // that another process on the file finds the undo and its engine keeps nothing of the
    // undone messages (`messages::undone_since`, `deletions.rs`; PostgreSQL's migration 23).
    // NULL until an undo.
    r#"
    ALTER TABLE sessions ADD COLUMN undone_at INTEGER;
    CREATE INDEX sessions_undone ON sessions(undone_at) WHERE undone_at IS NOT NULL;
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
    migrate_to(conn, current, MIGRATIONS.len())
}

/// Applies migrations `current + 1 ..= target`.
fn migrate_to(conn: &mut Connection, current: usize, target: usize) -> Result<(), rusqlite::Error> {
    for (index, sql) in MIGRATIONS.iter().enumerate().take(target).skip(current) {
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

    fn ms(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        use chrono::TimeZone;
        chrono::Utc
            .with_ymd_and_hms(y, mo, d, h, mi, s)
            .unwrap()
            .timestamp_millis()
    }

    fn period(at_ms: i64) -> i64 {
        let t = crate::time::from_ms(at_ms);
        crate::time::billing_period(t).0.timestamp_millis()
    }

    /// A session's id, title, and fork origin (session and message).
    type SessionOrigin = (String, Option<String>, Option<String>, Option<String>);

    /// Tombstones made before migration 10 kept their titles and origins; it clears them and
    /// leaves live sessions' alone.
    #[test]
    fn the_look_for_deleted_sessions_reads_migration_12s_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO accounts (id, tier, created_at) VALUES (1, 'pro', 0);
             INSERT INTO sessions (id, account_id, created_at, deleted_at) VALUES
                 ('session_aaaaaaaaaaaaaaaa', 1, 0, NULL),
                 ('session_bbbbbbbbbbbbbbbb', 1, 0, 500),
                 ('session_cccccccccccccccc', 1, 0, 1500);",
        )
        .unwrap();
        assert_eq!(
            super::super::messages::deleted_since(&conn, 1000).unwrap(),
            [("session_cccccccccccccccc".to_string(), 1500)]
        );
        let plan: String = conn
            .query_row(
                &format!(
                    "EXPLAIN QUERY PLAN {}",
                    super::super::messages::DELETED_SINCE
                ),
                [1000],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("USING INDEX sessions_deleted"), "{plan}");
    }

    #[test]
    fn the_look_for_undone_sessions_reads_migration_13s_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO accounts (id, tier, created_at) VALUES (1, 'pro', 0);
             INSERT INTO sessions (id, account_id, created_at, deleted_at, undone_at) VALUES
                 ('session_aaaaaaaaaaaaaaaa', 1, 0, NULL, NULL),
                 ('session_bbbbbbbbbbbbbbbb', 1, 0, NULL, 500),
                 ('session_cccccccccccccccc', 1, 0, NULL, 1500),
                 ('session_dddddddddddddddd', 1, 0, 1600, 1500);",
        )
        .unwrap();
        // Undone since 1000 and still live.
        assert_eq!(
            super::super::messages::undone_since(&conn, 1000).unwrap(),
            [crate::storage::rows::Undone {
                session_id: "session_cccccccccccccccc".to_string(),
                account_id: 1,
                at_ms: 1500,
            }]
        );
        let plan: String = conn
            .query_row(
                &format!(
                    "EXPLAIN QUERY PLAN {}",
                    super::super::messages::UNDONE_SINCE
                ),
                [1000],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("USING INDEX sessions_undone"), "{plan}");
    }

    #[test]
    fn migration_10_clears_what_the_tombstones_kept() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate_to(&mut conn, 0, 9).unwrap();
        conn.execute_batch(
            "INSERT INTO accounts (id, tier, created_at) VALUES (1, 'pro', 0);
             INSERT INTO sessions (id, account_id, created_at, deleted_at, title,
                                   forked_from_session, forked_from_message) VALUES
                ('session_gone', 1, 0, 5, 'Private plans', 'session_live', 'm1'),
                ('session_live', 1, 0, NULL, 'Kept title', NULL, NULL),
                ('session_fork', 1, 0, NULL, NULL, 'session_live', 'm1');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let rows: Vec<SessionOrigin> = conn
            .prepare(
                "SELECT id, title, forked_from_session, forked_from_message FROM sessions
                 ORDER BY id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            rows,
            [
                (
                    "session_fork".into(),
                    None,
                    some("session_live"),
                    some("m1")
                ),
                ("session_gone".into(), None, None, None),
                ("session_live".into(), some("Kept title"), None, None),
            ]
        );
    }

    /// A database written by a version-1 convo gets its totals back-filled from its rows, and
    /// keeps them and its messages through migrations 3 and 4.
    #[test]
    fn migration_2_back_fills_the_totals_of_an_old_database() {
        let mut conn = Connection::open_in_memory().unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute_batch(MIGRATIONS[0]).unwrap();
        tx.pragma_update(None, "user_version", 1).unwrap();
        tx.commit().unwrap();
        let (oct, nov, nov_end, dec) = (
            ms(2026, 10, 31, 23, 59, 59) + 999,
            ms(2026, 11, 1, 0, 0, 0),
            ms(2026, 11, 30, 12, 0, 0),
            ms(2026, 12, 1, 0, 0, 0),
        );
        conn.execute_batch(&format!(
            "INSERT INTO accounts (id, tier, created_at) VALUES (1, 'pro', 0), (2, 'free', 0), (3, 'pro', 0);
             INSERT INTO sessions (id, account_id, created_at, deleted_at) VALUES
                ('session_aaaaaaaaaaaaaaaa', 1, {oct}, NULL),
                ('session_bbbbbbbbbbbbbbbb', 1, {nov}, {nov_end}),
                ('session_cccccccccccccccc', 2, {nov}, NULL),
                ('session_dddddddddddddddd', 1, {nov}, NULL);
             INSERT INTO messages (id, session_id, role, content, tokens, created_at) VALUES
                ('m1', 'session_aaaaaaaaaaaaaaaa', 'user', 'x', 10, {oct}),
                ('m2', 'session_aaaaaaaaaaaaaaaa', 'assistant', 'y', 20, {nov}),
                ('m3', 'session_cccccccccccccccc', 'user', 'z', 7, {nov_end});
             INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at) VALUES
                ('m1', 1, 'session_aaaaaaaaaaaaaaaa', 'user', 10, {oct}),
                ('m2', 1, 'session_aaaaaaaaaaaaaaaa', 'assistant', 20, {nov}),
                ('m0', 1, 'session_bbbbbbbbbbbbbbbb', 'user', 300, {nov}),
                ('m3', 2, 'session_cccccccccccccccc', 'user', 7, {nov_end});
             INSERT INTO request_log (account_id, at, method, route) VALUES
                (1, {oct}, 'POST', 'x'), (1, {nov}, 'POST', 'x'), (1, {nov_end}, 'GET', 'y'),
                (1, {dec}, 'GET', 'y'), (2, {nov_end}, 'POST', 'x');"
        ))
        .unwrap();
        migrate_to(&mut conn, 1, 3).unwrap();
        let totals = |account: i64, at: i64| -> (i64, i64) {
            conn.query_row(
                "SELECT requests, tokens FROM usage_totals WHERE account_id = ?1 AND period_start = ?2",
                [account, period(at)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap_or((0, 0))
        };
        assert_eq!(totals(1, oct), (1, 10));
        assert_eq!(totals(1, nov), (2, 320));
        assert_eq!(totals(1, dec), (1, 0));
        assert_eq!(totals(2, nov_end), (1, 7));
        assert_eq!(totals(3, nov), (0, 0));
        let count: i64 = conn
            .query_row("SELECT COUNT(*) FROM usage_totals", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 4);
        let live = |account: i64| -> i64 {
            conn.query_row(
                "SELECT live_sessions FROM accounts WHERE id = ?1",
                [account],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!((live(1), live(2), live(3)), (2, 1, 0));
        let context = |id: &str| -> i64 {
            conn.query_row(
                "SELECT context_tokens FROM sessions WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(context("session_aaaaaaaaaaaaaaaa"), 30);
        assert_eq!(context("session_bbbbbbbbbbbbbbbb"), 0);
        assert_eq!(context("session_cccccccccccccccc"), 7);
        // Migration 3 moved the rows of the ledger and of the messages, and their triggers and
        // the role's check still hold.
        let count = |table: &str| -> i64 {
            conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!((count("message_log"), count("messages")), (4, 3));
        conn.execute("DELETE FROM message_log WHERE message_id = 'm0'", [])
            .unwrap();
        assert_eq!(totals(1, nov), (2, 20));
        let add = |id: &str, role: &str| {
            conn.execute(
                "INSERT INTO messages (id, session_id, role, content, tokens, created_at)
                 VALUES (?1, 'session_cccccccccccccccc', ?2, 'w', 5, 0)",
                [id, role],
            )
        };
        assert!(add("m4", "robot").is_err());
        add("m4", "system").unwrap();
        assert_eq!(context("session_cccccccccccccccc"), 12);
        conn.execute("DELETE FROM messages WHERE id = 'm3'", [])
            .unwrap();
        assert_eq!(context("session_cccccccccccccccc"), 5);

        // Migration 4: the totals and the messages (keys, so order) stay; the context column
        // and its triggers, the request log and the unique index on message ids go; the role's
        // check and the ledger's triggers still hold.
        let messages = |conn: &Connection| -> Vec<(i64, String, String)> {
            let mut stmt = conn
                .prepare("SELECT pk, id, session_id FROM messages ORDER BY pk")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let all_totals = |conn: &Connection| -> Vec<(i64, i64, i64, i64)> {
            let mut stmt = conn
                .prepare("SELECT account_id, period_start, requests, tokens FROM usage_totals ORDER BY 1, 2")
                .unwrap();
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let (messages_3, totals_3) = (messages(&conn), all_totals(&conn));
        migrate(&mut conn).unwrap();
        assert_eq!(messages(&conn), messages_3);
        assert_eq!(all_totals(&conn), totals_3);
        let schema: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE tbl_name IN ('messages', 'sessions', 'request_log') ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            schema,
            [
                "messages",
                "messages_by_session",
                // Migration 11's: a change other than an append deletes the session's summary.
                "messages_removed_unsummed",
                "messages_updated_unsummed",
                "sessions",
                "sessions_by_account",
                "sessions_count",
                // Migration 12's: the sessions deleted lately.
                "sessions_deleted",
                "sessions_recount",
                "sessions_uncount",
                // Migration 13's: the sessions undone lately.
                "sessions_undone",
                "sqlite_autoindex_sessions_1",
            ]
        );
        assert!(conn.prepare("SELECT context_tokens FROM sessions").is_err());
        let add = |id: &str, role: &str| {
            conn.execute(
                "INSERT INTO messages (id, session_id, role, content, tokens, created_at)
                 VALUES (?1, 'session_cccccccccccccccc', ?2, 'w', 5, 0)",
                [id, role],
            )
        };
        assert!(add("m5", "robot").is_err());
        add("m5", "user").unwrap();
        conn.execute("DELETE FROM message_log WHERE message_id = 'm1'", [])
            .unwrap();
        let tokens: i64 = conn
            .query_row(
                "SELECT tokens FROM usage_totals WHERE account_id = 1 AND period_start = ?1",
                [period(oct)],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tokens, 0);
    }

    /// The ledger's triggers put a row in the same billing period as `time::billing_period`
    /// does, at the edges of months and years, in leap years, before 1970.
    #[test]
    fn the_triggers_agree_with_billing_period() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let instants = [
            ms(2026, 11, 22, 3, 0, 0),
            ms(2026, 12, 31, 23, 59, 59) + 999,
            ms(2027, 1, 1, 0, 0, 0),
            ms(2028, 2, 29, 12, 0, 0),
            ms(2028, 3, 1, 0, 0, 0) - 1,
            ms(1969, 12, 31, 23, 59, 59) + 999,
            0,
        ];
        for (i, at) in instants.iter().enumerate() {
            conn.execute(
                "INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
                 VALUES (?1, ?2, 's', 'user', 5, ?3)",
                rusqlite::params![format!("m{i}"), i as i64, *at],
            )
            .unwrap();
            let row: (i64, i64, i64) = conn
                .query_row(
                    "SELECT period_start, requests, tokens FROM usage_totals WHERE account_id = ?1",
                    [i as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .unwrap();
            assert_eq!(row, (period(*at), 0, 5), "at {at}");
        }
    }
}
