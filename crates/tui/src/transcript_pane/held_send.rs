//! A send of this device held behind another send's turn: its POST is in flight, but the
//! session's stream said (a `started` event naming another `Idempotency-Key`) that a reply of
//! another send began first. The service runs one turn of a session at a time, so it answers
//! this send once that turn ends, and stores the other exchange before this one. Its message
//! and reply placeholder leave the end of the transcript meanwhile, so the other device's
//! message and reply show where the service keeps them; they come back at the end when this
//! send's own reply starts (its `started`) or its POST is answered, or fails.

use std::time::Instant;

use chrono::{DateTime, Utc};
use convo_client::api::Message;

use super::open_session::{OpenSession, PendingSend};

/// The held send, with the time its message was shown at.
#[derive(Debug)]
pub struct HeldSend {
    pub send: PendingSend,
    at: DateTime<Utc>,
    /// The POST's answer (the reply to come, the message's tokens), when it came while the
    /// other turn's reply was still shown coming here: the answer and the other reply's `done`
    /// travel on two connections, and this send's message is stored after that reply.
    pub answer: Option<(Message, u64)>,
}

impl OpenSession {
    /// The pending send steps back behind another send's turn: its two items (the last ones:
    /// nothing is added after them while it is pending) leave the transcript. False when
    /// nothing is pending.
    pub fn hold_pending(&mut self) -> bool {
        let Some(send) = self.pending.take() else {
            return false;
        };
        let at = self
            .items
            .get(send.user_item)
            .map_or_else(Utc::now, |i| i.created_at);
        self.remove_from(send.user_item);
        self.held = Some(HeldSend {
            send,
            at,
            answer: None,
        });
        true
    }

    /// The held send's turn is next (or its POST was answered): its message and reply
    /// placeholder come back at the end of the transcript, and it is the pending send again.
    pub fn release_held(&mut self) {
        let Some(HeldSend { mut send, at, .. }) = self.held.take() else {
            return;
        };
        let reply_id = send.follower.reply_id().map(str::to_string);
        (send.user_item, send.reply_item) =
            self.push_exchange(send.role, send.text.clone(), at, reply_id);
        self.follow = true;
        self.pending = Some(send);
    }

    /// The held send's POST was answered while the other turn's reply is still shown coming:
    /// the answer waits until that reply ends here (`take_due_answer`).
    pub fn hold_answer(&mut self, reply: Message, prompt_tokens: u64) {
        if let Some(held) = self.held.as_mut() {
            held.answer = Some((reply, prompt_tokens));
        }
    }

    /// A held send whose POST was answered, once no other reply is shown coming and the
    /// history read that shows the other exchange has come back (`reading_other`: the other
    /// reply may end, and this send be answered, before that read does): released, with its
    /// send id and the answer, for the app to take as if it came now.
    pub fn take_due_answer(&mut self) -> Option<(u64, Message, u64)> {
        if self.other_turn_unsettled() {
            return None;
        }
        let held = self.held.as_mut()?;
        let (reply, tokens) = held.answer.take()?;
        let send_id = held.send.send_id;
        self.release_held();
        Some((send_id, reply, tokens))
    }

    /// The history was asked for at the `started` of another send's turn, which is now the
    /// foreign reply: a send held behind it waits for a read sent since that reply began here
    /// (`ForeignReply::began`; `other_turn_unsettled`).
    pub fn other_read_asked(&mut self) {
        if self.held.is_some() {
            self.reading_other = self.foreign.as_ref().map(|f| f.began);
        }
    }

    /// A history read sent at `asked` came back (or failed: a failed read comes again only
    /// with a reconnect). A held send waits no longer once a read sent since the one it waits
    /// for was asked has come: that read shows the other exchange. Reads sent before may not
    /// (another read still under way when the other turn began), and come back in any order.
    pub fn other_read_came(&mut self, asked: Instant) {
        if self.reading_other.is_some_and(|since| asked >= since) {
            self.reading_other = None;
        }
    }

    /// Whether the turn a send is held behind is still to settle here: its reply is shown
    /// coming, or the history read that shows its exchange has not come back. A held send's
    /// answer waits until it has (`hold_answer`, `take_due_answer`).
    pub fn other_turn_unsettled(&self) -> bool {
        self.foreign.is_some() || self.reading_other.is_some()
    }

    /// Whether the held send is `send_id`.
    pub fn holds(&self, send_id: u64) -> bool {
        self.held
            .as_ref()
            .is_some_and(|h| h.send.send_id == send_id)
    }
}
