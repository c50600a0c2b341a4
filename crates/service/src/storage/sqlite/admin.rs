//! The operator's list of accounts on SQLite (`Storage::admin_accounts`): one query per page.
//! The usage of each account is its row of `usage_totals` for the period and its
//! `live_sessions`; its key hints come through `api_keys_by_account` (migration 7), its last
//! activity through `message_log_by_account`, both for the page's rows only.

use rusqlite::{Connection, params};

use crate::error::StoreError;
use crate::storage::rows::{AccountPage, AccountRow, AccountsQuery, split_hints};

/// The page `query` asks for, and how many accounts match it.
pub fn accounts(conn: &Connection, query: &AccountsQuery) -> Result<AccountPage, StoreError> {
    let sql = format!(
        "WITH limits(tier, requests, tokens, sessions) AS (VALUES {limits}),
         listed AS (
            SELECT a.id, a.tier,
                   COALESCE(u.requests, 0) AS requests,
                   COALESCE(u.tokens, 0) AS tokens,
                   a.live_sessions AS sessions,
                   max(COALESCE(u.requests, 0) * 1.0 / l.requests,
                       COALESCE(u.tokens, 0) * 1.0 / l.tokens,
                       a.live_sessions * 1.0 / l.sessions) AS share,
                   COALESCE((SELECT k.key_suffix FROM api_keys k WHERE k.account_id = a.id
                             ORDER BY k.created_at, k.key_hash LIMIT 1), '') AS first_hint
            FROM accounts a
            JOIN limits l ON l.tier = a.tier
            LEFT JOIN usage_totals u ON u.account_id = a.id AND u.period_start = ?1
            WHERE (?2 IS NULL OR a.tier = ?2 OR CAST(a.id AS TEXT) = ?2
                   OR EXISTS (SELECT 1 FROM api_keys k WHERE k.account_id = a.id
                              AND instr(lower(k.key_suffix), lower(?2)) > 0))
              AND (?3 IS NULL OR a.id IN (SELECT value FROM json_each(?3)))
         ),
         page AS (
            SELECT *, COUNT(*) OVER () AS total FROM listed
            ORDER BY {order} LIMIT ?4 OFFSET ?5
         )
         SELECT id, tier, requests, tokens, sessions, share, total,
                (SELECT group_concat(k.key_suffix, ',' ORDER BY k.created_at, k.key_hash)
                 FROM api_keys k WHERE k.account_id = page.id) AS hints,
                (SELECT MAX(m.created_at) FROM message_log m WHERE m.account_id = page.id)
         FROM page ORDER BY {order}",
        limits = AccountsQuery::limits_sql(),
        order = query.order_sql(),
    );
    let ids = query
        .ids
        .as_ref()
        .map(|ids| serde_json::to_string(ids).unwrap_or_else(|_| "[]".into()));
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut total = None;
    let rows = stmt
        .query_map(
            params![
                query.period_start_ms,
                query.q,
                ids,
                i64::from(query.limit),
                i64::try_from(query.offset).unwrap_or(i64::MAX),
            ],
            |r| {
                Ok((
                    AccountRow {
                        id: r.get(0)?,
                        tier: r.get(1)?,
                        requests: r.get::<_, i64>(2)?.max(0) as u64,
                        tokens: r.get::<_, i64>(3)?.max(0) as u64,
                        sessions: r.get::<_, i64>(4)?.max(0) as u64,
                        share: r.get(5)?,
                        key_hints: split_hints(&r.get::<_, Option<String>>(7)?.unwrap_or_default()),
                        last_active_ms: r.get(8)?,
                    },
                    r.get::<_, i64>(6)?,
                ))
            },
        )?
        .map(|row| {
            row.map(|(account, n)| {
                total = Some(n.max(0) as u64);
                account
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let total = match total {
        Some(total) => total,
        // A page past the end: count the matches alone.
        None if query.offset > 0 => {
            let everything = AccountsQuery {
                offset: 0,
                limit: u32::MAX,
                ..query.clone()
            };
            accounts(conn, &everything)?.rows.len() as u64
        }
        None => 0,
    };
    Ok(AccountPage { total, rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DbLocation, Tier};
    use crate::storage::SqliteStore;
    use crate::storage::sqlite::accounts::ensure_keys;
    use crate::storage::sqlite::usage::admit_request;
    use convo_wire::admin::AccountSort;

    fn query(sort: AccountSort) -> AccountsQuery {
        AccountsQuery {
            period_start_ms: 0,
            sort,
            limit: 10,
            offset: 0,
            q: None,
            ids: None,
        }
    }

    /// Sorted, filtered and paged in SQL; the share is the largest of the three.
    #[test]
    fn pages_are_sorted_filtered_and_counted() {
        let store = SqliteStore::open(&DbLocation::Memory).unwrap();
        store
            .blocking(|c| {
                let keys = vec![
                    ("service_live_aaaaaaaaaaaaaaaaFREE".to_string(), Tier::Free),
                    ("service_live_aaaaaaaaaaaaaaaaPRO1".to_string(), Tier::Pro),
                    ("service_live_aaaaaaaaaaaaaaaaPRO2".to_string(), Tier::Pro),
                ];
                let accounts = ensure_keys(c, &keys, 1)?;
                let by_hint = |hint: &str| {
                    let key = keys.iter().find(|(k, _)| k.ends_with(hint)).unwrap();
                    accounts[&crate::storage::rows::hash_key(&key.0)]
                };
                for _ in 0..10 {
                    admit_request(c, by_hint("FREE"), 0)?;
                }
                for _ in 0..20 {
                    admit_request(c, by_hint("PRO2"), 0)?;
                }
                let page = accounts_page(c, query(AccountSort::Share))?;
                assert_eq!(page.total, 3);
                let hints: Vec<_> = page.rows.iter().map(|r| r.key_hints[0].clone()).collect();
                assert_eq!(hints, ["FREE", "PRO2", "PRO1"]);
                assert_eq!(page.rows[0].share, 10.0 / 1000.0);
                assert_eq!(page.rows[0].requests, 10);
                let page = accounts_page(c, query(AccountSort::Requests))?;
                assert_eq!(page.rows[0].key_hints, ["PRO2"]);
                let page = accounts_page(c, query(AccountSort::Name))?;
                let hints: Vec<_> = page.rows.iter().map(|r| r.key_hints[0].clone()).collect();
                assert_eq!(hints, ["FREE", "PRO1", "PRO2"]);
                let filtered = accounts_page(
                    c,
                    AccountsQuery {
                        q: Some("pro".into()),
                        limit: 1,
                        offset: 1,
                        ..query(AccountSort::Name)
                    },
                )?;
                assert_eq!(filtered.total, 2);
                assert_eq!(filtered.rows.len(), 1);
                assert_eq!(filtered.rows[0].key_hints, ["PRO2"]);
                let past = accounts_page(
                    c,
                    AccountsQuery {
                        q: Some("free".into()),
                        offset: 5,
                        ..query(AccountSort::Name)
                    },
                )?;
                assert_eq!((past.total, past.rows.len()), (1, 0));
                let one = accounts_page(
                    c,
                    AccountsQuery {
                        ids: Some(vec![by_hint("PRO1").id]),
                        ..query(AccountSort::Share)
                    },
                )?;
                assert_eq!(one.rows.len(), 1);
                assert_eq!(one.rows[0].tier, "pro");
                Ok(())
            })
            .unwrap();
    }

    fn accounts_page(c: &mut Connection, q: AccountsQuery) -> Result<AccountPage, StoreError> {
        accounts(c, &q)
    }
}
