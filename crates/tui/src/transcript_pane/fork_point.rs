//! The message a fork ends at, as the transcript knows it, and how it is found in the
//! service's history: by its id when the transcript has it (replies), else as the n-th
//! message of its role with its text (a message sent from here, whose id the interface does
//! not return).

use convo_client::api::Message;

use super::OpenSession;
pub use crate::command::ForkPoint;
use crate::render::transcript::EntryState;

impl ForkPoint {
    /// Item `idx` of `open` as a fork point; `None` for a message that never reached the
    /// service (failed) or does not exist.
    pub fn of(open: &OpenSession, idx: usize) -> Option<ForkPoint> {
        let item = open.items.get(idx)?;
        if matches!(item.state, EntryState::Failed(_)) {
            return None;
        }
        let content = open.content(idx).to_string();
        let occurrence = (0..idx)
            .filter(|&i| {
                let other = &open.items[i];
                other.role == item.role
                    && !matches!(other.state, EntryState::Failed(_))
                    && open.content(i) == content
            })
            .count();
        Some(ForkPoint {
            message_id: item.message_id.clone(),
            role: item.role,
            content,
            occurrence,
        })
    }

    /// The id of this message in the service's `history` (oldest first).
    pub fn resolve<'a>(&'a self, history: &'a [Message]) -> Option<&'a str> {
        if let Some(id) = &self.message_id {
            return history
                .iter()
                .any(|m| &m.message_id == id)
                .then_some(id.as_str());
        }
        history
            .iter()
            .filter(|m| m.role == self.role && m.content == self.content)
            .nth(self.occurrence)
            .map(|m| m.message_id.as_str())
    }
}

/// The message an edit of item `idx` forks at: the one before it that reached the service;
/// `None` when there is none (the edit starts a new session).
pub fn edit_base(open: &OpenSession, idx: usize) -> Option<usize> {
    (0..idx)
        .rev()
        .find(|&i| !matches!(open.items[i].state, EntryState::Failed(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use convo_client::api::Role;

    fn message(id: &str, role: Role, content: &str) -> Message {
        Message {
            message_id: id.into(),
            session_id: "session_a".into(),
            role,
            content: content.into(),
            tokens: 1,
            created_at: "2026-11-26T00:00:00Z".into(),
            finish_reason: None,
        }
    }

    fn open_with(items: &[(Role, &str, Option<&str>, EntryState)]) -> OpenSession {
        let mut open = OpenSession::new("session_a".into(), 8192);
        for (role, text, id, state) in items {
            open.push(
                *role,
                text.to_string(),
                state.clone(),
                1,
                id.map(str::to_string),
                chrono::Utc::now(),
            );
        }
        open
    }

    #[test]
    fn a_message_sent_from_here_is_found_by_role_text_and_rank() {
        let history = vec![
            message("m1", Role::User, "again"),
            message("m2", Role::Assistant, "one"),
            message("m3", Role::User, "again"),
            message("m4", Role::Assistant, "two"),
        ];
        let open = open_with(&[
            (Role::User, "again", None, EntryState::Complete),
            (Role::Assistant, "one", Some("m2"), EntryState::Complete),
            (
                Role::User,
                "never sent",
                None,
                EntryState::Failed("x".into()),
            ),
            (Role::User, "again", None, EntryState::Complete),
            (Role::Assistant, "two", Some("m4"), EntryState::Complete),
        ]);
        let at = |i| ForkPoint::of(&open, i).map(|p| p.resolve(&history).map(str::to_string));
        assert_eq!(at(0), Some(Some("m1".into())));
        assert_eq!(at(1), Some(Some("m2".into())), "by its id");
        assert_eq!(at(2), None, "a failed message is no fork point");
        assert_eq!(at(3), Some(Some("m3".into())), "the second “again”");
        assert_eq!(at(4), Some(Some("m4".into())));
        assert_eq!(at(9), None);
        // Not (or no longer) on the server.
        assert_eq!(
            ForkPoint::of(&open, 3).unwrap().resolve(&history[..2]),
            None
        );

        assert_eq!(edit_base(&open, 3), Some(1), "the failed one is skipped");
        assert_eq!(edit_base(&open, 0), None, "the first: a new session");
    }
}
