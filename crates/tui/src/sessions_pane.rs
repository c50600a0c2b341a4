//! The sessions pane's state: the list of sessions (most recent first), its cursor, the
//! filter typed after `/`, and the sessions with a DELETE in flight. `App` holds one, routes
//! the pane's keys to [`SessionsPane::key`] and acts on what it answers; `view/sessions.rs`
//! draws it from the read-only methods.

use crossterm::event::{KeyCode, KeyEvent};

use crate::component::ChatComponent;
use crate::event::SessionSummary;
use crate::keys::KeyBindings;
use crate::line_input::{LineInput, LineKey};

/// The sessions pane.
#[derive(Debug, Default)]
pub struct SessionsPane {
    sessions: Vec<SessionSummary>,
    /// Index into [`SessionsPane::visible`].
    cursor: usize,
    filter: LineInput,
    /// Whether keys type into the filter.
    filtering: bool,
    /// Session ids with a DELETE in flight.
    deleting: Vec<String>,
}

/// A row of the sessions list: a session, how deep under its source it is drawn (0: at the
/// top level), and whether it is a fork whose source is no longer listed (deleted).
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub session: &'a SessionSummary,
    pub depth: usize,
    pub orphan: bool,
}

/// The order of the sessions pane: the sessions that are not forks of a listed session in
/// their order (most recent first), each followed by its forks, and theirs, in the same order
/// (depth first). Returns `(index into sessions, depth, orphan)`; a fork whose source is not
/// listed is at the top level, marked orphan. Every session appears once, whatever the
/// origins say (a cycle is cut where it closes).
pub fn tree_order(sessions: &[SessionSummary]) -> Vec<(usize, usize, bool)> {
    use std::collections::HashMap;
    let index: HashMap<&str, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let parent = |i: usize| {
        sessions[i]
            .forked_from
            .as_deref()
            .and_then(|p| index.get(p).copied())
            .filter(|&p| p != i)
    };
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); sessions.len()];
    let mut roots = Vec::new();
    for i in 0..sessions.len() {
        match parent(i) {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let mut out = Vec::with_capacity(sessions.len());
    let mut placed = vec![false; sessions.len()];
    fn walk(
        i: usize,
        depth: usize,
        orphan: bool,
        children: &[Vec<usize>],
        placed: &mut [bool],
        out: &mut Vec<(usize, usize, bool)>,
    ) {
        if placed[i] {
            return;
        }
        placed[i] = true;
        out.push((i, depth, orphan));
        for &c in &children[i] {
            walk(c, depth + 1, false, children, placed, out);
        }
    }
    for &r in &roots {
        let orphan = sessions[r].forked_from.is_some();
        walk(r, 0, orphan, &children, &mut placed, &mut out);
    }
    // Sessions in a cycle of origins (no root leads to them): at the top level, in order.
    for i in 0..sessions.len() {
        walk(i, 0, false, &children, &mut placed, &mut out);
    }
    out
}

/// What a key in the sessions pane asks of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionsKey {
    /// The pane used it (cursor, filter).
    Consumed,
    /// The pane has no use for it.
    NotConsumed,
    /// Open the session under the cursor.
    OpenSelected,
    /// Enter in the filter: open the session under the cursor, then show the whole list again
    /// with the cursor on the open session.
    OpenSelectedFromFilter,
    /// Enter in a filter that matches nothing (the filter as typed).
    NoMatch(String),
    /// Ask whether to delete this session.
    ConfirmDelete { session_id: String, title: String },
    /// Open the search across sessions.
    SearchSessions,
}

impl SessionsPane {
    // ---- read ----------------------------------------------------------------------------

    /// Every session, most recent first.
    pub fn all(&self) -> &[SessionSummary] {
        &self.sessions
    }

    /// Sessions matching the filter, in the order of the fork tree ([`tree_order`]).
    pub fn visible(&self) -> Vec<&SessionSummary> {
        self.visible_rows().into_iter().map(|r| r.session).collect()
    }

    /// [`SessionsPane::visible`] with where each row sits in the fork tree.
    pub fn visible_rows(&self) -> Vec<Row<'_>> {
        let needle = self.filter.text().to_lowercase();
        tree_order(&self.sessions)
            .into_iter()
            .map(|(i, depth, orphan)| Row {
                session: &self.sessions[i],
                depth,
                orphan,
            })
            .filter(|r| {
                needle.is_empty()
                    || r.session.title.to_lowercase().contains(&needle)
                    || r.session.id.to_lowercase().contains(&needle)
            })
            .collect()
    }

    /// Whether another session has the same title as `s` (the pane then shows the end of
    /// its id to tell them apart).
    pub fn title_shared(&self, s: &SessionSummary) -> bool {
        self.sessions
            .iter()
            .any(|o| o.id != s.id && o.title == s.title)
    }

    /// The cursor: an index into [`SessionsPane::visible`].
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// The session under the cursor, if any.
    pub fn selected(&self) -> Option<&SessionSummary> {
        self.visible().get(self.cursor).copied()
    }

    /// A session by id.
    pub fn get(&self, id: &str) -> Option<&SessionSummary> {
        self.sessions.iter().find(|s| s.id == id)
    }

    /// The filter typed after `/` (kept after Enter until Esc).
    pub fn filter(&self) -> &str {
        self.filter.text()
    }

    /// The filter as it is edited (its cursor), for the view.
    pub fn filter_input(&self) -> &LineInput {
        &self.filter
    }

    /// Whether keys type into the filter.
    pub fn is_filtering(&self) -> bool {
        self.filtering
    }

    /// Whether a DELETE of this session is in flight.
    pub fn is_deleting(&self, id: &str) -> bool {
        self.deleting.iter().any(|d| d == id)
    }

    // ---- change --------------------------------------------------------------------------

    /// The sessions the store loaded.
    pub fn load(&mut self, sessions: Vec<SessionSummary>) {
        self.sessions = sessions;
        self.sort();
    }

    /// The target's sessions as the store has them after merging the service's list, plus
    /// those of `keep` the list lacks (the open session, one not sent yet) and those being
    /// deleted (left to their delete's answer, which names them by their title); the cursor
    /// stays on the session it was on.
    pub fn merge_listed(&mut self, sessions: Vec<SessionSummary>, keep: &[String]) {
        let selected = self.selected().map(|s| s.id.clone());
        let deleting = &self.deleting;
        let kept: Vec<SessionSummary> = self
            .sessions
            .drain(..)
            .filter(|s| {
                (keep.contains(&s.id) || deleting.contains(&s.id))
                    && !sessions.iter().any(|n| n.id == s.id)
            })
            .collect();
        self.sessions = sessions;
        self.sessions.extend(kept);
        self.sort();
        self.deleting
            .retain(|d| self.sessions.iter().any(|s| &s.id == d));
        match selected {
            Some(id) => self.point_at_or_top(&id),
            None => self.clamp_cursor(),
        }
    }

    /// A session by id, to change its title, tokens or activity (then [`Self::resort`]).
    pub fn get_mut(&mut self, id: &str) -> Option<&mut SessionSummary> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }

    /// Sorts again after a session's activity changed, the cursor on `id` (else the top).
    pub fn resort(&mut self, id: &str) {
        self.sort();
        self.point_at_or_top(id);
    }

    /// A session just created: at the top, the filter gone, the cursor on it. Listed once:
    /// the account stream may have brought it in before the answer that created it here.
    pub fn insert_new(&mut self, summary: SessionSummary) {
        self.sessions.retain(|s| s.id != summary.id);
        self.sessions.insert(0, summary);
        self.clear_filter();
        self.cursor = 0;
    }

    /// Removes a session (and its DELETE in flight); returns where it was in the whole list.
    pub fn remove(&mut self, id: &str) -> Option<usize> {
        self.deleting.retain(|d| d != id);
        let pos = self.sessions.iter().position(|s| s.id == id)?;
        self.sessions.remove(pos);
        Some(pos)
    }

    /// Keeps the cursor on the list after it shrank.
    pub fn clamp_cursor(&mut self) {
        let n = self.visible().len();
        if self.cursor >= n {
            self.cursor = n.saturating_sub(1);
        }
    }

    /// A DELETE of this session was sent.
    pub fn mark_deleting(&mut self, id: String) {
        self.deleting.push(id);
    }

    /// The DELETE of this session failed.
    pub fn delete_failed(&mut self, id: &str) {
        self.deleting.retain(|d| d != id);
    }

    /// Puts the cursor on `id` if the filter shows it.
    pub fn point_at(&mut self, id: &str) {
        if let Some(pos) = self.visible().iter().position(|s| s.id == id) {
            self.cursor = pos;
        }
    }

    /// Puts the cursor on `id`, or on the top if the filter hides it.
    pub fn point_at_or_top(&mut self, id: &str) {
        self.cursor = self.visible().iter().position(|s| s.id == id).unwrap_or(0);
    }

    /// Keys no longer type into the filter (the filter itself stays).
    pub fn stop_filtering(&mut self) {
        self.filtering = false;
    }

    /// Clears the filter and stops typing into it.
    pub fn clear_filter(&mut self) {
        self.filter.clear();
        self.filtering = false;
    }

    /// A click on the list's `row`-th visible row in a list `height` rows high: the cursor goes
    /// there. False if there is no session on that row.
    pub fn click(&mut self, row: usize, height: u16) -> bool {
        let idx = crate::layout::first_visible_session(self.cursor, height) + row;
        if idx < self.visible().len() {
            self.cursor = idx;
            true
        } else {
            false
        }
    }

    /// A key while the pane has focus.
    fn pane_key(&mut self, k: &KeyBindings, key: &KeyEvent) -> SessionsKey {
        if self.filtering {
            match key.code {
                KeyCode::Esc => {
                    self.clear_filter();
                    self.cursor = 0;
                    return SessionsKey::Consumed;
                }
                KeyCode::Enter => {
                    if self.visible().is_empty() {
                        // Nothing to open: stay in the filter; the app says why it is empty.
                        return SessionsKey::NoMatch(self.filter.text().to_string());
                    }
                    self.filtering = false;
                    return SessionsKey::OpenSelectedFromFilter;
                }
                _ => match self.filter.key(key) {
                    LineKey::Edited => {
                        self.cursor = 0;
                        return SessionsKey::Consumed;
                    }
                    LineKey::Moved => return SessionsKey::Consumed,
                    LineKey::Ignored => {}
                },
            }
        }
        if key.code == KeyCode::Esc && !self.filter.is_empty() {
            // A filter kept after Enter: Esc clears it before it goes back to the composer.
            self.filter.clear();
            self.cursor = 0;
            return SessionsKey::Consumed;
        }
        let n = self.visible().len();
        if k.move_up.matches(key) {
            self.cursor = self.cursor.saturating_sub(1);
        } else if k.move_down.matches(key) {
            if self.cursor + 1 < n {
                self.cursor += 1;
            }
        } else if k.open_session.matches(key) {
            return SessionsKey::OpenSelected;
        } else if k.delete_session.matches(key) {
            if let Some(s) = self.selected() {
                return SessionsKey::ConfirmDelete {
                    session_id: s.id.clone(),
                    title: s.title.clone(),
                };
            }
        } else if k.filter_sessions.matches(key) {
            self.filtering = true;
        } else if k.search_sessions.matches(key) {
            return SessionsKey::SearchSessions;
        } else {
            return SessionsKey::NotConsumed;
        }
        SessionsKey::Consumed
    }

    fn sort(&mut self) {
        self.sessions
            .sort_by_key(|s| std::cmp::Reverse(s.last_activity));
    }
}

impl ChatComponent for SessionsPane {
    type Context<'a> = ();
    type Outcome = SessionsKey;

    fn key(&mut self, keys: &KeyBindings, key: &KeyEvent, _: ()) -> SessionsKey {
        self.pane_key(keys, key)
    }

    /// The pane takes no text: a paste goes to the composer.
    fn paste(&mut self, _text: &str, _: ()) -> SessionsKey {
        SessionsKey::NotConsumed
    }

    fn hints(&self, k: &KeyBindings) -> Vec<(String, &'static str)> {
        if self.filtering {
            return vec![
                (k.open_session.first_label(), "open"),
                ("Esc".to_string(), "clear filter"),
                (
                    format!("{}/{}", k.move_up.first_label(), k.move_down.first_label()),
                    "select",
                ),
            ];
        }
        vec![
            (k.help.first_label(), "help"),
            (k.open_session.first_label(), "open"),
            (k.delete_session.first_label(), "delete"),
            (k.filter_sessions.first_label(), "filter"),
            (k.quit.first_label(), "quit"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};
    use crossterm::event::KeyModifiers;

    fn s(id: &str, mins_ago: i64, from: Option<&str>) -> SessionSummary {
        SessionSummary {
            id: id.into(),
            title: format!("title {id}"),
            title_set: false,
            last_activity: Utc.with_ymd_and_hms(2026, 11, 26, 12, 0, 0).unwrap()
                - Duration::minutes(mins_ago),
            tokens: 0,
            forked_from: from.map(str::to_string),
        }
    }

    fn order(pane: &SessionsPane) -> Vec<(String, usize, bool)> {
        pane.visible_rows()
            .iter()
            .map(|r| (r.session.id.clone(), r.depth, r.orphan))
            .collect()
    }

    #[test]
    fn a_session_the_service_listed_first_is_listed_once_when_created_here() {
        let mut pane = SessionsPane::default();
        pane.load(vec![s("a", 30, None)]);
        // The account stream's `session.created` of a fork came before the fork's answer.
        pane.merge_listed(vec![s("a", 30, None), s("a1", 0, Some("a"))], &[]);
        pane.insert_new(s("a1", 0, Some("a")));
        assert_eq!(
            order(&pane),
            [("a".to_string(), 0, false), ("a1".to_string(), 1, false)]
        );
    }

    #[test]
    fn a_fork_is_listed_under_its_source_and_an_orphan_at_the_top() {
        let mut pane = SessionsPane::default();
        pane.load(vec![
            s("a", 30, None),
            s("b", 1, None),
            s("a1", 5, Some("a")),
            s("a2", 2, Some("a")),
            s("a1x", 20, Some("a1")),
            s("gone1", 10, Some("deleted")),
            // A cycle of origins (a damaged store) still lists both, once.
            s("c1", 40, Some("c2")),
            s("c2", 41, Some("c1")),
        ]);
        let o = |id: &str, depth, orphan| (id.to_string(), depth, orphan);
        assert_eq!(
            order(&pane),
            vec![
                o("b", 0, false),
                o("gone1", 0, true),
                o("a", 0, false),
                o("a2", 1, false),
                o("a1", 1, false),
                o("a1x", 2, false),
                o("c1", 0, false),
                o("c2", 1, false),
            ]
        );
        // The cursor walks the tree's order; a filter keeps it, without the rows it hides.
        let keys = KeyBindings::default();
        let down = KeyEvent::new(KeyCode::Down, KeyModifiers::NONE);
        for _ in 0..3 {
            pane.key(&keys, &down, ());
        }
        assert_eq!(pane.selected().unwrap().id, "a2");
        pane.key(
            &keys,
            &KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE),
            (),
        );
        pane.key(
            &keys,
            &KeyEvent::new(KeyCode::Char('1'), KeyModifiers::NONE),
            (),
        );
        let ids: Vec<String> = order(&pane).into_iter().map(|r| r.0).collect();
        assert_eq!(ids, ["gone1", "a1", "a1x", "c1"]);
        assert!(!pane.title_shared(&pane.all()[0]));
    }
}
