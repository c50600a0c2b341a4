//! Forks and undo in the local store: where a forked session came from (so the sessions pane
//! draws the tree without the server), and the removal of a session's last exchange once the
//! service has removed it (`DELETE /v1/sessions/{id}/messages/last`).

use rusqlite::params;

use super::write_tx;
use super::{Store, StoreError, checkpoint_after_delete, refresh_tokens};

impl Store {
    /// Records that `session_id` was forked from `source` at the source's message
    /// `message_id` (the session is created if the store does not know it yet).
    pub fn set_forked_from(
        &self,
        session_id: &str,
        source: &str,
        message_id: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        super::upsert(&tx, self.target.id(), session_id, &chrono::Utc::now())
            .map_err(|e| self.err(e))?;
        tx.execute(
            "UPDATE sessions SET forked_from = ?2, forked_at_message = ?3 WHERE id = ?1",
            params![session_id, source, message_id],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Removes the session's last exchange as the service did: its last user message and
    /// everything after it, out of the files too (as a deletion's content: `secure_delete`,
    /// then the WAL checkpointed). Returns how many messages went (none when it has no user
    /// message). The service's session is this target's: a copy of that id kept from the
    /// service's earlier database gives the id up first, untouched (`targets::free_id`).
    pub fn remove_last_exchange(&self, session_id: &str) -> Result<usize, StoreError> {
        let mut conn = self.lock();
        let tx = write_tx(&mut conn).map_err(|e| self.err(e))?;
        super::targets::free_id(&tx, self.target.id(), session_id).map_err(|e| self.err(e))?;
        let removed = tx
            .execute(
                "DELETE FROM messages WHERE session_id = ?1 AND id >=
                     (SELECT max(id) FROM messages WHERE session_id = ?1 AND role = 'user'
                          AND status <> 'failed')",
                params![session_id],
            )
            .map_err(|e| self.err(e))?;
        refresh_tokens(&tx, session_id).map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        if removed > 0 {
            checkpoint_after_delete(&conn);
        }
        Ok(removed)
    }

    /// Another device undid the session's last exchange and the service holds `messages`
    /// messages now: the last exchange is removed here too if the store holds more (its
    /// messages not marked failed). At most one exchange per undo, so that a store holding
    /// messages the service never had loses none of them. Returns how many messages went.
    pub fn undone_elsewhere(&self, session_id: &str, messages: u64) -> Result<usize, StoreError> {
        let held: i64 = self
            .lock()
            .query_row(
                "SELECT count(*) FROM messages WHERE session_id = ?1 AND status <> 'failed'",
                params![session_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        if held.max(0) as u64 <= messages {
            return Ok(0);
        }
        self.remove_last_exchange(session_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Role;
    use crate::local_store::{MessageStatus, StoredMessage};

    const A: &str = "session_aaaaaaaaaaaaaaaa";
    const B: &str = "session_bbbbbbbbbbbbbbbb";

    /// A store holding session A with two exchanges.
    fn two_exchanges() -> Store {
        let store = Store::in_memory().unwrap();
        for (role, text) in [
            (Role::User, "one"),
            (Role::Assistant, "reply one"),
            (Role::User, "two"),
            (Role::Assistant, "reply two"),
        ] {
            store
                .append_message(A, &StoredMessage::user(role, text))
                .unwrap();
        }
        store
    }

    #[test]
    fn an_undo_elsewhere_removes_one_exchange_only_where_the_store_holds_more() {
        let store = two_exchanges();
        // The service holds four: this store has no more, nothing goes.
        assert_eq!(store.undone_elsewhere(A, 4).unwrap(), 0);
        // Two: the last exchange goes; told again (or by this device's own undo), nothing more.
        assert_eq!(store.undone_elsewhere(A, 2).unwrap(), 2);
        assert_eq!(store.undone_elsewhere(A, 2).unwrap(), 0);
        // None, while the store holds two: one exchange per undo, never the whole history.
        assert_eq!(store.undone_elsewhere(A, 0).unwrap(), 2);
        assert_eq!(store.undone_elsewhere(A, 0).unwrap(), 0);
        assert_eq!(
            store.undone_elsewhere(B, 0).unwrap(),
            0,
            "a session it does not have"
        );
    }

    #[test]
    fn a_fork_keeps_its_origin_and_undo_removes_the_last_exchange_only() {
        let store = two_exchanges();
        // A message that never reached the service is not the exchange the service removed.
        store
            .append_message(
                A,
                &StoredMessage::user(Role::User, "lost").with_status(MessageStatus::Failed),
            )
            .unwrap();
        assert_eq!(store.session(B).unwrap(), None);
        store.set_forked_from(B, A, "msg_1").unwrap();
        assert_eq!(
            store.session(B).unwrap().unwrap().forked_from.as_deref(),
            Some(A)
        );

        assert_eq!(store.remove_last_exchange(A).unwrap(), 3);
        let left: Vec<String> = store
            .transcript(A)
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect();
        assert_eq!(left, ["one", "reply one"]);
        let tokens = store.session(A).unwrap().unwrap().tokens;
        assert_eq!(
            tokens,
            crate::local_store::estimate_tokens("one")
                + crate::local_store::estimate_tokens("reply one")
        );
        assert_eq!(store.remove_last_exchange(A).unwrap(), 2);
        assert_eq!(store.remove_last_exchange(A).unwrap(), 0, "nothing left");
    }
}
