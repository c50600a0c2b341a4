//! The reply lifecycle: a loaded transcript, the POST's answer, stream events, the reply
//! finished or failed, and the history fetched to settle a reply the stream lost.

use convo_client::api::stream::StreamUpdate;
use convo_client::api::{ApiError, ErrorBody, Message, Role, StreamEvent};
use convo_client::follow::{Change, Next, ReplyFailure, ReplyStatus};
use convo_client::sanitize::sanitize_owned;

use super::{App, Command, Focus, Level, NEW_SESSION_TITLE, StoreOp, StreamState, title_from};
use crate::composer_pane::Lapse;
use crate::dialogs::Overlay;
use crate::event::{HistoryFetch, StoredMessage, describe_failure};
use crate::render::transcript::{EntryId, EntryState, Transcript};
use crate::transcript_pane::{
    ForeignEnd, ForeignStep, PendingSend, TranscriptItem, render_stored, reply_slot, stored_state,
};

/// Notices of the reply lifecycle.
pub(super) const SESSION_GONE: &str =
    "this session was deleted on the server; start a new one (Ctrl-N) — your text is kept";
const REPLY_NOT_KEPT: &str = "the reply was cut short and the service did not keep it; what arrived is kept, marked interrupted";
const NO_HISTORY: &str = "the stream dropped mid-reply and this service cannot list past messages: the reply stays as far as it came, marked interrupted";
const HISTORY_FAILED: &str = "cannot fetch the history to settle a lost reply";
/// Said when a send of this device waits behind the turn another send started first.
pub(super) const HELD_BEHIND: &str = "a message sent elsewhere reached the service first: its reply comes now, and yours is answered after it";

impl App {
    // ---- network results -------------------------------------------------------------------

    pub(super) fn on_transcript_loaded(
        &mut self,
        session_id: String,
        messages: Vec<StoredMessage>,
        draft: Option<String>,
        rendered: Option<Transcript>,
        out: &mut Vec<Command>,
    ) {
        let started = std::time::Instant::now();
        // A session nothing was sent to yet has no history on the server to ask for (the
        // request would be a 404, counted against the plan).
        let from_service = self.history_from_service() && !self.is_unsent(&session_id);
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            return;
        };
        if open.loaded {
            return;
        }
        // The render model of the stored messages: prepared by the store worker, or made here.
        let rendered = match rendered {
            Some(rendered) if rendered.len() == messages.len() => rendered,
            other => {
                if let Some(other) = other {
                    tracing::warn!(
                        rendered = other.len(),
                        stored = messages.len(),
                        "prepared transcript does not match"
                    );
                }
                render_stored(&messages)
            }
        };
        // Messages sent before the load finished stay after the stored ones.
        let recent = std::mem::take(&mut open.items);
        for m in messages {
            let state = stored_state(m.status);
            open.items.push(TranscriptItem {
                entry: EntryId(0),
                role: m.role,
                tokens: m.tokens,
                message_id: m.message_id,
                state,
                created_at: m.created_at,
                finish: m.finish_reason,
            });
        }
        let shift = open.items.len();
        open.items.extend(recent);
        for p in open.pending.iter_mut().chain(open.cut_off.iter_mut()) {
            p.user_item += shift;
            p.reply_item += shift;
        }
        open.adopt(rendered, shift);
        open.loaded = true;
        tracing::debug!(
            messages = open.items.len(),
            micros = started.elapsed().as_micros() as u64,
            "transcript loaded on the UI task"
        );
        open.follow = true;
        // Ends unsettled (a reply stopped or cut short, or a message with no reply: the app
        // quit or was killed mid-reply): the service's history says how it ended.
        // Where the service keeps histories, what other devices added is asked for too.
        if open.unsettled(shift) || from_service {
            out.push(Command::FetchHistory {
                session_id: session_id.clone(),
            });
        }
        self.composer.stored(draft.clone().unwrap_or_default());
        if let Some(d) = draft.filter(|d| !d.is_empty())
            && self.composer.is_empty()
        {
            self.composer.set_text(&d);
        }
    }

    pub(super) fn on_send_accepted(
        &mut self,
        session_id: String,
        send_id: u64,
        reply: Message,
        prompt_tokens: u64,
        out: &mut Vec<Command>,
    ) {
        self.note_answer(Ok(()));
        out.push(Command::RefreshUsage);
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            return;
        };
        // Held behind another send's turn, which ended before the service answered this one:
        // it comes back once that turn has settled here too (its `done` may still be on the
        // way, and the read of its exchange), so that its message is shown and stored after
        // that reply.
        if open.holds(send_id) {
            if open.other_turn_unsettled() {
                open.hold_answer(reply, prompt_tokens);
                return;
            }
            open.release_held();
        }
        if let Some(p) = open.stopped.take_if(|p| p.send_id == send_id) {
            return self.stopped_send_accepted(session_id, p, reply, prompt_tokens, out);
        }
        let Some(p) = open.pending.as_mut().filter(|p| p.send_id == send_id) else {
            return;
        };
        p.accepted = true;
        let (user_item, reply_item) = (p.user_item, p.reply_item);
        let sent_text = p.text.clone();
        let sent_role = p.role;
        let streamed = p.streamed;
        let message = open.message_taken(user_item, reply_item, &reply.message_id, prompt_tokens);
        out.extend(message.map(|message| {
            Command::Persist(StoreOp::AppendMessage {
                session_id: session_id.clone(),
                message,
            })
        }));
        let reply_done = open.pending.as_ref().is_some_and(|p| p.reply_done);
        let step = open
            .pending
            .as_mut()
            .map(|p| p.follower.accepted(&reply, !streamed));
        if reply_done {
            open.pending = None;
            self.store_reply(&session_id, reply_item, out);
        } else if !reply.content.is_empty() || !streamed {
            open.resume(reply_item);
            self.finish_reply(&session_id, reply, out);
        } else if open.is_cut_off(reply_item) {
            // The stream dropped before the server answered: the reply is lost to it, and the
            // stored history settles it once the stream is back.
            open.cut_off = open.pending.take();
            if step.is_some_and(|s| s.next == Next::FetchHistory) {
                out.push(Command::FetchHistory {
                    session_id: session_id.clone(),
                });
            }
        }
        self.list_sent(&session_id, sent_role, &sent_text, prompt_tokens, out);
    }

    /// The service's answer to a send whose reply the user stopped watching before it came
    /// (`OpenSession::stopped`): the message is stored as any sent one is; the reply is
    /// stored whole when the answer or the stream brought it whole, and otherwise as far as
    /// it came, named by its id, so that the reply the service stores replaces it
    /// (`App::complete_reply`).
    fn stopped_send_accepted(
        &mut self,
        session_id: String,
        p: PendingSend,
        reply: Message,
        prompt_tokens: u64,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            return;
        };
        let message =
            open.message_taken(p.user_item, p.reply_item, &reply.message_id, prompt_tokens);
        out.extend(message.map(|message| {
            Command::Persist(StoreOp::AppendMessage {
                session_id: session_id.clone(),
                message,
            })
        }));
        if p.reply_done {
            self.store_reply(&session_id, p.reply_item, out);
        } else if !reply.content.is_empty() || !p.streamed {
            self.finish_reply(&session_id, reply, out);
        } else if let Some(message) = open.stored(p.reply_item) {
            out.push(Command::Persist(StoreOp::AppendMessage {
                session_id: session_id.clone(),
                message,
            }));
        }
        self.list_sent(&session_id, p.role, &p.text, prompt_tokens, out);
    }

    /// A message of this device the service took: the session list gets its title from the
    /// first message, its activity and its tokens, most recent first.
    fn list_sent(
        &mut self,
        session_id: &str,
        role: Role,
        text: &str,
        prompt_tokens: u64,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session().filter(|o| o.id == session_id) else {
            return;
        };
        // The session's first user message titles it, over a system message's title.
        let first_user =
            role == Role::User && open.items.iter().filter(|i| i.role == Role::User).count() == 1;
        let system_titled = open.items.iter().any(|i| i.role == Role::System);
        if let Some(s) = self.sessions_pane.get_mut(session_id) {
            // A system message titles a session until its first user message does; the
            // user's title (`/title`) stays.
            let untitled = s.title == NEW_SESSION_TITLE;
            if !s.title_set
                && ((first_user && (untitled || system_titled))
                    || (untitled && role == Role::System))
            {
                s.title = title_from(text);
            }
            s.last_activity = self.now;
            s.tokens += prompt_tokens;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
        self.sessions_pane.resort(session_id);
    }

    /// The reply is complete: authoritative content, tokens, stored.
    pub(super) fn finish_reply(
        &mut self,
        session_id: &str,
        reply: Message,
        out: &mut Vec<Command>,
    ) {
        self.complete_reply(session_id, reply, true, out);
    }

    /// As [`App::finish_reply`], never announced: a reply this device asked the service to
    /// stop.
    fn finish_reply_quietly(&mut self, session_id: &str, reply: Message, out: &mut Vec<Command>) {
        self.complete_reply(session_id, reply, false, out);
    }

    fn complete_reply(
        &mut self,
        session_id: &str,
        reply: Message,
        may_announce: bool,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let idx = match open
            .items
            .iter()
            .position(|i| i.message_id.as_deref() == Some(reply.message_id.as_str()))
        {
            Some(i) => i,
            None => return,
        };
        // A reply still coming completes; so does one the user stopped watching (Ctrl-C),
        // which the service went on to store whole: the transcript shows what it stored,
        // and counts its tokens. A finished or failed one stays as it is.
        let stopped = open.items[idx].state == EntryState::Interrupted && !open.is_cut_off(idx);
        if open.items[idx].state != EntryState::Streaming && !stopped {
            return;
        }
        // A reply the user stopped is not announced when the service finishes it.
        let took = open
            .pending
            .as_ref()
            .filter(|p| p.reply_item == idx)
            .map(|p| p.started.elapsed());
        // Nor is one the user asked the service to stop.
        let cancelled = open
            .pending
            .as_ref()
            .is_some_and(|p| p.reply_item == idx && p.stop_asked);
        let announce = may_announce
            && !stopped
            && !cancelled
            && crate::notify::should_notify(&self.settings.notify, self.terminal_focused, took);
        if announce {
            let title = self
                .sessions_pane
                .get(session_id)
                .map_or(NEW_SESSION_TITLE, |s| s.title.as_str());
            out.push(Command::Notify(
                crate::notify::Notification::reply_finished(self.settings.notify.mode, title),
            ));
        }
        let item = &mut open.items[idx];
        item.tokens = reply.tokens;
        item.state = EntryState::Complete;
        let entry = item.entry;
        if open.content(idx) != reply.content {
            open.transcript.set_content(entry, reply.content);
        }
        open.transcript.set_state(entry, EntryState::Complete);
        // A reply stopped or cut by a limit says so, and the store keeps it.
        open.set_finish(idx, reply.finish_reason);
        self.reply_ended();
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let unanswered = (open.pending.iter_mut())
            .chain(open.stopped.iter_mut())
            .find(|p| p.reply_item == idx);
        match unanswered {
            // The stream beat the POST's answer: the reply is stored after the message.
            Some(p) if !p.accepted => {
                p.reply_done = true;
                return;
            }
            Some(_) => open.pending = None,
            None => {}
        }
        self.store_reply(session_id, idx, out);
    }

    /// Stores a completed reply and counts its tokens in the session.
    pub(super) fn store_reply(&mut self, session_id: &str, idx: usize, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let Some(message) = open.stored(idx) else {
            return;
        };
        let tokens = message.tokens;
        out.push(Command::Persist(StoreOp::AppendMessage {
            session_id: session_id.to_string(),
            message,
        }));
        if let Some(s) = self.sessions_pane.get_mut(session_id) {
            s.tokens += tokens;
            s.last_activity = self.now;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
        out.push(Command::RefreshUsage);
    }

    pub(super) fn on_send_failed(
        &mut self,
        session_id: String,
        send_id: u64,
        failure: ApiError,
        out: &mut Vec<Command>,
    ) {
        self.note_answer(Err(&failure));
        let now = self.now;
        let typed = self.composer_text();
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            self.notify(
                Level::Error,
                format!("send failed: {}", describe_failure(&failure, now)),
            );
            return;
        };
        // A send held behind another send's turn shows again, to fail as any send does.
        if open.holds(send_id) {
            open.release_held();
        }
        let sent = |p: &mut PendingSend| p.send_id == send_id;
        let Some(p) = (open.pending.take_if(sent)).or_else(|| open.stopped.take_if(sent)) else {
            return;
        };
        // Take the two entries out again; the text goes back to the composer.
        open.remove_from(p.user_item);
        let mut draft = p.text.clone();
        if !self.composer.is_empty() {
            draft.push('\n');
            draft.push_str(&typed);
        }
        if p.role == Role::System {
            draft = format!("/system {draft}");
        }
        self.composer.set_text(&draft);
        self.focus = Focus::Composer;
        let lapse = match failure {
            ApiError::Network(_) => Lapse::LinkUp,
            _ => Lapse::Edited,
        };
        self.composer
            .set_send_note(describe_failure(&failure, now), lapse);
        match failure {
            ApiError::ContextOverflow { current, max, .. } => {
                open.context_max = max;
                // The service's window, learned: sessions opened from now on start with it
                // (the dialog's new session first of all).
                if max > 0 {
                    self.settings.max_context_tokens = max;
                }
                self.dialogs.open(Overlay::ContextOverflow {
                    current,
                    max,
                    draft,
                });
            }
            ApiError::SessionNotFound { .. } => {
                self.notify(Level::Warn, SESSION_GONE);
            }
            ApiError::QuotaExceeded { .. } => out.push(Command::RefreshUsage),
            _ => {}
        }
    }

    pub(super) fn on_stream(
        &mut self,
        session_id: String,
        update: StreamUpdate,
        out: &mut Vec<Command>,
    ) {
        match &update {
            StreamUpdate::Connected => self.note_answer(Ok(())),
            StreamUpdate::Disconnected { error, .. } => self.note_answer(Err(error)),
            _ => {}
        }
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            return;
        };
        match update {
            StreamUpdate::Connected => {
                open.stream = StreamState::Open;
                // A reply lost with the old connection: the service sends a snapshot of it
                // if it is still being generated; the stored history says if it finished
                // meanwhile or was dropped (the follower asks for it).
                let mut fetch = false;
                for p in open.pending.iter_mut().chain(open.cut_off.iter_mut()) {
                    fetch |= p.follower.stream_connected().next == Next::FetchHistory;
                }
                if let Some(held) = open.held.as_mut() {
                    held.send.follower.stream_connected();
                }
                // Another device's reply lost with it: the same, through its follower.
                if (fetch && open.cut_off.is_some()) || open.foreign_connected() {
                    out.push(Command::FetchHistory { session_id });
                }
            }
            StreamUpdate::Disconnected { error, .. } => {
                open.stream = StreamState::Down(error.to_string());
                for p in open.pending.iter_mut().chain(open.cut_off.iter_mut()) {
                    p.follower.stream_lost();
                }
                if let Some(held) = open.held.as_mut() {
                    held.send.follower.stream_lost();
                }
                open.cut_off_reply();
                open.foreign_lost();
            }
            StreamUpdate::Unsupported => open.stream = StreamState::Unsupported,
            StreamUpdate::Event(ev) => match ev {
                StreamEvent::Started { ref message_id, .. } => {
                    if self.on_started(&session_id, &ev, message_id) {
                        out.push(Command::FetchHistory { session_id });
                    }
                }
                StreamEvent::Delta { ref message_id, .. }
                | StreamEvent::Snapshot { ref message_id, .. } => {
                    // A reply another device started: followed on its own.
                    let foreign = open
                        .foreign
                        .as_ref()
                        .is_some_and(|f| &f.message_id == message_id);
                    let slot = if foreign {
                        None
                    } else {
                        reply_slot(open, message_id)
                    };
                    let Some(idx) = slot else {
                        if open.foreign_event(&ev) == ForeignStep::FetchHistory {
                            out.push(Command::FetchHistory { session_id });
                        }
                        return;
                    };
                    // Only the reply in flight (or lost by the stream) is followed; one the
                    // user stopped (Ctrl-C) stays as it is.
                    let streaming = open.items[idx].state == EntryState::Streaming;
                    if !streaming && !open.is_cut_off(idx) {
                        return;
                    }
                    let Some(p) = open
                        .pending
                        .iter_mut()
                        .chain(open.cut_off.iter_mut())
                        .find(|p| p.reply_item == idx)
                    else {
                        return;
                    };
                    // The follower drops duplicates and picks a lost reply up only where
                    // it left off.
                    let step = p.follower.event(&ev);
                    let text = p.follower.text().to_string();
                    if step.change != Change::None {
                        open.resume(idx);
                    }
                    open.show_reply_change(idx, step.change, text);
                }
                StreamEvent::Progress { ref message_id, .. } => {
                    // Another device's reply waiting for its first text shows it as ours does.
                    if let Some(f) = open
                        .foreign
                        .as_mut()
                        .filter(|f| &f.message_id == message_id)
                    {
                        f.follower.event(&ev);
                        self.show_waiting();
                        return;
                    }
                    let Some(p) = open.pending.as_mut() else {
                        return;
                    };
                    let mine = open.items[p.reply_item].message_id.as_deref();
                    if mine.is_some_and(|id| id != message_id) {
                        return;
                    }
                    p.follower.event(&ev);
                    self.show_waiting();
                }
                StreamEvent::Done { message } => {
                    // Another device's reply that this device asked the service to stop is
                    // not announced as finished.
                    let stopped_here = open
                        .foreign
                        .as_ref()
                        .is_some_and(|f| f.message_id == message.message_id && f.cancel_sent);
                    // Another device's reply not shown yet: the history brings it whole.
                    if open.end_foreign(&message.message_id) == Some(None) {
                        out.push(Command::FetchHistory { session_id });
                        return;
                    }
                    if let Some(idx) = reply_slot(open, &message.message_id) {
                        open.items[idx].message_id = Some(message.message_id.clone());
                        open.resume(idx);
                        if let Some(p) = open
                            .pending
                            .iter_mut()
                            .chain(open.cut_off.iter_mut())
                            .find(|p| p.reply_item == idx)
                        {
                            p.follower.event(&StreamEvent::Done {
                                message: message.clone(),
                            });
                        }
                    }
                    if stopped_here {
                        self.finish_reply_quietly(&session_id, message, out);
                    } else {
                        self.finish_reply(&session_id, message, out);
                    }
                }
                StreamEvent::Error {
                    ref message_id,
                    ref error,
                    ..
                } => {
                    // Another device's reply: its follower decides, as for one of ours.
                    if let Some(end) = open.foreign_error(&ev, message_id) {
                        if end == ForeignEnd::Interrupted {
                            self.notify(Level::Warn, interrupted("another device's reply", error));
                        }
                        self.foreign_ended(&session_id, end, out);
                        return;
                    }
                    let Some(idx) = reply_slot(open, message_id) else {
                        return;
                    };
                    // The reply's follower decides whether it failed (only a reply still
                    // followed can) and what becomes of the message it answered.
                    let Some(p) = open
                        .pending
                        .iter_mut()
                        .chain(open.cut_off.iter_mut())
                        .chain(open.stopped.iter_mut())
                        .find(|p| p.reply_item == idx)
                    else {
                        let stopped = open.items[idx].state == EntryState::Interrupted
                            && !open.is_cut_off(idx);
                        if stopped && error.code == "reply_stopped" {
                            self.stopped_reply_undone(&session_id, idx, error, out);
                        }
                        return;
                    };
                    p.follower.event(&ev);
                    match p.follower.status().clone() {
                        ReplyStatus::Failed(failure) => {
                            if let ReplyFailure::Error(error) = &failure {
                                let resend = failure.resend_message();
                                self.reply_failed(&session_id, idx, error, resend, out);
                            }
                        }
                        // The stream here cannot carry the reply for now (the replica lost
                        // its relay, or is stopping): it is interrupted, not failed, and
                        // comes back as a snapshot, its `done`, or the stored history.
                        ReplyStatus::Interrupted => {
                            open.cut_off_reply();
                            if let StreamEvent::Error { error, .. } = &ev {
                                self.notify(Level::Warn, interrupted("the reply", error));
                            }
                        }
                        ReplyStatus::Coming | ReplyStatus::Done(_) => {}
                    }
                }
            },
        }
    }

    /// The reply at `idx` failed with the stream's `error`, as its follower decided: it is
    /// marked failed and, when the follower says its message is to be sent again (the turn
    /// rolled back), that message is marked not sent and goes back to the composer.
    fn reply_failed(
        &mut self,
        session_id: &str,
        idx: usize,
        error: &ErrorBody,
        resend: bool,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let followed = |p: &mut PendingSend| p.reply_item == idx;
        let Some(p) = open
            .pending
            .take_if(followed)
            .or_else(|| open.cut_off.take_if(followed))
            .or_else(|| open.stopped.take_if(followed))
        else {
            return;
        };
        self.show_failed(session_id, idx, p.user_item, error, resend, out);
    }

    /// A reply this device stopped watching after it asked the service to stop it (a second
    /// Ctrl-C), which the service then stopped before any text (`reply_stopped`): the turn was
    /// undone there, so the reply, stored here as interrupted, is marked failed, and its
    /// message not sent, as for a reply followed to that end.
    fn stopped_reply_undone(
        &mut self,
        session_id: &str,
        idx: usize,
        error: &ErrorBody,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        // The message it answers is the item before it (a send shows the two together).
        let Some(user_item) = idx
            .checked_sub(1)
            .filter(|&i| open.items[i].role != Role::Assistant)
        else {
            return;
        };
        self.show_failed(session_id, idx, user_item, error, true, out);
        if let Some(open) = self.transcript.session_mut_if(session_id)
            && let Some(message) = open.stored(idx)
        {
            out.push(Command::Persist(StoreOp::AppendMessage {
                session_id: session_id.to_string(),
                message,
            }));
        }
    }

    /// Shows the reply at `idx` failed with `error` and, when its message is to be sent again
    /// (`resend`: the turn rolled back), marks that message (`user_item`) not sent and gives
    /// it back to the composer.
    fn show_failed(
        &mut self,
        session_id: &str,
        idx: usize,
        user_item: usize,
        error: &ErrorBody,
        resend: bool,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let mut text = if error.code == "reply_stopped" {
            "stopped before any text came: the turn was undone".to_string()
        } else {
            format!(
                "the reply failed: {}: {}",
                error.code,
                sanitize_owned(&error.message)
            )
        };
        open.set_state(idx, EntryState::Failed(error.code.clone()));
        open.set_note(idx, None);
        let message = Some(user_item).filter(|&i| {
            open.items
                .get(i)
                .is_some_and(|m| m.state == EntryState::Complete)
        });
        if let Some(i) = message.filter(|_| resend) {
            let back = self.mark_unsent(session_id, i, out);
            text.push_str(match back {
                true => {
                    "; your message was not kept: it is back in the composer, \
                         marked not sent — send it again"
                }
                false => "; your message was not kept: it is marked not sent",
            });
        }
        self.reply_ended();
        self.notify(Level::Error, text);
    }

    /// A `started` event of the open session's stream, for the reply `message_id`: a reply of
    /// this device's (known by id, or the one its pending send's follower takes by the
    /// `Idempotency-Key`) is followed; another send's reply that began while this device's
    /// send waited for its answer holds that send back behind it (`held_send.rs`); a held
    /// send's own reply brings it back; any other is another device's reply, followed as such.
    /// True when the stored history is to be read (the message that reply answers).
    fn on_started(&mut self, session_id: &str, event: &StreamEvent, message_id: &str) -> bool {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return false;
        };
        let own = open
            .pending
            .iter_mut()
            .chain(open.cut_off.iter_mut())
            .chain(open.stopped.iter_mut())
            .find(|p| p.follower.reply_id() == Some(message_id));
        if let Some(p) = own {
            p.follower.event(event);
            return false;
        }
        // The reply of a send the user stopped before its answer came: named, so that its
        // answer and its `done` find it.
        if let Some(p) = open
            .stopped
            .as_mut()
            .filter(|p| p.follower.reply_id().is_none())
        {
            p.follower.event(event);
            if p.follower.reply_id() == Some(message_id) {
                open.items[p.reply_item].message_id = Some(message_id.to_string());
                return false;
            }
        }
        let mut held_back = false;
        if let Some(p) = open
            .pending
            .as_mut()
            .filter(|p| p.follower.reply_id().is_none())
        {
            p.follower.event(event);
            if p.follower.reply_id() == Some(message_id) {
                let idx = p.reply_item;
                open.items[idx].message_id = Some(message_id.to_string());
                return false;
            }
            held_back = open.hold_pending();
        } else if let Some(held) = open.held.as_mut() {
            held.send.follower.event(event);
            if held.send.follower.reply_id() == Some(message_id) {
                // Answered already: `release_answered_held` brings it back with its answer.
                if held.answer.is_none() {
                    open.release_held();
                }
                return false;
            }
        }
        let fetch = open.foreign_event(event) == ForeignStep::FetchHistory;
        if fetch {
            open.other_read_asked();
        }
        if held_back {
            self.notify(Level::Info, HELD_BEHIND);
        }
        fetch
    }

    /// After each event: a held send whose POST was answered comes back, with that answer,
    /// once no other reply is shown coming in its session.
    pub(super) fn release_answered_held(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session_mut() else {
            return;
        };
        let session_id = open.id.clone();
        if let Some((send_id, reply, tokens)) = open.take_due_answer() {
            self.on_send_accepted(session_id, send_id, reply, tokens, out);
        }
    }

    /// The stored history after a reconnect settles a reply that the stream lost, as its
    /// `ReplyFollower` decides (`convo_client::follow`): stored → shown whole and kept; its
    /// message stored but not the reply → still being generated while the stream's snapshot
    /// says so, else (a restarted server) not kept; neither → the service dropped the turn.
    /// A reply not kept is marked `failed: not kept` and its message goes back to the composer.
    pub(super) fn on_history(
        &mut self,
        session_id: String,
        fetch: HistoryFetch,
        asked: std::time::Instant,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(&session_id) else {
            return;
        };
        open.other_read_came(asked);
        let Some(idx) = open.cut_off.as_ref().map(|p| p.reply_item) else {
            // Not a reply the stream lost: the history asked for when the session opened.
            if let HistoryFetch::Messages(messages) = fetch {
                self.settle_from_history(&session_id, messages.clone(), out);
                self.adopt_history(&session_id, &messages, asked, out);
            }
            return;
        };
        let Some(reply_id) = open.items.get(idx).and_then(|i| i.message_id.clone()) else {
            return;
        };
        match fetch {
            HistoryFetch::Messages(messages) => {
                let Some(p) = open.cut_off.as_mut() else {
                    return;
                };
                p.follower.reply_id_known(&reply_id);
                let step = p.follower.history(&messages);
                match p.follower.status().clone() {
                    ReplyStatus::Done(reply) => {
                        open.resume(idx);
                        self.finish_reply(&session_id, reply, out);
                        self.notify(Level::Info, "the reply finished while the stream was down");
                    }
                    ReplyStatus::Failed(failure @ ReplyFailure::NotKept { .. }) => {
                        self.reply_not_kept(&session_id, idx, failure.message_dropped(), out);
                    }
                    ReplyStatus::Failed(ReplyFailure::Error(_)) | ReplyStatus::Coming => {}
                    ReplyStatus::Interrupted => {
                        tracing::debug!(session = %session_id, "the lost reply may still be coming");
                        if step.next == Next::FetchHistoryLater {
                            out.push(Command::FetchHistoryLater { session_id });
                        }
                    }
                }
            }
            HistoryFetch::Unsupported => {
                out.extend(open.settle_cut_off());
                self.notify(Level::Warn, NO_HISTORY);
            }
            HistoryFetch::Failed(e) => {
                tracing::warn!(session = %session_id, error = %e, HISTORY_FAILED);
            }
        }
    }

    /// The lost reply is not kept by the service: the reply is marked `failed: not kept`, and
    /// the message's text goes back to the composer to send again. When the turn rolled back
    /// (`message_dropped`), the message is marked not sent; when the service kept it without a
    /// reply (the server was killed mid-reply and restarted), it stays as sent, as the service
    /// holds it.
    fn reply_not_kept(
        &mut self,
        session_id: &str,
        idx: usize,
        message_dropped: bool,
        out: &mut Vec<Command>,
    ) {
        let Some(open) = self.transcript.session_mut_if(session_id) else {
            return;
        };
        let user_item = open.cut_off.as_ref().map(|p| p.user_item);
        open.set_state(idx, EntryState::Failed("not kept".into()));
        out.extend(open.settle_cut_off());
        let kept = user_item
            .filter(|_| !message_dropped)
            .map(|u| (open.items[u].role, open.content(u).to_string()));
        match (user_item, kept) {
            (Some(_), Some((role, text))) => self.kept_without_reply(role, text),
            (Some(u), None) => {
                self.mark_unsent(session_id, u, out);
            }
            (None, _) => self.notify(Level::Warn, REPLY_NOT_KEPT),
        }
    }
}

/// The warning for a reply (`whose`) that an `error` leaving its turn open interrupted: the
/// service's words, and no promise of how it ends (a stopping replica's reply may go on
/// elsewhere, or have been rolled back with its turn).
fn interrupted(whose: &str, error: &ErrorBody) -> String {
    format!(
        "{whose} is interrupted: {}; what became of it shows once the service can say",
        sanitize_owned(&error.message)
    )
}
