//! Sessions deleted elsewhere: by another replica on PostgreSQL, or by another process on the
//! same SQLite file (the TUI's embedded service and a one-shot command's). What
//! this node keeps of such a session (the history a replica holds, the engine's state in
//! memory and saved under `<data dir>/kv`) goes once a look finds the deletion
//! (`AppState::forget_deleted`).
//!
//! When a node looks: on PostgreSQL at each heartbeat (`postgres/leases.rs`, the first at
//! once); on SQLite, where nothing ticks while the service is idle, when the service starts,
//! if its engine keeps sessions' state. On both, with such an engine, before each reply (the
//! engine saves an idle session's state as another one's reply begins, so the look comes
//! first) and once more as the service stops, before the engine saves every state it holds;
//! each of these waits at most `LOOK_WITHIN` for the database.
//!
//! The first look reaches back as far as clients are told of deletions
//! (`convo_wire::sessions::deletions_listed_since`, 90 days), for what the engine saved
//! before the node last stopped; the engine keeps no saved state older than that
//! (`engine/local/kv_store.rs`, by the same function), so a session deleted while no node
//! holding its state ran is found too.

use std::collections::HashMap;
use std::time::Duration;

use super::Storage;
use crate::error::StoreError;
use crate::time;

/// How far back past the previous one each look reaches: a deletion's time is the deleting
/// node's clock when it wrote the tombstone, before its commit, so a look that ended after
/// that time may not have seen it.
const OVERLAP: Duration = Duration::from_secs(60);

/// How long a reply about to begin, or a service that stops, waits for a look (the database
/// may be out of reach; the next look reaches back as far).
pub const LOOK_WITHIN: Duration = Duration::from_secs(2);

/// Where a node's looks for deleted sessions are: the time the next one reaches back to, and
/// the sessions found since then (a look finds again what the one before found within the
/// overlap; each is forgotten once).
pub(crate) struct Deletions {
    since: i64,
    seen: HashMap<String, i64>,
}

impl Deletions {
    /// The first look reaches back as far as clients are told of deletions, and as saved
    /// states are kept.
    pub fn new(now_ms: i64) -> Deletions {
        Deletions {
            since: convo_wire::sessions::deletions_listed_since(now_ms),
            seen: HashMap::new(),
        }
    }

    /// One look in `store`: the sessions deleted since the last look, not found before.
    pub async fn look(&mut self, store: &impl Storage) -> Result<Vec<String>, StoreError> {
        let looked_at = time::now_ms();
        let found = store.deleted_since(self.since).await?;
        Ok(self.found(found, looked_at))
    }

    /// Takes what a look begun at `looked_at` found; the sessions it had not found before.
    fn found(&mut self, found: Vec<(String, i64)>, looked_at: i64) -> Vec<String> {
        let mut new = Vec::new();
        for (id, at) in found {
            if self.seen.insert(id.clone(), at).is_none() {
                new.push(id);
            }
        }
        self.since = looked_at - OVERLAP.as_millis() as i64;
        let since = self.since;
        self.seen.retain(|_, at| *at >= since);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
        pairs.iter().map(|(id, at)| (id.to_string(), *at)).collect()
    }

    #[test]
    fn each_deleted_session_is_forgotten_once_and_the_looks_overlap() {
        let day = 86_400_000;
        let start = 1_000 * day;
        let mut deletions = Deletions::new(start);
        assert_eq!(
            deletions.since,
            start - convo_wire::sessions::DELETIONS_LISTED_DAYS * day
        );
        // The first look finds what was deleted while the replica was away.
        let new = deletions.found(found(&[("a", start - day), ("b", start - 10)]), start);
        assert_eq!(new, ["a", "b"]);
        let overlap = OVERLAP.as_millis() as i64;
        assert_eq!(deletions.since, start - overlap);
        // The next one finds "b" again (within the overlap) and "c": only "c" is new.
        let next = start + 5_000;
        let new = deletions.found(found(&[("b", start - 10), ("c", start + 1)]), next);
        assert_eq!(new, ["c"]);
        // What the looks can no longer find is no longer kept.
        let later = start + 2 * overlap;
        assert!(deletions.found(Vec::new(), later).is_empty());
        assert!(deletions.seen.is_empty());
        // A session deleted with an older time (another replica's clock behind) is still new.
        assert_eq!(
            deletions.found(found(&[("d", later - overlap)]), later + 5_000),
            ["d"]
        );
    }
}
