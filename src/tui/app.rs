//! The app's state and its one `update` function. No I/O here: `update` returns the
//! [`Command`]s that the loop hands to the workers, which report back through `AppEvent`s.

use chrono::{DateTime, Utc};
use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};
use ratatui_textarea::{TextArea, WrapMode};
use serde_json::Value;

use crate::api::{Message, Role, SendMessage, StreamEvent, Usage, new_session_id};
use crate::keys::KeyBindings;

pub use super::command::{Command, StoreOp};
use super::event::{
    AppEvent, Endpoint, Failure, HistoryFetch, MessageStatus, SessionSummary, StoredMessage,
    StreamStatus,
};
use super::full_view::{FullView, KeyResult};
use super::view::layout::{self, AppLayout};
use crate::render::sanitize::sanitize_owned;
use crate::render::transcript::{Entry, EntryId, EntryState, Transcript};

/// Maximum length of a message's content, in characters (SERVICE-INTERFACE.md, Limits).
pub const MAX_CONTENT_CHARS: usize = 10_000;
/// Title of a session before its first message.
pub const NEW_SESSION_TITLE: &str = "New session";

/// Whether a pane used an event or passes it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventState {
    Consumed,
    NotConsumed,
}

/// Which pane receives keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Sessions,
    Transcript,
    Composer,
}

/// The main view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Chat,
    /// Metrics charts over a date range (F2, `/metrics`; `tui::metrics`).
    Metrics,
    /// Wallet details (F3, `/wallet ID`; `tui::wallet`).
    Wallet,
}

/// A modal on top of the view; it takes every key while open.
#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help {
        scroll: u16,
    },
    ConfirmDelete {
        session_id: String,
        title: String,
        /// Opened by `/delete` typed in the composer: the command text stays there until
        /// the delete is confirmed, so that cancelling loses nothing typed.
        from_composer: bool,
    },
    ContextOverflow {
        current: u64,
        max: u64,
        draft: String,
    },
}

/// Connection to the service.
#[derive(Debug, Clone, PartialEq)]
pub enum Connection {
    Connecting,
    Connected(Endpoint),
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// A one-line message in the status bar until the next one (or Esc).
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub level: Level,
    pub text: String,
}

/// State of the open session's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamState {
    Connecting,
    Open,
    Down(String),
    Unsupported,
}

/// Settings from `[ui]`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub usage_refresh_secs: u64,
    pub max_context_tokens: u64,
    pub mouse: bool,
    pub show_sessions: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            usage_refresh_secs: 10,
            max_context_tokens: 8192,
            mouse: true,
            show_sessions: true,
        }
    }
}

/// The usage gauges' data: the last successful poll and the last error since.
#[derive(Debug, Clone, Default)]
pub struct UsagePanel {
    pub usage: Option<Usage>,
    pub fetched_at: Option<DateTime<Utc>>,
    /// Set when the last poll failed: the gauges are stale.
    pub error: Option<String>,
}

/// One message of the open transcript, beside its render entry.
#[derive(Debug, Clone)]
pub struct TranscriptItem {
    pub entry: EntryId,
    pub role: Role,
    pub content: String,
    pub tokens: u64,
    pub message_id: Option<String>,
    pub state: EntryState,
    pub created_at: DateTime<Utc>,
    /// The next stream `seq` expected for a streaming reply.
    pub next_seq: u64,
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
    pub stream: StreamState,
}

impl OpenSession {
    fn new(id: String, context_max: u64) -> Self {
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
            stream: StreamState::Connecting,
        }
    }

    /// Tokens of the session's context as far as this client knows.
    pub fn context_tokens(&self) -> u64 {
        self.items.iter().map(|i| i.tokens).sum()
    }

    pub fn is_streaming(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| {
            self.items
                .get(p.reply_item)
                .is_some_and(|i| i.state == EntryState::Streaming)
        })
    }

    fn push(
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
            content: as_shown(role, &content),
            state: state.clone(),
            header: header_for(role, created_at, tokens),
        });
        self.items.push(TranscriptItem {
            entry,
            role,
            content,
            tokens,
            message_id,
            state,
            created_at,
            next_seq: 0,
        });
        self.items.len() - 1
    }

    /// Rebuilds the render model from `items` (after loading a stored transcript).
    fn rebuild(&mut self) {
        let mut t = Transcript::new();
        for item in &mut self.items {
            item.entry = t.push(entry_for(item));
        }
        self.transcript = t;
    }

    /// Takes `rendered` (one entry per item of `items[..stored]`, in order) as the render
    /// model and appends the items after them; rebuilds everything if it does not match.
    fn adopt(&mut self, mut rendered: Transcript, stored: usize) {
        let ids: Vec<EntryId> = rendered.entries().map(|(id, _)| id).collect();
        if ids.len() != stored {
            tracing::warn!(
                rendered = ids.len(),
                stored,
                "prepared transcript does not match"
            );
            return self.rebuild();
        }
        for (item, id) in self.items.iter_mut().zip(ids) {
            item.entry = id;
        }
        for item in &mut self.items[stored..] {
            item.entry = rendered.push(entry_for(item));
        }
        self.transcript = rendered;
    }

    /// The stream dropped: a reply coming over it shows as interrupted, and once the server
    /// has accepted its message the send stops being pending (`cut_off`).
    fn cut_off_reply(&mut self) {
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
    fn is_cut_off(&self, idx: usize) -> bool {
        self.cut_off.as_ref().is_some_and(|p| p.reply_item == idx)
            || self.pending.as_ref().is_some_and(|p| {
                p.reply_item == idx
                    && self.items.get(idx).map(|i| &i.state) == Some(&EntryState::Interrupted)
            })
    }

    /// The stream speaks of a reply it had lost: it is coming again.
    fn resume(&mut self, idx: usize) {
        if !self.is_cut_off(idx) {
            return;
        }
        if self.cut_off.as_ref().is_some_and(|p| p.reply_item == idx) {
            self.pending = self.cut_off.take();
        }
        self.set_state(idx, EntryState::Streaming);
    }

    /// The lost reply is final as far as it came: interrupted. Returns the store write.
    fn settle_cut_off(&mut self) -> Option<Command> {
        let p = self.cut_off.take()?;
        let item = self.items.get(p.reply_item)?;
        Some(Command::Persist(StoreOp::AppendMessage {
            session_id: self.id.clone(),
            message: stored(item),
        }))
    }

    fn set_state(&mut self, idx: usize, state: EntryState) {
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

/// The render entry of a transcript item.
fn entry_for(item: &TranscriptItem) -> Entry {
    Entry {
        role: item.role,
        content: as_shown(item.role, &item.content),
        state: item.state.clone(),
        header: header_for(item.role, item.created_at, item.tokens),
    }
}

/// The render model of stored messages, as `App` builds it when they are loaded: the store
/// worker calls this on its own thread so that parsing a long history does not stall the UI.
pub fn render_stored(messages: &[StoredMessage]) -> Transcript {
    let mut t = Transcript::new();
    for m in messages {
        t.push(Entry {
            role: m.role,
            content: as_shown(m.role, &m.content),
            state: stored_state(m.status),
            header: header_for(m.role, m.created_at, m.tokens),
        });
    }
    t
}

fn stored_state(status: MessageStatus) -> EntryState {
    match status {
        MessageStatus::Complete => EntryState::Complete,
        MessageStatus::Interrupted => EntryState::Interrupted,
        MessageStatus::Failed => EntryState::Failed("not delivered".into()),
    }
}

/// What the transcript renders for a message. Replies are markdown as the server sent them;
/// what the user typed keeps its line breaks (markdown would join the lines of a paragraph),
/// except inside fenced code, which keeps them anyway.
fn as_shown(role: Role, content: &str) -> String {
    if role == Role::Assistant || !content.contains('\n') {
        return content.to_string();
    }
    let mut out = String::with_capacity(content.len() + 16);
    let mut in_fence = false;
    let mut lines = content.split('\n').peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        out.push_str(line);
        if lines.peek().is_some() {
            if !in_fence && !line.trim().is_empty() {
                // A markdown hard break.
                out.push_str("  ");
            }
            out.push('\n');
        }
    }
    out
}

fn header_for(role: Role, at: DateTime<Utc>, tokens: u64) -> String {
    let who = match role {
        Role::User => "you",
        Role::System => "system",
        Role::Assistant => "assistant",
    };
    if tokens > 0 {
        format!("{who} · {} · {tokens} tokens", at.format("%H:%M"))
    } else {
        format!("{who} · {}", at.format("%H:%M"))
    }
}

/// The whole state of the TUI.
pub struct App {
    pub keys: KeyBindings,
    pub settings: Settings,
    pub size: Rect,
    pub now: DateTime<Utc>,
    pub focus: Focus,
    pub view: View,
    pub overlay: Option<Overlay>,
    pub connection: Connection,
    pub store_ready: bool,
    pub sessions: Vec<SessionSummary>,
    /// Index into `visible_sessions()`.
    pub session_cursor: usize,
    pub filter: String,
    pub filtering: bool,
    pub open: Option<OpenSession>,
    pub composer: TextArea<'static>,
    pub role: Role,
    pub metadata: Option<Value>,
    /// Why the last send failed, shown on the composer until the next send.
    pub send_error: Option<String>,
    pub usage: UsagePanel,
    pub notice: Option<Notice>,
    /// Session ids with a DELETE in flight.
    pub deleting: Vec<String>,
    /// The metrics view's state (F2).
    pub metrics: super::metrics::MetricsState,
    /// The wallet view's state (F3).
    pub wallet: super::wallet::WalletState,
    next_send_id: u64,
    /// Quit was asked for before the store loaded, with text to keep.
    quit_when_loaded: bool,
    /// The open session's draft as last handed to the store; an edit that changes the
    /// composer away from it is sent as `StoreOp::DraftEdited`.
    draft_in_store: String,
    /// `Command::WarmTokenCounter` was given (once, at the first edit of the composer).
    token_counter_asked: bool,
    pub quit: bool,
}

impl App {
    pub fn new(keys: KeyBindings, settings: Settings, size: Rect, now: DateTime<Utc>) -> Self {
        App {
            keys,
            settings,
            size,
            now,
            focus: Focus::Composer,
            view: View::Chat,
            overlay: None,
            connection: Connection::Connecting,
            store_ready: false,
            sessions: Vec::new(),
            session_cursor: 0,
            filter: String::new(),
            filtering: false,
            open: None,
            composer: new_composer(),
            role: Role::User,
            metadata: None,
            send_error: None,
            usage: UsagePanel::default(),
            notice: None,
            deleting: Vec::new(),
            metrics: Default::default(),
            wallet: Default::default(),
            next_send_id: 1,
            quit_when_loaded: false,
            draft_in_store: String::new(),
            token_counter_asked: false,
            quit: false,
        }
    }

    /// The layout for the current size and composer.
    pub fn layout(&self) -> AppLayout {
        layout::compute(self.size, self.composer_rows(), self.settings.show_sessions)
    }

    /// Rows the composer's text takes once wrapped to the composer's width.
    pub fn composer_rows(&self) -> usize {
        let width = layout::compute(self.size, 1, self.settings.show_sessions)
            .composer
            .width
            .saturating_sub(2)
            .max(1) as usize;
        self.composer
            .lines()
            .iter()
            .map(|l| {
                unicode_width::UnicodeWidthStr::width(l.as_str())
                    .div_ceil(width)
                    .max(1)
            })
            .sum()
    }

    /// Sessions matching the filter, most recent first.
    pub fn visible_sessions(&self) -> Vec<&SessionSummary> {
        let needle = self.filter.to_lowercase();
        self.sessions
            .iter()
            .filter(|s| {
                needle.is_empty()
                    || s.title.to_lowercase().contains(&needle)
                    || s.id.to_lowercase().contains(&needle)
            })
            .collect()
    }

    pub fn open_id(&self) -> Option<&str> {
        self.open.as_ref().map(|o| o.id.as_str())
    }

    pub fn composer_text(&self) -> String {
        self.composer.lines().join("\n")
    }

    pub fn composer_chars(&self) -> usize {
        self.composer
            .lines()
            .iter()
            .map(|l| l.chars().count())
            .sum::<usize>()
            + self.composer.lines().len().saturating_sub(1)
    }

    fn notify(&mut self, level: Level, text: impl Into<String>) {
        self.notice = Some(Notice {
            level,
            text: text.into(),
        });
    }

    /// The only place state changes.
    pub fn update(&mut self, event: AppEvent) -> Vec<Command> {
        let mut out = Vec::new();
        match event {
            AppEvent::Key(key) => {
                if key.kind != KeyEventKind::Release {
                    let before = self.text_before_first_edit();
                    self.on_key(key, &mut out);
                    self.warm_on_first_edit(before, &mut out);
                }
            }
            AppEvent::Mouse(m) => self.on_mouse(m, &mut out),
            AppEvent::Paste(text) => {
                if self.overlay.is_some() {
                } else if let Some(view) = self.active_view_mut() {
                    view.paste(&text);
                } else {
                    let before = self.text_before_first_edit();
                    self.focus = Focus::Composer;
                    self.composer
                        .insert_str(text.replace("\r\n", "\n").replace('\r', "\n"));
                    self.warm_on_first_edit(before, &mut out);
                }
            }
            AppEvent::Resize(w, h) => self.size = Rect::new(0, 0, w, h),
            AppEvent::Clock(now) => self.now = now,
            AppEvent::Connected(endpoint) => {
                self.connection = Connection::Connected(endpoint);
                if let Some(open) = &self.open {
                    out.push(Command::OpenStream {
                        session_id: open.id.clone(),
                    });
                }
                out.push(Command::RefreshUsage);
            }
            AppEvent::ConnectFailed(e) => {
                self.notify(Level::Error, format!("cannot connect: {e}"));
                self.connection = Connection::Failed(e);
            }
            AppEvent::StoreLoaded {
                sessions,
                last_open,
            } => {
                self.store_ready = true;
                self.sessions = sessions;
                sort_sessions(&mut self.sessions);
                let target = last_open
                    .filter(|id| self.sessions.iter().any(|s| &s.id == id))
                    .or_else(|| self.sessions.first().map(|s| s.id.clone()));
                match target {
                    Some(id) => self.open_session(id, &mut out),
                    None => self.new_session(String::new(), &mut out),
                }
                if self.quit_when_loaded {
                    self.quit(&mut out);
                }
            }
            AppEvent::TranscriptLoaded {
                session_id,
                messages,
                draft,
                rendered,
            } => self.on_transcript_loaded(
                session_id,
                messages,
                draft,
                rendered.and_then(|r| r.take()),
            ),
            AppEvent::SendAccepted {
                session_id,
                send_id,
                reply,
                prompt_tokens,
            } => self.on_send_accepted(session_id, send_id, reply, prompt_tokens, &mut out),
            AppEvent::SendFailed {
                session_id,
                send_id,
                failure,
            } => self.on_send_failed(session_id, send_id, failure, &mut out),
            AppEvent::Stream { session_id, update } => self.on_stream(session_id, update, &mut out),
            AppEvent::History { session_id, fetch } => self.on_history(session_id, fetch, &mut out),
            AppEvent::Deleted { session_id } => {
                out.push(Command::RefreshUsage);
                self.notify(
                    Level::Info,
                    format!("deleted {}", self.title_of(&session_id)),
                );
                self.remove_session(&session_id, &mut out);
            }
            AppEvent::DeleteFailed {
                session_id,
                failure,
            } => {
                self.deleting.retain(|d| d != &session_id);
                if failure == Failure::SessionNotFound {
                    self.notify(
                        Level::Warn,
                        format!(
                            "{} was not on the server (already deleted); removed from the list",
                            self.title_of(&session_id)
                        ),
                    );
                    self.remove_session(&session_id, &mut out);
                } else {
                    let text = format!("delete failed: {}", failure.describe(self.now));
                    self.notify(Level::Error, text);
                }
            }
            AppEvent::UsageFetched(usage) => {
                self.usage.usage = Some(usage);
                self.usage.fetched_at = Some(self.now);
                self.usage.error = None;
            }
            AppEvent::UsageFailed(e) => self.usage.error = Some(e),
            AppEvent::WorkerError(e) => self.notify(Level::Error, e),
            AppEvent::Metrics(ev) => self.metrics.on_event(ev),
            AppEvent::Wallet(ev) => {
                let mut reqs = Vec::new();
                self.wallet.on_event(ev, &mut reqs);
                out.extend(reqs.into_iter().map(Command::Wallet));
            }
        }
        self.note_draft_edit(&mut out);
        out
    }

    /// The composer's text, until token counting was asked to get ready.
    fn text_before_first_edit(&self) -> Option<String> {
        (!self.token_counter_asked).then(|| self.composer_text())
    }

    /// At the first change of the composer's text, asks token counting to get ready: someone
    /// who types will send, and someone who only reads never pays for it.
    fn warm_on_first_edit(&mut self, before: Option<String>, out: &mut Vec<Command>) {
        if before.is_some_and(|b| b != self.composer_text()) {
            self.token_counter_asked = true;
            out.push(Command::WarmTokenCounter);
        }
    }

    /// Hands the store the composer's text when it changed since the store last had it.
    /// Only once the open session's stored draft is known: before that, an empty composer
    /// would overwrite a draft not yet read.
    fn note_draft_edit(&mut self, out: &mut Vec<Command>) {
        if self.quit {
            return;
        }
        let Some(open) = self.open.as_ref().filter(|o| o.loaded) else {
            return;
        };
        let text = self.composer_text();
        if text != self.draft_in_store {
            out.push(Command::Persist(StoreOp::DraftEdited {
                session_id: open.id.clone(),
                text: text.clone(),
            }));
            self.draft_in_store = text;
        }
    }

    fn title_of(&self, id: &str) -> String {
        self.sessions
            .iter()
            .find(|s| s.id == id)
            .map(|s| format!("“{}”", s.title))
            .unwrap_or_else(|| id.to_string())
    }

    // ---- full-screen views -----------------------------------------------------------------

    /// The full-screen view shown (F2, F3), if any.
    pub fn active_view(&self) -> Option<&dyn FullView> {
        match self.view {
            View::Chat => None,
            View::Metrics => Some(&self.metrics),
            View::Wallet => Some(&self.wallet),
        }
    }

    fn active_view_mut(&mut self) -> Option<&mut dyn FullView> {
        match self.view {
            View::Chat => None,
            View::Metrics => Some(&mut self.metrics),
            View::Wallet => Some(&mut self.wallet),
        }
    }

    /// A key while a full-screen view is shown: the view takes it first; what it leaves, the
    /// app may use (help, the other view's key). False while the chat is shown.
    fn view_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> bool {
        let view: &mut dyn FullView = match self.view {
            View::Chat => return false,
            View::Metrics => &mut self.metrics,
            View::Wallet => &mut self.wallet,
        };
        match view.key(&self.keys, key, self.now, out) {
            KeyResult::Consumed => {}
            KeyResult::Back => self.view = View::Chat,
            KeyResult::Quit => self.quit(out),
            KeyResult::NotConsumed => {
                if self.keys.help.matches(key) {
                    self.overlay = Some(Overlay::Help { scroll: 0 });
                } else if self.keys.metrics_view.matches(key) && self.view != View::Metrics {
                    self.open_metrics(out);
                } else if self.keys.wallet_view.matches(key) && self.view != View::Wallet {
                    self.open_wallet(None, out);
                }
            }
        }
        true
    }

    /// F2 or `/metrics`: shows the metrics view.
    fn open_metrics(&mut self, out: &mut Vec<Command>) {
        self.view = View::Metrics;
        let mut reqs = Vec::new();
        self.metrics.open(self.now, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Metrics));
    }

    /// F3 (no id) or `/wallet ID`: shows the wallet view, fetching `wallet_id` if given.
    fn open_wallet(&mut self, wallet_id: Option<&str>, out: &mut Vec<Command>) {
        self.view = View::Wallet;
        let embedded = matches!(
            self.connection,
            Connection::Connected(Endpoint::Embedded { .. })
        );
        let mut reqs = Vec::new();
        self.wallet.open(wallet_id, embedded, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Wallet));
    }

    // ---- keys ------------------------------------------------------------------------------

    fn on_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        if self.overlay.is_some() {
            self.overlay_key(key, out);
            return;
        }
        if self.view_key(&key, out) {
            return;
        }
        if self.global_key(&key, out) == EventState::Consumed {
            return;
        }
        let state = match self.focus {
            Focus::Composer => self.composer_key(key, out),
            Focus::Sessions => self.sessions_key(key, out),
            Focus::Transcript => self.transcript_key(key, out),
        };
        if state == EventState::NotConsumed && self.focus != Focus::Composer {
            self.pane_common_key(&key, out);
        }
    }

    /// Keys that work in every pane. Plain characters are left to the composer when it has
    /// focus, so typing `q` or `?` types them.
    fn global_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        let typing =
            self.focus == Focus::Composer || (self.focus == Focus::Sessions && self.filtering);
        let is_text = matches!(key.code, KeyCode::Char(_))
            && !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if typing && is_text {
            return EventState::NotConsumed;
        }
        if k.stop_or_quit.matches(key) {
            if self.open.as_ref().is_some_and(|o| o.is_streaming()) {
                self.stop_stream(out);
            } else {
                self.quit(out);
            }
        } else if k.new_session.matches(key) {
            self.new_session(String::new(), out);
        } else if k.toggle_role.matches(key) {
            self.role = if self.role == Role::User {
                Role::System
            } else {
                Role::User
            };
        } else if k.focus_next.matches(key) {
            self.filtering = false;
            self.focus = match self.focus {
                Focus::Sessions => Focus::Transcript,
                Focus::Transcript => Focus::Composer,
                Focus::Composer if self.settings.show_sessions => Focus::Sessions,
                Focus::Composer => Focus::Transcript,
            };
        } else if k.focus_prev.matches(key) {
            self.filtering = false;
            self.focus = match self.focus {
                Focus::Sessions => Focus::Composer,
                Focus::Composer => Focus::Transcript,
                Focus::Transcript if self.settings.show_sessions => Focus::Sessions,
                Focus::Transcript => Focus::Composer,
            };
        } else if k.scroll_up.matches(key) {
            self.scroll_by(-(self.page() as isize));
        } else if k.scroll_down.matches(key) {
            self.scroll_by(self.page() as isize);
        } else if k.help.matches(key) {
            self.overlay = Some(Overlay::Help { scroll: 0 });
        } else if k.metrics_view.matches(key) {
            self.open_metrics(out);
        } else if k.wallet_view.matches(key) {
            self.open_wallet(None, out);
        } else if k.back.matches(key) && !self.filtering {
            // Esc: stop following a stream, else clear the notice or a send error.
            let (w, h) =
                transcript_viewport(self.size, self.composer_rows(), self.settings.show_sessions);
            if let Some(open) = self.open.as_mut().filter(|o| o.follow && o.is_streaming()) {
                open.top = open.effective_top(w, h);
                open.follow = false;
                self.notify(
                    Level::Info,
                    format!(
                        "stopped following; {} to follow again",
                        self.keys.scroll_bottom.first_label()
                    ),
                );
            } else if self.notice.is_some() || self.send_error.is_some() {
                self.notice = None;
                self.send_error = None;
            } else if self.focus != Focus::Composer {
                self.focus = Focus::Composer;
            } else {
                return EventState::NotConsumed;
            }
        } else {
            return EventState::NotConsumed;
        }
        EventState::Consumed
    }

    /// Keys shared by the sessions and transcript panes when they did not use them.
    fn pane_common_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) {
        if self.keys.quit.matches(key) {
            self.quit(out);
        } else if self.keys.refresh.matches(key) {
            out.push(Command::RefreshUsage);
        } else if self.keys.scroll_top.matches(key) {
            if let Some(o) = self.open.as_mut() {
                o.follow = false;
                o.top = 0;
            }
        } else if self.keys.scroll_bottom.matches(key)
            && let Some(o) = self.open.as_mut()
        {
            o.follow = true;
        }
    }

    fn composer_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        if self.keys.send.matches(&key) {
            self.submit(out);
        } else if self.keys.newline.matches(&key) {
            self.composer.insert_newline();
        } else if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('n' | 'p' | 'r' | 'c'))
        {
            // Never let the textarea's emacs bindings shadow ours if they were rebound.
            return EventState::NotConsumed;
        } else {
            self.composer.input(key);
            self.send_error = None;
        }
        EventState::Consumed
    }

    fn sessions_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        if self.filtering {
            match key.code {
                KeyCode::Esc => {
                    self.filtering = false;
                    self.filter.clear();
                    self.session_cursor = 0;
                    return EventState::Consumed;
                }
                KeyCode::Enter => {
                    self.filtering = false;
                    self.open_selected(out);
                    return EventState::Consumed;
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                    self.session_cursor = 0;
                    return EventState::Consumed;
                }
                KeyCode::Char(c)
                    if !key
                        .modifiers
                        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
                {
                    self.filter.push(c);
                    self.session_cursor = 0;
                    return EventState::Consumed;
                }
                _ => {}
            }
        }
        let n = self.visible_sessions().len();
        if k.move_up.matches(&key) {
            self.session_cursor = self.session_cursor.saturating_sub(1);
        } else if k.move_down.matches(&key) {
            if self.session_cursor + 1 < n {
                self.session_cursor += 1;
            }
        } else if k.open_session.matches(&key) {
            self.open_selected(out);
        } else if k.delete_session.matches(&key) {
            if let Some(s) = self.visible_sessions().get(self.session_cursor) {
                self.overlay = Some(Overlay::ConfirmDelete {
                    session_id: s.id.clone(),
                    title: s.title.clone(),
                    from_composer: false,
                });
            }
        } else if k.filter_sessions.matches(&key) {
            self.filtering = true;
        } else {
            return EventState::NotConsumed;
        }
        EventState::Consumed
    }

    fn transcript_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        let Some(open) = self.open.as_mut() else {
            return EventState::NotConsumed;
        };
        let n = open.items.len();
        if k.move_up.matches(&key) {
            open.selected = Some(match open.selected {
                Some(i) => i.saturating_sub(1),
                None => n.saturating_sub(1),
            });
            self.reveal_selected();
        } else if k.move_down.matches(&key) {
            open.selected = match open.selected {
                Some(i) if i + 1 < n => Some(i + 1),
                Some(i) => Some(i),
                None => None,
            };
            self.reveal_selected();
        } else if k.copy_reply.matches(&key) {
            let item = open
                .selected
                .and_then(|i| open.items.get(i))
                .or_else(|| open.items.iter().rev().find(|i| i.role == Role::Assistant));
            match item {
                Some(item) => {
                    out.push(Command::CopyToClipboard(item.content.clone()));
                    let n = item.content.chars().count();
                    self.notify(
                        Level::Info,
                        format!("copied {n} characters to the clipboard"),
                    );
                }
                None => self.notify(Level::Warn, "nothing to copy yet"),
            }
        } else {
            return EventState::NotConsumed;
        }
        EventState::Consumed
    }

    fn overlay_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        let Some(overlay) = self.overlay.clone() else {
            return;
        };
        let k = &self.keys;
        match overlay {
            Overlay::Help { scroll } => {
                let max = super::view::help::max_scroll(&self.keys, self.size);
                let page = self.size.height.saturating_sub(4).max(1);
                let step = if k.scroll_down.matches(&key) || k.scroll_up.matches(&key) {
                    page
                } else {
                    1
                };
                if k.move_down.matches(&key) || k.scroll_down.matches(&key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_add(step).min(max),
                    });
                } else if k.move_up.matches(&key) || k.scroll_up.matches(&key) {
                    self.overlay = Some(Overlay::Help {
                        scroll: scroll.saturating_sub(step),
                    });
                } else if k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                    self.quit(out);
                } else {
                    self.overlay = None;
                }
            }
            Overlay::ConfirmDelete {
                session_id,
                title,
                from_composer,
            } => {
                if k.confirm.matches(&key) {
                    self.overlay = None;
                    if from_composer {
                        // The `/delete` command is done with.
                        self.composer = new_composer();
                    }
                    self.deleting.push(session_id.clone());
                    self.notify(Level::Info, format!("deleting “{title}”…"));
                    out.push(Command::Delete { session_id });
                } else if k.cancel.matches(&key) || k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                }
            }
            Overlay::ContextOverflow { draft, .. } => {
                if k.confirm.matches(&key) || k.new_session.matches(&key) {
                    self.overlay = None;
                    self.new_session(draft, out);
                } else if k.cancel.matches(&key) || k.stop_or_quit.matches(&key) {
                    self.overlay = None;
                }
            }
        }
    }

    // ---- mouse -----------------------------------------------------------------------------

    fn on_mouse(&mut self, m: MouseEvent, out: &mut Vec<Command>) {
        // The wheel scrolls a full-screen view's tables.
        if self.overlay.is_none()
            && let Some(view) = self.active_view_mut()
        {
            let delta = match m.kind {
                MouseEventKind::ScrollUp => -1,
                MouseEventKind::ScrollDown => 1,
                _ => 0,
            };
            view.scroll(delta);
        }
        if self.overlay.is_some() || self.view != View::Chat {
            return;
        }
        let layout = self.layout();
        let pos = Position::new(m.column, m.row);
        match m.kind {
            MouseEventKind::ScrollUp => self.scroll_by(-3),
            MouseEventKind::ScrollDown => self.scroll_by(3),
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(list) = layout.session_list.filter(|r| r.contains(pos)) {
                    self.focus = Focus::Sessions;
                    let row = (pos.y - list.y) as usize / layout::SESSION_ROW_HEIGHT;
                    let first = layout::first_visible_session(self.session_cursor, list.height);
                    let idx = first + row;
                    if idx < self.visible_sessions().len() {
                        self.session_cursor = idx;
                        self.open_selected(out);
                    }
                } else if layout.transcript_inner.contains(pos) {
                    self.focus = Focus::Transcript;
                    let inner = layout.transcript_inner;
                    if let Some(open) = self.open.as_mut() {
                        let top = open.effective_top(inner.width, inner.height);
                        let line = top + (pos.y - inner.y) as usize;
                        if let Some(entry) = open.transcript.entry_at_line(inner.width, line) {
                            open.selected = open.items.iter().position(|i| i.entry == entry);
                        }
                    }
                } else if layout.composer.contains(pos) {
                    self.focus = Focus::Composer;
                }
            }
            _ => {}
        }
    }

    // ---- actions ---------------------------------------------------------------------------

    fn quit(&mut self, out: &mut Vec<Command>) {
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
    fn keep_cut_replies(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if let Some(p) = open.pending.take_if(|p| p.accepted) {
            open.set_state(p.reply_item, EntryState::Interrupted);
            if let Some(item) = open.items.get(p.reply_item) {
                out.push(Command::Persist(StoreOp::AppendMessage {
                    session_id: open.id.clone(),
                    message: stored(item),
                }));
            }
        }
        out.extend(open.settle_cut_off());
    }

    fn save_draft(&mut self, out: &mut Vec<Command>) {
        if let Some(open) = &self.open {
            let text = self.composer_text();
            out.push(Command::Persist(StoreOp::SaveDraft {
                session_id: open.id.clone(),
                text: text.clone(),
            }));
            self.draft_in_store = text;
        }
    }

    fn page(&self) -> usize {
        let (_, h) =
            transcript_viewport(self.size, self.composer_rows(), self.settings.show_sessions);
        (h as usize).saturating_sub(2).max(1)
    }

    fn scroll_by(&mut self, delta: isize) {
        let (w, h) =
            transcript_viewport(self.size, self.composer_rows(), self.settings.show_sessions);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let total = open.transcript.height(w);
        let max_top = total.saturating_sub(h as usize);
        let top = open.effective_top(w, h) as isize + delta;
        let top = top.clamp(0, max_top as isize) as usize;
        open.top = top;
        open.follow = top >= max_top;
    }

    fn reveal_selected(&mut self) {
        let (w, h) =
            transcript_viewport(self.size, self.composer_rows(), self.settings.show_sessions);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let Some(entry) = open
            .selected
            .and_then(|i| open.items.get(i))
            .map(|i| i.entry)
        else {
            return;
        };
        let range = open.transcript.line_range_of(w, entry);
        if range.is_empty() {
            return;
        }
        let top = open.effective_top(w, h);
        let h = h as usize;
        let new_top = if range.start < top {
            range.start
        } else if range.end > top + h {
            range.end.saturating_sub(h).min(range.start)
        } else {
            top
        };
        let max_top = open.transcript.height(w).saturating_sub(h);
        open.top = new_top;
        open.follow = new_top >= max_top;
    }

    fn stop_stream(&mut self, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let Some(p) = open.pending.take() else { return };
        open.set_state(p.reply_item, EntryState::Interrupted);
        if p.accepted
            && let Some(item) = open.items.get(p.reply_item)
        {
            out.push(Command::Persist(StoreOp::AppendMessage {
                session_id: open.id.clone(),
                message: stored(item),
            }));
        }
        // "a reply is still coming" no longer holds.
        self.send_error = None;
        self.notify(Level::Info, "stopped; the service keeps the full reply");
    }

    fn open_selected(&mut self, out: &mut Vec<Command>) {
        if let Some(id) = self
            .visible_sessions()
            .get(self.session_cursor)
            .map(|s| s.id.clone())
        {
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
    fn open_session(&mut self, id: String, out: &mut Vec<Command>) {
        if self.open_id() == Some(id.as_str()) {
            return;
        }
        self.leave_open_session(out);
        self.open = Some(OpenSession::new(
            id.clone(),
            self.settings.max_context_tokens,
        ));
        if let Some(pos) = self.visible_sessions().iter().position(|s| s.id == id) {
            self.session_cursor = pos;
        }
        let (width, rows) =
            transcript_viewport(self.size, self.composer_rows(), self.settings.show_sessions);
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

    fn leave_open_session(&mut self, out: &mut Vec<Command>) {
        self.save_draft(out);
        // A reply still streaming is kept as far as it came.
        self.keep_cut_replies(out);
        if self.open.take().is_some() {
            // The draft went to the store with its session. Text typed before any session
            // was open (the store still loading) stays for the session about to open.
            self.composer = new_composer();
            self.metadata = None;
        }
        self.send_error = None;
    }

    /// Creates a session locally (the server creates it with the first message).
    fn new_session(&mut self, draft: String, out: &mut Vec<Command>) {
        let id = new_session_id();
        let summary = SessionSummary {
            id: id.clone(),
            title: NEW_SESSION_TITLE.to_string(),
            last_activity: self.now,
            tokens: 0,
        };
        self.sessions.insert(0, summary.clone());
        self.filter.clear();
        self.filtering = false;
        out.push(Command::Persist(StoreOp::UpsertSession(summary)));
        self.open_session(id, out);
        self.session_cursor = 0;
        if !draft.is_empty() {
            self.composer.insert_str(&draft);
        }
        if let Some(o) = self.open.as_mut() {
            o.loaded = true;
        }
        // A new session has no stored draft; text carried over is saved as an edit.
        self.draft_in_store = String::new();
        self.focus = Focus::Composer;
    }

    fn remove_session(&mut self, id: &str, out: &mut Vec<Command>) {
        self.deleting.retain(|d| d != id);
        let Some(pos) = self.sessions.iter().position(|s| s.id == id) else {
            return;
        };
        self.sessions.remove(pos);
        out.push(Command::Persist(StoreOp::DeleteSession(id.to_string())));
        if self.open_id() == Some(id) {
            // Drop the open session without saving its draft, then open the next one.
            self.open = None;
            self.composer = new_composer();
            self.metadata = None;
            let next = self
                .sessions
                .get(pos)
                .or_else(|| self.sessions.get(pos.wrapping_sub(1)));
            match next.map(|s| s.id.clone()) {
                Some(next) => self.open_session(next, out),
                None => self.new_session(String::new(), out),
            }
        }
        let n = self.visible_sessions().len();
        if self.session_cursor >= n {
            self.session_cursor = n.saturating_sub(1);
        }
    }

    /// Enter in the composer: a slash command or a message.
    fn submit(&mut self, out: &mut Vec<Command>) {
        let text = self.composer_text();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        if let Some(cmd) = trimmed.strip_prefix('/').filter(|c| !c.starts_with('/')) {
            let (name, arg) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            let arg = arg.trim();
            match name {
                "new" => {
                    self.composer = new_composer();
                    self.new_session(arg.to_string(), out);
                }
                "delete" => {
                    // The text stays in the composer until the dialog is confirmed.
                    if let Some(open) = &self.open {
                        let title = self.sessions.iter().find(|s| s.id == open.id)
                            .map(|s| s.title.clone()).unwrap_or_else(|| open.id.clone());
                        self.overlay = Some(Overlay::ConfirmDelete { session_id: open.id.clone(), title, from_composer: true });
                    }
                }
                "system" if !arg.is_empty() => {
                    let arg = arg.to_string();
                    self.send(arg, Role::System, out);
                }
                "system" => self.notify(Level::Warn, "usage: /system TEXT"),
                "meta" if arg.is_empty() => {
                    self.metadata = None;
                    self.composer = new_composer();
                    self.notify(Level::Info, "metadata cleared");
                }
                "meta" => match serde_json::from_str::<Value>(arg) {
                    Ok(v @ Value::Object(_)) => {
                        self.metadata = Some(v);
                        self.composer = new_composer();
                        self.notify(Level::Info, "metadata set for the next message");
                    }
                    Ok(_) => self.notify(Level::Error, "/meta needs a JSON object, like /meta {\"topic\":\"rust\"}"),
                    Err(e) => self.notify(Level::Error, format!("/meta: invalid JSON: {e}")),
                },
                "help" => {
                    self.composer = new_composer();
                    self.overlay = Some(Overlay::Help { scroll: 0 });
                }
                "metrics" => {
                    self.composer = new_composer();
                    self.open_metrics(out);
                }
                "wallet" => {
                    self.composer = new_composer();
                    let id = (!arg.is_empty()).then(|| arg.to_string());
                    self.open_wallet(id.as_deref(), out);
                }
                "quit" | "q" => {
                    self.composer = new_composer();
                    self.quit(out);
                }
                other => self.notify(
                    Level::Error,
                    format!("unknown command /{other}: try /new, /delete, /system, /meta, /metrics, /wallet, /help, /quit (// sends a literal /)"),
                ),
            }
            return;
        }
        let text = match text.trim().strip_prefix("//") {
            Some(rest) => format!("/{rest}"),
            None => text.trim().to_string(),
        };
        let role = self.role;
        self.send(text, role, out);
    }

    fn send(&mut self, text: String, role: Role, out: &mut Vec<Command>) {
        let n = text.chars().count();
        if n > MAX_CONTENT_CHARS {
            self.send_error = Some(format!(
                "too long: {n} characters, the limit is {MAX_CONTENT_CHARS}"
            ));
            return;
        }
        if !matches!(self.connection, Connection::Connected(_)) {
            self.send_error = Some(match &self.connection {
                Connection::Failed(e) => format!("not connected: {e}"),
                _ => "still connecting to the service…".to_string(),
            });
            return;
        }
        let now = self.now;
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if open.pending.is_some() {
            self.send_error = Some("a reply is still coming; wait or stop it (Ctrl-C)".to_string());
            return;
        }
        // A new turn: a reply lost by the stream stays as far as it came.
        out.extend(open.settle_cut_off());
        let send_id = self.next_send_id;
        self.next_send_id += 1;
        let user_item = open.push(role, text.clone(), EntryState::Complete, 0, None, now);
        let reply_item = open.push(
            Role::Assistant,
            String::new(),
            EntryState::Streaming,
            0,
            None,
            now,
        );
        open.follow = true;
        open.selected = None;
        let stream = open.stream == StreamState::Open;
        open.pending = Some(PendingSend {
            send_id,
            text: text.clone(),
            role,
            user_item,
            reply_item,
            accepted: false,
            streamed: stream,
            reply_done: false,
        });
        let body = SendMessage {
            content: text,
            role: (role != Role::User).then_some(role),
            stream: Some(stream),
            metadata: self.metadata.take(),
        };
        out.push(Command::Send {
            session_id: open.id.clone(),
            send_id,
            body,
            idempotency_key: format!("{}-{send_id}-{}", open.id, now.timestamp_millis()),
        });
        self.composer = new_composer();
        self.send_error = None;
        // The sent text is no longer a draft, even if the app dies before the reply.
        self.save_draft(out);
    }

    // ---- network results -------------------------------------------------------------------

    fn on_transcript_loaded(
        &mut self,
        session_id: String,
        messages: Vec<StoredMessage>,
        draft: Option<String>,
        rendered: Option<Transcript>,
    ) {
        let started = std::time::Instant::now();
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            return;
        };
        if open.loaded {
            return;
        }
        // Messages sent before the load finished stay after the stored ones.
        let recent = std::mem::take(&mut open.items);
        for m in messages {
            let state = stored_state(m.status);
            open.items.push(TranscriptItem {
                entry: EntryId(0),
                role: m.role,
                content: m.content,
                tokens: m.tokens,
                message_id: m.message_id,
                state,
                created_at: m.created_at,
                next_seq: 0,
            });
        }
        let shift = open.items.len();
        open.items.extend(recent);
        for p in open.pending.iter_mut().chain(open.cut_off.iter_mut()) {
            p.user_item += shift;
            p.reply_item += shift;
        }
        match rendered {
            Some(rendered) => open.adopt(rendered, shift),
            None => open.rebuild(),
        }
        open.loaded = true;
        tracing::debug!(
            messages = open.items.len(),
            micros = started.elapsed().as_micros() as u64,
            "transcript loaded on the UI task"
        );
        open.follow = true;
        self.draft_in_store = draft.clone().unwrap_or_default();
        if let Some(d) = draft.filter(|d| !d.is_empty())
            && self.composer.is_empty()
        {
            self.composer = new_composer();
            self.composer.insert_str(d);
        }
    }

    fn on_send_accepted(
        &mut self,
        session_id: String,
        send_id: u64,
        reply: Message,
        prompt_tokens: u64,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::RefreshUsage);
        let now = self.now;
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            return;
        };
        let Some(p) = open.pending.as_mut().filter(|p| p.send_id == send_id) else {
            return;
        };
        p.accepted = true;
        let (user_item, reply_item) = (p.user_item, p.reply_item);
        let sent_text = p.text.clone();
        let sent_role = p.role;
        let streamed = p.streamed;
        if let Some(u) = open.items.get_mut(user_item) {
            u.tokens = prompt_tokens;
            let header = header_for(u.role, u.created_at, prompt_tokens);
            let entry = u.entry;
            open.transcript.set_header(entry, header);
        }
        out.push(Command::Persist(StoreOp::AppendMessage {
            session_id: session_id.clone(),
            message: stored(&open.items[user_item]),
        }));
        let reply_id = reply.message_id.clone();
        if let Some(r) = open.items.get_mut(reply_item) {
            // Deltas that arrived before this response already named the id.
            if r.message_id.is_none() {
                r.message_id = Some(reply_id);
            }
        }
        let reply_done = open.pending.as_ref().is_some_and(|p| p.reply_done);
        if reply_done {
            open.pending = None;
            self.store_reply(&session_id, reply_item, out);
        } else if !reply.content.is_empty() || !streamed {
            open.resume(reply_item);
            self.finish_reply(&session_id, reply, out);
        } else if open.is_cut_off(reply_item) {
            // The stream dropped before the server answered: the reply is lost to it.
            open.cut_off = open.pending.take();
            if open.stream == StreamState::Open {
                out.push(Command::FetchHistory {
                    session_id: session_id.clone(),
                });
            }
        }
        // The session list: title from the first message, most recent first.
        if let Some(s) = self.sessions.iter_mut().find(|s| s.id == session_id) {
            if s.title == NEW_SESSION_TITLE && sent_role == Role::User {
                s.title = title_from(&sent_text);
            }
            s.last_activity = now;
            s.tokens += prompt_tokens;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
        sort_sessions(&mut self.sessions);
        self.session_cursor = self
            .visible_sessions()
            .iter()
            .position(|s| s.id == session_id)
            .unwrap_or(0);
    }

    /// The reply is complete: authoritative content, tokens, stored.
    fn finish_reply(&mut self, session_id: &str, reply: Message, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
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
        // Only a reply still coming completes (a stopped or finished one stays as it is).
        if open.items[idx].state != EntryState::Streaming {
            return;
        }
        let item = &mut open.items[idx];
        item.tokens = reply.tokens;
        item.state = EntryState::Complete;
        let (entry, role, at) = (item.entry, item.role, item.created_at);
        if item.content != reply.content {
            item.content = reply.content.clone();
            open.transcript.set_content(entry, reply.content);
        }
        open.transcript.set_state(entry, EntryState::Complete);
        open.transcript
            .set_header(entry, header_for(role, at, reply.tokens));
        match open.pending.as_mut().filter(|p| p.reply_item == idx) {
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
    fn store_reply(&mut self, session_id: &str, idx: usize, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            return;
        };
        let Some(item) = open.items.get(idx) else {
            return;
        };
        out.push(Command::Persist(StoreOp::AppendMessage {
            session_id: session_id.to_string(),
            message: stored(item),
        }));
        let tokens = item.tokens;
        if let Some(s) = self.sessions.iter_mut().find(|s| s.id == session_id) {
            s.tokens += tokens;
            s.last_activity = self.now;
            out.push(Command::Persist(StoreOp::UpsertSession(s.clone())));
        }
        out.push(Command::RefreshUsage);
    }

    fn on_send_failed(
        &mut self,
        session_id: String,
        send_id: u64,
        failure: Failure,
        out: &mut Vec<Command>,
    ) {
        let now = self.now;
        let typed = self.composer_text();
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            self.notify(
                Level::Error,
                format!("send failed: {}", failure.describe(now)),
            );
            return;
        };
        let Some(p) = open.pending.take().filter(|p| p.send_id == send_id) else {
            return;
        };
        // Take the two entries out again; the text goes back to the composer.
        for item in open.items.drain(p.user_item..) {
            open.transcript.remove(item.entry);
        }
        let mut draft = p.text.clone();
        if !self.composer.is_empty() {
            draft.push('\n');
            draft.push_str(&typed);
        }
        if p.role == Role::System {
            draft = format!("/system {draft}");
        }
        self.composer = new_composer();
        self.composer.insert_str(&draft);
        self.focus = Focus::Composer;
        self.send_error = Some(failure.describe(now));
        match failure {
            Failure::ContextOverflow { current, max } => {
                open.context_max = max;
                self.overlay = Some(Overlay::ContextOverflow {
                    current,
                    max,
                    draft,
                });
            }
            Failure::SessionNotFound => {
                self.notify(Level::Warn, "this session was deleted on the server; start a new one (Ctrl-N) — your text is kept");
            }
            Failure::QuotaExceeded { .. } => out.push(Command::RefreshUsage),
            _ => {}
        }
    }

    fn on_stream(&mut self, session_id: String, update: StreamStatus, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            return;
        };
        match update {
            StreamStatus::Connected => {
                open.stream = StreamState::Open;
                // A reply lost with the old connection: the service sends a snapshot of it
                // if it is still being generated; the stored history says if it finished
                // meanwhile or was dropped.
                if let Some(p) = &open.cut_off
                    && open
                        .items
                        .get(p.reply_item)
                        .is_some_and(|i| i.message_id.is_some())
                {
                    out.push(Command::FetchHistory { session_id });
                }
            }
            StreamStatus::Disconnected(why) => {
                open.stream = StreamState::Down(why);
                open.cut_off_reply();
            }
            StreamStatus::Unsupported => open.stream = StreamState::Unsupported,
            StreamStatus::Event(ev) => match ev {
                StreamEvent::Delta {
                    message_id,
                    seq,
                    content,
                    ..
                } => {
                    let Some(idx) = reply_slot(open, &message_id) else {
                        return;
                    };
                    // A lost reply picks up again only where it left off.
                    if seq == open.items[idx].next_seq {
                        open.resume(idx);
                    }
                    let item = &mut open.items[idx];
                    if item.state != EntryState::Streaming || seq < item.next_seq {
                        return;
                    }
                    item.next_seq = seq + 1;
                    item.content.push_str(&content);
                    let e = item.entry;
                    open.transcript.append_delta(e, &content);
                }
                StreamEvent::Snapshot {
                    message_id,
                    seq,
                    content,
                    ..
                } => {
                    let Some(idx) = reply_slot(open, &message_id) else {
                        return;
                    };
                    open.resume(idx);
                    let item = &mut open.items[idx];
                    if item.state != EntryState::Streaming {
                        return;
                    }
                    item.next_seq = seq;
                    item.content = content.clone();
                    let e = item.entry;
                    open.transcript.set_content(e, content);
                }
                StreamEvent::Done { message } => {
                    if let Some(idx) = reply_slot(open, &message.message_id) {
                        open.items[idx].message_id = Some(message.message_id.clone());
                        open.resume(idx);
                    }
                    self.finish_reply(&session_id, message, out);
                }
                StreamEvent::Error {
                    message_id, error, ..
                } => {
                    let Some(idx) = reply_slot(open, &message_id) else {
                        return;
                    };
                    // Only a reply still coming (or lost by the stream) can fail.
                    if open.items[idx].state != EntryState::Streaming && !open.is_cut_off(idx) {
                        return;
                    }
                    if open.cut_off.as_ref().is_some_and(|p| p.reply_item == idx) {
                        open.cut_off = None;
                    }
                    open.set_state(idx, EntryState::Failed(error.code.clone()));
                    if open.pending.as_ref().is_some_and(|p| p.reply_item == idx) {
                        open.pending = None;
                    }
                    let text = format!(
                        "the reply failed: {}: {}",
                        error.code,
                        sanitize_owned(&error.message)
                    );
                    self.notify(Level::Error, text);
                }
            },
        }
    }
}

impl App {
    /// The stored history after a reconnect settles a reply that the stream lost: stored →
    /// shown whole and kept; its message stored but not the reply → still being generated
    /// (the stream's snapshot picks it up); neither → the service dropped the turn, and the
    /// reply stays interrupted for good.
    fn on_history(&mut self, session_id: String, fetch: HistoryFetch, out: &mut Vec<Command>) {
        let Some(open) = self.open.as_mut().filter(|o| o.id == session_id) else {
            return;
        };
        let Some((idx, sent_role, sent_text)) = open
            .cut_off
            .as_ref()
            .map(|p| (p.reply_item, p.role, p.text.clone()))
        else {
            return;
        };
        let Some(reply_id) = open.items.get(idx).and_then(|i| i.message_id.clone()) else {
            return;
        };
        match fetch {
            HistoryFetch::Messages(messages) => {
                let last_is_sent = messages
                    .last()
                    .is_some_and(|m| m.role == sent_role && m.content == sent_text);
                if let Some(reply) = messages.into_iter().find(|m| m.message_id == reply_id) {
                    open.resume(idx);
                    self.finish_reply(&session_id, reply, out);
                    self.notify(Level::Info, "the reply finished while the stream was down");
                } else if last_is_sent {
                    tracing::debug!(session = %session_id, "the lost reply is still being generated");
                } else {
                    out.extend(open.settle_cut_off());
                    self.notify(
                        Level::Warn,
                        "the reply was cut short and the service did not keep it; what arrived is kept, marked interrupted",
                    );
                }
            }
            HistoryFetch::Unsupported => {
                out.extend(open.settle_cut_off());
                self.notify(
                    Level::Warn,
                    "the stream dropped mid-reply and this service cannot list past messages: the reply stays as far as it came, marked interrupted",
                );
            }
            HistoryFetch::Failed(e) => {
                tracing::warn!(session = %session_id, error = %e, "cannot fetch the history to settle a lost reply");
            }
        }
    }
}

/// The transcript item that a stream event for `message_id` belongs to: the item with that
/// id, or the pending reply whose id is not known yet (deltas can beat the POST response).
fn reply_slot(open: &mut OpenSession, message_id: &str) -> Option<usize> {
    if let Some(i) = open
        .items
        .iter()
        .position(|i| i.message_id.as_deref() == Some(message_id))
    {
        return Some(i);
    }
    let p = open.pending.as_ref()?;
    let item = open.items.get_mut(p.reply_item)?;
    if item.message_id.is_none() {
        item.message_id = Some(message_id.to_string());
        return Some(p.reply_item);
    }
    None
}

fn stored(item: &TranscriptItem) -> StoredMessage {
    StoredMessage {
        role: item.role,
        content: item.content.clone(),
        tokens: item.tokens,
        message_id: item.message_id.clone(),
        created_at: item.created_at,
        status: match item.state {
            EntryState::Complete => MessageStatus::Complete,
            // A reply still streaming when it is stored was cut short.
            EntryState::Streaming | EntryState::Interrupted => MessageStatus::Interrupted,
            EntryState::Failed(_) => MessageStatus::Failed,
        },
    }
}

fn sort_sessions(sessions: &mut [SessionSummary]) {
    sessions.sort_by_key(|s| std::cmp::Reverse(s.last_activity));
}

/// A session's title as the sessions pane shows it: the first message's first block as
/// plain text (markdown syntax removed), shortened ([`crate::store::plain_title`]).
pub fn title_from(text: &str) -> String {
    crate::store::plain_title(text, 40).unwrap_or_else(|| NEW_SESSION_TITLE.to_string())
}

fn transcript_viewport(size: Rect, composer_rows: usize, show_sessions: bool) -> (u16, u16) {
    let l = layout::compute(size, composer_rows, show_sessions);
    (l.transcript_inner.width, l.transcript_inner.height)
}

fn new_composer() -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_wrap_mode(WrapMode::WordOrGlyph);
    t.set_placeholder_text("Message · Enter sends · Alt-Enter new line · /help");
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}
