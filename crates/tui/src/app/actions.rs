//! What keys and commands do: quitting, opening, creating and deleting sessions, and
//! sending a message.

use convo_client::api::{Role, SendMessage, new_session_id};
use convo_client::follow::ReplyFollower;
use convo_wire::limits::MAX_CONTENT_CHARS;

use super::{
    App, Command, Connection, Focus, Level, NEW_SESSION_TITLE, STILL_COMING, STOPPED_UNANSWERED,
    StoreOp, StreamState,
};
use crate::composer_pane::Lapse;
use crate::event::SessionSummary;
use crate::render::transcript::EntryState;
use crate::transcript_pane::{OpenSession, PendingSend};

impl App {
    // ---- actions ---------------------------------------------------------------------------

    pub(super) fn quit(&mut self, out: &mut Vec<Command>) {
        // Text typed before the store answered has no session to be saved with yet:
        // quit as soon as it has one.
        if !self.store_ready && !self.composer.is_empty() {
            self.quit_when_loaded = true;
            self.notify(Level::Info, "saving your draft…");
            return;
        }
        self.save_draft(out);
        self.keep_cut_replies(out);
        self.quit = true;
        out.push(Command::Quit);
    }

    /// Stores what arrived of the open session's replies still coming or lost by the stream,
    /// marked interrupted (leaving the session or quitting).
    pub(super) fn keep_cut_replies(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session_mut() else {
            return;
        };
        if let Some(p) = open.pending.take_if(|p| p.accepted) {
            open.set_state(p.reply_item, EntryState::Interrupted);
            if let Some(message) = open.stored(p.reply_item) {
                out.push(Command::Persist(StoreOp::AppendMessage {
                    session_id: open.id.clone(),
                    message,
                }));
            }
        }
        out.extend(open.settle_cut_off());
    }

    pub(super) fn save_draft(&mut self, out: &mut Vec<Command>) {
        if let Some(open) = self.transcript.session() {
            let text = self.composer_text();
            out.push(Command::Persist(StoreOp::SaveDraft {
                session_id: open.id.clone(),
                text: text.clone(),
            }));
            self.composer.stored(text);
        }
    }

    pub(super) fn page(&self) -> usize {
        let (_, h) = self.transcript_viewport();
        (h as usize).saturating_sub(2).max(1)
    }

    pub(super) fn open_selected(&mut self, out: &mut Vec<Command>) {
        if let Some(id) = self.sessions_pane.selected().map(|s| s.id.clone()) {
            // A notice about the session left behind (or its metadata, which stays with it)
            // would mislead here.
            if self.open_id() != Some(id.as_str()) {
                self.notice = None;
            }
            self.open_session(id, out);
            self.focus = Focus::Composer;
        }
    }

    /// Opens a session: saves the current draft, asks for the transcript and the stream.
    pub(super) fn open_session(&mut self, id: String, out: &mut Vec<Command>) {
        if self.open_id() == Some(id.as_str()) {
            return;
        }
        self.forget_session_gone();
        self.leave_open_session(out);
        // Another session, another history.
        self.composer.forget_recall();
        self.transcript.show(OpenSession::new(
            id.clone(),
            self.settings.max_context_tokens,
        ));
        self.sessions_pane.point_at(&id);
        let (width, rows) = self.transcript_viewport();
        out.push(Command::LoadTranscript {
            session_id: id.clone(),
            width,
            rows,
        });
        out.push(Command::Persist(StoreOp::SetLastOpen(id.clone())));
        if matches!(self.connection, Connection::Connected(_)) {
            out.push(Command::OpenStream { session_id: id });
        }
    }

    pub(super) fn leave_open_session(&mut self, out: &mut Vec<Command>) {
        self.save_draft(out);
        // A reply still streaming is kept as far as it came.
        self.keep_cut_replies(out);
        if self.transcript.close().is_some() {
            // The draft went to the store with its session. Text typed before any session
            // was open (the store still loading) stays for the session about to open.
            self.composer.clear();
            self.composer.set_metadata(None);
        }
        self.composer.set_send_error(None);
    }

    /// "This session was deleted on the server" is about the session left behind: it goes
    /// when another one opens or a new one starts (Ctrl-N).
    fn forget_session_gone(&mut self) {
        if self
            .notice
            .as_ref()
            .is_some_and(|n| n.text == super::reply::SESSION_GONE)
        {
            self.notice = None;
        }
    }

    /// Whether `id` is a session that nothing was sent to yet (only this device has it): the
    /// delete dialog says so instead of "removed from the service".
    pub fn is_local_only(&self, id: &str) -> bool {
        self.is_unsent(id)
    }

    /// A session that nothing was sent to yet: the server does not know it.
    pub(super) fn is_unsent(&self, id: &str) -> bool {
        let listed_empty = self
            .sessions_pane
            .all()
            .iter()
            .any(|s| s.id == id && s.nothing_sent());
        let open_empty = match self.transcript.session() {
            Some(o) if o.id == id => o.items.is_empty(),
            _ => true,
        };
        listed_empty && open_empty
    }

    /// Creates a session locally (the server creates it with the first message). There is at
    /// most one such empty session: if there is one, it is opened instead.
    pub(super) fn new_session(&mut self, draft: String, out: &mut Vec<Command>) {
        self.forget_session_gone();
        let unsent = self
            .sessions_pane
            .all()
            .iter()
            .map(|s| s.id.clone())
            .find(|id| self.is_unsent(id));
        if let Some(id) = unsent {
            self.sessions_pane.clear_filter();
            if self.open_id() == Some(id.as_str()) {
                if draft.is_empty() {
                    self.notify(Level::Info, "this is a new session already");
                }
            } else {
                self.open_session(id.clone(), out);
            }
            self.sessions_pane.point_at_or_top(&id);
            if !draft.is_empty() {
                self.composer.set_text(&draft);
            }
            self.focus = Focus::Composer;
            return;
        }
        let id = new_session_id();
        let summary = SessionSummary {
            id: id.clone(),
            title: NEW_SESSION_TITLE.to_string(),
            title_set: false,
            last_activity: self.now,
            tokens: 0,
            forked_from: None,
        };
        self.sessions_pane.insert_new(summary.clone());
        out.push(Command::Persist(StoreOp::UpsertSession(summary)));
        self.open_session(id, out);
        if !draft.is_empty() {
            self.composer.insert_str(&draft);
        }
        if let Some(o) = self.transcript.session_mut() {
            o.loaded = true;
        }
        // A new session has no stored draft; text carried over is saved as an edit.
        self.composer.stored(String::new());
        self.focus = Focus::Composer;
    }

    pub(super) fn remove_session(&mut self, id: &str, out: &mut Vec<Command>) {
        let Some(pos) = self.sessions_pane.remove(id) else {
            return;
        };
        out.push(Command::Persist(StoreOp::DeleteSession(id.to_string())));
        if self.open_id() == Some(id) {
            // Drop the open session without saving its draft, then open the next one.
            self.transcript.close();
            self.composer.clear();
            self.composer.set_metadata(None);
            let all = self.sessions_pane.all();
            let next = all.get(pos).or_else(|| all.get(pos.wrapping_sub(1)));
            match next.map(|s| s.id.clone()) {
                Some(next) => self.open_session(next, out),
                None => self.new_session(String::new(), out),
            }
        }
        self.sessions_pane.clamp_cursor();
    }

    pub(super) fn send(&mut self, text: String, role: Role, out: &mut Vec<Command>) {
        let n = text.chars().count();
        if n > MAX_CONTENT_CHARS {
            self.composer.set_send_error(Some(format!(
                "too long: {n} characters, the limit is {MAX_CONTENT_CHARS}"
            )));
            return;
        }
        if let Some((why, lapse)) = self.not_now() {
            self.composer.set_send_note(why, lapse);
            return;
        }
        let now = self.now;
        let Some(open) = self.transcript.session_mut() else {
            return;
        };
        // A reply of this device's coming, or another device's shown coming (the service would
        // hold this send until that turn ends): the text waits for it.
        let coming = (open.pending.as_ref().map(|p| p.reply_item)).or_else(|| open.foreign_item());
        // A send held behind another send's turn (before that turn's reply shows): this one
        // would come after it, so it waits too.
        if coming.is_none() && open.held.is_some() {
            self.composer
                .set_send_note(STILL_COMING.to_string(), Lapse::ReplyEnded);
            return;
        }
        // A send whose reply the user stopped before the service answered it: this one would
        // come before its answer, which may still give its text back.
        if open.stopped.is_some() {
            self.composer
                .set_send_note(STOPPED_UNANSWERED.to_string(), Lapse::ReplyEnded);
            return;
        }
        if let Some(reply_item) = coming {
            let session_id = open.id.clone();
            if !self.queue_send(session_id, reply_item) {
                self.composer
                    .set_send_note(STILL_COMING.to_string(), Lapse::ReplyEnded);
            }
            return;
        }
        // A new turn: a reply lost by the stream stays as far as it came.
        out.extend(open.settle_cut_off());
        let send_id = self.next_send_id;
        self.next_send_id += 1;
        let (user_item, reply_item) = open.push_exchange(role, text.clone(), now, None);
        open.follow = true;
        open.selected = None;
        let stream = open.stream == StreamState::Open;
        // One key for the send and its retries; the stream's `started` events name it.
        let idempotency_key = convo_client::api::new_idempotency_key();
        open.pending = Some(PendingSend {
            send_id,
            text: text.clone(),
            role,
            user_item,
            reply_item,
            accepted: false,
            streamed: stream,
            reply_done: false,
            started: std::time::Instant::now(),
            follower: ReplyFollower::new(role, text.clone()).sent_with_key(&idempotency_key),
            stop_asked: false,
            cancel_sent: false,
        });
        // The reply's header shows how long it waits once it passes two seconds empty.
        out.push(Command::ReplyTick {
            after: std::time::Duration::from_secs(1),
        });
        let body = SendMessage {
            content: text,
            role: (role != Role::User).then_some(role),
            stream: Some(stream),
            metadata: self.composer.take_metadata(),
        };
        out.push(Command::Send {
            session_id: open.id.clone(),
            send_id,
            body,
            idempotency_key,
        });
        self.composer.clear();
        self.composer.set_send_error(None);
        if role == Role::System {
            // A system message is a one-off: what follows is the user's again.
            self.composer.reset_role();
            let toggle = self.keys.toggle_role.first_label();
            self.notify(
                Level::Info,
                format!(
                    "sent as a system message; the next one is from you again ({toggle}: system)"
                ),
            );
        }
        // The sent text is no longer a draft, even if the app dies before the reply.
        self.save_draft(out);
    }
}
