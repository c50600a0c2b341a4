//! Fork, edit and undo (extensions of the service; docs/tui.md, "Fork, edit, undo"): the
//! selected message forked at (`f`), a user message edited (`e`: a fork just before it, its
//! text in the composer), `/undo`; and what the server answers.

use convo_client::api::{Role, new_session_id};
use convo_client::local_store::StoredMessage;

use super::{App, Command, Connection, Focus, Level, NEW_SESSION_TITLE, StoreOp};
use crate::composer_pane::Lapse;
use crate::event::{ForkOutcome, SessionSummary, UndoOutcome, describe_failure};
use crate::render::transcript::EntryState;
use crate::transcript_pane::{ForkPoint, edit_base};

/// What a server without the fork endpoint is told.
pub const CANNOT_FORK: &str =
    "this server cannot fork sessions (fork and edit need `convo serve`'s extensions)";
/// What a server without the undo endpoint is told.
pub const CANNOT_UNDO: &str = "this server cannot undo (/undo needs `convo serve`'s extensions)";
/// `/undo` while a reply streams.
pub const UNDO_WHILE_STREAMING: &str =
    "a reply is being generated: /undo once it is complete (or stop it first)";

/// A fork asked for and not answered yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingFork {
    pub new_session_id: String,
    /// An edit: the text for the new session's composer.
    pub edit: Option<String>,
}

/// Which extensions the server turned out not to have (it answered 404/405).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Missing {
    pub fork: bool,
    pub undo: bool,
}

impl App {
    /// Whether the server is known to lack fork (then `f`/`e` say so instead of trying).
    pub fn cannot_fork(&self) -> bool {
        self.missing.fork
    }

    /// Why a send, a fork or an undo cannot be asked for now, if it cannot, and when that is
    /// over.
    pub(super) fn not_now(&self) -> Option<(String, Lapse)> {
        match &self.connection {
            Connection::Connected(_) => None,
            Connection::Failed(e) => Some((format!("not connected: {e}"), Lapse::Edited)),
            _ => Some((super::STILL_CONNECTING.into(), Lapse::Connected)),
        }
    }

    /// `f` (or `e`, `edit`) on item `idx` of the open transcript.
    pub(super) fn fork_at(&mut self, idx: usize, edit: bool, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session() else {
            return;
        };
        let Some(item) = open.items.get(idx) else {
            return;
        };
        if edit && item.role != Role::User {
            let fork = self.keys.fork_message.first_label();
            return self.notify(
                Level::Warn,
                format!("only your own messages can be edited; {fork} forks at any message"),
            );
        }
        if matches!(item.state, EntryState::Failed(_)) {
            return self.notify(
                Level::Warn,
                "this message never reached the service: there is nothing to fork at",
            );
        }
        if open.pending.as_ref().is_some_and(|p| p.reply_item == idx) {
            return self.notify(
                Level::Warn,
                "this reply is not complete yet: fork once it is",
            );
        }
        let text = edit.then(|| open.content(idx).to_string());
        let base = if edit {
            edit_base(open, idx)
        } else {
            Some(idx)
        };
        let Some(base) = base else {
            // The first message edited: a new session with its text, nothing to ask the server.
            let text = text.unwrap_or_default();
            self.transcript.clear_selection();
            self.new_session(String::new(), out);
            self.composer.set_text(&text);
            self.notify(Level::Info, "editing the first message in a new session");
            return;
        };
        let Some(at) = ForkPoint::of(open, base) else {
            return;
        };
        if self.missing.fork {
            return self.notify(Level::Warn, CANNOT_FORK);
        }
        if let Some((why, _)) = self.not_now() {
            return self.notify(Level::Warn, why);
        }
        if self.forking.is_some() {
            return self.notify(Level::Info, "a fork is on its way…");
        }
        let new_session_id = new_session_id();
        self.forking = Some(PendingFork {
            new_session_id: new_session_id.clone(),
            edit: text,
        });
        out.push(Command::Fork {
            source: open.id.clone(),
            new_session_id,
            at,
        });
        self.notify(Level::Info, "forking…");
    }

    /// The server's answer to a fork.
    pub(super) fn on_forked(
        &mut self,
        source: String,
        new_session_id: String,
        outcome: ForkOutcome,
        out: &mut Vec<Command>,
    ) {
        let Some(pending) = self.forking.take_if(|p| p.new_session_id == new_session_id) else {
            return;
        };
        let (summary, messages, message_id) = match outcome {
            ForkOutcome::Forked {
                summary,
                messages,
                message_id,
            } => (summary, messages, message_id),
            ForkOutcome::Unsupported => {
                self.missing.fork = true;
                self.transcript.set_cannot_fork();
                return self.notify(Level::Warn, CANNOT_FORK);
            }
            ForkOutcome::NotOnServer => {
                return self.notify(
                    Level::Warn,
                    "that message is not in the service's history (yet): nothing was forked",
                );
            }
            ForkOutcome::Failed(e) => {
                let why = describe_failure(&e, self.now);
                return self.notify(Level::Error, format!("fork failed: {why}"));
            }
        };
        let id = summary.session_id.clone();
        let listed = SessionSummary {
            id: id.clone(),
            title: summary
                .title
                .clone()
                .unwrap_or_else(|| NEW_SESSION_TITLE.to_string()),
            title_set: false,
            last_activity: self.now,
            tokens: summary.tokens,
            forked_from: Some(source.clone()),
        };
        self.sessions_pane.insert_new(listed.clone());
        // In the store before the transcript is read from it (the store's jobs keep order).
        out.push(Command::Persist(StoreOp::UpsertSession(listed)));
        for m in &messages {
            out.push(Command::Persist(StoreOp::AppendMessage {
                session_id: id.clone(),
                message: StoredMessage::from_reply(m),
            }));
        }
        out.push(Command::Persist(StoreOp::SetForkedFrom {
            session_id: id.clone(),
            source,
            message_id,
        }));
        if let Some(text) = &pending.edit {
            out.push(Command::Persist(StoreOp::SaveDraft {
                session_id: id.clone(),
                text: text.clone(),
            }));
        }
        self.transcript.clear_selection();
        self.open_session(id.clone(), out);
        self.sessions_pane.point_at(&id);
        self.focus = Focus::Composer;
        let n = convo_client::format::counted(messages.len() as u64, "message");
        self.notify(
            Level::Info,
            match pending.edit {
                Some(_) => format!("forked before your message ({n}): edit it and send"),
                None => format!("forked: a new session with {n}"),
            },
        );
    }

    /// `/undo`: removes the open session's last exchange, on the server and here.
    pub(super) fn undo(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.transcript.session() else {
            return self.notify(Level::Warn, "/undo: no session is open");
        };
        // (A send whose reply was stopped before its answer came is not settled either.)
        if open.pending.is_some() || open.stopped.is_some() {
            return self.notify(Level::Warn, UNDO_WHILE_STREAMING);
        }
        if !open
            .items
            .iter()
            .any(|i| i.role == Role::User && !matches!(i.state, EntryState::Failed(_)))
        {
            return self.notify(Level::Info, "/undo: no message of yours to undo here");
        }
        if self.missing.undo {
            return self.notify(Level::Warn, CANNOT_UNDO);
        }
        if let Some((why, _)) = self.not_now() {
            return self.notify(Level::Warn, why);
        }
        let session_id = open.id.clone();
        self.composer.clear();
        self.undoing.push(session_id.clone());
        out.push(Command::Undo { session_id });
        self.notify(Level::Info, "undoing the last exchange…");
    }

    /// Reads `session_id`, if it is open, again from the store, after a removal queued before
    /// (the store keeps order). The session's stream stays as it is: the network worker keeps
    /// it open.
    pub(super) fn reload_open_session(&mut self, session_id: &str, out: &mut Vec<Command>) {
        if let Some(stream) = self
            .transcript
            .session_mut_if(session_id)
            .map(|open| open.stream.clone())
        {
            self.leave_open_session(out);
            self.open_session(session_id.to_string(), out);
            if let Some(open) = self.transcript.session_mut_if(session_id) {
                open.stream = stream;
            }
        }
    }

    /// The server's answer to an undo.
    pub(super) fn on_undone(
        &mut self,
        session_id: String,
        outcome: UndoOutcome,
        out: &mut Vec<Command>,
    ) {
        if let Some(i) = self.undoing.iter().position(|s| *s == session_id) {
            self.undoing.swap_remove(i);
        }
        match outcome {
            UndoOutcome::Undone(removed) => {
                out.push(Command::Persist(StoreOp::RemoveLastExchange {
                    session_id: session_id.clone(),
                }));
                if let Some(open) = self.transcript.session_mut_if(&session_id) {
                    // The list's token total without the exchange (the store recounts too).
                    let from = open
                        .items
                        .iter()
                        .rposition(|i| {
                            i.role == Role::User && !matches!(i.state, EntryState::Failed(_))
                        })
                        .unwrap_or(open.items.len());
                    let gone: u64 = open.items[from..].iter().map(|i| i.tokens).sum();
                    if let Some(s) = self.sessions_pane.get_mut(&session_id) {
                        s.tokens = s.tokens.saturating_sub(gone);
                    }
                }
                self.reload_open_session(&session_id, out);
                let n = convo_client::format::counted(removed.len() as u64, "message");
                self.notify(Level::Info, format!("undone: removed {n}"));
            }
            UndoOutcome::Unsupported => {
                self.missing.undo = true;
                self.notify(Level::Warn, CANNOT_UNDO);
            }
            UndoOutcome::Failed(convo_client::api::ApiError::ReplyInProgress { .. }) => {
                self.notify(Level::Warn, UNDO_WHILE_STREAMING)
            }
            UndoOutcome::Failed(e) => {
                let why = describe_failure(&e, self.now);
                self.notify(Level::Error, format!("undo failed: {why}"));
            }
        }
    }
}
