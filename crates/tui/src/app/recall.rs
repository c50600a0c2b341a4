//! The open session's sent messages: what `Up` and `Down` in the composer walk through, like a
//! shell's history (the composer keeps where it is, `composer_pane::Recall`), and `/retry`,
//! which sends the last user message again (the interface has no edit or regenerate: it is a
//! new turn).

use super::{App, Command, Level};
use crate::transcript_pane::OpenSession;
use convo_client::api::Role;

/// Nothing to resend.
pub const NOTHING_TO_RETRY: &str = "nothing to retry: no message was sent in this session yet";

impl App {
    /// The open session's messages from this side (user and system), newest first, as the
    /// composer would take them (see [`sent_messages`]).
    pub fn sent_messages(&self) -> Vec<String> {
        sent_messages(self.transcript.session())
    }

    /// `/retry`: the last user message of the session, sent again as a new turn.
    pub(super) fn retry(&mut self, out: &mut Vec<Command>) {
        let last = self.transcript.session().and_then(|open| {
            (0..open.items.len())
                .rev()
                .find(|&i| open.items[i].role == Role::User && !open.content(i).trim().is_empty())
                .map(|i| open.content(i).to_string())
        });
        match last {
            Some(text) => self.send(text, Role::User, out),
            None => self.notify(Level::Warn, NOTHING_TO_RETRY),
        }
    }
}

/// The messages of `open` from this side (user and system), newest first, as the composer
/// would take them: a system message as `/system …`, a user message that starts with `/`
/// escaped as `//…` so it is not read as a command.
pub(super) fn sent_messages(open: Option<&OpenSession>) -> Vec<String> {
    let Some(open) = open else {
        return Vec::new();
    };
    (0..open.items.len())
        .rev()
        .filter_map(|i| {
            let text = open.content(i);
            match open.items[i].role {
                _ if text.trim().is_empty() => None,
                Role::System => Some(format!("/system {text}")),
                Role::User if text.starts_with('/') => Some(format!("/{text}")),
                Role::User => Some(text.to_string()),
                Role::Assistant => None,
            }
        })
        .collect()
}
