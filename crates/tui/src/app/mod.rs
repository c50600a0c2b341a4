//! The app's state and its one `update` function. No I/O here: `update` returns the
//! [`Command`]s that the loop hands to the workers, which report back through `AppEvent`s.

use chrono::{DateTime, Utc};
use crossterm::event::{KeyEvent, KeyEventKind};
use ratatui::layout::Rect;

use crate::component::ChatComponent;
use crate::composer_pane::{Composer, Lapse};
use crate::dialogs::Dialogs;
use crate::event::{AppEvent, Endpoint, EngineStatus, describe_failure};
use crate::full_view::{FullView, KeyResult};
use crate::keys::KeyBindings;
use crate::layout::{self, AppLayout};
use crate::sessions_pane::SessionsPane;
use crate::transcript_pane::{TranscriptPane, Viewport};
use convo_client::api::ApiError;

pub use crate::command::{Command, StoreOp};

mod account_feed;
mod accounts;
mod actions;
mod code_copy;
mod editor;
mod fork;
mod input;
mod link;
mod queue;
mod recall;
mod reply;
mod service;
mod settle;
mod slash;
mod state;
mod stop;
#[cfg(test)]
mod tests;

pub use crate::dialogs::{CodeChoice, Overlay};
pub use crate::slash::SlashCommand;
pub use crate::transcript_pane::{
    OpenSession, PendingJump, PendingSend, StreamState, TranscriptItem, match_line, render_stored,
};
pub use code_copy::{DELIVERY_UNKNOWN, clipboard_sequence};
pub use fork::{CANNOT_FORK, CANNOT_UNDO, UNDO_WHILE_STREAMING};
pub use link::{LimitReached, Link, Tone};
use recall::sent_messages;
pub use state::*;

pub use crate::event::NEW_SESSION_TITLE;

/// The whole state of the TUI.
pub struct App {
    keys: KeyBindings,
    settings: Settings,
    size: Rect,
    now: DateTime<Utc>,
    focus: Focus,
    view: View,
    connection: Connection,
    /// Whether the service answered the last request or stream (the status bar's dot).
    link: Link,
    /// What answers in the embedded service (none for a remote one).
    engine: Option<EngineStatus>,
    store_ready: bool,
    /// Whether the target's service lists sessions (`GET /v1/sessions`): unknown until it
    /// answers; then its list and histories are merged in (`service.rs`).
    service_lists: Option<bool>,
    sessions_pane: SessionsPane,
    /// The open session, the search bar over it, the hits list of a search across sessions.
    transcript: TranscriptPane,
    composer: Composer,
    /// The overlay (help, confirmations) and the choice of a code block to copy.
    dialogs: Dialogs,
    usage: UsagePanel,
    notice: Option<Notice>,
    /// The metrics view's state (F2).
    pub metrics: super::metrics::MetricsState,
    /// The wallet view's state (F3).
    wallet: super::wallet::WalletState,
    /// The accounts view's state (F4) and the operator's alerts.
    accounts: super::accounts_view::AccountsState,
    kept: super::kept_view::KeptState,
    next_send_id: u64,
    /// Quit was asked for before the store loaded, with text to keep.
    quit_when_loaded: bool,
    quit: bool,
    /// Whether the terminal has focus, as its focus reports say (assumed until one comes).
    terminal_focused: bool,
    /// A fork asked of the server and not answered yet.
    forking: Option<fork::PendingFork>,
    /// The extensions the server turned out not to have.
    missing: fork::Missing,
    /// The sessions whose undo this device asked for and has no answer to yet: the account
    /// stream's news of it is this device's own (`account_feed.rs`).
    undoing: Vec<String>,
    /// Ctrl-C right after a reply ended asks for a second one (`stop.rs`).
    quit_guard: stop::QuitGuard,
    /// The composer's text waits for the reply that is coming (`queue.rs`).
    queued: Option<queue::Queued>,
}

impl App {
    pub fn new(keys: KeyBindings, settings: Settings, size: Rect, now: DateTime<Utc>) -> Self {
        let composer = Composer::new(&keys);
        App {
            keys,
            settings,
            size,
            now,
            focus: Focus::Composer,
            view: View::Chat,
            connection: Connection::Connecting,
            link: Link::Up,
            engine: None,
            store_ready: false,
            service_lists: None,
            sessions_pane: SessionsPane::default(),
            transcript: TranscriptPane::default(),
            composer,
            dialogs: Dialogs::default(),
            usage: UsagePanel::default(),
            notice: None,
            metrics: Default::default(),
            wallet: Default::default(),
            accounts: Default::default(),
            kept: Default::default(),
            next_send_id: 1,
            quit_when_loaded: false,
            quit: false,
            terminal_focused: true,
            forking: None,
            missing: fork::Missing::default(),
            undoing: Vec::new(),
            quit_guard: stop::QuitGuard::default(),
            queued: None,
        }
    }

    /// The key bindings.
    pub fn keys(&self) -> &KeyBindings {
        &self.keys
    }

    /// The terminal's size.
    pub fn size(&self) -> Rect {
        self.size
    }

    /// The time as the clock last said.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// The wall clock as an event is about to be handled (`Runtime::handle`): what the event
    /// stamps (a message sent, a session's last activity) gets the time it happened. The
    /// clock's ticks (`AppEvent::Clock`, every 15 s) only move relative times on screen;
    /// stamping by the last tick put a message up to 15 s before it was sent.
    pub fn observe_clock(&mut self, now: DateTime<Utc>) {
        self.now = now;
    }

    /// Which pane has the keys.
    pub fn focus(&self) -> Focus {
        self.focus
    }

    /// The chat or a full-screen view.
    pub fn view(&self) -> View {
        self.view
    }

    /// The connection to the service.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// Whether the local store has loaded the sessions.
    pub fn store_ready(&self) -> bool {
        self.store_ready
    }

    /// The usage gauges' data.
    pub fn usage(&self) -> &UsagePanel {
        &self.usage
    }

    /// The notice in the status bar, if any.
    pub fn notice(&self) -> Option<&Notice> {
        self.notice.as_ref()
    }

    /// Whether the app has quit (the loop ends).
    pub fn has_quit(&self) -> bool {
        self.quit
    }

    /// The wallet view's state (F3).
    pub fn wallet(&self) -> &super::wallet::WalletState {
        &self.wallet
    }

    /// The layout for the current size and composer.
    pub fn layout(&self) -> AppLayout {
        let mut l = self.layout_without_search_bar();
        if self.transcript.search().is_some() && self.view == View::Chat {
            l.search_bar = layout::take_search_bar(&mut l.transcript_inner);
        }
        l
    }

    fn layout_without_search_bar(&self) -> AppLayout {
        let status_rows = self.status_rows(self.size.width, layout::max_status_rows(self.size));
        layout::compute(
            self.size,
            self.composer_rows(),
            self.settings.show_sessions,
            status_rows,
        )
    }

    /// What the status bar says in place of its key hints, word-wrapped over as many rows as
    /// it needs ([`layout::max_status_rows`]): the notice, and a send error too long for the
    /// composer's border, so that no advice is cut off.
    pub fn status_message(&self) -> Option<(Level, String)> {
        let notice = self
            .notice
            .as_ref()
            .filter(|_| !self.sessions_pane.is_filtering());
        if let Some(prompt) = self.dialogs.code_choice_prompt(&self.keys, self.open_id()) {
            return Some(match notice {
                Some(n) => (n.level, format!("{} · {prompt}", n.text)),
                None => (Level::Info, prompt),
            });
        }
        let send_error = self
            .composer
            .send_error()
            .filter(|e| !self.send_error_fits(e));
        match (notice, send_error) {
            (None, None) => None,
            (Some(n), None) => Some((n.level, n.text.clone())),
            (None, Some(e)) => Some((self.send_note_level(), e.to_string())),
            (Some(n), Some(e)) => Some((
                n.level.max(self.send_note_level()),
                format!("{} · {e}", n.text),
            )),
        }
    }

    /// What the composer's note is: the queued send's is news (`queue.rs`), any other says why
    /// a send did not go.
    pub fn send_note_level(&self) -> Level {
        if self.composer.noted(Lapse::Queued) {
            Level::Info
        } else {
            Level::Error
        }
    }

    /// Whether a send error fits the composer's bottom border (else the status bar says it).
    pub fn send_error_fits(&self, text: &str) -> bool {
        let width = layout::compute(self.size, 1, self.settings.show_sessions, 1)
            .composer
            .width as usize;
        crate::render::wrap::str_width(text) + 4 <= width
    }

    /// Rows the composer's text takes once wrapped to the composer's width.
    pub fn composer_rows(&self) -> usize {
        let width = layout::compute(self.size, 1, self.settings.show_sessions, 1)
            .composer
            .width
            .saturating_sub(2)
            .max(1) as usize;
        self.composer.rows(width)
    }

    /// The sessions pane: the list, its cursor and filter.
    pub fn sessions_pane(&self) -> &SessionsPane {
        &self.sessions_pane
    }

    pub fn open_id(&self) -> Option<&str> {
        self.transcript.open_id()
    }

    /// The transcript pane: the open session, the search bar, the hits list.
    pub fn transcript_pane(&self) -> &TranscriptPane {
        &self.transcript
    }

    /// The open session, if any.
    pub fn session(&self) -> Option<&OpenSession> {
        self.transcript.session()
    }

    /// The dialogs: the overlay shown and the code block choice.
    pub fn dialogs(&self) -> &Dialogs {
        &self.dialogs
    }

    /// What answers in the embedded service (none for a remote one, or before it says).
    pub fn engine(&self) -> Option<&EngineStatus> {
        self.engine.as_ref()
    }

    /// The overlay shown (help, a confirmation), if any.
    pub fn overlay(&self) -> Option<&Overlay> {
        self.dialogs.overlay()
    }

    /// The key hints of the chat's component that has the keys, for the status bar: the
    /// transcript pane's while its search bar or hits list is open, else the focused pane's.
    pub fn chat_hints(&self) -> Vec<(String, &'static str)> {
        if self.transcript.has_bar() {
            return self.transcript.hints(&self.keys);
        }
        match self.focus {
            Focus::Composer => self.composer.hints(&self.keys),
            Focus::Sessions => self.sessions_pane.hints(&self.keys),
            Focus::Transcript => self.transcript.hints(&self.keys),
        }
    }

    /// The composer: its text, role, metadata and send error.
    pub fn composer(&self) -> &Composer {
        &self.composer
    }

    pub fn composer_text(&self) -> String {
        self.composer.text()
    }

    pub fn composer_chars(&self) -> usize {
        self.composer.chars()
    }

    /// The key that takes the transcript back to its end from where the user is: the
    /// transcript's `End` from a pane or an empty draft, else `PgDn` (the composer's `End`
    /// moves its cursor; paging down to the end follows too).
    pub fn follow_hint(&self) -> String {
        if self.focus == Focus::Composer && self.composer_chars() > 0 {
            format!("{} (to the end)", self.keys.scroll_down.first_label())
        } else {
            self.keys.scroll_bottom.first_label()
        }
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
                    // An informational notice has been seen: the next action clears it
                    // (warnings and errors stay until Esc or until their cause is gone).
                    if self.notice.as_ref().is_some_and(|n| n.level == Level::Info) {
                        self.notice = None;
                    }
                    let before = self.text_before_first_edit();
                    self.on_key(key, &mut out);
                    self.warm_on_first_edit(before, &mut out);
                }
            }
            AppEvent::Mouse(m) => self.on_mouse(m, &mut out),
            AppEvent::Paste(text) => self.on_paste(&text, &mut out),
            AppEvent::Resize(w, h) => self.size = Rect::new(0, 0, w, h),
            AppEvent::Focus(focused) => self.terminal_focused = focused,
            AppEvent::Signal(_) => self.quit(&mut out),
            AppEvent::EditorClosed(outcome) => {
                let before = self.text_before_first_edit();
                self.on_editor_closed(outcome, &mut out);
                self.warm_on_first_edit(before, &mut out);
            }
            AppEvent::Clock(now) => self.now = now,
            AppEvent::Connected(endpoint) => {
                self.connection = Connection::Connected(endpoint);
                // A send refused while connecting: the draft is there, Enter sends it now.
                self.composer.lapse(Lapse::Connected);
                if let Some(open) = self.transcript.session() {
                    out.push(Command::OpenStream {
                        session_id: open.id.clone(),
                    });
                }
                out.push(Command::RefreshUsage);
                // The target's sessions as its service has them, once (`service.rs`).
                out.push(Command::ListSessions);
                // The complete metrics buckets earlier runs kept for this account.
                out.push(Command::LoadKnownBuckets);
            }
            AppEvent::ConnectFailed(e) => {
                self.notify(Level::Error, format!("cannot connect: {e}"));
                self.connection = Connection::Failed(e);
            }
            AppEvent::Engine(status) => {
                if let convo_wire::engine::LoadState::Failed(e) = &status.state {
                    self.notify(Level::Error, format!("the model did not load: {e}"));
                }
                self.engine = Some(status);
            }
            AppEvent::StoreLoaded {
                sessions,
                last_open,
            } => {
                self.store_ready = true;
                self.sessions_pane.load(sessions);
                let all = self.sessions_pane.all();
                let target = last_open
                    .filter(|id| all.iter().any(|s| &s.id == id))
                    .or_else(|| all.first().map(|s| s.id.clone()));
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
                &mut out,
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
            AppEvent::History {
                session_id,
                fetch,
                asked,
            } => self.on_history(session_id, fetch, asked, &mut out),
            AppEvent::Deleted { session_id } => {
                self.note_answer(Ok(()));
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
                self.note_answer(Err(&failure));
                self.sessions_pane.delete_failed(&session_id);
                if matches!(failure, ApiError::SessionNotFound { .. }) {
                    self.notify(
                        Level::Warn,
                        format!(
                            "{} was not on the server (already deleted); removed from the list",
                            self.title_of(&session_id)
                        ),
                    );
                    self.remove_session(&session_id, &mut out);
                } else {
                    let text = format!("delete failed: {}", describe_failure(&failure, self.now));
                    self.notify(Level::Error, text);
                }
            }
            AppEvent::Account(event) => self.on_account(event, &mut out),
            AppEvent::UsageFetched(usage) => self.on_usage(usage, &mut out),
            AppEvent::UsageFailed(e) => self.on_usage_failed(e),
            AppEvent::WorkerError(e) => self.notify(Level::Error, e),
            AppEvent::SessionHits { seq, result } => self.transcript.hits_answered(seq, result),
            AppEvent::ReadForSearch { session_id, fetch } => {
                self.on_read_for_search(session_id, fetch, &mut out)
            }
            AppEvent::TitleChanged {
                session_id,
                title,
                title_set,
            } => {
                self.on_title_changed(session_id.clone(), title, title_set);
                if title_set {
                    self.send_title_to_service(&session_id, &mut out);
                }
            }
            AppEvent::SessionTokens { session_id, tokens } => {
                if let Some(s) = self.sessions_pane.get_mut(&session_id) {
                    s.tokens = tokens;
                }
            }
            AppEvent::ServiceSessions(change) => self.on_service_sessions(change, &mut out),
            AppEvent::SessionsMerged {
                sessions,
                deleted,
                titles_to_send,
                archived,
            } => self.on_sessions_merged(sessions, deleted, titles_to_send, archived, &mut out),
            AppEvent::TitleSent { session_id, title } => {
                out.push(Command::Persist(StoreOp::TitleSent { session_id, title }));
            }
            AppEvent::ServiceSessionsUnsupported => self.service_lists = Some(false),
            AppEvent::ServiceSessionsFailed(e) => {
                tracing::warn!(error = %e, "the service's sessions are not merged");
            }
            AppEvent::Exported { result, .. } => match result {
                Ok(done) => self.notify(
                    Level::Info,
                    format!(
                        "exported {} to {}",
                        convo_client::export::messages(done.messages),
                        done.path
                    ),
                ),
                Err(e) => self.notify(Level::Error, format!("export failed: {e}")),
            },
            AppEvent::Forked {
                source,
                new_session_id,
                outcome,
            } => self.on_forked(source, new_session_id, outcome, &mut out),
            AppEvent::Undone {
                session_id,
                outcome,
            } => self.on_undone(session_id, outcome, &mut out),
            AppEvent::CancelAnswered {
                session_id,
                message_id,
                outcome,
            } => self.on_cancel_answered(session_id, message_id, outcome, &mut out),
            AppEvent::ReplyTick => self.on_reply_tick(&mut out),
            AppEvent::Metrics(ev) => {
                let complete = self.metrics.on_event(ev);
                if let Some(account) = self
                    .metrics
                    .account
                    .clone()
                    .filter(|_| !complete.is_empty())
                {
                    out.push(Command::Persist(StoreOp::KeepBuckets {
                        account,
                        buckets: complete,
                    }));
                }
            }
            AppEvent::Wallet(ev) => {
                let mut reqs = Vec::new();
                self.wallet.on_event(ev, &mut reqs);
                out.extend(reqs.into_iter().map(Command::Wallet));
            }
            AppEvent::Accounts(ev) => self.on_accounts(ev, &mut out),
            AppEvent::Kept(ev) => self.kept.on_event(ev),
        }
        self.apply_pending_jump();
        self.refresh_search();
        self.note_draft_edit(&mut out);
        // "A reply is still coming" is over when no reply is, a network error once the
        // service answers again.
        if self.session().is_none_or(|o| {
            o.pending.is_none() && o.stopped.is_none() && o.foreign_item().is_none()
        }) {
            self.composer.lapse(Lapse::ReplyEnded);
        }
        self.release_answered_held(&mut out);
        self.send_asked_stop(&mut out);
        self.send_queued(&mut out);
        if self.link == Link::Up {
            self.composer.lapse(Lapse::LinkUp);
        }
        self.fetch_metrics_on_screen(&mut out);
        self.flush_accounts(&mut out);
        out
    }

    /// The screen a full view gets: above the status bar.
    fn full_view_area(&self) -> Rect {
        let status = self.layout().status;
        Rect::new(0, 0, self.size.width, status.y)
    }

    /// With the metrics view shown, asks for the buckets on screen that were never asked for
    /// (whatever moved them there: a key, a resize, an answer).
    fn fetch_metrics_on_screen(&mut self, out: &mut Vec<Command>) {
        if self.view != View::Metrics {
            return;
        }
        self.metrics.viewport = self.full_view_area();
        let mut reqs = Vec::new();
        self.metrics.fetch_on_screen(&mut reqs);
        out.extend(reqs.into_iter().map(Command::Metrics));
    }

    /// The composer's text, until token counting was asked to get ready.
    fn text_before_first_edit(&self) -> Option<String> {
        self.composer.text_before_first_edit()
    }

    /// At the first change of the composer's text, asks token counting to get ready: someone
    /// who types will send, and someone who only reads never pays for it.
    fn warm_on_first_edit(&mut self, before: Option<String>, out: &mut Vec<Command>) {
        if self.composer.first_edit(before) {
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
        let Some(open) = self.transcript.session().filter(|o| o.loaded) else {
            return;
        };
        if let Some(text) = self.composer.unstored_edit() {
            out.push(Command::Persist(StoreOp::DraftEdited {
                session_id: open.id.clone(),
                text,
            }));
        }
    }

    /// The store kept a new title for a session (`/title`): the list and the transcript's
    /// border show it.
    fn on_title_changed(&mut self, session_id: String, title: Option<String>, title_set: bool) {
        let Some(s) = self.sessions_pane.get_mut(&session_id) else {
            return;
        };
        s.title = title.unwrap_or_else(|| NEW_SESSION_TITLE.to_string());
        s.title_set = title_set;
        let text = if title_set {
            format!("title set: “{}”", s.title)
        } else {
            format!("title cleared: “{}” again", s.title)
        };
        self.notify(Level::Info, text);
    }

    fn title_of(&self, id: &str) -> String {
        self.sessions_pane
            .get(id)
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
            View::Accounts => Some(&self.accounts),
            View::Kept => Some(&self.kept),
        }
    }

    fn active_view_mut(&mut self) -> Option<&mut dyn FullView> {
        match self.view {
            View::Chat => None,
            View::Metrics => Some(&mut self.metrics),
            View::Wallet => Some(&mut self.wallet),
            View::Accounts => Some(&mut self.accounts),
            View::Kept => Some(&mut self.kept),
        }
    }

    /// A key while a full-screen view is shown: the view takes it first; what it leaves, the
    /// app may use (help, the other view's key). False while the chat is shown.
    fn view_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> bool {
        let view: &mut dyn FullView = match self.view {
            View::Chat => return false,
            View::Metrics => &mut self.metrics,
            View::Wallet => &mut self.wallet,
            View::Accounts => &mut self.accounts,
            View::Kept => &mut self.kept,
        };
        match view.key(&self.keys, key, self.now, out) {
            KeyResult::Consumed => {}
            KeyResult::Back => self.view = View::Chat,
            KeyResult::Quit => self.quit(out),
            KeyResult::NotConsumed => {
                if self.keys.help.matches(key) {
                    self.dialogs.help();
                } else if self.keys.metrics_view.matches(key) && self.view != View::Metrics {
                    self.open_metrics(out);
                } else if self.keys.wallet_view.matches(key) && self.view != View::Wallet {
                    self.open_wallet(None, out);
                } else if self.keys.accounts_view.matches(key) && self.view != View::Accounts {
                    self.open_accounts(out);
                }
            }
        }
        true
    }

    /// F2 or `/metrics`: shows the metrics view.
    fn open_metrics(&mut self, out: &mut Vec<Command>) {
        self.view = View::Metrics;
        // A load asks only for the buckets this screen shows.
        self.metrics.viewport = self.full_view_area();
        let mut reqs = Vec::new();
        self.metrics.open(self.now, &mut reqs);
        out.extend(reqs.into_iter().map(Command::Metrics));
    }

    /// F3 (no id) or `/wallet ID`: shows the wallet view, fetching `wallet_id` if given.
    /// The kept view's state (`/kept`).
    pub fn kept(&self) -> &super::kept_view::KeptState {
        &self.kept
    }

    /// `/kept`: the sessions kept aside in the local store, listed anew.
    pub(super) fn open_kept(&mut self, out: &mut Vec<Command>) {
        self.view = View::Kept;
        out.push(Command::Kept(self.kept.open()));
    }

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
}

/// Why a send waits: the previous reply has not finished.
pub const STILL_COMING: &str = "a reply is still coming; wait or stop it (Ctrl-C)";
/// Why a send waits for the answer to a send whose reply the user stopped.
pub const STOPPED_UNANSWERED: &str =
    "the service has not answered the message you stopped yet; send again once it has";

/// Why a send, a fork or an undo waits: the service has not answered yet (`App::not_now`);
/// cleared from the composer once it does.
pub const STILL_CONNECTING: &str = "still connecting to the service…";

/// A session's title as the sessions pane shows it: the first message's first block as
/// plain text (markdown syntax removed), shortened as the store keeps it
/// ([`convo_client::local_store::title_of`]), so the title is the same after a restart.
pub fn title_from(text: &str) -> String {
    convo_client::local_store::plain_title(text, convo_client::local_store::TITLE_CHARS)
        .unwrap_or_else(|| NEW_SESSION_TITLE.to_string())
}

impl App {
    /// The transcript's text area: its width and height.
    fn transcript_viewport(&self) -> Viewport {
        let l = self.layout();
        (l.transcript_inner.width, l.transcript_inner.height)
    }

    /// The transcript's text area before the search bar takes its row: what the transcript
    /// pane's methods take ([`TranscriptPane::text_area`]).
    fn transcript_area(&self) -> Viewport {
        let l = self.layout_without_search_bar();
        (l.transcript_inner.width, l.transcript_inner.height)
    }
}
