//! Request counting and the aggregates behind `/v1/analytics/usage` and `/v1/analytics/metrics`.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;
use crate::storage::rows::{MetricCounts, RequestCount, UsageCounts};
use convo_core::Account;

/// Counting a request is SQLite's part here.
impl RequestCount {
    /// On the writer thread: counts the request (one statement, kept whatever `then` does) and
    /// runs `then`; when the limit is reached, writes nothing and returns `None`.
    pub(crate) fn run<T>(
        &self,
        conn: &mut Connection,
        then: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let admission = admit_request(conn, self.account(), self.period_start_ms())?;
        match admission {
            RequestAdmission::Admitted => then(conn).map(Some),
            RequestAdmission::OverLimit => Ok(None),
        }
    }
}

/// Outcome of counting a request against the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestAdmission {
    /// Logged; the request may proceed.
    Admitted,
    /// The request limit of the period is reached; nothing was logged.
    OverLimit,
}

/// Counts one request of `account` in the billing period `[period_start, …)` unless the
/// request limit is already reached: one check and one statement (migration 4: the count
/// itself, no log row), so the caller's transaction needs no savepoint of its own for it.
pub fn admit_request(
    conn: &Connection,
    account: Account,
    period_start_ms: i64,
) -> Result<RequestAdmission, StoreError> {
    let used = requests_used(conn, account.id, period_start_ms)?;
    if used >= account.tier.limits().requests {
        return Ok(RequestAdmission::OverLimit);
    }
    conn.prepare_cached(
        "INSERT INTO usage_totals (account_id, period_start, requests) VALUES (?1, ?2, 1)
         ON CONFLICT (account_id, period_start) DO UPDATE SET requests = requests + 1",
    )?
    .execute(params![account.id, period_start_ms])?;
    Ok(RequestAdmission::Admitted)
}

/// The running totals of `account` in the billing period starting at `period_start_ms`:
/// requests (counted by `admit_request`) and tokens (kept by the triggers of migration 2 on
/// `message_log`). One primary-key lookup.
pub fn period_totals(
    conn: &Connection,
    account_id: i64,
    period_start_ms: i64,
) -> Result<(u64, u64), StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT requests, tokens FROM usage_totals WHERE account_id = ?1 AND period_start = ?2",
    )?;
    let totals: Option<(i64, i64)> = stmt
        .query_row(params![account_id, period_start_ms], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (requests, tokens) = totals.unwrap_or((0, 0));
    Ok((requests.max(0) as u64, tokens.max(0) as u64))
}

/// Requests of the account counted in the billing period starting at `period_start_ms`.
pub fn requests_used(
    conn: &Connection,
    account_id: i64,
    period_start_ms: i64,
) -> Result<u64, StoreError> {
    Ok(period_totals(conn, account_id, period_start_ms)?.0)
}

/// Message tokens of the account in the billing period starting at `period_start_ms`.
pub fn tokens_used(
    conn: &Connection,
    account_id: i64,
    period_start_ms: i64,
) -> Result<u64, StoreError> {
    Ok(period_totals(conn, account_id, period_start_ms)?.1)
}

/// Sessions of the account that exist (not deleted).
pub fn active_sessions(conn: &Connection, account_id: i64) -> Result<u64, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT live_sessions FROM accounts WHERE id = ?1")?;
    let n: Option<i64> = stmt.query_row([account_id], |r| r.get(0)).optional()?;
    Ok(n.unwrap_or(0).max(0) as u64)
}

pub fn usage_counts(
    conn: &Connection,
    account_id: i64,
    period_start_ms: i64,
) -> Result<UsageCounts, StoreError> {
    let (requests, tokens) = period_totals(conn, account_id, period_start_ms)?;
    Ok(UsageCounts {
        requests,
        tokens,
        sessions: active_sessions(conn, account_id)?,
    })
}

pub fn metric_counts(
    conn: &Connection,
    account_id: i64,
    start_ms: i64,
    end_ms: i64,
) -> Result<MetricCounts, StoreError> {
    let mut m = MetricCounts {
        sessions_total: conn.query_row(
            "SELECT COUNT(*) FROM sessions WHERE account_id = ?1 AND created_at >= ?2 AND created_at < ?3",
            params![account_id, start_ms, end_ms],
            |r| r.get::<_, i64>(0),
        )? as u64,
        ..MetricCounts::default()
    };
    let (active, duration): (i64, i64) = conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(last - first), 0) FROM (
            SELECT MIN(created_at) AS first, MAX(created_at) AS last FROM message_log
            WHERE account_id = ?1 AND created_at >= ?2 AND created_at < ?3
            GROUP BY session_id)",
        params![account_id, start_ms, end_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    m.sessions_active = active as u64;
    m.duration_ms_sum = duration;
    let mut stmt = conn.prepare(
        "SELECT role, COUNT(*), COALESCE(SUM(tokens), 0) FROM message_log
         WHERE account_id = ?1 AND created_at >= ?2 AND created_at < ?3 GROUP BY role",
    )?;
    let rows = stmt.query_map(params![account_id, start_ms, end_ms], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    })?;
    for row in rows {
        let (role, count, tokens) = row?;
        m.add_role(&role, count as u64, tokens as u64)?;
    }
    Ok(m)
}
