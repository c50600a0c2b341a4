//! Search in the open transcript (Ctrl-f): the query, every match in the rendered text at
//! the pane's width, and which one is current.
//!
//! Matching is on the text as drawn (markdown syntax gone: `**bold**` is `bold`), line by
//! line, case-insensitively (each character lowercased on its own, so a match keeps its
//! columns). A match lies on one screen line, as in `less`. The text of each message's
//! lines is kept, lowercased, per (message revision, width): typing a query only scans
//! it, and a streaming reply has only its own lines built again.

use std::collections::HashMap;

use crate::line_input::LineInput;
use crate::render::transcript::{EntryId, Transcript};
use crate::render::wrap::str_width;

/// One match: a run of columns on one body line of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub entry: EntryId,
    /// The body line of the message (0 = the first line under its header).
    pub line: usize,
    /// Columns `[start, end)` of that line.
    pub start: u16,
    pub end: u16,
}

/// The search bar's state.
#[derive(Debug, Default)]
pub struct TranscriptSearch {
    /// The session whose transcript is searched (the bar closes when another opens).
    pub session_id: String,
    pub query: LineInput,
    /// Keys type into the query (true), or move between matches (false, after Enter).
    pub editing: bool,
    /// Every match, in the order of the transcript.
    pub matches: Vec<Match>,
    /// Index into `matches`.
    pub current: Option<usize>,
    /// The transcript line the search started from: typing finds the first match from
    /// there on.
    pub origin: usize,
    /// What `matches` were computed for: the folded query and the width.
    computed: Option<(String, u16)>,
    cache: HashMap<EntryId, EntryText>,
}

/// A message's lines at one width, lowercased, one after the other (each ends with `\n`).
#[derive(Debug)]
struct EntryText {
    revision: u64,
    width: u16,
    text: String,
    /// Where each line starts in `text`.
    starts: Vec<usize>,
}

impl EntryText {
    fn new(revision: u64, width: u16, lines: &[String]) -> Self {
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        let mut starts = Vec::with_capacity(lines.len());
        for line in lines {
            starts.push(text.len());
            text.push_str(&fold(line));
            text.push('\n');
        }
        EntryText {
            revision,
            width,
            text,
            starts,
        }
    }
}

/// `text` with each character lowercased on its own (a character whose lowercase is
/// several characters is kept), so that the result has the same characters, and columns,
/// as `text`.
pub fn fold(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    text.chars()
        .map(|c| {
            let mut lower = c.to_lowercase();
            match (lower.next(), lower.next()) {
                (Some(l), None) => l,
                _ => c,
            }
        })
        .collect()
}

impl TranscriptSearch {
    /// A search bar opened on `session_id` with the transcript's top line at `origin`,
    /// ready to type.
    pub fn new(session_id: String, origin: usize) -> Self {
        TranscriptSearch {
            session_id,
            editing: true,
            origin,
            ..Default::default()
        }
    }

    /// The current match.
    pub fn current_match(&self) -> Option<Match> {
        self.current.and_then(|i| self.matches.get(i).copied())
    }

    /// `match I/N`, `no match`, `1 match` or `N matches` (none current yet; the one plural
    /// rule, [`convo_client::format::counted`]), or nothing for an empty query.
    pub fn status(&self) -> Option<String> {
        if self.query.is_empty() {
            return None;
        }
        let n = self.matches.len();
        Some(match self.current {
            _ if n == 0 => "no match".to_string(),
            Some(i) => format!("match {}/{n}", i + 1),
            None => convo_client::format::counted(n as u64, "match"),
        })
    }

    /// Brings the matches up to date with the transcript at `width` (rebuilding only the
    /// lines of messages that changed), keeping the current match where it was. Returns
    /// true when the matches changed.
    pub fn refresh(&mut self, transcript: &Transcript, width: u16) -> bool {
        let needle = fold(self.query.text());
        let mut changed = self
            .computed
            .as_ref()
            .is_none_or(|(q, w)| *q != needle || *w != width);
        let mut live = Vec::with_capacity(transcript.len());
        for (id, _) in transcript.entries() {
            let revision = transcript.revision(id).unwrap_or(0);
            live.push(id);
            let fresh = self
                .cache
                .get(&id)
                .is_some_and(|t| t.revision == revision && t.width == width);
            if !fresh && !needle.is_empty() {
                let lines = transcript.body_text_lines(id, width);
                self.cache
                    .insert(id, EntryText::new(revision, width, &lines));
                changed = true;
            }
        }
        if self.cache.len() > live.len() {
            let live: std::collections::HashSet<EntryId> = live.iter().copied().collect();
            self.cache.retain(|id, _| live.contains(id));
            changed = true;
        }
        if !changed {
            return false;
        }
        let previous = self.current_match();
        self.matches.clear();
        if !needle.is_empty() {
            for id in &live {
                if let Some(text) = self.cache.get(id) {
                    find_in(text, &needle, *id, &mut self.matches);
                }
            }
        }
        self.computed = Some((needle, width));
        self.current = match previous {
            // The same match if it is still there, else the next one after it.
            Some(p) => self
                .matches
                .iter()
                .position(|m| order(m) >= order(&p))
                .or((!self.matches.is_empty()).then_some(0)),
            None => None,
        };
        true
    }

    /// Makes the first match at or after transcript line `line` current (wrapping to the
    /// first); `line_of` gives a match's transcript line.
    pub fn select_from(&mut self, line: usize, line_of: impl Fn(&Match) -> usize) {
        self.current = self
            .matches
            .iter()
            .position(|m| line_of(m) >= line)
            .or((!self.matches.is_empty()).then_some(0));
    }

    /// The next match (wrapping after the last); the first when none is current.
    pub fn next(&mut self) {
        let n = self.matches.len();
        if n == 0 {
            self.current = None;
            return;
        }
        self.current = Some(self.current.map_or(0, |i| (i + 1) % n));
    }

    /// The previous match (wrapping before the first); the last when none is current.
    pub fn prev(&mut self) {
        let n = self.matches.len();
        if n == 0 {
            self.current = None;
            return;
        }
        self.current = Some(self.current.map_or(n - 1, |i| (i + n - 1) % n));
    }

    /// The matches on body line `line` of `entry`, with whether each is the current one.
    pub fn on_line(&self, entry: EntryId, line: usize) -> impl Iterator<Item = (Match, bool)> + '_ {
        let start = self
            .matches
            .partition_point(|m| (m.entry, m.line) < (entry, line));
        let current = self.current;
        self.matches[start..]
            .iter()
            .enumerate()
            .take_while(move |(_, m)| m.entry == entry && m.line == line)
            .map(move |(i, m)| (*m, current == Some(start + i)))
    }
}

fn order(m: &Match) -> (EntryId, usize, u16) {
    (m.entry, m.line, m.start)
}

/// Every (non-overlapping) occurrence of `needle` on one line of `entry`'s text: the text
/// is scanned whole, and an occurrence across a line end is not a match.
fn find_in(entry_text: &EntryText, needle: &str, entry: EntryId, out: &mut Vec<Match>) {
    let text = entry_text.text.as_str();
    let mut from = 0;
    while let Some(at) = text[from..].find(needle) {
        let start = from + at;
        let end = start + needle.len();
        from = end;
        if text[start..end].contains('\n') {
            from = start + text[start..].find('\n').map_or(needle.len(), |n| n + 1);
            continue;
        }
        let line = entry_text.starts.partition_point(|&s| s <= start) - 1;
        let line_start = entry_text.starts[line];
        let start_col = str_width(&text[line_start..start]);
        let end_col = start_col + str_width(&text[start..end]);
        out.push(Match {
            entry,
            line,
            start: start_col.min(u16::MAX as usize) as u16,
            end: end_col.min(u16::MAX as usize) as u16,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::transcript::Entry;
    use convo_client::api::Role;

    fn transcript(messages: &[&str]) -> (Transcript, Vec<EntryId>) {
        let mut t = Transcript::new();
        let ids = messages
            .iter()
            .map(|m| t.push(Entry::new(Role::Assistant, *m, "assistant · 12:00")))
            .collect();
        (t, ids)
    }

    fn searched(t: &Transcript, query: &str, width: u16) -> TranscriptSearch {
        let mut s = TranscriptSearch::new("session_a".into(), 0);
        s.query.set_text(query);
        s.refresh(t, width);
        s
    }

    #[test]
    fn matches_the_rendered_text_without_markdown_syntax() {
        let (t, ids) = transcript(&[
            "The **bold** word and `code` here",
            "# Heading\n\n- a *list* item",
        ]);
        let s = searched(&t, "bold word", 80);
        assert_eq!(
            s.matches,
            [Match {
                entry: ids[0],
                line: 0,
                start: 4,
                end: 13
            }]
        );
        // `**` and backticks are not on screen, so they are not found.
        assert!(searched(&t, "**bold", 80).matches.is_empty());
        assert!(searched(&t, "`code`", 80).matches.is_empty());
        let s = searched(&t, "list item", 80);
        assert_eq!(s.matches.len(), 1);
        assert_eq!(s.matches[0].entry, ids[1]);
        assert_eq!(s.matches[0].line, 2);
        assert_eq!((s.matches[0].start, s.matches[0].end), (4, 13));
    }

    #[test]
    fn matching_ignores_case_and_keeps_columns() {
        let (t, _) = transcript(&["Straße STRASSE Ärger ärger ÉTÉ été"]);
        assert_eq!(searched(&t, "ärger", 80).matches.len(), 2);
        assert_eq!(searched(&t, "ÄRGER", 80).matches.len(), 2);
        assert_eq!(searched(&t, "été", 80).matches.len(), 2);
        let s = searched(&t, "strasse", 80);
        assert_eq!(s.matches.len(), 1);
        assert_eq!((s.matches[0].start, s.matches[0].end), (7, 14));
        assert_eq!(fold("ÀB"), "àb");
        assert_eq!(fold("İ").chars().count(), 1);
    }

    #[test]
    fn next_and_previous_wrap_around() {
        let (t, _) = transcript(&["one fox", "two fox fox", "no match here"]);
        let mut s = searched(&t, "fox", 80);
        assert_eq!(s.matches.len(), 3);
        assert_eq!(s.status().as_deref(), Some("3 matches"));
        let one = searched(&t, "one", 80);
        assert_eq!(one.status().as_deref(), Some("1 match"));
        let many = searched(
            &transcript(&["fox ".repeat(1200).as_str()]).0,
            "fox",
            10_000,
        );
        assert_eq!(
            many.status().as_deref(),
            Some("1,200 matches"),
            "counted as every count is"
        );
        s.next();
        assert_eq!(s.status().as_deref(), Some("match 1/3"));
        s.next();
        s.next();
        assert_eq!(s.status().as_deref(), Some("match 3/3"));
        s.next();
        assert_eq!(s.status().as_deref(), Some("match 1/3"));
        s.prev();
        assert_eq!(s.status().as_deref(), Some("match 3/3"));
        let mut none = searched(&t, "wolf", 80);
        none.next();
        assert_eq!(none.current, None);
        assert_eq!(none.status().as_deref(), Some("no match"));
        assert_eq!(searched(&t, "", 80).status(), None);
    }

    #[test]
    fn a_match_lies_on_one_screen_line_and_follows_the_width() {
        let (t, ids) = transcript(&["alpha beta gamma delta"]);
        assert_eq!(searched(&t, "gamma delta", 80).matches.len(), 1);
        // At 10 columns "gamma delta" is wrapped over two lines.
        assert!(searched(&t, "gamma delta", 10).matches.is_empty());
        let s = searched(&t, "delta", 10);
        assert_eq!(s.matches[0].entry, ids[0]);
        assert_eq!(s.matches[0].line, 2);
    }

    #[test]
    fn the_current_match_stays_while_a_reply_streams_in() {
        let mut t = Transcript::new();
        t.push(Entry::new(Role::User, "say cat", "you"));
        let reply = t.push(Entry::streaming(Role::Assistant, "assistant"));
        t.append_delta(reply, "a cat ");
        let mut s = searched(&t, "cat", 80);
        s.next();
        s.next();
        assert_eq!(s.current_match().unwrap().entry, reply);
        assert_eq!(s.status().as_deref(), Some("match 2/2"));
        t.append_delta(reply, "and another cat");
        assert!(s.refresh(&t, 80));
        assert_eq!(s.status().as_deref(), Some("match 2/3"));
        assert!(!s.refresh(&t, 80), "nothing changed");
        let on: Vec<_> = s.on_line(reply, 0).collect();
        assert_eq!(on.len(), 2);
        assert!(on[0].1 && !on[1].1);
    }

    #[test]
    fn typing_selects_the_first_match_from_the_origin() {
        let (t, _) = transcript(&["fox", "fox", "fox"]);
        let mut s = searched(&t, "fox", 80);
        let line_of = |m: &Match| t.line_range_of(80, m.entry).start + 1 + m.line;
        s.select_from(4, line_of);
        assert_eq!(s.current, Some(1));
        s.select_from(100, line_of);
        assert_eq!(s.current, Some(0), "wraps to the first");
    }
}
