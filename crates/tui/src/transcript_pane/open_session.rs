//! The open session: its transcript items beside their render entries, the reply in flight,
//! and how stored messages become render entries.

use chrono::{DateTime, Utc};

use crate::command::{Command, StoreOp};
use crate::event::{MessageStatus, StoredMessage};
use crate::render::transcript::{Entry, EntryId, EntryState, Transcript};
use convo_client::api::{FinishReason, Role};
use convo_client::follow::{Change, ReplyFollower};

/// One message of the open transcript, beside its render entry.
#[derive(Debug, Clone)]
pub struct TranscriptItem {
    pub entry: EntryId,
    pub role: Role,
    pub tokens: u64,
    pub message_id: Option<String>,
    pub state: EntryState,
    pub created_at: DateTime<Utc>,
    /// How a reply ended, as the service said; its header marks `stopped` and `length`.
    pub finish: Option<FinishReason>,
}

/// A message on its way: the composer text comes back if it fails.
#[derive(Debug, Clone)]
pub struct PendingSend {
    pub send_id: u64,
    pub text: String,
    pub role: Role,
    /// Index in `items` of the sent message and of the reply placeholder.
    pub user_item: usize,
    pub reply_item: usize,
    pub accepted: bool,
    /// Sent with `stream: true`: the text comes on the stream.
    pub streamed: bool,
    /// The reply completed on the stream before the POST answered.
    pub reply_done: bool,
    /// When the message was sent: how long its reply took decides whether a focused
    /// terminal is notified (`[notify] after_seconds`).
    pub started: std::time::Instant,
    /// The reply, followed: duplicates by `seq`, the loss and the settling against the
    /// stored history (the same follower `convo send --stream` drives).
    pub follower: ReplyFollower,
    /// The user asked for the reply to stop (Ctrl-C): the service is asked
    /// (`Command::CancelReply`) as soon as the reply's id is known (`App::send_asked_stop`),
    /// and a second stop stops watching it instead.
    pub stop_asked: bool,
    /// The service was asked to stop the reply.
    pub cancel_sent: bool,
}

/// State of the open session's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamState {
    Connecting,
    Open,
    Down(String),
    Unsupported,
}

/// The session shown in the transcript.
#[derive(Debug)]
pub struct OpenSession {
    pub id: String,
    pub transcript: Transcript,
    pub items: Vec<TranscriptItem>,
    pub loaded: bool,
    pub context_max: u64,
    /// Follow the tail: new lines scroll into view.
    pub follow: bool,
    /// First visible line when not following.
    pub top: usize,
    pub selected: Option<usize>,
    pub pending: Option<PendingSend>,
    /// A send whose reply the stream lost mid-way (the stream dropped): the reply shows as
    /// interrupted and no longer holds the composer. A snapshot, delta or `done` for it after
    /// the reconnect makes it pending again; otherwise the stored history, fetched on the
    /// reconnect, settles it (`App::on_history`).
    pub cut_off: Option<PendingSend>,
    /// A send whose reply the user stopped watching (Ctrl-C) before the service answered the
    /// send: the reply shows as interrupted and no longer holds the composer, but the send is
    /// not settled. Its answer stores the message and names the reply, so that the reply the
    /// service stores whole replaces the interrupted one (`App::on_send_accepted`); its
    /// failure takes both out and gives the text back (`App::on_send_failed`). No other send
    /// starts until it is settled (`App::send`).
    pub stopped: Option<PendingSend>,
    /// A reply another device started in this session, followed live (`foreign_reply.rs`).
    pub foreign: Option<super::foreign_reply::ForeignReply>,
    /// A send of this device waiting behind another send's turn, out of the transcript until
    /// its own turn starts (`held_send.rs`).
    pub held: Option<super::held_send::HeldSend>,
    /// When the history read was asked for at the `started` of the turn a send is held
    /// behind, while no read sent since has come back: the held send waits for one
    /// (`held_send.rs`, `take_due_answer`).
    pub reading_other: Option<std::time::Instant>,
    pub stream: StreamState,
}

impl OpenSession {
    pub fn new(id: String, context_max: u64) -> Self {
        OpenSession {
            id,
            transcript: Transcript::new(),
            items: Vec::new(),
            loaded: false,
            context_max,
            follow: true,
            top: 0,
            selected: None,
            pending: None,
            cut_off: None,
            stopped: None,
            foreign: None,
            held: None,
            reading_other: None,
            stream: StreamState::Connecting,
        }
    }

    /// Tokens of the session's context as far as this client knows: those of the messages
    /// the service holds ([`OpenSession::kept_items`]).
    pub fn context_tokens(&self) -> u64 {
        self.kept_items().map(|i| self.items[i].tokens).sum()
    }

    /// A send of this device not settled yet: its answer or reply still coming (`pending`),
    /// its reply lost by the stream (`cut_off`), or its answer still coming after the user
    /// stopped its reply (`stopped`). Its own events settle it; what the service's history
    /// says waits until they have.
    pub fn own_send_in_flight(&self) -> bool {
        self.pending.is_some() || self.cut_off.is_some() || self.stopped.is_some()
    }

    /// The items showing messages the service holds, as far as this client knows, in order:
    /// all but those failed (not sent, not kept, a reply that failed) and another device's
    /// reply still coming (the service stores it when it ends).
    pub fn kept_items(&self) -> impl Iterator<Item = usize> + '_ {
        let foreign = self.foreign_item();
        (0..self.items.len()).filter(move |&i| {
            Some(i) != foreign && !matches!(self.items[i].state, EntryState::Failed(_))
        })
    }

    pub fn is_streaming(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| {
            self.items
                .get(p.reply_item)
                .is_some_and(|i| i.state == EntryState::Streaming)
        })
    }

    pub fn push(
        &mut self,
        role: Role,
        content: String,
        state: EntryState,
        tokens: u64,
        message_id: Option<String>,
        created_at: DateTime<Utc>,
    ) -> usize {
        let entry = self.transcript.push(Entry {
            role,
            content,
            state: state.clone(),
            header: header_for(role, created_at, tokens),
        });
        self.items.push(TranscriptItem {
            entry,
            role,
            tokens,
            message_id,
            state,
            created_at,
            finish: None,
        });
        self.items.len() - 1
    }

    /// A send's message and the placeholder of its reply (streaming, `reply_id` when known) at
    /// the end: their items.
    pub fn push_exchange(
        &mut self,
        role: Role,
        text: String,
        at: DateTime<Utc>,
        reply_id: Option<String>,
    ) -> (usize, usize) {
        let user_item = self.push(role, text, EntryState::Complete, 0, None, at);
        let reply_item = self.push(
            Role::Assistant,
            String::new(),
            EntryState::Streaming,
            0,
            reply_id,
            at,
        );
        (user_item, reply_item)
    }

    /// Takes the items from `first` on out of the transcript (a send's message and reply).
    pub fn remove_from(&mut self, first: usize) {
        for item in self.items.drain(first..) {
            self.transcript.remove(item.entry);
        }
    }

    /// Item `idx` ended as `finish` says: kept, and its header marks it.
    pub fn set_finish(&mut self, idx: usize, finish: Option<FinishReason>) {
        if let Some(item) = self.items.get_mut(idx) {
            item.finish = finish;
            let header = item_header(item);
            self.transcript.set_header(item.entry, header);
        }
    }

    /// Takes `rendered` (one entry per item of `items[..stored]`, in order, as
    /// `render_stored` makes it) as the render model, and moves the entries of the items after
    /// them (messages of this run, already in the current model) to its end.
    pub fn adopt(&mut self, mut rendered: Transcript, stored: usize) {
        let ids: Vec<EntryId> = rendered.entries().map(|(id, _)| id).collect();
        debug_assert_eq!(ids.len(), stored, "one rendered entry per stored message");
        for (item, id) in self.items.iter_mut().zip(ids) {
            item.entry = id;
        }
        let mut current = std::mem::take(&mut self.transcript);
        for item in &mut self.items[stored..] {
            let entry = current.remove(item.entry).unwrap_or_else(|| Entry {
                role: item.role,
                content: String::new(),
                state: item.state.clone(),
                header: item_header(item),
            });
            item.entry = rendered.push(entry);
        }
        self.transcript = rendered;
    }

    /// The text of item `idx`, held by the transcript (its one copy).
    pub fn content(&self, idx: usize) -> &str {
        self.items
            .get(idx)
            .and_then(|item| self.transcript.get(item.entry))
            .map_or("", |entry| entry.content.as_str())
    }

    /// Item `idx` as the local store keeps it.
    pub fn stored(&self, idx: usize) -> Option<StoredMessage> {
        let item = self.items.get(idx)?;
        Some(StoredMessage {
            role: item.role,
            content: self.content(idx).to_string(),
            tokens: item.tokens,
            message_id: item.message_id.clone(),
            created_at: item.created_at,
            status: match item.state {
                EntryState::Complete => MessageStatus::Complete,
                // A reply still streaming when it is stored was cut short.
                EntryState::Streaming | EntryState::Interrupted => MessageStatus::Interrupted,
                EntryState::Failed(_) => MessageStatus::Failed,
            },
            finish_reason: item.finish,
        })
    }

    /// The service took the message of a send (its answer named the reply `reply_id` and
    /// counted `prompt_tokens` for the message): the message shows its tokens, the reply
    /// item has its id (unless the stream named it first). Returns the message to store.
    pub fn message_taken(
        &mut self,
        user_item: usize,
        reply_item: usize,
        reply_id: &str,
        prompt_tokens: u64,
    ) -> Option<StoredMessage> {
        if let Some(u) = self.items.get_mut(user_item) {
            u.tokens = prompt_tokens;
            let header = header_for(u.role, u.created_at, prompt_tokens);
            let entry = u.entry;
            self.transcript.set_header(entry, header);
        }
        if let Some(r) = self.items.get_mut(reply_item)
            && r.message_id.is_none()
        {
            r.message_id = Some(reply_id.to_string());
        }
        self.stored(user_item)
    }

    /// The stream dropped: a reply coming over it shows as interrupted, and once the server
    /// has accepted its message the send stops being pending (`cut_off`).
    pub fn cut_off_reply(&mut self) {
        let Some((idx, accepted)) = self
            .pending
            .as_ref()
            .filter(|p| p.streamed)
            .map(|p| (p.reply_item, p.accepted))
        else {
            return;
        };
        if self.items.get(idx).map(|i| &i.state) != Some(&EntryState::Streaming) {
            return;
        }
        self.set_state(idx, EntryState::Interrupted);
        if accepted {
            self.cut_off = self.pending.take();
        }
    }

    /// Whether `idx` is a reply that the stream lost (and the user did not stop).
    pub fn is_cut_off(&self, idx: usize) -> bool {
        self.cut_off.as_ref().is_some_and(|p| p.reply_item == idx)
            || self.pending.as_ref().is_some_and(|p| {
                p.reply_item == idx
                    && self.items.get(idx).map(|i| &i.state) == Some(&EntryState::Interrupted)
            })
    }

    /// The stream speaks of a reply it had lost: it is coming again.
    pub fn resume(&mut self, idx: usize) {
        if !self.is_cut_off(idx) {
            return;
        }
        if self.cut_off.as_ref().is_some_and(|p| p.reply_item == idx) {
            self.pending = self.cut_off.take();
        }
        self.set_state(idx, EntryState::Streaming);
    }

    /// The lost reply is final as far as it came: interrupted. Returns the store write.
    pub fn settle_cut_off(&mut self) -> Option<Command> {
        let p = self.cut_off.take()?;
        let message = self.stored(p.reply_item)?;
        Some(Command::Persist(StoreOp::AppendMessage {
            session_id: self.id.clone(),
            message,
        }))
    }

    /// Reply `idx`'s text changed as its follower took an event (`text`: all of it so far),
    /// this device's reply or another's: the first text replaces what the header said while
    /// it waited (`App::show_waiting`).
    pub fn show_reply_change(&mut self, idx: usize, change: Change, text: String) {
        if change == Change::None {
            return;
        }
        if self.content(idx).is_empty() {
            self.set_note(idx, None);
        }
        let entry = self.items[idx].entry;
        match change {
            Change::None => {}
            Change::Appended(piece) => self.transcript.append_delta(entry, &piece),
            Change::Replaced => self.transcript.set_content(entry, text),
        }
    }

    /// The header of item `idx` as `item_header` makes it, with `note` after it.
    pub fn set_note(&mut self, idx: usize, note: Option<String>) {
        if let Some(item) = self.items.get(idx) {
            let header = item_header(item);
            self.transcript
                .set_header(item.entry, super::reply_marks::with_note(header, note));
        }
    }

    /// Sets item `idx`'s state. A reply that ends (stopped, failed, cut off) before its first
    /// text drops what its header said while it waited (`waiting for the reply · 3 s`): that
    /// no longer holds, and the state's own mark takes its place.
    pub fn set_state(&mut self, idx: usize, state: EntryState) {
        let ended_empty = state != EntryState::Streaming
            && self
                .items
                .get(idx)
                .is_some_and(|i| i.state == EntryState::Streaming)
            && self.content(idx).is_empty();
        if ended_empty {
            self.set_note(idx, None);
        }
        if let Some(item) = self.items.get_mut(idx) {
            item.state = state.clone();
            self.transcript.set_state(item.entry, state);
        }
    }

    /// The first visible line for a viewport of `height` lines at `width` columns.
    pub fn effective_top(&self, width: u16, height: u16) -> usize {
        let total = self.transcript.height(width);
        let max_top = total.saturating_sub(height as usize);
        if self.follow {
            max_top
        } else {
            self.top.min(max_top)
        }
    }
}

/// The render model of stored messages, as `App` builds it when they are loaded: the store
/// worker calls this on its own thread so that parsing a long history does not stall the UI.
pub fn render_stored(messages: &[StoredMessage]) -> Transcript {
    let mut t = Transcript::new();
    for m in messages {
        t.push(Entry {
            role: m.role,
            content: m.content.clone(),
            state: stored_state(m.status),
            header: message_header(m.role, m.created_at, m.tokens, m.finish_reason),
        });
    }
    t
}

pub fn stored_state(status: MessageStatus) -> EntryState {
    match status {
        MessageStatus::Complete => EntryState::Complete,
        MessageStatus::Interrupted => EntryState::Interrupted,
        MessageStatus::Failed => EntryState::Failed("not delivered".into()),
    }
}

/// The header of a message that may be a finished reply: `header_for`'s, then the mark of
/// a reply that did not end by itself (`stopped`; `cut at N tokens · /continue`, which says
/// the tokens itself, so the header does not).
pub fn message_header(
    role: Role,
    at: DateTime<Utc>,
    tokens: u64,
    finish: Option<FinishReason>,
) -> String {
    let mark = super::reply_marks::finish_mark(finish, tokens);
    let shown_tokens = if finish == Some(FinishReason::Length) {
        0
    } else {
        tokens
    };
    super::reply_marks::with_note(header_for(role, at, shown_tokens), mark)
}

/// `message_header` of an item.
fn item_header(item: &TranscriptItem) -> String {
    message_header(item.role, item.created_at, item.tokens, item.finish)
}

pub fn header_for(role: Role, at: DateTime<Utc>, tokens: u64) -> String {
    let who = match role {
        Role::User => "you",
        Role::System => "system",
        Role::Assistant => "assistant",
    };
    if tokens > 0 {
        format!(
            "{who} · {} · {}",
            at.format("%H:%M"),
            convo_client::format::counted(tokens, "token")
        )
    } else {
        format!("{who} · {}", at.format("%H:%M"))
    }
}

/// The transcript item that a stream event for `message_id` belongs to: the item with that
/// id, or the pending reply whose id is not known yet (deltas can beat the POST response)
/// when its follower takes the id as its own (not a reply that a `started` event showed to be
/// another send's).
pub fn reply_slot(open: &mut OpenSession, message_id: &str) -> Option<usize> {
    if let Some(i) = open
        .items
        .iter()
        .position(|i| i.message_id.as_deref() == Some(message_id))
    {
        return Some(i);
    }
    let p = open.pending.as_mut()?;
    let item = open.items.get_mut(p.reply_item)?;
    if item.message_id.is_none() && p.follower.claims(message_id) {
        item.message_id = Some(message_id.to_string());
        return Some(p.reply_item);
    }
    None
}
