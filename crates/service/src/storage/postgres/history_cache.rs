//! The histories of the sessions this replica started turns in, kept so that the next turn
//! reads only the messages that came after (migration 15, `convo_turn_facts_2`) instead of
//! the whole history, which with long sessions is most of a turn's reading and most of what a
//! batch sends back (docs/performance.md, "Service on PostgreSQL and replicas").
//!
//! A kept history is the session's messages up to one (`last`, its `pk`) as read under the
//! session's lock, with the session's change count then (`changes`, `message_changes`). It
//! stays right while that count is the session's: messages are appended under the session's
//! lock in `pk` order, and every other change to them (a deletion, an update, a truncation)
//! adds one to the count, which PostgreSQL compares before it uses what this replica holds.
//! So a kept history is only ever a starting point that the database confirms; the cache
//! holds at most `HISTORY_CACHE_BYTES` of text, the sessions used least recently leaving
//! first, and only histories of `MIN_KEPT_BYTES` of text or more.
//!
//! What the cache holds is content, which a deletion must not leave behind (docs/deploy.md,
//! "What operators must do about deletion"): the replica that deletes a session, or undoes an
//! exchange of it, forgets its history at once (`forget`); every replica forgets the sessions
//! any replica deleted at its next heartbeat (`PgStore::deleted_since`), and drops a history
//! not used for `HELD_FOR` (`drop_idle`), so that what another replica undid does not stay
//! in its memory either.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convo_core::HistoryEntry;
use lru::LruCache;

/// The most text (message contents, plus a fixed cost per message and per session) the cache
/// holds.
const HISTORY_CACHE_BYTES: usize = 64 << 20;

/// The least text a history must hold to be kept. Reading a short history costs PostgreSQL
/// little, and keeping one costs the replica a copy of it and its share of the cache at every
/// turn: measured with the 8,000 sessions of `scripts/perf/service-pg-throughput.sh` (a few
/// exchanges each), keeping every history cost a replica 7–15 µs of CPU per POST for no gain
/// in POSTs/s (docs/perf-log.md, 6 Dec).
const MIN_KEPT_BYTES: usize = 8 << 10;

/// Whether a history of `entries` is worth keeping (`MIN_KEPT_BYTES`).
pub(super) fn worth_keeping(entries: &[HistoryEntry]) -> bool {
    entries.iter().map(|e| e.content.len()).sum::<usize>() >= MIN_KEPT_BYTES
}

/// How long a history is kept after its session's last turn here. A conversation's next
/// message mostly comes within minutes; one that comes later reads the history again.
pub(super) const HELD_FOR: Duration = Duration::from_secs(600);

/// What is counted for each message beside its text, and for each session.
const PER_MESSAGE: usize = 48;
const PER_SESSION: usize = 96;

/// A session's history as a replica holds it.
#[derive(Debug, Clone)]
pub(super) struct Held {
    /// The session's change count (`message_changes`) when it was read.
    pub(super) changes: i64,
    /// The `pk` of its last message (0 for none).
    pub(super) last: i64,
    pub(super) entries: Arc<Vec<HistoryEntry>>,
}

impl Held {
    fn bytes(&self) -> usize {
        PER_SESSION
            + self
                .entries
                .iter()
                .map(|e| e.content.len() + PER_MESSAGE)
                .sum::<usize>()
    }

    /// Whether `self` is a later reading of the session than `other`: a change count only grows,
    /// and so, between changes, does the last message.
    fn newer_than(&self, other: &Held) -> bool {
        (self.changes, self.last) >= (other.changes, other.last)
    }
}

/// The histories a replica holds, by session id.
pub(super) struct HistoryCache {
    inner: Mutex<Inner>,
    most: usize,
}

struct Inner {
    /// Each history with the time it was put, least recently put first: a history is only
    /// ever taken out and put back, so the order of use is the order of `put`.
    held: LruCache<String, (Held, Instant)>,
    bytes: usize,
}

impl Default for HistoryCache {
    fn default() -> Self {
        HistoryCache::with_capacity(HISTORY_CACHE_BYTES)
    }
}

impl HistoryCache {
    fn with_capacity(most: usize) -> HistoryCache {
        HistoryCache {
            inner: Mutex::new(Inner {
                held: LruCache::unbounded(),
                bytes: 0,
            }),
            most,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while the lock was held leaves nothing half-done: every change below is one
        // insertion or removal and its byte count.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the replica holds of `session`, taken out: a session has one turn starting at a
    /// time, and the history it starts with goes back in (`put`) once read, so that it is not
    /// copied once more while the cache holds it too.
    pub(super) fn take(&self, session: &str) -> Option<Held> {
        let mut inner = self.inner();
        let (held, _) = inner.held.pop(session)?;
        inner.bytes -= held.bytes();
        Some(held)
    }

    #[cfg(test)]
    fn peek(&self, session: &str) -> Option<Held> {
        self.inner()
            .held
            .peek(session)
            .map(|(held, _)| held.clone())
    }

    /// Keeps `held` as `session`'s history unless a later reading is held already (two turns
    /// of a session read in turn by two tasks may store theirs in the other order).
    pub(super) fn put(&self, session: &str, held: Held) {
        self.put_at(session, held, Instant::now());
    }

    fn put_at(&self, session: &str, held: Held, now: Instant) {
        let size = held.bytes();
        if size > self.most {
            self.forget(session);
            return;
        }
        let mut inner = self.inner();
        if let Some((old, _)) = inner.held.peek(session) {
            if !held.newer_than(old) {
                return;
            }
            let old = old.bytes();
            inner.bytes -= old;
        }
        inner.held.put(session.to_owned(), (held, now));
        inner.bytes += size;
        while inner.bytes > self.most {
            match inner.held.pop_lru() {
                Some((_, (gone, _))) => inner.bytes -= gone.bytes(),
                None => break,
            }
        }
    }

    /// Drops what the replica holds of `session`.
    pub(super) fn forget(&self, session: &str) {
        let mut inner = self.inner();
        if let Some((gone, _)) = inner.held.pop(session) {
            inner.bytes -= gone.bytes();
        }
    }

    /// Drops the histories put `HELD_FOR` or longer before `now`.
    pub(super) fn drop_idle(&self, now: Instant) {
        let mut inner = self.inner();
        while let Some((_, (_, at))) = inner.held.peek_lru() {
            if now.saturating_duration_since(*at) < HELD_FOR {
                break;
            }
            if let Some((_, (gone, _))) = inner.held.pop_lru() {
                inner.bytes -= gone.bytes();
            }
        }
    }

    /// The sessions and bytes held now (`/metrics`).
    pub(super) fn held(&self) -> HistoryUse {
        let inner = self.inner();
        HistoryUse {
            sessions: inner.held.len(),
            bytes: inner.bytes,
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner().bytes
    }
}

/// What a replica's history cache holds (`/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryUse {
    /// Sessions whose history is held.
    pub sessions: usize,
    /// Their text, with the fixed costs per message and per session.
    pub bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_wire::Role;

    fn held(changes: i64, last: i64, texts: &[&str]) -> Held {
        Held {
            changes,
            last,
            entries: Arc::new(
                texts
                    .iter()
                    .map(|t| HistoryEntry {
                        role: Role::User,
                        content: (*t).to_owned(),
                        tokens: 1,
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn an_earlier_reading_does_not_replace_a_later_one() {
        let cache = HistoryCache::with_capacity(1 << 20);
        cache.put("s", held(0, 10, &["a", "b"]));
        cache.put("s", held(0, 4, &["a"]));
        assert_eq!(cache.peek("s").unwrap().last, 10);
        // A change to the session's messages makes any reading after it the later one.
        cache.put("s", held(1, 2, &["a"]));
        assert_eq!(cache.peek("s").unwrap().changes, 1);
        cache.put("s", held(0, 99, &["a", "b", "c"]));
        assert_eq!(cache.peek("s").unwrap().last, 2);
    }

    #[test]
    fn the_least_recently_used_sessions_leave_past_the_bound() {
        let text = "x".repeat(1000);
        let one = held(0, 1, &[&text]).bytes();
        let cache = HistoryCache::with_capacity(one * 3);
        for s in ["a", "b", "c"] {
            cache.put(s, held(0, 1, &[&text]));
        }
        // Used (taken and put back, as a turn does): "b" is now the least recent.
        let a = cache.take("a").unwrap();
        cache.put("a", a);
        cache.put("d", held(0, 1, &[&text]));
        assert!(cache.peek("b").is_none());
        assert!(
            cache.peek("a").is_some() && cache.peek("c").is_some() && cache.peek("d").is_some()
        );
        assert_eq!(cache.bytes(), one * 3);
        // Replacing a session's history counts only the new one.
        cache.put("a", held(0, 2, &[&text, &text]));
        assert!(cache.bytes() <= one * 3);
        assert!(cache.take("a").is_some() && cache.take("a").is_none());
        cache.forget("c");
        cache.forget("d");
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn histories_not_used_for_held_for_are_dropped() {
        let cache = HistoryCache::with_capacity(1 << 20);
        let start = Instant::now();
        cache.put_at("old", held(0, 1, &["a"]), start);
        cache.put_at("used", held(0, 1, &["b"]), start);
        cache.put_at("new", held(0, 1, &["c"]), start + HELD_FOR / 2);
        // "used" has a turn later: taken and put back.
        let used = cache.take("used").unwrap();
        cache.put_at("used", used, start + HELD_FOR / 2);

        cache.drop_idle(start + HELD_FOR - Duration::from_millis(1));
        assert!(cache.peek("old").is_some(), "not idle long enough yet");
        cache.drop_idle(start + HELD_FOR);
        assert!(cache.peek("old").is_none());
        assert!(cache.peek("used").is_some() && cache.peek("new").is_some());
        cache.drop_idle(start + HELD_FOR * 3 / 2);
        assert!(cache.peek("used").is_none() && cache.peek("new").is_none());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn a_history_larger_than_the_bound_is_not_kept() {
        let cache = HistoryCache::with_capacity(100);
        cache.put("s", held(0, 1, &["small"]));
        cache.put("s", held(0, 2, &[&"x".repeat(200)]));
        assert!(cache.peek("s").is_none());
        assert_eq!(cache.bytes(), 0);
    }
}
