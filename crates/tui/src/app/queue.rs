//! A message sent while the last reply is still coming waits for it: Enter queues what the
//! composer holds, the composer says so, and when the reply ends whole the composer's text is
//! sent as if Enter were pressed again. So does one sent while another device's reply is
//! shown coming in the open session: the service would hold the send until that turn ends,
//! and this device's reply would come after a reply it was not following. Editing the text, Esc, switching sessions or
//! stopping the reply takes the queued send back (the text stays, and Enter sends it); a
//! reply that fails or is cut off sends nothing and says why.

use super::{App, Command};
use crate::composer_pane::Lapse;
use crate::render::transcript::EntryState;

/// What the composer says while its text waits for the reply.
pub const QUEUED: &str = "queued: sent when the reply ends (edit or Esc to keep it)";
/// What it says when the reply did not end whole, so the queued text was not sent.
pub const QUEUED_NOT_SENT: &str = "the reply did not finish, so this was not sent: Enter sends it";

/// The send waiting for a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Queued {
    /// The session the reply is coming in.
    session_id: String,
    /// The reply's item in that session's transcript.
    reply_item: usize,
}

impl App {
    /// Enter while the open session's reply `reply_item` is coming: the composer's text waits
    /// for it (a message, or a command that sends: `/system`, `/retry`, `/continue`). False
    /// when the composer is empty, as a send that does not come from its text would find it:
    /// the caller says to wait instead.
    pub(super) fn queue_send(&mut self, session_id: String, reply_item: usize) -> bool {
        if self.composer.is_empty() {
            return false;
        }
        self.queued = Some(Queued {
            session_id,
            reply_item,
        });
        self.composer
            .set_send_note(QUEUED.to_string(), Lapse::Queued);
        true
    }

    /// Takes the queued send back (its note goes; the text stays).
    pub(super) fn unqueue(&mut self) {
        if self.queued.take().is_some() {
            self.composer.lapse(Lapse::Queued);
        }
    }

    /// After each event: once the open session has no reply coming, the queued text is sent
    /// if the reply it waited for ended whole, and kept with a note if not. A queued send
    /// whose note is gone (the text edited, Esc) or whose session is no longer open is
    /// dropped.
    pub(super) fn send_queued(&mut self, out: &mut Vec<Command>) {
        let Some(queued) = &self.queued else {
            return;
        };
        if !self.composer.noted(Lapse::Queued) {
            self.queued = None;
            return;
        }
        let Some(open) = (self.transcript.session()).filter(|o| o.id == queued.session_id) else {
            return self.unqueue();
        };
        if open.pending.is_some() || open.held.is_some() || open.foreign_item().is_some() {
            return;
        }
        let whole = (open.items.get(queued.reply_item)).is_some_and(|item| {
            item.role == convo_client::api::Role::Assistant && item.state == EntryState::Complete
        });
        self.unqueue();
        if whole {
            self.submit(out);
        } else {
            self.composer
                .set_send_error(Some(QUEUED_NOT_SENT.to_string()));
        }
    }

    /// Whether a send is queued.
    #[cfg(test)]
    pub fn is_queued(&self) -> bool {
        self.queued.is_some()
    }
}
