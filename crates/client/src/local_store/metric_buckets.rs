//! Complete metrics buckets, kept per account: a bucket that ended before it was asked for
//! never changes, so the metrics view asks for it once, not once per run
//! (`tui::metrics`, docs/tui.md "Metrics view").
//!
//! An account is the service and the key that see the same numbers: `embedded` for the
//! service in this data directory, else a hash of the base URL and the API key (the key itself
//! is never written here). See `tui::workers::account_of`.

use chrono::{DateTime, SecondsFormat, Utc};
use rusqlite::params;

use super::write_tx;
use super::{Store, StoreError};
use crate::api::{Granularity, Metrics};
use crate::series::KnownBucket;
use crate::series::buckets::Bucket;

/// Buckets kept per account and granularity; older ones are dropped first. 90 days by the
/// hour is 2,160.
pub const KEEP_PER_GRANULARITY: i64 = 5_000;

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl Store {
    /// Keeps these complete buckets of `account` (replacing any kept before).
    pub fn keep_buckets(&self, account: &str, buckets: &[KnownBucket]) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        for k in buckets {
            let json = serde_json::to_string(&k.metrics).map_err(|e| StoreError::Corrupt {
                path: self.path.to_path_buf(),
                column: "metric_buckets.metrics",
                value: e.to_string(),
            })?;
            tx.execute(
                "INSERT OR REPLACE INTO metric_buckets (account, granularity, start, end_at, metrics)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    account,
                    k.granularity.as_str(),
                    time(k.bucket.start),
                    time(k.bucket.end),
                    json
                ],
            )
            .map_err(|e| self.err(e))?;
        }
        let granularities: std::collections::BTreeSet<&str> =
            buckets.iter().map(|k| k.granularity.as_str()).collect();
        for g in granularities {
            tx.execute(
                "DELETE FROM metric_buckets WHERE account = ?1 AND granularity = ?2 AND start NOT IN
                   (SELECT start FROM metric_buckets WHERE account = ?1 AND granularity = ?2
                    ORDER BY start DESC LIMIT ?3)",
                params![account, g, KEEP_PER_GRANULARITY],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Every complete bucket kept for `account`. A row this version cannot read is skipped
    /// (it is only a cache: the bucket is asked for again).
    pub fn known_buckets(&self, account: &str) -> Result<Vec<KnownBucket>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT granularity, start, end_at, metrics FROM metric_buckets
                 WHERE account = ?1 ORDER BY granularity, start",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![account], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (g, start, end, json) = row.map_err(|e| self.err(e))?;
            let parsed = (|| {
                Some(KnownBucket {
                    granularity: g.parse::<Granularity>().ok()?,
                    bucket: Bucket {
                        start: DateTime::parse_from_rfc3339(&start).ok()?.to_utc(),
                        end: DateTime::parse_from_rfc3339(&end).ok()?.to_utc(),
                    },
                    metrics: Box::new(serde_json::from_str::<Metrics>(&json).ok()?),
                })
            })();
            match parsed {
                Some(k) => out.push(k),
                None => tracing::warn!(account, start, "unreadable metrics bucket skipped"),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn metrics(messages: u64) -> Box<Metrics> {
        let json = serde_json::json!({
            "period": {"start": "2026-11-20T00:00:00Z", "end": "2026-11-20T01:00:00Z", "granularity": "hour"},
            "sessions": {"total": 1, "active": 1, "averageDuration": 0.0},
            "messages": {"total": messages, "averagePerSession": 1.0, "userMessages": messages, "assistantMessages": 0},
            "tokens": {"total": 10, "prompt": 10, "completion": 0, "averagePerMessage": 10.0}
        });
        Box::new(serde_json::from_value(json).unwrap())
    }

    fn bucket(hour: u32) -> Bucket {
        let start = Utc.with_ymd_and_hms(2026, 11, 20, hour, 0, 0).unwrap();
        Bucket {
            start,
            end: start + chrono::Duration::hours(1),
        }
    }

    fn known(hour: u32, messages: u64) -> KnownBucket {
        KnownBucket {
            granularity: Granularity::Hour,
            bucket: bucket(hour),
            metrics: metrics(messages),
        }
    }

    #[test]
    fn kept_buckets_come_back_after_a_reopen_per_account() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("convo.db");
        let store = Store::open(&path).unwrap();
        store
            .keep_buckets("embedded", &[known(1, 3), known(2, 5)])
            .unwrap();
        store.keep_buckets("remote:abc", &[known(1, 7)]).unwrap();
        // Kept again: replaced, not doubled.
        store.keep_buckets("embedded", &[known(2, 6)]).unwrap();
        drop(store);
        let store = Store::open(&path).unwrap();
        let got = store.known_buckets("embedded").unwrap();
        assert_eq!(got, vec![known(1, 3), known(2, 6)]);
        assert_eq!(
            store.known_buckets("remote:abc").unwrap(),
            vec![known(1, 7)]
        );
        assert!(store.known_buckets("remote:other").unwrap().is_empty());
    }

    #[test]
    fn an_unreadable_row_is_skipped_not_fatal() {
        let store = Store::in_memory().unwrap();
        store.keep_buckets("a", &[known(1, 3)]).unwrap();
        store
            .lock()
            .execute(
                "INSERT INTO metric_buckets VALUES ('a', 'hour', '2026-11-20T05:00:00Z', 'x', '{')",
                [],
            )
            .unwrap();
        assert_eq!(store.known_buckets("a").unwrap(), vec![known(1, 3)]);
    }
}
