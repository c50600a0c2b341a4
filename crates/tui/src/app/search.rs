//! Search: the search bar over the open transcript (`search`, Ctrl-f) and the hits list of
//! a search across sessions (`/search TEXT`, `search_sessions` in the sessions pane).
//! Both take every key while open, so nothing typed in them reaches the composer.

use super::*;
use crate::search::{HITS_LIMIT, Match, SessionSearch, TranscriptSearch};

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

/// Whether a key is a character to type (not a Ctrl or Alt chord).
fn is_text(key: &KeyEvent) -> bool {
    matches!(key.code, KeyCode::Char(_))
        && !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
}

impl App {
    /// `search`: opens the search bar over the open transcript, ready to type.
    pub(super) fn open_search(&mut self) {
        let (w, h) = self.transcript_viewport();
        let Some(open) = self.open.as_ref().filter(|o| o.loaded) else {
            self.notify(Level::Info, "no transcript to search yet");
            return;
        };
        if let Some(search) = self.search.as_mut() {
            search.editing = true;
            return;
        }
        let origin = open.effective_top(w, h);
        self.search = Some(TranscriptSearch::new(open.id.clone(), origin));
    }

    /// A key while the search bar is open: all of them are its own.
    pub(super) fn search_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        let Some(search) = self.search.as_mut() else {
            return;
        };
        let k = &self.keys;
        if search.editing && is_text(&key) {
            if let KeyCode::Char(c) = key.code {
                search.query.push(c);
            }
            self.search_edited();
        } else if search.editing && key.code == KeyCode::Backspace {
            search.query.pop();
            self.search_edited();
        } else if search.editing
            && key.modifiers == KeyModifiers::CONTROL
            && key.code == KeyCode::Char('u')
        {
            search.query.clear();
            self.search_edited();
        } else if k.back.matches(&key) {
            // The transcript stays where the search took it; End follows the tail again.
            // Typing goes to the composer, wherever the bar was opened from: in the
            // transcript, plain keys act (a `/search …` typed next would vanish).
            self.search = None;
            self.focus = Focus::Composer;
        } else if k.search_next.matches(&key) {
            search.editing = false;
            search.next();
            self.reveal_match();
        } else if k.search_prev.matches(&key) {
            search.editing = false;
            search.prev();
            self.reveal_match();
        } else if k.search.matches(&key) {
            // Typing again searches on from the current match.
            search.editing = true;
            if let Some(line) = self.current_match_line()
                && let Some(search) = self.search.as_mut()
            {
                search.origin = line;
            }
        } else if k.stop_or_quit.matches(&key)
            || k.scroll_up.matches(&key)
            || k.scroll_down.matches(&key)
        {
            self.global_key(&key, out);
        } else if k.scroll_top.matches(&key) || k.scroll_bottom.matches(&key) {
            self.pane_common_key(&key, out);
        } else if k.help.matches(&key) {
            self.overlay = Some(Overlay::Help { scroll: 0 });
        }
    }

    /// Text pasted while the search bar is open goes into its query (on one line) while
    /// typing there, and nowhere otherwise.
    pub(super) fn search_paste(&mut self, text: &str) {
        if let Some(search) = self.search.as_mut().filter(|s| s.editing) {
            search.query.push_str(&one_line(text));
            self.search_edited();
        }
    }

    /// The query changed: the matches are found again, the first from where the search
    /// started becomes current, and the transcript goes to it.
    fn search_edited(&mut self) {
        self.refresh_search();
        let width = self.transcript_viewport().0;
        let (Some(search), Some(open)) = (self.search.as_mut(), self.open.as_ref()) else {
            return;
        };
        let origin = search.origin;
        search.select_from(origin, |m| match_line(&open.transcript, width, m));
        self.reveal_match();
    }

    /// The transcript line of the current match.
    fn current_match_line(&self) -> Option<usize> {
        let width = self.transcript_viewport().0;
        let m = self.search.as_ref()?.current_match()?;
        Some(match_line(&self.open.as_ref()?.transcript, width, &m))
    }

    /// Scrolls the transcript to the current match when it is not in view (it then sits a
    /// third of the way down the pane).
    pub(super) fn reveal_match(&mut self) {
        let (w, h) = self.transcript_viewport();
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
    /// resize), and closes when another session is opened.
    pub(super) fn refresh_search(&mut self) {
        let Some(search) = self.search.as_ref() else {
            return;
        };
        if self.open_id() != Some(search.session_id.as_str()) || self.view != View::Chat {
            self.search = None;
            return;
        }
        let width = self.transcript_viewport().0;
        if let (Some(search), Some(open)) = (self.search.as_mut(), self.open.as_ref()) {
            search.refresh(&open.transcript, width);
        }
    }

    // ---- across sessions -------------------------------------------------------------------

    /// `/search TEXT` or `search_sessions`: the hits list, searching for `text` at once.
    pub(super) fn open_session_search(&mut self, text: String, out: &mut Vec<Command>) {
        self.session_search = Some(SessionSearch::new(text));
        self.ask_hits(out);
    }

    fn ask_hits(&mut self, out: &mut Vec<Command>) {
        let Some(hits) = self.session_search.as_mut() else {
            return;
        };
        if let Some(seq) = hits.ask() {
            out.push(Command::SearchSessions {
                seq,
                text: hits.query.clone(),
                limit: HITS_LIMIT,
            });
        }
    }

    /// A key while the hits list is open: all of them are its own.
    pub(super) fn hits_key(&mut self, key: KeyEvent, out: &mut Vec<Command>) {
        let Some(hits) = self.session_search.as_mut() else {
            return;
        };
        let k = &self.keys;
        if is_text(&key) {
            if let KeyCode::Char(c) = key.code {
                hits.query.push(c);
            }
            self.ask_hits(out);
        } else if key.code == KeyCode::Backspace {
            hits.query.pop();
            self.ask_hits(out);
        } else if key.modifiers == KeyModifiers::CONTROL && key.code == KeyCode::Char('u') {
            hits.query.clear();
            self.ask_hits(out);
        } else if k.move_up.matches(&key) {
            hits.up();
        } else if k.move_down.matches(&key) {
            hits.down();
        } else if k.scroll_up.matches(&key) {
            for _ in 0..10 {
                hits.up();
            }
        } else if k.scroll_down.matches(&key) {
            for _ in 0..10 {
                hits.down();
            }
        } else if k.open_session.matches(&key) {
            self.open_hit(out);
        } else if k.back.matches(&key) || k.stop_or_quit.matches(&key) {
            self.session_search = None;
        }
    }

    /// Text pasted into the hits list's query, on one line.
    pub(super) fn hits_paste(&mut self, text: &str, out: &mut Vec<Command>) {
        if let Some(hits) = self.session_search.as_mut() {
            hits.query.push_str(&one_line(text));
            self.ask_hits(out);
        }
    }

    /// The store's answer to a search across sessions.
    pub(super) fn on_session_hits(
        &mut self,
        seq: u64,
        result: Result<Vec<convo_client::local_store::SearchHit>, String>,
    ) {
        if let Some(hits) = self.session_search.as_mut() {
            hits.answered(seq, result);
        }
    }

    /// Enter on a hit: its session opens and the transcript goes to the message, with the
    /// words searched highlighted by the search bar.
    fn open_hit(&mut self, out: &mut Vec<Command>) {
        let Some(hits) = self.session_search.as_ref() else {
            return;
        };
        let Some(hit) = hits.selected().cloned() else {
            return;
        };
        let mut queries = vec![hits.query.trim().to_string()];
        queries.extend(
            hit.snippet
                .iter()
                .filter(|p| p.matched)
                .map(|p| p.text.trim().to_string()),
        );
        queries.retain(|q| !q.is_empty());
        self.session_search = None;
        self.search = None;
        if self.open_id() != Some(hit.session_id.as_str()) {
            self.notice = None;
        }
        self.pending_jump = Some(PendingJump {
            session_id: hit.session_id.clone(),
            position: hit.position,
            queries,
        });
        self.open_session(hit.session_id, out);
        self.focus = Focus::Transcript;
        self.apply_pending_jump();
    }

    /// Once the chosen hit's session is loaded: opens the search bar on its message (the
    /// first of the queries found in it is current), or selects the message when its
    /// rendered text holds none of them.
    pub(super) fn apply_pending_jump(&mut self) {
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
            return;
        }
        let Some(jump) = self.pending_jump.take() else {
            return;
        };
        let width = self.transcript_viewport().0;
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if jump.position >= open.items.len() {
            self.notify(Level::Warn, "that message is no longer in the session");
            return;
        }
        // The message at the hit's place first; then a message a few places off, since a
        // send that failed in this run is stored but no longer shown, which shifts what
        // comes after it.
        for slack in [0, NEARBY_ITEMS] {
            for query in &jump.queries {
                let mut search = TranscriptSearch::new(open.id.clone(), 0);
                search.query = query.clone();
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
                    self.reveal_match();
                    // The bar takes the keys; once it closes, typing goes to the composer,
                    // as after any search (plain keys in the transcript would act).
                    self.focus = Focus::Composer;
                    return;
                }
            }
        }
        open.selected = Some(jump.position);
        self.reveal_selected();
    }
}

/// The transcript line a match is on at `width`.
pub fn match_line(transcript: &Transcript, width: u16, m: &Match) -> usize {
    transcript.line_range_of(width, m.entry).start + 1 + m.line
}

/// Pasted text on one line: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.replace("\r\n", " ").replace(['\n', '\r'], " ")
}
