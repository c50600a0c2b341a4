//! The PostgreSQL schema, versioned like SQLite's (`schema_version` instead of
//! `PRAGMA user_version`). Replicas starting at the same moment migrate once: the migrations
//! run in one transaction that first takes a transaction-level advisory lock, so a second
//! replica waits, then finds the version current and does nothing.

use deadpool_postgres::{Client, Transaction};

use crate::error::StoreError;

/// Key of the advisory lock taken by migrations and by `ensure_keys` ("convo" in ASCII;
/// `lock_schema`).
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
    // 3: the month's counters split over shard rows (counters.rs), and a turn's statements as
    // server-side functions (turn.rs), so that one account's requests no longer queue on one row.
    r#"
    CREATE TABLE usage_shards (
        account_id    BIGINT   NOT NULL,
        period_start  BIGINT   NOT NULL,
        shard         SMALLINT NOT NULL,
        requests      BIGINT   NOT NULL DEFAULT 0,
        allowance     BIGINT   NOT NULL DEFAULT 0,
        request_limit BIGINT   NOT NULL DEFAULT -1,
        tokens        BIGINT   NOT NULL DEFAULT 0,
        PRIMARY KEY (account_id, period_start, shard)
    ) WITH (fillfactor = 10);
    -- (Rows updated thousands of times a second: pages kept mostly empty are pruned of old
    -- row versions at each visit, and fewer shards share a page.)

    -- The month's totals: what `usage_totals` holds plus what the shards hold.
    CREATE VIEW usage_month AS
    SELECT account_id, period_start, SUM(requests)::BIGINT AS requests, SUM(tokens)::BIGINT AS tokens
    FROM (SELECT account_id, period_start, requests, tokens FROM usage_totals
          UNION ALL
          SELECT account_id, period_start, requests, tokens FROM usage_shards) parts
    GROUP BY account_id, period_start;

    CREATE FUNCTION convo_usage_shards() RETURNS INTEGER LANGUAGE SQL IMMUTABLE RETURN 32;
    -- A connection's shard: each transaction changes the one row of its connection.
    CREATE FUNCTION convo_usage_shard() RETURNS SMALLINT LANGUAGE SQL STABLE
        RETURN (pg_backend_pid() % convo_usage_shards())::SMALLINT;

    -- Message tokens go to the shard of the connection that writes the ledger row.
    CREATE OR REPLACE FUNCTION convo_message_log_totals() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            INSERT INTO usage_shards (account_id, period_start, shard, tokens)
            VALUES (OLD.account_id, convo_period_start(OLD.created_at), convo_usage_shard(), -OLD.tokens)
            ON CONFLICT (account_id, period_start, shard)
            DO UPDATE SET tokens = usage_shards.tokens + excluded.tokens;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO usage_shards (account_id, period_start, shard, tokens)
            VALUES (NEW.account_id, convo_period_start(NEW.created_at), convo_usage_shard(), NEW.tokens)
            ON CONFLICT (account_id, period_start, shard)
            DO UPDATE SET tokens = usage_shards.tokens + excluded.tokens;
        END IF;
        RETURN NULL;
    END $$;

    -- A total written into `usage_totals` (by a fold, or by hand) is the month's total: the
    -- shards' part of that column is dropped (and their request allowances, which the next
    -- request hands out again from the new total).
    CREATE FUNCTION convo_usage_totals_written() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (TG_OP = 'INSERT' AND NEW.requests <> 0)
            OR (TG_OP = 'UPDATE' AND NEW.requests IS DISTINCT FROM OLD.requests) THEN
            UPDATE usage_shards SET requests = 0, allowance = 0
            WHERE account_id = NEW.account_id AND period_start = NEW.period_start
              AND (requests <> 0 OR allowance <> 0);
        END IF;
        IF (TG_OP = 'INSERT' AND NEW.tokens <> 0)
            OR (TG_OP = 'UPDATE' AND NEW.tokens IS DISTINCT FROM OLD.tokens) THEN
            UPDATE usage_shards SET tokens = 0
            WHERE account_id = NEW.account_id AND period_start = NEW.period_start AND tokens <> 0;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER usage_totals_written AFTER INSERT OR UPDATE OF requests, tokens
        ON usage_totals FOR EACH ROW EXECUTE FUNCTION convo_usage_totals_written();

    -- Counts a request on the connection's shard, within its allowance; SQLSTATE CVQ01 when
    -- the allowance is used up (or was handed out for another limit).
    CREATE FUNCTION convo_count_request(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE usage_shards SET requests = requests + 1
        WHERE account_id = p_account AND period_start = p_period AND shard = convo_usage_shard()
          AND request_limit = p_limit AND requests < allowance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'the request allowance of this shard is used up' USING ERRCODE = 'CVQ01';
        END IF;
    END $$;

    -- Folds the shards into `usage_totals` and hands what is left of the limit out again, the
    -- caller's shard first; answers what is left. Under the lock of the totals row and of every
    -- shard (taken in order), so the sum is exact.
    CREATE FUNCTION convo_usage_rebalance(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS BIGINT LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := convo_usage_shards();
        me INTEGER := convo_usage_shard();
        v_requests BIGINT;
        v_tokens BIGINT;
        v_total BIGINT;
        v_left BIGINT;
    BEGIN
        INSERT INTO usage_totals (account_id, period_start) VALUES (p_account, p_period)
        ON CONFLICT (account_id, period_start) DO NOTHING;
        PERFORM 1 FROM usage_totals
        WHERE account_id = p_account AND period_start = p_period FOR UPDATE;
        INSERT INTO usage_shards (account_id, period_start, shard)
        SELECT p_account, p_period, s FROM generate_series(0, n - 1) s
        ON CONFLICT (account_id, period_start, shard) DO NOTHING;
        PERFORM 1 FROM usage_shards
        WHERE account_id = p_account AND period_start = p_period ORDER BY shard FOR UPDATE;
        SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO v_requests, v_tokens
        FROM usage_shards WHERE account_id = p_account AND period_start = p_period;
        UPDATE usage_totals SET requests = requests + v_requests, tokens = tokens + v_tokens
        WHERE account_id = p_account AND period_start = p_period
        RETURNING requests INTO v_total;
        v_left := GREATEST(p_limit - v_total, 0);
        UPDATE usage_shards
        SET requests = 0, tokens = 0, request_limit = p_limit,
            allowance = v_left / n + CASE WHEN (shard - me + n) % n < v_left % n THEN 1 ELSE 0 END
        WHERE account_id = p_account AND period_start = p_period;
        RETURN v_left;
    END $$;

    -- What the admission of a turn reads (convo_core::admission), under the session's lock (the
    -- account's live sessions, read for a new session, are checked again by convo_turn_write
    -- under the account's lock). Of a live session with no turn in flight: its history and the
    -- live record of the idempotency key, forgotten first when it expired.
    CREATE FUNCTION convo_turn_facts(p_account BIGINT, p_session TEXT, p_key TEXT,
        p_expired BIGINT, p_period BIGINT,
        OUT o_owner BIGINT, OUT o_deleted_at BIGINT, OUT o_busy BOOLEAN,
        OUT o_live_sessions BIGINT, OUT o_roles TEXT[], OUT o_contents TEXT[],
        OUT o_tokens BIGINT[], OUT o_replay_status INTEGER, OUT o_replay_body TEXT,
        OUT o_tokens_used BIGINT)
    LANGUAGE plpgsql AS $$
    BEGIN
        o_busy := false;
        SELECT s.account_id, s.deleted_at INTO o_owner, o_deleted_at
        FROM sessions s WHERE s.id = p_session FOR UPDATE;
        IF NOT FOUND THEN
            SELECT a.live_sessions INTO o_live_sessions FROM accounts a WHERE a.id = p_account;
        ELSIF o_owner = p_account AND o_deleted_at IS NULL THEN
            o_busy := EXISTS (SELECT 1 FROM turns t WHERE t.session_id = p_session);
            IF o_busy THEN
                RETURN;
            END IF;
            SELECT array_agg(m.role ORDER BY m.pk), array_agg(m.content ORDER BY m.pk),
                   array_agg(m.tokens ORDER BY m.pk)
            INTO o_roles, o_contents, o_tokens
            FROM messages m WHERE m.session_id = p_session;
            IF p_key IS NOT NULL THEN
                DELETE FROM idempotency_keys k
                WHERE k.account_id = p_account AND k.session_id = p_session AND k.key = p_key
                  AND k.created_at <= p_expired;
                SELECT k.status, k.body INTO o_replay_status, o_replay_body FROM idempotency_keys k
                WHERE k.account_id = p_account AND k.session_id = p_session AND k.key = p_key;
            END IF;
        END IF;
        o_tokens_used := COALESCE((SELECT u.tokens FROM usage_totals u
                                   WHERE u.account_id = p_account AND u.period_start = p_period), 0)
                       + COALESCE((SELECT SUM(s.tokens) FROM usage_shards s
                                   WHERE s.account_id = p_account AND s.period_start = p_period), 0);
    END $$;

    -- An admitted turn's writes: the session when new, once the account's row is locked with
    -- at most p_max_live live sessions (the most for which the admission decides as it did;
    -- SQLSTATE CVR01 when it has more, or when another transaction created the session first),
    -- the user message, the accepted response's record, the turn in flight, then the request
    -- count (CVQ01, see convo_count_request) and the ledger row.
    CREATE FUNCTION convo_turn_write(p_account BIGINT, p_session TEXT, p_create BOOLEAN,
        p_max_live BIGINT, p_now BIGINT, p_message TEXT, p_role TEXT, p_content TEXT,
        p_tokens BIGINT, p_metadata TEXT, p_key TEXT, p_status INTEGER, p_body TEXT,
        p_replica TEXT, p_reply TEXT, p_period BIGINT, p_limit BIGINT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        IF p_create THEN
            PERFORM 1 FROM accounts a
            WHERE a.id = p_account AND a.live_sessions <= p_max_live FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the account''s sessions changed' USING ERRCODE = 'CVR01';
            END IF;
            INSERT INTO sessions (id, account_id, created_at) VALUES (p_session, p_account, p_now)
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the session was created concurrently' USING ERRCODE = 'CVR01';
            END IF;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
        VALUES (p_message, p_session, p_role, p_content, p_tokens, p_metadata, p_now);
        IF p_key IS NOT NULL AND p_status IS NOT NULL THEN
            INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
            VALUES (p_account, p_session, p_key, p_status, p_body, p_now)
            ON CONFLICT (account_id, session_id, key) DO UPDATE
            SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        END IF;
        INSERT INTO turns (session_id, replica, account_id, reply_id, user_message_id, created_at, idempotency_key)
        VALUES (p_session, p_replica, p_account, p_reply, p_message, p_now, p_key);
        PERFORM convo_count_request(p_account, p_period, p_limit);
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        VALUES (p_message, p_account, p_session, p_role, p_tokens, p_now);
    END $$;

    -- Stores a reply and ends its turn: 0 stored; 1 the session is not live (nothing stored);
    -- 2 its turn is gone, rolled back by another replica (nothing stored).
    CREATE FUNCTION convo_turn_complete(p_account BIGINT, p_session TEXT, p_reply TEXT,
        p_role TEXT, p_content TEXT, p_tokens BIGINT, p_created BIGINT, p_key TEXT,
        p_status INTEGER, p_body TEXT, p_now BIGINT)
    RETURNS INTEGER LANGUAGE plpgsql AS $$
    DECLARE
        v_owner BIGINT;
        v_deleted BIGINT;
    BEGIN
        SELECT s.account_id, s.deleted_at INTO v_owner, v_deleted
        FROM sessions s WHERE s.id = p_session FOR UPDATE;
        IF NOT FOUND OR v_owner <> p_account OR v_deleted IS NOT NULL THEN
            RETURN 1;
        END IF;
        DELETE FROM turns t WHERE t.session_id = p_session AND t.reply_id = p_reply;
        IF NOT FOUND THEN
            RETURN 2;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
        VALUES (p_reply, p_session, p_role, p_content, p_tokens, NULL, p_created);
        IF p_key IS NOT NULL THEN
            INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
            VALUES (p_account, p_session, p_key, p_status, p_body, p_now)
            ON CONFLICT (account_id, session_id, key) DO UPDATE
            SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        END IF;
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        VALUES (p_reply, p_account, p_session, p_role, p_tokens, p_created);
        RETURN 0;
    END $$;
    "#,
    // 4: the title a user gave a session (`PATCH /v1/sessions/{id}`); NULL until one is set.
    r#"
    ALTER TABLE sessions ADD COLUMN title TEXT;
    "#,
    // 5: a request whose shard is dry is counted by the statement that folds the shards and
    // hands the rest out (convo_usage_refill, called by convo_count_request), under the same
    // locks; before, the fold was a transaction of its own and the request ran again after
    // it, by which time concurrent folds could have handed its unit to other shards, again
    // and again (counters.rs). `convo_usage_rebalance` (migration 3) stays: it records the
    // fold after a refusal (whose own refill was rolled back with it), and replicas of older
    // builds call it during an upgrade.
    r#"
    -- Folds the shards into `usage_totals` and, when the limit leaves any request, counts one
    -- on the caller's shard and hands out what is left, the caller's shard first (so its
    -- allowance covers that request); true when it counted. Under the lock of the totals row
    -- and of every shard (taken in order), so the sum is exact.
    CREATE FUNCTION convo_usage_refill(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := convo_usage_shards();
        me INTEGER := convo_usage_shard();
        v_requests BIGINT;
        v_tokens BIGINT;
        v_total BIGINT;
        v_left BIGINT;
    BEGIN
        INSERT INTO usage_totals (account_id, period_start) VALUES (p_account, p_period)
        ON CONFLICT (account_id, period_start) DO NOTHING;
        PERFORM 1 FROM usage_totals
        WHERE account_id = p_account AND period_start = p_period FOR UPDATE;
        INSERT INTO usage_shards (account_id, period_start, shard)
        SELECT p_account, p_period, s FROM generate_series(0, n - 1) s
        ON CONFLICT (account_id, period_start, shard) DO NOTHING;
        PERFORM 1 FROM usage_shards
        WHERE account_id = p_account AND period_start = p_period ORDER BY shard FOR UPDATE;
        SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO v_requests, v_tokens
        FROM usage_shards WHERE account_id = p_account AND period_start = p_period;
        UPDATE usage_totals SET requests = requests + v_requests, tokens = tokens + v_tokens
        WHERE account_id = p_account AND period_start = p_period
        RETURNING requests INTO v_total;
        v_left := GREATEST(p_limit - v_total, 0);
        UPDATE usage_shards
        SET requests = CASE WHEN shard = me AND v_left > 0 THEN 1 ELSE 0 END,
            tokens = 0, request_limit = p_limit,
            allowance = v_left / n + CASE WHEN (shard - me + n) % n < v_left % n THEN 1 ELSE 0 END
        WHERE account_id = p_account AND period_start = p_period;
        RETURN v_left > 0;
    END $$;

    -- Counts a request on the connection's shard, within its allowance, or else by a refill;
    -- SQLSTATE CVQ01 when the refill found the limit reached (nothing counted). The shard is
    -- read before it is updated: a transaction that waits for a refill's locks must hold no
    -- shard's lock (a refill holding the totals row waits for every shard), and an UPDATE
    -- that finds its row changed by a concurrent transaction keeps the row locked even when
    -- it then updates nothing. So a shard taken meanwhile (read with allowance left, updated
    -- without) raises SQLSTATE CVQ02 instead: the transaction runs again, and then finds its
    -- shard dry and refills it.
    CREATE OR REPLACE FUNCTION convo_count_request(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    DECLARE
        me SMALLINT := convo_usage_shard();
    BEGIN
        IF EXISTS (SELECT 1 FROM usage_shards
                   WHERE account_id = p_account AND period_start = p_period AND shard = me
                     AND request_limit = p_limit AND requests < allowance) THEN
            UPDATE usage_shards SET requests = requests + 1
            WHERE account_id = p_account AND period_start = p_period AND shard = me
              AND request_limit = p_limit AND requests < allowance;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the shard''s allowance was taken meanwhile' USING ERRCODE = 'CVQ02';
            END IF;
        ELSIF NOT convo_usage_refill(p_account, p_period, p_limit) THEN
            RAISE EXCEPTION 'the request limit is reached' USING ERRCODE = 'CVQ01';
        END IF;
    END $$;
    "#,
    // 6: where a fork came from
    // (`POST /v1/sessions/{id}/fork`): the source session and the source's message it was
    // forked at; NULL for a session that is not a fork.
    r#"
    ALTER TABLE sessions ADD COLUMN forked_from_session TEXT;
    ALTER TABLE sessions ADD COLUMN forked_from_message TEXT;
    "#,
    // 7: how a reply ended (`finishReason`: stop, length or stopped); NULL for user and
    // system messages and for replies stored before this column. `convo_turn_complete_2` is
    // `convo_turn_complete` storing it; the old function stays for replicas of older builds
    // during an upgrade.
    r#"
    ALTER TABLE messages ADD COLUMN finish_reason TEXT;
    CREATE FUNCTION convo_turn_complete_2(p_account BIGINT, p_session TEXT, p_reply TEXT,
        p_role TEXT, p_content TEXT, p_tokens BIGINT, p_created BIGINT, p_key TEXT,
        p_status INTEGER, p_body TEXT, p_now BIGINT, p_finish TEXT)
    RETURNS INTEGER LANGUAGE plpgsql AS $$
    DECLARE
        v_owner BIGINT;
        v_deleted BIGINT;
    BEGIN
        SELECT s.account_id, s.deleted_at INTO v_owner, v_deleted
        FROM sessions s WHERE s.id = p_session FOR UPDATE;
        IF NOT FOUND OR v_owner <> p_account OR v_deleted IS NOT NULL THEN
            RETURN 1;
        END IF;
        DELETE FROM turns t WHERE t.session_id = p_session AND t.reply_id = p_reply;
        IF NOT FOUND THEN
            RETURN 2;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at,
                              finish_reason)
        VALUES (p_reply, p_session, p_role, p_content, p_tokens, NULL, p_created, p_finish);
        IF p_key IS NOT NULL THEN
            INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
            VALUES (p_account, p_session, p_key, p_status, p_body, p_now)
            ON CONFLICT (account_id, session_id, key) DO UPDATE
            SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        END IF;
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        VALUES (p_reply, p_account, p_session, p_role, p_tokens, p_created);
        RETURN 0;
    END $$;
    "#,
    // 8: an account's keys found from the account (the operator's list of accounts shows
    // each one's key hints, `admin.rs`).
    r#"
    CREATE INDEX api_keys_by_account ON api_keys (account_id, created_at);
    "#,
    // 9: an account's first refill of the month creates its shards with their allowances in
    // one statement. Before, it inserted the 32 rows, locked them, summed them, wrote the
    // totals and updated the 32 rows again; with 1,000 keys that first refill was one request in
    // six of an 8 s benchmark run (docs/perf-log.md). A refill that finds shards folds them as
    // before.
    r#"
    CREATE OR REPLACE FUNCTION convo_usage_refill(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := convo_usage_shards();
        me INTEGER := convo_usage_shard();
        v_requests BIGINT;
        v_tokens BIGINT;
        v_total BIGINT;
        v_left BIGINT;
    BEGIN
        INSERT INTO usage_totals (account_id, period_start) VALUES (p_account, p_period)
        ON CONFLICT (account_id, period_start) DO NOTHING;
        SELECT requests INTO v_total FROM usage_totals
        WHERE account_id = p_account AND period_start = p_period FOR UPDATE;
        IF NOT EXISTS (SELECT 1 FROM usage_shards
                       WHERE account_id = p_account AND period_start = p_period) THEN
            -- No shard to fold (a refill, under the totals row's lock, creates all of them; a
            -- row the ledger's trigger creates meanwhile holds tokens only, which it keeps).
            v_left := GREATEST(p_limit - v_total, 0);
            INSERT INTO usage_shards (account_id, period_start, shard, requests, allowance, request_limit)
            SELECT p_account, p_period, s, CASE WHEN s = me AND v_left > 0 THEN 1 ELSE 0 END,
                   v_left / n + CASE WHEN (s - me + n) % n < v_left % n THEN 1 ELSE 0 END, p_limit
            FROM generate_series(0, n - 1) s
            ON CONFLICT (account_id, period_start, shard) DO UPDATE
            SET requests = excluded.requests, allowance = excluded.allowance,
                request_limit = excluded.request_limit;
            RETURN v_left > 0;
        END IF;
        INSERT INTO usage_shards (account_id, period_start, shard)
        SELECT p_account, p_period, s FROM generate_series(0, n - 1) s
        ON CONFLICT (account_id, period_start, shard) DO NOTHING;
        PERFORM 1 FROM usage_shards
        WHERE account_id = p_account AND period_start = p_period ORDER BY shard FOR UPDATE;
        SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO v_requests, v_tokens
        FROM usage_shards WHERE account_id = p_account AND period_start = p_period;
        UPDATE usage_totals SET requests = requests + v_requests, tokens = tokens + v_tokens
        WHERE account_id = p_account AND period_start = p_period
        RETURNING requests INTO v_total;
        v_left := GREATEST(p_limit - v_total, 0);
        UPDATE usage_shards
        SET requests = CASE WHEN shard = me AND v_left > 0 THEN 1 ELSE 0 END,
            tokens = 0, request_limit = p_limit,
            allowance = v_left / n + CASE WHEN (shard - me + n) % n < v_left % n THEN 1 ELSE 0 END
        WHERE account_id = p_account AND period_start = p_period;
        RETURN v_left > 0;
    END $$;
    "#,
    // 10: turns written in batches (batch.rs). A turn's writes are three pieces, so that a
    // batch takes the locks of all its turns piece by piece, in the order one turn takes
    // them (account rows and the turns' rows, then the request counts' shards, then the
    // ledger's): `convo_turn_write` is restated as the three. A batch counts an account's
    // requests together, once per account, accounts in order: within its shard's allowance
    // (`convo_count_within`) or by a refill counting them all (`convo_usage_refill_n`, which
    // `convo_usage_refill` now is with one request), never holding a shard of the account it
    // refills. When the caller's share of what the limit leaves does not cover them, CVQ03:
    // the batch keeps nothing and its turns run one at a time, each counted exactly. The
    // batch functions take their sessions' locks first, in the order of their ids
    // (`COLLATE "C"`, as the replica sorts them).
    r#"
    CREATE FUNCTION convo_turn_rows(p_account BIGINT, p_session TEXT, p_create BOOLEAN,
        p_max_live BIGINT, p_now BIGINT, p_message TEXT, p_role TEXT, p_content TEXT,
        p_tokens BIGINT, p_metadata TEXT, p_key TEXT, p_status INTEGER, p_body TEXT,
        p_replica TEXT, p_reply TEXT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        IF p_create THEN
            PERFORM 1 FROM accounts a
            WHERE a.id = p_account AND a.live_sessions <= p_max_live FOR UPDATE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the account''s sessions changed' USING ERRCODE = 'CVR01';
            END IF;
            INSERT INTO sessions (id, account_id, created_at) VALUES (p_session, p_account, p_now)
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the session was created concurrently' USING ERRCODE = 'CVR01';
            END IF;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
        VALUES (p_message, p_session, p_role, p_content, p_tokens, p_metadata, p_now);
        IF p_key IS NOT NULL AND p_status IS NOT NULL THEN
            INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
            VALUES (p_account, p_session, p_key, p_status, p_body, p_now)
            ON CONFLICT (account_id, session_id, key) DO UPDATE
            SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        END IF;
        INSERT INTO turns (session_id, replica, account_id, reply_id, user_message_id, created_at, idempotency_key)
        VALUES (p_session, p_replica, p_account, p_reply, p_message, p_now, p_key);
    END $$;

    CREATE FUNCTION convo_turn_ledger(p_account BIGINT, p_session TEXT, p_message TEXT,
        p_role TEXT, p_tokens BIGINT, p_now BIGINT)
    RETURNS VOID LANGUAGE SQL AS $$
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        VALUES (p_message, p_account, p_session, p_role, p_tokens, p_now);
    $$;

    -- Counts p_n requests on the connection's shard if its allowance covers them all; false
    -- when it does not (nothing counted); CVQ02 when it did when read and not when updated
    -- (see convo_count_request).
    CREATE FUNCTION convo_count_within(p_account BIGINT, p_period BIGINT, p_limit BIGINT,
        p_n BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        me SMALLINT := convo_usage_shard();
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM usage_shards
                       WHERE account_id = p_account AND period_start = p_period AND shard = me
                         AND request_limit = p_limit AND requests + p_n <= allowance) THEN
            RETURN false;
        END IF;
        UPDATE usage_shards SET requests = requests + p_n
        WHERE account_id = p_account AND period_start = p_period AND shard = me
          AND request_limit = p_limit AND requests + p_n <= allowance;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'the shard''s allowance was taken meanwhile' USING ERRCODE = 'CVQ02';
        END IF;
        RETURN true;
    END $$;

    -- A shard's allowance when p_left requests are handed out, the caller's shard (p_me) first.
    CREATE FUNCTION convo_allowance(p_left BIGINT, p_shard INTEGER, p_me INTEGER)
    RETURNS BIGINT LANGUAGE SQL IMMUTABLE
    RETURN p_left / convo_usage_shards()
        + CASE WHEN (p_shard - p_me + convo_usage_shards()) % convo_usage_shards()
                    < p_left % convo_usage_shards() THEN 1 ELSE 0 END;

    -- Folds the shards into `usage_totals` and, when the caller's share of what the limit
    -- leaves covers p_n requests, counts them on the caller's shard; hands what is left out
    -- again, the caller's shard first; true when it counted. Under the lock of the totals row
    -- and of every shard (taken in order), so the sum is exact. An account's first refill of
    -- the month creates its shards (migration 9). convo_usage_refill is this with p_n = 1.
    CREATE FUNCTION convo_usage_refill_n(p_account BIGINT, p_period BIGINT, p_limit BIGINT,
        p_n BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := convo_usage_shards();
        me INTEGER := convo_usage_shard();
        v_requests BIGINT;
        v_tokens BIGINT;
        v_total BIGINT;
        v_left BIGINT;
        v_count BIGINT;
    BEGIN
        INSERT INTO usage_totals (account_id, period_start) VALUES (p_account, p_period)
        ON CONFLICT (account_id, period_start) DO NOTHING;
        SELECT requests INTO v_total FROM usage_totals
        WHERE account_id = p_account AND period_start = p_period FOR UPDATE;
        IF NOT EXISTS (SELECT 1 FROM usage_shards
                       WHERE account_id = p_account AND period_start = p_period) THEN
            -- No shard to fold (a refill, under the totals row's lock, creates all of them; a
            -- row the ledger's trigger creates meanwhile holds tokens only, which it keeps).
            v_left := GREATEST(p_limit - v_total, 0);
            v_count := CASE WHEN convo_allowance(v_left, me, me) >= p_n THEN p_n ELSE 0 END;
            INSERT INTO usage_shards (account_id, period_start, shard, requests, allowance, request_limit)
            SELECT p_account, p_period, s, CASE WHEN s = me THEN v_count ELSE 0 END,
                   convo_allowance(v_left, s, me), p_limit
            FROM generate_series(0, n - 1) s
            ON CONFLICT (account_id, period_start, shard) DO UPDATE
            SET requests = excluded.requests, allowance = excluded.allowance,
                request_limit = excluded.request_limit;
            RETURN v_count > 0;
        END IF;
        INSERT INTO usage_shards (account_id, period_start, shard)
        SELECT p_account, p_period, s FROM generate_series(0, n - 1) s
        ON CONFLICT (account_id, period_start, shard) DO NOTHING;
        PERFORM 1 FROM usage_shards
        WHERE account_id = p_account AND period_start = p_period ORDER BY shard FOR UPDATE;
        SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0) INTO v_requests, v_tokens
        FROM usage_shards WHERE account_id = p_account AND period_start = p_period;
        UPDATE usage_totals SET requests = requests + v_requests, tokens = tokens + v_tokens
        WHERE account_id = p_account AND period_start = p_period
        RETURNING requests INTO v_total;
        v_left := GREATEST(p_limit - v_total, 0);
        v_count := CASE WHEN convo_allowance(v_left, me, me) >= p_n THEN p_n ELSE 0 END;
        UPDATE usage_shards
        SET requests = CASE WHEN shard = me THEN v_count ELSE 0 END,
            tokens = 0, request_limit = p_limit, allowance = convo_allowance(v_left, shard, me)
        WHERE account_id = p_account AND period_start = p_period;
        RETURN v_count > 0;
    END $$;

    CREATE OR REPLACE FUNCTION convo_usage_refill(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS BOOLEAN LANGUAGE SQL
    RETURN convo_usage_refill_n(p_account, p_period, p_limit, 1);

    CREATE OR REPLACE FUNCTION convo_count_request(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT convo_count_within(p_account, p_period, p_limit, 1)
           AND NOT convo_usage_refill(p_account, p_period, p_limit) THEN
            RAISE EXCEPTION 'the request limit is reached' USING ERRCODE = 'CVQ01';
        END IF;
    END $$;

    CREATE OR REPLACE FUNCTION convo_turn_write(p_account BIGINT, p_session TEXT, p_create BOOLEAN,
        p_max_live BIGINT, p_now BIGINT, p_message TEXT, p_role TEXT, p_content TEXT,
        p_tokens BIGINT, p_metadata TEXT, p_key TEXT, p_status INTEGER, p_body TEXT,
        p_replica TEXT, p_reply TEXT, p_period BIGINT, p_limit BIGINT)
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM convo_turn_rows(p_account, p_session, p_create, p_max_live, p_now, p_message,
            p_role, p_content, p_tokens, p_metadata, p_key, p_status, p_body, p_replica, p_reply);
        PERFORM convo_count_request(p_account, p_period, p_limit);
        PERFORM convo_turn_ledger(p_account, p_session, p_message, p_role, p_tokens, p_now);
    END $$;

    -- convo_turn_facts of each turn of a batch, its sessions given in the order of their ids;
    -- n is the turn's place in the arrays (from 1).
    CREATE FUNCTION convo_turn_facts_n(p_accounts BIGINT[], p_sessions TEXT[], p_keys TEXT[],
        p_expired BIGINT, p_periods BIGINT[])
    RETURNS TABLE (n BIGINT, o_owner BIGINT, o_deleted_at BIGINT, o_busy BOOLEAN,
        o_live_sessions BIGINT, o_roles TEXT[], o_contents TEXT[], o_tokens BIGINT[],
        o_replay_status INTEGER, o_replay_body TEXT, o_tokens_used BIGINT)
    LANGUAGE SQL AS $$
        SELECT t.n, f.*
        FROM unnest(p_accounts, p_sessions, p_keys, p_periods)
             WITH ORDINALITY AS t(account, session, key, period, n)
        CROSS JOIN LATERAL convo_turn_facts(t.account, t.session, t.key, p_expired, t.period) f
        ORDER BY t.n;
    $$;

    -- The writes of a batch's turns, in the order of their accounts: each turn's rows (or
    -- none for a turn refused or replayed, p_write false), then every turn's request counted
    -- (an account's together, see migration 10's comment; CVQ03 when it may not), then
    -- the ledger's rows.
    CREATE FUNCTION convo_turn_write_n(p_write BOOLEAN[], p_accounts BIGINT[], p_sessions TEXT[],
        p_create BOOLEAN[], p_max_live BIGINT[], p_now BIGINT[], p_messages TEXT[],
        p_roles TEXT[], p_contents TEXT[], p_tokens BIGINT[], p_metadata TEXT[], p_keys TEXT[],
        p_statuses INTEGER[], p_bodies TEXT[], p_replica TEXT, p_replies TEXT[],
        p_periods BIGINT[], p_limits BIGINT[])
    RETURNS VOID LANGUAGE plpgsql AS $$
    DECLARE
        c RECORD;
    BEGIN
        FOR i IN 1 .. cardinality(p_accounts) LOOP
            IF p_write[i] THEN
                PERFORM convo_turn_rows(p_accounts[i], p_sessions[i], p_create[i],
                    p_max_live[i], p_now[i], p_messages[i], p_roles[i], p_contents[i],
                    p_tokens[i], p_metadata[i], p_keys[i], p_statuses[i], p_bodies[i],
                    p_replica, p_replies[i]);
            END IF;
        END LOOP;
        FOR c IN SELECT t.account, t.period, t.lim, count(*) AS k
                 FROM unnest(p_accounts, p_periods, p_limits) AS t(account, period, lim)
                 GROUP BY t.account, t.period, t.lim ORDER BY t.account, t.period, t.lim LOOP
            IF NOT convo_count_within(c.account, c.period, c.lim, c.k)
               AND NOT convo_usage_refill_n(c.account, c.period, c.lim, c.k) THEN
                RAISE EXCEPTION 'the limit leaves this shard too little for the batch' USING ERRCODE = 'CVQ03';
            END IF;
        END LOOP;
        FOR i IN 1 .. cardinality(p_accounts) LOOP
            IF p_write[i] THEN
                PERFORM convo_turn_ledger(p_accounts[i], p_sessions[i], p_messages[i],
                    p_roles[i], p_tokens[i], p_now[i]);
            END IF;
        END LOOP;
    END $$;

    -- convo_turn_complete_2 of each reply of a batch, given in the order of their accounts,
    -- their sessions locked first; each one's outcome, in the same order.
    CREATE FUNCTION convo_turn_complete_n(p_accounts BIGINT[], p_sessions TEXT[], p_replies TEXT[],
        p_role TEXT, p_contents TEXT[], p_tokens BIGINT[], p_created BIGINT[], p_keys TEXT[],
        p_statuses INTEGER[], p_bodies TEXT[], p_now BIGINT[], p_finish TEXT[])
    RETURNS INTEGER[] LANGUAGE plpgsql AS $$
    DECLARE
        s TEXT;
        outcomes INTEGER[] := '{}';
    BEGIN
        FOR s IN SELECT x FROM unnest(p_sessions) x ORDER BY x COLLATE "C" LOOP
            PERFORM 1 FROM sessions WHERE id = s FOR UPDATE;
        END LOOP;
        FOR i IN 1 .. cardinality(p_sessions) LOOP
            outcomes := outcomes || convo_turn_complete_2(p_accounts[i], p_sessions[i],
                p_replies[i], p_role, p_contents[i], p_tokens[i], p_created[i], p_keys[i],
                p_statuses[i], p_bodies[i], p_now[i], p_finish[i]);
        END LOOP;
        RETURN outcomes;
    END $$;
    "#,
    // 11: the batch functions set-based: each table is written by one statement per batch
    // instead of one per turn. A turn that comes alone calls them as a batch of one
    // (turn_batch.rs), so every rule of a turn's admission and writes is in these three
    // functions; the one-turn functions of migrations 3 to 10 stay for replicas of older
    // builds during an upgrade.
    // Their statements take arrays, for which PostgreSQL would plan each call anew (a custom
    // plan looks cheaper than the generic one): about 1 ms a call, more than a batch of 16
    // turns costs to run. So they keep generic plans (`plan_cache_mode`), and since a generic
    // plan is made once per connection, perhaps while a table is nearly empty, no statement
    // leaves the planner a join order to choose: each table is reached from the batch's rows
    // by an index lookup per row (a `LATERAL` subquery behind `OFFSET 0`, a scalar subquery,
    // or `= ANY` on one table), with sequential scans, hash and merge joins off.
    r#"
    -- What the admission of each turn of a batch reads, its sessions locked first in the order
    -- of their ids; n is the turn's place in the arrays (from 1). Of a live session of the
    -- caller's with no turn in flight (open): its history and the live record of the
    -- idempotency key, forgotten first when it expired; of a session that does not exist, the
    -- account's live sessions (checked again when written, see convo_turn_write_n); of every
    -- turn, the account's tokens of the month.
    CREATE OR REPLACE FUNCTION convo_turn_facts_n(p_accounts BIGINT[], p_sessions TEXT[],
        p_keys TEXT[], p_expired BIGINT, p_periods BIGINT[])
    RETURNS TABLE (n BIGINT, o_owner BIGINT, o_deleted_at BIGINT, o_busy BOOLEAN,
        o_live_sessions BIGINT, o_roles TEXT[], o_contents TEXT[], o_tokens BIGINT[],
        o_replay_status INTEGER, o_replay_body TEXT, o_tokens_used BIGINT)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
        SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
        v_open BIGINT[];
    BEGIN
        PERFORM 1 FROM sessions s WHERE s.id = ANY(p_sessions) ORDER BY s.id COLLATE "C" FOR UPDATE;
        SELECT COALESCE(array_agg(t.i), '{}') INTO v_open
        FROM unnest(p_accounts, p_sessions) WITH ORDINALITY t(account, session, i)
        WHERE (SELECT s.account_id = t.account AND s.deleted_at IS NULL
               FROM sessions s WHERE s.id = t.session) IS TRUE
          AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.session_id = t.session);
        FOR i IN 1 .. cardinality(p_sessions) LOOP
            IF p_keys[i] IS NOT NULL AND i = ANY(v_open) THEN
                DELETE FROM idempotency_keys k
                WHERE k.account_id = p_accounts[i] AND k.session_id = p_sessions[i]
                  AND k.key = p_keys[i] AND k.created_at <= p_expired;
            END IF;
        END LOOP;
        RETURN QUERY
        SELECT t.i, s.account_id, s.deleted_at,
               (s.account_id = t.account AND s.deleted_at IS NULL AND t.i <> ALL(v_open)) IS TRUE,
               a.live_sessions, h.roles, h.contents, h.tokens, k.status, k.body, u.tokens
        FROM unnest(p_accounts, p_sessions, p_keys, p_periods)
             WITH ORDINALITY t(account, session, key, period, i)
        LEFT JOIN LATERAL (SELECT s.account_id, s.deleted_at FROM sessions s
                           WHERE s.id = t.session OFFSET 0) s ON true
        LEFT JOIN LATERAL (SELECT a.live_sessions FROM accounts a
                           WHERE s.account_id IS NULL AND a.id = t.account OFFSET 0) a ON true
        LEFT JOIN LATERAL (SELECT array_agg(m.role ORDER BY m.pk) AS roles,
                                  array_agg(m.content ORDER BY m.pk) AS contents,
                                  array_agg(m.tokens ORDER BY m.pk) AS tokens
                           FROM messages m
                           WHERE t.i = ANY(v_open) AND m.session_id = t.session OFFSET 0) h ON true
        LEFT JOIN LATERAL (SELECT k.status, k.body FROM idempotency_keys k
                           WHERE t.i = ANY(v_open) AND k.account_id = t.account
                             AND k.session_id = t.session AND k.key = t.key OFFSET 0) k ON true
        LEFT JOIN LATERAL (SELECT (COALESCE((SELECT x.tokens FROM usage_totals x
                                             WHERE x.account_id = t.account
                                               AND x.period_start = t.period), 0)
                                 + COALESCE((SELECT SUM(x.tokens) FROM usage_shards x
                                             WHERE x.account_id = t.account
                                               AND x.period_start = t.period), 0))::BIGINT
                                  AS tokens OFFSET 0) u ON true
        ORDER BY t.i;
    END $$;

    -- The writes of a batch's turns, given in the order of their accounts (p_write false: a
    -- refusal or a replay, whose request is counted and nothing written). New sessions first,
    -- once their accounts' rows are locked (in order) each with at most the live sessions its
    -- admission decided on (p_max_live, counting the account's new sessions before it in the
    -- batch); SQLSTATE CVR01 when one has more, or another transaction created a session
    -- first. Then the user messages, the accepted responses' records and the turns in flight;
    -- then every turn's request counted, an account's together, accounts in order: within the
    -- connection's shard's allowance, or by a refill counting them all; SQLSTATE CVQ03 when
    -- the caller's share of what the limit leaves does not cover them (for one request: the
    -- limit is reached). Then the ledger's rows.
    CREATE OR REPLACE FUNCTION convo_turn_write_n(p_write BOOLEAN[], p_accounts BIGINT[],
        p_sessions TEXT[], p_create BOOLEAN[], p_max_live BIGINT[], p_now BIGINT[],
        p_messages TEXT[], p_roles TEXT[], p_contents TEXT[], p_tokens BIGINT[],
        p_metadata TEXT[], p_keys TEXT[], p_statuses INTEGER[], p_bodies TEXT[],
        p_replica TEXT, p_replies TEXT[], p_periods BIGINT[], p_limits BIGINT[])
    RETURNS VOID LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
        SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
        c RECORD;
        v_made BIGINT;
    BEGIN
        IF true = ANY(p_create) THEN
            PERFORM 1 FROM accounts a
            WHERE a.id = ANY(ARRAY(SELECT t.account FROM unnest(p_write, p_create, p_accounts)
                                       t(w, c, account) WHERE t.w AND t.c))
            ORDER BY a.id FOR UPDATE;
            IF EXISTS (
                SELECT 1
                FROM (SELECT t.account, t.max_live,
                             row_number() OVER (PARTITION BY t.account ORDER BY t.i) - 1 AS before
                      FROM unnest(p_write, p_create, p_accounts, p_max_live)
                           WITH ORDINALITY t(w, c, account, max_live, i)
                      WHERE t.w AND t.c) t
                WHERE ((SELECT a.live_sessions FROM accounts a WHERE a.id = t.account)
                       + t.before <= t.max_live) IS NOT TRUE) THEN
                RAISE EXCEPTION 'the account''s sessions changed' USING ERRCODE = 'CVR01';
            END IF;
            INSERT INTO sessions (id, account_id, created_at)
            SELECT t.session, t.account, t.now
            FROM unnest(p_write, p_create, p_sessions, p_accounts, p_now)
                 WITH ORDINALITY t(w, c, session, account, now, i)
            WHERE t.w AND t.c ORDER BY t.i
            ON CONFLICT (id) DO NOTHING;
            GET DIAGNOSTICS v_made = ROW_COUNT;
            IF v_made <> (SELECT count(*) FROM unnest(p_write, p_create) t(w, c) WHERE t.w AND t.c) THEN
                RAISE EXCEPTION 'a session was created concurrently' USING ERRCODE = 'CVR01';
            END IF;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
        SELECT t.message, t.session, t.role, t.content, t.tokens, t.metadata, t.now
        FROM unnest(p_write, p_messages, p_sessions, p_roles, p_contents, p_tokens, p_metadata, p_now)
             WITH ORDINALITY t(w, message, session, role, content, tokens, metadata, now, i)
        WHERE t.w ORDER BY t.i;
        INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
        SELECT t.account, t.session, t.key, t.status, t.body, t.now
        FROM unnest(p_write, p_accounts, p_sessions, p_keys, p_statuses, p_bodies, p_now)
             WITH ORDINALITY t(w, account, session, key, status, body, now, i)
        WHERE t.w AND t.key IS NOT NULL AND t.status IS NOT NULL ORDER BY t.i
        ON CONFLICT (account_id, session_id, key) DO UPDATE
        SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        INSERT INTO turns (session_id, replica, account_id, reply_id, user_message_id, created_at,
                           idempotency_key)
        SELECT t.session, p_replica, t.account, t.reply, t.message, t.now, t.key
        FROM unnest(p_write, p_sessions, p_accounts, p_replies, p_messages, p_now, p_keys)
             WITH ORDINALITY t(w, session, account, reply, message, now, key, i)
        WHERE t.w ORDER BY t.i;
        FOR c IN SELECT t.account, t.period, t.lim, count(*) AS k
                 FROM unnest(p_accounts, p_periods, p_limits) AS t(account, period, lim)
                 GROUP BY t.account, t.period, t.lim ORDER BY t.account, t.period, t.lim LOOP
            IF NOT convo_count_within(c.account, c.period, c.lim, c.k)
               AND NOT convo_usage_refill_n(c.account, c.period, c.lim, c.k) THEN
                RAISE EXCEPTION 'the limit leaves this shard too little for the batch' USING ERRCODE = 'CVQ03';
            END IF;
        END LOOP;
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        SELECT t.message, t.account, t.session, t.role, t.tokens, t.now
        FROM unnest(p_write, p_messages, p_accounts, p_sessions, p_roles, p_tokens, p_now)
             WITH ORDINALITY t(w, message, account, session, role, tokens, now, i)
        WHERE t.w ORDER BY t.i;
    END $$;

    -- Stores each reply of a batch and ends its turn, their sessions locked first in the
    -- order of their ids; each one's outcome, in the order given: 0 stored; 1 the session is
    -- not live (nothing stored); 2 its turn is gone, rolled back by another replica (nothing
    -- stored). A batch holds one reply per session (a session has one turn at a time).
    CREATE OR REPLACE FUNCTION convo_turn_complete_n(p_accounts BIGINT[], p_sessions TEXT[],
        p_replies TEXT[], p_role TEXT, p_contents TEXT[], p_tokens BIGINT[], p_created BIGINT[],
        p_keys TEXT[], p_statuses INTEGER[], p_bodies TEXT[], p_now BIGINT[], p_finish TEXT[])
    RETURNS INTEGER[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
        SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
        v_live BIGINT[];
        v_ended BIGINT[];
    BEGIN
        PERFORM 1 FROM sessions s WHERE s.id = ANY(p_sessions) ORDER BY s.id COLLATE "C" FOR UPDATE;
        SELECT COALESCE(array_agg(t.i), '{}') INTO v_live
        FROM unnest(p_accounts, p_sessions) WITH ORDINALITY t(account, session, i)
        WHERE (SELECT s.account_id = t.account AND s.deleted_at IS NULL
               FROM sessions s WHERE s.id = t.session) IS TRUE;
        WITH ended AS (
            DELETE FROM turns u
            WHERE u.session_id = ANY(ARRAY(SELECT p_sessions[i] FROM unnest(v_live) i))
              AND u.reply_id = p_replies[array_position(p_sessions, u.session_id)]
            RETURNING u.session_id)
        SELECT COALESCE(array_agg(array_position(p_sessions, ended.session_id)), '{}')
        INTO v_ended FROM ended;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at,
                              finish_reason)
        SELECT t.reply, t.session, p_role, t.content, t.tokens, NULL, t.created, t.finish
        FROM unnest(p_sessions, p_replies, p_contents, p_tokens, p_created, p_finish)
             WITH ORDINALITY t(session, reply, content, tokens, created, finish, i)
        WHERE t.i = ANY(v_ended) ORDER BY t.i;
        INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
        SELECT t.account, t.session, t.key, t.status, t.body, t.now
        FROM unnest(p_accounts, p_sessions, p_keys, p_statuses, p_bodies, p_now)
             WITH ORDINALITY t(account, session, key, status, body, now, i)
        WHERE t.i = ANY(v_ended) AND t.key IS NOT NULL ORDER BY t.i
        ON CONFLICT (account_id, session_id, key) DO UPDATE
        SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        SELECT t.reply, t.account, t.session, p_role, t.tokens, t.created
        FROM unnest(p_accounts, p_sessions, p_replies, p_tokens, p_created)
             WITH ORDINALITY t(account, session, reply, tokens, created, i)
        WHERE t.i = ANY(v_ended) ORDER BY t.i;
        RETURN ARRAY(SELECT CASE WHEN g = ANY(v_ended) THEN 0 WHEN g = ANY(v_live) THEN 2 ELSE 1 END
                     FROM generate_series(1, cardinality(p_sessions)) g ORDER BY g);
    END $$;

    -- The ledger's tokens go to the connection's shard once per statement, an account's rows
    -- summed (a batch's ledger rows are one statement), instead of once per row (migration
    -- 3's row trigger, dropped). Shards in the order of their accounts, as a batch locks them.
    CREATE FUNCTION convo_message_log_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP <> 'INSERT' THEN
            INSERT INTO usage_shards (account_id, period_start, shard, tokens)
            SELECT r.account_id, convo_period_start(r.created_at), convo_usage_shard(), -SUM(r.tokens)
            FROM removed r GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (account_id, period_start, shard)
            DO UPDATE SET tokens = usage_shards.tokens + excluded.tokens;
        END IF;
        IF TG_OP <> 'DELETE' THEN
            INSERT INTO usage_shards (account_id, period_start, shard, tokens)
            SELECT a.account_id, convo_period_start(a.created_at), convo_usage_shard(), SUM(a.tokens)
            FROM added a GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (account_id, period_start, shard)
            DO UPDATE SET tokens = usage_shards.tokens + excluded.tokens;
        END IF;
        RETURN NULL;
    END $$;
    DROP TRIGGER message_log_totals ON message_log;
    CREATE TRIGGER message_log_added AFTER INSERT ON message_log
        REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION convo_message_log_tokens();
    CREATE TRIGGER message_log_removed AFTER DELETE ON message_log
        REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION convo_message_log_tokens();
    CREATE TRIGGER message_log_changed AFTER UPDATE ON message_log
        REFERENCING OLD TABLE AS removed NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION convo_message_log_tokens();
    "#,
    // 12: an account whose request limit is reached no longer fails the batch it is in. A
    // batch that met such an account kept nothing and all its turns ran alone, so one client
    // sending on after its limit (every answer a 429) made every batch of every other account
    // fail with it: measured, 1,000 keys' POSTs/s fell from 2,363 to 991 under one exhausted
    // key's 133 requests a second. Its turns are now refused in the batch (nothing written,
    // nothing counted) and the others written. `convo_turn_write_n` (an older build's) is this
    // function raising CVQ03 when it refused anything, as before.
    r#"
    -- convo_turn_write_n's writes, except for the turns of accounts whose request limit is
    -- reached: the requests are counted first, an account's together (within its shard's
    -- allowance, or by a refill counting them all); an account the refill finds at its limit
    -- (the fold leaves it no request) is refused whole, its turns written nothing, and returned;
    -- SQLSTATE CVQ03 when the limit leaves the account some requests but the caller's share does
    -- not cover the batch's (its turns then run alone). Then, as convo_turn_write_n did, the
    -- live sessions of the accounts creating sessions checked (CVR01), the rows written. Locks
    -- in the order of a turn: sessions (convo_turn_facts_n), accounts creating sessions,
    -- counter shards by account.
    CREATE FUNCTION convo_turn_write_counted_n(p_write BOOLEAN[], p_accounts BIGINT[],
        p_sessions TEXT[], p_create BOOLEAN[], p_max_live BIGINT[], p_now BIGINT[],
        p_messages TEXT[], p_roles TEXT[], p_contents TEXT[], p_tokens BIGINT[],
        p_metadata TEXT[], p_keys TEXT[], p_statuses INTEGER[], p_bodies TEXT[],
        p_replica TEXT, p_replies TEXT[], p_periods BIGINT[], p_limits BIGINT[])
    RETURNS BIGINT[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
        SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
        c RECORD;
        v_made BIGINT;
        v_refused BIGINT[] := '{}';
        v_write BOOLEAN[];
    BEGIN
        IF true = ANY(p_create) THEN
            PERFORM 1 FROM accounts a
            WHERE a.id = ANY(ARRAY(SELECT t.account FROM unnest(p_write, p_create, p_accounts)
                                       t(w, c, account) WHERE t.w AND t.c))
            ORDER BY a.id FOR UPDATE;
        END IF;
        FOR c IN SELECT t.account, t.period, t.lim, count(*) AS k
                 FROM unnest(p_accounts, p_periods, p_limits) AS t(account, period, lim)
                 GROUP BY t.account, t.period, t.lim ORDER BY t.account, t.period, t.lim LOOP
            IF convo_count_within(c.account, c.period, c.lim, c.k) THEN
                CONTINUE;
            END IF;
            -- The totals only grow within a month: read without a lock they may be behind, never
            -- ahead, so totals at the limit are a refusal without the refill's locks.
            IF (SELECT x.requests FROM usage_totals x
                WHERE x.account_id = c.account AND x.period_start = c.period) >= c.lim THEN
                v_refused := v_refused || c.account;
            ELSIF NOT convo_usage_refill_n(c.account, c.period, c.lim, c.k) THEN
                -- The refill folded every shard into the totals under their locks: exact.
                IF (SELECT x.requests FROM usage_totals x
                    WHERE x.account_id = c.account AND x.period_start = c.period) >= c.lim THEN
                    v_refused := v_refused || c.account;
                ELSE
                    RAISE EXCEPTION 'the limit leaves this shard too little for the batch' USING ERRCODE = 'CVQ03';
                END IF;
            END IF;
        END LOOP;
        v_write := ARRAY(SELECT t.w AND t.account <> ALL(v_refused)
                         FROM unnest(p_write, p_accounts) WITH ORDINALITY t(w, account, i) ORDER BY t.i);
        IF true = ANY(p_create) THEN
            IF EXISTS (
                SELECT 1
                FROM (SELECT t.account, t.max_live,
                             row_number() OVER (PARTITION BY t.account ORDER BY t.i) - 1 AS before
                      FROM unnest(v_write, p_create, p_accounts, p_max_live)
                           WITH ORDINALITY t(w, c, account, max_live, i)
                      WHERE t.w AND t.c) t
                WHERE ((SELECT a.live_sessions FROM accounts a WHERE a.id = t.account)
                       + t.before <= t.max_live) IS NOT TRUE) THEN
                RAISE EXCEPTION 'the account''s sessions changed' USING ERRCODE = 'CVR01';
            END IF;
            INSERT INTO sessions (id, account_id, created_at)
            SELECT t.session, t.account, t.now
            FROM unnest(v_write, p_create, p_sessions, p_accounts, p_now)
                 WITH ORDINALITY t(w, c, session, account, now, i)
            WHERE t.w AND t.c ORDER BY t.i
            ON CONFLICT (id) DO NOTHING;
            GET DIAGNOSTICS v_made = ROW_COUNT;
            IF v_made <> (SELECT count(*) FROM unnest(v_write, p_create) t(w, c) WHERE t.w AND t.c) THEN
                RAISE EXCEPTION 'a session was created concurrently' USING ERRCODE = 'CVR01';
            END IF;
        END IF;
        INSERT INTO messages (id, session_id, role, content, tokens, metadata, created_at)
        SELECT t.message, t.session, t.role, t.content, t.tokens, t.metadata, t.now
        FROM unnest(v_write, p_messages, p_sessions, p_roles, p_contents, p_tokens, p_metadata, p_now)
             WITH ORDINALITY t(w, message, session, role, content, tokens, metadata, now, i)
        WHERE t.w ORDER BY t.i;
        INSERT INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
        SELECT t.account, t.session, t.key, t.status, t.body, t.now
        FROM unnest(v_write, p_accounts, p_sessions, p_keys, p_statuses, p_bodies, p_now)
             WITH ORDINALITY t(w, account, session, key, status, body, now, i)
        WHERE t.w AND t.key IS NOT NULL AND t.status IS NOT NULL ORDER BY t.i
        ON CONFLICT (account_id, session_id, key) DO UPDATE
        SET status = excluded.status, body = excluded.body, created_at = excluded.created_at;
        INSERT INTO turns (session_id, replica, account_id, reply_id, user_message_id, created_at,
                           idempotency_key)
        SELECT t.session, p_replica, t.account, t.reply, t.message, t.now, t.key
        FROM unnest(v_write, p_sessions, p_accounts, p_replies, p_messages, p_now, p_keys)
             WITH ORDINALITY t(w, session, account, reply, message, now, key, i)
        WHERE t.w ORDER BY t.i;
        INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
        SELECT t.message, t.account, t.session, t.role, t.tokens, t.now
        FROM unnest(v_write, p_messages, p_accounts, p_sessions, p_roles, p_tokens, p_now)
             WITH ORDINALITY t(w, message, account, session, role, tokens, now, i)
        WHERE t.w ORDER BY t.i;
        RETURN v_refused;
    END $$;

    -- For replicas of older builds during an upgrade: a batch that refused an account keeps
    -- nothing (CVQ03), and its turns run alone, as before this migration.
    CREATE OR REPLACE FUNCTION convo_turn_write_n(p_write BOOLEAN[], p_accounts BIGINT[],
        p_sessions TEXT[], p_create BOOLEAN[], p_max_live BIGINT[], p_now BIGINT[],
        p_messages TEXT[], p_roles TEXT[], p_contents TEXT[], p_tokens BIGINT[],
        p_metadata TEXT[], p_keys TEXT[], p_statuses INTEGER[], p_bodies TEXT[],
        p_replica TEXT, p_replies TEXT[], p_periods BIGINT[], p_limits BIGINT[])
    RETURNS VOID LANGUAGE plpgsql AS $$
    BEGIN
        IF cardinality(convo_turn_write_counted_n(p_write, p_accounts, p_sessions, p_create,
               p_max_live, p_now, p_messages, p_roles, p_contents, p_tokens, p_metadata, p_keys,
               p_statuses, p_bodies, p_replica, p_replies, p_periods, p_limits)) > 0 THEN
            RAISE EXCEPTION 'the request limit is reached' USING ERRCODE = 'CVQ03';
        END IF;
    END $$;
    "#,
    // 13: a request other than a send refused at its limit takes no lock and writes nothing.
    // `convo_count_request` refused by raising CVQ01 from a refill, which locked the totals row
    // and the account's 32 shards and rewrote them, and the replica then folded them again in a
    // transaction of its own: 33 rows locked and rewritten for every refused request, which
    // also made the account's other requests wait. `convo_count_request_2` answers whether it
    // counted instead of raising, and refuses on totals at the limit as a batch does
    // (migration 12); `convo_count_request` stays for replicas of older builds.
    r#"
    -- Counts one request, within the connection's shard's allowance or by a refill that
    -- counts it; false when the request limit is reached (nothing counted). Totals at the limit
    -- (read without a lock: they only grow within a month) refuse without the refill's locks;
    -- a refill that finds the limit reached keeps its fold, so that the totals then show it.
    -- SQLSTATE CVQ02 as convo_count_within.
    CREATE FUNCTION convo_count_request_2(p_account BIGINT, p_period BIGINT, p_limit BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    BEGIN
        IF convo_count_within(p_account, p_period, p_limit, 1) THEN
            RETURN true;
        END IF;
        IF (SELECT x.requests FROM usage_totals x
            WHERE x.account_id = p_account AND x.period_start = p_period) >= p_limit THEN
            RETURN false;
        END IF;
        RETURN convo_usage_refill(p_account, p_period, p_limit);
    END $$;
    "#,
    // 14: the database's own id (`Storage::database_id`), made once with the schema and the
    // same for every replica: a client that finds another one knows the database is new, not
    // its sessions deleted (SQLite's migration 9).
    r#"
    CREATE TABLE database_identity (id TEXT NOT NULL);
    INSERT INTO database_identity (id) VALUES ('db_' || replace(gen_random_uuid()::text, '-', ''));
    "#,
    // 15: a replica keeps the histories it read (history_cache.rs) and reads only what came
    // after: `convo_turn_facts_2` is `convo_turn_facts_n` given, per turn, the change count and
    // the last message (`pk`) of the history the replica holds, and reading only the messages
    // after that one while the count is the session's; it answers the count and the last
    // message it knows of. A session's messages are only appended while nothing else changes
    // them (each send writes under its session's lock, in `pk` order); any other change (a
    // deletion, an update, a truncation, by whoever runs it) adds one to the session's count in
    // `message_changes`, so a kept history is never used past one. The table holds a session
    // id and a number, as the session's tombstone does; a session never changed has no row.
    // `convo_turn_facts_n` stays for replicas of older builds during an upgrade.
    r#"
    CREATE TABLE message_changes (
        session_id TEXT   PRIMARY KEY,
        changes    BIGINT NOT NULL
    );

    CREATE FUNCTION convo_messages_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN
            INSERT INTO message_changes (session_id, changes)
            SELECT s.id, 1 FROM sessions s ORDER BY s.id COLLATE "C"
            ON CONFLICT (session_id) DO UPDATE SET changes = message_changes.changes + 1;
        ELSIF TG_OP = 'UPDATE' THEN
            INSERT INTO message_changes (session_id, changes)
            SELECT x.session_id, 1
            FROM (SELECT r.session_id FROM removed r UNION SELECT a.session_id FROM added a) x
            ORDER BY x.session_id COLLATE "C"
            ON CONFLICT (session_id) DO UPDATE SET changes = message_changes.changes + 1;
        ELSE
            INSERT INTO message_changes (session_id, changes)
            SELECT x.session_id, 1 FROM (SELECT DISTINCT r.session_id FROM removed r) x
            ORDER BY x.session_id COLLATE "C"
            ON CONFLICT (session_id) DO UPDATE SET changes = message_changes.changes + 1;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER messages_removed AFTER DELETE ON messages
        REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION convo_messages_changed();
    CREATE TRIGGER messages_updated AFTER UPDATE ON messages
        REFERENCING OLD TABLE AS removed NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION convo_messages_changed();
    CREATE TRIGGER messages_truncated AFTER TRUNCATE ON messages
        FOR EACH STATEMENT EXECUTE FUNCTION convo_messages_changed();

    -- convo_turn_facts_n, where each turn also gives the change count (p_changes) and the last
    -- message (p_after) of the history its replica holds (-1 and 0 for none): of an open
    -- session whose count is still p_changes, only the messages after p_after are read. Each
    -- turn's row also answers the session's count and the last message of the history it
    -- answers with what the replica holds (NULL where no history is read).
    CREATE FUNCTION convo_turn_facts_2(p_accounts BIGINT[], p_sessions TEXT[],
        p_keys TEXT[], p_expired BIGINT, p_periods BIGINT[], p_changes BIGINT[], p_after BIGINT[])
    RETURNS TABLE (n BIGINT, o_owner BIGINT, o_deleted_at BIGINT, o_busy BOOLEAN,
        o_live_sessions BIGINT, o_roles TEXT[], o_contents TEXT[], o_tokens BIGINT[],
        o_replay_status INTEGER, o_replay_body TEXT, o_tokens_used BIGINT, o_changes BIGINT,
        o_last BIGINT)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
        SET enable_hashjoin = off SET enable_mergejoin = off AS $$
    DECLARE
        v_open BIGINT[];
    BEGIN
        PERFORM 1 FROM sessions s WHERE s.id = ANY(p_sessions) ORDER BY s.id COLLATE "C" FOR UPDATE;
        SELECT COALESCE(array_agg(t.i), '{}') INTO v_open
        FROM unnest(p_accounts, p_sessions) WITH ORDINALITY t(account, session, i)
        WHERE (SELECT s.account_id = t.account AND s.deleted_at IS NULL
               FROM sessions s WHERE s.id = t.session) IS TRUE
          AND NOT EXISTS (SELECT 1 FROM turns u WHERE u.session_id = t.session);
        FOR i IN 1 .. cardinality(p_sessions) LOOP
            IF p_keys[i] IS NOT NULL AND i = ANY(v_open) THEN
                DELETE FROM idempotency_keys k
                WHERE k.account_id = p_accounts[i] AND k.session_id = p_sessions[i]
                  AND k.key = p_keys[i] AND k.created_at <= p_expired;
            END IF;
        END LOOP;
        RETURN QUERY
        SELECT t.i, s.account_id, s.deleted_at,
               (s.account_id = t.account AND s.deleted_at IS NULL AND t.i <> ALL(v_open)) IS TRUE,
               a.live_sessions, h.roles, h.contents, h.tokens, k.status, k.body, u.tokens,
               c.changes, CASE WHEN t.i = ANY(v_open) THEN COALESCE(h.last, c.after) END
        FROM unnest(p_accounts, p_sessions, p_keys, p_periods, p_changes, p_after)
             WITH ORDINALITY t(account, session, key, period, held_changes, held_after, i)
        LEFT JOIN LATERAL (SELECT s.account_id, s.deleted_at FROM sessions s
                           WHERE s.id = t.session OFFSET 0) s ON true
        LEFT JOIN LATERAL (SELECT a.live_sessions FROM accounts a
                           WHERE s.account_id IS NULL AND a.id = t.account OFFSET 0) a ON true
        LEFT JOIN LATERAL (SELECT x.changes,
                                  CASE WHEN x.changes = t.held_changes THEN t.held_after ELSE 0 END
                                      AS after
                           FROM (SELECT COALESCE((SELECT e.changes FROM message_changes e
                                                  WHERE e.session_id = t.session), 0) AS changes
                                 OFFSET 0) x) c ON true
        LEFT JOIN LATERAL (SELECT array_agg(m.role ORDER BY m.pk) AS roles,
                                  array_agg(m.content ORDER BY m.pk) AS contents,
                                  array_agg(m.tokens ORDER BY m.pk) AS tokens,
                                  max(m.pk) AS last
                           FROM messages m
                           WHERE t.i = ANY(v_open) AND m.session_id = t.session
                             AND m.pk > c.after OFFSET 0) h ON true
        LEFT JOIN LATERAL (SELECT k.status, k.body FROM idempotency_keys k
                           WHERE t.i = ANY(v_open) AND k.account_id = t.account
                             AND k.session_id = t.session AND k.key = t.key OFFSET 0) k ON true
        LEFT JOIN LATERAL (SELECT (COALESCE((SELECT x.tokens FROM usage_totals x
                                             WHERE x.account_id = t.account
                                               AND x.period_start = t.period), 0)
                                 + COALESCE((SELECT SUM(x.tokens) FROM usage_shards x
                                             WHERE x.account_id = t.account
                                               AND x.period_start = t.period), 0))::BIGINT
                                  AS tokens OFFSET 0) u ON true
        ORDER BY t.i;
    END $$;
    "#,
    // 16: an account's counter shards are made as its connections first count, not all 32 at
    // its first refill. A replica's batch writers each write on one connection of their own
    // (mod.rs), so an account's sends count on one shard per replica; every turn's admission
    // sums the account's shards for its tokens, and summed 32 rows (most of them empty) where
    // one or two now hold everything. A connection that finds no shard of its own refills:
    // it makes its shard, folds the requests of the shards there are (their locks taken in
    // order, as before) and hands what the limit leaves out over them, its own first. The
    // tokens stay in the shards (summed by every reader, as before): a row the ledger's
    // trigger makes meanwhile, after the refill locked the others, is not folded, so the
    // refill must not zero what it did not sum; the totals' trigger (migration 5) still drops
    // the shards' tokens when a total is written into `usage_totals` by hand.
    r#"
    -- The share of p_left handed out over p_k shards that goes to the p_place-th (from 1).
    CREATE FUNCTION convo_share(p_left BIGINT, p_k INTEGER, p_place INTEGER)
    RETURNS BIGINT LANGUAGE SQL IMMUTABLE
    RETURN p_left / p_k + CASE WHEN p_place - 1 < p_left % p_k THEN 1 ELSE 0 END;

    CREATE OR REPLACE FUNCTION convo_usage_refill_n(p_account BIGINT, p_period BIGINT,
        p_limit BIGINT, p_n BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        n INTEGER := convo_usage_shards();
        me INTEGER := convo_usage_shard();
        v_shards SMALLINT[];
        v_requests BIGINT;
        v_total BIGINT;
        v_left BIGINT;
        v_count BIGINT;
    BEGIN
        INSERT INTO usage_totals (account_id, period_start) VALUES (p_account, p_period)
        ON CONFLICT (account_id, period_start) DO NOTHING;
        SELECT requests INTO v_total FROM usage_totals
        WHERE account_id = p_account AND period_start = p_period FOR UPDATE;
        INSERT INTO usage_shards (account_id, period_start, shard)
        VALUES (p_account, p_period, me)
        ON CONFLICT (account_id, period_start, shard) DO NOTHING;
        -- Only a refill, under the totals row's lock, gives a shard an allowance: a shard made
        -- after these locks (by the ledger's trigger) holds tokens only, and is left out.
        SELECT array_agg(x.shard ORDER BY x.shard), COALESCE(SUM(x.requests), 0)
        INTO v_shards, v_requests
        FROM (SELECT u.shard, u.requests FROM usage_shards u
              WHERE u.account_id = p_account AND u.period_start = p_period
              ORDER BY u.shard FOR UPDATE) x;
        IF v_requests <> 0 THEN
            UPDATE usage_totals SET requests = requests + v_requests
            WHERE account_id = p_account AND period_start = p_period
            RETURNING requests INTO v_total;
        END IF;
        v_left := GREATEST(p_limit - v_total, 0);
        -- What is left, handed out over the shards in the order of their distance from the
        -- caller's (first).
        v_shards := ARRAY(SELECT s FROM unnest(v_shards) s ORDER BY (s - me + n) % n);
        v_count := CASE WHEN convo_share(v_left, cardinality(v_shards), 1) >= p_n
                        THEN p_n ELSE 0 END;
        UPDATE usage_shards
        SET requests = CASE WHEN shard = me THEN v_count ELSE 0 END, request_limit = p_limit,
            allowance = convo_share(v_left, cardinality(v_shards), array_position(v_shards, shard))
        WHERE account_id = p_account AND period_start = p_period AND shard = ANY(v_shards);
        RETURN v_count > 0;
    END $$;
    "#,
    // 17: `turns_by_replica` (migration 2) goes: no statement reads it (the sweep for expired
    // leases, leases.rs, anti-joins the whole of `turns` with `replicas`, a hash join whatever
    // the table holds; a replica's own rollback finds its turn by session), and every turn
    // paid an insertion into it, its WAL record, and the dead entries its deletion leaves.
    r#"
    DROP INDEX IF EXISTS turns_by_replica;
    "#,
    // 18: `messages.session_id` and `turns.session_id` no longer reference `sessions` (migrations
    // 1 and 2). A session row is never deleted (a deletion sets `deleted_at` and deletes its
    // messages), and every message and turn is inserted under its session's lock after the
    // session is found live (or made in the same transaction: the batch functions, a fork), so
    // a reference cannot dangle; the checks were three queries of PostgreSQL's own
    // per POST, and a node served 7-14 % more POSTs/s without them (docs/perf-log.md, 7 Dec).
    r#"
    ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_session_id_fkey;
    ALTER TABLE turns DROP CONSTRAINT IF EXISTS turns_session_id_fkey;
    "#,
    // 19: a deleted session's row keeps nothing the user gave it (`TOMBSTONE`, mod.rs, clears
    // its title and origin now); the tombstones deleted before keep theirs no longer. Their
    // old versions are dead tuples of `sessions`, which the service's vacuum after a deletion
    // now covers (`VACUUMED_TABLES`).
    r#"
    UPDATE sessions SET title = NULL, forked_from_session = NULL, forked_from_message = NULL
    WHERE deleted_at IS NOT NULL
      AND (title IS NOT NULL OR forked_from_session IS NOT NULL OR forked_from_message IS NOT NULL);
    "#,
    // 20: the sessions deleted lately, found by every replica at each heartbeat
    // (`PgStore::deleted_since`, leases.rs) so that each forgets what it keeps of them (a
    // history it holds, the engine's saved state) whichever replica deleted them. Only
    // tombstones are in the index: a send never changes `deleted_at`, so it is not written by
    // one.
    r#"
    CREATE INDEX IF NOT EXISTS sessions_deleted ON sessions (deleted_at)
        WHERE deleted_at IS NOT NULL;
    "#,
    // 21: a tombstone keeps nothing the user gave the session whoever writes it: a replica of
    // an older build during an upgrade (whose deletion sets `deleted_at` alone), or an
    // operator's SQL. Every update that leaves a row deleted clears its title and origin (a
    // deletion, and any later update of a tombstone); sends never update `sessions`, so no
    // send pays for it.
    r#"
    CREATE OR REPLACE FUNCTION convo_tombstone_keeps_nothing() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        NEW.title := NULL;
        NEW.forked_from_session := NULL;
        NEW.forked_from_message := NULL;
        RETURN NEW;
    END $$;
    DROP TRIGGER IF EXISTS sessions_tombstone ON sessions;
    CREATE TRIGGER sessions_tombstone BEFORE UPDATE ON sessions
        FOR EACH ROW WHEN (NEW.deleted_at IS NOT NULL)
        EXECUTE FUNCTION convo_tombstone_keeps_nothing();
    "#,
    // 22: what the session list and the account stream's events tell of a session (its
    // messages, tokens, last activity and first user message) is summed once and kept, so that
    // a list reads each session's summary and only the messages after it (`session_rows!`,
    // mod.rs) instead of every message of the account (316–428 ms a list with 500,000 of
    // them: scripts/perf/session-list.sh, docs/performance.md). A summary holds the sums of
    // the session's messages up to one (`last_pk`) while its change count was `changes`
    // (`message_changes`, migration 15): as for the histories a replica keeps, messages are
    // appended under their session's lock in `pk` order, so what a list reads after `last_pk`
    // is all that came since, and any other change to them changes the count, after which the
    // summary is summed anew. It holds numbers only (the first user message by its `pk`); a
    // trigger deletes it at every update that leaves the session's row a tombstone, whoever
    // writes it (as 21's clears the title). The list writes it (where it read `SUMMARY_AFTER`
    // messages or more, rows.rs), so sends never pay for it. Re-runnable, like 20 and 21.
    r#"
    CREATE TABLE IF NOT EXISTS session_summaries (
        session_id TEXT   PRIMARY KEY,
        changes    BIGINT NOT NULL,
        last_pk    BIGINT NOT NULL,
        messages   BIGINT NOT NULL,
        tokens     BIGINT NOT NULL,
        last_at    BIGINT,
        first_user BIGINT
    );
    CREATE OR REPLACE FUNCTION convo_tombstone_forgets_summary() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM session_summaries WHERE session_id = NEW.id;
        RETURN NULL;
    END $$;
    DROP TRIGGER IF EXISTS sessions_tombstone_summary ON sessions;
    CREATE TRIGGER sessions_tombstone_summary AFTER UPDATE ON sessions
        FOR EACH ROW WHEN (NEW.deleted_at IS NOT NULL)
        EXECUTE FUNCTION convo_tombstone_forgets_summary();
    "#,
    // 23: when a session's last exchange was last undone (`undo_last_exchange`, the undoing
    // replica's clock), found by every replica at each heartbeat and before each reply
    // (`PgStore::undone_since`, `deletions.rs`) so that each engine keeps nothing of the
    // undone messages, whichever replica undid them. NULL until an undo; only undone
    // sessions are in the index. A replica of an older build during an upgrade undoes without
    // setting it (its undos are not found elsewhere). Re-runnable, like 20 to 22.
    r#"
    ALTER TABLE sessions ADD COLUMN IF NOT EXISTS undone_at BIGINT;
    CREATE INDEX IF NOT EXISTS sessions_undone ON sessions (undone_at)
        WHERE undone_at IS NOT NULL;
    "#,
];

/// Takes the advisory lock of `SCHEMA_LOCK` for the rest of `tx`, and lifts `LOCK_WAIT`
/// (mod.rs) for it: another replica may be migrating, and a migration waits for the tables'
/// users, as long as that takes.
pub(super) async fn lock_schema(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.batch_execute("SET LOCAL lock_timeout = 0").await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await?;
    Ok(())
}

/// Brings the schema to the newest version under the advisory lock.
pub async fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    lock_schema(&tx).await?;
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
