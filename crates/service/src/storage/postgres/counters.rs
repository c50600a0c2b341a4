//! The month's counters of an account on PostgreSQL, split so that its requests do not queue
//! on one row (migration 3). `usage_totals` holds the totals as of the last fold; each of
//! `convo_usage_shards()` rows of `usage_shards` holds what was counted since on the
//! connections whose backend pid falls on it, and the view `usage_month` sums both.
//!
//! - **Tokens** (a soft limit, `used >= limit` refuses): the ledger's trigger adds a message's
//!   tokens to its connection's shard, so no two connections of an account share a row lock.
//! - **Requests** (exact): each shard also holds an allowance, its share of what the limit
//!   leaves. A request is counted on its connection's shard while the shard's count is below
//!   its allowance (`convo_count_request`, SQLSTATE `CVQ01` when not). Then
//!   `convo_usage_rebalance` locks the totals row and every shard (in order), folds the shards
//!   into the totals and hands what is left out again, the caller's shard first; with nothing
//!   left the request is refused. Every counted request is within some allowance and the
//!   allowances never sum past the limit, so the limit is exact across any number of replicas;
//!   and a refusal comes only from a fold that found the limit reached.

use deadpool_postgres::ClientWrapper;

use super::super::rows::RequestCount;
use crate::error::StoreError;

/// SQLSTATE of `convo_count_request` when its shard has no allowance left.
pub(super) const ALLOWANCE_USED_UP: &str = "CVQ01";

/// How often one request may find its shard's allowance taken and hand the rest out again
/// before it gives up (near the limit, other requests take the last units first).
pub(super) const REBALANCES: u32 = 64;

/// The statement that counts one request on the connection's shard.
pub(super) const COUNT: &str = "SELECT convo_count_request($1, $2, $3)";

/// Whether `e` is the error PostgreSQL raised with `sqlstate`.
pub(super) fn raised(e: &tokio_postgres::Error, sqlstate: &str) -> bool {
    e.code().is_some_and(|c| c.code() == sqlstate)
}

/// The request limit of the account, as PostgreSQL stores it.
pub(super) fn request_limit(request: &RequestCount) -> i64 {
    i64::try_from(request.account().tier.limits().requests).unwrap_or(i64::MAX)
}

/// Folds the account's shards and hands out what is left of its limit (its own transaction).
/// False when nothing is left: the request is over the limit.
pub(super) async fn rebalance(
    c: &ClientWrapper,
    request: &RequestCount,
) -> Result<bool, StoreError> {
    let stmt = c
        .prepare_cached("SELECT convo_usage_rebalance($1, $2, $3)")
        .await?;
    let left: i64 = c
        .query_one(
            &stmt,
            &[
                &request.account().id,
                &request.period_start_ms(),
                &request_limit(request),
            ],
        )
        .await?
        .get(0);
    Ok(left > 0)
}

/// Counts one request in a transaction of its own (one statement); false when the limit is
/// reached (nothing counted).
pub(super) async fn count(c: &ClientWrapper, request: &RequestCount) -> Result<bool, StoreError> {
    let stmt = c.prepare_cached(COUNT).await?;
    for _ in 0..REBALANCES {
        let counted = c
            .execute(
                &stmt,
                &[
                    &request.account().id,
                    &request.period_start_ms(),
                    &request_limit(request),
                ],
            )
            .await;
        match counted {
            Ok(_) => return Ok(true),
            Err(e) if raised(&e, ALLOWANCE_USED_UP) => {
                if !rebalance(c, request).await? {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(gave_up())
}

/// The error of a request that kept finding its share taken.
pub(super) fn gave_up() -> StoreError {
    StoreError::Commit("the request budget kept being taken by concurrent requests".into())
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
