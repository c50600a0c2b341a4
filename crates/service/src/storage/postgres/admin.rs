//! The operator's list of accounts on PostgreSQL (`Storage::admin_accounts`): one query per
//! page, the same numbers on every replica. An account's month is `usage_month` (the totals
//! and the shards' counts not yet folded), its key hints come through `api_keys_by_account`
//! (migration 7) and its last activity from the head of `message_log`'s key, both for the
//! page's rows only. Names sort by bytes (`COLLATE "C"`), as on SQLite. Also the pool's use, for `/metrics`.

use deadpool_postgres::GenericClient;

use super::PgStore;
use super::batch::BatchUse;
use super::history_cache::HistoryUse;
use crate::error::StoreError;
use crate::storage::rows::{AccountPage, AccountRow, AccountsQuery, split_hints};

/// The page `query` asks for, and how many accounts match it.
pub(super) async fn accounts(
    client: &impl GenericClient,
    query: &AccountsQuery,
) -> Result<AccountPage, StoreError> {
    let sql = format!(
        "WITH limits(tier, requests, tokens, sessions) AS (VALUES {limits}),
         month AS (
            SELECT account_id, requests, tokens FROM usage_month WHERE period_start = $1
         ),
         listed AS (
            SELECT a.id, a.tier,
                   COALESCE(u.requests, 0)::BIGINT AS requests,
                   COALESCE(u.tokens, 0)::BIGINT AS tokens,
                   a.live_sessions AS sessions,
                   GREATEST(COALESCE(u.requests, 0)::FLOAT8 / l.requests,
                            COALESCE(u.tokens, 0)::FLOAT8 / l.tokens,
                            a.live_sessions::FLOAT8 / l.sessions) AS share,
                   COALESCE((SELECT k.key_suffix FROM api_keys k WHERE k.account_id = a.id
                             ORDER BY k.created_at, k.key_hash LIMIT 1), '') COLLATE \"C\" AS first_hint
            FROM accounts a
            JOIN limits l ON l.tier = a.tier
            LEFT JOIN month u ON u.account_id = a.id
            WHERE ($2::TEXT IS NULL OR a.tier = $2 OR a.id::TEXT = $2
                   OR EXISTS (SELECT 1 FROM api_keys k WHERE k.account_id = a.id
                              AND strpos(lower(k.key_suffix), lower($2)) > 0))
              AND ($3::BIGINT[] IS NULL OR a.id = ANY($3))
         ),
         page AS (
            SELECT *, COUNT(*) OVER () AS total FROM listed
            ORDER BY {order} LIMIT $4 OFFSET $5
         )
         SELECT id, tier, requests, tokens, sessions, share, total,
                (SELECT string_agg(k.key_suffix, ',' ORDER BY k.created_at, k.key_hash)
                 FROM api_keys k WHERE k.account_id = page.id) AS hints,
                (SELECT MAX(m.created_at) FROM message_log m WHERE m.account_id = page.id)
         FROM page ORDER BY {order}",
        limits = AccountsQuery::limits_sql(),
        order = query.order_sql(),
    );
    let stmt = client.prepare_cached(&sql).await?;
    let limit = i64::from(query.limit);
    let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
    let rows = client
        .query(
            &stmt,
            &[
                &query.period_start_ms,
                &query.q,
                &query.ids,
                &limit,
                &offset,
            ],
        )
        .await?;
    let mut total = rows.first().map(|r| r.get::<_, i64>(6).max(0) as u64);
    let rows = rows
        .iter()
        .map(|r| AccountRow {
            id: r.get(0),
            tier: r.get(1),
            requests: r.get::<_, i64>(2).max(0) as u64,
            tokens: r.get::<_, i64>(3).max(0) as u64,
            sessions: r.get::<_, i64>(4).max(0) as u64,
            share: r.get(5),
            key_hints: split_hints(&r.get::<_, Option<String>>(7).unwrap_or_default()),
            last_active_ms: r.get(8),
        })
        .collect();
    if total.is_none() && query.offset > 0 {
        // A page past the end: count the matches alone.
        let everything = AccountsQuery {
            offset: 0,
            limit: u32::MAX,
            ..query.clone()
        };
        total = Some(Box::pin(accounts(client, &everything)).await?.rows.len() as u64);
    }
    Ok(AccountPage {
        total: total.unwrap_or(0),
        rows,
    })
}

/// How the replica's connection pool is used now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections open (idle or in use), and the most there may be.
    pub size: usize,
    pub max_size: usize,
    /// Open connections not in use.
    pub available: usize,
    /// Requests waiting for a connection.
    pub waiting: usize,
    /// How turn starts and replies were written (batch.rs).
    pub starts: BatchUse,
    pub replies: BatchUse,
    /// The histories the replica holds (history_cache.rs).
    pub histories: HistoryUse,
}

impl PgStore {
    /// The pool's use now (`/metrics`).
    pub fn pool_use(&self) -> PoolUse {
        let status = self.pool.status();
        PoolUse {
            size: status.size,
            max_size: status.max_size,
            available: status.available,
            waiting: status.waiting,
            starts: self.starts.used(),
            replies: self.completions.used(),
            histories: self.history.held(),
        }
    }
}
