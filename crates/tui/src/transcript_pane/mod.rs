//! The transcript pane: the open session (its messages beside their render entries, the
//! reply in flight, the scroll and the selected message), the search bar over it (Ctrl-f),
//! the hits list of a search across sessions (`/search`) and a chosen hit waiting for its
//! session to load. It owns them privately: `App` routes the pane's keys and pastes to it
//! ([`ChatComponent`]) and acts on what they answer
//! ([`TranscriptKey`]); the reply lifecycle in `app/` changes the open session through
//! [`TranscriptPane::session_mut`]; `view/transcript.rs` and `view/search.rs` draw it from
//! the read-only methods.

mod foreign_reply;
mod fork_point;
mod held_send;
mod open_session;
pub mod reply_marks;
mod search;

use crossterm::event::KeyEvent;

use crate::command::Command;
use crate::component::ChatComponent;
use crate::keys::KeyBindings;
use crate::search::{SessionSearch, TranscriptSearch};

pub use foreign_reply::{ForeignEnd, ForeignReply, ForeignStep};
pub use fork_point::{ForkPoint, edit_base};
pub use open_session::{
    OpenSession, PendingSend, StreamState, TranscriptItem, header_for, render_stored, reply_slot,
    stored_state,
};
pub use search::{PendingJump, match_line};

/// The transcript's text area, width and height, before the search bar takes its last row:
/// the pane's methods take it and work out what the bar leaves ([`TranscriptPane::text_area`]).
pub type Viewport = (u16, u16);

/// The transcript pane.
#[derive(Debug, Default)]
pub struct TranscriptPane {
    open: Option<OpenSession>,
    /// The search bar over the open transcript, while open.
    search: Option<TranscriptSearch>,
    /// The hits list of a search across sessions, while open.
    hits: Option<SessionSearch>,
    /// A hit chosen in the hits list, shown once its session has loaded.
    pending_jump: Option<PendingJump>,
    /// The server has no fork endpoint: the selection's hints leave fork and edit out.
    cannot_fork: bool,
}

/// What a key (or a paste) in the transcript pane asks of the app.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptKey {
    /// The pane used it.
    Consumed,
    /// The pane has no use for it.
    NotConsumed,
    /// A key the app has for every pane (stop, page up and down) while the search bar is open.
    Global,
    /// Home or End while the search bar is open: the panes' common keys.
    Common,
    /// Show the help.
    Help,
    /// The search bar closed: typing goes to the composer, wherever the bar was opened from
    /// (in the transcript, plain keys act: a `/search …` typed next would vanish).
    SearchClosed,
    /// Ask the store for the hits of a search across sessions.
    Command(Command),
    /// Open this hit's session and show the message (the jump waits in the pane).
    OpenHit { session_id: String },
    /// `copy_code` on the selected message or the last reply.
    CopyCode,
    /// `copy_reply` on the selected message or the last reply.
    CopyReply,
    /// `fork_message`: fork the session at the selected message (this index of `items`).
    Fork(usize),
    /// `edit_message`: edit the selected message (this index of `items`).
    Edit(usize),
    /// `fork_message` or `edit_message` with no message selected.
    NothingSelected,
}

/// What a chosen hit came to once its session loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jump {
    /// Nothing to show yet (or nothing chosen).
    Waiting,
    /// The search bar shows the hit's words in its message: typing goes to the composer.
    Found,
    /// Its words are not in the message any more: the message is selected.
    Selected,
    /// The message is no longer in the session.
    Gone,
}

impl TranscriptPane {
    // ---- read ----------------------------------------------------------------------------

    /// The open session, if any.
    pub fn session(&self) -> Option<&OpenSession> {
        self.open.as_ref()
    }

    pub fn open_id(&self) -> Option<&str> {
        self.open.as_ref().map(|o| o.id.as_str())
    }

    /// The search bar over the transcript, while open.
    pub fn search(&self) -> Option<&TranscriptSearch> {
        self.search.as_ref()
    }

    /// The hits list of a search across sessions, while open.
    pub fn hits(&self) -> Option<&SessionSearch> {
        self.hits.as_ref()
    }

    /// Whether the search bar or the hits list is open: they take every key.
    pub fn has_bar(&self) -> bool {
        self.search.is_some() || self.hits.is_some()
    }

    /// Whether a chosen hit waits for its session to load.
    pub fn is_jumping(&self) -> bool {
        self.pending_jump.is_some()
    }

    /// What the text area is with the search bar open (a row less, when it has a row to
    /// spare), as `layout::take_search_bar` makes it.
    pub fn text_area(&self, (w, h): Viewport) -> Viewport {
        if self.search.is_some() && h >= 2 {
            (w, h - 1)
        } else {
            (w, h)
        }
    }

    /// The message `copy_reply` and `copy_code` act on: the selected one, else the last reply.
    pub fn copy_target(&self) -> Option<usize> {
        let open = self.open.as_ref()?;
        open.selected.filter(|&i| i < open.items.len()).or_else(|| {
            open.items
                .iter()
                .rposition(|i| i.role == convo_client::api::Role::Assistant)
        })
    }

    /// The selected message's index in the open session's items, if any.
    pub fn selected(&self) -> Option<usize> {
        let open = self.open.as_ref()?;
        open.selected.filter(|&i| i < open.items.len())
    }

    // ---- change --------------------------------------------------------------------------

    /// `select_message`: selects the last message (the selection mode: Up/Down move, Esc
    /// leaves) and scrolls it into view; false when there is no message to select.
    pub fn select_last(&mut self, area: Viewport) -> bool {
        let Some(open) = self.open.as_mut().filter(|o| !o.items.is_empty()) else {
            return false;
        };
        open.selected = Some(open.items.len() - 1);
        self.reveal_selected(area);
        true
    }

    /// The server turned out to have no fork endpoint: fork and edit leave the hints.
    pub fn set_cannot_fork(&mut self) {
        self.cannot_fork = true;
    }

    /// Leaves the selection mode; false when no message was selected.
    pub fn clear_selection(&mut self) -> bool {
        self.open.as_mut().and_then(|o| o.selected.take()).is_some()
    }

    /// The open session, to change (the reply lifecycle, settling, sending).
    pub fn session_mut(&mut self) -> Option<&mut OpenSession> {
        self.open.as_mut()
    }

    /// The open session if it is `id`.
    pub fn session_mut_if(&mut self, id: &str) -> Option<&mut OpenSession> {
        self.open.as_mut().filter(|o| o.id == id)
    }

    /// Shows `session` (a session just opened), in place of the one shown.
    pub fn show(&mut self, session: OpenSession) {
        self.open = Some(session);
    }

    /// Closes the open session; returns it.
    pub fn close(&mut self) -> Option<OpenSession> {
        self.open.take()
    }

    /// Scrolls `delta` lines (negative: up); at the end it follows the tail again.
    pub fn scroll_by(&mut self, delta: isize, area: Viewport) {
        let (w, h) = self.text_area(area);
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

    /// Home: the first line; End: follows the tail.
    pub fn scroll_to(&mut self, end: bool) {
        if let Some(o) = self.open.as_mut() {
            o.follow = end;
            if !end {
                o.top = 0;
            }
        }
    }

    /// Stops following a reply streaming in (Esc), where it is; false if there is none.
    pub fn stop_following(&mut self, area: Viewport) -> bool {
        let (w, h) = self.text_area(area);
        let Some(open) = self.open.as_mut().filter(|o| o.follow && o.is_streaming()) else {
            return false;
        };
        open.top = open.effective_top(w, h);
        open.follow = false;
        true
    }

    /// Scrolls so that the selected message is in view.
    pub fn reveal_selected(&mut self, area: Viewport) {
        let (w, h) = self.text_area(area);
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

    /// A click on line `row` of the text area: the message there is selected.
    pub fn click(&mut self, row: u16, area: Viewport) {
        let (w, h) = self.text_area(area);
        if let Some(open) = self.open.as_mut() {
            let line = open.effective_top(w, h) + usize::from(row);
            if let Some(entry) = open.transcript.entry_at_line(w, line) {
                open.selected = open.items.iter().position(|i| i.entry == entry);
            }
        }
    }

    /// Scrolls so that a code block of `entry` is in view, if none is.
    pub fn reveal_code_blocks(
        &mut self,
        entry: crate::render::transcript::EntryId,
        area: Viewport,
    ) {
        let (w, h) = self.text_area(area);
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let top = open.effective_top(w, h);
        let shown = top..top + usize::from(h);
        let ranges = open.transcript.code_block_lines(w, entry);
        if ranges
            .iter()
            .any(|r| r.start < shown.end && shown.start < r.end)
        {
            return;
        }
        if let Some(first) = ranges.first() {
            open.follow = false;
            // With the line above it (the header or the text that leads to it).
            open.top = first.start.saturating_sub(1);
        }
    }

    /// A key while the transcript has focus (the search bar and hits list closed): moving the
    /// selection, copying.
    fn focused_key(&mut self, keys: &KeyBindings, key: &KeyEvent, area: Viewport) -> TranscriptKey {
        let Some(open) = self.open.as_mut() else {
            return TranscriptKey::NotConsumed;
        };
        let n = open.items.len();
        if keys.move_up.matches(key) {
            open.selected = Some(match open.selected {
                Some(i) => i.saturating_sub(1),
                None => n.saturating_sub(1),
            });
            self.reveal_selected(area);
        } else if keys.move_down.matches(key) {
            open.selected = match open.selected {
                Some(i) if i + 1 < n => Some(i + 1),
                Some(i) => Some(i),
                None => None,
            };
            self.reveal_selected(area);
        } else if keys.copy_code.matches(key) {
            return TranscriptKey::CopyCode;
        } else if keys.copy_reply.matches(key) {
            return TranscriptKey::CopyReply;
        } else if keys.fork_message.matches(key) || keys.edit_message.matches(key) {
            let Some(i) = open.selected.filter(|&i| i < n) else {
                return TranscriptKey::NothingSelected;
            };
            return if keys.fork_message.matches(key) {
                TranscriptKey::Fork(i)
            } else {
                TranscriptKey::Edit(i)
            };
        } else {
            return TranscriptKey::NotConsumed;
        }
        TranscriptKey::Consumed
    }
}

impl ChatComponent for TranscriptPane {
    /// The transcript's text area before the search bar takes its row.
    type Context<'a> = Viewport;
    type Outcome = TranscriptKey;

    /// The search bar or the hits list takes every key while open; else a key while the
    /// transcript has focus.
    fn key(&mut self, keys: &KeyBindings, key: &KeyEvent, area: Viewport) -> TranscriptKey {
        match self.bar_key(keys, key, area) {
            Some(done) => done,
            None => self.focused_key(keys, key, area),
        }
    }

    /// Into the query of the search bar or the hits list; the transcript takes none.
    fn paste(&mut self, text: &str, area: Viewport) -> TranscriptKey {
        self.bar_paste(text, area)
            .unwrap_or(TranscriptKey::NotConsumed)
    }

    fn hints(&self, k: &KeyBindings) -> Vec<(String, &'static str)> {
        if self.hits.is_some() {
            return vec![
                (k.open_session.first_label(), "open"),
                (k.back.first_label(), "close"),
                (
                    format!("{}/{}", k.move_up.first_label(), k.move_down.first_label()),
                    "select",
                ),
            ];
        }
        if let Some(search) = &self.search {
            let mut hints = vec![(
                search.status().unwrap_or_else(|| "type to search".into()),
                "",
            )];
            if search.editing {
                hints.push((k.search_next.typing_label(), "next"));
            } else {
                hints.push((k.search_next.label(), "next"));
                hints.push((k.search_prev.first_label(), "previous"));
            }
            hints.push((k.back.first_label(), "close"));
            return hints;
        }
        if self.selected().is_some() {
            let mut hints = Vec::new();
            if !self.cannot_fork {
                hints.push((k.fork_message.first_label(), "fork"));
                hints.push((k.edit_message.first_label(), "edit"));
            }
            hints.extend([
                (k.copy_reply.first_label(), "copy"),
                (
                    format!("{}/{}", k.move_up.first_label(), k.move_down.first_label()),
                    "move",
                ),
                (k.back.first_label(), "leave"),
            ]);
            return hints;
        }
        vec![
            (k.help.first_label(), "help"),
            (k.move_up.first_label(), "select"),
            (k.copy_reply.first_label(), "copy"),
            (k.scroll_up.first_label(), "scroll"),
            (k.quit.first_label(), "quit"),
            (k.copy_code.first_label(), "copy code"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::transcript::EntryState;
    use convo_client::api::Role;
    use convo_client::local_store::SearchHit;
    use crossterm::event::{KeyCode, KeyModifiers};

    const AREA: Viewport = (60, 10);

    #[test]
    fn a_header_counts_its_tokens_in_words() {
        use chrono::TimeZone;
        let at = chrono::Utc
            .with_ymd_and_hms(2026, 11, 27, 21, 34, 0)
            .unwrap();
        assert_eq!(header_for(Role::User, at, 1), "you · 21:34 · 1 token");
        assert_eq!(
            header_for(Role::Assistant, at, 1234),
            "assistant · 21:34 · 1,234 tokens"
        );
        assert_eq!(header_for(Role::System, at, 0), "system · 21:34");
    }

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn pane_with(text: &str) -> TranscriptPane {
        let mut open = OpenSession::new("session_a".into(), 8192);
        open.loaded = true;
        open.push(
            Role::Assistant,
            text.into(),
            EntryState::Complete,
            0,
            None,
            chrono::Utc::now(),
        );
        let mut pane = TranscriptPane::default();
        pane.show(open);
        pane
    }

    #[test]
    fn the_search_bar_takes_the_keys_and_hands_back_what_is_the_apps() {
        let keys = KeyBindings::default();
        assert!(
            !TranscriptPane::default().open_search(AREA),
            "nothing to search yet"
        );
        let mut pane = pane_with("a fox and another fox");
        assert!(pane.open_search(AREA));
        assert!(pane.has_bar());
        assert_eq!(pane.text_area(AREA), (60, 9), "the bar takes the last row");
        for c in "fox".chars() {
            let typed = pane.key(&keys, &press(KeyCode::Char(c)), AREA);
            assert_eq!(typed, TranscriptKey::Consumed);
        }
        assert_eq!(
            pane.search().unwrap().status().as_deref(),
            Some("match 1/2")
        );
        assert_eq!(pane.paste(" and\nanother", AREA), TranscriptKey::Consumed);
        assert_eq!(pane.search().unwrap().query.text(), "fox and another");
        assert_eq!(pane.hints(&keys)[0].0, "match 1/1");
        let page = pane.key(&keys, &press(KeyCode::PageDown), AREA);
        assert_eq!(page, TranscriptKey::Global);
        // While typing, Home and End move in the query, as in the composer.
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Home), AREA),
            TranscriptKey::Consumed
        );
        pane.key(&keys, &press(KeyCode::Delete), AREA);
        assert_eq!(pane.search().unwrap().query.text(), "ox and another");
        // After Enter (moving between matches) they scroll the transcript.
        pane.key(&keys, &press(KeyCode::Enter), AREA);
        assert_eq!(
            pane.key(&keys, &press(KeyCode::End), AREA),
            TranscriptKey::Common
        );
        assert_eq!(
            pane.key(&keys, &press(KeyCode::F(1)), AREA),
            TranscriptKey::Help
        );
        let esc = pane.key(&keys, &press(KeyCode::Esc), AREA);
        assert_eq!(esc, TranscriptKey::SearchClosed);
        assert!(!pane.has_bar());
        assert_eq!(pane.text_area(AREA), AREA);
        // Closed, the transcript's own keys: Up selects the last message.
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Up), AREA),
            TranscriptKey::Consumed
        );
        assert_eq!(pane.session().unwrap().selected, Some(0));
        assert_eq!(pane.paste("text", AREA), TranscriptKey::NotConsumed);
    }

    #[test]
    fn the_hits_list_asks_the_store_and_a_chosen_hit_waits_for_its_session() {
        let keys = KeyBindings::default();
        let mut pane = pane_with("hello");
        let asked = |seq: u64, text: &str| {
            TranscriptKey::Command(Command::SearchSessions {
                seq,
                text: text.into(),
                limit: crate::search::HITS_LIMIT,
            })
        };
        assert_eq!(pane.open_hits("fox".into()), asked(1, "fox"));
        let typed = pane.key(&keys, &press(KeyCode::Char('y')), AREA);
        assert_eq!(typed, asked(2, "foxy"));
        let hit = SearchHit {
            session_id: "session_b".into(),
            session_title: None,
            position: 4,
            message_id: None,
            role: Role::User,
            created_at: chrono::Utc::now(),
            snippet: Vec::new(),
        };
        pane.hits_answered(1, Ok((Vec::new(), Vec::new())));
        pane.hits_answered(2, Ok((vec![hit], Vec::new())));
        assert_eq!(
            pane.hits().unwrap().hits.len(),
            1,
            "the earlier answer was dropped"
        );
        let chosen = pane.key(&keys, &press(KeyCode::Enter), AREA);
        assert_eq!(
            chosen,
            TranscriptKey::OpenHit {
                session_id: "session_b".into()
            }
        );
        assert!(!pane.has_bar() && pane.is_jumping());
        // Another session shown than the hit's: the jump is dropped.
        assert_eq!(pane.apply_jump(AREA), Jump::Waiting);
        assert!(!pane.is_jumping());
    }

    #[test]
    fn the_message_selection_moves_forks_edits_and_leaves() {
        let keys = KeyBindings::default();
        let mut pane = TranscriptPane::default();
        assert!(!pane.select_last(AREA), "no session");
        let mut open = OpenSession::new("session_a".into(), 8192);
        open.loaded = true;
        pane.show(open);
        assert!(!pane.select_last(AREA), "no message");
        for (role, text) in [
            (Role::User, "q1"),
            (Role::Assistant, "a1"),
            (Role::User, "q2"),
        ] {
            pane.session_mut().unwrap().push(
                role,
                text.into(),
                EntryState::Complete,
                1,
                None,
                chrono::Utc::now(),
            );
        }
        let f = press(KeyCode::Char('f'));
        assert_eq!(pane.key(&keys, &f, AREA), TranscriptKey::NothingSelected);
        assert!(pane.select_last(AREA));
        assert_eq!(pane.selected(), Some(2));
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Char('k')), AREA),
            TranscriptKey::Consumed
        );
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Up), AREA),
            TranscriptKey::Consumed
        );
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Up), AREA),
            TranscriptKey::Consumed
        );
        assert_eq!(pane.selected(), Some(0), "stops at the first");
        assert_eq!(
            pane.key(&keys, &press(KeyCode::Char('j')), AREA),
            TranscriptKey::Consumed
        );
        assert_eq!(pane.key(&keys, &f, AREA), TranscriptKey::Fork(1));
        let e = press(KeyCode::Char('e'));
        assert_eq!(pane.key(&keys, &e, AREA), TranscriptKey::Edit(1));
        assert_eq!(pane.hints(&keys)[0], ("f".to_string(), "fork"));
        assert!(pane.clear_selection());
        assert!(!pane.clear_selection(), "left already");
        assert_eq!(pane.selected(), None);
        assert_eq!(pane.hints(&keys)[0].1, "help");
    }
}
