//! The month's counters of an account on PostgreSQL, split so that its requests do not queue
//! on one row (migration 3). `usage_totals` holds the totals as of the last fold; each row of
//! `usage_shards` (one of `convo_usage_shards()` per account, made when a connection whose
//! backend pid falls on it first counts on the account: migration 16) holds what was counted
//! since on those connections, and the view `usage_month` sums both.
//!
//! - **Tokens** (a soft limit, `used >= limit` refuses): the ledger's trigger adds a message's
//!   tokens to its connection's shard, so no two connections of an account share a row lock;
//!   they stay there for the month (a refill folds requests only).
//! - **Requests** (exact): each shard also holds an allowance, its share of what the limit
//!   leaves. `convo_count_request_2` (migration 13) counts a request on its connection's
//!   shard while the shard's count is below its allowance; when it is not, it refuses the
//!   request if the totals row is at the limit (read without a lock: the totals only grow
//!   within a month), and otherwise, in the same statement, `convo_usage_refill` (migration 5)
//!   makes the caller's shard if it has none, locks the totals row and every shard (in
//!   order), folds the shards' requests into the totals and, if the limit leaves any request,
//!   counts this one on the caller's shard and hands the rest out again over the shards
//!   there are, the caller's shard first; with nothing left it keeps the fold (so the next
//!   request is refused on the totals, without a lock) and the request is refused. (A shard
//!   read with allowance left and found without when updated raises `CVQ02`: the transaction
//!   runs again, holding no shard's lock, see migration 5.) Every counted request is within
//!   some allowance and the allowances never sum past the limit, so the limit is exact across
//!   any number of replicas; a refusal comes only from totals at the limit, which a fold put
//!   there; and a request that found its shard dry is counted by its own refill, so no
//!   concurrent refill can take its unit first (when the fold and the count were separate
//!   steps, requests near the limit could lose their unit to other folds 64 times in a row).
//!   A refused request writes nothing once the totals show the limit.
//!   A batch of turns counts an account's requests together the same way, within the
//!   allowance or by a refill that counts them all (migrations 10 and 12). An account the
//!   refill finds at its limit is refused in the batch (nothing of its turns written or
//!   counted; the fold is kept), and the batch goes on; when the limit leaves the account
//!   some requests but the caller's share does not cover them, the batch keeps nothing
//!   (SQLSTATE `CVQ03`) and its turns are counted one at a time.

use deadpool_postgres::ClientWrapper;

use super::super::rows::RequestCount;
use crate::error::StoreError;

/// SQLSTATE of `convo_count_within` (and so of `convo_count_request_2`) when its shard's
/// allowance was taken between its read and its update (nothing counted): the transaction runs
/// again, and then refills the shard.
pub(super) const TAKEN: &str = "CVQ02";

/// How often one request may find its shard taken before it gives up. Each time, a
/// concurrent request was counted or a refill ran between two statements of one function;
/// the next run finds the shard dry and refills it (counting itself), so more than a few in
/// a row do not happen.
pub(super) const TAKEN_TIMES: u32 = 64;

/// The statement that counts one request on the connection's shard: true when counted.
const COUNT: &str = "SELECT convo_count_request_2($1, $2, $3)";

/// Whether `e` is the error PostgreSQL raised with `sqlstate`.
pub(super) fn raised(e: &tokio_postgres::Error, sqlstate: &str) -> bool {
    e.code().is_some_and(|c| c.code() == sqlstate)
}

/// The request limit of the account, as PostgreSQL stores it.
pub(super) fn request_limit(request: &RequestCount) -> i64 {
    i64::try_from(request.account().tier.limits().requests).unwrap_or(i64::MAX)
}

/// Counts one request in a transaction of its own (one statement); false when the limit is
/// reached (nothing counted).
pub(super) async fn count(c: &ClientWrapper, request: &RequestCount) -> Result<bool, StoreError> {
    let stmt = c.prepare_cached(COUNT).await?;
    for _ in 0..TAKEN_TIMES {
        let counted = c
            .query_one(
                &stmt,
                &[
                    &request.account().id,
                    &request.period_start_ms(),
                    &request_limit(request),
                ],
            )
            .await;
        match counted {
            Ok(row) => return Ok(row.get(0)),
            Err(e) if raised(&e, TAKEN) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(taken_too_often())
}

/// The error of a request whose shard kept being taken (see `TAKEN_TIMES`).
pub(super) fn taken_too_often() -> StoreError {
    StoreError::Contended("the request's counter kept changing concurrently".into())
}

/// The month's requests and tokens of the account.
pub(super) async fn month(
    c: &ClientWrapper,
    account_id: i64,
    period_start_ms: i64,
) -> Result<(u64, u64), StoreError> {
    let stmt = c
        .prepare_cached(
            "SELECT COALESCE(SUM(requests), 0)::BIGINT, COALESCE(SUM(tokens), 0)::BIGINT
             FROM usage_month WHERE account_id = $1 AND period_start = $2",
        )
        .await?;
    let row = c.query_one(&stmt, &[&account_id, &period_start_ms]).await?;
    Ok((
        row.get::<_, i64>(0).max(0) as u64,
        row.get::<_, i64>(1).max(0) as u64,
    ))
}
