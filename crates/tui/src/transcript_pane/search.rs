//! The pane's searches: the search bar over the open transcript (`search`, Ctrl-f) and the
//! hits list of a search across sessions (`/search TEXT`, `search_sessions` in the sessions
//! pane). Both take every key while open, so nothing typed in them reaches the composer.

use crossterm::event::KeyEvent;

use super::{Jump, TranscriptKey, TranscriptPane, Viewport};
use crate::command::Command;
use crate::keys::{KeyBindings, typed_char};
use crate::line_input::LineKey;
use crate::render::transcript::Transcript;
use crate::search::{HITS_LIMIT, Match, SessionSearch, TranscriptSearch};
use convo_client::local_store::SearchHit;

/// A hit chosen in the hits list whose session is still loading: once it is, its message
/// is found and shown.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingJump {
    pub session_id: String,
    /// The message's place in the session's stored transcript.
    pub position: usize,
    /// The text searched for, then the matched words of the snippet: the first found in
    /// the message's rendered text is searched in the transcript.
    pub queries: Vec<String>,
}

/// How many places from a hit's position its words are looked for when they are not in the
/// message at that place.
const NEARBY_ITEMS: usize = 3;

impl TranscriptPane {
    /// `search`: opens the search bar over the open transcript, ready to type (or back to
    /// typing, if open). False when there is no transcript to search yet.
    pub fn open_search(&mut self, area: Viewport) -> bool {
        let (w, h) = self.text_area(area);
        let Some(open) = self.open.as_ref().filter(|o| o.loaded) else {
            return false;
        };
        if let Some(search) = self.search.as_mut() {
            search.editing = true;
            return true;
        }
        let origin = open.effective_top(w, h);
        self.search = Some(TranscriptSearch::new(open.id.clone(), origin));
        true
    }

    /// A key while the search bar or the hits list is open (all of them are theirs); `None`
    /// when neither is.
    pub fn bar_key(
        &mut self,
        keys: &KeyBindings,
        key: &KeyEvent,
        area: Viewport,
    ) -> Option<TranscriptKey> {
        if self.hits.is_some() {
            return Some(self.hits_key(keys, key));
        }
        self.search.as_ref()?;
        Some(self.search_key(keys, key, area))
    }

    fn search_key(&mut self, k: &KeyBindings, key: &KeyEvent, area: Viewport) -> TranscriptKey {
        let Some(search) = self.search.as_mut() else {
            return TranscriptKey::NotConsumed;
        };
        // As in the composer, Home and End scroll the transcript while there is no text to
        // move in.
        let scrolls = search.query.is_empty()
            && typed_char(key).is_none()
            && (k.scroll_top.matches(key) || k.scroll_bottom.matches(key));
        let edit = if search.editing && !scrolls {
            search.query.key(key)
        } else {
            LineKey::Ignored
        };
        if edit != LineKey::Ignored {
            if edit == LineKey::Edited {
                self.search_edited(area);
            }
            return TranscriptKey::Consumed;
        }
        let Some(search) = self.search.as_mut() else {
            return TranscriptKey::NotConsumed;
        };
        if k.back.matches(key) {
            // The transcript stays where the search took it; End follows the tail again.
            self.search = None;
            return TranscriptKey::SearchClosed;
        } else if k.search_next.matches(key) {
            search.editing = false;
            search.next();
            self.reveal_match(area);
        } else if k.search_prev.matches(key) {
            search.editing = false;
            search.prev();
            self.reveal_match(area);
        } else if k.search.matches(key) {
            // Typing again searches on from the current match.
            search.editing = true;
            if let Some(line) = self.current_match_line(area.0)
                && let Some(search) = self.search.as_mut()
            {
                search.origin = line;
            }
        } else if k.stop_or_quit.matches(key)
            || k.scroll_up.matches(key)
            || k.scroll_down.matches(key)
        {
            return TranscriptKey::Global;
        } else if k.scroll_top.matches(key) || k.scroll_bottom.matches(key) {
            return TranscriptKey::Common;
        } else if k.help.matches(key) {
            return TranscriptKey::Help;
        }
        TranscriptKey::Consumed
    }

    /// Pasted text while the search bar or the hits list is open: into the query being typed
    /// (on one line), nowhere otherwise. `None` when neither is open.
    pub fn bar_paste(&mut self, text: &str, area: Viewport) -> Option<TranscriptKey> {
        if let Some(hits) = self.hits.as_mut() {
            return Some(if hits.query.paste(text) {
                self.ask_hits()
            } else {
                TranscriptKey::Consumed
            });
        }
        let search = self.search.as_mut()?;
        if search.editing && search.query.paste(text) {
            self.search_edited(area);
        }
        Some(TranscriptKey::Consumed)
    }

    /// The query changed: the matches are found again, the first from where the search
    /// started becomes current, and the transcript goes to it.
    fn search_edited(&mut self, area: Viewport) {
        self.refresh_search(area.0, true);
        let width = area.0;
        let (Some(search), Some(open)) = (self.search.as_mut(), self.open.as_ref()) else {
            return;
        };
        let origin = search.origin;
        search.select_from(origin, |m| match_line(&open.transcript, width, m));
        self.reveal_match(area);
    }

    /// The transcript line of the current match.
    fn current_match_line(&self, width: u16) -> Option<usize> {
        let m = self.search.as_ref()?.current_match()?;
        Some(match_line(&self.open.as_ref()?.transcript, width, &m))
    }

    /// Scrolls the transcript to the current match when it is not in view (it then sits a
    /// third of the way down the pane).
    fn reveal_match(&mut self, area: Viewport) {
        let (w, h) = self.text_area(area);
        let (Some(search), Some(open)) = (self.search.as_ref(), self.open.as_mut()) else {
            return;
        };
        let Some(m) = search.current_match() else {
            return;
        };
        let line = match_line(&open.transcript, w, &m);
        let top = open.effective_top(w, h);
        let h = usize::from(h);
        if line >= top && line < top + h {
            return;
        }
        let max_top = open.transcript.height(w).saturating_sub(h);
        let new_top = line.saturating_sub(h / 3).min(max_top);
        open.top = new_top;
        open.follow = false;
    }

    /// After every event: the search bar follows the transcript (a reply streaming in, a
    /// resize) at `width`, and closes when another session is opened or the chat is not
    /// shown (`chat_shown`).
    pub fn refresh_search(&mut self, width: u16, chat_shown: bool) {
        let Some(search) = self.search.as_mut() else {
            return;
        };
        match self.open.as_ref() {
            Some(open) if chat_shown && open.id == search.session_id => {
                search.refresh(&open.transcript, width);
            }
            _ => self.search = None,
        }
    }

    // ---- across sessions -------------------------------------------------------------------

    /// `/search TEXT` or `search_sessions`: the hits list, searching for `text` at once.
    pub fn open_hits(&mut self, text: String) -> TranscriptKey {
        self.hits = Some(SessionSearch::new(text));
        self.ask_hits()
    }

    /// The query changed: asks for its hits (when it has words to search for).
    fn ask_hits(&mut self) -> TranscriptKey {
        let Some(hits) = self.hits.as_mut() else {
            return TranscriptKey::Consumed;
        };
        match hits.ask() {
            Some(seq) => TranscriptKey::Command(Command::SearchSessions {
                seq,
                text: hits.query.text().to_string(),
                limit: HITS_LIMIT,
            }),
            None => TranscriptKey::Consumed,
        }
    }

    fn hits_key(&mut self, k: &KeyBindings, key: &KeyEvent) -> TranscriptKey {
        let Some(hits) = self.hits.as_mut() else {
            return TranscriptKey::NotConsumed;
        };
        match hits.query.key(key) {
            LineKey::Edited => return self.ask_hits(),
            LineKey::Moved => return TranscriptKey::Consumed,
            LineKey::Ignored => {}
        }
        if k.move_up.matches(key) {
            hits.up();
        } else if k.move_down.matches(key) {
            hits.down();
        } else if k.scroll_up.matches(key) {
            for _ in 0..10 {
                hits.up();
            }
        } else if k.scroll_down.matches(key) {
            for _ in 0..10 {
                hits.down();
            }
        } else if k.open_session.matches(key) {
            return self.choose_hit();
        } else if k.focus_next.matches(key) {
            // The sessions written on another device, read so that they are searched too.
            let open = self.open.as_ref().map(|o| o.id.as_str());
            if let Some(session_ids) = hits.read_unsearched(open) {
                return TranscriptKey::Command(Command::ReadUnsearched { session_ids });
            }
        } else if k.back.matches(key) || k.stop_or_quit.matches(key) {
            self.hits = None;
        }
        TranscriptKey::Consumed
    }

    /// The store's answer to a search across sessions.
    pub fn hits_answered(
        &mut self,
        seq: u64,
        result: Result<(Vec<SearchHit>, Vec<String>), String>,
    ) {
        if let Some(hits) = self.hits.as_mut() {
            hits.answered(seq, result);
        }
    }

    /// A history read for the search answered (its messages already queued for the store):
    /// after the last one, the search asked again, now over them too.
    pub fn hits_read_one(&mut self) -> Option<Command> {
        let last = self.hits.as_mut().is_some_and(|h| h.read_one());
        match last.then(|| self.ask_hits()) {
            Some(TranscriptKey::Command(command)) => Some(command),
            _ => None,
        }
    }

    /// Enter on a hit: the lists close, and the app opens its session; the words searched
    /// are shown in its message once it has loaded ([`Self::apply_jump`]).
    fn choose_hit(&mut self) -> TranscriptKey {
        let Some(hits) = self.hits.as_ref() else {
            return TranscriptKey::Consumed;
        };
        let Some(hit) = hits.selected().cloned() else {
            return TranscriptKey::Consumed;
        };
        let mut queries = vec![hits.query.text().trim().to_string()];
        queries.extend(
            hit.snippet
                .iter()
                .filter(|p| p.matched)
                .map(|p| p.text.trim().to_string()),
        );
        queries.retain(|q| !q.is_empty());
        self.hits = None;
        self.search = None;
        self.pending_jump = Some(PendingJump {
            session_id: hit.session_id.clone(),
            position: hit.position,
            queries,
        });
        TranscriptKey::OpenHit {
            session_id: hit.session_id,
        }
    }

    /// Once the chosen hit's session is loaded: opens the search bar on its message (the
    /// first of the queries found in it is current), or selects the message when its
    /// rendered text holds none of them.
    pub fn apply_jump(&mut self, area: Viewport) -> Jump {
        let ready = match (&self.pending_jump, &self.open) {
            (Some(jump), Some(open)) if open.id == jump.session_id => open.loaded,
            (Some(_), _) => {
                // Another session was opened meanwhile.
                self.pending_jump = None;
                false
            }
            _ => false,
        };
        if !ready {
            return Jump::Waiting;
        }
        let (Some(jump), Some(open)) = (self.pending_jump.take(), self.open.as_mut()) else {
            return Jump::Waiting;
        };
        if jump.position >= open.items.len() {
            return Jump::Gone;
        }
        let width = area.0;
        // The message at the hit's place first; then a message a few places off, since a
        // send that failed in this run is stored but no longer shown, which shifts what
        // comes after it.
        for slack in [0, NEARBY_ITEMS] {
            for query in &jump.queries {
                let mut search = TranscriptSearch::new(open.id.clone(), 0);
                search.query.set_text(query);
                search.editing = false;
                search.refresh(&open.transcript, width);
                let distance = |m: &Match| {
                    open.items
                        .iter()
                        .position(|i| i.entry == m.entry)
                        .map_or(usize::MAX, |idx| idx.abs_diff(jump.position))
                };
                let best = (search.matches.iter().enumerate())
                    .map(|(i, m)| (distance(m), i))
                    .filter(|(d, _)| *d <= slack)
                    .min();
                if let Some((_, i)) = best {
                    search.current = Some(i);
                    self.search = Some(search);
                    self.reveal_match(area);
                    return Jump::Found;
                }
            }
        }
        open.selected = Some(jump.position);
        self.reveal_selected(area);
        Jump::Selected
    }
}

/// The transcript line a match is on at `width`.
pub fn match_line(transcript: &Transcript, width: u16, m: &Match) -> usize {
    transcript.line_range_of(width, m.entry).start + 1 + m.line
}
