//! The composer's word wrap: which part of each line of the draft goes on which screen row,
//! and where the cursor is drawn.
//!
//! Written here because ratatui-textarea 0.9's word wrap (and it has no option to change
//! this) puts the space at a break at the start of the next row, so a wrapped line of the
//! draft started with a space. Here the spaces at a break stay at the end of the row they
//! follow, past its edge if need be, where they are not drawn: as the transcript wraps the
//! message once sent. A word wider than the row is split between graphemes; spaces typed at
//! the start of a line (an indent) are kept and drawn.

use unicode_segmentation::UnicodeSegmentation;

use crate::render::wrap::grapheme_width;

/// Columns a tab takes up to (as the text area draws it: to the next multiple of this).
const TAB: usize = 4;

/// One screen row: bytes `start..end` of line `line` of the draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub line: usize,
    pub start: usize,
    pub end: usize,
}

/// A grapheme's width at column `col` (a tab reaches the next tab stop).
pub fn width_at(g: &str, col: usize) -> usize {
    if g == "\t" {
        TAB - col % TAB
    } else {
        grapheme_width(g)
    }
}

fn is_space(g: &str) -> bool {
    g == " " || g == "\t"
}

/// The rows of `lines` at `width` columns: every byte of every line is on exactly one row,
/// rows in order, each line at least one row.
pub fn rows(lines: &[String], width: usize) -> Vec<Row> {
    let width = width.max(1);
    let mut out = Vec::with_capacity(lines.len());
    for (line, text) in lines.iter().enumerate() {
        let mut start = 0;
        // Columns used on the row, and whether a word is on it yet (before that, spaces
        // are an indent and take their room; after a word, they hang at its end).
        let mut col = 0;
        let mut has_word = false;
        let mut graphemes = text.grapheme_indices(true).peekable();
        while let Some((at, g)) = graphemes.next() {
            if is_space(g) {
                col += width_at(g, col);
                continue;
            }
            // A word: up to the next space.
            let mut end = at + g.len();
            let mut word_width = width_at(g, col);
            while let Some(&(next_at, next)) = graphemes.peek() {
                if is_space(next) {
                    break;
                }
                word_width += width_at(next, col + word_width);
                end = next_at + next.len();
                graphemes.next();
            }
            if col + word_width <= width {
                col += word_width;
                has_word = true;
                continue;
            }
            if has_word || col > 0 {
                // The word starts the next row; the spaces before it stay on this one.
                out.push(Row {
                    line,
                    start,
                    end: at,
                });
                start = at;
            }
            if word_width <= width {
                col = word_width;
                has_word = true;
                continue;
            }
            // Wider than a row: split between graphemes.
            let mut row_width = 0;
            for (offset, piece) in text[at..end].grapheme_indices(true) {
                let w = width_at(piece, row_width);
                if row_width > 0 && row_width + w > width {
                    out.push(Row {
                        line,
                        start,
                        end: at + offset,
                    });
                    start = at + offset;
                    row_width = 0;
                }
                row_width += w;
            }
            col = row_width;
            has_word = true;
        }
        out.push(Row {
            line,
            start,
            end: text.len(),
        });
    }
    out
}

/// The draft on screen: its rows (`None`: a blank row that only the cursor is on) and the
/// cursor's (row, column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    pub rows: Vec<Option<Row>>,
    pub cursor: (usize, usize),
}

/// The draft `lines` at `width` columns with its cursor at line `line`, char `char_col`.
/// At a break the cursor is at the start of the next row; on spaces hanging past a row's
/// edge, at the start of the next row too (where what is typed shows), and past the edge of
/// its line's last row, on a blank row of its own after it.
pub fn screen(lines: &[String], width: usize, line: usize, char_col: usize) -> Screen {
    let width = width.max(1);
    let rows = rows(lines, width);
    let text = lines.get(line).map_or("", String::as_str);
    let byte = text
        .char_indices()
        .nth(char_col)
        .map_or(text.len(), |(b, _)| b);
    let mut screen: Vec<Option<Row>> = rows.iter().copied().map(Some).collect();
    let Some(first) = rows.iter().position(|r| r.line == line) else {
        return Screen {
            rows: screen,
            cursor: (0, 0),
        };
    };
    let last = first + rows[first..].iter().take_while(|r| r.line == line).count() - 1;
    let idx = (first..=last)
        .find(|&i| byte < rows[i].end || (i == last && byte <= rows[i].end))
        .unwrap_or(last);
    let row = rows[idx];
    let mut col = 0;
    for g in text[row.start..byte].graphemes(true) {
        col += width_at(g, col);
    }
    let cursor = if col < width {
        (idx, col)
    } else {
        if idx == last {
            screen.insert(idx + 1, None);
        }
        (idx + 1, 0)
    };
    Screen {
        rows: screen,
        cursor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str, width: usize) -> Vec<String> {
        let lines: Vec<String> = text.split('\n').map(String::from).collect();
        rows(&lines, width)
            .iter()
            .map(|r| lines[r.line][r.start..r.end].to_string())
            .collect()
    }

    #[test]
    fn the_space_at_a_break_ends_the_row_instead_of_starting_the_next() {
        // "lorem ipsum" fills 11 columns exactly: the space after it stays on its row.
        assert_eq!(
            shown("lorem ipsum dolor sit", 11),
            ["lorem ipsum ", "dolor sit"]
        );
        assert_eq!(shown("aaa bbb ccc", 5), ["aaa ", "bbb ", "ccc"]);
        assert_eq!(shown("aaa    bbb", 5), ["aaa    ", "bbb"]);
        for row in shown("one two three four five six seven eight nine ten", 9) {
            assert!(!row.starts_with(' '), "{row:?}");
        }
    }

    #[test]
    fn an_indent_is_kept_and_a_long_word_is_split() {
        assert_eq!(shown("    indented line", 20), ["    indented line"]);
        assert_eq!(shown("    indented line", 12), ["    indented ", "line"]);
        assert_eq!(shown("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(shown("x abcdefghij", 4), ["x ", "abcd", "efgh", "ij"]);
        assert_eq!(shown("日本語のテキスト", 6), ["日本語", "のテキ", "スト"]);
        assert_eq!(shown("", 10), [""]);
        assert_eq!(shown("a\n\nb", 10), ["a", "", "b"]);
    }

    #[test]
    fn the_cursor_is_where_typing_shows() {
        let lines = vec!["lorem ipsum dolor".to_string()];
        let at = |col| screen(&lines, 11, 0, col).cursor;
        assert_eq!(at(0), (0, 0));
        assert_eq!(at(5), (0, 5));
        // After "ipsum", at the edge: typing there goes on the next row's start.
        assert_eq!(at(11), (1, 0));
        assert_eq!(at(12), (1, 0));
        assert_eq!(at(17), (1, 5));
        assert_eq!(screen(&lines, 11, 0, 17).rows.len(), 2);
        // A full last row: the cursor after it is on a blank row of its own.
        let full = vec!["abcd".to_string(), "x".to_string()];
        let s = screen(&full, 4, 0, 4);
        assert_eq!(s.cursor, (1, 0));
        assert_eq!(s.rows.len(), 3);
        assert_eq!(s.rows[1], None);
        assert_eq!(s.rows[2].map(|r| r.line), Some(1));
        let s = screen(&full, 4, 1, 1);
        assert_eq!((s.cursor, s.rows.len()), ((1, 1), 2));
    }
}
