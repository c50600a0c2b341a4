//! A reply another device started in the open session, followed live on the session's stream
//! (which carries every reply of the session): its text shows piece by piece at the end of
//! the transcript, once the message it answers is shown (read from the stored history), and
//! its `done` stores it like a reply of this device. The service runs one turn of a session at
//! a time, and a send of this device while a foreign reply is shown waits for it to end
//! (`app/queue.rs`), so the two do not overlap. Its `ReplyFollower` decides
//! how it goes as it does for a reply of this device (`convo_client::follow`): an `error` that
//! leaves the turn open (a replica stopping, a relay lost) or a dropped stream interrupts it
//! until the stream or the stored history says more; any other `error` fails it, and the
//! service rolled the turn back, so the message it answered is not kept either.

use std::time::Instant;

use chrono::Utc;

use super::open_session::OpenSession;
use crate::render::transcript::EntryState;
use convo_client::api::{Message, Role, StreamEvent};
use convo_client::follow::{Change, Next, ReplyFailure, ReplyFollower, ReplyStatus};

/// The foreign reply being followed.
#[derive(Debug, Clone)]
pub struct ForeignReply {
    pub message_id: String,
    pub follower: ReplyFollower,
    /// Its transcript item, once shown.
    pub item: Option<usize>,
    /// The service was asked to stop it (Ctrl-C here).
    pub cancel_sent: bool,
    /// The item of the message it answers, once shown.
    pub answers: Option<usize>,
    /// When its first event was taken here: a history read sent before may not hold the
    /// message it answers (`shows_after`).
    pub began: Instant,
}

/// How another device's reply ended badly, for the app to show.
#[derive(Debug, Clone, PartialEq)]
pub enum ForeignEnd {
    /// Not ended: interrupted until the stream or the stored history says more.
    Interrupted,
    /// Failed for good (an `error`, or not kept by the service): its item (if shown) is marked
    /// failed; when the turn was rolled back, `answers` names the message it answered, which
    /// the service no longer holds either.
    Failed { answers: Option<usize> },
}

/// What a stream event of an unknown reply asks of the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignStep {
    /// Nothing more.
    Nothing,
    /// Read the stored history: the message it answers is not shown yet.
    FetchHistory,
}

impl OpenSession {
    /// A `started`, `delta` or `snapshot` of a reply this device did not ask for. Ignored
    /// while a send of this device is in flight (a reply of its own, not yet named, takes it),
    /// and for a reply an item already shows under its id (this device's reply, stopped
    /// before its `started` came).
    pub fn foreign_event(&mut self, event: &StreamEvent) -> ForeignStep {
        let (StreamEvent::Started { message_id, .. }
        | StreamEvent::Delta { message_id, .. }
        | StreamEvent::Snapshot { message_id, .. }) = event
        else {
            return ForeignStep::Nothing;
        };
        if self.own_send_in_flight() {
            return ForeignStep::Nothing;
        }
        let followed = self
            .foreign
            .as_ref()
            .is_some_and(|f| &f.message_id == message_id);
        let shown = (self.items.iter()).any(|i| i.message_id.as_deref() == Some(message_id));
        if shown && !followed {
            return ForeignStep::Nothing;
        }
        let mut step = ForeignStep::Nothing;
        if self
            .foreign
            .as_ref()
            .is_none_or(|f| &f.message_id != message_id)
        {
            // The message it answers was stored before it began: the history has it.
            self.foreign = Some(ForeignReply {
                message_id: message_id.clone(),
                follower: ReplyFollower::foreign(message_id),
                item: None,
                cancel_sent: false,
                answers: None,
                began: Instant::now(),
            });
            step = ForeignStep::FetchHistory;
        }
        let Some(foreign) = self.foreign.as_mut() else {
            return step;
        };
        let change = foreign.follower.event(event).change;
        let text = foreign.follower.text().to_string();
        if let Some(idx) = foreign.item {
            if change != Change::None && self.items[idx].state == EntryState::Interrupted {
                // Interrupted, and the stream speaks of it again: coming again.
                self.set_state(idx, EntryState::Streaming);
            }
            self.show_reply_change(idx, change, text);
        }
        step
    }

    /// An `error` event of the foreign reply `message_id` (none other is taken: `None`), as its
    /// follower decides.
    pub fn foreign_error(&mut self, event: &StreamEvent, message_id: &str) -> Option<ForeignEnd> {
        let foreign = self
            .foreign
            .as_mut()
            .filter(|f| f.message_id == message_id)?;
        foreign.follower.event(event);
        self.foreign_decided()
    }

    /// The session's stream dropped: the foreign reply, if coming, is interrupted.
    pub fn foreign_lost(&mut self) {
        if let Some(f) = self.foreign.as_mut() {
            f.follower.stream_lost();
        }
        self.foreign_decided();
    }

    /// The session's stream is open again: whether the stored history is to be read, to say
    /// what became of an interrupted foreign reply meanwhile.
    pub fn foreign_connected(&mut self) -> bool {
        self.foreign
            .as_mut()
            .is_some_and(|f| f.follower.stream_connected().next == Next::FetchHistory)
    }

    /// The stored history, for an interrupted foreign reply shown after the message it
    /// answers (the history holding the reply whole ends it as `done` does, before this): what
    /// it says of the reply, and whether to look again later (the message stored without its
    /// reply).
    pub fn foreign_history(&mut self, history: &[Message]) -> (Option<ForeignEnd>, bool) {
        let Some(f) = self.foreign.as_mut().filter(|f| f.item.is_some()) else {
            return (None, false);
        };
        let later = f.follower.history(history).next == Next::FetchHistoryLater;
        (self.foreign_decided(), later)
    }

    /// What the foreign reply's follower says now, shown on its item: interrupted, or failed
    /// (then no longer followed).
    fn foreign_decided(&mut self) -> Option<ForeignEnd> {
        let f = self.foreign.as_ref()?;
        match f.follower.status().clone() {
            ReplyStatus::Interrupted => {
                if let Some(idx) = f
                    .item
                    .filter(|&i| self.items[i].state == EntryState::Streaming)
                {
                    self.set_state(idx, EntryState::Interrupted);
                }
                Some(ForeignEnd::Interrupted)
            }
            ReplyStatus::Failed(failure) => {
                let f = self.foreign.take()?;
                let why = match &failure {
                    ReplyFailure::Error(error) => {
                        convo_client::sanitize::sanitize_owned(&error.message)
                    }
                    ReplyFailure::NotKept { .. } => "not kept".to_string(),
                };
                if let Some(idx) = f.item {
                    self.set_state(idx, EntryState::Failed(why));
                }
                // The turn rolled back: the message it answered went with it.
                let answers = f.answers.filter(|_| failure.message_dropped());
                Some(ForeignEnd::Failed { answers })
            }
            ReplyStatus::Coming | ReplyStatus::Done(_) => None,
        }
    }

    /// Whether a history read sent at `asked` speaks of the foreign reply: sent after its first
    /// event came here, so after the message it answers was stored. Reads run at once and come
    /// back in any order; one sent before (the session's opening read, still under way) neither
    /// shows it nor settles it.
    pub fn shows_after(&self, asked: Instant) -> bool {
        self.foreign.as_ref().is_some_and(|f| asked >= f.began)
    }

    /// After the stored history was read: the foreign reply followed so far shows at the end.
    /// Whether it was shown now.
    pub fn show_foreign(&mut self) -> bool {
        let Some(foreign) = self.foreign.as_ref().filter(|f| f.item.is_none()) else {
            return false;
        };
        let (message_id, text) = (
            foreign.message_id.clone(),
            foreign.follower.text().to_string(),
        );
        // The message it answers: the last one shown as kept.
        let answers = self.kept_items().last();
        let idx = self.push(
            Role::Assistant,
            text,
            EntryState::Streaming,
            0,
            Some(message_id),
            Utc::now(),
        );
        let answered = answers.map(|a| (self.items[a].role, self.content(a).to_string()));
        if let Some(f) = self.foreign.as_mut() {
            f.item = Some(idx);
            f.answers = answers;
            if let Some((role, text)) = answered {
                f.follower.answers(role, text);
            }
        }
        self.follow = true;
        true
    }

    /// The foreign reply `message_id` ended (`done` or `error`): no longer followed. Its item
    /// (if shown) is what the caller settles; `Some(idx)` names it.
    pub fn end_foreign(&mut self, message_id: &str) -> Option<Option<usize>> {
        let foreign = self.foreign.take_if(|f| f.message_id == message_id)?;
        Some(foreign.item)
    }

    /// The item of the foreign reply, if one is shown: the history it is compared with does
    /// not have it yet.
    pub fn foreign_item(&self) -> Option<usize> {
        self.foreign.as_ref().and_then(|f| f.item)
    }
}
