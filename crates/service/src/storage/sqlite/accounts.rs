//! Accounts and their API keys. Each configured key is its own account; the key is stored only
//! as a SHA-256 hash, so restarting with the same key finds the same account and its history.

use std::collections::HashMap;

pub use crate::storage::rows::hash_key;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::StoreError;
use convo_core::Tier;

use convo_core::Account;

/// Makes sure every configured key has an account with the configured tier; returns the
/// accounts by key hash.
pub fn ensure_keys(
    conn: &mut Connection,
    keys: &[(String, Tier)],
    now_ms: i64,
) -> Result<HashMap<String, Account>, StoreError> {
    let tx = conn.savepoint()?;
    let mut accounts = HashMap::new();
    for (key, tier) in keys {
        let hash = hash_key(key);
        let existing: Option<i64> = tx
            .query_row(
                "SELECT account_id FROM api_keys WHERE key_hash = ?1",
                [&hash],
                |r| r.get(0),
            )
            .optional()?;
        let id = match existing {
            Some(id) => {
                tx.execute(
                    "UPDATE accounts SET tier = ?1 WHERE id = ?2",
                    params![tier.as_str(), id],
                )?;
                id
            }
            None => {
                tx.execute(
                    "INSERT INTO accounts (tier, created_at) VALUES (?1, ?2)",
                    params![tier.as_str(), now_ms],
                )?;
                let id = tx.last_insert_rowid();
                let suffix = convo_wire::api_key::key_hint(key);
                tx.execute(
                    "INSERT INTO api_keys (key_hash, key_suffix, account_id, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![hash, suffix, id, now_ms],
                )?;
                id
            }
        };
        accounts.insert(hash, Account { id, tier: *tier });
    }
    tx.commit()?;
    Ok(accounts)
}
