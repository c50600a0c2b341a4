//! One line of text typed outside the composer: the transcript's search, the search across
//! sessions, the sessions filter, the metrics view's custom range, the wallet id and the
//! accounts filter. Every one edits with the same keys, the composer's where they exist
//! (its textarea does the editing here too):
//!
//! - a character inserts at the cursor; Backspace and Delete remove around it;
//! - Left and Right, Home and End (also Ctrl-a and Ctrl-e), Ctrl-Left and Ctrl-Right (also
//!   Alt-b and Alt-f) move by character, to either end, by word;
//! - Ctrl-u removes to the start (as in the composer and in shells), Ctrl-k to the end,
//!   Ctrl-w and Alt-Backspace the word before, Alt-d the word after; Ctrl-z undoes.
//!
//! Every other key is the view's (Enter, Esc, Tab, Up and Down, the commands' Ctrl keys).
//! The cursor is drawn as `▏` where the next character goes, and a text wider than its room
//! scrolls so that the cursor stays in view.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui_textarea::{CursorMove, TextArea};
use unicode_width::UnicodeWidthChar;

use crate::keys::typed_char;
use convo_client::sanitize::sanitize;

/// What a key did to the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKey {
    /// The text changed.
    Edited,
    /// Only the cursor moved (or the key edits, but had nothing to edit).
    Moved,
    /// Not an editing key: the view's.
    Ignored,
}

/// The cursor's glyph.
pub const CURSOR: &str = "▏";

#[derive(Debug, Clone)]
pub struct LineInput {
    area: TextArea<'static>,
    max_chars: usize,
}

impl Default for LineInput {
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl PartialEq for LineInput {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text() && self.cursor() == other.cursor()
    }
}

impl LineInput {
    /// An empty line that takes at most `max_chars` characters.
    pub fn new(max_chars: usize) -> Self {
        Self {
            area: TextArea::default(),
            max_chars,
        }
    }

    /// A line holding `text` (cut to `max_chars`), the cursor at its end.
    pub fn with_text(text: &str, max_chars: usize) -> Self {
        let mut line = Self::new(max_chars);
        line.set_text(text);
        line
    }

    pub fn text(&self) -> &str {
        self.area.lines().first().map(String::as_str).unwrap_or("")
    }

    pub fn is_empty(&self) -> bool {
        self.text().is_empty()
    }

    /// The cursor's place, in characters from the start.
    pub fn cursor(&self) -> usize {
        self.area.cursor().1
    }

    /// Replaces the text (one line of it, without control characters), the cursor at its
    /// end; what was typed before can no longer be undone.
    pub fn set_text(&mut self, text: &str) {
        let text: String = one_line(text).take(self.max_chars).collect();
        self.area = TextArea::new(vec![text]);
        self.area.move_cursor(CursorMove::End);
    }

    pub fn clear(&mut self) {
        self.set_text("");
    }

    /// Inserts pasted text at the cursor: its lines joined by spaces, control characters
    /// dropped, as much as the line has room for. Whether anything was inserted.
    pub fn paste(&mut self, text: &str) -> bool {
        let room = self.max_chars.saturating_sub(self.text().chars().count());
        let text: String = one_line(text).take(room).collect();
        !text.is_empty() && self.area.insert_str(text)
    }

    /// An editing key (the module's list) changes the line or moves its cursor; any other is
    /// [`LineKey::Ignored`].
    pub fn key(&mut self, key: &KeyEvent) -> LineKey {
        if let Some(c) = typed_char(key) {
            if one_line(c.encode_utf8(&mut [0; 4])).next() != Some(c) {
                return LineKey::Moved;
            }
            if self.text().chars().count() >= self.max_chars {
                return LineKey::Moved;
            }
            self.area.insert_char(c);
            return LineKey::Edited;
        }
        let ctrl = key.modifiers == KeyModifiers::CONTROL;
        let alt = key.modifiers == KeyModifiers::ALT;
        let plain = key.modifiers.difference(KeyModifiers::SHIFT).is_empty();
        let a = &mut self.area;
        let edited = match key.code {
            KeyCode::Backspace if plain => a.delete_char(),
            KeyCode::Backspace if alt => a.delete_word(),
            KeyCode::Delete if plain => a.delete_next_char(),
            KeyCode::Delete if alt => a.delete_next_word(),
            KeyCode::Char('u') if ctrl => a.delete_line_by_head(),
            KeyCode::Char('k') if ctrl => a.delete_line_by_end(),
            KeyCode::Char('w') if ctrl => a.delete_word(),
            KeyCode::Char('d') if alt => a.delete_next_word(),
            KeyCode::Char('z') if ctrl => a.undo(),
            _ => {
                let to = match key.code {
                    KeyCode::Left if plain => CursorMove::Back,
                    KeyCode::Right if plain => CursorMove::Forward,
                    KeyCode::Home if plain => CursorMove::Head,
                    KeyCode::End if plain => CursorMove::End,
                    KeyCode::Char('a') if ctrl => CursorMove::Head,
                    KeyCode::Char('e') if ctrl => CursorMove::End,
                    KeyCode::Left if ctrl => CursorMove::WordBack,
                    KeyCode::Right if ctrl => CursorMove::WordForward,
                    KeyCode::Char('b') if alt => CursorMove::WordBack,
                    KeyCode::Char('f') if alt => CursorMove::WordForward,
                    _ => return LineKey::Ignored,
                };
                a.move_cursor(to);
                return LineKey::Moved;
            }
        };
        if edited {
            LineKey::Edited
        } else {
            LineKey::Moved
        }
    }

    /// The line drawn in `room` columns, the cursor (when `cursor`) where the next character
    /// goes: the text in `style`, the cursor in `cursor_style`. A text that does not fit
    /// scrolls so that the cursor stays in view (the end of the text when there is no
    /// cursor). The spans' width is at most `room`.
    pub fn spans(
        &self,
        room: usize,
        cursor: bool,
        style: Style,
        cursor_style: Style,
    ) -> Vec<Span<'static>> {
        let chars: Vec<char> = self.text().chars().collect();
        let at = if cursor { self.cursor() } else { chars.len() };
        let width = |c: char| c.width().unwrap_or(0);
        let room = room.saturating_sub(usize::from(cursor));
        // From the cursor, back as far as the room goes, then forward with what is left: each
        // character looked at once (drawn every frame, and a pasted query can be long).
        let mut used = 0;
        let mut start = at;
        while start > 0 && used + width(chars[start - 1]) <= room {
            used += width(chars[start - 1]);
            start -= 1;
        }
        let mut end = at;
        while end < chars.len() && used + width(chars[end]) <= room {
            used += width(chars[end]);
            end += 1;
        }
        let before: String = chars[start..at].iter().collect();
        let after: String = chars[at..end].iter().collect();
        let mut spans = vec![Span::styled(before, style)];
        if cursor {
            spans.push(Span::styled(CURSOR, cursor_style));
        }
        if !after.is_empty() {
            spans.push(Span::styled(after, style));
        }
        spans
    }
}

/// `text` as one line: line breaks and tabs as spaces, then sanitised as text from elsewhere
/// is (escape sequences, other control characters and bidi controls dropped).
fn one_line(text: &str) -> impl Iterator<Item = char> {
    let spaced = text.replace("\r\n", " ").replace(['\n', '\r', '\t'], " ");
    sanitize(&spaced).chars().collect::<Vec<_>>().into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(line: &mut LineInput, code: KeyCode, modifiers: KeyModifiers) -> LineKey {
        line.key(&KeyEvent::new(code, modifiers))
    }

    fn typed(line: &mut LineInput, text: &str) {
        for c in text.chars() {
            assert_eq!(
                press(line, KeyCode::Char(c), KeyModifiers::NONE),
                LineKey::Edited
            );
        }
    }

    fn shown(line: &LineInput, room: usize, cursor: bool) -> String {
        line.spans(room, cursor, Style::new(), Style::new())
            .iter()
            .map(|s| s.content.as_ref())
            .collect()
    }

    const NONE: KeyModifiers = KeyModifiers::NONE;
    const CTRL: KeyModifiers = KeyModifiers::CONTROL;
    const ALT: KeyModifiers = KeyModifiers::ALT;

    #[test]
    fn a_character_goes_in_where_the_cursor_is() {
        let mut line = LineInput::default();
        typed(&mut line, "2026-11-27..2026-11-28");
        assert_eq!(press(&mut line, KeyCode::Home, NONE), LineKey::Moved);
        for _ in 0..4 {
            assert_eq!(press(&mut line, KeyCode::Delete, NONE), LineKey::Edited);
        }
        typed(&mut line, "2025");
        assert_eq!(line.text(), "2025-11-27..2026-11-28");
        assert_eq!(line.cursor(), 4);
        press(&mut line, KeyCode::End, NONE);
        press(&mut line, KeyCode::Left, NONE);
        press(&mut line, KeyCode::Backspace, NONE);
        typed(&mut line, "9");
        assert_eq!(line.text(), "2025-11-27..2026-11-98");
        press(&mut line, KeyCode::Char('a'), CTRL);
        press(&mut line, KeyCode::Right, NONE);
        assert_eq!(line.cursor(), 1);
        press(&mut line, KeyCode::Char('e'), CTRL);
        assert_eq!(line.cursor(), 22);
    }

    #[test]
    fn words_and_ends_go_at_once_and_come_back_with_undo() {
        let mut line = LineInput::default();
        typed(&mut line, "lifetimes in rust");
        assert_eq!(press(&mut line, KeyCode::Char('w'), CTRL), LineKey::Edited);
        assert_eq!(line.text(), "lifetimes in ");
        press(&mut line, KeyCode::Backspace, ALT);
        assert_eq!(line.text(), "lifetimes ");
        assert_eq!(press(&mut line, KeyCode::Char('z'), CTRL), LineKey::Edited);
        assert_eq!(line.text(), "lifetimes in ");
        press(&mut line, KeyCode::Left, CTRL);
        press(&mut line, KeyCode::Char('b'), ALT);
        assert_eq!(line.cursor(), 0);
        press(&mut line, KeyCode::Char('f'), ALT);
        assert_eq!(line.cursor(), 10);
        assert_eq!(press(&mut line, KeyCode::Char('k'), CTRL), LineKey::Edited);
        assert_eq!(line.text(), "lifetimes ");
        press(&mut line, KeyCode::Left, NONE);
        press(&mut line, KeyCode::Left, NONE);
        assert_eq!(press(&mut line, KeyCode::Char('u'), CTRL), LineKey::Edited);
        assert_eq!(line.text(), "s ");
        assert_eq!(line.cursor(), 0);
        // Nothing before the cursor: the key is taken, nothing changes.
        assert_eq!(press(&mut line, KeyCode::Backspace, NONE), LineKey::Moved);
        press(&mut line, KeyCode::End, NONE);
        press(&mut line, KeyCode::Home, NONE);
        assert_eq!(press(&mut line, KeyCode::Char('d'), ALT), LineKey::Edited);
        assert_eq!(line.text(), " ");
    }

    #[test]
    fn the_views_keys_are_left_to_them() {
        let mut line = LineInput::with_text("abc", 10);
        for (code, modifiers) in [
            (KeyCode::Enter, NONE),
            (KeyCode::Esc, NONE),
            (KeyCode::Tab, NONE),
            (KeyCode::BackTab, KeyModifiers::SHIFT),
            (KeyCode::Up, NONE),
            (KeyCode::Down, NONE),
            (KeyCode::PageUp, NONE),
            (KeyCode::Char('c'), CTRL),
            (KeyCode::Char('f'), CTRL),
            (KeyCode::Char('n'), CTRL),
            (KeyCode::F(2), NONE),
        ] {
            assert_eq!(
                press(&mut line, code, modifiers),
                LineKey::Ignored,
                "{code:?}"
            );
        }
        assert_eq!(line.text(), "abc");
        assert_eq!(line.cursor(), 3);
    }

    #[test]
    fn the_line_holds_no_more_than_its_limit() {
        let mut line = LineInput::with_text("abcdef", 4);
        assert_eq!(line.text(), "abcd");
        assert_eq!(press(&mut line, KeyCode::Char('x'), NONE), LineKey::Moved);
        press(&mut line, KeyCode::Home, NONE);
        press(&mut line, KeyCode::Delete, NONE);
        assert!(line.paste("xyz"));
        assert_eq!(line.text(), "xbcd");
        assert!(!line.paste("more"));
    }

    #[test]
    fn a_paste_goes_in_at_the_cursor_on_one_line() {
        let mut line = LineInput::with_text("ab", 100);
        press(&mut line, KeyCode::Left, NONE);
        assert!(line.paste("one\r\ntwo\tthree\u{1b}[31m\u{202e}"));
        assert_eq!(line.text(), "aone two threeb");
        assert_eq!(line.cursor(), 14);
        let mut line = LineInput::with_text("x\ny\u{7}", 100);
        assert_eq!(line.text(), "x y");
        assert!(!line.paste("\u{7}"));
    }

    #[test]
    fn the_cursor_stays_in_view_of_a_long_line() {
        let mut line = LineInput::with_text("0123456789", 100);
        assert_eq!(shown(&line, 20, true), "0123456789▏");
        // Room for five characters and the cursor: the end, as typed.
        assert_eq!(shown(&line, 6, true), "56789▏");
        assert_eq!(shown(&line, 5, false), "56789");
        press(&mut line, KeyCode::Home, NONE);
        assert_eq!(shown(&line, 6, true), "▏01234");
        for _ in 0..3 {
            press(&mut line, KeyCode::Right, NONE);
        }
        assert_eq!(shown(&line, 20, true), "012▏3456789");
        assert_eq!(shown(&line, 6, true), "012▏34");
        assert_eq!(shown(&line, 0, true), "▏");
        // Wide characters count as two columns.
        let line = LineInput::with_text("日本語", 100);
        assert_eq!(shown(&line, 5, true), "本語▏");
        assert_eq!(shown(&line, 4, true), "語▏");
    }
}
