//! Catching the store up with the service's history of a session: a session listed here
//! (`convo sessions`, the TUI's list) but never opened on this device holds none of its
//! messages, and one another device went on with holds only the start. The rule of what is
//! missing ([`missing_from`]) is the TUI's too, for the transcript it shows.

use crate::api::{Message, Role};

use super::{MessageStatus, Store, StoreError, StoredMessage};

/// Where the service's `history` goes on past what is `kept` (role and text of each message
/// kept, oldest first): `Some(kept.len())` when `kept` is the start of `history` and shorter;
/// `None` when nothing is missing or the two differ (then what is kept is left as it is).
pub fn missing_from(kept: &[(Role, &str)], history: &[Message]) -> Option<usize> {
    if kept.len() >= history.len() {
        return None;
    }
    let same = kept
        .iter()
        .zip(history)
        .all(|((role, text), m)| *role == m.role && *text == m.content);
    same.then_some(kept.len())
}

impl Store {
    /// Brings the store's copy of `session_id` up to the service's `history`: a reply it holds
    /// under a service id but not as the service stored it (interrupted here, then finished
    /// there) is replaced by the service's, then the messages the store lacks are appended
    /// ([`missing_from`] its messages not marked failed). Returns how many messages were
    /// written. A store whose messages otherwise differ from the history (an exchange undone
    /// elsewhere) is left as it is.
    pub fn catch_up(&self, session_id: &str, history: &[Message]) -> Result<usize, StoreError> {
        let mut written = 0;
        let stored = self.transcript(session_id)?;
        for m in history {
            let settled = StoredMessage::from_reply(m);
            let behind = stored.iter().any(|s| {
                s.message_id.as_deref() == Some(m.message_id.as_str())
                    && (s.content != settled.content
                        || s.status != settled.status
                        || s.finish_reason != settled.finish_reason)
            });
            if behind {
                // Stored again under its service id: the row is replaced in place.
                self.append_message(session_id, &settled)?;
                written += 1;
            }
        }
        let stored = if written > 0 {
            self.transcript(session_id)?
        } else {
            stored
        };
        let kept: Vec<(Role, &str)> = stored
            .iter()
            .filter(|m| m.status != MessageStatus::Failed)
            .map(|m| (m.role, m.content.as_str()))
            .collect();
        let Some(start) = missing_from(&kept, history) else {
            return Ok(written);
        };
        for m in &history[start..] {
            self.append_message(session_id, &StoredMessage::from_reply(m))?;
        }
        Ok(written + history.len() - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role, text: &str) -> Message {
        Message {
            message_id: format!("msg_{text}"),
            session_id: "session_AAAAAAAAAAAAAAAA".into(),
            role,
            content: text.into(),
            tokens: 1,
            created_at: "2026-11-26T00:00:00Z".into(),
            finish_reason: None,
        }
    }

    #[test]
    fn only_a_history_that_goes_on_from_what_is_kept_is_adopted() {
        let history = [
            m(Role::User, "a"),
            m(Role::Assistant, "b"),
            m(Role::User, "c"),
        ];
        assert_eq!(missing_from(&[], &history), Some(0));
        assert_eq!(
            missing_from(&[(Role::User, "a"), (Role::Assistant, "b")], &history),
            Some(2)
        );
        // Nothing missing; or what is kept differs from the service's: left alone.
        assert_eq!(
            missing_from(
                &[(Role::User, "a"), (Role::Assistant, "b"), (Role::User, "c")],
                &history
            ),
            None
        );
        assert_eq!(missing_from(&[(Role::User, "x")], &history), None);
        assert_eq!(
            missing_from(&[(Role::System, "a")], &history),
            None,
            "the role counts"
        );
    }

    #[test]
    fn the_store_gets_what_it_lacks_once_and_keeps_what_differs() {
        const S: &str = "session_AAAAAAAAAAAAAAAA";
        let store = Store::in_memory().unwrap();
        let history = [
            m(Role::User, "a"),
            m(Role::Assistant, "b"),
            m(Role::User, "c"),
            m(Role::Assistant, "d"),
        ];
        // A message that failed here is not part of what the service has.
        store
            .append_message(S, &StoredMessage::from_reply(&history[0]))
            .unwrap();
        store
            .append_message(
                S,
                &StoredMessage::user(Role::User, "never sent").with_status(MessageStatus::Failed),
            )
            .unwrap();
        assert_eq!(store.catch_up(S, &history).unwrap(), 3);
        let texts: Vec<String> = store
            .transcript(S)
            .unwrap()
            .into_iter()
            .filter(|m| m.status != MessageStatus::Failed)
            .map(|m| m.content)
            .collect();
        assert_eq!(texts, ["a", "b", "c", "d"]);
        assert_eq!(store.session(S).unwrap().unwrap().tokens, 4);
        // Caught up: nothing more; a history that differs changes nothing.
        assert_eq!(store.catch_up(S, &history).unwrap(), 0);
        let other = [
            m(Role::User, "x"),
            m(Role::Assistant, "y"),
            m(Role::User, "z"),
        ];
        assert_eq!(store.catch_up(S, &other).unwrap(), 0);
        assert_eq!(store.transcript(S).unwrap().len(), 5);
    }

    #[test]
    fn a_reply_interrupted_here_and_finished_there_is_the_services() {
        const S: &str = "session_AAAAAAAAAAAAAAAA";
        let store = Store::in_memory().unwrap();
        let history = [
            m(Role::User, "a"),
            m(Role::Assistant, "the whole reply"),
            m(Role::User, "c"),
        ];
        store
            .append_message(S, &StoredMessage::from_reply(&history[0]))
            .unwrap();
        let mut cut =
            StoredMessage::from_reply(&history[1]).with_status(MessageStatus::Interrupted);
        cut.content = "the who".into();
        store.append_message(S, &cut).unwrap();
        assert_eq!(store.catch_up(S, &history).unwrap(), 2);
        let stored = store.transcript(S).unwrap();
        let texts: Vec<(&str, MessageStatus)> = stored
            .iter()
            .map(|m| (m.content.as_str(), m.status))
            .collect();
        assert_eq!(
            texts,
            [
                ("a", MessageStatus::Complete),
                ("the whole reply", MessageStatus::Complete),
                ("c", MessageStatus::Complete),
            ]
        );
        assert_eq!(store.catch_up(S, &history).unwrap(), 0);
    }
}
