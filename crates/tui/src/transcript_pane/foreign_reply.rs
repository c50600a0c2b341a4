//! A reply another device started in the open session, followed live on the session's stream
//! (which carries every reply of the session): its text shows piece by piece at the end of
//! the transcript, once the message it answers is shown (read from the stored history), and
//! its `done` stores it like a reply of this device. The service runs one turn of a session at
//! a time, so a foreign reply never overlaps a send of this device.

use chrono::Utc;

use super::open_session::OpenSession;
use crate::render::transcript::EntryState;
use convo_client::api::{Role, StreamEvent};
use convo_client::follow::{Change, ReplyFollower};

/// The foreign reply being followed.
#[derive(Debug, Clone)]
pub struct ForeignReply {
    pub message_id: String,
    pub follower: ReplyFollower,
    /// Its transcript item, once shown.
    pub item: Option<usize>,
    /// The service was asked to stop it (Ctrl-C here).
    pub cancel_sent: bool,
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
    /// A `delta` or `snapshot` of a reply this device did not ask for. Ignored while a send
    /// of this device is in flight (a reply of its own, not yet named, takes it).
    pub fn foreign_event(&mut self, event: &StreamEvent) -> ForeignStep {
        let (StreamEvent::Delta { message_id, .. } | StreamEvent::Snapshot { message_id, .. }) =
            event
        else {
            return ForeignStep::Nothing;
        };
        if self.pending.is_some() || self.cut_off.is_some() {
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
                // It answers a message of another device; nothing here is to be sent again.
                follower: ReplyFollower::new(Role::User, ""),
                item: None,
                cancel_sent: false,
            });
            step = ForeignStep::FetchHistory;
        }
        let Some(foreign) = self.foreign.as_mut() else {
            return step;
        };
        let change = foreign.follower.event(event).change;
        let text = foreign.follower.text().to_string();
        if let Some(idx) = foreign.item {
            let entry = self.items[idx].entry;
            match change {
                Change::None => {}
                Change::Appended(piece) => self.transcript.append_delta(entry, &piece),
                Change::Replaced => self.transcript.set_content(entry, text),
            }
        }
        step
    }

    /// After the stored history was read: the foreign reply followed so far shows at the end.
    pub fn show_foreign(&mut self) {
        let Some(foreign) = self.foreign.as_ref().filter(|f| f.item.is_none()) else {
            return;
        };
        let (message_id, text) = (
            foreign.message_id.clone(),
            foreign.follower.text().to_string(),
        );
        let idx = self.push(
            Role::Assistant,
            text,
            EntryState::Streaming,
            0,
            Some(message_id),
            Utc::now(),
        );
        if let Some(f) = self.foreign.as_mut() {
            f.item = Some(idx);
        }
        self.follow = true;
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
