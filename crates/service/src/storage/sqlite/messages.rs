//! Sessions and their messages: starting a turn (the checks and the user message in one
//! transaction), completing or rolling it back, deleting a session.

use rusqlite::{Connection, OptionalExtension, params};

use super::idempotency::{self, Recorded};
use super::usage;
use crate::error::StoreError;
use crate::storage::rows::{
    Fork, ForkRequest, MessageRow, Reply, SUMMARY_AFTER, SessionRow, Undo, Undone,
};
use convo_core::admission::{self, Admission, SessionFacts, TurnFacts};
pub use convo_core::{
    HistoryEntry, SessionStatus, TurnRefusal, TurnStart, TurnStarted, UserMessage,
};
use convo_wire::{FinishReason, Role};

/// What `session_id` means to `account_id`: one look-up of the session's row.
pub fn session_status(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
) -> Result<SessionStatus, StoreError> {
    let row: Option<(i64, Option<i64>)> = conn
        .prepare_cached("SELECT account_id, deleted_at FROM sessions WHERE id = ?1")?
        .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        None => SessionStatus::Unused,
        Some((owner, None)) if owner == account_id => SessionStatus::Live,
        Some(_) => SessionStatus::Gone,
    })
}

/// The messages of a session, in conversation order.
pub fn history(conn: &Connection, session_id: &str) -> Result<Vec<HistoryEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT role, content, tokens FROM messages WHERE session_id = ?1 ORDER BY pk",
    )?;
    let rows = stmt.query_map([session_id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (role, content, tokens) = row?;
        let role = role.parse::<Role>().map_err(StoreError::Corrupt)?;
        out.push(HistoryEntry {
            role,
            content,
            tokens: tokens as u64,
        });
    }
    Ok(out)
}

/// In one transaction: gathers the facts of the turn (session state, idempotency record,
/// tokens and sessions used, stored context), lets `convo_core::admit` decide in the
/// documented order, then creates the session if needed and stores the user message.
pub fn start_turn(
    conn: &mut Connection,
    t: &TurnStart,
) -> Result<Result<TurnStarted, TurnRefusal>, StoreError> {
    let tx = conn.savepoint()?;
    let status = session_status(&tx, t.account.id, &t.session_id)?;
    let mut history = Vec::new();
    let session = match status {
        SessionStatus::Gone => SessionFacts::Gone,
        SessionStatus::Unused => SessionFacts::New {
            live_sessions: usage::active_sessions(&tx, t.account.id)?,
        },
        SessionStatus::Live => {
            history = self::history(&tx, &t.session_id)?;
            SessionFacts::Existing {
                stored_tokens: history.iter().map(|m| m.tokens).sum(),
            }
        }
    };
    // Records exist only for live sessions (deleting a session deletes them).
    let replay = match (&t.idempotency_key, status) {
        (Some(key), SessionStatus::Live) => {
            idempotency::lookup(&tx, t.account.id, &t.session_id, key, t.now_ms)?
        }
        _ => None,
    };
    let facts = TurnFacts {
        session,
        replay,
        tokens_used: usage::tokens_used(&tx, t.account.id, t.period_start_ms)?,
        limits: t.account.tier.limits(),
        message_tokens: t.message.tokens,
        max_context_tokens: t.max_context_tokens,
    };
    let (create_session, current) = match admission::admit(facts) {
        Admission::Refused(refusal) => return Ok(Err(refusal)),
        Admission::Replay(recorded) => {
            tx.commit()?;
            return Ok(Ok(TurnStarted::Replay(recorded)));
        }
        Admission::Admitted {
            create_session,
            context_tokens,
        } => (create_session, context_tokens),
    };
    if create_session {
        tx.prepare_cached("INSERT INTO sessions (id, account_id, created_at) VALUES (?1, ?2, ?3)")?
            .execute(params![t.session_id, t.account.id, t.now_ms])?;
    }
    let m = &t.message;
    insert_message(
        &tx,
        t.account.id,
        &t.session_id,
        &m.id,
        m.role,
        &m.content,
        m.tokens,
        m.metadata.as_deref(),
        t.now_ms,
        None,
    )?;
    if let (Some(key), Some(resp)) = (&t.idempotency_key, &t.accepted_response) {
        idempotency::record(&tx, t.account.id, &t.session_id, key, resp, t.now_ms)?;
    }
    tx.commit()?;
    history.push(HistoryEntry {
        role: m.role,
        content: m.content.clone(),
        tokens: m.tokens,
    });
    Ok(Ok(TurnStarted::Ready {
        history,
        context_tokens: current,
    }))
}

#[allow(clippy::too_many_arguments)]
fn insert_message(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    id: &str,
    role: Role,
    content: &str,
    tokens: u64,
    metadata: Option<&str>,
    created_at: i64,
    finish_reason: Option<FinishReason>,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO messages
         (id, session_id, role, content, tokens, metadata, created_at, finish_reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        id,
        session_id,
        role.as_str(),
        content,
        tokens as i64,
        metadata,
        created_at,
        finish_reason.map(FinishReason::as_str)
    ])?;
    conn.prepare_cached(
        "INSERT INTO message_log (message_id, account_id, session_id, role, tokens, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        id,
        account_id,
        session_id,
        role.as_str(),
        tokens as i64,
        created_at
    ])?;
    Ok(())
}

/// Stores the reply (and the 200 response under the idempotency key). Returns false, storing
/// nothing, when the session was deleted meanwhile.
pub fn complete_turn(
    conn: &mut Connection,
    account_id: i64,
    session_id: &str,
    reply: &Reply,
    idempotent: Option<(&str, &Recorded)>,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let tx = conn.savepoint()?;
    if session_status(&tx, account_id, session_id)? != SessionStatus::Live {
        return Ok(false);
    }
    insert_message(
        &tx,
        account_id,
        session_id,
        &reply.id,
        Role::Assistant,
        &reply.content,
        reply.tokens,
        None,
        reply.created_at_ms,
        Some(reply.finish_reason),
    )?;
    if let Some((key, resp)) = idempotent {
        idempotency::record(&tx, account_id, session_id, key, resp, now_ms)?;
    }
    tx.commit()?;
    Ok(true)
}

/// Undoes a turn whose reply failed: the user message (stored at `created_at_ms`), its ledger
/// row and its idempotency record go, so a retry with the same key starts afresh.
pub fn roll_back_turn(
    conn: &mut Connection,
    account_id: i64,
    session_id: &str,
    user_message_id: &str,
    created_at_ms: i64,
    idempotency_key: Option<&str>,
) -> Result<(), StoreError> {
    let tx = conn.savepoint()?;
    tx.execute(
        "DELETE FROM messages WHERE session_id = ?1 AND id = ?2",
        [session_id, user_message_id],
    )?;
    tx.execute(
        "DELETE FROM message_log WHERE account_id = ?1 AND created_at = ?2 AND message_id = ?3",
        params![account_id, created_at_ms, user_message_id],
    )?;
    if let Some(key) = idempotency_key {
        idempotency::forget(&tx, account_id, session_id, key)?;
    }
    tx.commit()?;
    Ok(())
}

/// Deletes a live session of the account: its messages and idempotency records go in one
/// transaction, the row stays as a tombstone without title or origin, and the WAL is
/// checkpointed so no content of it remains in the files. Returns false when there was no
/// such live session.
pub fn delete_session(
    conn: &mut Connection,
    account_id: i64,
    session_id: &str,
    now_ms: i64,
) -> Result<bool, StoreError> {
    // Run alone (it checkpoints after its commit), so in its own transaction, which takes
    // the write lock as it begins: beside another process on the file it waits rather than
    // fail (`run_group` in mod.rs says why a deferred one cannot).
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if session_status(&tx, account_id, session_id)? != SessionStatus::Live {
        return Ok(false);
    }
    tx.execute("DELETE FROM messages WHERE session_id = ?1", [session_id])?;
    tx.execute(
        "DELETE FROM idempotency_keys WHERE session_id = ?1",
        [session_id],
    )?;
    // The row stays as the session's tombstone: its id, account and times (`deletedSessionIds`
    // names it), nothing the user gave it.
    tx.execute(
        "UPDATE sessions
         SET deleted_at = ?1, title = NULL, forked_from_session = NULL, forked_from_message = NULL
         WHERE id = ?2",
        params![now_ms, session_id],
    )?;
    tx.commit()?;
    super::SqliteStore::checkpoint(conn)?;
    Ok(true)
}

/// The `SessionRow`s of the live sessions of account `?1` (`$filter` narrows them, `$order`
/// orders them), each summed from its kept summary and the messages after it (migration 11),
/// with what a new summary would hold: columns 9–13 are the messages read past the summary,
/// and the summary's last message, messages, tokens and first user message.
macro_rules! session_rows {
    ($filter:literal, $order:literal) => {
        concat!(
            "SELECT x.id, x.created_at, COALESCE(x.last_at, x.created_at), x.messages, x.tokens,
                    x.title, (SELECT f.content FROM messages f WHERE f.pk = x.first_user),
                    x.forked_from_session, x.forked_from_message,
                    x.read, x.last_pk, x.last_at, x.first_user
             FROM (
                SELECT s.id, s.created_at, s.title, s.forked_from_session, s.forked_from_message,
                       COUNT(m.pk) AS read,
                       COALESCE(MAX(m.pk), u.last_pk, 0) AS last_pk,
                       COALESCE(u.messages, 0) + COUNT(m.pk) AS messages,
                       COALESCE(u.tokens, 0) + COALESCE(SUM(m.tokens), 0) AS tokens,
                       COALESCE(max(u.last_at, MAX(m.created_at)), u.last_at, MAX(m.created_at))
                           AS last_at,
                       COALESCE(u.first_user, MIN(CASE WHEN m.role = 'user' THEN m.pk END))
                           AS first_user
                FROM sessions s
                LEFT JOIN session_summaries u ON u.session_id = s.id
                LEFT JOIN messages m ON m.session_id = s.id AND m.pk > COALESCE(u.last_pk, 0)
                WHERE s.account_id = ?1 AND s.deleted_at IS NULL ",
            $filter,
            " GROUP BY s.id) x ",
            $order
        )
    };
}

fn session_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: r.get(0)?,
        created_at_ms: r.get(1)?,
        last_activity_ms: r.get(2)?,
        messages: r.get::<_, i64>(3)? as u64,
        tokens: r.get::<_, i64>(4)? as u64,
        title: r.get(5)?,
        first_user_message: r.get(6)?,
        forked_from: match (r.get::<_, Option<String>>(7)?, r.get(8)?) {
            (Some(session), Some(message)) => Some((session, message)),
            _ => None,
        },
    })
}

/// A summary to keep (`session_summaries`, migration 11).
struct Summary {
    session_id: String,
    /// The last message summed.
    last_pk: i64,
    messages: i64,
    tokens: i64,
    /// The newest message's time.
    last_at: Option<i64>,
    /// The first user message.
    first_user: Option<i64>,
}

/// A row of `session_rows!` as its `SessionRow`, and the summary to keep where the list read
/// `SUMMARY_AFTER` messages or more past the one kept (a shorter session is read whole, which
/// costs less than writing its summary).
fn summed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(SessionRow, Option<Summary>)> {
    let row = session_row(r)?;
    let keep = (r.get::<_, i64>(9)? >= SUMMARY_AFTER)
        .then(|| -> rusqlite::Result<Summary> {
            Ok(Summary {
                session_id: row.id.clone(),
                last_pk: r.get(10)?,
                messages: row.messages as i64,
                tokens: row.tokens as i64,
                last_at: r.get(11)?,
                first_user: r.get(12)?,
            })
        })
        .transpose()?;
    Ok((row, keep))
}

/// The rows of `session_rows!` (`sql`) with `params`, keeping the summaries they call for once
/// the query is done (no table is written while the statement that reads it runs).
fn summed(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<SessionRow>, StoreError> {
    let rows: Vec<(SessionRow, Option<Summary>)> = conn
        .prepare_cached(sql)?
        .query_map(params, summed_row)?
        .collect::<Result<_, _>>()?;
    let mut keep = conn.prepare_cached(
        "INSERT OR REPLACE INTO session_summaries
             (session_id, last_pk, messages, tokens, last_at, first_user)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for s in rows.iter().filter_map(|(_, s)| s.as_ref()) {
        keep.execute(params![
            s.session_id,
            s.last_pk,
            s.messages,
            s.tokens,
            s.last_at,
            s.first_user
        ])?;
    }
    Ok(rows.into_iter().map(|(row, _)| row).collect())
}

/// The account's live sessions, most recently active first.
pub fn list_sessions(conn: &Connection, account_id: i64) -> Result<Vec<SessionRow>, StoreError> {
    summed(
        conn,
        session_rows!("", "ORDER BY 3 DESC, x.id"),
        [account_id],
    )
}

/// The ids of the account's sessions deleted at or after `since_ms`, most recent first.
pub fn deleted_sessions(
    conn: &Connection,
    account_id: i64,
    since_ms: i64,
) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id FROM sessions WHERE account_id = ?1 AND deleted_at >= ?2
         ORDER BY deleted_at DESC, id",
    )?;
    let rows = stmt.query_map(params![account_id, since_ms], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// `deleted_since`'s statement.
pub(super) const DELETED_SINCE: &str =
    "SELECT id, deleted_at FROM sessions WHERE deleted_at >= ?1 AND deleted_at IS NOT NULL";

/// The sessions of every account deleted at or after `since_ms`, with their deletion's time
/// (migration 12's index).
pub fn deleted_since(conn: &Connection, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
    let mut stmt = conn.prepare_cached(DELETED_SINCE)?;
    let rows = stmt.query_map([since_ms], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// `undone_since`'s statement.
pub(super) const UNDONE_SINCE: &str = "SELECT id, account_id, undone_at FROM sessions
     WHERE undone_at >= ?1 AND undone_at IS NOT NULL AND deleted_at IS NULL";

/// The live sessions of every account whose last exchange was undone at or after `since_ms`:
/// each one's id, account and the undo's time (migration 13's index).
pub fn undone_since(conn: &Connection, since_ms: i64) -> Result<Vec<Undone>, StoreError> {
    let mut stmt = conn.prepare_cached(UNDONE_SINCE)?;
    let rows = stmt.query_map([since_ms], |r| {
        Ok(Undone {
            session_id: r.get(0)?,
            account_id: r.get(1)?,
            at_ms: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A live session of the account as `list_sessions` gives it; `None` when it is not live.
pub fn session_summary(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
) -> Result<Option<SessionRow>, StoreError> {
    Ok(summed(
        conn,
        session_rows!("AND s.id = ?2", ""),
        params![account_id, session_id],
    )?
    .pop())
}

/// Sets the title of a live session of the account; false when there is none.
pub fn set_title(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    title: &str,
) -> Result<bool, StoreError> {
    let changed = conn.execute(
        "UPDATE sessions SET title = ?1 WHERE id = ?2 AND account_id = ?3 AND deleted_at IS NULL",
        params![title, session_id, account_id],
    )?;
    Ok(changed == 1)
}

/// Forks a session in one transaction: the checks in the documented order (source session,
/// message, new id, session limit), then the new session and copies of the messages under new
/// ids, with their times, tokens and metadata. The ledger (`message_log`) gets no rows: the
/// copies' tokens were counted once, in the source.
pub fn fork_session(conn: &mut Connection, f: &ForkRequest) -> Result<Fork, StoreError> {
    let tx = conn.savepoint()?;
    if session_status(&tx, f.account.id, &f.source)? != SessionStatus::Live {
        return Ok(Fork::NoSession);
    }
    let ids: Vec<String> = tx
        .prepare_cached("SELECT id FROM messages WHERE session_id = ?1 ORDER BY pk")?
        .query_map([&f.source], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let Some(length) = convo_core::sessions::fork_length(&ids, &f.message_id) else {
        return Ok(Fork::NoMessage);
    };
    if session_status(&tx, f.account.id, &f.new_session_id)? != SessionStatus::Unused {
        return Ok(Fork::Exists);
    }
    let live = usage::active_sessions(&tx, f.account.id)?;
    if convo_core::admission::session_limit_reached(live, f.account.tier.limits()) {
        return Ok(Fork::SessionLimit);
    }
    tx.prepare_cached(
        "INSERT INTO sessions (id, account_id, created_at, forked_from_session, forked_from_message)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        f.new_session_id,
        f.account.id,
        f.now_ms,
        f.source,
        f.message_id
    ])?;
    type Copied = (String, String, i64, Option<String>, i64, Option<String>);
    let rows: Vec<Copied> = tx
        .prepare_cached(
            "SELECT role, content, tokens, metadata, created_at, finish_reason FROM messages
             WHERE session_id = ?1 ORDER BY pk LIMIT ?2",
        )?
        .query_map(params![f.source, length as i64], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    for (role, content, tokens, metadata, created_at, finish) in rows {
        tx.prepare_cached(
            "INSERT INTO messages
             (id, session_id, role, content, tokens, metadata, created_at, finish_reason)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            crate::ids::new_message_id(),
            f.new_session_id,
            role,
            content,
            tokens,
            metadata,
            created_at,
            finish
        ])?;
    }
    tx.commit()?;
    Ok(Fork::Forked)
}

/// Removes the session's last exchange (`convo_core::sessions::last_exchange_start`) in one
/// transaction, the `Idempotency-Key` records of its sends turned into 409 `exchange_undone`
/// (`convo_core::sessions::records_after_undo`). A turn in flight is the route's to refuse:
/// SQLite's service is one process, and its session lock is held for the whole turn. As after
/// a deletion, the WAL is checkpointed, so the undone messages and the records' old answers
/// leave the files (`secure_delete` zeroes them in the database file).
pub fn undo_last_exchange(
    conn: &mut Connection,
    account_id: i64,
    session_id: &str,
) -> Result<Undo, StoreError> {
    // Run alone and checkpointed after its commit, as `delete_session` is (which says why the
    // transaction takes the write lock as it begins).
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    if session_status(&tx, account_id, session_id)? != SessionStatus::Live {
        return Ok(Undo::NoSession);
    }
    let messages: Vec<(i64, String, String)> = tx
        .prepare_cached("SELECT pk, id, role FROM messages WHERE session_id = ?1 ORDER BY pk")?
        .query_map([session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let roles = messages
        .iter()
        .map(|(_, _, role)| role.parse::<Role>().map_err(StoreError::Corrupt))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(start) = convo_core::sessions::last_exchange_start(&roles) else {
        return Ok(Undo::NothingToUndo);
    };
    tx.execute(
        "DELETE FROM messages WHERE session_id = ?1 AND pk >= ?2",
        params![session_id, messages[start].0],
    )?;
    // Another process on the file finds it (`undone_since`).
    tx.execute(
        "UPDATE sessions SET undone_at = ?2 WHERE id = ?1",
        params![session_id, crate::time::now_ms()],
    )?;
    let removed: Vec<String> = messages[start..]
        .iter()
        .map(|(_, id, _)| id.clone())
        .collect();
    let records = idempotency::of_session(&tx, account_id, session_id)?;
    for (key, answer) in convo_core::sessions::records_after_undo(&records, &removed) {
        idempotency::rewrite(&tx, account_id, session_id, &key, &answer)?;
    }
    tx.commit()?;
    super::SqliteStore::checkpoint(conn)?;
    Ok(Undo::Removed(removed))
}

pub fn session_messages(
    conn: &Connection,
    session_id: &str,
) -> Result<Vec<MessageRow>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, role, content, tokens, metadata, created_at, finish_reason FROM messages WHERE session_id = ?1 ORDER BY pk",
    )?;
    let rows = stmt.query_map([session_id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, Option<String>>(6)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (id, role, content, tokens, metadata, created_at_ms, finish) = row?;
        out.push(MessageRow {
            id,
            role: role.parse::<Role>().map_err(StoreError::Corrupt)?,
            content,
            tokens: tokens as u64,
            metadata,
            created_at_ms,
            finish_reason: crate::storage::rows::finish_reason(finish)?,
        });
    }
    Ok(out)
}
