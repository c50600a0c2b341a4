//! Sessions deleted elsewhere, and exchanges undone elsewhere: by another replica on
//! PostgreSQL, or by another process on the same SQLite file (the TUI's embedded service and a
//! one-shot command's). What this node keeps of a deleted session (the history a replica
//! holds, the engine's state in memory and saved under `<data dir>/kv`) goes once a look finds
//! the deletion (`AppState::forget_deleted`); of a session whose last exchange was undone, the
//! engine keeps only what the remaining messages begin with, and a history the replica holds
//! goes (`AppState::trim_undone`).
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
//! (`engine/local/kv_store.rs`, by the same function), so a session deleted, or an exchange
//! undone, while no node holding its state ran is found too.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::Storage;
use super::rows::Undone;
use crate::error::StoreError;
use crate::time;

/// How far back past the previous one each look reaches: a deletion's or an undo's time is
/// the node's clock when it wrote it, before its commit, so a look that ended after that time
/// may not have seen it.
const OVERLAP: Duration = Duration::from_secs(60);

/// How long a reply about to begin, or a service that stops, waits for a look and for the
/// reads of what undos left (the database may be out of reach; the next look reaches back as
/// far, and an engine that cannot read what an undo left forgets the session's state).
pub const LOOK_WITHIN: Duration = Duration::from_secs(2);

/// What a look found that the looks before it had not.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The sessions deleted.
    pub deleted: Vec<String>,
    /// The sessions whose last exchange was undone, each with its account.
    pub undone: Vec<(String, i64)>,
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty() && self.undone.is_empty()
    }
}

/// Where a node's looks are: the time the next one reaches back to, and what was found since
/// then (a look finds again what the one before found within the overlap; each deletion and
/// each undo is taken once).
pub(crate) struct Deletions {
    since: i64,
    /// Deleted sessions, with their deletion's time.
    seen: HashMap<String, i64>,
    /// Undos, by session and time (a session can be undone again).
    undos_seen: HashSet<(String, i64)>,
    /// The sessions this node undid an exchange of, with when it knew the undo committed: its
    /// engine was trimmed then (`AppState::undone_here`), so its looks skip those undos (a
    /// second trim would drop the state of a reply begun since).
    undone_here: HashMap<String, i64>,
}

impl Deletions {
    /// The first look reaches back as far as clients are told of deletions, and as saved
    /// states are kept.
    pub fn new(now_ms: i64) -> Deletions {
        Deletions {
            since: convo_wire::sessions::deletions_listed_since(now_ms),
            seen: HashMap::new(),
            undos_seen: HashSet::new(),
            undone_here: HashMap::new(),
        }
    }

    /// This node undid an exchange of `session_id`, committed before `now_ms` by its clock,
    /// and has trimmed its engine: the looks skip that undo.
    pub fn undone_here(&mut self, session_id: &str, now_ms: i64) {
        self.undone_here.insert(session_id.to_string(), now_ms);
    }

    /// One look in `store`: the sessions deleted, and the exchanges undone, since the last
    /// look, not found before.
    pub async fn look(&mut self, store: &impl Storage) -> Result<Found, StoreError> {
        let looked_at = time::now_ms();
        let deleted = store.deleted_since(self.since).await?;
        let undone = store.undone_since(self.since).await?;
        Ok(self.found(deleted, undone, looked_at))
    }

    /// Takes what a look begun at `looked_at` found; what it had not found before.
    fn found(&mut self, deleted: Vec<(String, i64)>, undone: Vec<Undone>, looked_at: i64) -> Found {
        let mut new = Found::default();
        for (id, at) in deleted {
            if self.seen.insert(id.clone(), at).is_none() {
                new.deleted.push(id);
            }
        }
        for u in undone {
            let here = (self.undone_here.get(&u.session_id)).is_some_and(|&t| t >= u.at_ms);
            if self.undos_seen.insert((u.session_id.clone(), u.at_ms)) && !here {
                new.undone.push((u.session_id, u.account_id));
            }
        }
        self.since = looked_at - OVERLAP.as_millis() as i64;
        let since = self.since;
        self.seen.retain(|_, at| *at >= since);
        self.undos_seen.retain(|(_, at)| *at >= since);
        self.undone_here.retain(|_, at| *at >= since);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
        pairs.iter().map(|(id, at)| (id.to_string(), *at)).collect()
    }

    /// What a look finds deleted (`pairs`, nothing undone) that it had not found before.
    fn deleted(deletions: &mut Deletions, pairs: &[(&str, i64)], looked_at: i64) -> Vec<String> {
        deletions.found(found(pairs), Vec::new(), looked_at).deleted
    }

    fn undone(pairs: &[(&str, i64)]) -> Vec<Undone> {
        pairs
            .iter()
            .map(|(id, at)| Undone {
                session_id: id.to_string(),
                account_id: 7,
                at_ms: *at,
            })
            .collect()
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
        let new = deleted(
            &mut deletions,
            &[("a", start - day), ("b", start - 10)],
            start,
        );
        assert_eq!(new, ["a", "b"]);
        let overlap = OVERLAP.as_millis() as i64;
        assert_eq!(deletions.since, start - overlap);
        // The next one finds "b" again (within the overlap) and "c": only "c" is new.
        let next = start + 5_000;
        let new = deleted(&mut deletions, &[("b", start - 10), ("c", start + 1)], next);
        assert_eq!(new, ["c"]);
        // What the looks can no longer find is no longer kept.
        let later = start + 2 * overlap;
        assert!(deletions.found(Vec::new(), Vec::new(), later).is_empty());
        assert!(deletions.seen.is_empty());
        // A session deleted with an older time (another replica's clock behind) is still new.
        assert_eq!(
            deleted(&mut deletions, &[("d", later - overlap)], later + 5_000),
            ["d"]
        );
    }

    #[test]
    fn each_undo_is_taken_once_and_a_session_undone_again_is_found_again() {
        let start = 1_000 * 86_400_000;
        let mut deletions = Deletions::new(start);
        let new = deletions.found(Vec::new(), undone(&[("a", start - 10)]), start);
        assert_eq!(new.undone, [("a".to_string(), 7)]);
        assert!(new.deleted.is_empty());
        // Found again within the overlap: not new; undone again later: new.
        let next = start + 5_000;
        let new = deletions.found(
            Vec::new(),
            undone(&[("a", start - 10), ("a", start + 4_000)]),
            next,
        );
        assert_eq!(new.undone, [("a".to_string(), 7)]);
        let new = deletions.found(Vec::new(), undone(&[("a", start + 4_000)]), next + 5_000);
        assert!(new.is_empty());
        // An undo this node made (and trimmed its engine for) is skipped; another one of the
        // same session made elsewhere later is not.
        let now = next + 6_000;
        deletions.undone_here("b", now);
        let new = deletions.found(
            Vec::new(),
            undone(&[("b", now - 3), ("a", now - 2)]),
            now + 1_000,
        );
        assert_eq!(new.undone, [("a".to_string(), 7)]);
        let new = deletions.found(Vec::new(), undone(&[("b", now + 500)]), now + 2_000);
        assert_eq!(new.undone, [("b".to_string(), 7)]);
        // What the looks can no longer find is no longer kept.
        let later = now + 2 * OVERLAP.as_millis() as i64;
        deletions.found(Vec::new(), Vec::new(), later);
        assert!(deletions.undos_seen.is_empty());
        assert!(deletions.undone_here.is_empty());
    }
}
