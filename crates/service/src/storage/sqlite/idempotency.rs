//! `Idempotency-Key` records: scoped to (account, session), kept 24 hours, holding the first
//! successful response (status and body) so that a retry gets exactly that response.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;

use crate::storage::rows::IDEMPOTENCY_TTL_MS as TTL_MS;

pub use convo_core::Recorded;

/// The live record of `key`, forgetting it first if it is older than 24 h.
pub fn lookup(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    key: &str,
    now_ms: i64,
) -> Result<Option<Recorded>, StoreError> {
    conn.prepare_cached(
        "DELETE FROM idempotency_keys WHERE account_id = ?1 AND session_id = ?2 AND key = ?3 AND created_at <= ?4",
    )?
    .execute(params![account_id, session_id, key, now_ms - TTL_MS])?;
    Ok(conn
        .prepare_cached(
            "SELECT status, body FROM idempotency_keys WHERE account_id = ?1 AND session_id = ?2 AND key = ?3",
        )?
        .query_row(
            params![account_id, session_id, key],
            |r| {
                Ok(Recorded {
                    status: r.get::<_, i64>(0)? as u16,
                    body: r.get(1)?,
                })
            },
        )
        .optional()?)
}

pub fn record(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    key: &str,
    response: &Recorded,
    now_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO idempotency_keys (account_id, session_id, key, status, body, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![account_id, session_id, key, response.status as i64, response.body, now_ms])?;
    Ok(())
}

/// Every record of the session, as (key, recorded answer).
pub fn of_session(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
) -> Result<Vec<(String, Recorded)>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT key, status, body FROM idempotency_keys WHERE account_id = ?1 AND session_id = ?2",
        )?
        .query_map(params![account_id, session_id], |r| {
            Ok((
                r.get(0)?,
                Recorded {
                    status: r.get::<_, i64>(1)? as u16,
                    body: r.get(2)?,
                },
            ))
        })?
        .collect::<Result<_, _>>()?)
}

/// Writes over the answer of a record, keeping its time (so it still expires 24 h after the
/// send).
pub fn rewrite(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    key: &str,
    response: &Recorded,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE idempotency_keys SET status = ?4, body = ?5
         WHERE account_id = ?1 AND session_id = ?2 AND key = ?3",
    )?
    .execute(params![
        account_id,
        session_id,
        key,
        response.status as i64,
        response.body
    ])?;
    Ok(())
}

pub fn forget(
    conn: &Connection,
    account_id: i64,
    session_id: &str,
    key: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "DELETE FROM idempotency_keys WHERE account_id = ?1 AND session_id = ?2 AND key = ?3",
        params![account_id, session_id, key],
    )?;
    Ok(())
}
