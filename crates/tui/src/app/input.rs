//! Input: keys and pastes routed to the component that has them (the dialogs, a full-screen
//! view, the transcript pane's search bar and hits list, the code block choice, the focused
//! pane), the keys of every pane, and the mouse. What a component answers is acted on here.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;

use super::{App, Command, EventState, Focus, Level, View, sent_messages};
use crate::component::ChatComponent;
use crate::composer_pane::ComposerKey;
use crate::dialogs::{CodeKey, DialogKey, Overlay};
use crate::layout;
use crate::sessions_pane::SessionsKey;
use crate::transcript_pane::{Jump, TranscriptKey};

impl App {
    // ---- keys ------------------------------------------------------------------------------

    pub(super) fn on_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        if self.dialogs.is_open() {
            let done = self.dialogs.key(&self.keys, &key, self.size);
            self.on_dialog(done, out);
            return;
        }
        if self.view_key(&key, out) {
            return;
        }
        if self.transcript.has_bar() {
            let done = self
                .transcript
                .key(&self.keys, &key, self.transcript_area());
            self.on_transcript(done, Some(&key), out);
            return;
        }
        if self.code_choice_key(&key, out) {
            return;
        }
        if self.global_key(&key, out) == EventState::Consumed {
            return;
        }
        let state = match self.focus {
            Focus::Composer => self.composer_key(key, out),
            Focus::Sessions => self.sessions_key(key, out),
            Focus::Transcript => {
                let done = self
                    .transcript
                    .key(&self.keys, &key, self.transcript_area());
                self.on_transcript(done, Some(&key), out)
            }
        };
        if state == EventState::NotConsumed && self.focus != Focus::Composer {
            self.pane_common_key(&key, out);
        }
    }

    /// Keys that work in every pane. Plain characters are left to the composer when it has
    /// focus, so typing `q` or `?` types them.
    pub(super) fn global_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> EventState {
        let k = &self.keys;
        let typing = self.focus == Focus::Composer
            || (self.focus == Focus::Sessions && self.sessions_pane.is_filtering());
        let is_text = matches!(key.code, KeyCode::Char(_))
            && !key
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if typing && is_text {
            return EventState::NotConsumed;
        }
        if k.stop_or_quit.matches(key) {
            self.stop_or_quit(out);
        } else if k.new_session.matches(key) {
            self.new_session(String::new(), out);
        } else if k.toggle_role.matches(key) {
            self.composer.toggle_role();
        } else if k.focus_next.matches(key) {
            self.sessions_pane.stop_filtering();
            self.focus = match self.focus {
                Focus::Sessions => Focus::Transcript,
                Focus::Transcript => Focus::Composer,
                Focus::Composer if self.settings.show_sessions => Focus::Sessions,
                Focus::Composer => Focus::Transcript,
            };
        } else if k.focus_prev.matches(key) {
            self.sessions_pane.stop_filtering();
            self.focus = match self.focus {
                Focus::Sessions => Focus::Composer,
                Focus::Composer => Focus::Transcript,
                Focus::Transcript if self.settings.show_sessions => Focus::Sessions,
                Focus::Transcript => Focus::Composer,
            };
        } else if k.scroll_up.matches(key) {
            let area = self.transcript_area();
            self.transcript.scroll_by(-(self.page() as isize), area);
        } else if k.scroll_down.matches(key) {
            let area = self.transcript_area();
            self.transcript.scroll_by(self.page() as isize, area);
        } else if k.help.matches(key) {
            self.dialogs.help();
        } else if k.search.matches(key) {
            self.open_search();
        } else if k.select_message.matches(key) {
            self.enter_selection();
        } else if k.metrics_view.matches(key) {
            self.open_metrics(out);
        } else if k.wallet_view.matches(key) {
            self.open_wallet(None, out);
        } else if k.accounts_view.matches(key) {
            self.open_accounts(out);
        } else if k.edit_in_editor.matches(key) {
            self.open_editor(out);
        } else if k.back.matches(key) && !self.sessions_pane.is_filtering() {
            // Esc: stop following a stream, else clear the notice or a send error.
            let area = self.transcript_area();
            if self.focus == Focus::Transcript && self.transcript.clear_selection() {
                // Leaving the message selection: back to typing.
                self.notice = None;
                self.focus = Focus::Composer;
            } else if self.transcript.stop_following(area) {
                let hint = format!("stopped following; {} to follow again", self.follow_hint());
                self.notify(Level::Info, hint);
            } else if self.notice.is_some() || self.composer.send_error().is_some() {
                self.notice = None;
                self.composer.set_send_error(None);
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
    pub(super) fn pane_common_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) {
        if self.keys.quit.matches(key) {
            self.quit(out);
        } else if self.keys.refresh.matches(key) {
            out.push(Command::RefreshUsage);
        } else if self.keys.scroll_top.matches(key) {
            self.transcript.scroll_to(false);
        } else if self.keys.scroll_bottom.matches(key) {
            self.transcript.scroll_to(true);
        }
    }

    pub(super) fn composer_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        let open = self.transcript.session();
        match self.composer.key(&self.keys, &key, &|| sent_messages(open)) {
            ComposerKey::Consumed => {}
            ComposerKey::Edited => self.composer.set_send_error(None),
            ComposerKey::NotConsumed => return EventState::NotConsumed,
            ComposerKey::Submit => self.submit(out),
            ComposerKey::ScrollTranscript => self.pane_common_key(&key, out),
            ComposerKey::Notice(text) => self.notify(Level::Info, text),
        }
        EventState::Consumed
    }

    pub(super) fn sessions_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) -> EventState {
        match self.sessions_pane.key(&self.keys, &key, ()) {
            SessionsKey::Consumed => {}
            SessionsKey::NotConsumed => return EventState::NotConsumed,
            SessionsKey::OpenSelected => self.open_selected(out),
            SessionsKey::OpenSelectedFromFilter => {
                self.open_selected(out);
                // The filter found it: the whole list is back, the cursor on it.
                let open = self.open_id().map(str::to_string).unwrap_or_default();
                self.sessions_pane.clear_filter();
                self.sessions_pane.point_at_or_top(&open);
            }
            SessionsKey::NoMatch(filter) => self.notify(
                Level::Info,
                format!("no session matches “{filter}”: Backspace edits, Esc clears"),
            ),
            SessionsKey::ConfirmDelete { session_id, title } => {
                self.dialogs.open(Overlay::ConfirmDelete {
                    session_id,
                    title,
                    from_composer: false,
                });
            }
            SessionsKey::SearchSessions => {
                let done = self.transcript.open_hits(String::new());
                self.on_transcript(done, Some(&key), out);
            }
        }
        EventState::Consumed
    }

    /// What a key (`key`) or a paste (`None`) in the transcript pane asks.
    pub(super) fn on_transcript(
        &mut self,
        done: TranscriptKey,
        key: Option<&KeyEvent>,
        out: &mut Vec<Command>,
    ) -> EventState {
        match done {
            TranscriptKey::Consumed => {}
            TranscriptKey::NotConsumed => return EventState::NotConsumed,
            TranscriptKey::Global => {
                if let Some(key) = key {
                    self.global_key(key, out);
                }
            }
            TranscriptKey::Common => {
                if let Some(key) = key {
                    self.pane_common_key(key, out);
                }
            }
            TranscriptKey::Help => self.dialogs.help(),
            TranscriptKey::SearchClosed => self.focus = Focus::Composer,
            TranscriptKey::Command(command) => out.push(command),
            TranscriptKey::OpenHit { session_id } => {
                if self.open_id() != Some(session_id.as_str()) {
                    self.notice = None;
                }
                self.open_session(session_id, out);
                self.focus = Focus::Transcript;
                self.apply_pending_jump();
            }
            TranscriptKey::CopyCode => self.copy_code(out),
            TranscriptKey::CopyReply => self.copy_reply(out),
            TranscriptKey::Fork(idx) => self.fork_at(idx, false, out),
            TranscriptKey::Edit(idx) => self.fork_at(idx, true, out),
            TranscriptKey::NothingSelected => {
                let select = self.keys.select_message.first_label();
                let up = self.keys.move_up.first_label();
                self.notify(
                    Level::Info,
                    format!("select a message first ({select}, or {up} here)"),
                );
            }
        }
        EventState::Consumed
    }

    /// Once a hit chosen in the hits list has its session loaded, the pane shows it: with
    /// the search bar on its words, typing goes to the composer once the bar closes, as after
    /// any search (plain keys in the transcript would act).
    pub(super) fn apply_pending_jump(&mut self) {
        match self.transcript.apply_jump(self.transcript_area()) {
            Jump::Found => self.focus = Focus::Composer,
            Jump::Gone => self.notify(Level::Warn, "that message is no longer in the session"),
            Jump::Waiting | Jump::Selected => {}
        }
    }

    /// `select_message`: the transcript takes the keys with its last message selected.
    pub(super) fn enter_selection(&mut self) {
        if self.transcript.select_last(self.transcript_area()) {
            self.focus = Focus::Transcript;
        } else {
            self.notify(Level::Info, "no message to select yet");
        }
    }

    /// `search`: the search bar over the open transcript.
    pub(super) fn open_search(&mut self) {
        if !self.transcript.open_search(self.transcript_area()) {
            self.notify(Level::Info, "no transcript to search yet");
        }
    }

    /// After every event: the search bar follows the transcript, and closes when another
    /// session is opened or the chat is not shown.
    pub(super) fn refresh_search(&mut self) {
        let width = self.transcript_area().0;
        let chat = self.view == View::Chat;
        self.transcript.refresh_search(width, chat);
    }

    /// A paste: into the dialog (which takes none), the full-screen view, the search bar or
    /// hits list, else the composer.
    pub(super) fn on_paste(&mut self, text: &str, out: &mut Vec<Command>) {
        if self.dialogs.is_open() {
            self.dialogs.paste(text, self.size);
        } else if let Some(view) = self.active_view_mut() {
            view.paste(text);
        } else if self.transcript.has_bar() {
            let done = self.transcript.paste(text, self.transcript_area());
            self.on_transcript(done, None, out);
        } else {
            let before = self.text_before_first_edit();
            self.focus = Focus::Composer;
            let open = self.transcript.session();
            self.composer.paste(text, &|| sent_messages(open));
            self.warm_on_first_edit(before, out);
        }
    }

    /// What a key in the overlay asks.
    pub(super) fn on_dialog(&mut self, done: DialogKey, out: &mut Vec<Command>) {
        match done {
            DialogKey::Consumed => {}
            DialogKey::Quit => self.quit(out),
            DialogKey::Delete {
                session_id,
                title,
                from_composer,
            } => {
                if from_composer {
                    // The `/delete` command is done with.
                    self.composer.clear();
                }
                if self.is_unsent(&session_id) {
                    // Never sent: only this client knows it, so there is nothing to ask
                    // the server.
                    self.notify(
                        Level::Info,
                        format!("deleted “{title}” (it had no messages)"),
                    );
                    self.remove_session(&session_id, out);
                    return;
                }
                self.sessions_pane.mark_deleting(session_id.clone());
                self.notify(Level::Info, format!("deleting “{title}”…"));
                out.push(Command::Delete { session_id });
            }
            DialogKey::NewSession { draft } => self.new_session(draft, out),
        }
    }

    /// A key while a code block may be being chosen: what the choice does with it. Returns
    /// whether the key was used there.
    fn code_choice_key(&mut self, key: &KeyEvent, out: &mut Vec<Command>) -> bool {
        let focused = self.focus == Focus::Transcript;
        let open_id = self.transcript.open_id();
        match self
            .dialogs
            .code_choice_key(&self.keys, key, open_id, focused)
        {
            CodeKey::NotConsumed => return false,
            CodeKey::Consumed => {}
            CodeKey::Copy { entry, n } => self.copy_block_of(entry, n, out),
            CodeKey::NoSuchBlock(typed) => {
                self.notify(Level::Warn, format!("there is no code block {typed}"))
            }
            CodeKey::Cancelled => self.notice = None,
        }
        true
    }

    // ---- mouse -----------------------------------------------------------------------------

    pub(super) fn on_mouse(&mut self, m: MouseEvent, out: &mut Vec<Command>) {
        // The wheel scrolls a full-screen view's tables.
        if !self.dialogs.is_open()
            && let Some(view) = self.active_view_mut()
        {
            let delta = match m.kind {
                MouseEventKind::ScrollUp => -1,
                MouseEventKind::ScrollDown => 1,
                _ => 0,
            };
            view.scroll(delta);
        }
        if self.dialogs.is_open() || self.view != View::Chat {
            return;
        }
        let layout = self.layout();
        let pos = Position::new(m.column, m.row);
        match m.kind {
            MouseEventKind::ScrollUp => self.transcript.scroll_by(-3, self.transcript_area()),
            MouseEventKind::ScrollDown => self.transcript.scroll_by(3, self.transcript_area()),
            MouseEventKind::Down(MouseButton::Left) => {
                if let Some(list) = layout.session_list.filter(|r| r.contains(pos)) {
                    self.focus = Focus::Sessions;
                    let row = (pos.y - list.y) as usize / layout::SESSION_ROW_HEIGHT;
                    if self.sessions_pane.click(row, list.height) {
                        self.open_selected(out);
                    }
                } else if layout.transcript_inner.contains(pos) {
                    self.focus = Focus::Transcript;
                    let row = pos.y - layout.transcript_inner.y;
                    self.transcript.click(row, self.transcript_area());
                } else if layout.composer.contains(pos) {
                    self.focus = Focus::Composer;
                }
            }
            _ => {}
        }
    }
}
