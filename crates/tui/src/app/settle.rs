//! Settling a transcript that ends unsettled against the service's stored history: a reply
//! the user stopped watching (Ctrl-C) or that was cut short, a message with no reply after it
//! (the app quit or was killed mid-reply), a turn the service rolled back (it restarted).

use chrono::{DateTime, Utc};
use convo_client::api::{Message, Role};

use super::{App, Command, Level, StoreOp};
use crate::render::transcript::EntryState;
use crate::transcript_pane::{ForeignEnd, OpenSession};

/// Said when a message shown as sent turns out not to be kept by the service.
pub(super) const NOT_KEPT_BACK: &str = "the service did not keep your last message (it may have restarted): it is back in the composer, marked not sent — send it again";
pub(super) const NOT_KEPT: &str =
    "the service did not keep your last message (it may have restarted): it is marked not sent";
/// Said when the service no longer holds a last message this TUI read from its history.
pub(super) const NOT_KEPT_SENT_ELSEWHERE: &str = "the service did not keep the last message (sent from another device or by a command; it may have restarted): it is marked not sent here";
/// Said when the service kept the last message but not its reply (it restarted mid-reply).
pub(super) const NO_REPLY_BACK: &str = "the service kept your last message but not its reply (it restarted): the text is back in the composer to ask again";
pub(super) const NO_REPLY: &str =
    "the service kept your last message but not its reply (it restarted): send it again to get one";
/// Said when another device's reply failed and the service rolled its turn back.
pub(super) const NOT_KEPT_ELSEWHERE: &str = "another device's reply failed and the service did not keep the message it answered: it is marked not sent here";
const FILLED_IN: &str = "the reply that came while convo was away is shown";

impl OpenSession {
    /// Whether the stored part of the transcript (`items[..stored]`) ends unsettled: a reply
    /// cut short that has a service id, or a message with no reply after it.
    pub(super) fn unsettled(&self, stored: usize) -> bool {
        let Some(last) = stored.checked_sub(1).and_then(|i| self.items.get(i)) else {
            return false;
        };
        match last.role {
            Role::Assistant => last.state == EntryState::Interrupted && last.message_id.is_some(),
            Role::User | Role::System => last.state == EntryState::Complete,
        }
    }

    /// Takes how the replies of `history` ended onto the items showing them (by id) that
    /// do not say it yet or say otherwise: a reply stored here before this client kept
    /// finish reasons, or written by one that does not. Returns the items changed.
    pub(super) fn adopt_finish_reasons(&mut self, history: &[Message]) -> Vec<usize> {
        let mut changed = Vec::new();
        for m in history.iter().filter(|m| m.finish_reason.is_some()) {
            let Some(idx) = self
                .items
                .iter()
                .position(|i| i.message_id.as_deref() == Some(m.message_id.as_str()))
            else {
                continue;
            };
            let item = &self.items[idx];
            if item.state == EntryState::Complete && item.finish != m.finish_reason {
                self.set_finish(idx, m.finish_reason);
                changed.push(idx);
            }
        }
        changed
    }
}

impl App {
    /// The history asked for when the session opened: a reply stored whole replaces the cut
    /// copy; a reply this client never got is added; a last message the service does not
    /// have is marked not sent and offered again.
    pub(super) fn settle_from_history(
        &mut self,
        session_id: &str,
        history: Vec<Message>,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        if open.own_send_in_flight() {
            // A send of this run is in flight: its own events settle it.
            return;
        }
        // Replies whose end the local store does not know.
        for idx in open.adopt_finish_reasons(&history) {
            out.extend(open.stored(idx).map(|message| {
                Command::Persist(StoreOp::AppendMessage {
                    session_id: session_id.to_string(),
                    message,
                })
            }));
        }
        let mut gained = 0u64;
        // Replies cut short here that the service stored whole.
        for idx in 0..open.items.len() {
            let item = &open.items[idx];
            if item.role != Role::Assistant || item.state != EntryState::Interrupted {
                continue;
            }
            let Some(whole) = item
                .message_id
                .as_deref()
                .and_then(|id| history.iter().find(|m| m.message_id == id))
            else {
                continue;
            };
            let (entry, before) = (item.entry, item.tokens);
            open.transcript.set_content(entry, whole.content.clone());
            open.items[idx].tokens = whole.tokens;
            open.set_finish(idx, whole.finish_reason);
            open.set_state(idx, EntryState::Complete);
            gained += whole.tokens.saturating_sub(before);
            out.extend(open.stored(idx).map(|message| {
                Command::Persist(StoreOp::AppendMessage {
                    session_id: session_id.to_string(),
                    message,
                })
            }));
        }
        // A last message with no reply after it (unless another device's reply to it is
        // followed: its follower settles both).
        let last = open
            .items
            .len()
            .checked_sub(1)
            .filter(|_| open.foreign.is_none());
        let sent = last.filter(|&i| {
            let item = &open.items[i];
            item.role != Role::Assistant && item.state == EntryState::Complete
        });
        if let Some(idx) = sent {
            let (role, text) = (open.items[idx].role, open.content(idx).to_string());
            // A message this TUI sent is stored without a service id (a send is answered with
            // its reply's id); one with an id was read from the service's history: sent from
            // another device, or by a command.
            let sent_here = open.items[idx].message_id.is_none();
            match history
                .iter()
                .rposition(|m| m.role == role && m.content == text)
            {
                Some(pos) => {
                    if let Some(reply) = history.get(pos + 1).filter(|m| {
                        m.role == Role::Assistant
                            && !open
                                .items
                                .iter()
                                .any(|i| i.message_id.as_deref() == Some(&m.message_id))
                    }) {
                        let at = DateTime::parse_from_rfc3339(&reply.created_at)
                            .map(|t| t.with_timezone(&Utc))
                            .unwrap_or(self.now);
                        let i = open.push(
                            Role::Assistant,
                            reply.content.clone(),
                            EntryState::Complete,
                            reply.tokens,
                            Some(reply.message_id.clone()),
                            at,
                        );
                        open.set_finish(i, reply.finish_reason);
                        gained += reply.tokens;
                        out.extend(open.stored(i).map(|message| {
                            Command::Persist(StoreOp::AppendMessage {
                                session_id: session_id.to_string(),
                                message,
                            })
                        }));
                        self.notify(Level::Info, FILLED_IN);
                    }
                    // Else the reply is still being made, or the message had none: as is.
                }
                None if sent_here => {
                    self.mark_unsent(session_id, idx, out);
                }
                // Not this TUI's to send again: the device that sent it offers it.
                None => {
                    if self.mark_not_kept(session_id, idx, out).is_some() {
                        self.notify(Level::Warn, NOT_KEPT_SENT_ELSEWHERE);
                    }
                }
            }
        }
        if gained > 0
            && let Some(s) = self.sessions_pane.get_mut(session_id)
        {
            s.tokens += gained;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
    }

    /// Item `idx`, a message shown as sent, is not kept by the service: it is marked not sent
    /// (here and in the local store), and its text goes back to an empty composer to send
    /// again. Returns whether it went back (the composer held nothing).
    pub(super) fn mark_unsent(
        &mut self,
        session_id: &str,
        idx: usize,
        out: &mut Vec<Command>,
    ) -> bool {
        match self.mark_not_kept(session_id, idx, out) {
            Some((role, text)) => self.back_to_composer(role, text),
            None => false,
        }
    }

    /// Another device's reply failed and its turn rolled back (`ForeignEnd`): shown so; the
    /// message it answered, item `answers` if any, is no longer the service's. It was sent
    /// elsewhere, so it is marked not sent without coming to this composer (the device that
    /// sent it offers it again).
    pub(super) fn foreign_ended(
        &mut self,
        session_id: &str,
        end: ForeignEnd,
        out: &mut Vec<Command>,
    ) {
        let ForeignEnd::Failed { answers: Some(idx) } = end else {
            return;
        };
        if self.mark_not_kept(session_id, idx, out).is_some() {
            self.notify(Level::Warn, NOT_KEPT_ELSEWHERE);
        }
    }

    /// Item `idx`, a message shown as sent, is not kept by the service: marked not sent here
    /// and in the local store, out of the context gauge. Returns its role and text.
    fn mark_not_kept(
        &mut self,
        session_id: &str,
        idx: usize,
        out: &mut Vec<Command>,
    ) -> Option<(Role, String)> {
        let open = self.transcript.session_mut_if(session_id)?;
        let role = open.items.get(idx)?.role;
        let stored = open.stored(idx);
        let text = open.content(idx).to_string();
        open.set_state(idx, EntryState::Failed("not sent".into()));
        // Not in the service's context: the gauge no longer counts it, nor the session's
        // tokens in the list once the store answers `MarkUnsent` with its count.
        open.items[idx].tokens = 0;
        if let Some(message) = stored {
            out.push(Command::Persist(StoreOp::MarkUnsent {
                session_id: session_id.to_string(),
                message,
            }));
        }
        Some((role, text))
    }

    /// A message this device sent that the service did not keep: its text goes back to an
    /// empty composer, and the status bar says so. Returns whether it went back.
    fn back_to_composer(&mut self, role: Role, text: String) -> bool {
        let back = self.offer_again(role, text);
        self.notify(Level::Warn, if back { NOT_KEPT_BACK } else { NOT_KEPT });
        back
    }

    /// A message this device sent that the service kept, but with no reply (it was killed
    /// mid-reply and restarted): the message stays as sent; its text goes back to an empty
    /// composer, to ask again.
    pub(super) fn kept_without_reply(&mut self, role: Role, text: String) {
        let back = self.offer_again(role, text);
        self.notify(Level::Warn, if back { NO_REPLY_BACK } else { NO_REPLY });
    }

    /// `text` of `role` into the composer as a draft to send again, when it is empty.
    fn offer_again(&mut self, role: Role, text: String) -> bool {
        if !self.composer.is_empty() {
            return false;
        }
        let draft = if role == Role::System {
            format!("/system {text}")
        } else {
            text
        };
        self.composer.set_text(&draft);
        true
    }
}
